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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

// gone reports whether an object no longer exists, for Eventually.
func gone(obj client.Object) func() bool {
	key := client.ObjectKeyFromObject(obj)
	fresh := obj.DeepCopyObject().(client.Object)
	return func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, key, fresh)) }
}

// An ended object with spec.ttlSecondsAfterFinished goes that long after it
// ended; its scope's record stays until its own expiry.
var _ = Describe("spec.ttlSecondsAfterFinished", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})
	withTTL := func(op *v1.SideEffectOperation, seconds int32) *v1.SideEffectOperation {
		op.Spec.TTLSecondsAfterFinished = new(seconds)
		return op
	}

	It("deletes a committed operation after its TTL, keeps its record, and a re-apply within retention makes no call", func() {
		newTool(ns, "payments", v1.IdempotencyNone)
		manifest := func() *v1.SideEffectOperation {
			return withTTL(newOp(ns, "pay", "payments", map[string]any{"amount": 5}), 2)
		}
		deletions := func() float64 {
			return testutil.ToFloat64(metrics.TTLDeletions.WithLabelValues("SideEffectOperation"))
		}
		before := deletions()
		first := waitFor(ns, create(manifest()).Name, v1.StateCommitted)
		Expect(first.Status.CompletionTime).NotTo(BeNil())
		Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))

		By("deleting it once its two seconds have passed")
		Eventually(gone(first), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		Expect(time.Now()).To(BeTemporally(">=", first.Status.CompletionTime.Add(2*time.Second)))

		By("writing no Event for the deletion, the end of a happy path, and counting it")
		Consistently(func() []string { return eventReasons(ns) }, 3*time.Second, 100*time.Millisecond).Should(BeEmpty())
		Expect(deletions()).To(Equal(before + 1))

		By("keeping its outcome in its scope's record, until the record's expiry")
		rec := record(ns, recordNameOf(first))
		Expect(rec).NotTo(BeNil(), "the TTL deletes the operation, never its record")
		Expect(rec.Spec.Owner.UID).To(Equal(first.UID))
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))
		Expect(rec.Spec.Outcome.ExpiryTime.Time).To(BeTemporally("~", first.Status.ExpiryTime.Time, time.Second))

		By("applying the same manifest again, within retention: the recorded outcome, no call")
		again := create(manifest())
		Eventually(func() v1.OperationState {
			op := &v1.SideEffectOperation{}
			if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(again), op); err != nil {
				return ""
			}
			again = op
			return op.Status.State
		}, 15*time.Second, 50*time.Millisecond).Should(Equal(v1.StateCommitted))
		Expect(again.UID).NotTo(Equal(first.UID))
		Expect(again.Status.DuplicateOf).To(Equal("pay"))
		Expect(again.Status.Attempts).To(BeZero())
		Expect(again.Status.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))
		Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))

		By("deleting the re-applied one too, and still no second effect")
		Eventually(gone(again), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))
		Expect(record(ns, recordNameOf(first))).NotTo(BeNil())
	})

	It("lets a manifest applied again after its record's retention execute again, as documented", func() {
		newTool(ns, "payments", v1.IdempotencyNone)
		manifest := func() *v1.SideEffectOperation {
			op := withTTL(newOp(ns, "pay", "payments", map[string]any{"amount": 6}), 0)
			op.Spec.Retention = &metav1.Duration{Duration: 3 * time.Second}
			return op
		}
		first := create(manifest())
		recordName := protocol.OperationScope(first).RecordName()
		Eventually(gone(first), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))
		rec := record(ns, recordName)
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))

		By("waiting until the record's retention has passed and it is collected")
		Eventually(func() *v1.IdempotencyRecord { return record(ns, recordName) }, 20*time.Second,
			200*time.Millisecond).Should(BeNil())
		again := create(manifest())
		Eventually(func() int { return effectsOf(v1.IdempotencyNone, ns, "pay") }, 15*time.Second).Should(Equal(2),
			"nothing remembers the key any more: a new lifetime of it")
		Eventually(gone(again), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
	})

	It("keeps an ended operation that has no TTL", func() {
		newTool(ns, "payments", v1.IdempotencyNone)
		op := waitFor(ns, create(newOp(ns, "keep", "payments", map[string]any{"amount": 1})).Name, v1.StateCommitted)
		Consistently(gone(op), 3*time.Second, 200*time.Millisecond).Should(BeFalse())
	})

	It("never deletes an operation in NeedsReview, even with TTL 0, and deletes it once a person ends it", func() {
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "drop-after-commit", Count: 1})
		newTool(ns, "mailer", v1.IdempotencyNone)
		op := waitFor(ns, create(withTTL(newOp(ns, "mail", "mailer", map[string]any{"to": "a@example.com"}), 0)).Name,
			v1.StateNeedsReview)
		Consistently(gone(op), 3*time.Second, 200*time.Millisecond).Should(BeFalse())
		Expect(get(ns, "mail").Status.State).To(Equal(v1.StateNeedsReview))

		resolve(ns, "mail", v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_found", By: "alice"})
		Eventually(gone(op), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		rec := record(ns, recordNameOf(op))
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal("ch_found"))
	})

	It("leaves a saga's step to its saga, and deletes the saga after its own TTL", func() {
		newDesk(ns)
		steps := changeSteps()
		steps[1].RequiresApproval = true
		s := newSaga(ns, "scale", steps)
		s.Spec.TTLSecondsAfterFinished = ptr.To[int32](1)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Eventually(func() string {
			return sagaCondition(getSaga(ns, "scale"), v1.ConditionStalled).Reason
		}, 30*time.Second).Should(Equal("WaitingForApproval"))

		By("giving the committed first step a TTL of its own while the saga waits")
		ticket := waitFor(ns, stepStatus(getSaga(ns, "scale"), "ticket").Operation, v1.StateCommitted)
		patch := client.MergeFrom(ticket.DeepCopy())
		ticket.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		Expect(k8sClient.Patch(ctx, ticket, patch)).To(Succeed())
		Consistently(gone(ticket), 3*time.Second, 200*time.Millisecond).Should(BeFalse(),
			"a step goes with its saga, never by its own TTL")

		By("approving: the saga ends, and goes a second later")
		s = getSaga(ns, "scale")
		patch = client.MergeFrom(s.DeepCopy())
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "bob"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		Eventually(gone(s), 30*time.Second, 100*time.Millisecond).Should(BeTrue())
		// envtest runs no garbage collector: the steps stay here, and
		// their records with them.
		Expect(gone(ticket)()).To(BeFalse())
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
	})

	It("applies a TTL set after the operation or the saga ended", func() {
		newDesk(ns)
		op := newOp(ns, "ticket", "desk", map[string]any{"title": "disk full"})
		op.Spec.Operation = "ticket.open"
		op = waitFor(ns, create(op).Name, v1.StateCommitted)
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())
		s := waitSaga(ns, "scale", v1.StateCommitted)
		Consistently(gone(op), time.Second).Should(BeFalse())

		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
		sagaPatch := client.MergeFrom(s.DeepCopy())
		s.Spec.TTLSecondsAfterFinished = ptr.To[int32](0)
		Expect(k8sClient.Patch(ctx, s, sagaPatch)).To(Succeed())
		Eventually(gone(op), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		Eventually(gone(s), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
	})

	It("refuses a negative TTL with a message that says what it is", func() {
		for _, obj := range []client.Object{
			withTTL(newOp(ns, "neg", "payments", map[string]any{}), -1),
			&v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "neg"},
				Spec: v1.SagaSpec{Steps: changeSteps(), TTLSecondsAfterFinished: ptr.To[int32](-1)}},
		} {
			Expect(k8sClient.Create(ctx, obj)).To(MatchError(
				ContainSubstring("spec.ttlSecondsAfterFinished must be 0 or more")))
		}
	})
})

