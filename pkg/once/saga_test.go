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
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

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
		Name: "s1", ToolRef: v1.StepToolReference{Name: "t"}, Operation: "o",
		Parameters: &runtime.RawExtension{Raw: []byte(params)}, Irreversible: true,
	}}})
	for _, m := range mut {
		m(s)
	}
	return s
}

// request is a saga as DoSaga would create it: its steps set every field a
// step has.
func request(mut ...func(*v1.Saga)) *v1.Saga {
	s := newSaga(SagaRequest{Namespace: "ns", Key: "k", Inputs: json.RawMessage(`{"order":"o-1"}`), Steps: []v1.SagaStep{{
		Name: "charge", ToolRef: v1.StepToolReference{Name: "payments"}, Operation: "charge.create",
		Parameters: &runtime.RawExtension{Raw: []byte(`{"amount":5,"currency":"EUR"}`)},
		ParametersFrom: []v1.ParameterExpression{{Name: "order", Expression: "inputs.order"},
			{Name: "customer", Expression: "inputs.customer"}},
		Timeout:     &metav1.Duration{Duration: 5 * time.Minute},
		RetryPolicy: &v1.RetryPolicy{MaxAttempts: 3},
		Compensation: &v1.Compensation{Operation: "refund.create",
			Parameters:     &runtime.RawExtension{Raw: []byte(`{"reason":"saga"}`)},
			ParametersFrom: []v1.ParameterExpression{{Name: "charge", Expression: "steps.charge.externalObjectID"}},
			RetryPolicy:    &v1.RetryPolicy{}},
	}, {
		Name: "notify", ToolRef: v1.StepToolReference{Kind: v1.ToolKindClusterTool, Name: "mail"}, Operation: "send",
		Irreversible: true,
	}}})
	for _, m := range mut {
		m(s)
	}
	return s
}

// stored is the saga of request as the API server stores it: defaults
// filled in, parameters in another form, and fields written later.
func stored(mut ...func(*v1.Saga)) *v1.Saga {
	s := request(func(s *v1.Saga) {
		s.Name, s.ResourceVersion, s.Generation = "x", "7", 2
		charge := &s.Spec.Steps[0]
		charge.ToolRef.Kind = v1.ToolKindTool
		charge.Parameters.Raw = []byte(`{ "currency": "EUR", "amount": 5.0 }`)
		charge.Timeout = &metav1.Duration{Duration: 300 * time.Second}
		charge.RetryPolicy = &v1.RetryPolicy{MaxAttempts: 3, InitialBackoff: &metav1.Duration{Duration: time.Second},
			MaxBackoff: &metav1.Duration{Duration: 5 * time.Minute}}
		charge.Compensation.RetryPolicy = &v1.RetryPolicy{MaxAttempts: 5,
			InitialBackoff: &metav1.Duration{Duration: time.Second}, MaxBackoff: &metav1.Duration{Duration: 5 * time.Minute}}
		s.Spec.Approvals = []v1.SagaApproval{{Step: "charge", By: "alice"}}
		s.Spec.Resolutions = []v1.SagaResolution{{Step: "charge", Action: v1.SagaRetry, By: "bob"}}
		s.Status.State = v1.StateCommitted
	})
	for _, m := range mut {
		m(s)
	}
	return s
}

