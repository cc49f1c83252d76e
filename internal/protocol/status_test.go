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

package protocol

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestConditionsSayItOnce: each state has Ready and Succeeded, and
// Reconciling or Stalled only while True; the message is on every
// condition but Succeeded.
func TestConditionsSayItOnce(t *testing.T) {
	tests := map[string]struct {
		state   v1.OperationState
		blocked bool
		want    []string // type=status "message" of each condition, in order
	}{
		"committed": {state: v1.StateCommitted,
			want: []string{`Ready=True "M"`, `Succeeded=True ""`}},
		"started": {state: v1.StateStarted,
			want: []string{`Ready=False "M"`, `Succeeded=Unknown ""`, `Reconciling=True "M"`}},
		"needs review": {state: v1.StateNeedsReview,
			want: []string{`Ready=False "M"`, `Succeeded=Unknown ""`, `Stalled=True "M"`}},
		"failed for good": {state: v1.StateFailedFinal,
			want: []string{`Ready=False "M"`, `Succeeded=False ""`, `Stalled=True "M"`}},
		"waiting for a tool": {state: v1.StatePlanned, blocked: true,
			want: []string{`Ready=False "M"`, `Succeeded=Unknown ""`, `Stalled=True "M"`}},
	}
	for reason, tt := range tests {
		t.Run(reason, func(t *testing.T) {
			// From a record that had all four, as an earlier release
			// wrote them: a condition that turned False goes.
			var st v1.SideEffectOperationStatus
			transitionBlocked(&st, v1.StateStarted, "Was", "Old", false, env())
			transitionBlocked(&st, v1.StateNeedsReview, "Was", "Old", false, env())
			transitionBlocked(&st, tt.state, "Reason", "M", tt.blocked, env())
			var got []string
			for _, c := range st.Conditions {
				got = append(got, fmt.Sprintf("%s=%s %q", c.Type, c.Status, c.Message))
				if c.Reason != "Reason" {
					t.Errorf("%s has reason %q, want Reason", c.Type, c.Reason)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("conditions (-want, +got):\n%s", diff)
			}
		})
	}
}

// TestHistoryToldOnce: the newest transition's message is Ready's alone;
// it moves into its entry when the next transition comes, and an entry an
// earlier release wrote with its message keeps it.
func TestHistoryToldOnce(t *testing.T) {
	var st v1.SideEffectOperationStatus
	st.History = []v1.Transition{{State: v1.StatePlanned, Reason: v1.ReasonToolNotFound, Message: "Written before"}}
	st.Attempts = 1
	transition(&st, v1.StateStarted, v1.ReasonExecuting, "Attempt 1 claimed", env())
	transition(&st, v1.StateUnknown, v1.ReasonOutcomeUnknown, "Lost", env())
	transition(&st, v1.StateReconciling, v1.ReasonReconciling, "Asked once", env())
	transition(&st, v1.StateReconciling, v1.ReasonReconciling, "Asked twice", env())
	transition(&st, v1.StateCommitted, v1.ReasonCommitted, "Committed as ch_1", env())
	var got []string
	for _, h := range st.History {
		got = append(got, fmt.Sprintf("%s %q", h.State, h.Message))
	}
	// A claim's message says no more than its reason and attempt.
	want := []string{`Planned "Written before"`, `Started ""`, `Unknown "Lost"`,
		`Reconciling "Asked twice"`, `Committed ""`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history (-want, +got):\n%s", diff)
	}
	if m := readyMessage(st.Conditions); m != "Committed as ch_1" {
		t.Errorf("Ready says %q, want the newest transition's message", m)
	}
}

// TestFirstCommitKeepsNoObservation: the call that commits a first attempt
// is said by the record itself; every other answer stays as evidence.
func TestFirstCommitKeepsNoObservation(t *testing.T) {
	ok := CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 200, ExternalObjectID: "ch_1",
		Request: "POST /charges", Message: "200 OK: {...}"}
	p := policy(v1.IdempotencyNative)
	first := Next(v1.SideEffectOperationStatus{}, nil, p, env()).Status
	tests := map[string]struct {
		st   v1.SideEffectOperationStatus
		r    CallResult
		want []v1.ObservationKind
	}{
		"a first attempt that commits": {st: first, r: ok},
		"a first attempt refused": {st: first,
			r:    CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 400, Message: "400 Bad Request"},
			want: []v1.ObservationKind{v1.ObservationCall}},
		"a first attempt whose answer was lost": {st: first, r: CallResult{Outcome: v1.OutcomeUnknown, Message: "reset"},
			want: []v1.ObservationKind{v1.ObservationCall}},
		"a second attempt that commits": {
			st: func() v1.SideEffectOperationStatus {
				st := AfterCall(first, p, env(), CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 429}).Status
				st.NextAttemptTime = nil
				return Next(st, nil, p, env()).Status
			}(),
			r: ok, want: []v1.ObservationKind{v1.ObservationCall, v1.ObservationCall}},
	}
	for reason, tt := range tests {
		t.Run(reason, func(t *testing.T) {
			d := AfterCall(tt.st, p, env(), tt.r)
			var got []v1.ObservationKind
			for _, o := range d.Status.Observations {
				got = append(got, o.Kind)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("observations (-want, +got):\n%s", diff)
			}
		})
	}
}