func TestExpiresIn(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(d)} }
	type want struct {
		due  bool
		wait time.Duration
	}
	cases := map[string]struct {
		reason   string
		ttl      *int32
		finished *metav1.Time
		want     want
	}{
		"NoTTL":      {reason: "an object without a TTL is kept", finished: at(-time.Hour), want: want{}},
		"NoFinished": {reason: "an object that holds no end time is kept", ttl: ptr.To[int32](0), want: want{}},
		"Zero":       {reason: "TTL 0 deletes as soon as it ended", ttl: ptr.To[int32](0), finished: at(0), want: want{due: true}},
		"Waiting": {reason: "before the TTL runs out, wait until it does", ttl: ptr.To[int32](3600),
			finished: at(-10 * time.Minute), want: want{wait: 50 * time.Minute}},
		"Due": {reason: "on the second the TTL runs out it is due", ttl: ptr.To[int32](60),
			finished: at(-time.Minute), want: want{due: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			due, wait := expiresIn(tc.ttl, tc.finished, now)
			if diff := cmp.Diff(tc.want, want{due: due, wait: wait}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nexpiresIn(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestFinishedTime(t *testing.T) {
	done := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	ready := metav1.NewTime(done.Add(time.Second))
	conds := []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionTrue, LastTransitionTime: ready}}
	cases := map[string]struct {
		reason     string
		completion *metav1.Time
		conditions []metav1.Condition
		want       *metav1.Time
	}{
		"Completion": {reason: "the completion time, which every terminal write sets", completion: &done,
			conditions: conds, want: &done},
		"Ready":   {reason: "else the Ready condition's last transition", conditions: conds, want: &ready},
		"Neither": {reason: "else none: the object is kept"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, finishedTime(tc.completion, tc.conditions)); diff != "" {
				t.Errorf("%s\nfinishedTime(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestControlledBySaga(t *testing.T) {
	ref := func(apiVersion, kind string, controller bool) *v1.SideEffectOperation {
		return &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{{
			APIVersion: apiVersion, Kind: kind, Name: "s", UID: "u", Controller: new(controller)}}}}
	}
	cases := map[string]struct {
		reason string
		op     *v1.SideEffectOperation
		want   bool
	}{
		"Step":          {reason: "a step of a saga", op: ref(v1.GroupVersion.String(), "Saga", true), want: true},
		"NotController": {reason: "an owner that is not the controller", op: ref(v1.GroupVersion.String(), "Saga", false)},
		"OtherGroup":    {reason: "a Saga of another API group", op: ref("example.com/v1", "Saga", true)},
		"Alone":         {reason: "no owner", op: &v1.SideEffectOperation{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := controlledBySaga(tc.op); got != tc.want {
				t.Errorf("%s: controlledBySaga() = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
