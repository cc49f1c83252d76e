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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/presence"
	"github.com/once-dev/once/internal/saga"
)

func TestCheckFlags(t *testing.T) {
	cases := map[string]struct {
		reason string
		err    error
		want   string
	}{
		"TextOutput": {reason: "No -o is text.", err: checkOutput("")},
		"JSON":       {reason: "-o json is known.", err: checkOutput("json")},
		"YAML":       {reason: "-o yaml is known.", err: checkOutput("yaml")},
		"WideOutput": {reason: "Other formats are refused, saying which are known.", err: checkOutput("wide"),
			want: `--output "wide": use json or yaml`},
		"NoDryRun":     {reason: "--dry-run=none writes.", err: checkDryRun("none")},
		"ClientDryRun": {reason: "--dry-run=client is known.", err: checkDryRun("client")},
		"ServerDryRun": {reason: "--dry-run=server is known.", err: checkDryRun("server")},
		"TrueDryRun": {reason: "kubectl's old --dry-run=true is refused, saying which are known.", err: checkDryRun("true"),
			want: `--dry-run "true": use none, client or server`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errString(tc.err)); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWriteMessages(t *testing.T) {
	op := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
	cases := map[string]struct {
		reason string
		dryRun string
		want   string
	}{
		"Write": {reason: "A write says what happens next.", dryRun: "none",
			want: "sideeffectoperation/x: wrote spec.resolution Retry by alice; Once applies it on its next pass (kubectl once why x)"},
		"Server": {reason: "A server dry run says nothing changed, and which dry run.", dryRun: "server",
			want: "sideeffectoperation/x: would write spec.resolution Retry by alice; nothing changed (server dry run)"},
		"Client": {reason: "So does a client dry run.", dryRun: "client",
			want: "sideeffectoperation/x: would write spec.resolution Retry by alice; nothing changed (client dry run)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := "sideeffectoperation/" + op.Name + ": " + wrote(tc.dryRun) + " spec.resolution Retry by alice; " +
				outcome(tc.dryRun, "Once applies it on its next pass (kubectl once why x)")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestVersionWarnings(t *testing.T) {
	cases := map[string]struct {
		reason string
		v      Version
		want   []string
	}{
		"Same": {reason: "Managers of the plugin's version: no warning.",
			v: Version{Plugin: "v1", Managers: []presence.Manager{{Namespace: "once-system", Holder: "a", Version: "v1"}}}},
		"None": {reason: "No manager: no warning (the text says so).", v: Version{Plugin: "v1"}},
		"Differs": {reason: "One warning per manager of another version, naming it.",
			v: Version{Plugin: "v1", Managers: []presence.Manager{{Namespace: "once-system", Holder: "a", Version: "v1"},
				{Namespace: "once-system", Holder: "b", Version: "v0.9"}, {Namespace: "once-system", Holder: "c"}}},
			want: []string{"manager b in namespace once-system runs version v0.9, and this plugin is version v1",
				"manager c in namespace once-system runs version , and this plugin is version v1"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, versionWarnings(tc.v)); diff != "" {
				t.Errorf("%s\nversionWarnings(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestWriteVersion(t *testing.T) {
	now := t0.Add(time.Minute)
	cases := map[string]struct {
		reason string
		v      Version
		ns     string
		want   string
	}{
		"Managers": {reason: "A line per manager, with how long ago it renewed its Lease.",
			v: Version{Plugin: "v1", Managers: []presence.Manager{{Namespace: "once-system", Holder: "once-a", Version: "v1",
				RenewTime: t0.Add(50 * time.Second)}}},
			want: "Managers:\n  NAMESPACE     HOLDER   VERSION   RENEWED\n  once-system   once-a   v1        10s ago\n"},
		"NoneAnywhere": {reason: "No manager: a line that says so and where it looked.", v: Version{Plugin: "v1"},
			want: "Manager version: unknown: no running manager found in any namespace " +
				"(none renewed a Lease labelled once.dev/manager=true within its duration)\n"},
		"NoneThere": {reason: "With --manager-namespace, it names the namespace.", v: Version{Plugin: "v1"}, ns: "ops",
			want: "Manager version: unknown: no running manager found in namespace ops " +
				"(none renewed a Lease labelled once.dev/manager=true within its duration)\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := writeVersion(&out, tc.v, tc.ns, now); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, out.String()); diff != "" {
				t.Errorf("%s\nwriteVersion(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestNameCompletions(t *testing.T) {
	review := v1.SideEffectOperationStatus{State: v1.StateNeedsReview,
		Conditions: stalled(v1.ReasonNeedsReview, "Attempt 1 has an unknown outcome", at(10))}
	ops := []v1.SideEffectOperation{
		operation("a", "charge-1", review),
		operation("a", "charge-2", v1.SideEffectOperationStatus{State: v1.StateCommitted}),
		operation("a", "mail", v1.SideEffectOperationStatus{}),
	}
	sagas := []v1.Saga{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "change"}, Status: v1.SagaStatus{State: v1.StateStarted,
			Conditions: stalled(saga.ReasonWaitingForApproval, "Step config waits for approval", at(3))}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "charge-undo"}, Status: v1.SagaStatus{State: v1.StateNeedsReview,
			Conditions: stalled(v1.ReasonNeedsReview, "The compensation failed", at(3))}},
	}
	cases := map[string]struct {
		reason string
		filter nameFilter
		prefix string
		want   []cobra.Completion
	}{
		"Any": {reason: "why completes every operation and saga, with its kind and state.", filter: anyName,
			want: []cobra.Completion{"change\tSaga Started", "charge-1\tSideEffectOperation NeedsReview",
				"charge-2\tSideEffectOperation Committed", "charge-undo\tSaga NeedsReview", "mail\tSideEffectOperation Planned"}},
		"Prefix": {reason: "Only the names that start with what is typed.", filter: anyName, prefix: "charge-",
			want: []cobra.Completion{"charge-1\tSideEffectOperation NeedsReview", "charge-2\tSideEffectOperation Committed",
				"charge-undo\tSaga NeedsReview"}},
		"Kind": {reason: "saga/ completes sagas, with the kind typed.", filter: anyName, prefix: "saga/ch",
			want: []cobra.Completion{"saga/change\tSaga Started", "saga/charge-undo\tSaga NeedsReview"}},
		"OtherKind": {reason: "A kind the plugin does not know completes nothing.", filter: anyName, prefix: "pod/"},
		"Review": {reason: "resolve completes what is in NeedsReview.", filter: reviewName,
			want: []cobra.Completion{"charge-1\tSideEffectOperation NeedsReview", "charge-undo\tSaga NeedsReview"}},
		"Approval": {reason: "approve completes the sagas waiting for an approval.", filter: approvalName,
			want: []cobra.Completion{"change\tSaga WaitingForApproval"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := nameCompletions(tc.filter, ops, sagas, tc.prefix)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nnameCompletions(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestOperationDoc(t *testing.T) {
	ctrl := true
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "change.config", Generation: 2, CreationTimestamp: at(0),
			Labels:          map[string]string{saga.LabelStep: "config"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Saga", Name: "change", Controller: &ctrl}}},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "desk"}, Operation: "config.set",
			IdempotencyKey: "k", Parameters: &runtime.RawExtension{Raw: []byte(`{"a": 1, "b": "secret"}`)},
			Resolution: &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", User: "admin"}},
		Status: v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 2, ExternalObjectID: "co_1",
			RequestHash: "sha256:00", ToolIdempotencyKey: "a/Tool:desk/config.set/k",
			Conditions: []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Committed",
				Message: "Committed by attempt 2"}},
			Resolution: &v1.AppliedResolution{Resolution: v1.Resolution{Action: v1.ResolutionRetry, By: "alice", User: "admin"},
				Generation: 2, Time: at(5), FromState: v1.StateNeedsReview},
			History: []v1.Transition{
				{Time: at(1), State: v1.StateNeedsReview, Reason: "NeedsReview", Attempt: 1},
				{Time: at(6), State: v1.StateCommitted, Reason: "Committed", Attempt: 2},
			},
			Observations: []v1.Observation{
				{Time: at(1), Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown", Holder: "m-1"},
				{Time: at(5), Kind: v1.ObservationResolution, Attempt: 1, Outcome: "Retry", Message: "Resolved by alice"},
				{Time: at(6), Kind: v1.ObservationCall, Attempt: 2, Outcome: "Succeeded", HTTPStatus: 201,
					ExternalObjectID: "co_1", Request: "POST /config body 0a"},
			},
		},
	}
	want := Story{Kind: "SideEffectOperation", Namespace: "a", Name: "change.config", IdempotencyKey: "k",
		State: "Committed", Since: at(6).UTC(), Why: "Committed by attempt 2",
		Operation: &OperationStory{ToolKind: "Tool", Tool: "desk", Operation: "config.set",
			ToolIdempotencyKey: "a/Tool:desk/config.set/k", ParameterFields: 2, RequestHash: "sha256:00",
			Saga: "change", Step: "config", Attempts: 2, ExternalObjectID: "co_1",
			Resolution: &Decision{Action: "Retry", By: "alice", User: "admin", Applied: true, Time: new(at(5).UTC()),
				FromState: "NeedsReview"}},
		Entries: []StoryEntry{
			{Time: at(1).UTC(), Type: "Call", Attempt: 1, Outcome: "Unknown", Holder: "m-1"},
			{Time: at(1).UTC(), Type: "Transition", Attempt: 1, State: "NeedsReview", Reason: "NeedsReview"},
			{Time: at(5).UTC(), Type: "Resolution", Attempt: 1, Outcome: "Retry", Message: "Resolved by alice"},
			{Time: at(6).UTC(), Type: "Call", Attempt: 2, Outcome: "Succeeded", HTTPStatus: 201, ExternalObjectID: "co_1",
				Request: "POST /config body 0a"},
			// The newest transition's message is kept once, in Ready.
			{Time: at(6).UTC(), Type: "Transition", Attempt: 2, State: "Committed", Reason: "Committed",
				Message: "Committed by attempt 2"},
		},
	}
	if diff := cmp.Diff(want, operationDoc(op)); diff != "" {
		t.Errorf("operationDoc: the story in why's order, the applied resolution with who wrote it, no parameter values:"+
			" -want, +got:\n%s", diff)
	}
}

func TestSagaDoc(t *testing.T) {
	s := &v1.Saga{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "change", CreationTimestamp: at(0)},
		Spec: v1.SagaSpec{IdempotencyKey: "c-1", Steps: []v1.SagaStep{
			{Name: "ticket"}, {Name: "config", RequiresApproval: true}, {Name: "notify", RequiresApproval: true}},
			Approvals: []v1.SagaApproval{{Step: "notify", By: "bob", Reason: "ahead of time"}}},
		Status: v1.SagaStatus{State: v1.StateStarted, CurrentStep: "config", StepsDone: 1,
			Steps: []v1.SagaStepStatus{{Name: "ticket", State: v1.StateCommitted, Operation: "change.ticket",
				ExternalObjectID: "ti_1", Compensation: &v1.CompensationStatus{Operation: "change.ticket.undo",
					Resolution: &v1.SagaResolution{Step: "ticket", Action: v1.SagaMarkCompensated, By: "carol", User: "admin"}}}},
			History: []v1.Transition{{Time: at(2), State: v1.StateStarted, Reason: "WaitingForApproval", Step: "config",
				Message: "Step config waits for approval"}},
		},
	}
	want := Story{Kind: "Saga", Namespace: "a", Name: "change", IdempotencyKey: "c-1", State: "Started", Since: at(2).UTC(),
		Saga: &SagaStory{CurrentStep: "config", StepsDone: 1, Steps: []StepStory{
			{Name: "ticket", State: "Committed", Operation: "change.ticket", ExternalObjectID: "ti_1",
				Compensation: &CompensationStory{Operation: "change.ticket.undo",
					Resolution: &Decision{Action: "MarkCompensated", By: "carol", User: "admin", Applied: true}}},
			{Name: "config", WaitsForApproval: true},
			{Name: "notify", Approval: &Decision{By: "bob", Reason: "ahead of time"}},
		}},
		Entries: []StoryEntry{{Time: at(2).UTC(), Type: "Transition", Step: "config", State: "Started",
			Reason: "WaitingForApproval", Message: "Step config waits for approval"}},
	}
	if diff := cmp.Diff(want, sagaDoc(s)); diff != "" {
		t.Errorf("sagaDoc: each step with its approval, written or applied, and its compensation's resolution: "+
			"-want, +got:\n%s", diff)
	}
}
