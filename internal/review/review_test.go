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

package review

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
)

var t0 = time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)

func at(sec int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)) }

func TestCanResolve(t *testing.T) {
	op := func(st v1.SideEffectOperationStatus) *v1.SideEffectOperation {
		return &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x"}, Status: st}
	}
	cases := map[string]struct {
		reason string
		op     *v1.SideEffectOperation
		err    string
	}{
		"NeedsReview": {reason: "Only NeedsReview can be resolved.", op: op(v1.SideEffectOperationStatus{State: v1.StateNeedsReview})},
		"Committed": {reason: "A terminal operation has nothing to resolve.", op: op(v1.SideEffectOperationStatus{State: v1.StateCommitted}),
			err: "x is Committed: there is nothing to resolve"},
		"Started": {reason: "Once still works on it.", op: op(v1.SideEffectOperationStatus{State: v1.StateStarted}),
			err: "x is Started: only an operation in NeedsReview can be resolved, and Once is still working on this one"},
		"New": {reason: "An empty state reads Planned.", op: op(v1.SideEffectOperationStatus{}),
			err: "x is Planned: only an operation in NeedsReview can be resolved, and Once is still working on this one"},
		"Duplicate": {reason: "A duplicate points at its original.", op: op(v1.SideEffectOperationStatus{State: v1.StatePlanned, DuplicateOf: "y"}),
			err: "x is a duplicate of y and makes no call of its own: resolve y if it needs review"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.err, errString(CanResolve(tc.op))); diff != "" {
				t.Errorf("%s\nCanResolve: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCanApprove(t *testing.T) {
	newSaga := func(st v1.SagaStatus, approvals ...v1.SagaApproval) *v1.Saga {
		return &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1.SagaSpec{
			Steps:     []v1.SagaStep{{Name: "a"}, {Name: "b", RequiresApproval: true}},
			Approvals: approvals,
		}, Status: st}
	}
	cases := map[string]struct {
		reason string
		saga   *v1.Saga
		step   string
		err    string
	}{
		"Waiting":     {reason: "A step that waits can be approved.", saga: newSaga(v1.SagaStatus{State: v1.StateStarted, CurrentStep: "b"}), step: "b"},
		"Early":       {reason: "A step can be approved before the saga reaches it.", saga: newSaga(v1.SagaStatus{}), step: "b"},
		"UnknownStep": {reason: "The saga's steps are listed.", saga: newSaga(v1.SagaStatus{}), step: "c", err: "saga s has no step c (its steps: a, b)"},
		"NoApproval":  {reason: "A step without requiresApproval.", saga: newSaga(v1.SagaStatus{}), step: "a", err: "step a of saga s does not require approval"},
		"Ended": {reason: "An ended saga runs no step.", saga: newSaga(v1.SagaStatus{State: v1.StateCommitted}), step: "b",
			err: "saga s is Committed: it runs no more steps, there is nothing to approve"},
		"Compensating": {reason: "A compensating saga runs no step.", saga: newSaga(v1.SagaStatus{State: v1.StateCompensating}), step: "b",
			err: "saga s is Compensating: it runs no more steps, there is nothing to approve"},
		"InSpec": {reason: "An approval already written.", saga: newSaga(v1.SagaStatus{}, v1.SagaApproval{Step: "b", By: "alice", User: "u-1"}), step: "b",
			err: "step b of saga s is already approved in spec.approvals by alice (authenticated as u-1)"},
		"Applied": {reason: "An approval already applied.", step: "b",
			saga: newSaga(v1.SagaStatus{Steps: []v1.SagaStepStatus{{Name: "b", Approval: &v1.AppliedApproval{By: "alice", Time: at(0)}}}}),
			err:  "step b of saga s was approved by alice at 2026-12-03T17:00:00Z"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.err, errString(CanApprove(tc.saga, tc.step))); diff != "" {
				t.Errorf("%s\nCanApprove: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestCheckOperation(t *testing.T) {
	retry := v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: "no charge in the dashboard"}
	op := func(generation, reviewGeneration int64, held *v1.Resolution) *v1.SideEffectOperation {
		return &v1.SideEffectOperation{
			ObjectMeta: metav1.ObjectMeta{Name: "x", Generation: generation},
			Spec:       v1.SideEffectOperationSpec{Resolution: held},
			Status:     v1.SideEffectOperationStatus{State: v1.StateNeedsReview, ReviewGeneration: reviewGeneration},
		}
	}
	// applied is op in its second review: retry, written at generation 2,
	// was applied to the first, and it is still held; the spec was edited
	// since (its ttlSecondsAfterFinished), so the generation moved on.
	applied := func(held *v1.Resolution) *v1.SideEffectOperation {
		o := op(3, 2, held)
		o.Status.Resolution = &v1.AppliedResolution{Resolution: retry, Generation: 2}
		return o
	}
	// disregarded is op created with retry in its spec, in review since
	// generation 1 with retry standing, and edited since.
	disregarded := func(held *v1.Resolution) *v1.SideEffectOperation {
		o := op(3, 1, held)
		o.Status.EarlierResolutions = []v1.Resolution{retry}
		return o
	}
	with := func(f func(*v1.Resolution)) *v1.Resolution {
		r := retry
		f(&r)
		return &r
	}
	cases := map[string]struct {
		reason string
		op     *v1.SideEffectOperation
		r      v1.Resolution
		err    string
	}{
		"None": {reason: "An operation in review without a resolution takes one.", op: op(1, 1, nil), r: retry},
		"SameDuringReview": {reason: "The same resolution written during this review is applied already: writing it again changes nothing.",
			op: op(2, 1, &retry), r: retry,
			err: "x already holds this resolution, written during this review: Once applies it on its next pass"},
		"SameBeforeReview": {reason: "The same resolution written before the review is not applied; only another reason makes it new.",
			op: op(2, 2, &retry), r: retry,
			err: "x already holds this resolution from before it entered review, and Once applies only one written since: " +
				"write it with another --reason"},
		"SameOtherUser": {reason: "The user is admission's, not the writer's: a resolution differing only there is the same.",
			op: op(2, 1, with(func(r *v1.Resolution) { r.User = "u-1" })), r: retry,
			err: "x already holds this resolution, written during this review: Once applies it on its next pass"},
		"OtherReason": {reason: "Another reason is another resolution.",
			op: op(2, 2, with(func(r *v1.Resolution) { r.Reason = "" })), r: retry},
		"OtherBy": {reason: "Another person is another resolution.",
			op: op(2, 2, with(func(r *v1.Resolution) { r.By = "bob" })), r: retry},
		"OtherAction": {reason: "Another action is another resolution.",
			op: op(2, 2, with(func(r *v1.Resolution) { r.Action = v1.ResolutionFail })), r: retry},
		"OtherExternalID": {reason: "Another effect found at the tool is another resolution.",
			op: op(2, 2, &v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_1", By: "alice"}),
			r:  v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_2", By: "alice"}},
		"AppliedBefore": {reason: "The decision applied to an earlier review, still held, decides nothing now, however the generation moved: only another reason makes it new.",
			op: applied(&retry), r: retry,
			err: "x was resolved with this decision in an earlier review, and Once applies a decision once: " +
				"to decide this review, write it with another --reason"},
		"AppliedBeforeOtherHeld": {reason: "Nor can it be written back over another resolution.",
			op: applied(with(func(r *v1.Resolution) { r.Reason = "" })), r: retry,
			err: "x was resolved with this decision in an earlier review, and Once applies a decision once: " +
				"to decide this review, write it with another --reason"},
		"AppliedBeforeNewReason": {reason: "A new reason makes a new decision.",
			op: applied(&retry), r: *with(func(r *v1.Resolution) { r.Reason = "still no charge in the dashboard" })},
		"DisregardedHeld": {reason: "The resolution that stood when the review began, held still, is not applied however the generation moved.",
			op: disregarded(&retry), r: retry,
			err: "x already holds this resolution from before it entered review, and Once applies only one written since: " +
				"write it with another --reason"},
		"DisregardedWrittenAgain": {reason: "Removed and written again, it is still the resolution from before the review.",
			op: disregarded(nil), r: retry,
			err: "x was decided with this resolution before this review, or held it when the review began, and " +
				"Once applies a decision once: write it with another --reason"},
		"DisregardedNewReason": {reason: "A new reason makes a decision of this review.",
			op: disregarded(nil), r: *with(func(r *v1.Resolution) { r.Reason = "checked again: no charge" })},
		"NotInReview": {reason: "What cannot be resolved is said first.",
			op: func() *v1.SideEffectOperation { o := op(2, 1, &retry); o.Status.State = v1.StateCommitted; return o }(), r: retry,
			err: "x is Committed: there is nothing to resolve"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.err, errString(checkOperation(tc.op, tc.r))); diff != "" {
				t.Errorf("%s\ncheckOperation: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSagaStep(t *testing.T) {
	s := func(state v1.OperationState, current string) *v1.Saga {
		return &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "s"},
			Spec:   v1.SagaSpec{Steps: []v1.SagaStep{{Name: "a"}, {Name: "b"}}},
			Status: v1.SagaStatus{State: state, CurrentStep: current}}
	}
	retry := func(step string) v1.SagaResolution {
		return v1.SagaResolution{Step: step, Action: v1.SagaRetry, By: "alice"}
	}
	cannot := s(v1.StateNeedsReview, "b")
	cannot.Status.Conditions = []metav1.Condition{{Type: v1.ConditionStalled, Status: metav1.ConditionTrue,
		Reason: saga.ReasonCannotCompensate, Message: "Step b's effect was made by operation t-1"}}
	cases := map[string]struct {
		reason string
		saga   *v1.Saga
		r      v1.SagaResolution
		want   int
		err    string
	}{
		"Waiting":    {reason: "A resolution without a step is for the step the saga waits on.", saga: s(v1.StateNeedsReview, "b"), r: retry(""), want: 1},
		"NamedStep":  {reason: "A resolution may name the step the saga waits on.", saga: s(v1.StateNeedsReview, "a"), r: retry("a")},
		"OtherStep":  {reason: "Only the step the saga waits on takes a resolution.", saga: s(v1.StateNeedsReview, "b"), r: retry("a"), err: "saga s waits on step b, not a: a resolution can be written only for it"},
		"NoSuchStep": {reason: "A current step the spec lost is said.", saga: s(v1.StateNeedsReview, "c"), r: retry(""), err: `saga s waits on step "c", which its spec does not have`},
		"Terminal":   {reason: "An ended saga has nothing to resolve.", saga: s(v1.StateCompensated, "b"), r: retry(""), err: "saga s is Compensated: there is nothing to resolve"},
		"Working":    {reason: "Once still works on a saga not in review.", saga: s(v1.StateStarted, "b"), r: retry(""), err: "saga s is Started: only a saga in NeedsReview can be resolved"},
		"New":        {reason: "An empty state reads Planned.", saga: s("", ""), r: retry(""), err: "saga s is Planned: only a saga in NeedsReview can be resolved"},
		"Unresolvable": {reason: "Why the saga waits is said before which step it waits on.", saga: cannot, r: retry("a"),
			err: "saga s waits because step b's effect was made by operation t-1: Once cannot undo it, so only --compensated " +
				"applies, once you have undone the effect by other means"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := sagaStep(tc.saga, tc.r)
			if diff := cmp.Diff(tc.err, errString(err)); diff != "" {
				t.Errorf("%s\nsagaStep: error: -want, +got:\n%s", tc.reason, diff)
			}
			if err == nil && got != tc.want {
				t.Errorf("%s\nsagaStep = %d, want %d", tc.reason, got, tc.want)
			}
		})
	}
}

func TestSagaResolvable(t *testing.T) {
	waiting := func(reason, msg string) *v1.Saga {
		s := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "change"}}
		s.Status.State = v1.StateNeedsReview
		s.Status.Conditions = []metav1.Condition{{Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}
		return s
	}
	cannot := waiting(saga.ReasonCannotCompensate,
		"Step ticket's effect was made by operation t-1, not by this saga, which therefore does not undo it")
	cases := map[string]struct {
		reason string
		saga   *v1.Saga
		action v1.SagaResolutionAction
		err    string
	}{
		"FailedCompensation": {reason: "A compensation that failed for good may be retried.",
			saga: waiting(saga.ReasonCompensationFailed, "Step ticket: compensation failed"), action: v1.SagaRetry},
		"CannotCompensateMarked": {reason: "A step Once cannot undo may be marked compensated.",
			saga: cannot, action: v1.SagaMarkCompensated},
		"CannotCompensateRetried": {reason: "The saga applies only MarkCompensated there: a Retry would wait for ever.",
			saga: cannot, action: v1.SagaRetry,
			err: "saga change waits because step ticket's effect was made by operation t-1, not by this saga, which " +
				"therefore does not undo it: Once cannot undo it, so only --compensated applies, once you have undone " +
				"the effect by other means"},
		"Foreign": {reason: "No resolution moves a saga whose operation another made.",
			saga:   waiting(saga.ReasonForeignOperation, "Step ticket: SideEffectOperation change-ticket exists, but this saga did not make it"),
			action: v1.SagaMarkCompensated,
			err: "saga change waits because step ticket: SideEffectOperation change-ticket exists, but this saga did not " +
				"make it: no resolution applies; it goes on once that operation is gone"},
		"InvalidSpec": {reason: "No resolution mends a spec that no longer compiles.",
			saga: waiting(v1.ReasonInvalidSpec, "The spec no longer compiles, and steps have run: x"), action: v1.SagaRetry,
			err: "saga change stopped because the spec no longer compiles, and steps have run: x: no resolution applies"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.err, errString(sagaResolvable(tc.saga, tc.action))); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSagaResolutions(t *testing.T) {
	steps := []v1.SagaStep{
		{Name: "plain"},
		{Name: "undone", Compensation: &v1.Compensation{}},
		{Name: "until", RetryUntilDone: true},
	}
	s := func(held ...v1.SagaResolution) *v1.Saga {
		return &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1.SagaSpec{Steps: steps, Resolutions: held}}
	}
	entry := func(step string, action v1.SagaResolutionAction, reason string) v1.SagaResolution {
		return v1.SagaResolution{Step: step, Action: action, By: "alice", Reason: reason}
	}
	other := entry("until", v1.SagaRetry, "")
	cases := map[string]struct {
		reason string
		saga   *v1.Saga
		step   int
		r      v1.SagaResolution
		want   []v1.SagaResolution
		err    string
	}{
		"Appended": {reason: "A step's first resolution is appended.", saga: s(other), step: 1,
			r: entry("undone", v1.SagaMarkCompensated, ""), want: []v1.SagaResolution{other, entry("undone", v1.SagaMarkCompensated, "")}},
		"Replaced": {reason: "A step has one entry: another decision replaces it in place.",
			saga: s(entry("undone", v1.SagaRetry, "first"), other), step: 1, r: entry("undone", v1.SagaRetry, "second"),
			want: []v1.SagaResolution{entry("undone", v1.SagaRetry, "second"), other}},
		"RetryUntilDone": {reason: "A retryUntilDone step without compensation takes Retry.", saga: s(), step: 2,
			r: entry("until", v1.SagaRetry, ""), want: []v1.SagaResolution{entry("until", v1.SagaRetry, "")}},
		"Same": {reason: "The same decision again would not be applied again.", saga: s(entry("undone", v1.SagaRetry, "first")), step: 1,
			r:   entry("undone", v1.SagaRetry, "first"),
			err: "saga s already holds this resolution of step undone; to apply it again, write it with another --reason"},
		"SameOtherUser": {reason: "The user is admission's: a decision differing only there is the same.",
			saga: s(v1.SagaResolution{Step: "undone", Action: v1.SagaRetry, By: "alice", User: "u-1"}), step: 1,
			r:   entry("undone", v1.SagaRetry, ""),
			err: "saga s already holds this resolution of step undone; to apply it again, write it with another --reason"},
		"NoCompensation": {reason: "Only a step with a compensation can be marked compensated.", saga: s(), step: 2,
			r: entry("until", v1.SagaMarkCompensated, ""), err: "step until of saga s has no compensation: it takes --retry only"},
		"Neither": {reason: "A step with neither a compensation nor retryUntilDone takes no resolution.", saga: s(), step: 0,
			r:   entry("plain", v1.SagaRetry, ""),
			err: "step plain of saga s has neither a compensation nor retryUntilDone: it cannot be resolved"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			held := append([]v1.SagaResolution(nil), tc.saga.Spec.Resolutions...)
			got, err := sagaResolutions(tc.saga, tc.step, tc.r)
			if diff := cmp.Diff(tc.err, errString(err)); diff != "" {
				t.Errorf("%s\nsagaResolutions: error: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsagaResolutions: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(held, tc.saga.Spec.Resolutions); diff != "" {
				t.Errorf("%s\nsagaResolutions changed the saga read: -before, +after:\n%s", tc.reason, diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
