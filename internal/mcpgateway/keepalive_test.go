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

package mcpgateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAsksProgress(t *testing.T) {
	cases := map[string]struct {
		reason string
		body   string
		want   bool
	}{
		"Token": {reason: "a call with a progress token asks for progress",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"progressToken":"p-1"}}}`,
			want: true},
		"NumericToken": {reason: "a token may be a number (the TypeScript SDK's)",
			body: `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"progressToken":7}}}`, want: true},
		"NoToken": {reason: "a call without a token does not",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"progressToken":"x"}}}`},
		"NullToken": {reason: "a null token is none",
			body: `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"progressToken":null}}}`},
		"NoParams": {reason: "a notification without params does not",
			body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`},
		"Batch": {reason: "a batch asks when one of its requests asks",
			body: `[{"jsonrpc":"2.0","method":"ping","id":1},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"_meta":{"progressToken":"p"}}}]`,
			want: true},
		"NotJSON":     {reason: "a body that is not JSON is the SDK's to refuse", body: `{"jsonrpc":`},
		"ParamsArray": {reason: "params of another shape ask nothing", body: `{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := asksProgress([]byte(tc.body)); got != tc.want {
				t.Errorf("%s: got %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// TestResponseModeKeepsTheBody: the handler that answers gets the whole
// body, however it was routed.
func TestResponseModeKeepsTheBody(t *testing.T) {
	echo := func(mode string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			_, _ = w.Write([]byte(mode + " " + string(b)))
		})
	}
	h := responseMode(echo("stream"), echo("single"))
	cases := map[string]struct {
		method, body, want string
	}{
		"Progress":   {method: http.MethodPost, body: `{"id":1,"params":{"_meta":{"progressToken":1}}}`, want: "stream"},
		"NoProgress": {method: http.MethodPost, body: `{"id":1,"params":{}}`, want: "single"},
		"Large": {method: http.MethodPost, body: `{"id":1,"params":{"_meta":{"progressToken":1},"x":"` +
			strings.Repeat("a", MaxRequestBodyBytes-100) + `"}}`, want: "stream"},
		"Get": {method: http.MethodGet, want: "stream"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(tc.method, "/mcp", strings.NewReader(tc.body)))
			if want := tc.want + " " + tc.body; rec.Body.String() != want {
				t.Errorf("got %.80q…, want %.80q…", rec.Body.String(), want)
			}
		})
	}
}

// TestKeepAlive: a change is sent at once; silence is filled every
// interval with the last message, the progress always growing; nothing is
// sent once the call's context ended.
func TestKeepAlive(t *testing.T) {
	type sent struct {
		progress float64
		msg      string
	}
	var (
		mu  sync.Mutex
		got []sent
	)
	ctx, cancel := context.WithCancel(context.Background())
	notify := keepAlive(ctx, 50*time.Millisecond, func(p float64, msg string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, sent{p, msg})
	})
	snapshot := func() []sent {
		mu.Lock()
		defer mu.Unlock()
		return append([]sent(nil), got...)
	}
	notify("operation x is Started")
	time.Sleep(180 * time.Millisecond)
	cancel()
	time.Sleep(10 * time.Millisecond) // a keep-alive under way at the cancel ends
	s := snapshot()
	if len(s) < 3 {
		t.Fatalf("want the change and at least two keep-alives in 180 ms at 50 ms, got %v", s)
	}
	if s[0].msg != "operation x is Started" {
		t.Errorf("first: got %q, want the change itself", s[0].msg)
	}
	for i, n := range s {
		if n.progress != float64(i+1) {
			t.Errorf("notification %d: progress %v, want %d", i, n.progress, i+1)
		}
		if i > 0 && n.msg != "still waiting: operation x is Started" {
			t.Errorf("notification %d: got %q, want the last change, marked as a wait", i, n.msg)
		}
	}
	time.Sleep(120 * time.Millisecond)
	notify("operation x is Committed")
	if after := snapshot(); len(after) != len(s) {
		t.Errorf("sent after the call ended: %v", after[len(s):])
	}
}
