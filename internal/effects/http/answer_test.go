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
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// canned is an answer a test server gives to every request; {key} in its
// body stands for the idempotency key the request carried.
type canned struct {
	status      int
	contentType string
	body        string
}

// serve runs a server that answers every request with a.
func serve(t *testing.T, a canned) string {
	t.Helper()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if a.contentType != "" {
			w.Header().Set("Content-Type", a.contentType)
		}
		w.WriteHeader(a.status)
		_, _ = fmt.Fprint(w, strings.ReplaceAll(a.body, "{key}", r.Header.Get("Idempotency-Key")))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

const (
	jsonType = "application/json"
	// portal is what a captive portal, a WAF's sign-in page or an
	// ingress's default backend serves, with a 200.
	portal = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>Sign in</body></html>"
	// tracksKey is a found expression that checks what the tool says of
	// the key.
	tracksKey = "response.status == 200 && type(response.body) == map && 'key' in response.body && response.body.key == key"
	notFound  = "response.status == 404 && type(response.body) == map && 'error' in response.body && response.body.error == 'not_found'"
)

// TestLookupProvesOnlyWhatItCan: a lookup proves an effect, or its
// absence, only by what the tool itself says of the key; a status alone,
// an answer both expressions accept, or none, proves nothing.
func TestLookupProvesOnlyWhatItCan(t *testing.T) {
	cases := map[string]struct {
		reason        string
		found, absent string
		answer        canned
		want          protocol.Verdict
	}{
		"TheToolsRecord": {
			reason: "the tool names the effect of this key",
			found:  tracksKey, absent: notFound,
			answer: canned{200, jsonType, `{"id": "t_1", "key": "{key}"}`},
			want:   protocol.VerdictFound,
		},
		"TheToolsNotFound": {
			reason: "the tool's own not-found proves absence",
			found:  tracksKey, absent: notFound,
			answer: canned{404, jsonType, `{"error": "not_found"}`},
			want:   protocol.VerdictAbsent,
		},
		"DefaultPage": {
			reason: "an ingress's default page answers 200 and proves nothing",
			found:  tracksKey, absent: notFound,
			answer: canned{200, "text/html", portal},
			want:   protocol.VerdictUndecidable,
		},
		"AnotherKeysRecord": {
			reason: "a record of another key proves nothing about this one",
			found:  tracksKey, absent: notFound,
			answer: canned{200, jsonType, `{"id": "t_2", "key": "other"}`},
			want:   protocol.VerdictUndecidable,
		},
		"BareNotFound": {
			reason: "a gateway's bare 404 proves nothing",
			found:  tracksKey, absent: notFound,
			answer: canned{404, "text/plain", "404 page not found"},
			want:   protocol.VerdictUndecidable,
		},
		"NoFoundExpression": {
			reason: "without found, a 200 proves nothing: it was the default that read any 200 as the effect",
			absent: notFound,
			answer: canned{200, "text/html", portal},
			want:   protocol.VerdictUndecidable,
		},
		"FoundFails": {
			reason: "a found that fails on the answer said nothing, and absent alone does not decide",
			found:  "response.body.items.exists(i, i.meta.key == key)",
			absent: "response.status == 200",
			answer: canned{200, jsonType, `{"items": [{"id": "t_1"}]}`},
			want:   protocol.VerdictUndecidable,
		},
		"AbsentFails": {
			reason: "an absent that fails on the answer does not undo what found proves",
			found:  tracksKey,
			absent: "response.body.error == 'not_found'",
			answer: canned{200, jsonType, `{"id": "t_1", "key": "{key}"}`},
			want:   protocol.VerdictFound,
		},
		"BothAccept": {
			reason: "an answer that both expressions accept proves neither",
			found:  "response.status == 200",
			absent: "response.status == 200 && size(response.body.items) == 0",
			answer: canned{200, jsonType, `{"items": []}`},
			want:   protocol.VerdictUndecidable,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := toolSpec(serve(t, tc.answer), v1.IdempotencyLookup)
			spec.Operations[0].Lookup.Found, spec.Operations[0].Lookup.Absent = tc.found, tc.absent
			c := newClient(t, spec, nil)
			got := c.Lookup(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1",
				Parameters: []byte(`{"amount": 5}`), Timeout: time.Second})
			if got.Verdict != tc.want {
				t.Errorf("%s: want %s, got %s: %s", tc.reason, tc.want, got.Verdict, got.Message)
			}
		})
	}
}

