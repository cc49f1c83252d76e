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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// An expression's wall-clock limit and its cost limit are different
// verdicts: a CPU starved by other work makes any expression slow, and the
// same expression goes through on the next try; a cost is the same on
// every try.
var _ = Describe("Saga expressions", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		newDesk(ns)
	})

	// count is a parameter computed by a comprehension of 200 iterations:
	// the evaluation looks at its time limit every 100.
	count := v1.ParameterExpression{Name: "count", Expression: "inputs.items.filter(i, i > 0).size()"}
	items := make([]any, 200)
	for i := range items {
		items[i] = i + 1
	}

	It("tries again a step whose parameters reached the time limit, and fails nothing for it", func() {
		// A manager whose expressions have a nanosecond stands for one on a
		// starved CPU: every comprehension reaches its time limit.
		stop := startManager(managerOptions{sagaEvalTimeout: time.Nanosecond})
		// Stopped below; and here too if the spec fails first, so that its
		// manager cannot pass over other specs' objects.
		DeferCleanup(stop)
		steps := changeSteps()
		steps[1].ParametersFrom = append(steps[1].ParametersFrom, count)
		s := newSaga(ns, "scale", steps)
		s.Spec.Inputs = raw(map[string]any{"service": "checkout", "items": items})
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		Eventually(func() string { return stepStatus(getSaga(ns, "scale"), "config").Message }, 30*time.Second).
			Should(ContainSubstring("time limit"))
		Consistently(func() v1.OperationState { return getSaga(ns, "scale").Status.State }, 3*time.Second, 100*time.Millisecond).
			Should(Equal(v1.StateStarted))
		Expect(stepStatus(getSaga(ns, "scale"), "config").Validation.Outcome).NotTo(Equal(v1.ValidationFailed))
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.ticket"}))
		stop()

		By("going through once the CPU is back")
		DeferCleanup(startManager(managerOptions{}))
		waitSaga(ns, "scale", v1.StateCommitted)
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
		Expect(get(ns, "scale.config").Spec.Parameters.Raw).To(ContainSubstring(`"count":200`))
	})

	It("tries again a compensation whose parameters reached the time limit", func() {
		stop := startManager(managerOptions{sagaEvalTimeout: time.Nanosecond})
		DeferCleanup(stop)
		// The config is rejected, so the ticket is closed; only the close
		// computes a comprehension, and no validation sees it first.
		steps := changeSteps()[:2]
		steps[1].Parameters = raw(map[string]any{"reject": "no"})
		steps[0].Compensation.ParametersFrom = append(steps[0].Compensation.ParametersFrom, count)
		s := newSaga(ns, "scale", steps)
		s.Spec.Inputs = raw(map[string]any{"service": "checkout", "items": items})
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		Eventually(func() string { return stepStatus(getSaga(ns, "scale"), "ticket").Message }, 30*time.Second).
			Should(ContainSubstring("time limit"))
		Consistently(func() []string { return operationsOf(ns, "scale") }, 3*time.Second, 100*time.Millisecond).
			Should(Equal([]string{"scale.config", "scale.ticket"}))
		Expect(getSaga(ns, "scale").Status.State).To(Equal(v1.StateCompensating))
		stop()

		By("compensating once the CPU is back")
		DeferCleanup(startManager(managerOptions{}))
		s = waitSaga(ns, "scale", v1.StateCompensated)
		Expect(get(ns, stepStatus(s, "ticket").Compensation.Operation).Spec.Parameters.Raw).
			To(ContainSubstring(`"count":200`))
	})

	It("waits in review, writing nothing more, for a compensation whose parameters cannot be computed", func() {
		DeferCleanup(startManager(managerOptions{}))
		// The config is rejected, so the ticket is closed; the close reads
		// a field the ticket's result does not have.
		steps := changeSteps()[:2]
		steps[1].Parameters = raw(map[string]any{"reject": "no"})
		steps[0].Compensation.ParametersFrom = append(steps[0].Compensation.ParametersFrom,
			v1.ParameterExpression{Name: "queue", Expression: "steps.ticket.result.queue"})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateNeedsReview)
		Expect(sagaCondition(s, v1.ConditionReady).Message).To(ContainSubstring("cannot start"))
		// Each pass decided to create the close, failed to compute it and
		// went back to review, and wrote both moves with the pass's time:
		// each write woke the next pass, without end.
		Consistently(func() string { return getSaga(ns, "scale").ResourceVersion }, 3*time.Second, 100*time.Millisecond).
			Should(Equal(s.ResourceVersion))
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.config", "scale.ticket"}))
	})

	It("refuses, before any effect, a saga whose regular expression could run past the limits", func() {
		DeferCleanup(startManager(managerOptions{}))
		steps := changeSteps()
		steps[0].ParametersFrom = []v1.ParameterExpression{
			{Name: "nested", Expression: "inputs.service.matches('((a{1,10}){1,10}){1,10}b')"},
			{Name: "computed", Expression: "inputs.service.matches(inputs.pattern)"},
		}
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateFailedFinal)
		msg := sagaCondition(s, v1.ConditionReady).Message
		Expect(msg).To(ContainSubstring("spec.steps[0].parametersFrom[0] (nested)"))
		Expect(msg).To(ContainSubstring("more than the limit of 128"))
		Expect(msg).To(ContainSubstring("spec.steps[0].parametersFrom[1] (computed)"))
		Expect(msg).To(ContainSubstring("the pattern of matches() must be a string literal"))
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal(v1.ReasonInvalidSpec))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
	})

	It("refuses, before any expression runs, a saga whose expressions may cost more than the limit", func() {
		DeferCleanup(startManager(managerOptions{}))
		steps := changeSteps()
		steps[0].ParametersFrom = []v1.ParameterExpression{
			// Three matches() over the largest inputs, a 123-instruction
			// program each: about 2.4 million.
			{Name: "flagged", Expression: "" +
				"inputs.text.matches('[a-z]{1,60}b') || inputs.text.matches('[a-z]{1,60}c') || " +
				"inputs.text.matches('[a-z]{1,60}d')"},
			// Each character of the text replaced by the whole text: 12 KB
			// of it took 137 MB before the cost limit fired, as it ran.
			{Name: "square", Expression: "inputs.text.replace('a', inputs.text)"},
		}
		s := newSaga(ns, "scale", steps)
		s.Spec.Inputs = raw(map[string]any{"service": "checkout", "text": strings.Repeat("a", 12_000)})
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		s = waitSaga(ns, "scale", v1.StateFailedFinal)
		msg := sagaCondition(s, v1.ConditionReady).Message
		Expect(msg).To(ContainSubstring("spec.steps[0].parametersFrom[0] (flagged): may cost up to"))
		Expect(msg).To(ContainSubstring("spec.steps[0].parametersFrom[1] (square): may cost up to"))
		Expect(msg).To(ContainSubstring("more than the limit of 1000000"))
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal(v1.ReasonInvalidSpec))
		Expect(stepStatus(s, "ticket").Validation).To(BeNil())
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
		Expect(sagaEffects(ns)).To(BeEmpty())
	})

	It("refuses, before any expression runs, a saga whose inputs pass their limit", func() {
		DeferCleanup(startManager(managerOptions{}))
		s := newSaga(ns, "scale", changeSteps())
		s.Spec.Inputs = raw(map[string]any{"service": "checkout", "text": strings.Repeat("a", v1.MaxInputsBytes)})
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		s = waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(sagaCondition(s, v1.ConditionReady).Message).
			To(ContainSubstring("spec.inputs take 65568 bytes of canonical JSON; the limit is 65536"))
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal(v1.ReasonInvalidSpec))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
	})

	It("fails for good, before any effect, a step whose parameters would build a value past the bound", func() {
		DeferCleanup(startManager(managerOptions{}))
		// The estimate passes (cel-go counts join() by the list's length),
		// so the bound stops it as it runs: 6 000 references to 6 000
		// characters joined would be 36 MB.
		list := make([]any, 6_000)
		for i := range list {
			list[i] = i
		}
		steps := changeSteps()
		steps[0].ParametersFrom = []v1.ParameterExpression{{Name: "joined", Expression: "inputs.list.map(x, inputs.text).join()"}}
		s := newSaga(ns, "scale", steps)
		s.Spec.Inputs = raw(map[string]any{"service": "checkout", "text": strings.Repeat("a", 6_000), "list": list})
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		s = waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(stepStatus(s, "ticket").Validation).NotTo(BeNil())
		Expect(stepStatus(s, "ticket").Validation.Outcome).To(Equal(v1.ValidationFailed))
		Expect(stepStatus(s, "ticket").Validation.Message).To(ContainSubstring("join() would build a string of"))
		Expect(sagaEffects(ns)).To(BeEmpty())
	})
})
