/*
Copyright 2026.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	ceclient "github.com/cloudevents/sdk-go/v2/client"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/apiserver"
)

// The tests run the handler against a real API server (envtest, with the
// CRDs of config/crd), as the gateway will. It starts for the first test
// that needs it, so that the fuzz targets, which need none, run without.
var (
	apiOnce sync.Once
	api     *apiserver.Server
	apiErr  error
)

// kube is the API server's client, started on first use.
func kube(t testing.TB) client.Client {
	t.Helper()
	apiOnce.Do(func() { api, apiErr = apiserver.Start() })
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return api.Client
}

func TestMain(m *testing.M) {
	code := m.Run()
	if api != nil {
		_ = api.Stop()
	}
	os.Exit(code)
}

var nsSeq int

// server starts the handler with one route, "orders", into a new
// namespace.
func server(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	nsSeq++
	ns := fmt.Sprintf("ingress-%d", nsSeq)
	if err := kube(t).Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Client: kube(t), Routes: map[string]Route{
		"orders": {Namespace: ns, ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create"},
		"broken": {Namespace: ns, ToolRef: v1.ToolReference{Name: "pay"}, Operation: "not a valid name"},
	}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/ingress", h))
	t.Cleanup(srv.Close)
	return srv, ns
}

// sendEvent posts a CloudEvent with the SDK and returns the status.
func sendEvent(t *testing.T, url, id string, data map[string]any, structured bool) int {
	t.Helper()
	p, err := cehttp.New()
	if err != nil {
		t.Fatal(err)
	}
	mode := ceclient.WithForceBinary()
	if structured {
		mode = ceclient.WithForceStructured()
	}
	c, err := cloudevents.NewClient(p, mode)
	if err != nil {
		t.Fatal(err)
	}
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetSource("/shop/checkout")
	ev.SetType("com.example.order.placed")
	if err := ev.SetData(cloudevents.ApplicationJSON, data); err != nil {
		t.Fatal(err)
	}
	res := c.Send(cloudevents.ContextWithTarget(t.Context(), url), ev)
	var hr *cehttp.Result
	if !cloudevents.ResultAs(res, &hr) {
		t.Fatalf("no HTTP answer: %v", res)
	}
	return hr.StatusCode
}

// post sends a raw request and returns the status and the answer.
func post(t *testing.T, url string, header map[string]string, body string) (int, Answer) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var a Answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	return resp.StatusCode, a
}

func operation(t *testing.T, ns, name string) *v1.SideEffectOperation {
	t.Helper()
	op := &v1.SideEffectOperation{}
	if err := kube(t).Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, op); err != nil {
		t.Fatalf("operation %s: %v", name, err)
	}
	return op
}

func operations(t *testing.T, ns string) int {
	t.Helper()
	var list v1.SideEffectOperationList
	if err := kube(t).List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func TestCloudEventDeliveredTwiceIsOneOperation(t *testing.T) {
	srv, ns := server(t)
	url := srv.URL + "/ingress/orders"
	data := map[string]any{"amount": 42, "currency": "eur"}

	status := sendEvent(t, url, "order-1001", data, false)
	if status != http.StatusAccepted {
		t.Fatalf("first delivery: want 202, got %d", status)
	}
	name := Name("orders", "/shop/checkout", "order-1001")
	op := operation(t, ns, name)
	if diff := cmp.Diff(`{"amount":42,"currency":"eur"}`, string(op.Spec.Parameters.Raw)); diff != "" {
		t.Errorf("parameters: -want, +got:\n%s", diff)
	}
	if op.Annotations[AnnotationMessageID] != "order-1001" || op.Annotations[AnnotationSource] != "/shop/checkout" ||
		op.Labels[LabelRoute] != "orders" || op.Spec.Operation != "charge.create" || op.Spec.ToolRef.Name != "pay" {
		t.Errorf("operation: %+v", op.ObjectMeta)
	}

	// The same event again, in structured mode this time: the same
	// operation, reported as a duplicate.
	status = sendEvent(t, url, "order-1001", data, true)
	if status != http.StatusAccepted {
		t.Errorf("redelivery in progress: want 202, got %d", status)
	}
	if n := operations(t, ns); n != 1 {
		t.Errorf("want one operation, got %d", n)
	}

	// Once the operation has ended, a redelivery gets its outcome.
	op.Status = v1.SideEffectOperationStatus{State: v1.StateCommitted, ExternalObjectID: "ch_1"}
	if err := kube(t).Status().Update(t.Context(), op); err != nil {
		t.Fatal(err)
	}
	status, a := post(t, url, map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "order-1001",
		"Ce-Source": "/shop/checkout", "Ce-Type": "com.example.order.placed", "Content-Type": "application/json"},
		`{"currency":"eur","amount":42}`)
	want := Answer{Name: name, Namespace: ns, MessageID: "order-1001", State: v1.StateCommitted, Duplicate: true,
		ExternalObjectID: "ch_1"}
	if status != http.StatusOK {
		t.Errorf("redelivery after the outcome: want 200, got %d", status)
	}
	if diff := cmp.Diff(want, a); diff != "" {
		t.Errorf("answer: -want, +got:\n%s", diff)
	}

	// The same id from another source is another message.
	status, _ = post(t, url, map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "order-1001",
		"Ce-Source": "/shop/returns", "Ce-Type": "com.example.order.placed", "Content-Type": "application/json"},
		`{"amount":1}`)
	if status != http.StatusAccepted || operations(t, ns) != 2 {
		t.Errorf("another source: want 202 and a second operation, got %d and %d", status, operations(t, ns))
	}
}

func TestSameIDDifferentPayloadIsRefused(t *testing.T) {
	srv, ns := server(t)
	url := srv.URL + "/ingress/orders"
	status, first := post(t, url, map[string]string{HeaderIdempotencyKey: "wh-7", "Content-Type": "application/json"},
		`{"amount":5}`)
	if status != http.StatusAccepted || first.State != v1.StatePlanned || first.Duplicate {
		t.Fatalf("first webhook: want 202 Planned, got %d %+v", status, first)
	}
	status, a := post(t, url, map[string]string{HeaderIdempotencyKey: "wh-7"}, `{"amount":500}`)
	if status != http.StatusConflict || a.Error != v1.ReasonIdempotencyParameterMismatch || a.Name != first.Name {
		t.Errorf("same key, other payload: want 409 %s naming %s, got %d %+v", v1.ReasonIdempotencyParameterMismatch,
			first.Name, status, a)
	}
	if got := string(operation(t, ns, first.Name).Spec.Parameters.Raw); got != `{"amount":5}` {
		t.Errorf("the first message must stand, parameters are %s", got)
	}
	status, a = post(t, url, map[string]string{HeaderMessageID: "wh-7"}, `{"amount":5}`)
	if status != http.StatusAccepted || !a.Duplicate || a.Name != first.Name {
		t.Errorf("the same message by Message-Id: want 202 duplicate of %s, got %d %+v", first.Name, status, a)
	}
}

func TestBadMessages(t *testing.T) {
	srv, _ := server(t)
	cases := map[string]struct {
		reason string
		method string
		path   string
		header map[string]string
		body   string
		status int
		code   string
	}{
		"UnknownRoute": {reason: "A route that is not configured", path: "/ingress/nope",
			header: map[string]string{HeaderIdempotencyKey: "a"}, body: `{}`, status: 404, code: CodeUnknownRoute},
		"Get": {reason: "Only POST takes messages", method: http.MethodGet, path: "/ingress/orders",
			status: 405, code: CodeInvalid},
		"NoID": {reason: "A webhook without an id cannot be deduped", path: "/ingress/orders", body: `{}`,
			status: 400, code: CodeInvalid},
		"NotAnObject": {reason: "The data become parameters: a JSON object", path: "/ingress/orders",
			header: map[string]string{HeaderIdempotencyKey: "a"}, body: `[1,2]`, status: 400, code: CodeInvalid},
		"NotJSON": {reason: "A body that is not JSON", path: "/ingress/orders",
			header: map[string]string{HeaderIdempotencyKey: "a", "Content-Type": "text/plain"}, body: `hi`,
			status: 415, code: CodeInvalid},
		"TooLarge": {reason: "A body over the limit", path: "/ingress/orders",
			header: map[string]string{HeaderIdempotencyKey: "a"},
			body:   `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, status: 413, code: CodeTooLarge},
		"DataOverParameters": {reason: "Data over an operation's parameters limit make no operation", path: "/ingress/orders",
			header: map[string]string{HeaderIdempotencyKey: "a"},
			body:   `{"x":"` + strings.Repeat("a", v1.MaxParametersBytes) + `"}`, status: 413, code: CodeTooLarge},
		"DuplicateKey": {reason: "Data with a key twice have no canonical form, and no size to blame", path: "/ingress/orders",
			header: map[string]string{HeaderIdempotencyKey: "a"}, body: `{"x":1,"x":2}`, status: 400, code: CodeInvalid},
		"LongSource": {reason: "A CloudEvent's source over the limit", path: "/ingress/orders",
			header: map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "x", "Ce-Type": "t",
				"Ce-Source": strings.Repeat("s", MaxIDLength+1), "Content-Type": "application/json"},
			body: `{}`, status: 400, code: CodeInvalid},
		"LongID": {reason: "An id over the limit", path: "/ingress/orders",
			header: map[string]string{HeaderIdempotencyKey: strings.Repeat("k", MaxIDLength+1)}, body: `{}`,
			status: 400, code: CodeInvalid},
		"BadCloudEvent": {reason: "A CloudEvent without its required attributes", path: "/ingress/orders",
			header: map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "x", "Content-Type": "application/json"},
			body:   `{}`, status: 400, code: CodeInvalid},
		"RefusedByTheAPIServer": {reason: "A route whose operation the CRD refuses", path: "/ingress/broken",
			header: map[string]string{HeaderIdempotencyKey: "a"}, body: `{}`, status: 422, code: CodeInvalid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(context.Background(), cmpMethod(tc.method), srv.URL+tc.path,
				strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			var a Answer
			_ = json.NewDecoder(resp.Body).Decode(&a)
			if resp.StatusCode != tc.status || a.Error != tc.code {
				t.Errorf("%s: want %d %s, got %d %+v", tc.reason, tc.status, tc.code, resp.StatusCode, a)
			}
		})
	}
}

func cmpMethod(m string) string {
	if m == "" {
		return http.MethodPost
	}
	return m
}

func TestName(t *testing.T) {
	a := Name("orders", "/shop", "id-1")
	if a != Name("orders", "/shop", "id-1") {
		t.Error("Name is not deterministic")
	}
	if len(a) > 63 || !strings.HasPrefix(a, "orders-") {
		t.Errorf("Name %q is not a DNS label of the route", a)
	}
	for _, other := range []string{Name("refunds", "/shop", "id-1"), Name("orders", "/other", "id-1"),
		Name("orders", "/shop", "id-2"), Name("orders", "", "/shop\x00id-1")} {
		if other == a {
			t.Errorf("Name %q is shared by another message", a)
		}
	}
	h := &Handler{Routes: map[string]Route{strings.Repeat("r", 41): {Namespace: "n", ToolRef: v1.ToolReference{Name: "t"},
		Operation: "o"}}}
	if err := h.Validate(); err == nil {
		t.Error("a route name too long for a DNS label must be refused")
	}
}

// TestOperationsGoAfterAnHour: what an ingress makes is kept an hour after
// it ends unless its route says otherwise, and its record keeps the outcome
// for the route's retention, as the API server stores them.
func TestOperationsGoAfterAnHour(t *testing.T) {
	_, ns := server(t)
	days := metav1.Duration{Duration: 72 * time.Hour}
	h := &Handler{Client: kube(t), Routes: map[string]Route{
		"orders": {Namespace: ns, ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create"},
		"short": {Namespace: ns, ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create",
			TTLSecondsAfterFinished: ptr.To[int32](60)},
		"kept": {Namespace: ns, ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create",
			TTLSecondsAfterFinished: ptr.To[int32](-1), Retention: &days},
	}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/ingress", h))
	t.Cleanup(srv.Close)
	type spec struct {
		TTL       *int32
		Retention *metav1.Duration
	}
	day := &metav1.Duration{Duration: 24 * time.Hour}
	cases := map[string]struct {
		reason string
		want   spec
	}{
		"orders": {reason: "an hour by default, and the API server's retention", want: spec{ptr.To[int32](3600), day}},
		"short":  {reason: "the route's TTL", want: spec{ptr.To[int32](60), day}},
		"kept":   {reason: "-1 keeps it; the route's retention", want: spec{nil, &days}},
	}
	for route, tc := range cases {
		t.Run(route, func(t *testing.T) {
			status, a := post(t, srv.URL+"/ingress/"+route,
				map[string]string{HeaderIdempotencyKey: "m-" + route, "Content-Type": "application/json"}, `{"amount":1}`)
			if status != http.StatusAccepted {
				t.Fatalf("want 202, got %d %+v", status, a)
			}
			op := operation(t, ns, a.Name)
			if diff := cmp.Diff(tc.want, spec{op.Spec.TTLSecondsAfterFinished, op.Spec.Retention}); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	bad := &Handler{Routes: map[string]Route{"r": {Namespace: "n", ToolRef: v1.ToolReference{Name: "t"}, Operation: "o",
		TTLSecondsAfterFinished: ptr.To[int32](-2)}}}
	if err := bad.Validate(); err == nil {
		t.Error("a TTL below -1 must be refused")
	}
}