// TestLookupTellsLifetimesApart: a key applied again after its record
// expired starts a new lifetime, and a search that forgets nothing still
// finds the effect of the first. Expressions see since, when this
// lifetime's first attempt was claimed, to tell the two apart by the time
// the tool says it made the effect; unknown, since is the Unix epoch and
// excludes nothing.
func TestLookupTellsLifetimesApart(t *testing.T) {
	const found = tracksKey + " && timestamp(response.body.created) >= since - duration('1h')"
	made := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	answer := canned{200, jsonType, `{"id": "t_1", "key": "{key}", "created": "` + made.Format(time.RFC3339) + `"}`}
	cases := map[string]struct {
		reason string
		since  time.Time
		want   protocol.Verdict
	}{
		"ThisLifetime": {
			reason: "an effect made after this lifetime began is its own",
			since:  made.Add(-time.Minute), want: protocol.VerdictFound,
		},
		"WithinTheClocksMargin": {
			reason: "a tool's clock behind the cluster's by less than the margin still proves this lifetime's effect",
			since:  made.Add(10 * time.Minute), want: protocol.VerdictFound,
		},
		"AnEarlierLifetime": {
			reason: "an effect made a day before this lifetime began is an earlier lifetime's, and proves nothing of this one",
			since:  made.Add(24 * time.Hour), want: protocol.VerdictUndecidable,
		},
		"NotKnown": {
			reason: "without a lifetime's start the expression excludes nothing, as before since existed",
			want:   protocol.VerdictFound,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := toolSpec(serve(t, answer), v1.IdempotencyLookup)
			spec.Operations[0].Lookup.Found, spec.Operations[0].Lookup.Absent = found, notFound
			c := newClient(t, spec, nil)
			got := c.Lookup(context.Background(), effects.Request{Operation: "charge.create", Key: "ns/charge.create/k1",
				Since: tc.since, Parameters: []byte(`{"amount": 5}`), Timeout: time.Second})
			if got.Verdict != tc.want {
				t.Errorf("%s: want %s, got %s: %s", tc.reason, tc.want, got.Verdict, got.Message)
			}
		})
	}
}

// TestDecisionsSeeTheAnswerAsReceived: found, absent and the outcome
// rules read the answer as the tool gave it, and the scrubber applies to
// what is kept. A secret value that also occurs in the key (a tenant's
// name in both) must not hide the key the tool echoes.
func TestDecisionsSeeTheAnswerAsReceived(t *testing.T) {
	const token = "tenant-7-token"
	key := token + "/incident.create/order-1"
	srv := serve(t, canned{200, jsonType, `{"items": [{"id": "inc_1", "external_id": "{key}"}]}`})
	spec := echoToolSpec(srv)
	op := &spec.Operations[0]
	op.Lookup = &v1.LookupRequest{Path: "/incidents?key={idempotencyKey}",
		Found:  "response.status == 200 && response.body.items.exists(i, i.external_id == key)",
		Absent: "response.status == 200 && !response.body.items.exists(i, i.external_id == key)"}
	op.Response = v1.ResponseMapping{ExternalObjectID: "response.body.items[0].id",
		Outcomes: []v1.OutcomeRule{{When: "response.body.items.exists(i, i.external_id == key)", Outcome: v1.OutcomeSucceeded},
			{When: "true", Outcome: v1.OutcomePermanent}}}
	c := connectTo(t, spec, "Bearer "+token)
	req := effects.Request{Operation: op.Name, Key: key, Timeout: time.Second}

	l := c.Lookup(context.Background(), req)
	if l.Verdict != protocol.VerdictFound || l.ExternalObjectID != "inc_1" {
		t.Errorf("the tool lists the key: want Found as inc_1, got %s %q: %s", l.Verdict, l.ExternalObjectID, l.Message)
	}
	r := c.Execute(context.Background(), req)
	if r.Outcome != v1.OutcomeSucceeded {
		t.Errorf("the outcome rule matches the key the tool echoes: want Succeeded, got %s: %s", r.Outcome, r.Message)
	}
	for what, s := range map[string]string{"lookup message": l.Message, "lookup result": resultOf(l.Result),
		"call message": r.Message, "call result": resultOf(r.Result)} {
		if strings.Contains(s, token) {
			t.Errorf("the %s holds the secret: %s", what, s)
		}
	}
}

