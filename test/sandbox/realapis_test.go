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

package sandbox

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// ignoreAnswer compares ledger effects without their answers and times.
var ignoreAnswer = cmpopts.IgnoreFields(Effect{}, "BodySHA256", "Status", "Response", "Time")

// received is a request as the tests send it, as the ledger keeps it.
func received(path, contentType, body string) *ReceivedRequest {
	return &ReceivedRequest{Method: http.MethodPost, Path: path, ContentType: contentType, Body: body}
}

const (
	pathStripeCharges = "/stripe/v1/charges"
	pathGitHubIssues  = "/github/repos/acme/shop/issues"
	pathPagerDuty     = "/pagerduty/v2/enqueue"
	pathSlack         = "/slack/services/T000/B000/XXXX"
	routingKey        = "R0123456789abcdef0123456789abcde"

	stripeForm  = "amount=4200&currency=eur&metadata%5Border%5D=1001"
	issueJSON   = `{"title":"Disk full","body":"node-7","labels":["once-order-1001","ops"]}`
	triggerJSON = `{"routing_key":"` + routingKey + `","event_action":"trigger","dedup_key":"K",` +
		`"payload":{"summary":"Disk full","source":"node-7","severity":"critical"}}`
	slackJSON = `{"text":"Deployed"}`
)

var (
	formHeader = map[string]string{"Content-Type": "application/x-www-form-urlencoded", "Authorization": "Bearer sk_test"}
	jsonHeader = map[string]string{"Content-Type": "application/json", "Authorization": "Bearer ghp_test"}
)

// decoded is a JSON body as generic values, for comparing shapes.
func decoded(t *testing.T, body string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return v
}

