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
	"bytes"
	"context"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

// startSandbox runs the sandbox tool and returns its URL and ledger client.
func startSandbox(t *testing.T) (string, *sandbox.Client) {
	t.Helper()
	s, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); _ = s.Close() })
	return srv.URL, &sandbox.Client{BaseURL: srv.URL, HTTP: srv.Client()}
}

func toolSpec(url string, mode v1.IdempotencyMode) *v1.ToolSpec {
	prefix := "/" + strings.ToLower(string(mode))
	return &v1.ToolSpec{
		HTTP:        v1.HTTPBackend{URL: url},
		Idempotency: v1.ToolIdempotency{Mode: mode, Header: "Idempotency-Key"},
		Operations: []v1.ToolOperation{{
			Name: "charge.create", Method: "POST", Path: prefix + "/charges",
			Lookup: &v1.LookupRequest{Path: prefix + "/charges?key={idempotencyKey}",
				Found:  "response.status == 200 && type(response.body) == map && response.body.key == key",
				Absent: "response.status == 404 && type(response.body) == map && response.body.error == 'not_found'"},
			Response: v1.ResponseMapping{
				ExternalObjectID: "response.body.id",
				Result:           "{'id': response.body.id, 'amount': response.body.parameters.amount}",
				Outcomes: []v1.OutcomeRule{{
					When: "response.status == 422 && response.body.error == 'idempotency_key_reused'", Outcome: v1.OutcomePermanent,
				}},
			},
		}},
	}
}

// loopback is the egress policy of tests: the tools run on 127.0.0.1.
var loopback = &Egress{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

func newClient(t testing.TB, spec *v1.ToolSpec, transport nethttp.RoundTripper) *Client {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(spec); err != nil {
		t.Fatalf("test tool is invalid: %v", err)
	}
	if transport == nil {
		transport = NewTransport(loopback)
	}
	return NewClient(spec, nethttp.Header{}, transport, c)
}

type callView struct {
	Outcome    v1.Outcome
	HTTPStatus int32
	HasID      bool
	Result     string
	RetryAfter time.Duration
	Effects    int
}

func TestExecute(t *testing.T) {
	cases := map[string]struct {
		reason  string
		fault   string
		params  string
		timeout time.Duration
		want    callView
	}{
		"Success": {
			reason: "2xx commits, with the id and the result the tool's expressions map",
			want: callView{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201, HasID: true,
				Result: `{"amount":100,"id":"ch_1"}`, Effects: 1},
		},
		"Rejected": {
			reason: "a 4xx business rejection is permanent and has no effect",
			params: `{"amount": 100, "reject": "card_declined"}`,
			want:   callView{Outcome: v1.OutcomePermanent, HTTPStatus: 422},
		},
		"Unavailable": {
			reason: "503 with Retry-After is retryable, and the delay is kept",
			fault:  "503=3",
			want:   callView{Outcome: v1.OutcomeRetryable, HTTPStatus: 503, RetryAfter: 3 * time.Second},
		},
		"TooManyRequests": {
			reason: "429 is retryable",
			fault:  "429",
			want:   callView{Outcome: v1.OutcomeRetryable, HTTPStatus: 429, RetryAfter: time.Second},
		},
		"BadGateway": {
			reason: "502 is retryable by default",
			fault:  "502",
			want:   callView{Outcome: v1.OutcomeRetryable, HTTPStatus: 502},
		},
		"ResponseLost": {
			reason: "the tool committed and the answer was lost: unknown, never retryable",
			fault:  "drop-after-commit",
			want:   callView{Outcome: v1.OutcomeUnknown, Effects: 1},
		},
		"ResetAfterCommit": {
			reason: "a reset after the request was sent is unknown",
			fault:  "reset-after-commit",
			want:   callView{Outcome: v1.OutcomeUnknown, Effects: 1},
		},
		"ResetBeforeCommit": {
			reason: "a reset after the request was sent is unknown, even if the tool did nothing: the caller cannot tell",
			fault:  "reset-before-commit",
			want:   callView{Outcome: v1.OutcomeUnknown},
		},
		"ServerErrorAfterCommit": {
			reason: "500 with no body may have applied: unknown",
			fault:  "500-after-commit",
			want:   callView{Outcome: v1.OutcomeUnknown, HTTPStatus: 500, Effects: 1},
		},
		"Timeout": {
			reason:  "a timeout after the request was sent is unknown",
			fault:   "delay-after-commit=2s",
			timeout: 300 * time.Millisecond,
			want:    callView{Outcome: v1.OutcomeUnknown, Effects: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url, ledger := startSandbox(t)
			c := newClient(t, toolSpec(url, v1.IdempotencyNative), nil)
			if tc.fault != "" {
				c.headers.Set(sandbox.HeaderFault, tc.fault)
			}
			params, timeout := tc.params, tc.timeout
			if params == "" {
				params = `{"amount":100}`
			}
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1",
				Parameters: []byte(params), Timeout: timeout})
			sum, err := ledger.Summary(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got := callView{Outcome: r.Outcome, HTTPStatus: r.HTTPStatus, HasID: r.ExternalObjectID != "",
				RetryAfter: r.RetryAfter, Effects: sum.Effects}
			if r.Result != nil {
				got.Result = string(r.Result.Raw)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: -want, +got:\n%s\nmessage: %s", tc.reason, diff, r.Message)
			}
		})
	}
}

