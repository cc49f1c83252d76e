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
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	goruntime "runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/worstcase"
)

// echoTool answers with every request header it received: in a JSON body
// (in the clear, base64-encoded and with escaped slashes), in a response
// header, and in a text error for paths under /fail.
func echoTool(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		auth := r.Header.Get("Authorization")
		w.Header().Set("X-Echo-Authorization", auth)
		w.Header().Set("X-Request-Id", "req-"+auth)
		if strings.HasPrefix(r.URL.Path, "/fail") {
			w.WriteHeader(nethttp.StatusForbidden)
			_, _ = fmt.Fprintf(w, "forbidden: you sent %v (%s)", r.Header, base64.StdEncoding.EncodeToString([]byte(auth)))
			return
		}
		if strings.HasPrefix(r.URL.Path, "/crash") {
			w.WriteHeader(nethttp.StatusInternalServerError)
			_, _ = fmt.Fprintf(w, "panic: header %q", auth)
			return
		}
		escaped, _ := json.Marshal(auth)
		// An encoder that escapes every byte, as a JSON string may: the
		// secret is in the decoded value only.
		var unicode strings.Builder
		for _, r := range auth {
			_, _ = fmt.Fprintf(&unicode, `\u%04x`, r)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"id":%s,"unicode":"%s","slashes":%s,"b64":%q,"url":%q,"headers":%s}`,
			escaped, unicode.String(), strings.ReplaceAll(string(escaped), "/", `\/`),
			base64.URLEncoding.EncodeToString([]byte(auth)), url.QueryEscape(auth), mustJSON(t, r.Header))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// echoToolSpec calls the echo tool; every mapping selects what echoes the
// secret.
func echoToolSpec(base string) *v1.ToolSpec {
	lookup := &v1.LookupRequest{Path: "/lookup?key={idempotencyKey}", Found: "response.status == 200 && has(response.body.id)"}
	return &v1.ToolSpec{
		HTTP: v1.HTTPBackend{URL: base, Headers: []v1.HTTPHeader{{Name: "Authorization",
			ValueFrom: &v1.HeaderSource{SecretKeyRef: v1.SecretKeySelector{Name: "creds", Key: "auth"}}}}},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyLookup},
		Operations: []v1.ToolOperation{
			{Name: "default", Path: "/ok", Lookup: lookup,
				Response: v1.ResponseMapping{ExternalObjectID: "response.body.id",
					ExternalRequestID: "response.headers['x-request-id']"}},
			{Name: "mapped", Path: "/ok", Lookup: lookup,
				Response: v1.ResponseMapping{ExternalObjectID: "response.body.unicode",
					Result: "{'auth': response.body.unicode, 'echo': response.headers['x-echo-authorization'], " +
						"'joined': response.body.headers.Authorization.join(',')}"}},
			{Name: "rejected", Path: "/fail"},
			{Name: "crash", Path: "/crash"},
		},
	}
}

// connectTo makes a Client the way the manager does: through a Connector
// that reads the header value from a Secret.
func connectTo(t *testing.T, spec *v1.ToolSpec, secret string) effects.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	secrets := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data:       map[string][]byte{"auth": []byte(secret)},
	}).Build()
	compiler, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	conn := &Connector{Secrets: secrets, Compiler: compiler, Transport: NewTransport(loopback), Egress: loopback}
	if err := conn.Validate(spec); err != nil {
		t.Fatalf("test tool is invalid: %v", err)
	}
	tool := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "echo"}, Spec: *spec}
	c, err := conn.Connect(context.Background(), tool)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// leaks returns the forms of a secret that show in s.
func leaks(s string, forms []string) []string {
	var found []string
	for _, f := range forms {
		if strings.Contains(s, f) {
			found = append(found, f)
		}
	}
	return found
}

func TestSecretsNeverReturned(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("alice:hunter2-password"))
	secrets := map[string]struct {
		value string
		// forms must not show anywhere in a result.
		forms []string
	}{
		"Bearer": {value: "Bearer tok/en+Secret==", forms: []string{"Bearer tok/en+Secret==", "tok/en+Secret==",
			base64.StdEncoding.EncodeToString([]byte("Bearer tok/en+Secret==")), url.QueryEscape("tok/en+Secret=="),
			`tok\/en+Secret==`}},
		"Basic": {value: "Basic " + basic, forms: []string{basic, "alice:hunter2-password", "hunter2-password"}},
		"APIKey": {value: "k3y-Sup3rS3cret", forms: []string{"k3y-Sup3rS3cret",
			base64.StdEncoding.EncodeToString([]byte("k3y-Sup3rS3cret"))}},
	}
	calls := map[string]struct {
		reason string
		call   func(c effects.Client) any
	}{
		"Committed": {
			reason: "the default result is response.body, and ids come from an echoing body and header",
			call: func(c effects.Client) any {
				return c.Execute(context.Background(), effects.Request{Operation: "default", Key: "k", Timeout: time.Second})
			},
		},
		"MappedResult": {
			reason: "a mapping can pick the decoded secret out of escapes, headers and lists",
			call: func(c effects.Client) any {
				return c.Execute(context.Background(), effects.Request{Operation: "mapped", Key: "k", Timeout: time.Second})
			},
		},
		"Rejected": {
			reason: "an error answer echoes the headers as text",
			call: func(c effects.Client) any {
				return c.Execute(context.Background(), effects.Request{Operation: "rejected", Key: "k", Timeout: time.Second})
			},
		},
		"Unknown": {
			reason: "a 500 quotes the header",
			call: func(c effects.Client) any {
				return c.Execute(context.Background(), effects.Request{Operation: "crash", Key: "k", Timeout: time.Second})
			},
		},
		"LookupFound": {
			reason: "a lookup's result and ids are scrubbed too",
			call: func(c effects.Client) any {
				return c.Lookup(context.Background(), effects.Request{Operation: "mapped", Key: "k", Timeout: time.Second})
			},
		},
	}
	srv := echoTool(t)
	for sname, sc := range secrets {
		for cname, cc := range calls {
			t.Run(sname+"/"+cname, func(t *testing.T) {
				c := connectTo(t, echoToolSpec(srv.URL), sc.value)
				got := cc.call(c)
				all := fmt.Sprintf("%+v", got)
				var raw []byte
				var digest string
				switch r := got.(type) {
				case protocol.CallResult:
					if r.Result != nil {
						raw, digest = r.Result.Raw, r.ResultDigest
					}
				case protocol.LookupResult:
					if r.Verdict != protocol.VerdictFound {
						t.Fatalf("lookup: want Found, got %s: %s", r.Verdict, r.Message)
					}
					if r.Result != nil {
						raw, digest = r.Result.Raw, r.ResultDigest
					}
				}
				all += string(raw)
				if found := leaks(all, sc.forms); len(found) > 0 {
					t.Errorf("%s: secret forms %q leaked into %s", cc.reason, found, all)
				}
				if !strings.Contains(all, redacted) {
					t.Errorf("%s: want the secret replaced by %s in %s", cc.reason, redacted, all)
				}
				if raw != nil && digest != protocol.Digest(raw) {
					t.Errorf("the digest must be the scrubbed result's: %s != %s", digest, protocol.Digest(raw))
				}
			})
		}
	}
}

func TestScrubberKeepsOtherText(t *testing.T) {
	s := newScrubber([]string{"Bearer abc"})
	for in, want := range map[string]string{
		"nothing secret": "nothing secret",
		// A part shorter than minSecretPart is not scrubbed on its own.
		"abc is short":        "abc is short",
		"got Bearer abc here": "got [redacted] here",
	} {
		if got := s.string(in); got != want {
			t.Errorf("scrub(%q): want %q, got %q", in, want, got)
		}
	}
}

func TestEgressCheck(t *testing.T) {
	e := &Egress{
		Refused: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("fd00:10::/64")},
		Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
	}
	cases := map[string]struct {
		ip      string
		refused bool
	}{
		"Public":               {"93.184.216.34", false},
		"Private":              {"10.0.0.5", false},
		"Metadata":             {"169.254.169.254", true},
		"MetadataMapped":       {"::ffff:169.254.169.254", true},
		"MetadataNAT64":        {"64:ff9b::a9fe:a9fe", true},
		"MetadataIPv6AWS":      {"fd00:ec2::254", true},
		"MetadataAlibaba":      {"100.100.100.200", true},
		"LinkLocalIPv6":        {"fe80::1", true},
		"LoopbackAllowed":      {"127.0.0.1", false},
		"LoopbackIPv6":         {"::1", true},
		"Unspecified":          {"0.0.0.0", true},
		"ThisNetwork":          {"0.1.2.3", true},
		"UnspecifiedIPv6":      {"::", true},
		"ServiceRange":         {"10.100.0.1", true},
		"PodRangeIPv6":         {"fd00:10::7", true},
		"OutsidePodRangeIPv6":  {"fd00:11::7", false},
		"MulticastRefused":     {"224.0.0.1", true},
		"PublicIPv6":           {"2001:db8::1", false},
		"NAT64PublicIsAllowed": {"64:ff9b::5db8:d822", false},
		// Every IPv6 form that carries an IPv4 address carries a refused
		// one: metadata, the cluster's range, and 127.0.0.1 where only
		// the IPv4 loopback is allowed (allowed through each form).
		"CompatibleMetadata":      {"::169.254.169.254", true},
		"CompatibleService":       {"::10.100.0.1", true},
		"CompatiblePublic":        {"::93.184.216.34", false},
		"CompatibleLoopback":      {"::127.0.0.1", false},
		"TranslatedMetadata":      {"::ffff:0:169.254.169.254", true},
		"TranslatedService":       {"::ffff:0:10.100.0.1", true},
		"TranslatedPublic":        {"::ffff:0:93.184.216.34", false},
		"SixToFourMetadata":       {"2002:a9fe:a9fe::1", true},
		"SixToFourPublic":         {"2002:5db8:d822::1", false},
		"LocalNAT64Metadata":      {"64:ff9b:1::a9fe:a9fe", true},
		"LocalNAT64Metadata48":    {"64:ff9b:1:a9fe:a9:fe00::", true},
		"LocalNAT64Public":        {"64:ff9b:1::5db8:d822", true},
		"NAT64ServiceRange":       {"64:ff9b::a64:1", true},
		"MappedServiceRange":      {"::ffff:10.100.0.1", true},
		"CompatibleUnspecifiedV4": {"::0.0.0.2", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := e.Check(netip.MustParseAddr(tc.ip))
			if got := err != nil; got != tc.refused {
				t.Errorf("Check(%s): want refused=%t, got %v", tc.ip, tc.refused, err)
			}
		})
	}
}

func TestEgressCheckURL(t *testing.T) {
	cases := map[string]struct {
		url  string
		want string
	}{
		"Name":        {"https://payments.example.com/v1", ""},
		"PublicIP":    {"http://93.184.216.34:8080", ""},
		"Metadata":    {"http://169.254.169.254/latest/meta-data", "link-local"},
		"Loopback":    {"http://127.0.0.1:9000", "loopback"},
		"IPv6Literal": {"http://[fe80::1%25eth0]:80", "link-local"},
		"Credentials": {"https://user:pass@payments.example.com", "credentials in the URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := (*Egress)(nil).CheckURL(tc.url)
			if tc.want == "" && err != nil {
				t.Errorf("CheckURL(%s): want no error, got %v", tc.url, err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("CheckURL(%s): want an error about %s, got %v", tc.url, tc.want, err)
			}
			if err != nil && strings.Contains(err.Error(), "pass") {
				t.Errorf("the error must not repeat the credentials: %v", err)
			}
		})
	}
}

// TestEgressRefusedAtDial shows that the policy holds on the address
// dialled, whatever the URL names: a refused call never leaves, fails for
// good (not retryable, not unknown), and a refused lookup decides nothing.
func TestEgressRefusedAtDial(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		hits.Add(1)
		w.WriteHeader(nethttp.StatusCreated)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(interface{ String() string }).String()
	port = port[strings.LastIndex(port, ":"):]
	cases := map[string]string{
		"Literal": srv.URL,
		// A name that resolves to the refused address, as DNS rebinding
		// would make it.
		"Name": "http://localhost" + port,
	}
	for name, u := range cases {
		t.Run(name, func(t *testing.T) {
			compiler, _ := NewCompiler()
			c := NewClient(toolSpec(u, v1.IdempotencyLookup), nethttp.Header{}, NewTransport(nil), compiler)
			req := effects.Request{Operation: "charge.create", Key: "k", Parameters: []byte(`{}`), Timeout: time.Second}
			r := c.Execute(context.Background(), req)
			if r.Outcome != v1.OutcomePermanent || !strings.Contains(r.Message, "never left") ||
				!strings.Contains(r.Message, "egress refused") {
				t.Errorf("a refused call fails for good and says why: got %s: %s", r.Outcome, r.Message)
			}
			l := c.Lookup(context.Background(), req)
			if l.Verdict != protocol.VerdictUndecidable || !strings.Contains(l.Message, "egress refused") {
				t.Errorf("a refused lookup decides nothing: got %s: %s", l.Verdict, l.Message)
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("no refused request may reach the tool: %d did", n)
	}
}

func TestCELCost(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	validation := map[string]struct {
		expr string
		want string
	}{
		"Cheap":         {"response.status == 422 && response.body.error == 'card_declined'", ""},
		"Search":        {"response.body.data.exists(c, c.status == 'paid')", ""},
		"TypeTest":      {"type(response.body) == map && 'error' in response.body", ""},
		"CrossProduct":  {"response.body.items.map(x, response.body.items.map(y, x + y))", "more than the limit"},
		"FilterThenMap": {"response.body.data.filter(c, c.status == 'paid').map(c, c.id)", ""},
		"SearchForKey":  {"response.body.items.exists(i, i.ref == key)", ""},
		"NestedSearch":  {"response.body.items.exists(i, response.body.items.exists(j, i.ref == j.ref))", "more than the limit"},
		// A matches() runs to its end, past the cost limit and the timeout:
		// on a 64 KiB answer each of these took seconds. Its program is
		// bounded when the tool is validated, and a pattern must be written
		// out (one taken from the answer is the tool's to choose).
		"RegexSmall": {"response.body.id.matches('^ch_[A-Za-z0-9]{24}$')", ""},
		"RegexNestedRepetition": {"response.body.matches('((a{1,10}){1,10}){1,10}b')",
			"compiles to 2222 instructions, more than the limit of 128"},
		"RegexLongRepetition": {"response.body.matches('[a-z]{1,1000}[0-9a-z]{1,1000}b')", "more than the limit of 128"},
		"RegexFromAnswer": {"response.body.text.matches(response.body.pattern)",
			"the pattern of matches() must be a string literal"},
		"RegexFromParameters": {"matches(response.body.text, parameters.pattern)",
			"the pattern of matches() must be a string literal"},
		"RegexBadPattern": {"response.body.matches('(')", "missing closing )"},
		// Each matches() costs its input's length times its program's size:
		// many of them on the whole answer are refused as a cross product is.
		"RegexMany": {strings.TrimSuffix(strings.Repeat("response.body.matches('[a-z]{1,60}b') || ", 20), " || "),
			"more than the limit"},
	}
	for name, tc := range validation {
		t.Run("Validate/"+name, func(t *testing.T) {
			spec := toolSpec("http://tool", v1.IdempotencyLookup)
			spec.Operations[0].Lookup.Found = tc.expr
			err := c.Validate(spec)
			if tc.want == "" && err != nil {
				t.Errorf("want valid, got %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) ||
				!strings.Contains(err.Error(), "lookup.found") || !strings.Contains(err.Error(), tc.expr)) {
				t.Errorf("want an error naming the field and the expression, about %q; got %v", tc.want, err)
			}
		})
	}

	// A body larger than the estimate assumed (here, handed over directly)
	// meets the run-time cost limit; a call whose time is up stops the
	// evaluation.
	list := make([]any, 1000)
	for i := range list {
		list[i] = "item"
	}
	atRunTime := map[string]struct {
		ctx  func() context.Context
		body any
		expr string
		want string
	}{
		"CostLimit": {ctx: context.Background, body: strings.Repeat("a", 120<<20),
			expr: "response.body.contains('needle')", want: "stopped at the cost limit"},
		"Cancelled": {ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}, body: list, expr: "response.body.exists(x, x == 'needle')", want: "stopped before its end"},
	}
	for name, tc := range atRunTime {
		t.Run("Run/"+name, func(t *testing.T) {
			_, err := c.Bool(tc.ctx(), tc.expr, response{Status: 200, Body: tc.body})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.expr) {
				t.Errorf("want an error naming the expression, about %q; got %v", tc.want, err)
			}
		})
	}
}

// TestCELBuildsBounded: an expression that cel-go's estimate lets through
// but that would build a value of hundreds of megabytes (a list of 12 000
// references to one 12 000-character string, joined or written as JSON)
// is stopped before it builds it.
func TestCELBuildsBounded(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	list := make([]any, 12_000)
	for i := range list {
		list[i] = int64(i)
	}
	body := map[string]any{"a": strings.Repeat("a", 12_000), "list": list}
	cases := map[string]struct {
		run  func(expr string) error
		expr string
		want string
		max  uint64 // bytes it may allocate; 8 MiB if zero
	}{
		"Join": {run: func(expr string) error {
			_, err := c.String(context.Background(), expr, response{Status: 200, Body: body})
			return err
		}, expr: "response.body.list.map(x, response.body.a).join()", want: "join() would build a string of",
			max: 16 << 20}, // the map()'s 12 000 steps, each charged as it goes
		"JSON": {run: func(expr string) error {
			_, err := c.JSON(context.Background(), expr, response{Status: 200, Body: body})
			return err
		}, expr: "response.body.list.map(x, response.body.a)", want: "the values may take"},
		// A Tool's limit is ten million: at a unit per byte built, ten MB
		// of concatenations, where cel-go charged + on dyn values 1 (a
		// review held 100 MB live with 760 of them).
		"Concatenation": {run: func(expr string) error {
			_, err := c.Bool(context.Background(), expr, response{Status: 200, Body: body,
				request: request{Parameters: strings.Repeat("p", 64<<10)}})
			return err
		}, expr: "[" + strings.TrimSuffix(strings.Repeat("0,", 760), ",") + "].map(i, parameters + parameters).size() > 0",
			want: "stopped at the cost limit", max: 24 << 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			goruntime.GC()
			n, _ := worstcase.Allocated(func() { err = tc.run(tc.expr) })
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.expr) {
				t.Errorf("want an error naming the expression, about %q; got %v", tc.want, err)
			}
			if most := cmp.Or(tc.max, 8<<20); n > most {
				t.Errorf("allocated %d bytes, more than %d", n, most)
			}
		})
	}
}

// TestBodyCut shows that CEL sees at most maxBody of an answer, and the
// message says so.
func TestBodyCut(t *testing.T) {
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		w.WriteHeader(nethttp.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":"x","pad":"%s"}`, strings.Repeat("a", 2*maxBody))
	}))
	defer srv.Close()
	spec := toolSpec(srv.URL, v1.IdempotencyNone)
	spec.Operations[0].Response = v1.ResponseMapping{Result: "size(response.body)"}
	c := newClient(t, spec, nil)
	r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k", Timeout: time.Second})
	if r.Outcome != v1.OutcomeSucceeded || r.Result == nil || string(r.Result.Raw) != fmt.Sprint(maxBody) {
		t.Errorf("CEL must see the first %d bytes of the body, as text: got %s, %v: %s", maxBody, r.Outcome, r.Result, r.Message)
	}
	if !strings.Contains(r.Message, "expressions saw only its first 64 KiB") {
		t.Errorf("the message must say the body was cut: %s", r.Message)
	}
}

