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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

var _ = Describe("Retries", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})

	It("retries 503 and 429 after their Retry-After, and commits once", func() {
		faults(ns,
			sandbox.FaultRule{Method: "POST", Fault: "503=1", Count: 1},
			sandbox.FaultRule{Method: "POST", Fault: "429=1", Count: 1})
		// The tool's author knows its own 503 (with its JSON body) comes
		// before any effect: a gateway's 503 would be an unknown outcome.
		newTool(ns, "payments", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.Operations[0].Response.Outcomes = []v1.OutcomeRule{{
				When:    "response.status == 503 && type(response.body) == map && response.body.error == 'unavailable'",
				Outcome: v1.OutcomeRetryable}}
		})
		create(newOp(ns, "op", "payments", map[string]any{"amount": 1}))
		Eventually(state(ns, "op"), 10*time.Second, 50*time.Millisecond).Should(Equal(v1.StateFailedRetryable))
		op := get(ns, "op")
		Expect(op.Status.NextAttemptTime).NotTo(BeNil())
		Expect(op.Status.Claim).To(BeNil())
		op = waitFor(ns, "op", v1.StateCommitted)
		Expect(op.Status.Attempts).To(BeEquivalentTo(3))
		Expect(op.Status.UnknownTime).To(BeNil(), "a refusal is not an unknown outcome")
		Expect(op.Status.CommittedTime.Sub(op.Status.StartedTime.Time)).To(BeNumerically(">=", 2*time.Second),
			"each retry waited for Retry-After")
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
	})

	It("fails for good when the attempts are spent, with a reason that says so", func() {
		// The tool's own 429s prove each attempt had no effect (a gateway's
		// 502 would not: see "Sequences to a second effect").
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "429=0"})
		newTool(ns, "payments", v1.IdempotencyNative)
		op := newOp(ns, "op", "payments", map[string]any{})
		op.Spec.RetryPolicy.MaxAttempts = 3
		create(op)
		op = waitFor(ns, "op", v1.StateFailedFinal)
		Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonRetriesExhausted))
		Expect(op.Status.ErrorMessage).To(HavePrefix("All 3 attempts failed without effect"))
		Expect(op.Status.Attempts).To(BeEquivalentTo(3))
		Expect(effectsIn(ns)).To(BeZero())
	})

	It("lets the tool override the classification of a status", func() {
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "503"})
		newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.Operations[0].Response.Outcomes = []v1.OutcomeRule{{When: "response.status == 503", Outcome: v1.OutcomePermanent}}
		})
		create(newOp(ns, "op", "payments", map[string]any{}))
		op := waitFor(ns, "op", v1.StateFailedFinal)
		Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonRejected))
		Expect(op.Status.Attempts).To(BeEquivalentTo(1))
	})

	It("waits while the same key is in flight at a Native tool (409), then takes the first result", func() {
		// The first request outlives the caller's timeout at the tool; the
		// re-sends meet it in flight until it lands.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "delay-before-commit=3s", Count: 1})
		newTool(ns, "payments", v1.IdempotencyNative)
		create(newOp(ns, "op", "payments", map[string]any{"amount": 2}))
		op := waitFor(ns, "op", v1.StateCommitted)
		var codes []int32
		for _, o := range op.Status.Observations {
			codes = append(codes, o.HTTPStatus)
		}
		Expect(codes).To(ContainElement(BeEquivalentTo(409)), describe(op))
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
	})

	It("keeps retries of a failing tool within its budget", func() {
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "503=0"})
		tool := fmt.Sprintf("budgeted-%s", ns)
		t := newTool(ns, tool, v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.RetryBudget = &v1.RetryBudget{RetriesPerMinute: 6}
		})
		const ops = 5
		// The operations never finish: delete them, or a later manager
		// picks them up and spends another test's one-shot failpoint.
		DeferCleanup(func() {
			Expect(k8sClient.DeleteAllOf(ctx, &v1.SideEffectOperation{}, client.InNamespace(ns))).To(Succeed())
		})
		for i := range ops {
			op := newOp(ns, fmt.Sprintf("op-%d", i), tool, map[string]any{"i": i})
			op.Spec.RetryPolicy.MaxAttempts = 50
			op.Spec.RetryPolicy.MaxBackoff = &metav1.Duration{Duration: 200 * time.Millisecond}
			create(op)
		}
		window := 4 * time.Second
		time.Sleep(window)
		calls := testutil.ToFloat64(metrics.ToolCalls.WithLabelValues(metrics.ToolValues(t, "execute", string(v1.OutcomeRetryable))...))
		// Without a budget each operation retries every 200ms: over 100
		// calls. With 6 retries a minute (a burst of 1), first attempts
		// plus a handful of retries.
		Expect(calls).To(BeNumerically(">=", ops))
		Expect(calls).To(BeNumerically("<=", ops+3), "retries must stay within the budget")
		Expect(testutil.ToFloat64(metrics.BudgetExhausted.WithLabelValues(metrics.ToolValues(t)...))).To(BeNumerically(">", 0))
	})
})