func TestExecuteNeverSent(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	cases := map[string]string{
		"ConnectionRefused": closed,
		"NoSuchHost":        "http://once-sandbox.invalid",
	}
	for name, url := range cases {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, toolSpec(url, v1.IdempotencyNone), nil)
			r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k",
				Parameters: []byte(`{}`), Timeout: 5 * time.Second})
			if r.Outcome != v1.OutcomeRetryable || !strings.Contains(r.Message, "never left") {
				t.Errorf("a request that never left is retryable: got %s: %s", r.Outcome, r.Message)
			}
		})
	}
}

func TestExecuteNativeReplayAndMismatch(t *testing.T) {
	url, ledger := startSandbox(t)
	c := newClient(t, toolSpec(url, v1.IdempotencyNative), nil)
	call := func(params string) protocol.CallResult {
		return c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1",
			Parameters: []byte(params), Timeout: 5 * time.Second})
	}
	first, again, other := call(`{"amount":100}`), call(`{"amount":100}`), call(`{"amount":999}`)
	if first.Outcome != v1.OutcomeSucceeded || again.Outcome != v1.OutcomeSucceeded {
		t.Fatalf("first and repeated call must succeed: %s, %s", first.Message, again.Message)
	}
	if first.ExternalObjectID != again.ExternalObjectID {
		t.Errorf("a repeat with the same key must return the first result: %s != %s", first.ExternalObjectID, again.ExternalObjectID)
	}
	if other.Outcome != v1.OutcomePermanent {
		t.Errorf("same key, other parameters: the tool's 422 is permanent, got %s", other.Outcome)
	}
	if sum, _ := ledger.Summary(context.Background()); sum.Effects != 1 {
		t.Errorf("want exactly one effect, got %d", sum.Effects)
	}
}

// TestNoHiddenReplay shows that net/http replays a request carrying an
// Idempotency-Key on a reused connection that fails, and that Once's
// client does not, even on a transport that reuses connections.
func TestNoHiddenReplay(t *testing.T) {
	drop := func(t *testing.T, send func(url string)) int {
		url, ledger := startSandbox(t)
		send(url)
		sum, err := ledger.Summary(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return sum.Keys["none/charges/create/k2"]
	}
	keepAlive := &nethttp.Transport{}
	defer keepAlive.CloseIdleConnections()

	naive := drop(t, func(url string) {
		for i, fault := range []string{"", "drop-after-commit"} {
			req, _ := nethttp.NewRequest("POST", url+"/none/charges", bytes.NewReader([]byte(`{}`)))
			req.Header.Set("Idempotency-Key", []string{"k1", "k2"}[i])
			if fault != "" {
				req.Header.Set(sandbox.HeaderFault, fault)
			}
			if resp, err := keepAlive.RoundTrip(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		}
	})
	ours := drop(t, func(url string) {
		c := newClient(t, toolSpec(url, v1.IdempotencyNone), keepAlive)
		for i, fault := range []string{"", "drop-after-commit"} {
			if fault != "" {
				c.headers.Set(sandbox.HeaderFault, fault)
			}
			c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: []string{"k1", "k2"}[i],
				Parameters: []byte(`{}`), Timeout: 5 * time.Second})
		}
	})
	if naive < 2 {
		t.Logf("net/http did not replay this time (%d effects); the control proves nothing on this run", naive)
	}
	if ours != 1 {
		t.Errorf("Once's client must send a request at most once: %d effects for one call", ours)
	}
	if !NewTransport(nil).DisableKeepAlives {
		t.Error("the effect transport must not reuse connections")
	}
}

