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

package once

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestObjectName(t *testing.T) {
	dns := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	tool := v1.ToolReference{Name: "payments"}
	base := ObjectName(tool, "charge.create", "order-1")
	cases := map[string]struct {
		reason string
		tool   v1.ToolReference
		op     string
		key    string
		same   bool
	}{
		"SameRequest":     {reason: "a retry finds the same object", tool: tool, op: "charge.create", key: "order-1", same: true},
		"KindDefaulted":   {reason: "an empty kind is Tool", tool: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"}, op: "charge.create", key: "order-1", same: true},
		"OtherKey":        {reason: "keys get names of their own", tool: tool, op: "charge.create", key: "order-2"},
		"OtherOperation":  {reason: "operations get names of their own", tool: tool, op: "charge.refund", key: "order-1"},
		"ClusterTool":     {reason: "a ClusterTool of the same name is another tool", tool: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "payments"}, op: "charge.create", key: "order-1"},
		"KeyWithSlashes":  {reason: "any key makes a valid name", tool: tool, op: "charge.create", key: "mcp/ab/Ünïcode key/../x"},
		"LongToolName":    {reason: "a long tool name is cut", tool: v1.ToolReference{Name: strings.Repeat("a", 250)}, op: "x", key: "k"},
		"SeparatorShifts": {reason: "moving text between tool and operation changes the name", tool: v1.ToolReference{Name: "payments-charge"}, op: "create", key: "order-1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := ObjectName(tc.tool, tc.op, tc.key)
			if !dns.MatchString(got) || len(got) > 63 {
				t.Errorf("%s\nObjectName(...) = %q, not a DNS-1123 label", tc.reason, got)
			}
			if (got == base) != tc.same {
				t.Errorf("%s\nObjectName(...) = %q, base %q: same = %v, want %v", tc.reason, got, base, got == base, tc.same)
			}
		})
	}
}

func op(params string, mut ...func(*v1.SideEffectOperation)) *v1.SideEffectOperation {
	o := newOperation(Request{Namespace: "ns", Tool: v1.ToolReference{Name: "t"}, Operation: "o", Key: "k",
		Parameters: json.RawMessage(params)})
	for _, m := range mut {
		m(o)
	}
	return o
}

func TestSameRequest(t *testing.T) {
	cases := map[string]struct {
		reason    string
		want, got *v1.SideEffectOperation
		differs   string
	}{
		"Same":          {reason: "key order and spacing do not matter", want: op(`{"a":1,"b":"x"}`), got: op(`{ "b":"x", "a":1.0 }`)},
		"NoParameters":  {reason: "no parameters on both sides", want: op(``), got: op(``)},
		"OtherValue":    {reason: "another value is another request", want: op(`{"a":1}`), got: op(`{"a":2}`), differs: "other parameters"},
		"MissingParams": {reason: "parameters against none", want: op(`{"a":1}`), got: op(``), differs: "other parameters"},
		"OtherOp": {reason: "another operation", want: op(`{}`), differs: "it is operation p",
			got: op(`{}`, func(o *v1.SideEffectOperation) { o.Spec.Operation = "p" })},
		"OtherTool": {reason: "another tool", want: op(`{}`), differs: "it names Tool u",
			got: op(`{}`, func(o *v1.SideEffectOperation) { o.Spec.ToolRef.Name = "u" })},
		"OtherTTL": {reason: "how long the object is kept binds nothing", want: op(`{}`),
			got: op(`{}`, func(o *v1.SideEffectOperation) { o.Spec.TTLSecondsAfterFinished = nil })},
		"OtherKey": {reason: "an object of that name with another key", want: op(`{}`), differs: `holds key "z"`,
			got: op(`{}`, func(o *v1.SideEffectOperation) { o.Spec.IdempotencyKey = "z" })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := sameRequest(tc.want, tc.got)
			if (got == "") != (tc.differs == "") || !strings.Contains(got, tc.differs) {
				t.Errorf("%s\nsameRequest(...) = %q, want it to contain %q", tc.reason, got, tc.differs)
			}
		})
	}
}

