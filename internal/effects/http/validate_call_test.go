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
	"encoding/base64"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/test/sandbox"
)

// validateSpec is the sandbox's charges in mode, with their dry run.
func validateSpec(url string, mode v1.IdempotencyMode) *v1.ToolSpec {
	spec := toolSpec(url, mode)
	prefix := "/" + strings.ToLower(string(mode))
	spec.Operations[0].Validate = &v1.ValidateRequest{Path: prefix + "/charges/validate",
		Message: "response.body.message"}
	return spec
}

// validateView is what a test compares of a dry run.
type validateView struct {
	Verdict    effects.ValidateVerdict
	HTTPStatus int32
	// Message is compared by its start.
	Message string
}

func viewOf(r effects.ValidateResult, prefix string) validateView {
	got := validateView{Verdict: r.Verdict, HTTPStatus: r.HTTPStatus, Message: r.Message}
	if strings.HasPrefix(r.Message, prefix) {
		got.Message = prefix
	}
	return got
}

func TestValidateCall(t *testing.T) {
	cases := map[string]struct {
		reason  string
		mode    v1.IdempotencyMode
		message string // the validate's message expression, if not the default one
		fault   string
		params  string
		timeout time.Duration
		want    validateView
	}{
		"Valid": {
			reason: "a 200 from the dry run: the tool would accept the request",
			want:   validateView{Verdict: effects.ValidateValid, HTTPStatus: 200},
		},
		"ValidInEveryMode": {
			reason: "the idempotency mode does not change what a dry run means",
			mode:   v1.IdempotencyNone,
			want:   validateView{Verdict: effects.ValidateValid, HTTPStatus: 200},
		},
		"Rejected": {
			reason: "a 422 is the tool's refusal; its message comes from the body",
			params: `{"amount": 100, "reject": "card_declined"}`,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 422,
				Message: "the create would be rejected: card_declined"},
		},
		"RejectedWithoutMessage": {
			reason:  "without a message expression, the status and the start of the body explain the refusal",
			message: "-",
			params:  `{"amount": 100, "reject": "card_declined"}`,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 422,
				Message: `422 Unprocessable Entity: {"error":"rejected","message":"the create would be rejected: card_declined","reason":"card_declined"}`},
		},
		"MessageOfAnotherShape": {
			reason:  "a message expression that fails on the body falls back to the summary",
			message: "response.body.detail",
			fault:   sandbox.Fault422,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 422,
				Message: `422 Unprocessable Entity: {"error":"rejected"`},
		},
		"RefusedByTheTool": {
			reason: "a refusal the body does not explain is still the tool's",
			fault:  sandbox.Fault422,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 422,
				Message: "the tool refuses this request"},
		},
		"Unavailable": {
			reason: "a 503 decides nothing",
			fault:  "503",
			want: validateView{Verdict: effects.ValidateUndecided, HTTPStatus: 503,
				Message: "the answer decides nothing: 503 Service Unavailable"},
		},
		"TooManyRequests": {
			reason: "a 429 is a 4xx that decides nothing",
			fault:  "429",
			want: validateView{Verdict: effects.ValidateUndecided, HTTPStatus: 429,
				Message: "the answer decides nothing: 429 Too Many Requests"},
		},
		"GatewayPage": {
			reason: "a gateway's HTML 502 decides nothing",
			fault:  sandbox.Fault502AfterCommit,
			want: validateView{Verdict: effects.ValidateUndecided, HTTPStatus: 502,
				Message: "the answer decides nothing: 502 Bad Gateway: <html>"},
		},
		"Reset": {
			reason: "a reset connection gives no answer",
			fault:  sandbox.FaultResetBeforeCommit,
			want:   validateView{Verdict: effects.ValidateUndecided, Message: "no answer to the validate request: "},
		},
		"Dropped": {
			reason: "a connection closed without an answer gives none",
			fault:  sandbox.FaultDropAfterCommit,
			want:   validateView{Verdict: effects.ValidateUndecided, Message: "no answer to the validate request: "},
		},
		"Timeout": {
			reason:  "a slow tool gives no answer in time",
			fault:   "delay-before-commit=2s",
			timeout: 200 * time.Millisecond,
			want:    validateView{Verdict: effects.ValidateUndecided, Message: "no answer to the validate request: "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			url, ledger := startSandbox(t)
			mode, params, timeout := tc.mode, tc.params, tc.timeout
			if mode == "" {
				mode = v1.IdempotencyNative
			}
			if params == "" {
				params = `{"amount":100}`
			}
			if timeout == 0 {
				timeout = 5 * time.Second
			}
			spec := validateSpec(url, mode)
			switch tc.message {
			case "":
			case "-":
				spec.Operations[0].Validate.Message = ""
			default:
				spec.Operations[0].Validate.Message = tc.message
			}
			c := newClient(t, spec, nil)
			if tc.fault != "" {
				c.headers.Set(sandbox.HeaderFault, tc.fault)
			}
			r := c.Validate(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1",
				Parameters: []byte(params), Timeout: timeout})
			if diff := cmp.Diff(tc.want, viewOf(r, tc.want.Message)); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
			done, err := ledger.Effects(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(done) != 0 {
				t.Errorf("a dry run has no effect: %d in the ledger", len(done))
			}
		})
	}
}

