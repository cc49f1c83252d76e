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
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestLookupFindsCancelByKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := newHarness(t, Options{LedgerPath: path})
	created := h.do(call{path: pathLookupTickets, key: "op-1", body: charge}).object(t)
	if r := h.do(call{method: http.MethodGet, path: "/lookup/tickets?key=c1"}); r.status != http.StatusNotFound {
		t.Errorf("lookup of the cancel key before the cancel = %d, want 404", r.status)
	}
	cancelled := h.do(call{path: "/lookup/tickets/" + created.ID + "/cancel", key: "c1"})
	if cancelled.status != http.StatusOK {
		t.Fatalf("cancel = %d %s", cancelled.status, cancelled.body)
	}
	check := func(h *harness, when string) {
		t.Helper()
		for _, query := range []string{"/lookup/tickets?key=c1", "/lookup/tickets?key=op-1", "/lookup/tickets/" + created.ID} {
			r := h.do(call{method: http.MethodGet, path: query})
			if r.status != http.StatusOK || r.body != cancelled.body {
				t.Errorf("%s: GET %s = %d %q, want the cancelled object %q", when, query, r.status, r.body, cancelled.body)
			}
		}
		obj := cancelled.object(t)
		if diff := cmp.Diff([]string{StatusCancelled, "op-1", "c1"}, []string{obj.Status, obj.Key, obj.CancelKey}); diff != "" {
			t.Errorf("%s: status, key and cancel key mismatch (-want, +got):\n%s", when, diff)
		}
		if r := h.do(call{method: http.MethodGet, path: "/lookup/tickets?key=c2"}); r.status != http.StatusNotFound {
			t.Errorf("%s: lookup of another key = %d, want 404", when, r.status)
		}
	}
	check(h, "live")
	h.stop()
	check(newHarness(t, Options{LedgerPath: path}), "after a restart")
}

func TestCancelLookupLag(t *testing.T) {
	var c clock
	h := newHarness(t, Options{Now: c.now})
	created := h.do(call{path: pathLookupTickets, key: "op-1", body: charge}).object(t)
	c.advance(time.Hour)
	h.do(call{path: "/lookup/tickets/" + created.ID + "/cancel", key: "c1"})
	const lag = "lookup-lag=5s"
	c.advance(4 * time.Second)
	if r := h.do(call{method: http.MethodGet, path: "/lookup/tickets?key=c1", fault: lag}); r.status != http.StatusNotFound {
		t.Errorf("lookup of a cancel younger than the lag = %d, want 404", r.status)
	}
	c.advance(time.Second)
	if r := h.do(call{method: http.MethodGet, path: "/lookup/tickets?key=c1", fault: lag}); r.status != http.StatusOK {
		t.Errorf("lookup of a cancel as old as the lag = %d, want 200", r.status)
	}
}

func TestCancelFaults(t *testing.T) {
	tests := map[string]struct {
		fault       string
		wantStatus  int
		wantErr     string
		wantCancels int
	}{
		"429":                 {fault: "429", wantStatus: 429},
		"503":                 {fault: "503", wantStatus: 503},
		"502":                 {fault: "502", wantStatus: 502},
		"504":                 {fault: "504", wantStatus: 504},
		"422 refusal":         {fault: Fault422, wantStatus: 422},
		"500 before commit":   {fault: Fault500BeforeCommit, wantStatus: 500},
		"reset before commit": {fault: FaultResetBeforeCommit, wantErr: errReset},
		"500 after commit":    {fault: Fault500AfterCommit, wantStatus: 500, wantCancels: 1},
		"502 after commit":    {fault: Fault502AfterCommit, wantStatus: 502, wantCancels: 1},
		"503 after commit":    {fault: Fault503AfterCommit, wantStatus: 503, wantCancels: 1},
		"504 after commit":    {fault: Fault504AfterCommit, wantStatus: 504, wantCancels: 1},
		"drop after commit":   {fault: FaultDropAfterCommit, wantErr: errEOF, wantCancels: 1},
		"reset after commit":  {fault: FaultResetAfterCommit, wantErr: errReset, wantCancels: 1},
		"delay after commit":  {fault: "delay-after-commit=10ms", wantStatus: 200, wantCancels: 1},
	}
	// retry is the answer to the same cancel, re-sent without a fault: a
	// native tool replays what it did, others refuse a second cancel.
	retry := map[string]map[int]struct {
		Status   int
		Replayed bool
	}{
		ModeNative: {0: {200, false}, 1: {200, true}},
		ModeLookup: {0: {200, false}, 1: {409, false}},
		ModeNone:   {0: {200, false}, 1: {409, false}},
	}
	for name, tc := range tests {
		for _, mode := range []string{ModeNative, ModeLookup, ModeNone} {
			t.Run(name+" in "+mode, func(t *testing.T) {
				h := newHarness(t, Options{})
				base := "/" + mode + "/tickets"
				id := h.do(call{path: base, key: "op-1", body: charge}).object(t).ID
				cancel := call{path: base + "/" + id + "/cancel", key: "c1", fault: tc.fault}
				r, err := h.try(cancel)
				wantErr := tc.wantErr
				if wantErr == "" {
					wantErr = errNone
				}
				if diff := cmp.Diff([]any{wantErr, tc.wantStatus}, []any{errorKind(err), r.status}); diff != "" {
					t.Errorf("faulted cancel mismatch (-want, +got):\n%s", diff)
				}
				if got := h.summary().Cancels; got != tc.wantCancels {
					t.Errorf("cancels = %d, want %d", got, tc.wantCancels)
				}
				if mode == ModeLookup {
					found := h.do(call{method: http.MethodGet, path: "/lookup/tickets?key=c1"}).status == http.StatusOK
					if found != (tc.wantCancels == 1) {
						t.Errorf("lookup by the cancel key found it: %t, want %t", found, tc.wantCancels == 1)
					}
				}
				cancel.fault = ""
				again := h.do(cancel)
				want := retry[mode][tc.wantCancels]
				if diff := cmp.Diff(want, struct {
					Status   int
					Replayed bool
				}{again.status, again.replayed()}); diff != "" {
					t.Errorf("re-sent cancel mismatch (-want, +got):\n%s", diff)
				}
				if got := h.summary().Cancels; got != 1 {
					t.Errorf("cancels after the re-send = %d, want 1", got)
				}
			})
		}
	}
}

