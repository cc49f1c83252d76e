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
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/protocol"
)

// An object's name is not its identity: an operation deleted and made
// again under its name is another operation, perhaps of another tool.
// These specs make that happen at the worst moment of a pass, through a
// client that replaces the object just before the call goes on, and check
// that the new object is never written, released or answered for, and
// that the old one's answer still reaches its scope's record.
var _ = Describe("Identity by UID", func() {
	var (
		ns     string
		direct client.WithWatch
	)
	BeforeEach(func() {
		ns, direct = newNamespace(), newDirect()
	})

	It("has the API server refuse a write that carries an old object's UID or version", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		old := create(newOp(ns, "op", "payments", map[string]any{"amount": 1}))
		replaced := replaceOp(old, "payments", nil)

		By("a status update with the old version and UID")
		stale := old.DeepCopy()
		stale.Status.State = v1.StateCommitted
		Expect(apierrors.IsConflict(k8sClient.Status().Update(ctx, stale))).To(BeTrue())
		By("a status update with the new version but the old UID")
		forged := replaced.DeepCopy()
		forged.UID = old.UID
		forged.Status.State = v1.StateCommitted
		err := k8sClient.Status().Update(ctx, forged)
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		By("a merge patch with optimistic lock from the old version")
		patched := old.DeepCopy()
		patched.Finalizers = nil
		err = k8sClient.Patch(ctx, patched, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{}))
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		By("a delete with the old UID as precondition")
		uid := old.UID
		err = k8sClient.Delete(ctx, old.DeepCopy(), client.Preconditions{UID: &uid})
		Expect(apierrors.IsConflict(err)).To(BeTrue(), "got %v", err)
		Expect(get(ns, "op").Finalizers).To(ContainElement(v1.FinalizerRecord))
	})

	It("never writes a late answer into another object made under the name, and keeps it in the record", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		newTool(ns, "refunds", v1.IdempotencyNative)
		old := create(newOp(ns, "op", "payments", map[string]any{"amount": 2}))
		var replaced *v1.SideEffectOperation
		writes := 0
		c := interceptor.NewClient(direct, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object,
				opts ...client.SubResourceUpdateOption) error {
				if obj.GetUID() == old.UID {
					if writes++; writes == 2 {
						// The answer's write: meanwhile the operation was
						// released, and another made under its name.
						keptUnknown(get(ns, "op"))
						replaced = replaceOp(old, "refunds", &v1.SideEffectOperationStatus{State: v1.StateUnknown,
							Attempts: 1, IdempotencyMode: v1.IdempotencyNative})
					}
				}
				return cl.SubResource(sub).Update(ctx, obj, opts...)
			}})
		r := uidReconciler(c, c, events.NewFakeRecorder(100))
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(old))
		Expect(err).NotTo(HaveOccurred())
		Expect(replaced).NotTo(BeNil(), "the answer was never written")
		now := get(ns, "op")
		Expect(now.UID).To(Equal(replaced.UID))
		Expect(now.Status.State).To(Equal(v1.StateUnknown),
			"the old object's answer was written into the new one: %s", describe(now))
		Expect(now.Status.Observations).To(BeEmpty())
		rec := record(ns, recordNameOf(old))
		Expect(rec.Spec.Outcome).NotTo(BeNil(), "the answer never reached the old operation's record")
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
		Expect(rec.Spec.Outcome.ExternalObjectID).NotTo(BeEmpty())
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
	})

	It("never releases another object made under the name of a deleted one the cache still shows", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := newOp(ns, "op", "payments", map[string]any{"amount": 3})
		op.Spec.IdempotencyKey = "order-3"
		old := create(op)
		Expect(k8sClient.Delete(ctx, old)).To(Succeed())
		cached := get(ns, "op")
		Expect(cached.DeletionTimestamp).NotTo(BeNil())
		replaced := replaceOp(old, "payments", nil)
		Expect(replaced.DeletionTimestamp).To(BeNil())
		By("the new object binds the scope's record")
		p := (&SideEffectOperationReconciler{Clock: clock.RealClock{}}).newPass(ctx, replaced)
		Expect(p.identify()).To(Succeed())
		bound := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.st.RecordName},
			Spec: v1.IdempotencyRecordSpec{ToolRef: p.scope.Tool, Operation: p.scope.Operation,
				IdempotencyKey: p.scope.Key, RequestHash: p.st.RequestHash,
				Owner:     v1.RecordOwner{Name: "op", UID: replaced.UID},
				Retention: metav1.Duration{Duration: time.Hour}}}
		Expect(k8sClient.Create(ctx, bound)).To(Succeed())

		By("releasing through a cache that still shows the deleted object")
		c := interceptor.NewClient(direct, interceptor.Funcs{
			Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object,
				opts ...client.GetOption) error {
				if o, ok := obj.(*v1.SideEffectOperation); ok && key == client.ObjectKeyFromObject(old) {
					cached.DeepCopyInto(o)
					return nil
				}
				return cl.Get(ctx, key, obj, opts...)
			}})
		r := uidReconciler(c, direct, events.NewFakeRecorder(100))
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(old))
		Expect(err).NotTo(HaveOccurred())
		Expect(record(ns, bound.Name)).NotTo(BeNil(), "the new object's record was deleted by the old one's release")
		now := get(ns, "op")
		Expect(now.UID).To(Equal(replaced.UID))
		Expect(now.Finalizers).To(ContainElement(v1.FinalizerRecord), "the new object's finalizer was removed")
	})

	for _, takenOver := range []bool{false, true} {
		name := "writes an answer held for an operation made again under its name into the old one's record"
		if takenOver {
			name = "raises an answer held for an operation whose record was taken over"
		}
		It(name, func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			newTool(ns, "refunds", v1.IdempotencyNative)
			old := create(newOp(ns, "op", "payments", map[string]any{"amount": 4}))
			down, writes := true, 0
			c := interceptor.NewClient(direct, interceptor.Funcs{
				SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object,
					opts ...client.SubResourceUpdateOption) error {
					if obj.GetUID() == old.UID {
						if writes++; writes == 2 && down {
							return apierrors.NewServiceUnavailable("the API server is away")
						}
					}
					return cl.SubResource(sub).Update(ctx, obj, opts...)
				}})
			recorder := events.NewFakeRecorder(100)
			r := uidReconciler(c, c, recorder)
			_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(old))
			Expect(err).To(HaveOccurred(), "the answer's write failed")
			Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))

			By("another manager releases the operation, and it is made again on another tool")
			down = false
			rec := keptUnknown(get(ns, "op"))
			if takenOver {
				rec.Spec.PreviousOwner = &rec.Spec.Owner
				rec.Spec.Owner = v1.RecordOwner{Name: "successor", UID: "uid-successor"}
				Expect(k8sClient.Update(ctx, rec)).To(Succeed())
			}
			replaced := replaceOp(old, "refunds", nil)
			_, err = r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(old))
			Expect(err).NotTo(HaveOccurred())
			rec = record(ns, recordNameOf(old))
			if takenOver {
				Expect(rec.Spec.Outcome).To(BeNil(), "a successor's record is never written")
				Expect(drain(recorder)).To(ContainElement(ContainSubstring(v1.EventSecondEffect)),
					"the held answer was dropped")
			} else {
				Expect(rec.Spec.Outcome).NotTo(BeNil(), "the held answer was dropped")
				Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
				Expect(rec.Spec.Outcome.ExternalObjectID).NotTo(BeEmpty())
			}
			now := get(ns, "op")
			Expect(now.UID).To(Equal(replaced.UID))
			Expect(now.Status.ExternalObjectID).NotTo(Equal(ptr.Deref(rec.Spec.Outcome, v1.RecordOutcome{}).ExternalObjectID),
				"the old answer was written into the new object")
		})
	}

	pending := []v1.OutboxEntry{{Subscriber: "audit", EventID: "e-1", Type: "dev.once.operation.committed",
		State: v1.DeliveryPending}}
	audit := []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "sink"}, Operation: "deliver"}}
	ended := &metav1.Time{Time: time.Now().Add(-time.Minute)}

	It("does not delete by TTL an operation whose announcement is still to be delivered", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := newOp(ns, "op", "payments", map[string]any{"amount": 5})
		op.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		op.Spec.Subscribers = audit
		op = create(op)
		op.Status = v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExternalObjectID: "ch_5",
			CompletionTime: ended, Outbox: pending}
		Expect(k8sClient.Status().Update(ctx, op)).To(Succeed())
		r := uidReconciler(k8sClient, k8sClient, events.NewFakeRecorder(100))
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(op))
		Expect(err).NotTo(HaveOccurred())
		Expect(get(ns, "op").DeletionTimestamp).To(BeNil(), "deleted with its announcement pending")

		By("the relay delivers, and its write wakes the operation")
		op = get(ns, "op")
		before := op.DeepCopy()
		op.Status.Outbox[0].State = v1.DeliveryDelivered
		Expect(k8sClient.Status().Update(ctx, op)).To(Succeed())
		Expect(OperationChangeWakes(before, op)).To(BeTrue())
		_, err = r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(op))
		Expect(err).NotTo(HaveOccurred())
		Expect(get(ns, "op").DeletionTimestamp).NotTo(BeNil(), "an operation whose announcements went is deleted")
	})

	It("does not delete by TTL a saga whose announcement is still to be delivered", func() {
		s := newSaga(ns, "change", changeSteps())
		s.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		s.Spec.Subscribers = audit
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		s.Status = v1.SagaStatus{State: v1.StateCommitted, ObservedGeneration: s.Generation, CompletionTime: ended,
			Outbox: pending}
		Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())
		r := buildReconcilers(k8sClient, k8sClient, events.NewFakeRecorder(100)).Saga
		req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)}
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), req)
		Expect(err).NotTo(HaveOccurred())
		Expect(getSaga(ns, "change").DeletionTimestamp).To(BeNil(), "deleted with its announcement pending")

		By("the relay gives up, and its write wakes the saga")
		s = getSaga(ns, "change")
		s.Status.Outbox[0].State = v1.DeliveryFailed
		Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())
		_, err = r.Reconcile(logf.IntoContext(ctx, logf.Log), req)
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, req.NamespacedName, &v1.Saga{}))).To(BeTrue(),
			"a saga whose announcement was given up is deleted")
	})
})