func TestLookup(t *testing.T) {
	url, ledger := startSandbox(t)
	c := newClient(t, toolSpec(url, v1.IdempotencyLookup), nil)
	req := effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1", Parameters: []byte(`{"amount":5}`),
		Timeout: time.Second}
	if got := c.Lookup(context.Background(), req); got.Verdict != protocol.VerdictAbsent {
		t.Errorf("before any call: want Absent, got %s: %s", got.Verdict, got.Message)
	}
	if r := c.Execute(context.Background(), req); r.Outcome != v1.OutcomeSucceeded {
		t.Fatalf("execute: %s", r.Message)
	}
	found := c.Lookup(context.Background(), req)
	if found.Verdict != protocol.VerdictFound || found.ExternalObjectID == "" || found.Result == nil {
		t.Errorf("after the call: want Found with id and result, got %+v", found)
	}
	for name, fault := range map[string]string{"Unavailable": "lookup-503", "Slow": "lookup-timeout=3s"} {
		t.Run(name, func(t *testing.T) {
			c.headers.Set(sandbox.HeaderFault, fault)
			defer c.headers.Del(sandbox.HeaderFault)
			if err := ledger.SetFaults(context.Background(), 1, []sandbox.FaultRule{{Method: "GET", Fault: fault}}); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = ledger.ClearFaults(context.Background()) }()
			if got := c.Lookup(context.Background(), req); got.Verdict != protocol.VerdictUndecidable {
				t.Errorf("a failed lookup proves nothing: want Undecidable, got %s", got.Verdict)
			}
		})
	}
}

func TestHeadersAndSecrets(t *testing.T) {
	var seen atomic.Value
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		seen.Store(r.Header.Clone())
		w.WriteHeader(nethttp.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":"forbidden"}`))
	}))
	defer srv.Close()
	c := newClient(t, toolSpec(srv.URL, v1.IdempotencyNative), nil)
	c.headers.Set("Authorization", "Bearer s3cr3t")
	r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/op/k",
		Parameters: []byte(`{}`), Timeout: time.Second})
	h := seen.Load().(nethttp.Header)
	if h.Get("Authorization") != "Bearer s3cr3t" || h.Get("Idempotency-Key") != "ns/op/k" {
		t.Errorf("the credential and the key must be sent: %v", h)
	}
	if r.Outcome != v1.OutcomePermanent {
		t.Errorf("403 is permanent, got %s", r.Outcome)
	}
	if strings.Contains(r.Message+r.Request, "s3cr3t") {
		t.Errorf("a secret leaked into the result: %q %q", r.Request, r.Message)
	}
}

func TestDefaultOutcome(t *testing.T) {
	cases := map[string]struct {
		status int
		mode   v1.IdempotencyMode
		want   v1.Outcome
	}{
		"OK":                  {200, v1.IdempotencyNone, v1.OutcomeSucceeded},
		"Created":             {201, v1.IdempotencyNative, v1.OutcomeSucceeded},
		"BadRequest":          {400, v1.IdempotencyNative, v1.OutcomePermanent},
		"Unauthorized":        {401, v1.IdempotencyNative, v1.OutcomePermanent},
		"Forbidden":           {403, v1.IdempotencyNative, v1.OutcomePermanent},
		"NotFound":            {404, v1.IdempotencyNative, v1.OutcomePermanent},
		"Unprocessable":       {422, v1.IdempotencyLookup, v1.OutcomePermanent},
		"ConflictNative":      {409, v1.IdempotencyNative, v1.OutcomeUnknown},
		"ConflictLookup":      {409, v1.IdempotencyLookup, v1.OutcomeUnknown},
		"ConflictNone":        {409, v1.IdempotencyNone, v1.OutcomeUnknown},
		"RequestTimeout":      {408, v1.IdempotencyNone, v1.OutcomeUnknown},
		"RequestTimeoutNtv":   {408, v1.IdempotencyNative, v1.OutcomeRetryable},
		"TooManyRequests":     {429, v1.IdempotencyNone, v1.OutcomeRetryable},
		"InternalServerError": {500, v1.IdempotencyNative, v1.OutcomeUnknown},
		"BadGateway":          {502, v1.IdempotencyNative, v1.OutcomeRetryable},
		"Unavailable":         {503, v1.IdempotencyNative, v1.OutcomeRetryable},
		"GatewayTimeout":      {504, v1.IdempotencyNative, v1.OutcomeRetryable},
		"BadGatewayLookup":    {502, v1.IdempotencyLookup, v1.OutcomeUnknown},
		"UnavailableNone":     {503, v1.IdempotencyNone, v1.OutcomeUnknown},
		"GatewayTimeoutNone":  {504, v1.IdempotencyNone, v1.OutcomeUnknown},
		"NotImplemented":      {501, v1.IdempotencyNative, v1.OutcomeUnknown},
		"Redirect":            {302, v1.IdempotencyNative, v1.OutcomeUnknown},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := DefaultOutcome(tc.status, tc.mode); got != tc.want {
				t.Errorf("DefaultOutcome(%d, %s): want %s, got %s", tc.status, tc.mode, tc.want, got)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	c, _ := NewCompiler()
	good := toolSpec("http://tool", v1.IdempotencyLookup)
	if err := c.Validate(good); err != nil {
		t.Fatalf("valid tool: %v", err)
	}
	bad := toolSpec("http://tool", v1.IdempotencyLookup)
	bad.Operations[0].Response.ExternalObjectID = "response.body.id +"
	bad.Operations[0].Lookup.Path = "charges"
	err := c.Validate(bad)
	if err == nil || !strings.Contains(err.Error(), "externalObjectID") || !strings.Contains(err.Error(), "lookup.path") {
		t.Errorf("both problems must be reported with their fields: %v", err)
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		header string
		want   time.Duration
	}{
		"Empty":   {"", 0},
		"Seconds": {"7", 7 * time.Second},
		"Date":    {now.Add(90 * time.Second).Format(nethttp.TimeFormat), 90 * time.Second},
		"Past":    {now.Add(-time.Minute).Format(nethttp.TimeFormat), 0},
		"Garbage": {"soon", 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := retryAfter(tc.header, now); got != tc.want {
				t.Errorf("retryAfter(%q): want %s, got %s", tc.header, tc.want, got)
			}
		})
	}
}

// TestRetryAfterByCallersClock: a Retry-After date is read against the
// caller's clock, the one its backoff is measured by, not the host's.
func TestRetryAfterByCallersClock(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.Header().Set("Retry-After", now.Add(90*time.Second).Format(nethttp.TimeFormat))
		w.WriteHeader(nethttp.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, toolSpec(srv.URL, v1.IdempotencyNative), nil)
	r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1",
		Parameters: []byte(`{"amount":100}`), Timeout: 5 * time.Second, Clock: func() time.Time { return now }})
	if r.Outcome != v1.OutcomeRetryable || r.RetryAfter != 90*time.Second {
		t.Errorf("want retryable after 1m30s by the caller's clock, got %s after %s: %s", r.Outcome, r.RetryAfter, r.Message)
	}
}

