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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

// An operation whose key is its own name binds no record while it exists.
// The one way its scope can be shared is another operation that uses its
// name as an explicit key: these cases prove that the scope still has one
// owner and the tool one effect, whichever comes first.
var _ = Describe("A key that is an operation's own name", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		newTool(ns, "mailer", v1.IdempotencyNone)
	})
	params := map[string]any{"to": "a@example.com"}
	keyed := func(name, key string) *v1.SideEffectOperation {
		op := newOp(ns, name, "mailer", params)
		op.Spec.IdempotencyKey = key
		return op
	}

	It("is deferred to by a later operation that uses the name as its key", func() {
		first := waitFor(ns, create(newOp(ns, "mail", "mailer", params)).Name, v1.StateCommitted)
		second := waitFor(ns, create(keyed("retry", "mail")).Name, v1.StateCommitted)
		Expect(effectsOf(v1.IdempotencyNone, ns, "mail")).To(Equal(1))
		Expect(second.Status.DuplicateOf).To(Equal("mail"))
		Expect(second.Status.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))

		By("handing the record the second bound to the name's holder")
		rec := record(ns, recordNameOf(first))
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Owner.UID).To(Equal(first.UID))

		By("keeping the holder's outcome when both are deleted")
		remove(second)
		remove(first)
		rec = record(ns, recordNameOf(first))
		Expect(rec.Spec.Owner.UID).To(Equal(first.UID))
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))
	})

	It("defers to an earlier operation that used the name as its key", func() {
		first := waitFor(ns, create(keyed("retry", "mail")).Name, v1.StateCommitted)
		second := waitFor(ns, create(newOp(ns, "mail", "mailer", params)).Name, v1.StateCommitted)
		Expect(second.Status.DuplicateOf).To(Equal("retry"))
		Expect(second.Status.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))
		Expect(effectsOf(v1.IdempotencyNone, ns, "mail")).To(Equal(1))
	})

	It("is owned by the name's holder when it claims after having read that there was no record", func() {
		By("stopping the holder between reading no record and claiming")
		Expect(failpoint.Enable(failpoint.BindAfterNoRecord, `1*sleep(4000)`)).To(Succeed())
		DeferCleanup(func() { _ = failpoint.Disable(failpoint.BindAfterNoRecord) })
		create(newOp(ns, "mail", "mailer", params))
		time.Sleep(time.Second)

		By("binding the record with the name as an explicit key meanwhile")
		create(keyed("retry", "mail"))
		holder := waitFor(ns, "mail", v1.StateCommitted, 20*time.Second)
		other := waitFor(ns, "retry", v1.StateCommitted, 20*time.Second)
		Expect(effectsOf(v1.IdempotencyNone, ns, "mail")).To(Equal(1))
		Expect(holder.Status.DuplicateOf).To(BeEmpty())
		Expect(other.Status.DuplicateOf).To(Equal("mail"))
	})
})

