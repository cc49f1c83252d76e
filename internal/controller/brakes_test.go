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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

// The brakes people set (spec.suspend, spec.cancel), against a real API
// server and the sandbox's ledger of effects.
var _ = Describe("Brakes", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})

	It("makes no call to a suspended tool, and calls once after it resumes", func() {
		tool := newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) { s.Suspend = true })
		create(newOp(ns, "charge", "payments", map[string]any{"amount": 100}))

		Eventually(func() string { return condition(get(ns, "charge"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonSuspended))
		op := get(ns, "charge")
		Expect(op.Status.State).To(Equal(v1.StatePlanned))
		Expect(op.Status.Attempts).To(BeZero())
		Expect(condition(op, v1.ConditionReady).Message).To(ContainSubstring("Tool payments"))
		Consistently(func() int { return effectsIn(ns) }, 2*time.Second).Should(BeZero())

		By("resuming the tool")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tool), tool)).To(Succeed())
		tool.Spec.Suspend = false
		Expect(k8sClient.Update(ctx, tool)).To(Succeed())
		op = waitFor(ns, "charge", v1.StateCommitted)
		Expect(op.Status.Attempts).To(BeEquivalentTo(1))
		Expect(effectsOf(v1.IdempotencyNative, ns, "charge")).To(Equal(1))
	})

	It("holds a suspended operation, and fails it with no call once it is cancelled", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := newOp(ns, "charge", "payments", map[string]any{"amount": 100})
		op.Spec.Suspend = true
		create(op)
		Eventually(func() string { return condition(get(ns, "charge"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonSuspended))

		By("cancelling it")
		op = get(ns, "charge")
		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.Cancel = true
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
		op = waitFor(ns, "charge", v1.StateFailedFinal)
		Expect(op.Status.ErrorClass).To(Equal(v1.ErrorCancelled))
		Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonCancelled))
		Expect(op.Status.Attempts).To(BeZero())
		Expect(effectsIn(ns)).To(BeZero())

		By("refusing to take the cancel back")
		patch = client.MergeFrom(op.DeepCopy())
		op.Spec.Cancel = false
		err := k8sClient.Patch(ctx, op, patch)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.cancel cannot be taken back"))
	})

	It("ends a cancelled operation that waited for its tool with no call, once it binds its key", func() {
		// The cancel is decided after the key's scope is bound: another
		// object of the key may have made the effect, and its outcome
		// answers, not "no effect". So an operation waiting for a missing
		// tool waits on after a cancel, and ends once the tool exists.
		create(newOp(ns, "orphan", "payments", map[string]any{"amount": 100}))
		Eventually(func() string { return condition(get(ns, "orphan"), v1.ConditionStalled).Reason }).
			Should(Equal(v1.ReasonToolNotFound))

		op := get(ns, "orphan")
		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.Cancel = true
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
		newTool(ns, "payments", v1.IdempotencyNative)
		op = waitFor(ns, "orphan", v1.StateFailedFinal)
		Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonCancelled))
		Expect(op.Status.Attempts).To(BeZero())
		Expect(effectsIn(ns)).To(BeZero())
	})

	It("remembers a cancel once its operation is gone: the same manifest again does not execute", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := newOp(ns, "charge", "payments", map[string]any{"amount": 100})
		op.Spec.Cancel = true
		create(op)
		waitFor(ns, "charge", v1.StateFailedFinal)
		remove(get(ns, "charge"))

		By("applying the manifest again without the cancel, as a GitOps tool re-creates a deleted object")
		create(newOp(ns, "charge", "payments", map[string]any{"amount": 100}))
		again := waitFor(ns, "charge", v1.StateFailedFinal)
		Expect(again.Status.ErrorClass).To(Equal(v1.ErrorCancelled), "%s", describe(again))
		Consistently(func() int { return effectsIn(ns) }, 2*time.Second).Should(BeZero())
	})

	It("answers a same-key twin of a cancelled operation whose key is its name with the cancel", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		holder := newOp(ns, "charge", "payments", map[string]any{"amount": 100})
		holder.Spec.Cancel = true
		create(holder)
		waitFor(ns, "charge", v1.StateFailedFinal)

		By("creating another object that names the first one's name as its key")
		twin := newOp(ns, "twin", "payments", map[string]any{"amount": 100})
		twin.Spec.IdempotencyKey = "charge"
		create(twin)
		got := waitFor(ns, "twin", v1.StateFailedFinal)
		Expect(got.Status.ErrorClass).To(Equal(v1.ErrorCancelled), "%s", describe(got))
		Consistently(func() int { return effectsIn(ns) }, 2*time.Second).Should(BeZero())
	})

	It("asks a person about a cancelled operation that only a re-send could settle", func() {
		// The first call's answer comes after its timeout: the effect is
		// made, and its outcome is unknown to the manager.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDelayAfterCommit + "=6s", Count: 1})
		newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: 3 * time.Second}
		})
		create(newOp(ns, "charge", "payments", map[string]any{"amount": 100}))
		waitFor(ns, "charge", v1.StateStarted)

		By("cancelling it while its call is in flight")
		op := get(ns, "charge")
		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.Cancel = true
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())

		op = waitFor(ns, "charge", v1.StateNeedsReview)
		Expect(op.Status.ErrorMessage).To(ContainSubstring("cancelled"))
		Expect(op.Status.Attempts).To(BeEquivalentTo(1))
		Consistently(func() int { return effectsOf(v1.IdempotencyNative, ns, "charge") }, 2*time.Second).Should(Equal(1))
	})
})