var _ = Describe("Claims", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("renews the claim of a call that outlives it, so no other manager takes over", func() {
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "delay-before-commit=3s", Count: 1})
		DeferCleanup(startManager(managerOptions{holder: "a", maxClaim: time.Second}))
		DeferCleanup(startManager(managerOptions{holder: "b", maxClaim: time.Second}))
		newTool(ns, "slow", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: 6 * time.Second}
		})
		create(newOp(ns, "op", "slow", map[string]any{}))
		var renewed bool
		Eventually(func() v1.OperationState {
			op := get(ns, "op")
			if c := op.Status.Claim; c != nil && c.RenewTime.After(c.AcquireTime.Time) {
				renewed = true
			}
			return op.Status.State
		}, 20*time.Second, 200*time.Millisecond).Should(Equal(v1.StateCommitted))
		Expect(renewed).To(BeTrue(), "the claim was renewed during the call")
		op := get(ns, "op")
		Expect(op.Status.UnknownTime).To(BeNil(), "nobody took over a live call")
		Expect(op.Status.Observations).To(BeEmpty(), "a first attempt that committed keeps no observation")
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
	})

	It("runs two managers without leader election over the same operations: one effect each", func() {
		DeferCleanup(startManager(managerOptions{}))
		DeferCleanup(startManager(managerOptions{}))
		newTool(ns, "payments", v1.IdempotencyNone)
		const n = 30
		for i := range n {
			create(newOp(ns, fmt.Sprintf("op-%02d", i), "payments", map[string]any{"i": i}))
		}
		for i := range n {
			name := fmt.Sprintf("op-%02d", i)
			waitFor(ns, name, v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyNone, ns, name)).To(Equal(1), name)
		}
	})
})

var _ = Describe("NeedsReview", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		// The tool fails after an unknown outcome that, in truth, had no
		// effect: a person who checked can allow a retry.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "500-before-commit", Count: 1})
		newTool(ns, "mailer", v1.IdempotencyNone)
	})

	It("allows one more attempt when a person says Retry", func() {
		create(newOp(ns, "op", "mailer", map[string]any{}))
		waitFor(ns, "op", v1.StateNeedsReview)
		resolve(ns, "op", v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "no mail in the log"})
		op := waitFor(ns, "op", v1.StateCommitted)
		Expect(op.Status.Attempts).To(BeEquivalentTo(2))
		Expect(op.Status.Resolution.Action).To(Equal(v1.ResolutionRetry))
		Expect(op.Status.Resolution.By).To(Equal("bob"))
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
	})

	It("fails the operation when a person says Fail", func() {
		create(newOp(ns, "op", "mailer", map[string]any{}))
		waitFor(ns, "op", v1.StateNeedsReview)
		resolve(ns, "op", v1.Resolution{Action: v1.ResolutionFail, By: "carol"})
		op := waitFor(ns, "op", v1.StateFailedFinal)
		Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonResolvedFailed))
		Expect(effectsIn(ns)).To(BeZero())
	})

	It("does not apply a resolution that was there before the operation needed review", func() {
		op := newOp(ns, "op", "mailer", map[string]any{})
		op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "eager"}
		create(op)
		waitFor(ns, "op", v1.StateNeedsReview)
		Consistently(state(ns, "op"), 3*time.Second).Should(Equal(v1.StateNeedsReview))
		Expect(get(ns, "op").Status.Attempts).To(BeEquivalentTo(1))
	})

	It("is counted on the metrics endpoint", func() {
		create(newOp(ns, "op", "mailer", map[string]any{}))
		waitFor(ns, "op", v1.StateNeedsReview)
		families, err := crmetrics.Registry.Gather()
		Expect(err).NotTo(HaveOccurred())
		values := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "namespace" && l.GetValue() == ns {
						values[f.GetName()] = m.GetGauge().GetValue()
					}
				}
				if c := m.GetCounter(); c != nil {
					values[f.GetName()] += c.GetValue()
				}
			}
		}
		Expect(values).To(HaveKeyWithValue("once_operations_needs_review", 1.0))
		Expect(values).To(HaveKeyWithValue("once_operation_transitions_total", BeNumerically(">", 0)))
		Expect(values).To(HaveKey("once_tool_requests_total"))
	})
})

