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
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/ingress"
)

// reviewStub stands for the API server's review endpoints, as slow as a
// loaded one (300 ms an answer): it accepts the token "good" as alice and
// refuses every other, and counts the reviews it answers. The gateway's
// work against a real API server is tested end to end
// (test/e2e/mcp_auth_test.go); this stub only lets the two findings below
// be reproduced without one.
type reviewStub struct {
	reviews atomic.Int64
	// hold, when set, keeps every TokenReview of a token but "good"
	// waiting until it is closed; peak is the most in flight at once.
	hold           chan struct{}
	inFlight, peak atomic.Int64
	// passedOn counts requests that came with the caller's own token as
	// their credentials; impersonated those made as alice by impersonation.
	passedOn, impersonated atomic.Int64
}

func (s *reviewStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "Bearer good" {
		s.passedOn.Add(1)
	}
	if r.Header.Get("Impersonate-User") == "alice" {
		s.impersonated.Add(1)
	}
	var review struct {
		APIVersion string         `json:"apiVersion"`
		Kind       string         `json:"kind"`
		Spec       map[string]any `json:"spec"`
		Status     map[string]any `json:"status"`
	}
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch {
	case strings.HasSuffix(r.URL.Path, "/tokenreviews"):
		s.reviews.Add(1)
		now := s.inFlight.Add(1)
		for p := s.peak.Load(); now > p && !s.peak.CompareAndSwap(p, now); p = s.peak.Load() {
		}
		defer s.inFlight.Add(-1)
		if s.hold != nil && review.Spec["token"] != "good" {
			<-s.hold
		}
		time.Sleep(300 * time.Millisecond)
		ok := review.Spec["token"] == "good"
		review.Status = map[string]any{"authenticated": ok, "audiences": review.Spec["audiences"]}
		if ok {
			review.Status["user"] = map[string]any{"username": "alice"}
		}
	case strings.HasSuffix(r.URL.Path, "/selfsubjectreviews"):
		s.reviews.Add(1)
		time.Sleep(300 * time.Millisecond)
		review.Status = map[string]any{"userInfo": map[string]any{"username": "alice"}}
	default:
		review.Status = map[string]any{"allowed": false}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(review)
}

func stubbedGateway(t *testing.T) (*httptest.Server, *reviewStub) {
	t.Helper()
	return stubbedGatewayWith(t, nil)
}

// stubbedGatewayWith is stubbedGateway serving the ingress's routes too.
func stubbedGatewayWith(t *testing.T, routes map[string]ingress.Route) (*httptest.Server, *reviewStub) {
	t.Helper()
	stub := &reviewStub{}
	api := httptest.NewServer(stub)
	t.Cleanup(api.Close)
	// The stub speaks JSON only.
	cfg := &rest.Config{Host: api.URL, QPS: 1000, Burst: 1000, ContentConfig: rest.ContentConfig{ContentType: "application/json",
		AcceptContentTypes: "application/json"}}
	g, err := New(Config{REST: cfg, Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if routes != nil {
		if err := g.MountIngress(routes); err != nil {
			t.Fatal(err)
		}
	}
	// A request's header Test-Client stands for its remote address: the
	// clients of a test all come from one.
	h := g.Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := r.Header.Get("Test-Client"); c != "" {
			r.RemoteAddr = net.JoinHostPort(c, "40000")
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, stub
}

// TestTokenCheckedBeforeTheBody: a request with a bad token and a body
// that never ends, as a hostile caller sends, is answered 401 at once; the
// gateway once read up to 4 MiB of body before it looked at the token.
func TestTokenCheckedBeforeTheBody(t *testing.T) {
	srv, _ := stubbedGateway(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	chunk := `{"jsonrpc":"2.0",`
	if _, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: gateway\r\nAuthorization: Bearer bad\r\n"+
		"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk); err != nil {
		t.Fatal(err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer within 5 s to a bad token whose body never ends: %v", err)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", resp.StatusCode)
	}
}

// TestOneReviewPerToken: many requests at once with one token the gateway
// has not seen make one review; it once made one per request.
func TestOneReviewPerToken(t *testing.T) {
	srv, stub := stubbedGateway(t)
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
			req.Header.Set("Authorization", "Bearer good")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			_ = resp.Body.Close()
		})
	}
	wg.Wait()
	if got := stub.reviews.Load(); got != 1 {
		t.Errorf("%d concurrent requests with one new token made %d reviews, want 1", n, got)
	}
}

// TestInvalidTokenIs401: a token the API server refuses is answered HTTP
// 401 with a Bearer challenge that says invalid_token, so that a host knows
// to get a new one; it was once answered HTTP 200 with a JSON-RPC error.
func TestInvalidTokenIs401(t *testing.T) {
	srv, _ := stubbedGateway(t)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Authorization", "Bearer expired")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("answered %d with WWW-Authenticate %q, want 401 with error=\"invalid_token\"", resp.StatusCode,
			resp.Header.Get("WWW-Authenticate"))
	}
}

