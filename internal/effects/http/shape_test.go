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

package http

import (
	"context"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// received is a request as the tool saw it.
type received struct {
	Method, Path, Query, ContentType, Body, Key, Extra string
}

// recorder is a tool that records the last request and answers 201.
func recorder(t *testing.T) (string, func() received) {
	t.Helper()
	var mu sync.Mutex
	var last received
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		last = received{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			ContentType: r.Header.Get("Content-Type"), Body: string(b),
			Key: r.Header.Get("Idempotency-Key"), Extra: r.Header.Get("X-Team")}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(nethttp.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"obj_1"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() received { mu.Lock(); defer mu.Unlock(); return last }
}

func TestShape(t *testing.T) {
	const key = "ns/Tool:t/issue.create/k 1"
	cases := map[string]struct {
		reason  string
		path    string
		shape   *v1.RequestShape
		params  string
		want    received
		wantErr string
	}{
		"Default": {reason: "Without a shape the parameters are the JSON body, as before.",
			path: "/issues", params: `{"title":"disk full"}`,
			want: received{Method: "POST", Path: "/issues", ContentType: "application/json", Body: `{"title":"disk full"}`, Key: key}},
		"PathValuesEscaped": {reason: "Path values are path-escaped: a slash or a space cannot change the route.",
			path: "/repos/{owner}/{repo}/issues", params: `{"owner":"acme","repo":"a/b c"}`,
			shape: &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "owner", Value: "parameters.owner"},
				{Name: "repo", Value: "parameters.repo"}}, Body: "{'title': 'x'}"},
			want: received{Method: "POST", Path: "/repos/acme/a%2Fb%20c/issues", ContentType: "application/json",
				Body: `{"title":"x"}`, Key: key}},
		"PathValueInQuery": {reason: "A path value after ? is query-escaped: an & or an = cannot add a parameter.",
			path: "/search?q={term}&limit=5", params: `{"term":"x&admin=true #1"}`,
			shape: &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "term", Value: "parameters.term"}}},
			want: received{Method: "POST", Path: "/search", Query: "limit=5&q=x%26admin%3Dtrue+%231",
				ContentType: "application/json", Body: `{"term":"x&admin=true #1"}`, Key: key}},
		"KeyInQuery": {reason: "The key can travel in the query, escaped.",
			path: "/events", params: `{"n":1}`,
			shape: &v1.RequestShape{Query: []v1.NamedValue{{Name: "idempotency_key", Value: "key"},
				{Name: "n", Value: "parameters.n"}}},
			want: received{Method: "POST", Path: "/events", Query: "idempotency_key=ns%2FTool%3At%2Fissue.create%2Fk+1&n=1",
				ContentType: "application/json", Body: `{"n":1}`, Key: key}},
		"KeyInBody": {reason: "The key can travel in the body, as PagerDuty's dedup_key does.",
			path: "/v2/enqueue", params: `{"summary":"disk full","severity":"critical"}`,
			shape: &v1.RequestShape{Body: "{'dedup_key': key, 'event_action': 'trigger', " +
				"'payload': {'summary': parameters.summary, 'severity': parameters.severity}}"},
			want: received{Method: "POST", Path: "/v2/enqueue", ContentType: "application/json",
				Body: `{"dedup_key":"` + key + `","event_action":"trigger","payload":{"severity":"critical","summary":"disk full"}}`, Key: key}},
		"Form": {reason: "A form body flattens objects and lists in brackets, as Stripe's v1 API takes them.",
			path: "/v1/charges", params: `{"amount":2000,"currency":"eur","metadata":{"order":"o 1"},"expand":["customer"]}`,
			shape: &v1.RequestShape{Encoding: v1.BodyForm},
			want: received{Method: "POST", Path: "/v1/charges", ContentType: "application/x-www-form-urlencoded",
				Body: "amount=2000&currency=eur&expand%5B0%5D=customer&metadata%5Border%5D=o+1", Key: key}},
		"Headers": {reason: "Shaped headers are sent; the key header stays Once's.",
			path: "/x", params: `{"team":"sre"}`,
			shape: &v1.RequestShape{Headers: []v1.NamedValue{{Name: "X-Team", Value: "parameters.team"},
				{Name: "Idempotency-Key", Value: "'forged'"}}},
			want: received{Method: "POST", Path: "/x", ContentType: "application/json", Body: `{"team":"sre"}`, Key: key, Extra: "sre"}},
		"MissingParameter": {reason: "A value that cannot be computed fails before anything is sent.",
			path: "/repos/{repo}", params: `{}`,
			shape:   &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}}},
			wantErr: "path value repo"},
		"DotDotPathValue": {reason: "A path value of .. would climb out of the route (a server or proxy resolves it): nothing is sent.",
			path: "/repos/{repo}/issues", params: `{"repo":".."}`,
			shape:   &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}}},
			wantErr: `path value repo is "..", which names no path segment`},
		"DotPathValue": {reason: "A path value of . names no segment either.",
			path: "/repos/{repo}/issues", params: `{"repo":"."}`,
			shape:   &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}}},
			wantErr: `path value repo is ".", which names no path segment`},
		"DotsInAPathValue": {reason: "Dots within a segment are a name like any other.",
			path: "/repos/{repo}/issues", params: `{"repo":"...a..b"}`,
			shape: &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}}},
			want:  received{Method: "POST", Path: "/repos/...a..b/issues", ContentType: "application/json", Body: `{"repo":"...a..b"}`, Key: key}},
		"WrongType": {reason: "An object is no path value.",
			path: "/repos/{repo}", params: `{"repo":{"a":1}}`,
			shape:   &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}}},
			wantErr: "not a string"},
		"FormNotAnObject": {reason: "A form body must be an object.",
			path: "/x", params: `{}`, shape: &v1.RequestShape{Encoding: v1.BodyForm, Body: "[1, 2]"},
			wantErr: "must be an object"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url, last := recorder(t)
			spec := &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: url},
				Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative, Header: "Idempotency-Key"},
				Operations:  []v1.ToolOperation{{Name: "issue.create", Path: tc.path, Request: tc.shape}}}
			c := newClient(t, spec, nil)
			r := c.Execute(context.Background(), effects.Request{Operation: "issue.create", Key: key,
				Parameters: []byte(tc.params), Timeout: 5 * time.Second})
			if tc.wantErr != "" {
				if r.Outcome != v1.OutcomePermanent || !strings.Contains(r.Message, tc.wantErr) {
					t.Fatalf("%s: want a permanent failure naming %q, got %s: %s", tc.reason, tc.wantErr, r.Outcome, r.Message)
				}
				if got := last(); got != (received{}) {
					t.Errorf("%s: a request was sent: %+v", tc.reason, got)
				}
				return
			}
			if r.Outcome != v1.OutcomeSucceeded {
				t.Fatalf("%s: %s: %s", tc.reason, r.Outcome, r.Message)
			}
			if diff := cmp.Diff(tc.want, last()); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			// The evidence names the method, the path and the body's
			// digest: never the body, which may hold the key or more.
			wantSent := tc.want.Method + " " + tc.want.Path + " body " + protocol.Digest([]byte(tc.want.Body))[7:19]
			if r.Request != wantSent {
				t.Errorf("%s: evidence %q, want %q", tc.reason, r.Request, wantSent)
			}
		})
	}
}

