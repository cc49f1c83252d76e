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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// A saga's brakes (spec.suspend, spec.cancel), against a real API server
// and the sandbox's ledger of effects.
var _ = Describe("Saga brakes", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})

	// patchSaga changes a saga's spec as a person does.
	patchSaga := func(name string, change func(*v1.SagaSpec)) error {
		s := getSaga(ns, name)
		patch := client.MergeFrom(s.DeepCopy())
		change(&s.Spec)
		return k8sClient.Patch(ctx, s, patch)
	}

	It("creates no step of a suspended saga until it is resumed, then commits each step once", func() {
		newDesk(ns)
		s := newSaga(ns, "scale", changeSteps())
		s.Spec.Suspend = true
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		Eventually(func() string { return sagaCondition(getSaga(ns, "scale"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonSuspended))
		s = getSaga(ns, "scale")
		Expect(s.Status.State).To(Equal(v1.StatePlanned))
		Expect(sagaCondition(s, v1.ConditionReady).Message).To(ContainSubstring("spec.suspend"))
		Expect(sagaCondition(s, v1.ConditionReconciling).Status).To(BeEquivalentTo("True"))
		Expect(kstatusOf(s)).To(Equal(status.InProgressStatus))
		written := s.ResourceVersion
		Consistently(func() []string { return operationsOf(ns, "scale") }, 2*time.Second).Should(BeEmpty())
		Expect(getSaga(ns, "scale").ResourceVersion).To(Equal(written), "the held status is written once")

		By("resuming it")
		Expect(patchSaga("scale", func(s *v1.SagaSpec) { s.Suspend = false })).To(Succeed())
		waitSaga(ns, "scale", v1.StateCommitted)
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.config", "scale.notify", "scale.ticket"}))
	})

	It("compensates a saga cancelled after its first step committed, and makes no call for the second", func() {
		newDesk(ns)
		steps := changeSteps()
		steps[1].RequiresApproval = true
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		Eventually(func() string { return sagaCondition(getSaga(ns, "scale"), v1.ConditionStalled).Reason }).
			Should(Equal("WaitingForApproval"))

		By("cancelling it")
		Expect(patchSaga("scale", func(s *v1.SagaSpec) { s.Cancel = true })).To(Succeed())
		s := waitSaga(ns, "scale", v1.StateCompensated)
		Expect(sagaCondition(s, v1.ConditionReady).Reason).To(Equal(v1.ReasonCancelled))
		Expect(s.Status.FailedStep).To(Equal("config"))
		Expect(kstatusOf(s)).To(Equal(status.FailedStatus))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "cancel tickets"}))
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.ticket", "scale.ticket.undo"}))

		By("refusing to take the cancel back")
		err := patchSaga("scale", func(s *v1.SagaSpec) { s.Cancel = false })
		Expect(err).To(MatchError(ContainSubstring("spec.cancel cannot be taken back")))
	})

	It("ends a saga cancelled before any step with reason Cancelled, and makes no call", func() {
		newDesk(ns)
		s := newSaga(ns, "scale", changeSteps())
		s.Spec.Cancel = true
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		s = waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(sagaCondition(s, v1.ConditionReady).Reason).To(Equal(v1.ReasonCancelled))
		Expect(s.Status.StartedTime).To(BeNil())
		Expect(kstatusOf(s)).To(Equal(status.FailedStatus))
		Consistently(func() []string { return operationsOf(ns, "scale") }, time.Second).Should(BeEmpty())
		Expect(sagaEffects(ns)).To(BeEmpty())
	})

	It("cancels a step's operation that has not claimed, which fails with no call", func() {
		// The desk is suspended: the first step's operation waits, unclaimed.
		desk := newDesk(ns, func(s *v1.ToolSpec) { s.Suspend = true })
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())
		Eventually(func(g Gomega) {
			op := &v1.SideEffectOperation{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scale.ticket"}, op)).To(Succeed())
			g.Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonSuspended))
		}).Should(Succeed())

		By("cancelling the saga")
		Expect(patchSaga("scale", func(s *v1.SagaSpec) { s.Cancel = true })).To(Succeed())
		s := waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(sagaCondition(s, v1.ConditionReady).Reason).To(Equal(v1.ReasonCancelled))
		op := get(ns, "scale.ticket")
		Expect(op.Spec.Cancel).To(BeTrue())
		Expect(op.Status.ErrorClass).To(Equal(v1.ErrorCancelled))
		Expect(op.Status.Attempts).To(BeZero())

		By("resuming the desk: nothing is called")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(desk), desk)).To(Succeed())
		desk.Spec.Suspend = false
		Expect(k8sClient.Update(ctx, desk)).To(Succeed())
		Consistently(func() []string { return sagaEffects(ns) }, 2*time.Second).Should(BeEmpty())
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.ticket"}))
	})
})