// TestRelayed: a Native tool's 504 by the default table is retried only as
// a same-key re-send, and says so; the tool's own rule vouches for its
// answer.
func TestRelayed(t *testing.T) {
	url, _ := startSandbox(t)
	req := effects.Request{Operation: "charge.create", Key: "relayed/1", Parameters: []byte(`{"amount":1}`),
		Timeout: 5 * time.Second}
	spec := toolSpec(url, v1.IdempotencyNative)
	ctx := context.Background()
	call := func(spec *v1.ToolSpec, fault string) protocol.CallResult {
		c := newClient(t, spec, nethttp.RoundTripper(faultHeader{fault, NewTransport(loopback)}))
		return c.Execute(ctx, req)
	}
	if r := call(spec, "504"); r.Outcome != v1.OutcomeRetryable || !r.Relayed {
		t.Errorf("a Native 504: %s, relayed %v", r.Outcome, r.Relayed)
	}
	if r := call(spec, "429=0"); r.Outcome != v1.OutcomeRetryable || r.Relayed {
		t.Errorf("a 429 is the tool's own refusal: %s, relayed %v", r.Outcome, r.Relayed)
	}
	spec.Operations[0].Response.Outcomes = append(spec.Operations[0].Response.Outcomes,
		v1.OutcomeRule{When: "response.status == 504", Outcome: v1.OutcomeRetryable})
	if r := call(spec, "504"); r.Outcome != v1.OutcomeRetryable || r.Relayed {
		t.Errorf("a rule vouches for the answer: %s, relayed %v", r.Outcome, r.Relayed)
	}
}

// faultHeader asks the sandbox for a fault on every request.
type faultHeader struct {
	fault string
	next  nethttp.RoundTripper
}

func (f faultHeader) RoundTrip(r *nethttp.Request) (*nethttp.Response, error) {
	r.Header.Set(sandbox.HeaderFault, f.fault)
	return f.next.RoundTrip(r)
}

// TestRequestHeaders: the headers a request brings (the outbox's CloudEvents
// attributes) are sent, and never replace the tool's own credentials nor
// its idempotency key.
func TestRequestHeaders(t *testing.T) {
	var seen atomic.Value
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		seen.Store(r.Header.Clone())
		w.WriteHeader(nethttp.StatusAccepted)
	}))
	defer srv.Close()
	c := newClient(t, toolSpec(srv.URL, v1.IdempotencyNative), nil)
	c.headers.Set("Authorization", "Bearer s3cr3t")
	c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "event-1",
		Parameters: []byte(`{}`), Timeout: time.Second, Headers: map[string]string{
			"Ce-Id": "event-1", "Ce-Specversion": "1.0",
			"Authorization": "Bearer forged", "Idempotency-Key": "other",
		}})
	h := seen.Load().(nethttp.Header)
	if h.Get("Ce-Id") != "event-1" || h.Get("Ce-Specversion") != "1.0" {
		t.Errorf("the request's headers must be sent: %v", h)
	}
	if h.Get("Authorization") != "Bearer s3cr3t" || h.Get("Idempotency-Key") != "event-1" {
		t.Errorf("the tool's credentials and the request's key win over the request's headers: %v", h)
	}
}