// TestTimeLimit shows that an expression stopped by its wall-clock limit
// (a CPU starved by other work, here a limit of a nanosecond) decides
// nothing: the call is retryable and the dry run undecided, with nothing
// sent; on the next try the same expression goes through.
func TestTimeLimit(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
		hits.Add(1)
		w.WriteHeader(nethttp.StatusCreated)
		_, _ = w.Write([]byte(`{"id":"ch_1"}`))
	}))
	defer srv.Close()
	spec := toolSpec(srv.URL, v1.IdempotencyNone)
	// A comprehension of 200 iterations: the evaluation looks at its
	// time limit every 100.
	body := "{'count': parameters.items.filter(i, i > 0).size()}"
	spec.Operations[0].Request = &v1.RequestShape{Body: body}
	spec.Operations[0].Validate = &v1.ValidateRequest{Path: "/validate"}
	c := newClient(t, spec, nil)
	items := make([]any, 200)
	for i := range items {
		items[i] = i + 1
	}
	params, err := json.Marshal(map[string]any{"items": items})
	if err != nil {
		t.Fatal(err)
	}
	req := effects.Request{Operation: "charge.create", Key: "k", Parameters: params, Timeout: time.Second}

	c.compiler.timeout = time.Nanosecond
	r := c.Execute(context.Background(), req)
	if r.Outcome != v1.OutcomeRetryable || !strings.Contains(r.Message, "time limit") {
		t.Errorf("a call whose request met the time limit is retryable and says why: got %s: %s", r.Outcome, r.Message)
	}
	v := c.Validate(context.Background(), req)
	if v.Verdict != effects.ValidateUndecided || !strings.Contains(v.Message, "time limit") {
		t.Errorf("a dry run whose request met the time limit decides nothing: got %v: %s", v.Verdict, v.Message)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("nothing may be sent: %d requests were", n)
	}

	c.compiler.timeout = evalTimeout
	if r := c.Execute(context.Background(), req); r.Outcome != v1.OutcomeSucceeded {
		t.Errorf("the next try goes through: got %s: %s", r.Outcome, r.Message)
	}
}