// buildReconcilers builds Once's reconcilers on c (its cache, here a
// client) and reader, as the manager does, allowed to call the sandbox.
func buildReconcilers(c client.Client, reader client.Reader, rec events.EventRecorder) *Reconcilers {
	GinkgoHelper()
	egress := &httpeffects.Egress{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	rs, err := Config{Holder: "uid-test", MaxClaim: 5 * time.Second, ClaimGrace: time.Second, Egress: egress}.Build(
		Deps{Client: c, APIReader: reader, Recorder: rec, Clock: clock.RealClock{},
			Transport: httpeffects.NewTransport(egress)})
	Expect(err).NotTo(HaveOccurred())
	return rs
}

// uidReconciler is the operation reconciler of buildReconcilers.
func uidReconciler(c client.Client, reader client.Reader, rec events.EventRecorder) *SideEffectOperationReconciler {
	GinkgoHelper()
	return buildReconcilers(c, reader, rec).Operation
}

func requestFor(o client.Object) reconcile.Request {
	return reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}
}

// keptUnknown writes the scope's record of op as the release of op, deleted
// with its attempts' outcome unknown, writes it (protocol.AtDeletion).
func keptUnknown(op *v1.SideEffectOperation) *v1.IdempotencyRecord {
	GinkgoHelper()
	p := (&SideEffectOperationReconciler{Clock: clock.RealClock{}}).newPass(ctx, op)
	Expect(p.identify()).To(Succeed())
	st := op.Status
	rec := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: op.Namespace, Name: p.st.RecordName},
		Spec: v1.IdempotencyRecordSpec{ToolRef: p.scope.Tool, Operation: p.scope.Operation,
			IdempotencyKey: p.scope.Key, RequestHash: p.st.RequestHash,
			Owner:     v1.RecordOwner{Name: op.Name, UID: op.UID},
			Retention: metav1.Duration{Duration: protocol.Retention(&op.Spec)},
			Attempt: &v1.RecordAttempt{Mode: st.IdempotencyMode, Promise: st.Promise, StartedTime: st.StartedTime,
				Attempts: st.Attempts}}}
	Expect(k8sClient.Create(ctx, rec)).To(Succeed())
	return rec
}

// replaceOp lets old go (its finalizer removed, as after its release) and
// makes another operation under its name, on tool, with status st if
// given. It returns the new object.
func replaceOp(old *v1.SideEffectOperation, tool string, st *v1.SideEffectOperationStatus) *v1.SideEffectOperation {
	GinkgoHelper()
	cur := get(old.Namespace, old.Name)
	Expect(cur.UID).To(Equal(old.UID))
	if cur.DeletionTimestamp == nil {
		Expect(k8sClient.Delete(ctx, cur)).To(Succeed())
	}
	cur = get(old.Namespace, old.Name)
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Finalizers = nil
	Expect(k8sClient.Patch(ctx, cur, patch)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(old), &v1.SideEffectOperation{}))
	}).Should(BeTrue())
	op := newOp(old.Namespace, old.Name, tool, map[string]any{"amount": 99})
	Expect(k8sClient.Create(ctx, op)).To(Succeed())
	if st != nil {
		op.Status = *st
		Expect(k8sClient.Status().Update(ctx, op)).To(Succeed())
	}
	Expect(op.UID).NotTo(Equal(old.UID))
	return op
}

// drain returns the events a fake recorder holds.
func drain(r *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
