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
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const (
	charge      = `{"amount":100,"currency":"eur"}`
	otherCharge = `{"amount":250,"currency":"eur"}`
	declined    = `{"amount":100,"reject":"card_declined"}`
)

func TestNativeIdempotency(t *testing.T) {
	type step struct {
		key, body string
		// replayOf is the 1-based index of an earlier step whose answer this
		// step must replay byte for byte; 0 means a fresh answer.
		replayOf int
	}
	type got struct {
		Status   int
		Error    string
		Replayed bool
	}
	tests := map[string]struct {
		steps       []step
		want        []got
		wantEffects int
	}{
		"first call creates": {
			steps:       []step{{key: "k1", body: charge}},
			want:        []got{{Status: 201}},
			wantEffects: 1,
		},
		"same key and body replays the first answer": {
			steps:       []step{{key: "k1", body: charge}, {key: "k1", body: charge, replayOf: 1}},
			want:        []got{{Status: 201}, {Status: 201, Replayed: true}},
			wantEffects: 1,
		},
		"key order and whitespace do not matter": {
			steps: []step{
				{key: "k1", body: `{"amount":100,"currency":"eur"}`},
				{key: "k1", body: "{\n  \"currency\" : \"eur\",\t\"amount\": 100\n}", replayOf: 1},
			},
			want:        []got{{Status: 201}, {Status: 201, Replayed: true}},
			wantEffects: 1,
		},
		"same key with another body is refused and keeps the first answer": {
			steps: []step{
				{key: "k1", body: charge},
				{key: "k1", body: otherCharge},
				{key: "k1", body: charge, replayOf: 1},
			},
			want:        []got{{Status: 201}, {Status: 422, Error: CodeKeyReused}, {Status: 201, Replayed: true}},
			wantEffects: 1,
		},
		"distinct keys create distinct objects": {
			steps:       []step{{key: "k1", body: charge}, {key: "k2", body: charge}},
			want:        []got{{Status: 201}, {Status: 201}},
			wantEffects: 2,
		},
		"no key behaves like none mode": {
			steps:       []step{{body: charge}, {body: charge}},
			want:        []got{{Status: 201}, {Status: 201}},
			wantEffects: 2,
		},
		"business rejection is stored and replayed": {
			steps:       []step{{key: "k1", body: declined}, {key: "k1", body: declined, replayOf: 1}},
			want:        []got{{Status: 422, Error: CodeRejected}, {Status: 422, Error: CodeRejected, Replayed: true}},
			wantEffects: 0,
		},
		"rejected key refuses another body": {
			steps:       []step{{key: "k1", body: declined}, {key: "k1", body: charge}},
			want:        []got{{Status: 422, Error: CodeRejected}, {Status: 422, Error: CodeKeyReused}},
			wantEffects: 0,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			gotSteps := make([]got, 0, len(tc.steps))
			bodies := make([]string, 0, len(tc.steps))
			for i, st := range tc.steps {
				r := h.do(call{path: pathNativeCharges, key: st.key, body: st.body})
				bodies = append(bodies, r.body)
				gotSteps = append(gotSteps, got{Status: r.status, Error: r.errorCode(), Replayed: r.replayed()})
				if st.replayOf > 0 && r.body != bodies[st.replayOf-1] {
					t.Errorf("step %d body = %q, want the body of step %d %q", i+1, r.body, st.replayOf, bodies[st.replayOf-1])
				}
			}
			if diff := cmp.Diff(tc.want, gotSteps); diff != "" {
				t.Errorf("answers mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Effects; got != tc.wantEffects {
				t.Errorf("effects = %d, want %d", got, tc.wantEffects)
			}
		})
	}
}

func TestNativeInFlightConflict(t *testing.T) {
	h := newHarness(t, Options{})
	// Both requests hold the key in flight for a while; whichever arrives
	// second must be refused with 409 while the first is still working.
	const n = 2
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			results[i] = h.do(call{path: pathNativeCharges, key: "k1", body: charge, fault: "delay-before-commit=1s"})
		})
	}
	wg.Wait()
	statuses := make([]int, 0, len(results))
	var created result
	for _, r := range results {
		statuses = append(statuses, r.status)
		switch r.status {
		case http.StatusCreated:
			created = r
		case http.StatusConflict:
			if diff := cmp.Diff(`{"error":"in_flight"}`+"\n", r.body); diff != "" {
				t.Errorf("409 body mismatch (-want, +got):\n%s", diff)
			}
		}
	}
	slices.Sort(statuses)
	if diff := cmp.Diff([]int{http.StatusCreated, http.StatusConflict}, statuses); diff != "" {
		t.Fatalf("statuses mismatch (-want, +got):\n%s", diff)
	}
	if got := h.summary().Effects; got != 1 {
		t.Errorf("effects = %d, want 1", got)
	}
	again := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	if again.status != http.StatusCreated || again.body != created.body || !again.replayed() {
		t.Errorf("after the conflict got %d %q replayed=%q, want a replay of %q",
			again.status, again.body, again.header.Get(HeaderReplayed), created.body)
	}
}