var _ = Describe("A resolution of an earlier review", func() {
	It("is not applied again when another field of the spec changes in a later review", func() {
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		// The tool makes each of the first two effects and drops the
		// connection before it answers (a reset after the commit): a tool
		// that cannot dedupe or be searched leaves the outcome to a person
		// both times.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 2})
		newTool(ns, "mailer", v1.IdempotencyNone)
		create(newOp(ns, "op", "mailer", map[string]any{}))
		waitFor(ns, "op", v1.StateNeedsReview)
		resolve(ns, "op", v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "no mail in the log"})
		Eventually(func() int32 { return get(ns, "op").Status.Attempts }).Should(BeEquivalentTo(2))
		op := waitFor(ns, "op", v1.StateNeedsReview)
		Expect(op.Status.Resolution).NotTo(BeNil())
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(2))

		// A person sets a TTL: bob's Retry is still in the spec, and the
		// generation moves past every one the status names.
		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.TTLSecondsAfterFinished = new(int32(3600))
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
		Expect(op.Generation).To(BeNumerically(">", op.Status.ReviewGeneration))
		Consistently(func() int32 { return get(ns, "op").Status.Attempts }, 3*time.Second).Should(BeEquivalentTo(2))
		Expect(get(ns, "op").Status.State).To(Equal(v1.StateNeedsReview))
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(2), "no third effect without a person's decision")

		// A decision of this review, with a reason of its own, applies.
		resolve(ns, "op", v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "mail-2", By: "bob",
			Reason: "the second mail is in the log"})
		op = waitFor(ns, "op", v1.StateCommitted)
		Expect(op.Status.Attempts).To(BeEquivalentTo(2))
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(2))
	})

	It("is not applied when the operation was created with it and another field of the spec changes in review", func() {
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		// The manifest of an earlier operation of this name kept the Retry
		// a person wrote into it (GitOps keeps a resolution in the
		// repository); the one applied again now makes its effect and the
		// tool drops the connection before it answers.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		newTool(ns, "mailer", v1.IdempotencyNone)
		stale := v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "no mail in the log"}
		op := newOp(ns, "op", "mailer", map[string]any{})
		op.Spec.Resolution = stale.DeepCopy()
		create(op)
		op = waitFor(ns, "op", v1.StateNeedsReview)
		Expect(protocol.Earlier(&stale, op.Status)).To(BeTrue(),
			"the review keeps the resolution that stood when it began, got %+v", op.Status.EarlierResolutions)
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))

		// A person sets a TTL: the generation moves past the review's.
		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.TTLSecondsAfterFinished = new(int32(3600))
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
		Expect(op.Generation).To(BeNumerically(">", op.Status.ReviewGeneration))
		Consistently(func() int32 { return get(ns, "op").Status.Attempts }, 3*time.Second).Should(BeEquivalentTo(1))
		Expect(get(ns, "op").Status.State).To(Equal(v1.StateNeedsReview))
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1), "no second effect without a person's decision")

		// A decision of this review applies.
		resolve(ns, "op", v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "mail-1", By: "bob",
			Reason: "the mail is in the log"})
		op = waitFor(ns, "op", v1.StateCommitted)
		Expect(op.Status.Attempts).To(BeEquivalentTo(1))
		Expect(op.Status.EarlierResolutions).To(BeEmpty(), "an ended operation keeps none")
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
	})
})