// TestRealAPIAnswers checks each endpoint's answer to a first request: its
// status, content type and body, and the effect in the ledger.
func TestRealAPIAnswers(t *testing.T) {
	tests := map[string]struct {
		reason      string
		call        call
		wantStatus  int
		wantType    string
		wantBody    any // decoded JSON, or the text
		wantEffects []Effect
	}{
		"StripeCharge": {
			reason:     "A form-encoded charge is answered as Stripe's charge object, with its metadata nested.",
			call:       call{path: pathStripeCharges, key: "K", body: stripeForm, header: formHeader},
			wantStatus: http.StatusOK,
			wantType:   "application/json",
			wantBody: map[string]any{"id": "ch_1", "object": "charge", "amount": float64(4200), "currency": "eur",
				"description": nil, "metadata": map[string]any{"order": "1001"}, "paid": true, "captured": true,
				"status": "succeeded", "created": float64(fixedNow().Unix())},
			wantEffects: []Effect{{Seq: 1, ID: "ch_1", Mode: ModeNative, Collection: CollectionStripeCharges, Action: ActionCreate, Key: "K",
				Request: received(pathStripeCharges, "application/x-www-form-urlencoded", stripeForm)}},
		},
		"GitHubIssue": {
			reason:     "An issue is answered 201 with a numeric id and number and its labels as objects.",
			call:       call{path: pathGitHubIssues, key: "K", body: issueJSON, header: jsonHeader},
			wantStatus: http.StatusCreated,
			wantType:   "application/json",
			wantBody: map[string]any{"id": float64(1), "node_id": "I_1", "number": float64(1), "title": "Disk full",
				"body": "node-7", "state": "open",
				"labels":         []any{map[string]any{"name": "once-order-1001"}, map[string]any{"name": "ops"}},
				"url":            "https://api.github.com/repos/acme/shop/issues/1",
				"html_url":       "https://github.com/acme/shop/issues/1",
				"repository_url": "https://api.github.com/repos/acme/shop",
				"created_at":     fixedNow().Format("2006-01-02T15:04:05.999999999Z07:00")},
			wantEffects: []Effect{{Seq: 1, ID: "I_1", Mode: ModeLookup, Collection: CollectionGitHubIssues, Action: ActionCreate, Key: "K",
				Request: received(pathGitHubIssues, "application/json", issueJSON)}},
		},
		"PagerDutyTrigger": {
			reason:     "A trigger is answered 202 with its dedup_key, and recorded under the body's dedup_key, not the header.",
			call:       call{path: pathPagerDuty, key: "header-key", body: triggerJSON},
			wantStatus: http.StatusAccepted,
			wantType:   "application/json",
			wantBody:   map[string]any{"status": "success", "message": "Event processed", "dedup_key": "K"},
			wantEffects: []Effect{{Seq: 1, ID: "pa_1", Mode: ModeNative, Collection: CollectionPagerDutyEvents, Action: ActionCreate, Key: "K",
				Request: received(pathPagerDuty, "", triggerJSON)}},
		},
		"SlackMessage": {
			reason:     "A message is answered with the plain text ok.",
			call:       call{path: pathSlack, key: "K", body: slackJSON},
			wantStatus: http.StatusOK,
			wantType:   "text/plain",
			wantBody:   "ok",
			wantEffects: []Effect{{Seq: 1, ID: "sl_1", Mode: ModeNone, Collection: CollectionSlackMessages, Action: ActionCreate, Key: "K",
				Request: received(pathSlack, "", slackJSON)}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			r := h.do(tc.call)
			if r.status != tc.wantStatus {
				t.Fatalf("%s\nstatus: want %d, got %d %s", tc.reason, tc.wantStatus, r.status, r.body)
			}
			if got := r.header.Get("Content-Type"); got != tc.wantType {
				t.Errorf("%s\nContent-Type: want %q, got %q", tc.reason, tc.wantType, got)
			}
			var got any = r.body
			if _, text := tc.wantBody.(string); !text {
				got = decoded(t, r.body)
			}
			if diff := cmp.Diff(tc.wantBody, got); diff != "" {
				t.Errorf("%s\nbody: -want, +got:\n%s", tc.reason, diff)
			}
			effects := h.effects()
			if diff := cmp.Diff(tc.wantEffects, effects, ignoreAnswer); diff != "" {
				t.Errorf("%s\nledger: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRealAPIRepeats sends a request whose answer is lost after the
// commit (drop-after-commit), then a re-send, and counts the effects: the
// APIs that dedupe perform one, the others two.
func TestRealAPIRepeats(t *testing.T) {
	type answer struct {
		Status   int
		Replayed bool
	}
	tests := map[string]struct {
		reason      string
		first       call
		resend      call
		want        answer
		wantEffects int
	}{
		"StripeReplays": {
			reason:      "Stripe replays the first answer, marked, and charges once.",
			first:       call{path: pathStripeCharges, key: "K", body: stripeForm, header: formHeader},
			resend:      call{path: pathStripeCharges, key: "K", body: stripeForm, header: formHeader},
			want:        answer{Status: http.StatusOK, Replayed: true},
			wantEffects: 1,
		},
		"StripeKeyReusedWithOtherParameters": {
			reason:      "Stripe refuses a key reused with other parameters with a 400 idempotency_error.",
			first:       call{path: pathStripeCharges, key: "K", body: stripeForm, header: formHeader},
			resend:      call{path: pathStripeCharges, key: "K", body: "amount=1&currency=eur", header: formHeader},
			want:        answer{Status: http.StatusBadRequest},
			wantEffects: 1,
		},
		"StripeWithoutKey": {
			reason:      "Stripe charges twice without a key.",
			first:       call{path: pathStripeCharges, body: stripeForm, header: formHeader},
			resend:      call{path: pathStripeCharges, body: stripeForm, header: formHeader},
			want:        answer{Status: http.StatusOK},
			wantEffects: 2,
		},
		"GitHubCreatesTwice": {
			reason:      "GitHub ignores the key and opens a second issue.",
			first:       call{path: pathGitHubIssues, key: "K", body: issueJSON, header: jsonHeader},
			resend:      call{path: pathGitHubIssues, key: "K", body: issueJSON, header: jsonHeader},
			want:        answer{Status: http.StatusCreated},
			wantEffects: 2,
		},
		"PagerDutyDedupesOnTheBody": {
			reason:      "PagerDuty dedupes on the body's dedup_key whatever the header, unmarked.",
			first:       call{path: pathPagerDuty, key: "one", body: triggerJSON},
			resend:      call{path: pathPagerDuty, key: "two", body: triggerJSON},
			want:        answer{Status: http.StatusAccepted},
			wantEffects: 1,
		},
		"SlackPostsTwice": {
			reason:      "Slack posts the message again.",
			first:       call{path: pathSlack, key: "K", body: slackJSON},
			resend:      call{path: pathSlack, key: "K", body: slackJSON},
			want:        answer{Status: http.StatusOK},
			wantEffects: 2,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			lost := tc.first
			lost.fault = FaultDropAfterCommit
			if r, err := h.try(lost); err == nil {
				t.Fatalf("%s\nthe first answer was not dropped: %d %s", tc.reason, r.status, r.body)
			}
			r := h.do(tc.resend)
			if diff := cmp.Diff(tc.want, answer{Status: r.status, Replayed: r.replayed()}); diff != "" {
				t.Errorf("%s\nanswer to the re-send: -want, +got:\n%s\n%s", tc.reason, diff, r.body)
			}
			if got := len(h.effects()); got != tc.wantEffects {
				t.Errorf("%s\neffects: want %d, got %d", tc.reason, tc.wantEffects, got)
			}
		})
	}
}

// TestRealAPIRefusals checks what each endpoint refuses, with no effect.
func TestRealAPIRefusals(t *testing.T) {
	tests := map[string]struct {
		reason     string
		call       call
		wantStatus int
		wantBody   string
	}{
		"StripeWithoutAPIKey": {
			reason:     "Stripe wants a key in the Authorization header.",
			call:       call{path: pathStripeCharges, key: "K", body: stripeForm, header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}},
			wantStatus: http.StatusUnauthorized,
		},
		"StripeJSONBody": {
			reason:     "Stripe's v1 API takes forms, not JSON.",
			call:       call{path: pathStripeCharges, key: "K", body: `{"amount":1}`, header: jsonHeader},
			wantStatus: http.StatusBadRequest,
		},
		"StripeAmountNotAnInteger": {
			reason:     "An amount is a whole number of the smallest currency unit.",
			call:       call{path: pathStripeCharges, key: "K", body: "amount=4.2&currency=eur", header: formHeader},
			wantStatus: http.StatusBadRequest,
		},
		"StripeMissingCurrency": {
			reason:     "A currency is required.",
			call:       call{path: pathStripeCharges, key: "K", body: "amount=42", header: formHeader},
			wantStatus: http.StatusBadRequest,
		},
		"GitHubWithoutToken": {
			reason:     "GitHub wants a token to open an issue.",
			call:       call{path: pathGitHubIssues, key: "K", body: issueJSON},
			wantStatus: http.StatusUnauthorized,
		},
		"GitHubWithoutTitle": {
			reason:     "An issue needs a title.",
			call:       call{path: pathGitHubIssues, key: "K", body: `{"body":"x"}`, header: jsonHeader},
			wantStatus: http.StatusUnprocessableEntity,
		},
		"PagerDutyShortRoutingKey": {
			reason:     "A routing key has 32 characters.",
			call:       call{path: pathPagerDuty, body: `{"routing_key":"short","event_action":"trigger","payload":{"summary":"s","source":"s","severity":"info"}}`},
			wantStatus: http.StatusBadRequest,
			wantBody: `{"status":"invalid event","message":"Event object is invalid",` +
				`"errors":["Length of 'routing_key' is incorrect (should be 32 characters)"]}`,
		},
		"PagerDutyBadSeverity": {
			reason:     "A severity is critical, error, warning or info.",
			call:       call{path: pathPagerDuty, body: `{"routing_key":"` + routingKey + `","event_action":"trigger","payload":{"summary":"s","source":"s","severity":"high"}}`},
			wantStatus: http.StatusBadRequest,
		},
		"SlackWithoutText": {
			reason:     "A message needs a text.",
			call:       call{path: pathSlack, key: "K", body: `{"channel":"#ops"}`},
			wantStatus: http.StatusBadRequest,
			wantBody:   "no_text",
		},
		"SlackInvalidJSON": {
			reason:     "Slack's answer to a body that is not JSON.",
			call:       call{path: pathSlack, key: "K", body: `text=hi`},
			wantStatus: http.StatusBadRequest,
			wantBody:   "invalid_payload",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			r := h.do(tc.call)
			if r.status != tc.wantStatus {
				t.Errorf("%s\nstatus: want %d, got %d %s", tc.reason, tc.wantStatus, r.status, r.body)
			}
			if tc.wantBody != "" {
				if diff := cmp.Diff(tc.wantBody, strings.TrimSuffix(r.body, "\n")); diff != "" {
					t.Errorf("%s\nbody: -want, +got:\n%s", tc.reason, diff)
				}
			}
			if n := len(h.effects()); n != 0 {
				t.Errorf("%s\neffects: want 0, got %d", tc.reason, n)
			}
		})
	}
}

// TestGitHubSearch checks that a search by label lists the issues that
// carry it, that faults apply to it as to a lookup, and that lookup-lag
// hides young issues.
func TestGitHubSearch(t *testing.T) {
	type got struct {
		Status  int
		Total   int
		Numbers []int
	}
	tests := map[string]struct {
		reason string
		q      string
		fault  string
		want   got
	}{
		"ByLabel": {
			reason: "Both issues with the label are found, oldest first.",
			q:      "label:once-order-1001",
			want:   got{Status: http.StatusOK, Total: 2, Numbers: []int{1, 3}},
		},
		"ByLabelAndRepo": {
			reason: "repo: narrows the search to one repository.",
			q:      "repo:acme/shop label:once-order-1001 is:issue",
			want:   got{Status: http.StatusOK, Total: 1, Numbers: []int{1}},
		},
		"QuotedLabel": {
			reason: "A label with a space is quoted.",
			q:      `label:"needs review"`,
			want:   got{Status: http.StatusOK, Total: 1, Numbers: []int{2}},
		},
		"NoMatch": {
			reason: "A label on no issue finds none.",
			q:      "label:once-order-9999",
			want:   got{Status: http.StatusOK, Total: 0, Numbers: []int{}},
		},
		"Lagging": {
			reason: "A lagging index finds none of the young issues.",
			q:      "label:once-order-1001",
			fault:  FaultLookupLag,
			want:   got{Status: http.StatusOK, Total: 0, Numbers: []int{}},
		},
		"Unavailable": {
			reason: "A lookup fault answers the search.",
			q:      "label:once-order-1001",
			fault:  FaultLookup503,
			want:   got{Status: http.StatusServiceUnavailable},
		},
		"FreeText": {
			reason: "The sandbox refuses what it cannot search for.",
			q:      "disk full",
			want:   got{Status: http.StatusUnprocessableEntity},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			for _, c := range []struct{ path, body string }{
				{pathGitHubIssues, issueJSON},
				{pathGitHubIssues, `{"title":"Review","labels":["needs review"]}`},
				{"/github/repos/acme/other/issues", issueJSON},
			} {
				if r := h.do(call{path: c.path, key: "K", body: c.body, header: jsonHeader}); r.status != http.StatusCreated {
					t.Fatalf("create: %d %s", r.status, r.body)
				}
			}
			r := h.do(call{method: http.MethodGet, path: "/github/search/issues?q=" + url.QueryEscape(tc.q), fault: tc.fault})
			g := got{Status: r.status}
			if r.status == http.StatusOK {
				var found gitHubSearch
				if err := json.Unmarshal([]byte(r.body), &found); err != nil {
					t.Fatalf("decode %q: %v", r.body, err)
				}
				g.Total, g.Numbers = found.TotalCount, []int{}
				for _, i := range found.Items {
					g.Numbers = append(g.Numbers, int(i.Number))
				}
			}
			if diff := cmp.Diff(tc.want, g); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestRealAPIRulesMatchTheirKeys checks that a seeded rule matched by key
// prefix strikes each endpoint: the header's key, and PagerDuty's dedup_key.
func TestRealAPIRulesMatchTheirKeys(t *testing.T) {
	calls := map[string]call{
		"Stripe":    {path: pathStripeCharges, key: "ns/K", body: stripeForm, header: formHeader},
		"GitHub":    {path: pathGitHubIssues, key: "ns/K", body: issueJSON, header: jsonHeader},
		"PagerDuty": {path: pathPagerDuty, key: "other", body: `{"routing_key":"` + routingKey + `","event_action":"trigger","dedup_key":"ns/K","payload":{"summary":"s","source":"s","severity":"info"}}`},
		"Slack":     {path: pathSlack, key: "ns/K", body: slackJSON},
	}
	for name, c := range calls {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{Rules: []FaultRule{{KeyPrefix: "ns/", Method: http.MethodPost, Fault: Fault503}}})
			if r := h.do(c); r.status != http.StatusServiceUnavailable {
				t.Errorf("want the rule's 503, got %d %s", r.status, r.body)
			}
		})
	}
}