func TestNativeInFlightReleasedWhenNothingRecorded(t *testing.T) {
	h := newHarness(t, Options{})
	// Cancelling an unknown object records nothing, so the key is free again.
	r := h.do(call{path: "/native/charges/ch_404/cancel", key: "c1"})
	if r.status != http.StatusNotFound {
		t.Fatalf("cancel unknown = %d, want 404", r.status)
	}
	created := h.do(call{path: pathNativeCharges, key: "k1", body: charge}).object(t)
	r = h.do(call{path: "/native/charges/" + created.ID + "/cancel", key: "c1"})
	if r.status != http.StatusOK || r.header.Get(HeaderReplayed) != "" {
		t.Errorf("cancel with the freed key = %d replayed=%q, want a fresh 200", r.status, r.header.Get(HeaderReplayed))
	}
}

func TestCreateAnswer(t *testing.T) {
	h := newHarness(t, Options{})
	tests := []struct {
		call call
		want Object
	}{
		{
			call: call{path: pathNativeCharges, key: "order-1", body: `{ "currency":"eur", "amount": 1.50 }`},
			want: Object{
				ID: "ch_1", Collection: collCharges, Mode: ModeNative, Key: "order-1",
				Parameters: json.RawMessage(`{"amount":1.50,"currency":"eur"}`),
				Status:     StatusActive, CreatedAt: "2026-01-02T03:04:05.000000006Z",
			},
		},
		{
			call: call{path: "/none/e-mails"},
			want: Object{
				ID: "em_2", Collection: "e-mails", Mode: ModeNone,
				Parameters: json.RawMessage(`{}`),
				Status:     StatusActive, CreatedAt: "2026-01-02T03:04:05.000000006Z",
			},
		},
	}
	for _, tc := range tests {
		r := h.do(tc.call)
		if r.status != http.StatusCreated {
			t.Fatalf("%s = %d %s, want 201", tc.call.path, r.status, r.body)
		}
		if diff := cmp.Diff(tc.want, r.object(t)); diff != "" {
			t.Errorf("%s object mismatch (-want, +got):\n%s", tc.call.path, diff)
		}
		got := h.do(call{method: http.MethodGet, path: tc.call.path + "/" + tc.want.ID})
		if got.status != http.StatusOK || got.body != r.body {
			t.Errorf("GET %s = %d %q, want 200 %q", tc.want.ID, got.status, got.body, r.body)
		}
	}
}

func TestObjectID(t *testing.T) {
	tests := map[string]struct {
		collection string
		seq        int64
		want       string
	}{
		"two letters":          {collection: collCharges, seq: 7, want: "ch_7"},
		"single letter":        {collection: "x", seq: 1, want: "x_1"},
		"hyphen skipped":       {collection: "e-mails", seq: 12, want: "em_12"},
		"digit kept":           {collection: "a1-tickets", seq: 3, want: "a1_3"},
		"hyphen after letter":  {collection: "a-b", seq: 9, want: "ab_9"},
		"long sequence number": {collection: "refunds", seq: 123456789, want: "re_123456789"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, objectID(tc.collection, tc.seq)); diff != "" {
				t.Errorf("objectID mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestGetObject(t *testing.T) {
	h := newHarness(t, Options{})
	id := h.do(call{path: pathNativeCharges, body: charge}).object(t).ID
	tests := map[string]struct {
		path       string
		wantStatus int
		wantID     string
	}{
		"found":                {path: "/native/charges/" + id, wantStatus: 200, wantID: id},
		"unknown id":           {path: "/native/charges/ch_999", wantStatus: 404},
		"other mode":           {path: "/none/charges/" + id, wantStatus: 404},
		"other collection":     {path: "/native/tickets/" + id, wantStatus: 404},
		"mode not served":      {path: "/maybe/charges/" + id, wantStatus: 404},
		"collection not named": {path: "/native/Charges/" + id, wantStatus: 400},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := h.do(call{method: http.MethodGet, path: tc.path})
			var gotID string
			if r.status == http.StatusOK {
				gotID = r.object(t).ID
			}
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantID}, []any{r.status, gotID}); diff != "" {
				t.Errorf("GET %s mismatch (-want, +got):\n%s", tc.path, diff)
			}
		})
	}
}

