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
	"errors"
	"io"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
)

// fenceTool is a tool that counts the requests that reach it and the body
// bytes it read.
type fenceTool struct {
	requests, bytes atomic.Int64
}

func (f *fenceTool) ServeHTTP(w nethttp.ResponseWriter, r *nethttp.Request) {
	f.requests.Add(1)
	n, _ := io.Copy(io.Discard, r.Body)
	f.bytes.Add(n)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(nethttp.StatusCreated)
	_, _ = io.WriteString(w, `{"id":"obj_1"}`)
}

func fenceSpec(url string) *v1.ToolSpec {
	return &v1.ToolSpec{
		HTTP:        v1.HTTPBackend{URL: url},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
		Operations: []v1.ToolOperation{{Name: "create", Path: "/v1/things",
			Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}}},
	}
}

var errExpired = errors.New("the claim expired")

// TestFence shows the fence asked at the last moment: a claim that expires
// at any point before the request's first byte stops the request, which
// never reaches the tool and is known not to have left; once the first
// byte left, the rest of the request goes too. The fence is asked on the
// connection, whatever the transport checked of the context before.
func TestFence(t *testing.T) {
	big := `{"blob":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := map[string]struct {
		tls bool
		// open is how many times the fence answers nil before it fails
		// (-1: never fails).
		open   int
		params string
		want   v1.Outcome
		// reached is whether the tool sees the request.
		reached bool
	}{
		"OpenFenceSends":              {open: -1, want: v1.OutcomeSucceeded, reached: true},
		"ExpiredBeforeTheDial":        {open: 0, want: v1.OutcomeRetryable},
		"ExpiredAfterTheDial":         {open: 1, want: v1.OutcomeRetryable},
		"ExpiredDuringTheHandshake":   {tls: true, open: 2, want: v1.OutcomeRetryable},
		"OpenFenceSendsOverTLS":       {tls: true, open: -1, want: v1.OutcomeSucceeded, reached: true},
		"BodyGoesOnAfterTheFirstByte": {open: 2, params: big, want: v1.OutcomeSucceeded, reached: true},
		"BodyGoesOnOverTLS":           {tls: true, open: 12, params: big, want: v1.OutcomeSucceeded, reached: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tool := &fenceTool{}
			srv := httptest.NewUnstartedServer(tool)
			transport := NewTransport(loopback)
			if tc.tls {
				srv.StartTLS()
				transport.TLSClientConfig = srv.Client().Transport.(*nethttp.Transport).TLSClientConfig.Clone()
			} else {
				srv.Start()
			}
			defer srv.Close()
			var asked atomic.Int64
			fence := func() error {
				if n := asked.Add(1); tc.open >= 0 && n > int64(tc.open) {
					return errExpired
				}
				return nil
			}
			params := tc.params
			if params == "" {
				params = `{"n":1}`
			}
			c := newClient(t, fenceSpec(srv.URL), transport)
			r := c.Execute(context.Background(), effects.Request{Operation: "create", Key: "k-1",
				Parameters: []byte(params), Timeout: 10 * time.Second, Fence: fence})
			if r.Outcome != tc.want {
				t.Fatalf("outcome %s (%s), want %s", r.Outcome, r.Message, tc.want)
			}
			if tc.want == v1.OutcomeRetryable && !strings.Contains(r.Message, "never left") {
				t.Errorf("a fenced request must be known not to have left; message %q", r.Message)
			}
			got := tool.requests.Load() > 0
			if got != tc.reached {
				t.Fatalf("tool reached: %v, want %v (fence asked %d times)", got, tc.reached, asked.Load())
			}
			if tc.reached && tool.bytes.Load() != int64(len(params)) {
				t.Errorf("the tool read %d body bytes, want %d: the fence cut the request", tool.bytes.Load(), len(params))
			}
		})
	}
}

// TestFenceTakesNoConnectionOfAnother shows that a request without a fence
// is not held up by one: fences ride on connections of their own.
func TestFenceTakesNoConnectionOfAnother(t *testing.T) {
	tool := &fenceTool{}
	srv := httptest.NewServer(tool)
	defer srv.Close()
	c := newClient(t, fenceSpec(srv.URL), NewTransport(loopback))
	closed := func() error { return errExpired }
	if r := c.Execute(context.Background(), effects.Request{Operation: "create", Key: "k-1",
		Parameters: []byte(`{}`), Timeout: 5 * time.Second, Fence: closed}); r.Outcome != v1.OutcomeRetryable {
		t.Fatalf("fenced request: %s (%s)", r.Outcome, r.Message)
	}
	if r := c.Execute(context.Background(), effects.Request{Operation: "create", Key: "k-2",
		Parameters: []byte(`{}`), Timeout: 5 * time.Second}); r.Outcome != v1.OutcomeSucceeded {
		t.Fatalf("unfenced request after a fenced one: %s (%s)", r.Outcome, r.Message)
	}
	if n := tool.requests.Load(); n != 1 {
		t.Fatalf("the tool saw %d requests, want 1", n)
	}
}

// TestHTTP2Tool shows a tool that speaks HTTP/2 over TLS answered in
// HTTP/1.1: the transport offers nothing else in the handshake, so the
// tool never picks a protocol the transport then does not speak.
func TestHTTP2Tool(t *testing.T) {
	tool := &fenceTool{}
	srv := httptest.NewUnstartedServer(tool)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	transport := NewTransport(loopback)
	transport.TLSClientConfig.RootCAs = srv.Client().Transport.(*nethttp.Transport).TLSClientConfig.RootCAs
	c := newClient(t, fenceSpec(srv.URL), transport)
	r := c.Execute(context.Background(), effects.Request{Operation: "create", Key: "k-1",
		Parameters: []byte(`{}`), Timeout: 5 * time.Second})
	if r.Outcome != v1.OutcomeSucceeded || tool.requests.Load() != 1 {
		t.Fatalf("outcome %s (%s), %d requests at the tool; want one, answered", r.Outcome, r.Message, tool.requests.Load())
	}
}