func TestShapeValidated(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	spec := func(path string, shape *v1.RequestShape) *v1.ToolSpec {
		return &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
			Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
			Operations:  []v1.ToolOperation{{Name: "op", Path: path, Request: shape}}}
	}
	for name, tc := range map[string]struct {
		spec *v1.ToolSpec
		want string
	}{
		"UnfilledPlaceholder": {spec("/repos/{repo}", nil), "{repo} has no value"},
		"BadExpression": {spec("/x", &v1.RequestShape{Query: []v1.NamedValue{{Name: "q", Value: "parameters."}}}),
			"request.query[0].value"},
		"BadBody": {spec("/x", &v1.RequestShape{Body: "{'a': }"}), "request.body"},
	} {
		t.Run(name, func(t *testing.T) {
			if err := c.Validate(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want a refusal naming %q, got %v", tc.want, err)
			}
		})
	}
	if err := c.Validate(spec("/repos/{repo}/keys/{idempotencyKey}", &v1.RequestShape{
		PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}}})); err != nil {
		t.Errorf("a filled path refused: %v", err)
	}
}

// TestLookupByBusinessKey asks a tool that can only be searched by a field
// the caller set (a label) and decides found / absent from the candidates.
func TestLookupByBusinessKey(t *testing.T) {
	const key = "ns/Tool:tracker/issue.create/order-7"
	var query string
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		query = r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		items := `[{"id":"i-9","ref":"order-7"}]`
		if r.URL.Query().Get("has") == "key" {
			items = `[{"id":"i-9","ref":"order-7"},{"id":"i-12","ref":"` + key + `"}]`
		}
		_, _ = io.WriteString(w, `{"items":`+items+`}`)
	}))
	t.Cleanup(srv.Close)
	spec := &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: srv.URL},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyLookup},
		Operations: []v1.ToolOperation{{Name: "issue.create", Path: "/issues",
			Lookup: &v1.LookupRequest{Path: "/issues",
				Request: &v1.RequestShape{Query: []v1.NamedValue{{Name: "labels", Value: "parameters.order"},
					{Name: "has", Value: "parameters.has"}}},
				Found:  "response.body.items.exists(i, i.ref == key)",
				Absent: "response.status == 200 && !response.body.items.exists(i, i.ref == key)"},
			Response: v1.ResponseMapping{ExternalObjectID: "response.body.items.filter(i, i.ref == key)[0].id"}}}}
	c := newClient(t, spec, nil)
	ask := func(has string) (string, string) {
		r := c.Lookup(context.Background(), effects.Request{Operation: "issue.create", Key: key,
			Parameters: []byte(`{"order":"order-7","has":"` + has + `"}`), Timeout: 5 * time.Second})
		return string(r.Verdict), r.ExternalObjectID
	}
	if v, id := ask("key"); v != "Found" || id != "i-12" {
		t.Errorf("a candidate carries the key: want Found i-12, got %s %q", v, id)
	}
	if query != "has=key&labels=order-7" {
		t.Errorf("the lookup asks by the business key: query %q", query)
	}
	if v, _ := ask("none"); v != "Absent" {
		t.Errorf("no candidate carries the key: want Absent, got %s", v)
	}
}
