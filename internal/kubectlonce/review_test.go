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

package kubectlonce

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
)

func stalled(reason, msg string, when metav1.Time) []metav1.Condition {
	return []metav1.Condition{
		{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg, LastTransitionTime: when},
		{Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg, LastTransitionTime: when},
	}
}

func operation(ns, name string, st v1.SideEffectOperationStatus) v1.SideEffectOperation {
	return v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: at(0)}, Status: st}
}

func TestReviewRows(t *testing.T) {
	review := v1.SideEffectOperationStatus{State: v1.StateNeedsReview,
		Conditions: stalled(v1.ReasonNeedsReview, "Attempt 1 has an unknown outcome", at(10)),
		History:    []v1.Transition{{Time: at(10), State: v1.StateNeedsReview, Reason: v1.ReasonNeedsReview}}}
	held := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonSuspended,
		Message: "Suspended by Tool pay (spec.suspend): attempt 2 waits until it is resumed", LastTransitionTime: at(1)}}
	cases := map[string]struct {
		reason string
		ops    []v1.SideEffectOperation
		sagas  []v1.Saga
		want   []reviewRow
	}{
		"Nothing": {
			reason: "Committed, working and failed records need nobody.",
			ops: []v1.SideEffectOperation{
				operation("a", "done", v1.SideEffectOperationStatus{State: v1.StateCommitted}),
				operation("a", "busy", v1.SideEffectOperationStatus{State: v1.StateStarted}),
				operation("a", "failed", v1.SideEffectOperationStatus{State: v1.StateFailedFinal,
					Conditions: stalled(v1.ReasonRejected, "Rejected", at(1))}),
			},
			sagas: []v1.Saga{{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"},
				Status: v1.SagaStatus{State: v1.StateStarted}}},
		},
		"ReviewAndDuplicates": {
			reason: "An operation in review and the duplicate behind it; a duplicate of a working operation needs nobody.",
			ops: []v1.SideEffectOperation{
				operation("a", "x", review),
				operation("a", "x-again", v1.SideEffectOperationStatus{State: v1.StatePlanned, DuplicateOf: "x",
					History: []v1.Transition{{Time: at(20), State: v1.StatePlanned, Reason: v1.ReasonWaitingForOriginal}}}),
				operation("a", "y", v1.SideEffectOperationStatus{State: v1.StateStarted}),
				operation("a", "y-again", v1.SideEffectOperationStatus{State: v1.StatePlanned, DuplicateOf: "y"}),
				operation("b", "x-again", v1.SideEffectOperationStatus{State: v1.StatePlanned, DuplicateOf: "x"}),
			},
			want: []reviewRow{
				{Namespace: "a", Kind: "SideEffectOperation", Name: "x", Wait: waitReview, Since: at(10).Time,
					Why: "Attempt 1 has an unknown outcome"},
				{Namespace: "a", Kind: "SideEffectOperation", Name: "x-again", Wait: waitOriginal, Since: at(20).Time,
					Why: "Duplicate of x, which needs review: resolve x"},
			},
		},
		"Suspended": {
			reason: "Operations held by a suspend come after what needs a decision, in a group of their own; an ended one needs nobody.",
			ops: []v1.SideEffectOperation{
				operation("a", "held", v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1,
					Conditions: held, History: []v1.Transition{{Time: at(3), State: v1.StateFailedRetryable,
						Reason: v1.ReasonSuspended}}}),
				operation("b", "x", review),
				operation("a", "ended", v1.SideEffectOperationStatus{State: v1.StateCommitted, Conditions: held}),
			},
			want: []reviewRow{
				{Namespace: "b", Kind: "SideEffectOperation", Name: "x", Wait: waitReview, Since: at(10).Time,
					Why: "Attempt 1 has an unknown outcome"},
				{Namespace: "a", Kind: "SideEffectOperation", Name: "held", Wait: waitResume, Since: at(3).Time,
					Why: "Suspended by Tool pay (spec.suspend): attempt 2 waits until it is resumed"},
			},
		},
		"Sagas": {
			reason: "A saga in review and one waiting for an approval, by namespace, the longest waiting first.",
			sagas: []v1.Saga{
				{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "approve-me"}, Status: v1.SagaStatus{State: v1.StateStarted,
					Conditions: stalled(saga.ReasonWaitingForApproval, "Step config waits for approval", at(5))}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "older"}, Status: v1.SagaStatus{State: v1.StateNeedsReview,
					Conditions: stalled(saga.ReasonCompensationFailed, "The compensation of step a failed\nfor good", at(2))}},
				{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "later-namespace-first"}, Status: v1.SagaStatus{State: v1.StateNeedsReview,
					Conditions: stalled(v1.ReasonNeedsReview, strings.Repeat("long ", 30), at(9))}},
			},
			want: []reviewRow{
				{Namespace: "a", Kind: "Saga", Name: "later-namespace-first", Wait: waitReview, Since: at(9).Time,
					Why: strings.Repeat("long ", 19) + "lo..."},
				{Namespace: "b", Kind: "Saga", Name: "older", Wait: waitReview, Since: at(2).Time,
					Why: "The compensation of step a failed..."},
				{Namespace: "b", Kind: "Saga", Name: "approve-me", Wait: waitApproval, Since: at(5).Time,
					Why: "Step config waits for approval"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, reviewRows(tc.ops, tc.sagas)); diff != "" {
				t.Errorf("%s\nreviewRows(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWriteReview(t *testing.T) {
	rows := []reviewRow{{Namespace: "team-a", Kind: "SideEffectOperation", Name: "x", Wait: waitReview,
		Since: at(0).Time, Why: "Attempt 1 has an unknown outcome"}}
	cases := map[string]struct {
		reason string
		all    bool
		want   string
	}{
		"Namespace": {reason: "One namespace: no NAMESPACE column.", want: "" +
			"KIND                  NAME   STATE         AGE   WHY\n" +
			"SideEffectOperation   x      NeedsReview   5m    Attempt 1 has an unknown outcome\n"},
		"All": {reason: "-A adds the NAMESPACE column.", all: true, want: "" +
			"NAMESPACE   KIND                  NAME   STATE         AGE   WHY\n" +
			"team-a      SideEffectOperation   x      NeedsReview   5m    Attempt 1 has an unknown outcome\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeReview(&out, rows, tc.all, at(300).Time); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("%s\nwriteReview: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWriteReviewList(t *testing.T) {
	rows := []reviewRow{{Namespace: "team-a", Kind: "SideEffectOperation", Name: "x", Wait: waitReview,
		Since: at(0).Time, Why: "Attempt 1 has an unknown outcome"}}
	since := at(0).UTC().Format(time.RFC3339)
	cases := map[string]struct {
		reason string
		rows   []reviewRow
		format string
		want   string
	}{
		"JSON": {reason: "Each row is an item, its wait as state, its start in RFC 3339.", rows: rows, format: "json",
			want: `{
  "items": [
    {
      "namespace": "team-a",
      "kind": "SideEffectOperation",
      "name": "x",
      "state": "NeedsReview",
      "since": "` + since + `",
      "why": "Attempt 1 has an unknown outcome"
    }
  ]
}
`},
		"YAML": {reason: "The same list in YAML.", rows: rows, format: "yaml", want: "items:\n" +
			"- kind: SideEffectOperation\n  name: x\n  namespace: team-a\n  since: \"" + since + "\"\n" +
			"  state: NeedsReview\n  why: Attempt 1 has an unknown outcome\n"},
		"Nothing": {reason: "Nothing waits: an empty list, not a sentence.", format: "json", want: "{\n  \"items\": []\n}\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeReviewList(&out, tc.rows, tc.format); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("%s\nwriteReviewList: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
