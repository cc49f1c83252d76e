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

package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects/memory"
	"github.com/once-dev/once/internal/protocol"
)

// TestPasses drives the reconciler's passes against the in-memory tool,
// fast and below envtest: what each answer leads to, through claim, call
// and record. The client here is controller-runtime's fake: what the API
// server decides (conflicts between workers, CEL rules, defaults) is
// tested against a real one in the Ginkgo suite.
func TestPasses(t *testing.T) {
	type want struct {
		State   v1.OperationState
		Effects int
		Calls   int
	}
	cases := map[string]struct {
		reason string
		mode   v1.IdempotencyMode
		script []memory.Answer
		want   want
	}{
		"NativeLost": {reason: "A lost answer from a Native tool is settled by a re-send.",
			mode: v1.IdempotencyNative, script: []memory.Answer{memory.Lose},
			want: want{v1.StateCommitted, 1, 2}},
		"LookupLost": {reason: "A lost answer from a Lookup tool is settled by a lookup.",
			mode: v1.IdempotencyLookup, script: []memory.Answer{memory.Lose},
			want: want{v1.StateCommitted, 1, 1}},
		"NoneLost": {reason: "A lost answer from a None tool goes to a person.",
			mode: v1.IdempotencyNone, script: []memory.Answer{memory.Lose},
			want: want{v1.StateNeedsReview, 1, 1}},
		"LookupGateway": {reason: "A gateway's 504 from a Lookup tool is looked up, never retried blindly.",
			mode: v1.IdempotencyLookup, script: []memory.Answer{memory.GatewayTimeout},
			want: want{v1.StateCommitted, 1, 1}},
		"NativeGatewayThenRotatedKey": {reason: "A 401 to the retry after a Native 504 answers the re-send: a person decides.",
			mode: v1.IdempotencyNative, script: []memory.Answer{memory.GatewayTimeout, memory.Unauthorized},
			want: want{v1.StateNeedsReview, 1, 2}},
		"NativeGatewayUntilExhausted": {reason: "504s until the attempts run out never end 'without effect'.",
			mode:   v1.IdempotencyNative,
			script: []memory.Answer{memory.GatewayTimeout, memory.GatewayTimeout, memory.GatewayTimeout},
			want:   want{v1.StateCommitted, 1, 4}},
		"Refused": {reason: "A refusal fails for good, without effect.",
			mode: v1.IdempotencyNone, script: []memory.Answer{memory.Refuse},
			want: want{v1.StateFailedFinal, 0, 1}},
		"RateLimited": {reason: "429s are retried until the tool accepts.",
			mode: v1.IdempotencyLookup, script: []memory.Answer{memory.Unavailable, memory.Unavailable},
			want: want{v1.StateCommitted, 1, 3}},
		"RateLimitedOut": {reason: "429s until the attempts run out fail without effect.",
			mode:   v1.IdempotencyNone,
			script: []memory.Answer{memory.Unavailable, memory.Unavailable, memory.Unavailable},
			want:   want{v1.StateFailedFinal, 0, 3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tool := &memory.Tool{Mode: tc.mode, Script: tc.script}
			op := runPasses(t, tool, tc.mode)
			got := want{op.Status.State, tool.Effects(protocol.OperationScope(op).ToolKey()), tool.Calls()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s\nmessage: %s", tc.reason, diff, op.Status.ErrorMessage)
			}
		})
	}
}

// runPasses reconciles one operation on a tool until it ends or waits for
// a person, stepping a fake clock over every wait.
func runPasses(t *testing.T, tool *memory.Tool, mode v1.IdempotencyMode) *v1.SideEffectOperation {
	t.Helper()
	s := runtime.NewScheme()
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	spec := v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
		Idempotency: v1.ToolIdempotency{Mode: mode, LookupDelay: &metav1.Duration{}},
		Operations: []v1.ToolOperation{{Name: "charge.create",
			Lookup: &v1.LookupRequest{Path: "/charges", Found: "false", Absent: "true"}}}}
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "op", UID: "uid-op", Generation: 1},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Kind: v1.ToolKindTool, Name: "tool"},
			Operation: "charge.create", RetryPolicy: &v1.RetryPolicy{MaxAttempts: 3}},
	}
	c := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1.SideEffectOperation{}).
		WithObjects(op, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tool", UID: "uid-tool"}, Spec: spec}).
		Build()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC))
	r := &SideEffectOperationReconciler{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(100),
		Connector: tool, Validator: noValidation{}, Budgets: NewRetryBudgets(), Clock: clk,
		Holder: "worker", MaxClaim: time.Minute, ClaimGrace: time.Second}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "op"}}
	for range 100 {
		res, err := r.Reconcile(context.Background(), req)
		if err != nil {
			t.Fatalf("pass: %v", err)
		}
		got := &v1.SideEffectOperation{}
		if err := c.Get(context.Background(), req.NamespacedName, got); err != nil {
			t.Fatal(err)
		}
		if got.Status.State.IsTerminal() || got.Status.State == v1.StateNeedsReview {
			return got
		}
		clk.Step(max(res.RequeueAfter, time.Second))
	}
	t.Fatalf("the operation did not settle in 100 passes")
	return nil
}

// noValidation accepts every tool: the in-memory tool has no expressions.
type noValidation struct{}

func (noValidation) Validate(*v1.ToolSpec) error { return nil }

func (noValidation) Warnings(*v1.ToolSpec) []string { return nil }

func (noValidation) CheckParameters(*v1.ToolSpec, string, []byte) error { return nil }
