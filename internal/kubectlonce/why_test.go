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

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
)

func TestWriteOperation(t *testing.T) {
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "s.pay", Generation: 3, CreationTimestamp: at(0),
			Labels:          map[string]string{saga.LabelStep: "pay", saga.LabelRole: saga.RoleStep},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Saga", Name: "s", Controller: new(true)}}},
		Spec: v1.SideEffectOperationSpec{
			ToolRef: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "payments"}, Operation: "charge.create",
			IdempotencyKey: "order-1",
			Parameters:     &runtime.RawExtension{Raw: []byte(`{"amount": 4200, "card": "4242 4242 4242 4242"}`)},
			Resolution:     &v1.Resolution{Action: v1.ResolutionRetry, By: "bob", User: "bob@corp", Reason: "not charged"},
		},
		Status: v1.SideEffectOperationStatus{
			State: v1.StateNeedsReview, IdempotencyKey: "order-1", Attempts: 1, RequestHash: "sha256:ab",
			ReviewGeneration: 2,
			Claim:            &v1.Claim{Holder: "m-1", Attempt: 1, AcquireTime: at(1), RenewTime: at(1), ExpiryTime: at(400)},
			Conditions:       stalled(v1.ReasonNeedsReview, "A person must decide", at(20)),
			History: []v1.Transition{
				{Time: at(1), State: v1.StateStarted, Reason: "Executing", Message: "Attempt 1 claimed", Attempt: 1},
				// The newest transition's message is Ready's (Stalled's
				// here), kept there only.
				{Time: at(20), State: v1.StateNeedsReview, Reason: "NeedsReview", Attempt: 1},
			},
			Observations: []v1.Observation{{Time: at(3), Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown",
				Request: "POST /charges body 0a1b", Message: "timeout"}},
		},
	}
	want := `SideEffectOperation team-a/s.pay
  Tool:         ClusterTool payments, operation charge.create
  Key:          order-1 (sent to the tool as team-a/ClusterTool:payments/charge.create/order-1)
  Parameters:   2 fields, request hash sha256:ab
  Saga:         s, step pay
  State:        NeedsReview since 2026-12-03T17:00:20Z (4m40s ago)
  Why:          A person must decide
  Attempts:     1
  Claim:        held by m-1 for attempt 1, expires 2026-12-03T17:06:40Z (in 100s)
  Written:      Retry by bob (authenticated as bob@corp) ("not charged"), in spec.resolution, not applied yet

Story, oldest first:
  TIME                   WHAT             ATTEMPT   DETAIL
  2026-12-03T17:00:01Z   -> Started       1         Executing: Attempt 1 claimed
  2026-12-03T17:00:03Z   call             1         Unknown, POST /charges body 0a1b: timeout
  2026-12-03T17:00:20Z   -> NeedsReview   1         NeedsReview: A person must decide
`
	var out bytes.Buffer
	if err := writeOperation(&out, op, at(300).Time); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("writeOperation: -want, +got:\n%s", diff)
	}
}

func TestWriteOperationAppliedResolutionIsNotPending(t *testing.T) {
	// In a second review, the Retry applied to the first is still in the
	// spec, and an edit of another field moved the generation: it is not
	// a resolution waiting to be applied, and why does not say it is.
	retry := v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "not charged"}
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pay", Generation: 3, CreationTimestamp: at(0)},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge.create",
			Resolution: &retry, TTLSecondsAfterFinished: new(int32(60))},
		Status: v1.SideEffectOperationStatus{State: v1.StateNeedsReview, Attempts: 2, ReviewGeneration: 2,
			Resolution: &v1.AppliedResolution{Resolution: retry, Generation: 2, Time: at(10), FromState: v1.StateNeedsReview}},
	}
	var out bytes.Buffer
	if err := writeOperation(&out, op, at(300).Time); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "not applied yet") {
		t.Errorf("the applied resolution is shown as waiting:\n%s", out.String())
	}
	if d := operationDoc(op).Operation; d == nil || d.Written != nil {
		t.Errorf("the JSON story reports the applied resolution as written and waiting: %+v", d)
	}
}