// TestReviewsAreBounded: made-up tokens, each new, sent at once by many
// clients (a flood that singleflight per token cannot merge) cost the API
// server at most maxReviews reviews in flight; the rest are answered 503
// at once, with Retry-After.
func TestReviewsAreBounded(t *testing.T) {
	srv, stub := stubbedGateway(t)
	stub.hold = make(chan struct{})
	const n, clients = 3 * maxReviews, 8
	var wg sync.WaitGroup
	var busy atomic.Int64
	for i := range n {
		wg.Go(func() {
			status, retry := post(t, srv.URL+"/mcp", fmt.Sprintf("10.0.0.%d", i%clients), fmt.Sprintf("made-up-%d", i))
			if status == http.StatusServiceUnavailable {
				busy.Add(1)
				if retry == "" {
					t.Error("a request answered 503 says no Retry-After")
				}
			}
		})
	}
	// The reviews wait: every request beyond the bound is answered now.
	deadline := time.Now().Add(30 * time.Second)
	for busy.Load() < n-maxReviews && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stub.hold)
	wg.Wait()
	if got := stub.peak.Load(); got > maxReviews {
		t.Errorf("%d distinct tokens at once had %d reviews in flight, want at most %d", n, got, maxReviews)
	}
	if got := busy.Load(); got != n-maxReviews {
		t.Errorf("%d of %d requests were answered 503, want the %d beyond the bound", got, n, n-maxReviews)
	}
}

// TestOneClientCannotTakeEveryReview: a client that sends made-up tokens
// at once holds at most its share of the reviews in flight, and a valid
// token of another client is still accepted. One client's 32 made-up
// tokens once took every place, and the valid caller was answered 503.
func TestOneClientCannotTakeEveryReview(t *testing.T) {
	srv, stub := stubbedGatewayWith(t, map[string]ingress.Route{
		"orders": {Namespace: "shop", ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge"},
	})
	stub.hold = make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stub.hold)
	var busy atomic.Int64
	for i := range maxReviews {
		wg.Go(func() {
			// Half at the MCP endpoint, half at the ingress: one share for both.
			url := srv.URL + "/mcp"
			if i%2 == 1 {
				url = srv.URL + "/ingress/orders"
			}
			if status, _ := post(t, url, "10.0.0.1", fmt.Sprintf("made-up-%d", i)); status == http.StatusServiceUnavailable {
				busy.Add(1)
			}
		})
	}
	// Every made-up token is either in review, held, or answered 503.
	deadline := time.Now().Add(30 * time.Second)
	for stub.inFlight.Load()+busy.Load() < maxReviews && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got, want := stub.inFlight.Load(), int64(reviewShare); got != want {
		t.Errorf("one client's %d made-up tokens have %d reviews in flight, want its share, %d", maxReviews, got, want)
	}
	// The gateway acts as alice only once it accepted her token.
	for _, path := range []string{"/mcp", "/ingress/orders"} {
		before := stub.impersonated.Load()
		status, retry := post(t, srv.URL+path, "10.0.0.2", "good")
		if stub.impersonated.Load() == before {
			t.Errorf("%s: another client's valid token, while the first holds its share, was not accepted: "+
				"status %d, Retry-After %q", path, status, retry)
		}
	}
}

// post sends a tools/list (or a message) to url as client, with token, and
// returns the status and Retry-After of the answer.
func post(t *testing.T, url, client, token string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, url,
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Test-Client", client)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	req.Header.Set(ingress.HeaderIdempotencyKey, "order-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// TestIngressReviewsSendersTokens: the ingress checks a sender's token as
// the MCP endpoint checks a caller's: one review for many messages sent at
// once, a refused token answered 401 and refused again without a second
// review, and the operation made by impersonation; the sender's token never
// reaches the API server as credentials. It was once passed on, each
// message sent at once with a new token asked the API server again, and a
// refused token was asked about again at each message.
func TestIngressReviewsSendersTokens(t *testing.T) {
	srv, stub := stubbedGatewayWith(t, map[string]ingress.Route{
		"orders": {Namespace: "shop", ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge"},
	})
	send := func(token string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/ingress/orders", strings.NewReader(`{"amount":1}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(ingress.HeaderIdempotencyKey, "order-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	const n = 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { send("good") })
	}
	wg.Wait()
	if got := stub.reviews.Load(); got != 1 {
		t.Errorf("%d messages sent at once with one new token made %d reviews, want 1", n, got)
	}
	if got := stub.passedOn.Load(); got != 0 {
		t.Errorf("%d requests reached the API server with the sender's token as credentials, want 0", got)
	}
	if stub.impersonated.Load() == 0 {
		t.Error("no request reached the API server as the sender by impersonation")
	}
	for i := range 2 {
		if got := send("bad"); got != http.StatusUnauthorized {
			t.Errorf("message %d with a refused token: status %d, want 401", i+1, got)
		}
	}
	if got := stub.reviews.Load(); got != 2 {
		t.Errorf("after two messages with one refused token, %d reviews in all, want 2 (one per token)", got)
	}
}

// TestFullCacheKeepsItsCallers: a cache full of callers whose verdicts
// hold makes room for one more by forgetting one of them, not all: it once
// emptied itself, so that every caller's next call asked the API server
// again at once.
func TestFullCacheKeepsItsCallers(t *testing.T) {
	now := time.Now()
	a := &authenticator{now: func() time.Time { return now }}
	live := verdict{c: &caller{user: "alice"}, expires: now.Add(time.Minute)}
	for i := range maxTokens + 1 {
		a.keep(sha256.Sum256(fmt.Appendf(nil, "token-%d", i)), live)
	}
	if got := len(a.known); got != maxTokens {
		t.Errorf("after %d callers, the cache keeps %d, want %d", maxTokens+1, got, maxTokens)
	}
	if _, ok := a.cached(sha256.Sum256(fmt.Appendf(nil, "token-%d", maxTokens))); !ok {
		t.Error("the newest caller is not kept")
	}
}