func withStatus(st v1.SideEffectOperationStatus, reason, msg string) *v1.SideEffectOperation {
	o := op(`{}`)
	o.Name = "x"
	o.Status = st
	if reason != "" {
		o.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}}
	}
	return o
}

func TestOutcome(t *testing.T) {
	cases := map[string]struct {
		reason string
		op     *v1.SideEffectOperation
		want   Result
		err    error
		done   bool
	}{
		"Planned": {reason: "nothing yet", op: withStatus(v1.SideEffectOperationStatus{}, "", "")},
		"Unknown": {reason: "an unknown outcome is waited for", op: withStatus(v1.SideEffectOperationStatus{State: v1.StateUnknown}, v1.ReasonOutcomeUnknown, "m")},
		"Committed": {reason: "the recorded result", done: true,
			op: withStatus(v1.SideEffectOperationStatus{State: v1.StateCommitted, ExternalObjectID: "ch_1", Attempts: 1,
				Result: &runtime.RawExtension{Raw: []byte(`{"id":"ch_1"}`)}}, v1.ReasonCommitted, "Committed"),
			want: Result{Namespace: "ns", Name: "x", State: v1.StateCommitted, ExternalObjectID: "ch_1", Attempts: 1,
				Result: json.RawMessage(`{"id":"ch_1"}`)}},
		"Failed": {reason: "failed for good", done: true,
			op:  withStatus(v1.SideEffectOperationStatus{State: v1.StateFailedFinal, ErrorClass: v1.ErrorPermanent, ErrorMessage: "422 refused"}, v1.ReasonRejected, "Rejected"),
			err: &FailedError{Namespace: "ns", Name: "x", Class: v1.ErrorPermanent, Reason: v1.ReasonRejected, Message: "422 refused"}},
		"FailedByPerson": {reason: "a person's Fail of an unknown outcome is not \"no effect\"", done: true,
			op:  withStatus(v1.SideEffectOperationStatus{State: v1.StateFailedFinal, ErrorMessage: "not in the log"}, v1.ReasonResolvedFailed, "Failed by alice"),
			err: &FailedError{Namespace: "ns", Name: "x", Reason: v1.ReasonResolvedFailed, Message: "not in the log", Decided: true}},
		"FailedThenContradicted": {reason: "a failure the tool contradicted later is not \"no effect\"", done: true,
			op: withStatus(v1.SideEffectOperationStatus{State: v1.StateFailedFinal, ErrorMessage: "names effect ch_1"},
				v1.ReasonEffectReported, "names effect ch_1"),
			err: &FailedError{Namespace: "ns", Name: "x", Reason: v1.ReasonEffectReported, Message: "names effect ch_1",
				EffectReported: true}},
		"Mismatch": {reason: "the operator's mismatch", done: true,
			op:  withStatus(v1.SideEffectOperationStatus{State: v1.StateFailedFinal, ErrorClass: v1.ErrorConflict, ErrorMessage: "bound"}, v1.ReasonIdempotencyParameterMismatch, "bound"),
			err: &MismatchError{Namespace: "ns", Name: "x", Key: "k", Message: "bound", Outcome: true}},
		"NeedsReview": {reason: "a person decides", done: true,
			op:  withStatus(v1.SideEffectOperationStatus{State: v1.StateNeedsReview}, v1.ReasonNeedsReview, "Cannot tell"),
			err: &NeedsReviewError{Namespace: "ns", Name: "x", Message: "Cannot tell"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, done, err := Outcome(tc.op)
			if done != tc.done {
				t.Errorf("%s\nOutcome(...): done = %v, want %v", tc.reason, done, tc.done)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nOutcome(...): -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.err, err); diff != "" {
				t.Errorf("%s\nOutcome(...): -want error, +got error:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestTransient(t *testing.T) {
	gr := schema.GroupResource{Group: "effects.once.dev", Resource: "sideeffectoperations"}
	cases := map[string]struct {
		err  error
		want bool
	}{
		"ServerTimeout":   {err: apierrors.NewServerTimeout(gr, "create", 1), want: true},
		"TooManyRequests": {err: apierrors.NewTooManyRequests("slow down", 1), want: true},
		"Internal":        {err: apierrors.NewInternalError(errors.New("etcd")), want: true},
		"Forbidden":       {err: apierrors.NewForbidden(gr, "x", errors.New("no")), want: false},
		"Invalid":         {err: apierrors.NewBadRequest("bad"), want: false},
		"AlreadyExists":   {err: apierrors.NewAlreadyExists(gr, "x"), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Transient(tc.err); got != tc.want {
				t.Errorf("Transient(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

func TestOperationKeptAndRemembered(t *testing.T) {
	type spec struct {
		TTL       *int32
		Retention *metav1.Duration
	}
	cases := map[string]struct {
		reason string
		req    Request
		want   spec
	}{
		"Defaults": {reason: "an hour after it ends, and the API server's retention",
			want: spec{TTL: ptr.To[int32](3600)}},
		"TTL": {reason: "the caller's TTL", req: Request{TTLSecondsAfterFinished: ptr.To[int32](60)},
			want: spec{TTL: ptr.To[int32](60)}},
		"ZeroTTL": {reason: "0 deletes as soon as it ends", req: Request{TTLSecondsAfterFinished: ptr.To[int32](0)},
			want: spec{TTL: ptr.To[int32](0)}},
		"KeptForEver": {reason: "a negative TTL sets none", req: Request{TTLSecondsAfterFinished: ptr.To[int32](-1)}},
		"Retention": {reason: "the caller's retention", req: Request{Retention: 72 * time.Hour},
			want: spec{TTL: ptr.To[int32](3600), Retention: &metav1.Duration{Duration: 72 * time.Hour}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.req.Namespace, tc.req.Tool, tc.req.Operation, tc.req.Key = "ns", v1.ToolReference{Name: "t"}, "o", "k"
			o := newOperation(tc.req)
			if diff := cmp.Diff(tc.want, spec{TTL: o.Spec.TTLSecondsAfterFinished, Retention: o.Spec.Retention}); diff != "" {
				t.Errorf("%s\nnewOperation(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestOperationUse: an operation's key is used from its creation, and
// ended only in a terminal state, at its completion.
func TestOperationUse(t *testing.T) {
	made := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	done := made.Add(3 * time.Hour)
	cases := map[string]struct {
		state      v1.OperationState
		completion *time.Time
		want       KeyUse
	}{
		"Planned":        {want: KeyUse{First: made}},
		"Started":        {state: v1.StateStarted, want: KeyUse{First: made}},
		"Unknown":        {state: v1.StateUnknown, want: KeyUse{First: made}},
		"NeedsReview":    {state: v1.StateNeedsReview, want: KeyUse{First: made}},
		"Committed":      {state: v1.StateCommitted, completion: &done, want: KeyUse{First: made, Ended: true, End: done}},
		"FailedFinal":    {state: v1.StateFailedFinal, completion: &done, want: KeyUse{First: made, Ended: true, End: done}},
		"NoCompletion":   {state: v1.StateCommitted, want: KeyUse{First: made, Ended: true, End: made}},
		"CompletionOnly": {state: v1.StateNeedsReview, completion: &done, want: KeyUse{First: made}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			op := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(made)}}
			op.Status.State = tc.state
			if tc.completion != nil {
				op.Status.CompletionTime = &metav1.Time{Time: *tc.completion}
			}
			if diff := cmp.Diff(tc.want, OperationUse(op)); diff != "" {
				t.Errorf("OperationUse: -want, +got:\n%s", diff)
			}
		})
	}
}