func TestWriteOperationDisregardedResolution(t *testing.T) {
	// The operation was created with a Retry in its spec (a manifest that
	// kept an earlier object's decision), and an edit of another field
	// moved the generation past its review's: the Retry is disregarded,
	// not waiting to be applied.
	retry := v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "not charged"}
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pay", Generation: 2, CreationTimestamp: at(0)},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge.create",
			Resolution: &retry, TTLSecondsAfterFinished: new(int32(60))},
		Status: v1.SideEffectOperationStatus{State: v1.StateNeedsReview, Attempts: 1, ReviewGeneration: 1,
			EarlierResolutions: []v1.Resolution{retry}},
	}
	var out bytes.Buffer
	if err := writeOperation(&out, op, at(300).Time); err != nil {
		t.Fatal(err)
	}
	const line = `Disregarded:   Retry by bob ("not charged"), in spec.resolution, decided or written before this ` +
		`review began: it does not decide this review`
	if !strings.Contains(out.String(), line) || strings.Contains(out.String(), "not applied yet") {
		t.Errorf("want the line %q and no resolution waiting, got:\n%s", line, out.String())
	}
	d := operationDoc(op).Operation
	if d == nil || d.Written != nil || d.Disregarded == nil || d.Disregarded.Action != string(v1.ResolutionRetry) {
		t.Errorf("the JSON story must report the Retry as disregarded, not written: %+v", d)
	}
}

func TestStepLines(t *testing.T) {
	steps := []v1.SagaStep{{Name: "ticket"}, {Name: "config", RequiresApproval: true}, {Name: "notify"}}
	cases := map[string]struct {
		reason string
		saga   v1.Saga
		want   []string
	}{
		"WaitingForApproval": {
			reason: "The step waited on says how to approve it; later steps have not started.",
			saga: v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1.SagaSpec{Steps: steps},
				Status: v1.SagaStatus{CurrentStep: "config", Steps: []v1.SagaStepStatus{
					{Name: "ticket", State: v1.StateCommitted, Operation: "s.ticket", ExternalObjectID: "T-1"},
					{Name: "config"}, {Name: "notify"}}}},
			want: []string{
				"ticket: Committed, operation s.ticket, external id T-1",
				"config: waits for approval (kubectl once approve s --step config)",
				"notify: not started",
			},
		},
		"ApprovedInSpec": {
			reason: "An approval written but not applied yet says so.",
			saga: v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "s"},
				Spec:   v1.SagaSpec{Steps: steps, Approvals: []v1.SagaApproval{{Step: "config", By: "alice"}}},
				Status: v1.SagaStatus{CurrentStep: "config"}},
			want: []string{
				"ticket: not started",
				"config: waits for approval (kubectl once approve s --step config)",
				"    approved by alice in spec.approvals, not applied yet",
				"notify: not started",
			},
		},
		"Compensated": {
			reason: "Approval, compensation and a person's resolution of it are told under their step.",
			saga: v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1.SagaSpec{Steps: steps},
				Status: v1.SagaStatus{Steps: []v1.SagaStepStatus{
					{Name: "ticket", State: v1.StateCompensated, Operation: "s.ticket"},
					{Name: "config", State: v1.StateCompensated, Operation: "s.config",
						Approval: &v1.AppliedApproval{By: "alice", User: "alice@corp", Reason: "window", Time: at(5)},
						Compensation: &v1.CompensationStatus{Operation: "s.config.undo", State: v1.StateCompensated,
							Resolution: &v1.SagaResolution{Step: "config", Action: v1.SagaMarkCompensated, By: "bob"}}},
					{Name: "notify", State: v1.StateFailedFinal, Operation: "s.notify", Message: "Rejected"}}}},
			want: []string{
				"ticket: Compensated, operation s.ticket",
				"config: Compensated, operation s.config",
				`    approved by alice (authenticated as alice@corp) ("window"), applied 2026-12-03T17:00:05Z`,
				"    compensation: operation s.config.undo, Compensated",
				"    compensation resolved: MarkCompensated by bob",
				"notify: FailedFinal, operation s.notify; Rejected",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stepLines(&tc.saga)); diff != "" {
				t.Errorf("%s\nstepLines: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWriteDuplicateResolution(t *testing.T) {
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "pay-again", CreationTimestamp: at(0)},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
			Operation: "charge.create", IdempotencyKey: "pay"},
		Status: v1.SideEffectOperationStatus{
			State: v1.StateCommitted, IdempotencyKey: "pay", DuplicateOf: "pay", ExternalObjectID: "ch_1",
			Resolution: &v1.AppliedResolution{Resolution: v1.Resolution{Action: v1.ResolutionMarkCommitted, By: "alice",
				ExternalObjectID: "ch_1"}, Time: at(10), FromState: v1.StateNeedsReview},
		},
	}
	var out bytes.Buffer
	if err := writeOperation(&out, op, at(300).Time); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.Contains(got, "by alice, on pay 2026-12-03T17:00:10Z") ||
		strings.Contains(got, "out of NeedsReview") {
		t.Errorf("a duplicate's adopted resolution: want it said as decided on its original, not as applied to it "+
			"out of NeedsReview, got:\n%s", got)
	}
}
