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
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFaultRules(t *testing.T) {
	post := func(path, key string) call { return call{path: path, key: key, body: charge} }
	get := func(path string) call { return call{method: http.MethodGet, path: path} }
	// answer is a status and the X-Sandbox-Fault header.
	type answer struct {
		Status int
		Fault  string
	}
	created := answer{Status: http.StatusCreated}
	notFound := answer{Status: http.StatusNotFound}
	faulted := func(status int, spec string) answer { return answer{Status: status, Fault: spec} }
	tests := map[string]struct {
		rules     []FaultRule
		calls     []call
		want      []answer
		wantFired []int
	}{
		"count limits firing": {
			rules:     []FaultRule{{Fault: Fault503, Count: 2}},
			calls:     []call{post(pathNoneCharges, ""), post(pathNoneCharges, ""), post(pathNoneCharges, ""), post(pathNoneCharges, "")},
			want:      []answer{faulted(503, Fault503), faulted(503, Fault503), created, created},
			wantFired: []int{2},
		},
		"match fields": {
			rules: []FaultRule{{Mode: ModeNative, Collection: collCharges, KeyPrefix: "pay-", Fault: Fault502}},
			calls: []call{
				post(pathNativeCharges, "pay-1"),
				post(pathNativeCharges, "other"),
				post(pathNativeCharges, ""),
				post("/native/tickets", "pay-2"),
				post(pathNoneCharges, "pay-3"),
			},
			want:      []answer{faulted(502, Fault502), created, created, created, created},
			wantFired: []int{1},
		},
		"first matching rule that fires wins": {
			rules:     []FaultRule{{Collection: "tickets", Fault: Fault502}, {Fault: Fault504}},
			calls:     []call{post("/none/tickets", ""), post(pathNoneCharges, "")},
			want:      []answer{faulted(502, Fault502), faulted(504, Fault504)},
			wantFired: []int{1, 1},
		},
		"exhausted rule falls through": {
			rules:     []FaultRule{{Fault: Fault502, Count: 1}, {Fault: Fault504}},
			calls:     []call{post(pathNoneCharges, ""), post(pathNoneCharges, ""), post(pathNoneCharges, "")},
			want:      []answer{faulted(502, Fault502), faulted(504, Fault504), faulted(504, Fault504)},
			wantFired: []int{1, 2},
		},
		"header takes precedence over rules": {
			rules:     []FaultRule{{Fault: Fault503}},
			calls:     []call{{path: pathNoneCharges, fault: "504", body: charge}},
			want:      []answer{faulted(504, Fault504)},
			wantFired: []int{0},
		},
		"plain rules leave lookups alone": {
			rules:     []FaultRule{{Fault: Fault503}},
			calls:     []call{get(pathLookupTicketsK), post(pathLookupTickets, "K")},
			want:      []answer{notFound, faulted(503, Fault503)},
			wantFired: []int{1},
		},
		"GET rules apply to lookups only": {
			rules:     []FaultRule{{Method: "get", Fault: Fault503}},
			calls:     []call{post(pathLookupTickets, "K"), get(pathLookupTicketsK)},
			want:      []answer{created, faulted(503, Fault503)},
			wantFired: []int{1},
		},
		"re-send rules apply to re-sends only": {
			rules: []FaultRule{{Mode: ModeNative, Fault: FaultResend401}},
			calls: []call{post(pathNativeCharges, "k1"), post(pathNativeCharges, "k2"), post(pathNativeCharges, "k1"),
				post(pathNativeCharges, ""), post(pathNativeCharges, "")},
			want:      []answer{created, created, faulted(401, FaultResend401), created, created},
			wantFired: []int{1},
		},
		"409-exists rules fire only when the key has an object": {
			rules: []FaultRule{{Fault: Fault409Exists}},
			calls: []call{post(pathNoneCharges, "k1"), post(pathNoneCharges, "k2"), post(pathNoneCharges, "k1"),
				post(pathLookupTickets, "k1")},
			want:      []answer{created, created, faulted(409, Fault409Exists), created},
			wantFired: []int{1},
		},
		"new lookup faults apply to lookups only": {
			rules:     []FaultRule{{Fault: FaultLookupRoute404}, {Fault: "lookup-lag=1h"}},
			calls:     []call{post(pathLookupTickets, "K"), get(pathLookupTicketsK), post(pathLookupTickets, "K")},
			want:      []answer{created, faulted(404, FaultLookupRoute404), created},
			wantFired: []int{1, 0},
		},
		"action rules match one kind of request": {
			rules: []FaultRule{{Collection: collCharges, Action: ActionValidate, Fault: Fault503}},
			calls: []call{post("/none/charges/validate", "k1"), post(pathNoneCharges, "k1"),
				post("/none/tickets/validate", "k1"), post("/none/charges/ch_1/cancel", "c1")},
			want:      []answer{faulted(503, Fault503), created, {Status: http.StatusOK}, {Status: http.StatusOK}},
			wantFired: []int{1},
		},
		"rules without an action apply to validates too": {
			rules:     []FaultRule{{Method: "POST", Fault: Fault502, Count: 1}},
			calls:     []call{post("/lookup/tickets/validate", "k1"), post(pathLookupTickets, "k1")},
			want:      []answer{faulted(502, Fault502), created},
			wantFired: []int{1},
		},
		"action rules leave lookups alone": {
			rules:     []FaultRule{{Action: ActionCreate, Fault: FaultLookup503}},
			calls:     []call{post(pathLookupTickets, "K"), get(pathLookupTicketsK)},
			want:      []answer{created, {Status: http.StatusOK}},
			wantFired: []int{0},
		},
		"lookup faults apply to lookups only": {
			rules:     []FaultRule{{Fault: FaultLookup503, KeyPrefix: "K"}},
			calls:     []call{post(pathLookupTickets, "K"), get(pathLookupTicketsK), get("/lookup/tickets?key=X")},
			want:      []answer{created, faulted(503, FaultLookup503), notFound},
			wantFired: []int{1},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			if err := h.client.SetFaults(t.Context(), 1, tc.rules); err != nil {
				t.Fatalf("SetFaults: %v", err)
			}
			got := make([]answer, 0, len(tc.calls))
			for _, c := range tc.calls {
				r := h.do(c)
				got = append(got, answer{Status: r.status, Fault: r.header.Get(HeaderFault)})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answers mismatch (-want, +got):\n%s", diff)
			}
			st, err := h.client.Faults(t.Context())
			if err != nil {
				t.Fatalf("Faults: %v", err)
			}
			fired := make([]int, 0, len(st.Rules))
			for _, r := range st.Rules {
				fired = append(fired, r.Fired)
			}
			if diff := cmp.Diff(tc.wantFired, fired); diff != "" {
				t.Errorf("fired counts mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestFaultStateReportsRemaining(t *testing.T) {
	h := newHarness(t, Options{Seed: 9, Rules: []FaultRule{
		{Mode: ModeNone, Fault: "503", Count: 3},
		{Mode: ModeNative, Fault: "502"},
	}})
	h.do(call{path: pathNoneCharges})
	st, err := h.client.Faults(t.Context())
	if err != nil {
		t.Fatalf("Faults: %v", err)
	}
	want := FaultState{Seed: 9, Rules: []FaultRuleState{
		{FaultRule: FaultRule{Mode: ModeNone, Fault: "503", Count: 3}, Fired: 1, Remaining: 2},
		{FaultRule: FaultRule{Mode: ModeNative, Fault: "502"}, Fired: 0, Remaining: -1},
	}}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("fault state mismatch (-want, +got):\n%s", diff)
	}
	if err := h.client.ClearFaults(t.Context()); err != nil {
		t.Fatalf("ClearFaults: %v", err)
	}
	if r := h.do(call{path: pathNoneCharges}); r.status != http.StatusCreated {
		t.Errorf("after ClearFaults = %d, want 201", r.status)
	}
}

// firingPattern sends n creates and reports which ones the rules faulted.
func firingPattern(t *testing.T, h *harness, n int) []bool {
	t.Helper()
	pattern := make([]bool, 0, n)
	for range n {
		r := h.do(call{path: pathNoneCharges, body: charge})
		pattern = append(pattern, r.header.Get(HeaderFault) != "")
	}
	return pattern
}

func TestSeededRulesAreReproducible(t *testing.T) {
	rules := []FaultRule{{Fault: "503", Probability: 0.5}}
	const n = 40
	h := newHarness(t, Options{Seed: 42, Rules: rules})
	fromOptions := firingPattern(t, h, n)

	reseed := func(seed int64) []bool {
		if err := h.client.SetFaults(t.Context(), seed, rules); err != nil {
			t.Fatalf("SetFaults: %v", err)
		}
		return firingPattern(t, h, n)
	}
	first, second, other := reseed(42), reseed(42), reseed(7)

	if diff := cmp.Diff(first, second); diff != "" {
		t.Errorf("same seed, different pattern (-first, +second):\n%s", diff)
	}
	if diff := cmp.Diff(fromOptions, first); diff != "" {
		t.Errorf("seed from Options and from PUT differ (-options, +put):\n%s", diff)
	}
	if cmp.Equal(first, other) {
		t.Errorf("seeds 42 and 7 gave the same pattern %v", first)
	}
	fired := 0
	for _, f := range first {
		if f {
			fired++
		}
	}
	if fired < n/5 || fired > n-n/5 {
		t.Errorf("probability 0.5 fired %d of %d times", fired, n)
	}
}

func TestPutFaultsValidation(t *testing.T) {
	tests := map[string]struct {
		body      string
		wantError string
	}{
		"unknown fault":         {body: `{"rules":[{"fault":"explode"}]}`, wantError: CodeUnknownFault},
		"bad fault parameter":   {body: `{"rules":[{"fault":"503=soon"}]}`, wantError: CodeUnknownFault},
		"one bad rule of two":   {body: `{"rules":[{"fault":"503"},{"fault":"hailstorm"}]}`, wantError: CodeUnknownFault},
		"probability above one": {body: `{"rules":[{"fault":"503","probability":1.5}]}`, wantError: CodeInvalidRules},
		"negative count":        {body: `{"rules":[{"fault":"503","count":-1}]}`, wantError: CodeInvalidRules},
		"mode not served":       {body: `{"rules":[{"fault":"503","mode":"maybe"}]}`, wantError: CodeInvalidRules},
		"unsupported method":    {body: `{"rules":[{"fault":"503","method":"DELETE"}]}`, wantError: CodeInvalidRules},
		"unknown action":        {body: `{"rules":[{"fault":"503","action":"refund"}]}`, wantError: CodeInvalidRules},
		"action of a GET rule":  {body: `{"rules":[{"fault":"503","method":"GET","action":"cancel"}]}`, wantError: CodeInvalidRules},
		"unknown field":         {body: `{"rules":[{"fault":"503","chance":0.5}]}`, wantError: CodeInvalidJSON},
		"malformed":             {body: `{"rules":`, wantError: CodeInvalidJSON},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			initial := []FaultRule{{Fault: "502", Count: 1}}
			h := newHarness(t, Options{Rules: initial})
			r := h.do(call{method: http.MethodPut, path: "/admin/faults", body: tc.body})
			if diff := cmp.Diff([]any{400, tc.wantError}, []any{r.status, r.errorCode()}); diff != "" {
				t.Errorf("answer mismatch (-want, +got):\n%s", diff)
			}
			st, err := h.client.Faults(t.Context())
			if err != nil {
				t.Fatalf("Faults: %v", err)
			}
			want := []FaultRuleState{{FaultRule: initial[0], Remaining: 1}}
			if diff := cmp.Diff(want, st.Rules); diff != "" {
				t.Errorf("rules changed by a refused PUT (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestNewValidatesRules(t *testing.T) {
	_, err := New(Options{Rules: []FaultRule{{Fault: "drop-after-comit"}}})
	if !errors.Is(err, ErrUnknownFault) {
		t.Errorf("New with a misspelt fault: err = %v, want ErrUnknownFault", err)
	}
}