// answering is a tool that answers every request with status and body, and
// counts the requests.
func answering(t *testing.T, status int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestValidateExpressions(t *testing.T) {
	cases := map[string]struct {
		reason   string
		validate v1.ValidateRequest
		status   int
		body     string
		want     validateView
	}{
		"ValidByTheBody": {
			reason:   "a tool that answers 200 to every dry run says what it thinks in the body",
			validate: v1.ValidateRequest{Valid: "response.body.ok", Invalid: "!response.body.ok"},
			status:   200, body: `{"ok": true}`,
			want: validateView{Verdict: effects.ValidateValid, HTTPStatus: 200},
		},
		"InvalidByTheBody": {
			reason: "a 200 can be a refusal, explained by the message expression",
			validate: v1.ValidateRequest{Valid: "response.body.ok", Invalid: "!response.body.ok",
				Message: "response.body.errors[0].detail"},
			status: 200, body: `{"ok": false, "errors": [{"detail": "amount exceeds the limit"}]}`,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 200, Message: "amount exceeds the limit"},
		},
		"ValidFailsOnARefusal": {
			reason:   "a valid expression that fails on a refusal's body does not hide the refusal",
			validate: v1.ValidateRequest{Valid: "response.body.ok == true"},
			status:   400, body: `{"error": "currency not supported"}`,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 400,
				Message: `400 Bad Request: {"error":"currency not supported"}`},
		},
		"NeitherDecides": {
			reason:   "an answer neither expression recognises decides nothing",
			validate: v1.ValidateRequest{Valid: "response.status == 200", Invalid: "response.status == 422"},
			status:   418, body: `{"error": "teapot"}`,
			want: validateView{Verdict: effects.ValidateUndecided, HTTPStatus: 418,
				Message: `the answer decides nothing: 418 I'm a teapot: {"error":"teapot"}`},
		},
		"EvaluationErrors": {
			reason:   "expressions that fail decide nothing, and the message says why",
			validate: v1.ValidateRequest{Valid: "response.body.valid", Invalid: "response.body.invalid"},
			status:   200, body: `{}`,
			want: validateView{Verdict: effects.ValidateUndecided, HTTPStatus: 200,
				Message: `the answer decides nothing: 200 OK: {}; evaluating "response.body.valid": no such key: valid; ` +
					`evaluating "response.body.invalid": no such key: invalid`},
		},
		"MessageNotAString": {
			reason:   "a message that is not a string falls back to the summary, and says why",
			validate: v1.ValidateRequest{Message: "response.body"},
			status:   409, body: `{"error": "duplicate"}`,
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 409,
				Message: `409 Conflict: {"error":"duplicate"}; "response.body" is map, not a string`},
		},
		"LongMessageCapped": {
			reason:   "a refusal's explanation is capped",
			validate: v1.ValidateRequest{Message: "response.body.message"},
			status:   422, body: fmt.Sprintf(`{"message": %q}`, strings.Repeat("é", 400)),
			want: validateView{Verdict: effects.ValidateInvalid, HTTPStatus: 422,
				Message: strings.Repeat("é", maxRefusal/2) + "..."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv, _ := answering(t, tc.status, tc.body)
			spec := toolSpec(srv.URL, v1.IdempotencyNative)
			tc.validate.Path = "/validate"
			spec.Operations[0].Validate = &tc.validate
			c := newClient(t, spec, nil)
			r := c.Validate(context.Background(), effects.Request{Operation: "charge.create", Key: "k",
				Parameters: []byte(`{"amount":1}`), Timeout: 5 * time.Second})
			if diff := cmp.Diff(tc.want, validateView{Verdict: r.Verdict, HTTPStatus: r.HTTPStatus, Message: r.Message}); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// sent is a request as a tool received it.
type sent struct {
	Method string
	URI    string
	Key    string
	Body   string
}

// recording is a tool that answers 200 and keeps the last request.
func recording(t *testing.T) (*httptest.Server, *atomic.Pointer[sent]) {
	t.Helper()
	var last atomic.Pointer[sent]
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		last.Store(&sent{Method: r.Method, URI: r.URL.RequestURI(), Key: r.Header.Get("Idempotency-Key"), Body: string(b)})
		w.WriteHeader(nethttp.StatusOK)
	}))
	t.Cleanup(srv.Close)
	return srv, &last
}