func TestSameSaga(t *testing.T) {
	charge := func(m func(*v1.SagaStep)) func(*v1.Saga) { return func(s *v1.Saga) { m(&s.Spec.Steps[0]) } }
	notify := func(m func(*v1.SagaStep)) func(*v1.Saga) { return func(s *v1.Saga) { m(&s.Spec.Steps[1]) } }
	cases := map[string]struct {
		reason    string
		want, got *v1.Saga
		msg       string
	}{
		"Same": {reason: "the saga DoSaga created", want: request(), got: request()},
		"Defaulted": {reason: "defaults, parameters in another form, approvals, resolutions, metadata and status " +
			"do not count", want: request(), got: stored()},
		"OtherTTL": {reason: "how long the saga is kept binds nothing", want: request(),
			got: stored(func(s *v1.Saga) { s.Spec.TTLSecondsAfterFinished = nil })},
		"Brakes": {reason: "a person's suspend and cancel say whether the saga goes on, not what it is", want: request(),
			got: stored(func(s *v1.Saga) { s.Spec.Suspend, s.Spec.Cancel = true, true })},
		"ParametersFromOrder": {reason: "parametersFrom is a list keyed by name: its order does not count",
			want: request(), got: stored(charge(func(st *v1.SagaStep) {
				st.ParametersFrom[0], st.ParametersFrom[1] = st.ParametersFrom[1], st.ParametersFrom[0]
			}))},
		"NullParameters": {reason: "null parameters are not stored", got: stored(),
			want: request(notify(func(st *v1.SagaStep) { st.Parameters = &runtime.RawExtension{Raw: []byte("null")} }))},
		"RequiresApproval": {reason: "a step that waits for a person is another request", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.RequiresApproval = true })),
			msg: "the saga x differs from this request in steps[charge].requiresApproval"},
		"CompensationOperation": {reason: "the compensation is part of the request", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Compensation.Operation = "void.create" })),
			msg: "the saga x differs from this request in steps[charge].compensation.operation"},
		"CompensationTool": {reason: "the compensation's tool", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Compensation.ToolRef = &v1.StepToolReference{Name: "ledger"} })),
			msg: "the saga x differs from this request in steps[charge].compensation.toolRef"},
		"CompensationToolStoredKind": {reason: "a compensation's toolRef stored with kind Tool (an earlier release's " +
			"default) is the same request as one without a kind",
			want: request(charge(func(st *v1.SagaStep) { st.Compensation.ToolRef = &v1.StepToolReference{Name: "ledger"} })),
			got: stored(charge(func(st *v1.SagaStep) {
				st.Compensation.ToolRef = &v1.StepToolReference{Kind: v1.ToolKindTool, Name: "ledger"}
			}))},
		"CompensationParameters": {reason: "the compensation's parameters", want: request(),
			got: stored(charge(func(st *v1.SagaStep) {
				st.Compensation.Parameters = &runtime.RawExtension{Raw: []byte(`{"reason":"fraud"}`)}
			})),
			msg: "the saga x differs from this request in steps[charge].compensation.parameters"},
		"CompensationParametersFrom": {reason: "the compensation's parametersFrom", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Compensation.ParametersFrom[0].Expression = "inputs.charge" })),
			msg: "the saga x differs from this request in steps[charge].compensation.parametersFrom"},
		"CompensationRetryPolicy": {reason: "the compensation's retry policy, past its defaults", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Compensation.RetryPolicy.MaxAttempts = 9 })),
			msg: "the saga x differs from this request in steps[charge].compensation.retryPolicy.maxAttempts"},
		"Irreversible": {reason: "an irreversible step instead of a compensated one", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Compensation, st.Irreversible = nil, true })),
			msg: "the saga x differs from this request in steps[charge].compensation, steps[charge].irreversible"},
		"RetryUntilDone": {reason: "retryUntilDone", want: request(),
			got: stored(notify(func(st *v1.SagaStep) { st.RetryUntilDone = true })),
			msg: "the saga x differs from this request in steps[notify].retryUntilDone"},
		"Timeout": {reason: "the timeout, by its length", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Timeout.Duration = 10 * time.Minute })),
			msg: "the saga x differs from this request in steps[charge].timeout"},
		"RetryPolicy": {reason: "the step's retry policy", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.RetryPolicy.MaxBackoff.Duration = time.Minute })),
			msg: "the saga x differs from this request in steps[charge].retryPolicy.maxBackoff"},
		"NoRetryPolicy": {reason: "no retry policy (the operation's) is not the one asked for", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.RetryPolicy = nil })),
			msg: "the saga x differs from this request in steps[charge].retryPolicy"},
		"Parameters": {reason: "a step's parameters", want: request(),
			got: stored(charge(func(st *v1.SagaStep) { st.Parameters.Raw = []byte(`{"amount":6,"currency":"EUR"}`) })),
			msg: "the saga x differs from this request in steps[charge].parameters"},
		"Tool": {reason: "a step's tool", want: request(),
			got: stored(notify(func(st *v1.SagaStep) { st.ToolRef.Kind = v1.ToolKindTool })),
			msg: "the saga x differs from this request in steps[notify].toolRef.kind"},
		"Inputs": {reason: "the inputs", want: request(),
			got: stored(func(s *v1.Saga) { s.Spec.Inputs = &runtime.RawExtension{Raw: []byte(`{"order":"o-2"}`)} }),
			msg: "the saga x differs from this request in inputs"},
		"Subscribers": {reason: "subscribers told of the outcome", want: request(),
			got: stored(func(s *v1.Saga) {
				s.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "audit"}, Operation: "events.deliver"}}
			}),
			msg: "the saga x differs from this request in subscribers"},
		"ManyFields": {reason: "a long list of differences is cut short", want: request(),
			got: stored(charge(func(st *v1.SagaStep) {
				st.Operation, st.RequiresApproval, st.RetryUntilDone = "charge.hold", true, true
				st.Timeout, st.Parameters = nil, nil
			})),
			msg: "the saga x differs from this request in steps[charge].operation, steps[charge].parameters, " +
				"steps[charge].requiresApproval, steps[charge].retryUntilDone and 1 more"},
		"Steps": {reason: "another step", want: request(),
			got: stored(func(s *v1.Saga) { s.Spec.Steps = append(s.Spec.Steps, v1.SagaStep{Name: "ship"}) }),
			msg: "the saga x has steps charge, notify, ship; this request has charge, notify"},
		"Key": {reason: "the key", want: request(), got: stored(func(s *v1.Saga) { s.Spec.IdempotencyKey = "z" }),
			msg: `the saga x holds key "z"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.msg, sameSaga(tc.want, tc.got)); diff != "" {
				t.Errorf("%s\nsameSaga(...): -want, +got:\n%s", tc.reason, diff)
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

func TestSagaKept(t *testing.T) {
	cases := map[string]struct {
		reason string
		ttl    *int32
		want   *int32
	}{
		"Default":     {reason: "an hour after it ends", want: ptr.To[int32](3600)},
		"TTL":         {reason: "the caller's TTL", ttl: ptr.To[int32](30), want: ptr.To[int32](30)},
		"KeptForEver": {reason: "a negative TTL sets none", ttl: ptr.To[int32](-1)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSaga(SagaRequest{Namespace: "ns", Key: "k", Steps: []v1.SagaStep{{Name: "a"}},
				TTLSecondsAfterFinished: tc.ttl})
			if diff := cmp.Diff(tc.want, s.Spec.TTLSecondsAfterFinished); diff != "" {
				t.Errorf("%s\nnewSaga(...).spec.ttlSecondsAfterFinished: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
