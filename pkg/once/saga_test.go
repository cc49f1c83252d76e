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
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestSagaName(t *testing.T) {
	dns := regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
	for _, key := range []string{"checkout-1", "Checkout 1", "", strings.Repeat("x", 200), "mcp-0123456789abcdef-ünï"} {
		got := SagaName(key)
		if !dns.MatchString(got) || len(got) > 63 {
			t.Errorf("SagaName(%q) = %q, not a DNS-1123 label", key, got)
		}
	}
	if SagaName("checkout-1") == SagaName("checkout-2") {
		t.Error("two keys got one name")
	}
	if got, want := SagaName("checkout-1"), "saga-checkout-1-"; !strings.HasPrefix(got, want) {
		t.Errorf("SagaName(%q) = %q, want it to start with %q", "checkout-1", got, want)
	}
}

func saga(params string, mut ...func(*v1.Saga)) *v1.Saga {
	s := newSaga(SagaRequest{Namespace: "ns", Key: "k", Inputs: json.RawMessage(`{"a":1}`), Steps: []v1.SagaStep{{
		Name: "s1", ToolRef: v1.ToolReference{Name: "t"}, Operation: "o",
		Parameters: &runtime.RawExtension{Raw: []byte(params)}, Irreversible: true,
	}}})
	for _, m := range mut {
		m(s)
	}
	return s
}

func TestSameSaga(t *testing.T) {
	cases := map[string]struct {
		reason    string
		want, got *v1.Saga
		differs   bool
	}{
		"Same": {reason: "the same request", want: saga(`{"x":1}`), got: saga(`{ "x": 1 }`)},
		"Defaulted": {reason: "fields the API server defaults do not count", want: saga(`{"x":1}`),
			got: saga(`{"x":1}`, func(s *v1.Saga) {
				s.Spec.Steps[0].ToolRef.Kind = v1.ToolKindTool
				s.Spec.Steps[0].RetryPolicy = &v1.RetryPolicy{MaxAttempts: 5}
				s.Spec.Approvals = []v1.SagaApproval{{Step: "s1", By: "alice"}}
			})},
		"OtherParameters": {reason: "a step's parameters", want: saga(`{"x":1}`), got: saga(`{"x":2}`), differs: true},
		"OtherInputs": {reason: "the inputs", want: saga(`{"x":1}`), differs: true,
			got: saga(`{"x":1}`, func(s *v1.Saga) { s.Spec.Inputs = &runtime.RawExtension{Raw: []byte(`{"a":2}`)} })},
		"OtherTool": {reason: "a step's tool", want: saga(`{"x":1}`), differs: true,
			got: saga(`{"x":1}`, func(s *v1.Saga) { s.Spec.Steps[0].ToolRef.Kind = v1.ToolKindClusterTool })},
		"MoreSteps": {reason: "another step", want: saga(`{"x":1}`), differs: true,
			got: saga(`{"x":1}`, func(s *v1.Saga) { s.Spec.Steps = append(s.Spec.Steps, v1.SagaStep{Name: "s2"}) })},
		"OtherKey": {reason: "the key", want: saga(`{"x":1}`), differs: true,
			got: saga(`{"x":1}`, func(s *v1.Saga) { s.Spec.IdempotencyKey = "z" })},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sameSaga(tc.want, tc.got); (got != "") != tc.differs {
				t.Errorf("%s\nsameSaga(...) = %q, want a difference: %v", tc.reason, got, tc.differs)
			}
		})
	}
}

func TestSagaOutcome(t *testing.T) {
	with := func(st v1.SagaStatus, conds ...metav1.Condition) *v1.Saga {
		s := saga(`{}`)
		s.Name = "x"
		s.Status = st
		s.Status.Conditions = conds
		return s
	}
	stalled := func(reason string) metav1.Condition {
		return metav1.Condition{Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: "m"}
	}
	steps := []v1.SagaStepStatus{{Name: "s1", State: v1.StateCommitted, ExternalObjectID: "ch_1"}}
	cases := map[string]struct {
		saga *v1.Saga
		want SagaResult
		err  error
		done bool
	}{
		"Running": {saga: with(v1.SagaStatus{State: v1.StateStarted, CurrentStep: "s1"})},
		"StalledOtherwise": {saga: with(v1.SagaStatus{State: v1.StateStarted},
			stalled(v1.ReasonToolNotFound))},
		"Committed": {saga: with(v1.SagaStatus{State: v1.StateCommitted, Steps: steps}), done: true,
			want: SagaResult{Namespace: "ns", Name: "x", State: v1.StateCommitted, Steps: steps}},
		"Compensated": {saga: with(v1.SagaStatus{State: v1.StateCompensated, FailedStep: "s1"}), done: true,
			err: &FailedError{Kind: KindSaga, Namespace: "ns", Name: "x", Reason: "Compensated",
				Message: "step s1 failed for good and every committed step was undone: "}},
		"NeedsReview": {saga: with(v1.SagaStatus{State: v1.StateNeedsReview}), done: true,
			err: &NeedsReviewError{Kind: KindSaga, Namespace: "ns", Name: "x"}},
		"WaitingForApproval": {saga: with(v1.SagaStatus{State: v1.StateStarted, CurrentStep: "s1"},
			stalled(reasonWaitingForApproval)), done: true,
			err: &WaitingForApprovalError{Namespace: "ns", Name: "x", Step: "s1", Message: "m"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err, done := sagaOutcome(tc.saga)
			if done != tc.done {
				t.Errorf("done = %v, want %v", done, tc.done)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.err, err); diff != "" {
				t.Errorf("-want error, +got error:\n%s", diff)
			}
		})
	}
}