func TestLookupMode(t *testing.T) {
	tests := map[string]struct {
		creates    []call
		query      string // path with query
		wantStatus int
		wantError  string
		wantFrom   int // 1-based index of the create whose object is found
	}{
		"finds the first object created with the key": {
			creates:    []call{{path: pathLookupTickets, key: "K", body: `{"seat":1}`}, {path: pathLookupTickets, key: "K", body: `{"seat":2}`}},
			query:      pathLookupTicketsK,
			wantStatus: 200,
			wantFrom:   1,
		},
		"key needing escapes": {
			creates:    []call{{path: pathLookupTickets, key: "op/7 & co"}},
			query:      "/lookup/tickets?key=" + url.QueryEscape("op/7 & co"),
			wantStatus: 200,
			wantFrom:   1,
		},
		"absent key": {
			creates:    []call{{path: pathLookupTickets, key: "K"}},
			query:      "/lookup/tickets?key=other",
			wantStatus: 404,
			wantError:  CodeNotFound,
		},
		"key of another collection": {
			creates:    []call{{path: pathLookupTickets, key: "K"}},
			query:      "/lookup/charges?key=K",
			wantStatus: 404,
			wantError:  CodeNotFound,
		},
		"objects created in none mode are not indexed": {
			creates:    []call{{path: "/none/tickets", key: "K"}},
			query:      pathLookupTicketsK,
			wantStatus: 404,
			wantError:  CodeNotFound,
		},
		"missing key parameter": {
			query:      pathLookupTickets,
			wantStatus: 400,
			wantError:  CodeMissingKey,
		},
		"lookup by key only exists in lookup mode": {
			creates:    []call{{path: "/native/tickets", key: "K"}},
			query:      "/native/tickets?key=K",
			wantStatus: 404,
			wantError:  CodeNotFound,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			bodies := make([]string, 0, len(tc.creates))
			for _, c := range tc.creates {
				bodies = append(bodies, h.do(c).body)
			}
			r := h.do(call{method: http.MethodGet, path: tc.query})
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantError}, []any{r.status, r.errorCode()}); diff != "" {
				t.Errorf("lookup mismatch (-want, +got):\n%s", diff)
			}
			if tc.wantFrom > 0 && r.body != bodies[tc.wantFrom-1] {
				t.Errorf("lookup body = %q, want %q", r.body, bodies[tc.wantFrom-1])
			}
			if got := h.summary().Effects; got != len(tc.creates) {
				t.Errorf("effects = %d, want every create (%d) to be an effect", got, len(tc.creates))
			}
		})
	}
}