func TestCancelResendFaults(t *testing.T) {
	tests := map[string]struct {
		fault      string
		wantStatus int
	}{
		"401": {fault: FaultResend401, wantStatus: 401},
		"403": {fault: FaultResend403, wantStatus: 403},
		"404": {fault: FaultResend404, wantStatus: 404},
	}
	for name, tc := range tests {
		for _, mode := range []string{ModeNative, ModeLookup, ModeNone} {
			t.Run(name+" in "+mode, func(t *testing.T) {
				h := newHarness(t, Options{})
				base := "/" + mode + "/tickets"
				// The create's key is another request's: the first cancel
				// with it is no re-send.
				id := h.do(call{path: base, key: "op-1", body: charge}).object(t).ID
				cancel := call{path: base + "/" + id + "/cancel", key: "op-1", fault: tc.fault}
				first := h.do(cancel)
				if diff := cmp.Diff([]any{200, ""}, []any{first.status, first.header.Get(HeaderFault)}); diff != "" {
					t.Errorf("first cancel must be untouched (-want, +got):\n%s", diff)
				}
				resend := h.do(cancel)
				if diff := cmp.Diff([]any{tc.wantStatus, tc.fault, false}, []any{resend.status, resend.header.Get(HeaderFault), resend.replayed()}); diff != "" {
					t.Errorf("re-sent cancel mismatch (-want, +got):\n%s", diff)
				}
				if got := h.summary().Cancels; got != 1 {
					t.Errorf("cancels = %d, want 1", got)
				}
			})
		}
	}
}

// TestCompensationScripts shows how saga tests script a compensation that
// fails: with rules that match only cancels, or with the cancel's body.
func TestCompensationScripts(t *testing.T) {
	type answer struct {
		Status int
		Error  string
		Reason string
	}
	ok := answer{Status: http.StatusOK}
	unavailable := answer{Status: http.StatusServiceUnavailable, Error: CodeUnavailable}
	tests := map[string]struct {
		mode  string
		rules []FaultRule
		body  string
		// cancels are sent one after another, with the same key.
		want        []answer
		wantFired   []int
		wantCancels int
	}{
		"fails twice, then succeeds": {
			mode: ModeNative, rules: []FaultRule{{Action: ActionCancel, Fault: "503=0", Count: 2}},
			want: []answer{unavailable, unavailable, ok}, wantFired: []int{2}, wantCancels: 1,
		},
		"fails for good": {
			mode: ModeLookup, rules: []FaultRule{{Action: ActionCancel, Fault: Fault422}},
			want: []answer{
				{Status: 422, Error: CodeRejected, Reason: reasonRefused},
				{Status: 422, Error: CodeRejected, Reason: reasonRefused},
				{Status: 422, Error: CodeRejected, Reason: reasonRefused},
			},
			wantFired: []int{3},
		},
		"fails for good by its body": {
			mode: ModeNone, body: `{"reject":"refund_window_closed"}`,
			want: []answer{
				{Status: 422, Error: CodeRejected, Reason: "refund_window_closed"},
				{Status: 422, Error: CodeRejected, Reason: "refund_window_closed"},
			},
		},
		"only one collection's cancels fail": {
			mode: ModeNone, rules: []FaultRule{{Collection: "refunds", Action: ActionCancel, Fault: Fault422}},
			want: []answer{ok}, wantFired: []int{0}, wantCancels: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{Rules: tc.rules})
			base := "/" + tc.mode + "/tickets"
			// The rules leave creates alone.
			created := h.do(call{path: base, key: "op-1", body: charge})
			if created.status != http.StatusCreated {
				t.Fatalf("create = %d %s, want 201", created.status, created.body)
			}
			got := make([]answer, 0, len(tc.want))
			for range tc.want {
				r := h.do(call{path: base + "/" + created.object(t).ID + "/cancel", key: "op-1/compensate", body: tc.body})
				e := r.errorBody()
				got = append(got, answer{Status: r.status, Error: e.Error, Reason: e.Reason})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answers mismatch (-want, +got):\n%s", diff)
			}
			st, err := h.client.Faults(t.Context())
			if err != nil {
				t.Fatalf("Faults: %v", err)
			}
			var fired []int
			for _, r := range st.Rules {
				fired = append(fired, r.Fired)
			}
			if diff := cmp.Diff(tc.wantFired, fired); diff != "" {
				t.Errorf("fired counts mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Cancels; got != tc.wantCancels {
				t.Errorf("cancels = %d, want %d", got, tc.wantCancels)
			}
		})
	}
}