func TestValidateRequestShape(t *testing.T) {
	shape := &v1.RequestShape{
		PathValues: []v1.NamedValue{{Name: "account", Value: "parameters.account"}},
		Body:       "{'amount': parameters.amount, 'ref': key}",
	}
	cases := map[string]struct {
		reason   string
		validate v1.ValidateRequest
		params   string
		want     *sent
		verdict  effects.ValidateVerdict
		message  string
	}{
		"OperationsShape": {
			reason:   "without a shape of its own, the dry run sends what the operation would, with the key",
			validate: v1.ValidateRequest{Path: "/v1/accounts/{account}/charges/validate"},
			params:   `{"account": "acc 1", "amount": 100}`,
			want: &sent{Method: "POST", URI: "/v1/accounts/acc%201/charges/validate", Key: "ns/op/k",
				Body: `{"amount":100,"ref":"ns/op/k"}`},
			verdict: effects.ValidateValid,
		},
		"OwnShape": {
			reason: "a shape of its own replaces the operation's",
			validate: v1.ValidateRequest{Method: "GET", Path: "/check",
				Request: &v1.RequestShape{Query: []v1.NamedValue{{Name: "amount", Value: "parameters.amount"}}}},
			params:  `{"amount": 100}`,
			want:    &sent{Method: "GET", URI: "/check?amount=100", Key: "ns/op/k"},
			verdict: effects.ValidateValid,
		},
		"Unbuildable": {
			reason:   "parameters the request cannot be built from are refused before anything is sent",
			validate: v1.ValidateRequest{Path: "/v1/accounts/{account}/charges/validate"},
			params:   `{"amount": 100}`,
			verdict:  effects.ValidateInvalid,
			message:  "the validate request cannot be built: path value account: ",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv, last := recording(t)
			spec := toolSpec(srv.URL, v1.IdempotencyNative)
			spec.Operations[0].Path = "/v1/accounts/{account}/charges"
			spec.Operations[0].Request = shape
			spec.Operations[0].Lookup = nil
			spec.Operations[0].Validate = &tc.validate
			c := newClient(t, spec, nil)
			r := c.Validate(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/op/k",
				Parameters: []byte(tc.params), Timeout: 5 * time.Second})
			got := validateView{Verdict: r.Verdict, Message: r.Message}
			if strings.HasPrefix(r.Message, tc.message) {
				got.Message = tc.message
			}
			if diff := cmp.Diff(validateView{Verdict: tc.verdict, Message: tc.message}, got); diff != "" {
				t.Errorf("%s: verdict -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, last.Load()); diff != "" {
				t.Errorf("%s: request -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestValidateSendsNothing: where there is nothing to ask, or nothing may
// be asked, no request leaves.
func TestValidateSendsNothing(t *testing.T) {
	srv, hits := answering(t, 200, `{}`)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	cases := map[string]struct {
		reason    string
		url       string
		operation string
		noOffer   bool
		egress    *Egress
		want      validateView
		contains  string
	}{
		"NotOffered": {
			reason: "an operation without a validate request offers no dry run",
			url:    srv.URL, noOffer: true,
			want: validateView{Verdict: effects.ValidateNotOffered},
		},
		"NoSuchOperation": {
			reason: "an operation the tool does not declare would be refused",
			url:    srv.URL, operation: "charge.refund",
			want: validateView{Verdict: effects.ValidateInvalid, Message: `the tool offers no operation "charge.refund"`},
		},
		"EgressRefused": {
			reason: "an address the egress policy refuses would refuse the operation too",
			url:    srv.URL, egress: &Egress{},
			want:     validateView{Verdict: effects.ValidateInvalid, Message: "the validate request never left: "},
			contains: "egress refused",
		},
		"NeverLeft": {
			reason: "a refused connection decides nothing",
			url:    closed,
			want:   validateView{Verdict: effects.ValidateUndecided, Message: "the validate request never left: "},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := validateSpec(tc.url, v1.IdempotencyNative)
			if tc.noOffer {
				spec.Operations[0].Validate = nil
			}
			transport := NewTransport(loopback)
			if tc.egress != nil {
				transport = NewTransport(tc.egress)
			}
			operation := tc.operation
			if operation == "" {
				operation = "charge.create"
			}
			c := newClient(t, spec, transport)
			r := c.Validate(context.Background(), effects.Request{Operation: operation,
				Key: "k", Parameters: []byte(`{}`), Timeout: 5 * time.Second})
			if diff := cmp.Diff(tc.want, viewOf(r, tc.want.Message)); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
			if !strings.Contains(r.Message, tc.contains) {
				t.Errorf("%s: want a message about %q, got %q", tc.reason, tc.contains, r.Message)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("no request may reach the tool: %d did", n)
	}
}

// TestValidateScrubsSecrets: a tool that echoes the credential it was sent
// in its refusal, in its message or in an error page, never gets it into
// the result.
func TestValidateScrubsSecrets(t *testing.T) {
	const secret = "Bearer tok/en+Secret=="
	forms := []string{secret, "tok/en+Secret==", base64.StdEncoding.EncodeToString([]byte(secret)), `tok\/en+Secret==`}
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		auth := r.Header.Get("Authorization")
		switch r.URL.Path {
		case "/refuse":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(nethttp.StatusUnprocessableEntity)
			_, _ = fmt.Fprintf(w, `{"message": %q, "b64": %q}`, "key "+auth+" is not allowed",
				base64.StdEncoding.EncodeToString([]byte(auth)))
		case "/crash":
			w.WriteHeader(nethttp.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, "panic: header %q", auth)
		}
	}))
	defer srv.Close()
	cases := map[string]struct {
		path    string
		message string
		want    effects.ValidateVerdict
	}{
		"MessageFromTheBody": {path: "/refuse", message: "response.body.message", want: effects.ValidateInvalid},
		"SummaryOfTheBody":   {path: "/refuse", want: effects.ValidateInvalid},
		"ErrorPage":          {path: "/crash", want: effects.ValidateUndecided},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := echoToolSpec(srv.URL)
			spec.Operations[0].Validate = &v1.ValidateRequest{Path: tc.path, Message: tc.message}
			c := connectTo(t, spec, secret)
			r := c.Validate(context.Background(), effects.Request{Operation: "default", Key: "k", Timeout: time.Second})
			if r.Verdict != tc.want {
				t.Errorf("want %s, got %s: %s", tc.want, r.Verdict, r.Message)
			}
			if found := leaks(r.Message, forms); len(found) > 0 {
				t.Errorf("secret forms %q leaked into %q", found, r.Message)
			}
			if !strings.Contains(r.Message, redacted) {
				t.Errorf("want the secret replaced by %s in %q", redacted, r.Message)
			}
		})
	}
}

func TestCompilerValidatesValidate(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		validate v1.ValidateRequest
		// want are the fields the error must name; none for a valid tool.
		want []string
	}{
		"Defaults": {validate: v1.ValidateRequest{Path: "/charges/validate"}},
		"AllExpressions": {validate: v1.ValidateRequest{Path: "/charges/{id}/validate",
			Request: &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "id", Value: "parameters.id"}}},
			Valid:   "response.body.ok", Invalid: "!response.body.ok", Message: "response.body.errors[0].detail"}},
		"BadValid": {validate: v1.ValidateRequest{Path: "/v", Valid: "response.status >="},
			want: []string{"spec.operations[0].validate.valid"}},
		"BadInvalidAndMessage": {validate: v1.ValidateRequest{Path: "/v", Invalid: "response.(", Message: "1 +"},
			want: []string{"spec.operations[0].validate.invalid", "spec.operations[0].validate.message"}},
		"BadPath": {validate: v1.ValidateRequest{Path: "validate"},
			want: []string{"spec.operations[0].validate.path"}},
		"UnfilledPlaceholder": {validate: v1.ValidateRequest{Path: "/charges/{id}/validate"},
			want: []string{"spec.operations[0].validate.path: {id} has no value"}},
		"BadShape": {validate: v1.ValidateRequest{Path: "/v", Request: &v1.RequestShape{Body: "{'a':"}},
			want: []string{"spec.operations[0].validate.request.body"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := toolSpec("http://tool", v1.IdempotencyLookup)
			spec.Operations[0].Validate = &tc.validate
			err := c.Validate(spec)
			if len(tc.want) == 0 {
				if err != nil {
					t.Errorf("want a valid tool, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want an error naming %q, got none", tc.want)
			}
			for _, field := range tc.want {
				if !strings.Contains(err.Error(), field) {
					t.Errorf("want an error naming %q, got %v", field, err)
				}
			}
		})
	}
}

// TestValidatePathFilledByOperationShape: a validate path may use the
// operation's path values.
func TestValidatePathFilledByOperationShape(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	spec := toolSpec("http://tool", v1.IdempotencyLookup)
	spec.Operations[0].Request = &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "id", Value: "parameters.id"}}}
	spec.Operations[0].Validate = &v1.ValidateRequest{Path: "/charges/{id}/validate"}
	if err := c.Validate(spec); err != nil {
		t.Errorf("the operation's shape fills the validate path: %v", err)
	}
}
