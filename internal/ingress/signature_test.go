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
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// signedServer starts the handler with one route, "orders", that takes
// messages signed with key, into a new namespace; its clock stands at now.
func signedServer(t *testing.T, key []byte, now time.Time) (*httptest.Server, string) {
	t.Helper()
	nsSeq++
	ns := fmt.Sprintf("ingress-signed-%d", nsSeq)
	if err := kube(t).Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "secret")
	// As a Standard Webhooks sender gives it.
	if err := os.WriteFile(file, []byte(secretPrefix+base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := &Handler{Client: kube(t), Now: func() time.Time { return now }, Routes: map[string]Route{
		"orders": {Namespace: ns, ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create",
			Signing: &Signing{SecretFile: file}},
	}}
	if err := h.Validate(); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("/ingress", h))
	t.Cleanup(srv.Close)
	return srv, ns
}

// signed is the headers of a message signed with key, as a map for post,
// with extra headers added.
func signed(key []byte, id string, at time.Time, body string, extra ...string) map[string]string {
	h := map[string]string{"Content-Type": "application/json"}
	for k, v := range Sign(key, id, at, []byte(body)) {
		h[k] = v[0]
	}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

// A route with a signing secret stands for a sender that signs its webhooks
// (Standard Webhooks: Svix and the providers that adopted it); whoever else
// can reach the gateway's port (another pod, a compromised client) may post
// anything under any id.
func TestSignedRoute(t *testing.T) {
	key := []byte("route-signing-key-0123456789abcdef")
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	srv, ns := signedServer(t, key, now)
	url := srv.URL + "/ingress/orders"
	body := `{"amount":42}`

	refused := map[string]struct {
		reason string
		header map[string]string
		body   string
		status int
	}{
		"Unsigned": {reason: "A webhook without a signature, as any caller of the port could send.",
			header: map[string]string{"Content-Type": "application/json", HeaderIdempotencyKey: "order-1"},
			body:   body, status: http.StatusUnauthorized},
		"OtherKey": {reason: "A signature made with another secret.",
			header: signed([]byte("another-key-0123456789abcdef0000"), "order-1", now, body), body: body,
			status: http.StatusUnauthorized},
		"Tampered": {reason: "A signed message whose body was changed on the way.",
			header: signed(key, "order-1", now, body), body: `{"amount":4200}`, status: http.StatusUnauthorized},
		"OtherID": {reason: "A signed message posted again under another id.",
			header: func() map[string]string {
				h := signed(key, "order-1", now, body)
				h[HeaderWebhookID] = "order-2"
				return h
			}(), body: body, status: http.StatusUnauthorized},
		"Stale": {reason: "A delivery captured and posted again after the tolerance.",
			header: signed(key, "order-1", now.Add(-DefaultSignatureTolerance-time.Second), body), body: body,
			status: http.StatusUnauthorized},
		"Future": {reason: "A timestamp too far ahead of the gateway's clock.",
			header: signed(key, "order-1", now.Add(DefaultSignatureTolerance+time.Second), body), body: body,
			status: http.StatusUnauthorized},
		"EventIDNotSigned": {reason: "A signed CloudEvent whose id is not the signed one.",
			header: signed(key, "order-1", now, body, "Ce-Specversion", "1.0", "Ce-Id", "order-2",
				"Ce-Source", "/shop", "Ce-Type", "order.placed"), body: body, status: http.StatusBadRequest},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			status, a := post(t, url, tc.header, tc.body)
			if status != tc.status || a.Name != "" || a.State != "" {
				t.Errorf("%s\nwant %d and no operation, got %d: %+v", tc.reason, tc.status, status, a)
			}
			if tc.status == http.StatusUnauthorized && a.Error != CodeUnauthenticated {
				t.Errorf("%s\nerror code: want %s, got %+v", tc.reason, CodeUnauthenticated, a)
			}
			if strings.Contains(a.Message, base64.StdEncoding.EncodeToString(key)) {
				t.Errorf("%s\nthe answer tells the key: %q", tc.reason, a.Message)
			}
		})
	}
	if n := operations(t, ns); n != 0 {
		t.Fatalf("refused messages made %d operations", n)
	}

	// Signed by the sender: taken, under the signed id. An Idempotency-Key
	// header, which is not signed, does not name it.
	h := signed(key, "order-1", now.Add(-time.Minute), body, HeaderIdempotencyKey, "chosen-by-someone-else")
	status, a := post(t, url, h, body)
	if status != http.StatusAccepted || a.MessageID != "order-1" || a.Name != Name("orders", "", "order-1") {
		t.Fatalf("signed webhook: want 202 as order-1, got %d: %+v", status, a)
	}
	// The same delivery posted again within the tolerance: the same
	// operation.
	status, a = post(t, url, h, body)
	if status != http.StatusAccepted || !a.Duplicate || a.Name != Name("orders", "", "order-1") {
		t.Errorf("the same signed delivery again: want 202 and the same operation, got %d: %+v", status, a)
	}
	// A signed CloudEvent whose id is the signed one.
	ev := signed(key, "evt-7", now, body, "Ce-Specversion", "1.0", "Ce-Id", "evt-7", "Ce-Source", "/shop",
		"Ce-Type", "order.placed")
	status, a = post(t, url, ev, body)
	if status != http.StatusAccepted || a.Name != Name("orders", "", "evt-7") {
		t.Errorf("signed CloudEvent: want 202, got %d: %+v", status, a)
	}
	if n := operations(t, ns); n != 2 {
		t.Errorf("want the two signed messages' operations, got %d", n)
	}
}

func TestSigningLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	raw := "a-raw-key-of-32-bytes-0123456789"
	cases := map[string]struct {
		reason  string
		signing Signing
		wantErr string
		wantKey string
	}{
		"Prefixed": {reason: "A Standard Webhooks secret is whsec_ and the key in base64.",
			signing: Signing{SecretFile: write("prefixed", "whsec_"+base64.StdEncoding.EncodeToString([]byte(raw)))},
			wantKey: raw},
		"Raw": {reason: "Any other content is the key, without surrounding white space.",
			signing: Signing{SecretFile: write("raw", "  "+raw+"\n")}, wantKey: raw},
		"Missing": {reason: "A file that is not there stops the gateway's start.",
			signing: Signing{SecretFile: filepath.Join(dir, "absent")}, wantErr: "reading signing.secretFile"},
		"NoFile": {reason: "The file is required.", signing: Signing{}, wantErr: "signing.secretFile is required"},
		"Short": {reason: "A key shorter than 16 bytes is refused.",
			signing: Signing{SecretFile: write("short", "tooshort")}, wantErr: "shorter than 16 bytes"},
		"BadBase64": {reason: "A whsec_ secret whose key is not base64.",
			signing: Signing{SecretFile: write("bad", "whsec_***")}, wantErr: "is not base64"},
		"Tolerance": {reason: "A tolerance must be positive.",
			signing: Signing{SecretFile: write("tol", raw), Tolerance: &metav1.Duration{}}, wantErr: "must be positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := tc.signing
			err := s.load()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("%s\nwant an error with %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil || string(s.key) != tc.wantKey {
				t.Errorf("%s\nwant key %q, got %q, %v", tc.reason, tc.wantKey, s.key, err)
			}
		})
	}
}

// TestSignedDeliveryReplayed: a signed delivery captured on the way (from
// a proxy's log, say) and posted again within the tolerance, with every
// header the signature does not cover changed, is the same message: one
// operation. A binary-mode CloudEvent's source was once part of the name,
// and each new source made another operation of the same payment.
func TestSignedDeliveryReplayed(t *testing.T) {
	key := []byte("route-signing-key-0123456789abcdef")
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	srv, ns := signedServer(t, key, now)
	url := srv.URL + "/ingress/orders"
	body := `{"amount":42}`
	event := func(extra ...string) map[string]string {
		return signed(key, "evt-9", now, body, append([]string{"Ce-Specversion", "1.0", "Ce-Id", "evt-9",
			"Ce-Source", "/shop", "Ce-Type", "order.placed"}, extra...)...)
	}
	status, first := post(t, url, event(), body)
	if status != http.StatusAccepted {
		t.Fatalf("the delivery: want 202, got %d: %+v", status, first)
	}
	replays := map[string]map[string]string{
		"OtherSource":     event("Ce-Source", "/attacker"),
		"ShortSource":     event("Ce-Source", "x"),
		"OtherType":       event("Ce-Type", "order.refunded"),
		"Subject":         event("Ce-Subject", "another"),
		"Time":            event("Ce-Time", "2026-12-05T11:59:00Z"),
		"Extension":       event("Ce-Tenant", "other"),
		"ContentType":     event("Content-Type", "application/json; charset=utf-8"),
		"IdempotencyKey":  event("Idempotency-Key", "chosen-by-someone-else"),
		"MessageID":       event("Message-Id", "chosen-by-someone-else"),
		"AsPlainWebhook":  signed(key, "evt-9", now, body),
		"WebhookWithKeys": signed(key, "evt-9", now, body, "Idempotency-Key", "k", "Message-Id", "m"),
	}
	for name, h := range replays {
		t.Run(name, func(t *testing.T) {
			status, a := post(t, url, h, body)
			if status != http.StatusAccepted || !a.Duplicate || a.Name != first.Name {
				t.Errorf("want 202 and the first delivery's operation %s, got %d: %+v", first.Name, status, a)
			}
		})
	}
	if n := operations(t, ns); n != 1 {
		t.Errorf("one signed delivery posted %d times made %d operations", len(replays)+1, n)
	}
}

// TestSignedNamedBefore: a signed CloudEvent taken by the release before,
// whose name held its source, is found under that name when delivered
// again, and makes no second operation.
func TestSignedNamedBefore(t *testing.T) {
	key := []byte("route-signing-key-0123456789abcdef")
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	srv, ns := signedServer(t, key, now)
	body := `{"amount":42}`
	before := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: Name("orders", "/shop", "evt-3"),
			Labels: map[string]string{LabelRoute: "orders"}},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create",
			Parameters: &runtime.RawExtension{Raw: []byte(body)}},
	}
	if err := kube(t).Create(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	h := signed(key, "evt-3", now, body, "Ce-Specversion", "1.0", "Ce-Id", "evt-3", "Ce-Source", "/shop",
		"Ce-Type", "order.placed")
	status, a := post(t, srv.URL+"/ingress/orders", h, body)
	if status != http.StatusAccepted || !a.Duplicate || a.Name != before.Name {
		t.Errorf("want 202 and the operation named before, %s; got %d: %+v", before.Name, status, a)
	}
	if n := operations(t, ns); n != 1 {
		t.Errorf("want the one operation made before, got %d", n)
	}
}