func TestDuplicatesCountedInSummary(t *testing.T) {
	tests := map[string]struct {
		calls []call
		want  Summary
	}{
		"none mode counts every request": {
			calls: []call{
				{path: pathNoneCharges, key: "K", body: charge},
				{path: pathNoneCharges, key: "K", body: charge},
				{path: pathNoneCharges, key: "K", body: otherCharge},
				{path: pathNoneCharges, key: "L", body: charge},
				{path: pathNoneCharges, body: charge},
			},
			want: Summary{
				Effects: 5, Creates: 5,
				Keys:          map[string]int{"none/charges/create/K": 3, "none/charges/create/L": 1},
				Duplicates:    2,
				DuplicateKeys: []string{"none/charges/create/K"},
			},
		},
		"lookup mode counts every request": {
			calls: []call{
				{path: pathLookupTickets, key: "T", body: `{}`},
				{path: pathLookupTickets, key: "T", body: `{}`},
				{path: pathNoneEmails, key: "E", body: `{}`},
				{path: pathNoneEmails, key: "E", body: `{}`},
			},
			want: Summary{
				Effects: 4, Creates: 4,
				Keys:          map[string]int{"lookup/tickets/create/T": 2, "none/emails/create/E": 2},
				Duplicates:    2,
				DuplicateKeys: []string{"lookup/tickets/create/T", "none/emails/create/E"},
			},
		},
		"native mode does not duplicate": {
			calls: []call{
				{path: pathNativeCharges, key: "K", body: charge},
				{path: pathNativeCharges, key: "K", body: charge},
			},
			want: Summary{
				Effects: 1, Creates: 1,
				Keys:          map[string]int{"native/charges/create/K": 1},
				DuplicateKeys: []string{},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			for _, c := range tc.calls {
				if r := h.do(c); r.status != http.StatusCreated {
					t.Fatalf("%s = %d %s", c.path, r.status, r.body)
				}
			}
			if diff := cmp.Diff(tc.want, h.summary()); diff != "" {
				t.Errorf("summary mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestBusinessRejection(t *testing.T) {
	tests := map[string]struct {
		mode         string
		wantReplayed []bool
	}{
		"native replays the rejection": {mode: ModeNative, wantReplayed: []bool{false, true}},
		"lookup rejects afresh":        {mode: ModeLookup, wantReplayed: []bool{false, false}},
		"none rejects afresh":          {mode: ModeNone, wantReplayed: []bool{false, false}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			replayed := make([]bool, 0, 2)
			for range 2 {
				r := h.do(call{path: "/" + tc.mode + "/charges", key: "K", body: declined})
				if diff := cmp.Diff(`{"error":"rejected","reason":"card_declined"}`+"\n", r.body); r.status != 422 || diff != "" {
					t.Errorf("status %d, body mismatch (-want, +got):\n%s", r.status, diff)
				}
				replayed = append(replayed, r.replayed())
			}
			if diff := cmp.Diff(tc.wantReplayed, replayed); diff != "" {
				t.Errorf("replayed mismatch (-want, +got):\n%s", diff)
			}
			if sum := h.summary(); sum.Effects != 0 || len(sum.Keys) != 0 {
				t.Errorf("summary = %+v, want no effect", sum)
			}
		})
	}
}

func TestRejectFieldMustBeAString(t *testing.T) {
	h := newHarness(t, Options{})
	r := h.do(call{path: pathNoneCharges, body: `{"reject":true}`})
	if r.status != http.StatusCreated {
		t.Errorf("non-string reject = %d %s, want 201", r.status, r.body)
	}
}

func TestCancel(t *testing.T) {
	type answer struct {
		Status   int
		Error    string
		Replayed bool
	}
	cancelled := answer{Status: http.StatusOK}
	replayed := answer{Status: http.StatusOK, Replayed: true}
	refused := answer{Status: http.StatusConflict, Error: CodeAlreadyCancelled}
	tests := map[string]struct {
		mode       string
		cancelKeys []string
		want       []answer
		// wantCancelKey is the object's cancelKey: the first cancel's.
		wantCancelKey string
	}{
		"none cancels once": {
			mode: ModeNone, cancelKeys: []string{""}, want: []answer{cancelled},
		},
		"none refuses a second cancel": {
			mode: ModeNone, cancelKeys: []string{"", ""}, want: []answer{cancelled, refused},
		},
		"none does not dedupe a re-sent cancel": {
			mode: ModeNone, cancelKeys: []string{"c1", "c1"}, want: []answer{cancelled, refused}, wantCancelKey: "c1",
		},
		"native replays a cancel on its key": {
			mode: ModeNative, cancelKeys: []string{"c1", "c1"}, want: []answer{cancelled, replayed}, wantCancelKey: "c1",
		},
		"native refuses a cancel with a new key and still replays the first": {
			mode: ModeNative, cancelKeys: []string{"c1", "c2", "c1"}, want: []answer{cancelled, refused, replayed},
			wantCancelKey: "c1",
		},
		"native cancel may share the create's key": {
			mode: ModeNative, cancelKeys: []string{"op-1"}, want: []answer{cancelled}, wantCancelKey: "op-1",
		},
		"lookup refuses a second cancel": {
			mode: ModeLookup, cancelKeys: []string{"c1", "c1"}, want: []answer{cancelled, refused}, wantCancelKey: "c1",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			base := "/" + tc.mode + "/charges"
			created := h.do(call{path: base, key: "op-1", body: charge}).object(t)
			answers := make([]answer, 0, len(tc.cancelKeys))
			for _, key := range tc.cancelKeys {
				r := h.do(call{path: base + "/" + created.ID + "/cancel", key: key})
				answers = append(answers, answer{Status: r.status, Error: r.errorCode(), Replayed: r.replayed()})
			}
			if diff := cmp.Diff(tc.want, answers); diff != "" {
				t.Errorf("answers mismatch (-want, +got):\n%s", diff)
			}
			obj := h.do(call{method: http.MethodGet, path: base + "/" + created.ID}).object(t)
			if diff := cmp.Diff([]string{StatusCancelled, tc.wantCancelKey}, []string{obj.Status, obj.CancelKey}); diff != "" {
				t.Errorf("object status and cancel key mismatch (-want, +got):\n%s", diff)
			}
			sum := h.summary()
			got := []any{sum.Creates, sum.Cancels, sum.DuplicateKeys}
			if diff := cmp.Diff([]any{1, 1, []string{}}, got); diff != "" {
				t.Errorf("creates, cancels, duplicate keys mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestNativeCancelKeyReusedForAnotherObject(t *testing.T) {
	h := newHarness(t, Options{})
	a := h.do(call{path: pathNativeCharges, body: charge}).object(t)
	b := h.do(call{path: pathNativeCharges, body: charge}).object(t)
	if r := h.do(call{path: "/native/charges/" + a.ID + "/cancel", key: "c1"}); r.status != http.StatusOK {
		t.Fatalf("first cancel = %d %s", r.status, r.body)
	}
	r := h.do(call{path: "/native/charges/" + b.ID + "/cancel", key: "c1"})
	if diff := cmp.Diff([]any{422, CodeKeyReused}, []any{r.status, r.errorCode()}); diff != "" {
		t.Errorf("cancel of another object with the same key (-want, +got):\n%s", diff)
	}
	if got := h.summary().Cancels; got != 1 {
		t.Errorf("cancels = %d, want 1", got)
	}
}

func TestRequestValidation(t *testing.T) {
	huge := `{"pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	tests := map[string]struct {
		call       call
		wantStatus int
		wantError  string
	}{
		"invalid json":               {call: call{path: pathNoneCharges, body: `{"amount":`}, wantStatus: 400, wantError: CodeInvalidJSON},
		"array body":                 {call: call{path: pathNoneCharges, body: `[1,2]`}, wantStatus: 400, wantError: CodeInvalidJSON},
		"null body":                  {call: call{path: pathNoneCharges, body: ` null `}, wantStatus: 400, wantError: CodeInvalidJSON},
		"data after the object":      {call: call{path: pathNoneCharges, body: `{} {}`}, wantStatus: 400, wantError: CodeInvalidJSON},
		"invalid json in native":     {call: call{path: pathNativeCharges, key: "k", body: `not json`}, wantStatus: 400, wantError: CodeInvalidJSON},
		"body over 1 MiB":            {call: call{path: pathNoneCharges, body: huge}, wantStatus: 413, wantError: CodeBodyTooLarge},
		"unknown mode":               {call: call{path: "/sometimes/charges", body: charge}, wantStatus: 404, wantError: CodeNotFound},
		"invalid collection":         {call: call{path: "/none/Charges", body: charge}, wantStatus: 400, wantError: CodeInvalidCollection},
		"unknown fault":              {call: call{path: pathNoneCharges, fault: "explode", body: charge}, wantStatus: 400, wantError: CodeUnknownFault},
		"bad fault parameter":        {call: call{path: pathNoneCharges, fault: "delay-after-commit=soon", body: charge}, wantStatus: 400, wantError: CodeUnknownFault},
		"parameter on a plain fault": {call: call{path: pathNoneCharges, fault: "drop-after-commit=1s", body: charge}, wantStatus: 400, wantError: CodeUnknownFault},
		"cancel unknown object":      {call: call{path: "/none/charges/ch_1/cancel"}, wantStatus: 404, wantError: CodeNotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			r := h.do(tc.call)
			if diff := cmp.Diff([]any{tc.wantStatus, tc.wantError}, []any{r.status, r.errorCode()}); diff != "" {
				t.Errorf("answer mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Effects; got != 0 {
				t.Errorf("effects = %d, want 0", got)
			}
		})
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    string
		wantErr bool
	}{
		"sorted keys":          {in: `{"b":1,"a":2}`, want: `{"a":2,"b":1}`},
		"nested objects":       {in: `{"z":{"y":[{"d":1,"c":2}],"x":null}}`, want: `{"z":{"x":null,"y":[{"c":2,"d":1}]}}`},
		"whitespace dropped":   {in: " {\n\t\"a\" :  true }\n", want: `{"a":true}`},
		"numbers kept exactly": {in: `{"a":1.50,"b":10000000000000000000001}`, want: `{"a":1.50,"b":10000000000000000000001}`},
		"empty body":           {in: "", want: `{}`},
		"array":                {in: `[]`, wantErr: true},
		"string":               {in: `"x"`, wantErr: true},
		"null":                 {in: `null`, wantErr: true},
		"trailing data":        {in: `{}x`, wantErr: true},
		"truncated":            {in: `{"a":`, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, got, err := canonicalJSON([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("canonicalJSON(%q) error = %v, want error %t", tc.in, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("canonicalJSON(%q) mismatch (-want, +got):\n%s", tc.in, diff)
			}
		})
	}
}

func TestHealthz(t *testing.T) {
	h := newHarness(t, Options{})
	r := h.do(call{method: http.MethodGet, path: "/healthz"})
	if diff := cmp.Diff([]any{200, "ok"}, []any{r.status, r.body}); diff != "" {
		t.Errorf("healthz mismatch (-want, +got):\n%s", diff)
	}
}
