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
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestOperationChangeWakes(t *testing.T) {
	op := func(state v1.OperationState, rv string, mutate ...func(*v1.SideEffectOperation)) *v1.SideEffectOperation {
		o := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "ns", ResourceVersion: rv,
			Finalizers: []string{v1.FinalizerRecord}}, Status: v1.SideEffectOperationStatus{State: state, Attempts: 1}}
		for _, m := range mutate {
			m(o)
		}
		return o
	}
	noFinalizer := func(o *v1.SideEffectOperation) { o.Finalizers = nil }
	ttl := func(o *v1.SideEffectOperation) { o.Spec.TTLSecondsAfterFinished = new(int32(60)) }
	sagaStep := func(o *v1.SideEffectOperation) {
		o.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: "Saga", Name: "order",
			UID: types.UID("u"), Controller: new(true)}}
	}
	cases := map[string]struct {
		reason   string
		old, cur *v1.SideEffectOperation
		want     bool
	}{
		"ListedAtRest": {reason: "A start passes over a committed operation that has its finalizer and no TTL.",
			cur: op(v1.StateCommitted, "1"), want: false},
		"ListedFailedFinalAtRest": {reason: "So over one that failed for good.",
			cur: op(v1.StateFailedFinal, "1"), want: false},
		"ListedCompensatedAtRest": {reason: "And over a compensated one.",
			cur: op(v1.StateCompensated, "1"), want: false},
		"ListedRunning": {reason: "An operation that has not ended is driven on.",
			cur: op(v1.StateStarted, "1"), want: true},
		"ListedNeedsReview": {reason: "One that waits for a person waits in the queue too (its resolution is read there).",
			cur: op(v1.StateNeedsReview, "1"), want: true},
		"ListedDeleting": {reason: "A deleted operation's finalizer must copy its outcome into the record.",
			cur: op(v1.StateCommitted, "1", func(o *v1.SideEffectOperation) { o.DeletionTimestamp = new(metav1.Now()) }), want: true},
		"ListedLackingFinalizer": {reason: "An operation ended under the previous release gets its finalizer.",
			cur: op(v1.StateCommitted, "1", noFinalizer), want: true},
		"ListedDuplicateWithoutFinalizer": {reason: "A duplicate made no attempt of its own and needs no finalizer.",
			cur: op(v1.StateCommitted, "1", noFinalizer, func(o *v1.SideEffectOperation) { o.Status.DuplicateOf = "first" }), want: false},
		"ListedNeverAttempted": {reason: "Nor does one refused before any attempt.",
			cur: op(v1.StateFailedFinal, "1", noFinalizer, func(o *v1.SideEffectOperation) { o.Status.Attempts = 0 }), want: false},
		"ListedWithTTL": {reason: "A TTL is kept by its operation's reconcile.",
			cur: op(v1.StateCommitted, "1", ttl), want: true},
		"ListedSagaStepWithTTL": {reason: "A saga's step goes with its saga, whatever its own TTL says.",
			cur: op(v1.StateCommitted, "1", ttl, sagaStep), want: false},
		"ResyncAtRest": {reason: "A periodic resync repeats an unchanged object: nothing to do.",
			old: op(v1.StateCommitted, "7"), cur: op(v1.StateCommitted, "7"), want: false},
		"ResyncRunning": {reason: "A resync of one that has not ended wakes it.",
			old: op(v1.StateReconciling, "7"), cur: op(v1.StateReconciling, "7"), want: true},
		"ChangedAtRest": {reason: "A change of one at rest (a label, a TTL added) wakes it.",
			old: op(v1.StateCommitted, "7"), cur: op(v1.StateCommitted, "8"), want: true},
		"Ended": {reason: "The write that ends an operation wakes it: its finalizer or TTL may be due.",
			old: op(v1.StateStarted, "7"), cur: op(v1.StateCommitted, "8"), want: true},
		"Deleted": {reason: "A deletion wakes it, to forget what is held of it.",
			old: op(v1.StateCommitted, "7"), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var old, cur client.Object
			if tc.old != nil {
				old = tc.old
			}
			if tc.cur != nil {
				cur = tc.cur
			}
			if got := OperationChangeWakes(old, cur); got != tc.want {
				t.Errorf("%s\nOperationChangeWakes(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

// reconciles is how many passes the controller of that name made, in every
// manager of this process, by controller-runtime's own count.
func reconciles(controller string) float64 {
	families, err := crmetrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}

// A manager that starts lists every operation the cluster retains; nearly
// all of them ended long ago and have nothing due. It keeps them in its
// cache and passes over none of them: a pass per operation at a start held
// most of a manager's memory at 200 000 retained (docs/performance.md).
var _ = Describe("A manager's start", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		newTool(ns, "payments", v1.IdempotencyNative)
	})

	// commitAll creates n operations with a manager of its own, waits for
	// them to commit, and stops the manager.
	commitAll := func(n int, mutate func(*v1.SideEffectOperation)) {
		stop := startManager(managerOptions{watch: []string{ns}})
		defer stop()
		for i := range n {
			op := newOp(ns, fmt.Sprintf("op-%d", i), "payments", map[string]any{"amount": i})
			if mutate != nil {
				mutate(op)
			}
			create(op)
		}
		for i := range n {
			waitFor(ns, fmt.Sprintf("op-%d", i), v1.StateCommitted)
		}
	}

	It("passes over no operation at rest, and a change of one wakes it", func() {
		commitAll(30, nil)
		before := reconciles("sideeffectoperation")
		synced := make(chan struct{})
		DeferCleanup(startManager(managerOptions{watch: []string{ns}, synced: synced}))
		Eventually(synced, 30*time.Second).Should(BeClosed())

		By("changing one of them, after the new manager has listed them all")
		op := get(ns, "op-7")
		patch := client.MergeFrom(op.DeepCopy())
		op.Labels = map[string]string{"audited": "yes"}
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
		Eventually(func() float64 { return reconciles("sideeffectoperation") - before }, 15*time.Second, 50*time.Millisecond).
			Should(BeNumerically(">=", 1))
		Consistently(func() float64 { return reconciles("sideeffectoperation") - before }, 3*time.Second, 100*time.Millisecond).
			Should(BeEquivalentTo(1), "the start passed over operations that had nothing to do")
	})

	It("still gives an ended operation its missing finalizer and deletes one whose TTL ran out meanwhile", func() {
		commitAll(2, nil)
		By("leaving one without its finalizer, as an operation that ended before outcomes were kept at deletion")
		bare := get(ns, "op-0")
		patch := client.MergeFrom(bare.DeepCopy())
		bare.Finalizers = nil
		Expect(k8sClient.Patch(ctx, bare, patch)).To(Succeed())
		Expect(get(ns, "op-0").Finalizers).To(BeEmpty())

		By("giving the other a TTL that runs out while no manager runs")
		expiring := get(ns, "op-1")
		patch = client.MergeFrom(expiring.DeepCopy())
		expiring.Spec.TTLSecondsAfterFinished = new(int32(1))
		Expect(k8sClient.Patch(ctx, expiring, patch)).To(Succeed())
		time.Sleep(time.Until(expiring.Status.CompletionTime.Add(1500 * time.Millisecond)))

		DeferCleanup(startManager(managerOptions{watch: []string{ns}}))
		Eventually(func() []string { return get(ns, "op-0").Finalizers }, 15*time.Second, 100*time.Millisecond).
			Should(ConsistOf(v1.FinalizerRecord))
		Eventually(gone(&v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "op-1"}}),
			15*time.Second, 100*time.Millisecond).Should(BeTrue())
	})
})
