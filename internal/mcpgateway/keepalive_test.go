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
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
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

// TestKeepAlive: a change is sent at once; silence is filled with the
// last message, marked as a wait, never sooner than an interval after the
// send before, the progress always growing; nothing is sent once the
// call's context ended. It waits for a count of keep-alives, not for a
// time, so that a loaded machine only makes it slower: it once required
// three sends within 180 ms at 50 ms.
func TestKeepAlive(t *testing.T) {
	const interval = 20 * time.Millisecond
	type sent struct {
		at       time.Time
		progress float64
		msg      string
	}
	var (
		mu  sync.Mutex
		got []sent
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notify := keepAlive(ctx, interval, func(p float64, msg string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, sent{time.Now(), p, msg})
	})
	snapshot := func() []sent {
		mu.Lock()
		defer mu.Unlock()
		return append([]sent(nil), got...)
	}
	messages := func(s []sent) []string {
		var m []string
		for _, n := range s {
			m = append(m, fmt.Sprintf("%v %q", n.progress, n.msg))
		}
		return m
	}
	const change = "operation x is Started"
	notify(change)
	// Sent at once: notify returns after the send. A machine slow enough
	// to let an interval pass around the change may have sent keep-alives
	// of the message before it, or of the change already.
	s := snapshot()
	first := slices.IndexFunc(s, func(n sent) bool { return n.msg == change })
	if first < 0 {
		t.Fatalf("the change is not sent when notify returns: %v", messages(s))
	}
	const keepAlives = 3
	for deadline := time.Now().Add(30 * time.Second); len(snapshot()) < first+1+keepAlives; {
		if time.Now().After(deadline) {
			t.Fatalf("want %d keep-alives after the change at %s, got %v in 30 s", keepAlives, interval,
				messages(snapshot()))
		}
		time.Sleep(interval)
	}
	cancel()
	// notify holds the lock a keep-alive is sent under: once it returns,
	// any keep-alive under way at the cancel is done, and it sends nothing
	// itself.
	notify("operation x is Committed")
	s = snapshot()
	for i, n := range s {
		if n.progress != float64(i+1) {
			t.Errorf("notification %d: progress %v, want %d", i, n.progress, i+1)
		}
		want := "still waiting: " + change
		switch {
		case i < first:
			want = "still waiting: waiting for the outcome"
		case i == first:
			want = change
		}
		if n.msg != want {
			t.Errorf("notification %d: got %q, want %q", i, n.msg, want)
		}
		// The first keep-alive after the change may have been due before
		// it; every other waits an interval after the send before it.
		if i > first+1 && n.at.Sub(s[i-1].at) < interval {
			t.Errorf("notification %d came %s after the one before, want at least %s", i, n.at.Sub(s[i-1].at), interval)
		}
	}
	time.Sleep(5 * interval)
	if after := snapshot(); len(after) != len(s) {
		t.Errorf("sent after the call ended: %v", messages(after[len(s):]))
	}
}
