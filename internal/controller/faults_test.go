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
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/test/sandbox"
)

// The fault matrix of docs/design.md, The fault matrix, faults 1-8, each against a real API
// server and the sandbox tool, counting effects at the tool's ledger.
var _ = Describe("The fault matrix", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	Context("F1. N concurrent requests with one key", func() {
		It("produces one effect, and every other object reports it, with two managers racing", func() {
			DeferCleanup(startManager(managerOptions{}))
			DeferCleanup(startManager(managerOptions{}))
			newTool(ns, "payments", v1.IdempotencyLookup)
			const n = 20
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					defer GinkgoRecover()
					op := newOp(ns, fmt.Sprintf("req-%02d", i), "payments", map[string]any{"amount": 100})
					op.Spec.IdempotencyKey = "order-1"
					create(op)
				})
			}
			wg.Wait()

			owners, ids := 0, map[string]bool{}
			for i := range n {
				op := waitFor(ns, fmt.Sprintf("req-%02d", i), v1.StateCommitted)
				ids[op.Status.ExternalObjectID] = true
				if op.Status.DuplicateOf == "" {
					owners++
					Expect(op.Status.Attempts).To(BeEquivalentTo(1))
				} else {
					Expect(op.Status.Attempts).To(BeZero(), "a duplicate makes no call")
					Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonDuplicate))
				}
			}
			Expect(owners).To(Equal(1))
			Expect(ids).To(HaveLen(1), "every object reports the one effect")
			Expect(effectsOf(v1.IdempotencyLookup, ns, "order-1")).To(Equal(1))
		})
	})

	Context("F2. The response is lost after the tool committed", func() {
		BeforeEach(func() { DeferCleanup(startManager(managerOptions{})) })
		lost := sandbox.FaultRule{Method: "POST", Fault: "drop-after-commit", Count: 1}

		It("re-sends with the same key to a Native tool and gets the first result", func() {
			faults(ns, lost)
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "op", "payments", map[string]any{"amount": 7}))
			op := waitFor(ns, "op", v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
			Expect(observationKinds(op)).To(Equal([]v1.ObservationKind{v1.ObservationCall, v1.ObservationResend}))
			Expect(op.Status.Observations[0].Outcome).To(Equal(string(v1.OutcomeUnknown)))
			Expect(op.Status.UnknownTime).NotTo(BeNil())
			Expect(op.Status.Attempts).To(BeEquivalentTo(1))
		})

		It("looks the key up at a Lookup tool and commits what it finds", func() {
			faults(ns, lost)
			newTool(ns, "tickets", v1.IdempotencyLookup)
			create(newOp(ns, "op", "tickets", map[string]any{"title": "disk full"}))
			op := waitFor(ns, "op", v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyLookup, ns, "op")).To(Equal(1))
			Expect(observationKinds(op)).To(Equal([]v1.ObservationKind{v1.ObservationCall, v1.ObservationLookup}))
			Expect(op.Status.Observations[1].Outcome).To(Equal("Found"))
			Expect(op.Status.ExternalObjectID).To(Equal(op.Status.Observations[1].ExternalObjectID))
		})

		It("asks a person when the tool can neither dedupe nor be asked, and takes their word", func() {
			faults(ns, lost)
			newTool(ns, "mailer", v1.IdempotencyNone)
			create(newOp(ns, "op", "mailer", map[string]any{"to": "a@example.com"}))
			op := waitFor(ns, "op", v1.StateNeedsReview)
			Expect(condition(op, v1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
			Expect(condition(op, v1.ConditionStalled).Reason).To(Equal(v1.ReasonNeedsReview))
			Expect(condition(op, v1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
			Expect(op.Status.Observations).NotTo(BeEmpty(), "the evidence a person needs")
			Expect(op.Status.Observations[0].Request).To(MatchRegexp(`^POST /none/charges body [0-9a-f]{12}$`),
				"the method, the path and the body's digest")
			Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
			Consistently(state(ns, "op"), 2*time.Second).Should(Equal(v1.StateNeedsReview))

			resolve(ns, "op", v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_found",
				By: "alice", Reason: "found in the mail log"})
			op = waitFor(ns, "op", v1.StateCommitted)
			Expect(op.Status.ExternalObjectID).To(Equal("ch_found"))
			Expect(op.Status.Resolution.By).To(Equal("alice"))
			Expect(op.Status.Resolution.FromState).To(Equal(v1.StateNeedsReview))
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonResolvedCommitted))
			Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
		})
	})

	Context("F3. The manager crashes between the tool's success and the commit", func() {
		for _, mode := range []v1.IdempotencyMode{v1.IdempotencyNative, v1.IdempotencyLookup, v1.IdempotencyNone} {
			It(fmt.Sprintf("recovers without a second effect (%s)", mode), func() {
				newTool(ns, "tool", mode)
				Expect(failpoint.Enable(failpoint.ExecuteAfterAnswer, `1*return("abandon")`)).To(Succeed())
				DeferCleanup(func() { _ = failpoint.Disable(failpoint.ExecuteAfterAnswer) })
				stopA := startManager(managerOptions{watch: []string{ns}, holder: "crashing"})
				create(newOp(ns, "op", "tool", map[string]any{"amount": 5}))
				Eventually(func() int { return effectsOf(mode, ns, "op") }).Should(Equal(1))
				Expect(get(ns, "op").Status.State).To(Equal(v1.StateStarted), "the answer was never recorded")
				stopA()

				DeferCleanup(startManager(managerOptions{holder: "successor"}))
				want := v1.StateCommitted
				if mode == v1.IdempotencyNone {
					want = v1.StateNeedsReview
				}
				op := waitFor(ns, "op", want)
				Expect(observationKinds(op)).To(ContainElement(v1.ObservationClaimExpired))
				Expect(effectsOf(mode, ns, "op")).To(Equal(1))
			})
		}
	})

	Context("F3b. The manager crashes after the claim, before the call", func() {
		for _, mode := range []v1.IdempotencyMode{v1.IdempotencyNative, v1.IdempotencyLookup} {
			It(fmt.Sprintf("reconciles the claimed attempt, then executes once (%s)", mode), func() {
				newTool(ns, "tool", mode)
				Expect(failpoint.Enable(failpoint.ExecuteAfterClaim, `1*return("abandon")`)).To(Succeed())
				DeferCleanup(func() { _ = failpoint.Disable(failpoint.ExecuteAfterClaim) })
				stopA := startManager(managerOptions{watch: []string{ns}, holder: "crashing"})
				create(newOp(ns, "op", "tool", map[string]any{"amount": 5}))
				Eventually(func() *v1.Claim { return get(ns, "op").Status.Claim }).ShouldNot(BeNil())
				stopA()
				Expect(effectsOf(mode, ns, "op")).To(BeZero(), "the call was never made")

				DeferCleanup(startManager(managerOptions{holder: "successor"}))
				op := waitFor(ns, "op", v1.StateCommitted)
				Expect(effectsOf(mode, ns, "op")).To(Equal(1))
				if mode == v1.IdempotencyLookup {
					Expect(op.Status.Attempts).To(BeEquivalentTo(2), "proven absent, then retried")
				}
			})
		}

		It("recovers from a crash during reconciliation, too", func() {
			faults(ns, sandbox.FaultRule{Method: "POST", Fault: "drop-after-commit", Count: 1})
			newTool(ns, "tool", v1.IdempotencyLookup)
			Expect(failpoint.Enable(failpoint.ReconcileAfterClaim, `1*return("abandon")`)).To(Succeed())
			DeferCleanup(func() { _ = failpoint.Disable(failpoint.ReconcileAfterClaim) })
			stopA := startManager(managerOptions{watch: []string{ns}, holder: "crashing"})
			create(newOp(ns, "op", "tool", map[string]any{"amount": 5}))
			Eventually(state(ns, "op"), 10*time.Second, 50*time.Millisecond).Should(Equal(v1.StateReconciling))
			stopA()
			DeferCleanup(startManager(managerOptions{holder: "successor"}))
			waitFor(ns, "op", v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyLookup, ns, "op")).To(Equal(1))
		})
	})

	Context("F4. The commit is recorded, the client did not see it", func() {
		BeforeEach(func() { DeferCleanup(startManager(managerOptions{})) })

		It("gives the recorded result to the client that asks again", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "op", "payments", map[string]any{"amount": 9}))
			first := waitFor(ns, "op", v1.StateCommitted)

			By("re-applying the same object: nothing changes")
			again := newOp(ns, "op", "payments", map[string]any{"amount": 9})
			again.ResourceVersion = first.ResourceVersion
			again.Spec.Retention = first.Spec.Retention
			again.Spec.RetryPolicy = first.Spec.RetryPolicy
			again.Spec.ToolRef.Kind = v1.ToolKindTool
			Expect(k8sClient.Update(ctx, again)).To(Succeed())
			Consistently(func() string { return get(ns, "op").Status.ExternalObjectID }, 2*time.Second).
				Should(Equal(first.Status.ExternalObjectID))

			By("asking through a new object with the same key")
			retry := newOp(ns, "op-retry", "payments", map[string]any{"amount": 9})
			retry.Spec.IdempotencyKey = "op"
			create(retry)
			got := waitFor(ns, "op-retry", v1.StateCommitted)
			Expect(got.Status.DuplicateOf).To(Equal("op"))
			Expect(got.Status.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))
			Expect(got.Status.Result).To(Equal(first.Status.Result))
			Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
		})
	})

	Context("F5. The same message is delivered twice", func() {
		BeforeEach(func() { DeferCleanup(startManager(managerOptions{})) })

		It("makes one effect whether the message maps to one object name or to two objects", func() {
			newTool(ns, "payments", v1.IdempotencyLookup)
			create(newOp(ns, "msg-123", "payments", map[string]any{"amount": 1}))
			err := k8sClient.Create(ctx, newOp(ns, "msg-123", "payments", map[string]any{"amount": 1}))
			Expect(apierrors.IsAlreadyExists(err)).To(BeTrue(), "the object name is the dedupe")

			twin := newOp(ns, "msg-123-redelivered", "payments", map[string]any{"amount": 1})
			twin.Spec.IdempotencyKey = "msg-123"
			create(twin)
			a := waitFor(ns, "msg-123", v1.StateCommitted)
			b := waitFor(ns, "msg-123-redelivered", v1.StateCommitted)
			// Either may bind the key first; the other reports its outcome.
			Expect([]string{a.Status.DuplicateOf, b.Status.DuplicateOf}).To(
				Or(Equal([]string{"", "msg-123"}), Equal([]string{"msg-123-redelivered", ""})))
			Expect(a.Status.ExternalObjectID).To(Equal(b.Status.ExternalObjectID))
			Expect(effectsOf(v1.IdempotencyLookup, ns, "msg-123")).To(Equal(1))
		})
	})

	Context("F6. A worker's claim expires and the old worker wakes up", func() {
		It("keeps one effect and the old worker cannot overwrite the newer record", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			// Whichever manager claims first stalls after the tool answered,
			// past its claim; the other takes over.
			Expect(failpoint.Enable(failpoint.ExecuteAfterAnswer, `1*sleep(5000)`)).To(Succeed())
			DeferCleanup(func() { _ = failpoint.Disable(failpoint.ExecuteAfterAnswer) })
			DeferCleanup(startManager(managerOptions{watch: []string{ns}, holder: "worker-a"}))
			DeferCleanup(startManager(managerOptions{watch: []string{ns}, holder: "worker-b"}))
			create(newOp(ns, "op", "payments", map[string]any{"amount": 3}))

			op := waitFor(ns, "op", v1.StateCommitted)
			committedBy := op.Status.Observations[len(op.Status.Observations)-1].Holder
			Eventually(func() []v1.ObservationKind { return observationKinds(get(ns, "op")) }, 15*time.Second).
				Should(ContainElement(v1.ObservationStaleCall), "the stale worker's answer is kept as evidence")
			op = get(ns, "op")
			Expect(op.Status.State).To(Equal(v1.StateCommitted))
			stale := op.Status.Observations[len(op.Status.Observations)-1]
			Expect(stale.Holder).NotTo(Equal(committedBy))
			Expect(stale.ExternalObjectID).To(Equal(op.Status.ExternalObjectID))
			Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
		})
	})

	Context("F6b. A worker stalls between its claim and its call", func() {
		It("does not send once its claim has expired, so a successor's proof of absence holds", func() {
			// Found by the chaos run: a worker frozen after its claim woke up
			// and sent attempt 1 after the successor had proven it absent
			// and made attempt 2. A Lookup tool does not dedupe.
			newTool(ns, "tickets", v1.IdempotencyLookup)
			Expect(failpoint.Enable(failpoint.ExecuteAfterClaim, `1*sleep(5000)`)).To(Succeed())
			DeferCleanup(func() { _ = failpoint.Disable(failpoint.ExecuteAfterClaim) })
			DeferCleanup(startManager(managerOptions{watch: []string{ns}, holder: "worker-a"}))
			DeferCleanup(startManager(managerOptions{watch: []string{ns}, holder: "worker-b"}))
			create(newOp(ns, "op", "tickets", map[string]any{"title": "stall"}))

			op := waitFor(ns, "op", v1.StateCommitted)
			// gofail holds a sleeping failpoint's lock, so the successor's own
			// next attempt may stall at the same point too: at least two.
			Expect(op.Status.Attempts).To(BeNumerically(">=", 2), describe(op))
			// Let the stalled worker wake up and try.
			Eventually(func() []v1.ObservationKind { return observationKinds(get(ns, "op")) }, 15*time.Second).
				Should(ContainElement(v1.ObservationStaleCall))
			Consistently(func() int { return effectsOf(v1.IdempotencyLookup, ns, "op") }, 2*time.Second).Should(Equal(1))
		})
	})

	Context("F7. The same key arrives with a different payload", func() {
		BeforeEach(func() { DeferCleanup(startManager(managerOptions{})) })

		It("rejects it with IdempotencyParameterMismatch and makes no call", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "first", "payments", map[string]any{"amount": 100}))
			waitFor(ns, "first", v1.StateCommitted)
			other := newOp(ns, "second", "payments", map[string]any{"amount": 1000})
			other.Spec.IdempotencyKey = "first"
			create(other)
			op := waitFor(ns, "second", v1.StateFailedFinal)
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonIdempotencyParameterMismatch))
			Expect(op.Status.ErrorClass).To(Equal(v1.ErrorConflict))
			Expect(op.Status.ErrorMessage).To(ContainSubstring("bound to different parameters by first"))
			Expect(op.Status.Attempts).To(BeZero())
			Expect(effectsOf(v1.IdempotencyNative, ns, "first")).To(Equal(1))
		})

		It("lets only one of two racing payloads execute", func() {
			newTool(ns, "payments", v1.IdempotencyLookup)
			a := newOp(ns, "a", "payments", map[string]any{"amount": 1})
			b := newOp(ns, "b", "payments", map[string]any{"amount": 2})
			a.Spec.IdempotencyKey, b.Spec.IdempotencyKey = "k", "k"
			create(a)
			create(b)
			Eventually(func() []v1.OperationState {
				return []v1.OperationState{get(ns, "a").Status.State, get(ns, "b").Status.State}
			}, 30*time.Second).Should(ConsistOf(v1.StateCommitted, v1.StateFailedFinal))
			Expect(effectsOf(v1.IdempotencyLookup, ns, "k")).To(Equal(1))
		})
	})

	Context("F8. The same payload arrives through a different retry", func() {
		BeforeEach(func() { DeferCleanup(startManager(managerOptions{})) })

		It("reuses the first result, also after the first object was deleted within its retention", func() {
			newTool(ns, "payments", v1.IdempotencyNone)
			op := newOp(ns, "pay", "payments", map[string]any{"amount": 4})
			op.Spec.Retention = &metav1.Duration{Duration: 3 * time.Second}
			create(op)
			first := waitFor(ns, "pay", v1.StateCommitted)
			remove(first)
			Expect(record(ns, recordNameOf(first)).Spec.Outcome).NotTo(BeNil())

			By("re-creating it within the retention: the recorded result, no call")
			again := newOp(ns, "pay", "payments", map[string]any{"amount": 4})
			again.Spec.Retention = &metav1.Duration{Duration: 3 * time.Second}
			create(again)
			got := waitFor(ns, "pay", v1.StateCommitted)
			Expect(got.UID).NotTo(Equal(first.UID))
			Expect(got.Status.DuplicateOf).To(Equal("pay"))
			Expect(got.Status.ExternalObjectID).To(Equal(first.Status.ExternalObjectID))
			Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(1))

			By("collecting the record only after it expired")
			remove(got)
			Eventually(func() bool {
				err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: recordNameOf(first)}, &v1.IdempotencyRecord{})
				return apierrors.IsNotFound(err)
			}, 15*time.Second).Should(BeTrue())
			Expect(time.Now()).To(BeTemporally(">=", first.Status.ExpiryTime.Time))

			By("executing again once the retention has passed, as retention means")
			third := newOp(ns, "pay", "payments", map[string]any{"amount": 4})
			third.Spec.Retention = &metav1.Duration{Duration: 3 * time.Second}
			create(third)
			Expect(waitFor(ns, "pay", v1.StateCommitted).Status.DuplicateOf).To(BeEmpty())
			Expect(effectsOf(v1.IdempotencyNone, ns, "pay")).To(Equal(2))
		})

		It("does not execute again when the first object was deleted before it ended", func() {
			faults(ns, sandbox.FaultRule{Method: "POST", Fault: "drop-after-commit", Count: 1})
			newTool(ns, "mailer", v1.IdempotencyNone)
			create(newOp(ns, "mail", "mailer", map[string]any{"to": "b@example.com"}))
			first := waitFor(ns, "mail", v1.StateNeedsReview)
			remove(first)

			create(newOp(ns, "mail", "mailer", map[string]any{"to": "b@example.com"}))
			op := waitFor(ns, "mail", v1.StateNeedsReview)
			Expect(op.UID).NotTo(Equal(first.UID))
			Expect(op.Status.ErrorMessage).To(ContainSubstring("a person must decide"))
			Expect(effectsOf(v1.IdempotencyNone, ns, "mail")).To(Equal(1))
		})
	})
})