// TestSuccessThatIsNotTheTools: a 2xx that does not carry what the
// operation's success carries (its format, an external id its mapping can
// read) is not taken as the tool's: its outcome is unknown, and the
// message says why.
func TestSuccessThatIsNotTheTools(t *testing.T) {
	cases := map[string]struct {
		reason  string
		format  v1.ResponseFormat
		noID    bool
		rule    string
		answer  canned
		want    v1.Outcome
		because string
	}{
		"TheToolsSuccess": {
			reason: "the tool's JSON, with the id the mapping reads",
			answer: canned{201, jsonType, `{"id": "ch_1"}`},
			want:   v1.OutcomeSucceeded,
		},
		"APageInFront": {
			reason: "a captive portal's or a WAF's page with a 200",
			answer: canned{200, "text/html; charset=utf-8", portal}, want: v1.OutcomeUnknown,
			because: "this body is text/html",
		},
		"NoIDInIt": {
			reason: "JSON the mapping reads no id from (a misrouted proxy's status page)",
			answer: canned{200, jsonType, `{"status": "ok"}`}, want: v1.OutcomeUnknown,
			because: "reads no id",
		},
		"EmptyWhereJSONIsDue": {
			reason: "an empty 200 where the operation answers JSON",
			noID:   true,
			answer: canned{200, "", ""}, want: v1.OutcomeUnknown,
			because: "this body is empty",
		},
		"NoBodyDeclared": {
			reason: "a 204 from an operation whose success has no body",
			format: v1.FormatNone, noID: true,
			answer: canned{204, "", ""}, want: v1.OutcomeSucceeded,
		},
		"BodyWhereNoneIsDue": {
			reason: "a page where the operation answers with no body",
			format: v1.FormatNone, noID: true,
			answer: canned{200, "text/html", portal}, want: v1.OutcomeUnknown,
			because: "has no body",
		},
		"VouchedByARule": {
			reason: "a success an outcome rule names is the tool author's word",
			rule:   "response.status == 200 && response.body.status == 'ok'",
			answer: canned{200, jsonType, `{"status": "ok"}`}, want: v1.OutcomeSucceeded,
		},
		"DoneNothingToSay": {
			reason: "a 204 with no body, where no id is mapped (a DELETE's answer)",
			noID:   true,
			answer: canned{204, "", ""}, want: v1.OutcomeSucceeded,
		},
		"AcceptedEmpty": {
			reason: "a 202 with no body, where no id is mapped",
			noID:   true,
			answer: canned{202, "", ""}, want: v1.OutcomeSucceeded,
		},
		"LongerThanTheLimit": {
			reason: "the tool's JSON, cut at the limit: no id can be read, but it is not a page",
			answer: canned{201, jsonType, `{"id": "ch_1", "pad": "` + strings.Repeat("a", 2*maxBody) + `"}`},
			want:   v1.OutcomeSucceeded,
		},
		"TextDeclared": {
			reason: "an operation whose success is text takes any body",
			format: v1.FormatText, noID: true,
			answer: canned{200, "text/plain", "queued"}, want: v1.OutcomeSucceeded,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := toolSpec(serve(t, tc.answer), v1.IdempotencyNone)
			m := &spec.Operations[0].Response
			m.Format, m.Result, m.Outcomes = tc.format, "", nil
			if tc.rule != "" {
				m.Outcomes = []v1.OutcomeRule{{When: tc.rule, Outcome: v1.OutcomeSucceeded}}
			}
			if tc.noID {
				m.ExternalObjectID = ""
			}
			c := newClient(t, spec, nil)
			r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k",
				Parameters: []byte(`{"amount": 5}`), Timeout: time.Second})
			if r.Outcome != tc.want {
				t.Fatalf("%s: want %s, got %s: %s", tc.reason, tc.want, r.Outcome, r.Message)
			}
			if tc.want == v1.OutcomeUnknown && (!strings.Contains(r.Message, "not the tool's") ||
				!strings.Contains(r.Message, tc.because)) {
				t.Errorf("%s: the message must say why (%q): %s", tc.reason, tc.because, r.Message)
			}
			if tc.want == v1.OutcomeUnknown && r.Result != nil {
				t.Errorf("%s: a page is kept as the result: %s", tc.reason, r.Result.Raw)
			}
		})
	}
}

