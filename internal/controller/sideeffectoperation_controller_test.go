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
	"net"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var _ = Describe("SideEffectOperation", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
	})

	It("commits once against a tool that dedupes natively", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		create(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100, "currency": "eur"}))

		op := waitFor(ns, "charge-1", v1.StateCommitted)
		Expect(op.Status.ExternalObjectID).To(HavePrefix("ch_"))
		Expect(op.Status.Attempts).To(BeEquivalentTo(1))
		Expect(op.Status.IdempotencyKey).To(Equal("charge-1"))
		// Derived from the spec, the key sent to the tool and the record's
		// name are kept while the operation runs, not once it ended.
		Expect(op.Status.ToolIdempotencyKey).To(BeEmpty())
		Expect(op.Status.RecordName).To(BeEmpty())
		Expect(effectsOf(v1.IdempotencyNative, ns, "charge-1")).To(Equal(1), "sent as %s/Tool:payments/charge.create/charge-1", ns)
		Expect(op.Status.RequestHash).To(MatchRegexp(`^sha256:[0-9a-f]{64}$`))
		Expect(op.Status.StartedTime).NotTo(BeNil())
		Expect(op.Status.CommittedTime).NotTo(BeNil())
		Expect(op.Status.ExpiryTime.Sub(op.Status.CompletionTime.Time)).To(Equal(24 * time.Hour))
		Expect(op.Status.Claim).To(BeNil())
		Expect(string(op.Status.Result.Raw)).To(ContainSubstring(`"amount":100`))
		Expect(op.Status.ObservedGeneration).To(Equal(op.Generation))
		Expect(condition(op, v1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(condition(op, v1.ConditionSucceeded).Status).To(Equal(metav1.ConditionTrue))
		// Reconciling and Stalled are there only while True.
		Expect(meta.FindStatusCondition(op.Status.Conditions, v1.ConditionReconciling)).To(BeNil())
		Expect(meta.FindStatusCondition(op.Status.Conditions, v1.ConditionStalled)).To(BeNil())
		Expect(op.Status.Observations).To(BeEmpty(), "a first attempt that committed keeps no observation")
		Expect(effectsOf(v1.IdempotencyNative, ns, "charge-1")).To(Equal(1))

		By("binding no record while the object, whose name is its key, exists")
		Expect(op.Finalizers).To(ContainElement(v1.FinalizerRecord))
		Expect(record(ns, recordNameOf(op))).To(BeNil())

		By("writing no Events for the routine first claim and commit")
		Consistently(func() []string {
			var list corev1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			var reasons []string
			for _, e := range list.Items {
				reasons = append(reasons, e.Reason)
			}
			return reasons
		}, 2*time.Second).ShouldNot(ContainElement(BeElementOf(v1.EventClaimed, v1.ReasonCommitted)))

		By("staying committed, with no second call, when reconciled again")
		Consistently(func() int { return effectsOf(v1.IdempotencyNative, ns, "charge-1") }, 2*time.Second).Should(Equal(1))

		By("keeping the outcome in the scope's record when the object is deleted")
		remove(op)
		rec := record(ns, recordNameOf(op))
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Owner.UID).To(Equal(op.UID))
		Expect(rec.Spec.RequestHash).To(Equal(op.Status.RequestHash))
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal(op.Status.ExternalObjectID))
	})

	It("uses spec.idempotencyKey when given, and fails for good on a rejection", func() {
		newTool(ns, "payments", v1.IdempotencyLookup)
		op := newOp(ns, "declined", "payments", map[string]any{"amount": 100, "reject": "card_declined"})
		op.Spec.IdempotencyKey = "order-42"
		create(op)
		op = waitFor(ns, "declined", v1.StateFailedFinal)
		Expect(op.Status.IdempotencyKey).To(Equal("order-42"))
		Expect(op.Status.ErrorClass).To(Equal(v1.ErrorPermanent))
		Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonRejected))
		Expect(op.Status.ErrorMessage).To(ContainSubstring("card_declined"))
		Expect(condition(op, v1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(condition(op, v1.ConditionSucceeded).Status).To(Equal(metav1.ConditionFalse))
		Expect(effectsIn(ns)).To(BeZero())
	})

	Context("its spec is immutable, checked by the API server", func() {
		It("refuses new parameters for the same key, with a message that says why", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100}))
			op := waitFor(ns, "charge-1", v1.StateCommitted)

			op.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"amount":1000}`)}
			err := k8sClient.Update(ctx, op)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("an idempotency key cannot be bound to different parameters"))

			for field, mutate := range map[string]func(*v1.SideEffectOperation){
				"spec.operation":               func(o *v1.SideEffectOperation) { o.Spec.Operation = "refund.create" },
				"spec.toolRef":                 func(o *v1.SideEffectOperation) { o.Spec.ToolRef.Name = "other" },
				"spec is immutable":            func(o *v1.SideEffectOperation) { o.Spec.IdempotencyKey = "another" },
				"spec.retryPolicy.maxAttempts": func(o *v1.SideEffectOperation) { o.Spec.RetryPolicy.MaxAttempts = 9 },
				"spec.retention":               func(o *v1.SideEffectOperation) { o.Spec.Retention = &metav1.Duration{Duration: time.Hour} },
				"spec.parameters are": func(o *v1.SideEffectOperation) {
					o.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"amount":100,"extra":true}`)}
				},
				"an idempotency key cannot be bound": func(o *v1.SideEffectOperation) { o.Spec.Parameters = nil },
			} {
				op := get(ns, "charge-1")
				mutate(op)
				err := k8sClient.Update(ctx, op)
				Expect(err).To(HaveOccurred(), field)
				Expect(err.Error()).To(ContainSubstring(field))
			}
			Expect(effectsIn(ns)).To(Equal(1))
		})

		It("refuses a timeout over an hour, on an operation, a tool and a saga step", func() {
			day := &metav1.Duration{Duration: 24 * time.Hour}
			op := newOp(ns, "charge-1", "payments", map[string]any{"amount": 100})
			op.Spec.Timeout = day
			err := k8sClient.Create(ctx, op)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("spec.timeout is at most 1h"))

			tool := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}, Spec: v1.ToolSpec{
				HTTP: v1.HTTPBackend{URL: toolURL}, Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
				Timeout: day, Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/charges"}}}}
			err = k8sClient.Create(ctx, tool)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("timeout is at most 1h"))

			s := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow"}, Spec: v1.SagaSpec{
				Steps: []v1.SagaStep{{Name: "charge", ToolRef: v1.StepToolReference{Name: "payments"},
					Operation: "charge.create", Irreversible: true, Timeout: day}}}}
			err = k8sClient.Create(ctx, s)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("timeout is at most 1h"))

			op = newOp(ns, "charge-2", "payments", map[string]any{"amount": 100})
			op.Spec.Timeout = &metav1.Duration{Duration: time.Hour}
			Expect(k8sClient.Create(ctx, op)).To(Succeed())
		})

		It("takes a full update from a typed client, and refuses a resolution outside NeedsReview", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100}))
			op := waitFor(ns, "charge-1", v1.StateCommitted)
			// The typed client writes durations as "24h0m0s", the API
			// server stored "24h": the rules compare durations, not text.
			op.Labels = map[string]string{"team": "payments"}
			Expect(k8sClient.Update(ctx, op)).To(Succeed())
			By("refusing a resolution on a committed operation: terminal stays terminal")
			op = get(ns, "charge-1")
			op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionFail, By: "alice"}
			err := k8sClient.Update(ctx, op)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("only while the operation is in NeedsReview"))
			Consistently(state(ns, "charge-1"), time.Second).Should(Equal(v1.StateCommitted))
		})
	})

	Context("refuses bad input before any call", func() {
		It("rejects an unknown tool kind and a negative retention at the API server", func() {
			op := newOp(ns, "bad-kind", "payments", map[string]any{})
			op.Spec.ToolRef.Kind = "Webhook"
			err := k8sClient.Create(ctx, op)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(`Unsupported value: "Webhook"`))

			op = newOp(ns, "bad-retention", "payments", map[string]any{})
			op.Spec.Retention = &metav1.Duration{Duration: -time.Hour}
			err = k8sClient.Create(ctx, op)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("spec.retention must be positive"))

			op = newOp(ns, "bad-resolution", "payments", map[string]any{})
			op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionMarkCommitted, By: "alice"}
			err = k8sClient.Create(ctx, op)
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring("needs the externalObjectID"))
		})

		It("refuses parameters that break the operation's schema, with zero calls", func() {
			newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
				s.Operations[0].ParametersSchema = &runtime.RawExtension{Raw: []byte(`{
					"type": "object", "required": ["amount"],
					"properties": {"amount": {"type": "integer", "minimum": 1}}}`)}
			})
			create(newOp(ns, "bad-amount", "payments", map[string]any{"amount": "ten"}))
			op := waitFor(ns, "bad-amount", v1.StateFailedFinal)
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonParametersInvalid))
			Expect(op.Status.ErrorMessage).To(ContainSubstring("at /amount: got string, want integer"))
			Expect(op.Status.ErrorClass).To(Equal(v1.ErrorInvalid))
			Expect(op.Status.Attempts).To(BeZero())
			Expect(op.Status.Observations).To(BeEmpty(), "no call was made")

			By("executing parameters that match")
			create(newOp(ns, "good-amount", "payments", map[string]any{"amount": 10}))
			waitFor(ns, "good-amount", v1.StateCommitted)
			Expect(effectsIn(ns)).To(Equal(1), "only the valid operation took effect")
		})

		It("waits, stalled, for a missing tool, and proceeds once it exists", func() {
			create(newOp(ns, "early", "payments", map[string]any{"amount": 1}))
			Eventually(func() string {
				return condition(get(ns, "early"), v1.ConditionStalled).Reason
			}).Should(Equal(v1.ReasonToolNotFound))
			op := get(ns, "early")
			Expect(op.Status.State).To(Equal(v1.StatePlanned))
			Expect(condition(op, v1.ConditionStalled).Message).To(Equal("Tool payments does not exist"))
			Expect(condition(op, v1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))

			newTool(ns, "payments", v1.IdempotencyNative)
			waitFor(ns, "early", v1.StateCommitted)
			Expect(effectsIn(ns)).To(Equal(1))
		})

		It("does not run a step whose saga is gone, which the garbage collector deletes", func() {
			// A saga's pass that read its saga before a person deleted it
			// creates the next step after; the control plane here runs no
			// garbage collector, as one that lags behind would not have
			// deleted the step yet.
			newTool(ns, "payments", v1.IdempotencyNative)
			saga := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order"}, Spec: v1.SagaSpec{
				Steps: []v1.SagaStep{{Name: "charge", ToolRef: v1.StepToolReference{Name: "payments"},
					Operation: "charge.create", Parameters: &runtime.RawExtension{Raw: []byte(`{"amount":1}`)},
					Irreversible: true, RequiresApproval: true}}}}
			Expect(k8sClient.Create(ctx, saga)).To(Succeed())
			Expect(k8sClient.Delete(ctx, saga)).To(Succeed())
			Eventually(func() bool {
				return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(saga), &v1.Saga{}))
			}).Should(BeTrue())
			// stepOf is an operation s controls, as the saga reconciler
			// makes its steps.
			stepOf := func(s *v1.Saga, name string) *v1.SideEffectOperation {
				op := newOp(ns, name, "payments", map[string]any{"amount": 1})
				op.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: "Saga",
					Name: s.Name, UID: s.UID, Controller: new(true), BlockOwnerDeletion: new(true)}}
				return op
			}
			create(stepOf(saga, "late-step"))
			Eventually(func() string {
				return condition(get(ns, "late-step"), v1.ConditionStalled).Reason
			}).Should(Equal(v1.ReasonSagaGone))
			got := get(ns, "late-step")
			Expect(got.Status.State).To(Equal(v1.StatePlanned))
			Expect(got.Status.Attempts).To(BeZero())
			Expect(condition(got, v1.ConditionStalled).Message).To(Equal(
				"Saga order, which made this operation, is gone: it does not run, and the garbage collector deletes it"))
			Consistently(func() int { return effectsIn(ns) }, 3*time.Second).Should(BeZero())

			By("not running a step of a saga that is being deleted, which no one drives any more")
			held := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held",
				Finalizers: []string{"example.com/hold"}}, Spec: saga.Spec}
			Expect(k8sClient.Create(ctx, held)).To(Succeed())
			Expect(k8sClient.Delete(ctx, held)).To(Succeed())
			create(stepOf(held, "held-step"))
			Eventually(func() string {
				return condition(get(ns, "held-step"), v1.ConditionStalled).Message
			}).Should(ContainSubstring("Saga held, which made this operation, is being deleted"))
			Expect(get(ns, "held-step").Status.Attempts).To(BeZero())
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(held), held)).To(Succeed())
			held.Finalizers = nil
			Expect(k8sClient.Update(ctx, held)).To(Succeed())

			By("running an operation that a saga of the same name, created again, does not control")
			again := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "order"}, Spec: saga.Spec}
			Expect(k8sClient.Create(ctx, again)).To(Succeed())
			// Nothing about a saga wakes an operation: a label does.
			woken := get(ns, "late-step")
			woken.Labels = map[string]string{"woken": "yes"}
			Expect(k8sClient.Update(ctx, woken)).To(Succeed())
			Eventually(func() string {
				return condition(get(ns, "late-step"), v1.ConditionStalled).Message
			}).Should(ContainSubstring("the saga of that name now is another"))
			Consistently(func() v1.OperationState { return get(ns, "late-step").Status.State },
				3*time.Second).Should(Equal(v1.StatePlanned))
			Expect(effectsIn(ns)).To(BeZero(), "the saga made again is another object: its UID is not the step's owner")
		})

		It("waits, stalled, for an operation the tool does not offer", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			op := newOp(ns, "refund", "payments", map[string]any{})
			op.Spec.Operation = "refund.create"
			create(op)
			Eventually(func() string {
				return condition(get(ns, "refund"), v1.ConditionStalled).Reason
			}).Should(Equal(v1.ReasonOperationNotDeclared))
			Expect(effectsIn(ns)).To(BeZero())
		})

		It("waits, stalled, for a tool whose expressions do not compile, and says so on the tool", func() {
			newTool(ns, "broken", v1.IdempotencyNative, func(s *v1.ToolSpec) {
				s.Operations[0].Response.ExternalObjectID = "response.body.id +"
			})
			create(newOp(ns, "op", "broken", map[string]any{}))
			Eventually(func() string {
				return condition(get(ns, "op"), v1.ConditionStalled).Reason
			}).Should(Equal(v1.ReasonToolInvalid))
			Eventually(func() string {
				t := &v1.Tool{}
				Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "broken"}, t)).To(Succeed())
				if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionReady); c != nil {
					return c.Message
				}
				return ""
			}).Should(ContainSubstring("spec.operations[0].response.externalObjectID"))
			Expect(effectsIn(ns)).To(BeZero())
		})

		It("fails parameters over 64 KiB without calling the tool", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "huge", "payments", map[string]any{"blob": strings.Repeat("x", v1.MaxParametersBytes)}))
			op := waitFor(ns, "huge", v1.StateFailedFinal)
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonParametersTooLarge))
			Expect(op.Status.ErrorClass).To(Equal(v1.ErrorInvalid))
			Expect(op.Status.Attempts).To(BeZero())
			Expect(effectsIn(ns)).To(BeZero())
		})

		It("fails a number with more precision than a double without calling the tool (I4)", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			create(newOp(ns, "account", "payments", map[string]any{"account": int64(12345678901234567)}))
			op := waitFor(ns, "account", v1.StateFailedFinal)
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonParametersInvalid))
			Expect(condition(op, v1.ConditionReady).Message).To(ContainSubstring("12345678901234567"))
			Expect(op.Status.ErrorClass).To(Equal(v1.ErrorInvalid))
			Expect(op.Status.Attempts).To(BeZero())
			Expect(effectsIn(ns)).To(BeZero())
		})

		It("fails a retention shorter than the tool's replay window without calling the tool", func() {
			newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
				s.Idempotency.ReplayWindow = &metav1.Duration{Duration: 48 * time.Hour}
			})
			create(newOp(ns, "short", "payments", map[string]any{"amount": 1}))
			op := waitFor(ns, "short", v1.StateFailedFinal)
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonRetentionTooShort))
			Expect(op.Status.ErrorMessage).To(ContainSubstring("shorter than the replay window"))
			Expect(effectsIn(ns)).To(BeZero())
		})

		It("retries an unreachable tool, which never saw the request, then fails for good", func() {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			Expect(err).NotTo(HaveOccurred())
			unreachable := "http://" + l.Addr().String()
			Expect(l.Close()).To(Succeed())
			newTool(ns, "gone", v1.IdempotencyNone, func(s *v1.ToolSpec) { s.HTTP.URL = unreachable })
			op := newOp(ns, "op", "gone", map[string]any{})
			op.Spec.RetryPolicy.MaxAttempts = 2
			create(op)
			op = waitFor(ns, "op", v1.StateFailedFinal)
			Expect(condition(op, v1.ConditionReady).Reason).To(Equal(v1.ReasonRetriesExhausted))
			Expect(op.Status.ErrorMessage).To(ContainSubstring("request never left"))
			Expect(op.Status.Attempts).To(BeEquivalentTo(2))
			Expect(op.Status.UnknownTime).To(BeNil(), "a request that never left is not an unknown outcome")
		})

		It("waits for a missing Secret and never puts its value in status or events", func() {
			newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
				s.HTTP.Headers = []v1.HTTPHeader{{Name: "Authorization", ValueFrom: &v1.HeaderSource{
					SecretKeyRef: v1.SecretKeySelector{Name: "payments-token", Key: "token"}}}}
			})
			create(newOp(ns, "op", "payments", map[string]any{"amount": 3}))
			Eventually(func() string {
				return condition(get(ns, "op"), v1.ConditionStalled).Reason
			}).Should(Equal(v1.ReasonToolInvalid))
			Expect(effectsIn(ns)).To(BeZero())

			Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments-token"},
				StringData: map[string]string{"token": "Bearer very-secret-value"}})).To(Succeed())
			op := waitFor(ns, "op", v1.StateCommitted, 90*time.Second)
			Expect(describe(op)).NotTo(ContainSubstring("very-secret-value"))
			var list corev1.EventList
			Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			for _, e := range list.Items {
				Expect(e.Message).NotTo(ContainSubstring("very-secret-value"))
			}
		})
	})
})