// A deleted operation's outcome goes to its scope's record before the
// object goes: that is what lets a re-created operation report it (I7).
var _ = Describe("Deleting an operation", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})

	It("waits for a call in flight in another manager and keeps its answer", func() {
		// Within one manager the object's key is not handled twice at
		// once; a second manager handles the deletion while the first
		// waits for the tool.
		DeferCleanup(startManager(managerOptions{}))
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "delay-after-commit=3s", Count: 1})
		newTool(ns, "payments", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: 10 * time.Second}
		})
		op := create(newOp(ns, "pay", "payments", map[string]any{"amount": 5}))
		Eventually(state(ns, "pay"), 10*time.Second, 50*time.Millisecond).Should(Equal(v1.StateStarted))
		recordName := recordNameOf(get(ns, "pay"))
		remove(op)
		rec := record(ns, recordName)
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome).NotTo(BeNil(), "the answer that came after the delete must reach the record")
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
		Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))

		By("re-creating it: the recorded outcome, no call")
		again := waitFor(ns, create(newOp(ns, "pay", "payments", map[string]any{"amount": 5})).Name, v1.StateCommitted)
		Expect(again.Status.DuplicateOf).To(Equal("pay"))
		Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))
	})

	It("lets a namespace that is being deleted go", func() {
		newTool(ns, "payments", v1.IdempotencyNone)
		op := waitFor(ns, create(newOp(ns, "pay", "payments", map[string]any{"amount": 8})).Name, v1.StateCommitted)
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		// envtest runs no namespace controller: delete the operation as it
		// would. No record can be created in the namespace any more.
		remove(op)
	})

	It("drops the record handed to a holder that is deleted before it claims", func() {
		newTool(ns, "mailer", v1.IdempotencyNone)
		params := map[string]any{"to": "a@example.com"}
		By("stopping the holder of the name between reading no record and claiming")
		Expect(failpoint.Enable(failpoint.BindAfterNoRecord, `1*sleep(4000)`)).To(Succeed())
		DeferCleanup(func() { _ = failpoint.Disable(failpoint.BindAfterNoRecord) })
		holder := create(newOp(ns, "mail", "mailer", params))
		time.Sleep(time.Second)
		other := newOp(ns, "retry", "mailer", params)
		other.Spec.IdempotencyKey = "mail"
		create(other)
		Eventually(func() string { return get(ns, "retry").Status.DuplicateOf }, 10*time.Second).Should(Equal("mail"))

		By("deleting the holder, which never claims")
		remove(holder)
		got := waitFor(ns, "retry", v1.StateCommitted, 20*time.Second)
		Expect(got.Status.DuplicateOf).To(BeEmpty(), "it executes for the scope itself, with nothing to reconcile")
		Expect(got.Status.Attempts).To(BeEquivalentTo(1))
		Expect(effectsOf(v1.IdempotencyNone, ns, "mail")).To(Equal(1))
	})

	It("refuses the finalizer's removal by anyone but the manager", func() {
		grant(ns, "mallory", "sideeffectoperations", "get", "update", "patch")
		mallory := userClient("mallory", "dev")
		create(newOp(ns, "pay", "payments", map[string]any{"amount": 9}))
		op := &v1.SideEffectOperation{}
		Expect(mallory.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pay"}, op)).To(Succeed())
		op.Finalizers = nil
		Expect(mallory.Update(ctx, op)).To(MatchError(ContainSubstring(
			"The finalizer effects.once.dev/record is removed only by the Once manager")))
		Expect(get(ns, "pay").Finalizers).To(ContainElement(v1.FinalizerRecord))
	})

	It("gives an operation that ended before finalizers existed its finalizer", func() {
		op := create(newOp(ns, "old", "payments", map[string]any{"amount": 7}))
		op.Finalizers = nil
		Expect(k8sClient.Update(ctx, op)).To(Succeed())
		op.Status = v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExternalObjectID: "ch_old",
			CompletionTime: &metav1.Time{Time: time.Now()}}
		Expect(k8sClient.Status().Update(ctx, op)).To(Succeed())
		Eventually(func() []string { return get(ns, "old").Finalizers }, 10*time.Second).
			Should(ContainElement(v1.FinalizerRecord))
		remove(op)
		rec := record(ns, protocol.OperationScope(op).RecordName())
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal("ch_old"))
	})

	It("adds the finalizer before the first claim when admission did not", func() {
		create(newOp(ns, "pay", "payments", map[string]any{"amount": 6}))
		Eventually(func() string { return condition(get(ns, "pay"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonToolNotFound))
		op := get(ns, "pay")
		op.Finalizers = nil
		Expect(k8sClient.Update(ctx, op)).To(Succeed())

		newTool(ns, "payments", v1.IdempotencyNone)
		op = waitFor(ns, "pay", v1.StateCommitted)
		Expect(op.Finalizers).To(ContainElement(v1.FinalizerRecord))
		remove(op)
		Expect(record(ns, recordNameOf(op)).Spec.Outcome).NotTo(BeNil())
	})
})