// TestCutKeepsSecretsWhole: a body cut at the limit is cut before a
// secret the limit would split, so that no part of it is kept.
func TestCutKeepsSecretsWhole(t *testing.T) {
	const token = "s3cr3t-t0ken-value"
	for _, at := range []int{maxBody - 5, maxBody - 1, maxBody - len(token) + 1, maxBody - len(token), maxBody + 1} {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			// The body is a JSON string: the token starts at offset at.
			body := `"` + strings.Repeat("a", at-1) + token + strings.Repeat("b", maxBody) + `"`
			srv := serve(t, canned{200, jsonType, body})
			spec := toolSpec(srv, v1.IdempotencyNone)
			spec.HTTP.Headers = echoToolSpec(srv).HTTP.Headers
			spec.Operations[0].Response = v1.ResponseMapping{Format: v1.FormatText, Result: "response.body"}
			c := connectTo(t, spec, "Bearer "+token)
			r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k", Timeout: time.Second})
			if r.Outcome != v1.OutcomeSucceeded {
				t.Fatalf("want Succeeded, got %s: %s", r.Outcome, r.Message)
			}
			kept := strings.TrimSuffix(resultOf(r.Result), `"`)
			for n := 1; n < len(token); n++ {
				if strings.HasSuffix(kept, token[:n]) {
					t.Errorf("the kept body ends in %q, the start of the secret", token[:n])
				}
			}
			if strings.Contains(kept+r.Message, token) {
				t.Error("the secret is kept")
			}
		})
	}
}

// TestKeptValuesAreScrubbed: what mappings keep is read from the answer
// scrubbed, so that a mapping that transforms an echoed secret keeps none
// of it; and a description re-encodes the answer only once it is
// scrubbed, whatever characters the secret holds.
func TestKeptValuesAreScrubbed(t *testing.T) {
	for _, token := range []string{"s3cr3t-t0ken-value", `p&ss"word-123<x>`} {
		t.Run(token, func(t *testing.T) {
			srv := echoTool(t)
			spec := echoToolSpec(srv.URL)
			op := &spec.Operations[1]
			op.Response = v1.ResponseMapping{ExternalObjectID: "response.body.unicode.upperAscii()",
				Result: "{'start': response.body.unicode.substring(0, 12), 'upper': response.body.unicode.upperAscii(), " +
					"'lower': response.headers['x-echo-authorization'].lowerAscii()}"}
			c := connectTo(t, spec, "Bearer "+token)
			r := c.Execute(context.Background(), effects.Request{Operation: op.Name, Key: "k", Timeout: time.Second})
			if r.Outcome != v1.OutcomeSucceeded {
				t.Fatalf("want Succeeded, got %s: %s", r.Outcome, r.Message)
			}
			kept := strings.ToLower(resultOf(r.Result) + r.Message + r.ExternalObjectID)
			for _, part := range []string{strings.ToLower(token), strings.ToLower(token[:8]), strings.ToLower(`p&ss\"word`)} {
				if strings.Contains(kept, part) {
					t.Errorf("%q of the secret is kept: %s", part, kept)
				}
			}
		})
	}
}

// resultOf is a kept result as text, empty if none was kept.
func resultOf(r *runtime.RawExtension) string {
	if r == nil {
		return ""
	}
	return string(r.Raw)
}

// TestWarnings: a lookup whose found reads the status alone, or whose
// absent reads a list with nothing that says the list is complete, is
// warned about; one that checks the key, a total, a next page or an
// incomplete flag, or reads no list, is not.
func TestWarnings(t *testing.T) {
	cases := map[string]struct {
		found, absent string
		warn          string
	}{
		"FirstPageOnly":     {absent: "response.status == 200 && !response.body.items.exists(i, i.external_id == key)", warn: "absent"},
		"EmptyPage":         {absent: "response.status == 200 && size(response.body.items) == 0", warn: "absent"},
		"EmptyList":         {absent: "response.status == 200 && response.body.items == []", warn: "absent"},
		"AccountIsNotCount": {absent: "!response.body.items.exists(i, i.account_id == key)", warn: "absent"},
		"TotalChecked":      {absent: "response.status == 200 && response.body.total == 0"},
		"NoNextPage":        {absent: "size(response.body.items) == 0 && !has(response.body.next)"},
		"IncompleteFlag":    {absent: "size(response.body.items) == 0 && !response.body.incomplete_results"},
		"TheToolsNotFound":  {absent: notFound},
		"StatusAlone":       {found: "response.status == 200", absent: notFound, warn: "found"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := toolSpec("http://tool.example", v1.IdempotencyLookup)
			l := spec.Operations[0].Lookup
			l.Absent = tc.absent
			if tc.found != "" {
				l.Found = tc.found
			}
			got := strings.Join(Warnings(spec), "\n")
			switch {
			case tc.warn == "" && got != "":
				t.Errorf("found %q, absent %q: want no warning, got %q", l.Found, l.Absent, got)
			case tc.warn != "" && !strings.Contains(got, "lookup."+tc.warn):
				t.Errorf("found %q, absent %q: want a warning about %s, got %q", l.Found, l.Absent, tc.warn, got)
			}
		})
	}
}
