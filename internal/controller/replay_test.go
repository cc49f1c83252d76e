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
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/ingress"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/review"
	"github.com/once-dev/once/pkg/once"
	"github.com/once-dev/once/test/sandbox"
)

// A replay that comes after the operation went (its TTL ran out) is
// answered from the scope's record, as the operation answered it: with the
// person's decision the outcome rests on, and no new object.
var _ = Describe("A replay after the operation went", func() {
	var (
		ns string
		oc *once.Client
	)
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		oc = once.New(k8sClient)
		oc.PollMin, oc.PollMax = 50*time.Millisecond, 200*time.Millisecond
	})
	do := func(req once.Request) (once.Result, error) {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return oc.Do(c, req)
	}
	request := func(key, params string) once.Request {
		return once.Request{Namespace: ns, Tool: v1.ToolReference{Name: "payments"}, Operation: "charge.create",
			Key: key, Parameters: json.RawMessage(params), TTLSecondsAfterFinished: ptr.To[int32](0)}
	}

	It("keeps a person's decision in the record, and pkg/once answers it from there", func() {
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "drop-after-commit", Count: 1})
		newTool(ns, "payments", v1.IdempotencyNone)
		req := request("mail-1", `{"to":"a@example.com"}`)
		_, err := do(req)
		var nr *once.NeedsReviewError
		Expect(errors.As(err, &nr)).To(BeTrue(), "%v", err)
		op := get(ns, nr.Name)

		By("resolving it as kubectl once resolve does: the effect was found")
		Expect(review.ResolveOperation(ctx, k8sClient, op, v1.Resolution{Action: v1.ResolutionMarkCommitted,
			ExternalObjectID: "ch_found", By: "alice", Reason: "found the charge in the ledger"})).To(Succeed())
		Eventually(gone(op), 15*time.Second, 100*time.Millisecond).Should(BeTrue())

		By("keeping the decision in the record, with who, what, why and when")
		rec := record(ns, op.Status.RecordName)
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal("ch_found"))
		d := rec.Spec.Outcome.Resolution
		Expect(d).NotTo(BeNil(), "the record forgot that a person decided")
		Expect(d.Action).To(Equal(v1.ResolutionMarkCommitted))
		Expect(d.By).To(Equal("alice"))
		Expect(d.User).NotTo(BeEmpty(), "the writer, as the API server saw them")
		Expect(d.Reason).To(Equal("found the charge in the ledger"))
		Expect(d.Time.IsZero()).To(BeFalse())

		By("the same request again: the decided outcome, from the record, saying a person decided")
		res, err := do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Found).To(BeTrue())
		Expect(res.State).To(Equal(v1.StateCommitted))
		Expect(res.ExternalObjectID).To(Equal("ch_found"))
		Expect(res.Resolution).NotTo(BeNil())
		Expect(res.Resolution.By).To(Equal("alice"))
		Expect(gone(op)()).To(BeTrue(), "Do made the operation again")
		Expect(effectsOf(v1.IdempotencyNone, ns, "mail-1")).To(Equal(1))

		By("the operation applied again: it adopts the outcome and says who decided, as the API server takes it")
		again := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: op.Name}, Spec: *op.Spec.DeepCopy()}
		again.Spec.Resolution, again.Spec.TTLSecondsAfterFinished = nil, nil
		Expect(k8sClient.Create(ctx, again)).To(Succeed())
		Eventually(func() v1.OperationState { return get(ns, op.Name).Status.State }, 15*time.Second, 100*time.Millisecond).
			Should(Equal(v1.StateCommitted))
		dup := get(ns, op.Name).Status
		Expect(dup.DuplicateOf).To(Equal(op.Name))
		Expect(dup.Resolution).NotTo(BeNil(), "the duplicate does not say that a person decided")
		Expect(dup.Resolution.Action).To(Equal(v1.ResolutionMarkCommitted))
		Expect(dup.Resolution.ExternalObjectID).To(Equal("ch_found"))
		Expect(dup.Resolution.By).To(Equal("alice"))
		Expect(dup.Resolution.Record()).To(Equal(d))
		Expect(effectsOf(v1.IdempotencyNone, ns, "mail-1")).To(Equal(1))
	})

	It("answers pkg/once from the record with no new object, and refuses other parameters as a mismatch", func() {
		newTool(ns, "payments", v1.IdempotencyNone)
		req := request("order-1", `{"amount":5}`)
		first, err := do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.Found).To(BeFalse())
		op := &v1.SideEffectOperation{}
		op.Namespace, op.Name = ns, first.Name
		Eventually(gone(op), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		Expect(effectsOf(v1.IdempotencyNone, ns, "order-1")).To(Equal(1))

		By("the same request: the recorded outcome, found, and no object made")
		again, err := do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Found).To(BeTrue(), "a replay answered as a first call: Do made the operation again")
		Expect(again.Name).To(Equal(first.Name))
		Expect(again.State).To(Equal(v1.StateCommitted))
		Expect(again.ExternalObjectID).To(Equal(first.ExternalObjectID))
		Expect(again.ResultDigest).To(Equal(first.ResultDigest))
		Expect(again.Resolution).To(BeNil(), "no person decided this one")
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(op), op))).To(BeTrue())

		By("the same key with other parameters: a mismatch, and still no object")
		_, err = do(request("order-1", `{"amount":6}`))
		var mismatch *once.MismatchError
		Expect(errors.As(err, &mismatch)).To(BeTrue(), "%v", err)
		Expect(mismatch.Name).To(Equal(first.Name))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(op), op))).To(BeTrue())
		Expect(effectsOf(v1.IdempotencyNone, ns, "order-1")).To(Equal(1))
	})
})

// A message delivered to the ingress again after its operation went is
// answered from the scope's record, as its operation answered it, and makes
// nothing.
var _ = Describe("A message delivered again after its operation went", func() {
	var (
		ns  string
		url string
	)
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		h := &ingress.Handler{Client: k8sClient, Routes: map[string]ingress.Route{
			"orders": {Namespace: ns, ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge.create",
				TTLSecondsAfterFinished: ptr.To[int32](0)},
		}}
		Expect(h.Validate()).To(Succeed())
		srv := httptest.NewServer(http.StripPrefix("/ingress", h))
		DeferCleanup(srv.Close)
		url = srv.URL + "/ingress/orders"
	})
	deliver := func(id, body string) (int, ingress.Answer) {
		GinkgoHelper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set(ingress.HeaderIdempotencyKey, id)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		var a ingress.Answer
		Expect(json.NewDecoder(resp.Body).Decode(&a)).To(Succeed())
		return resp.StatusCode, a
	}
	// deliveredAndGone delivers a message once, accepted, and waits until
	// its operation ended and went (its TTL is 0).
	deliveredAndGone := func(id, body string) (ingress.Answer, *v1.SideEffectOperation) {
		GinkgoHelper()
		newTool(ns, "payments", v1.IdempotencyNone)
		status, first := deliver(id, body)
		Expect(status).To(Equal(http.StatusAccepted), "%+v", first)
		op := &v1.SideEffectOperation{}
		op.Namespace, op.Name = ns, first.Name
		Eventually(gone(op), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		return first, op
	}

	It("answers it from the record, a duplicate with the first outcome, and makes no operation", func() {
		first, op := deliveredAndGone("msg-1", `{"amount":5}`)
		scope := ingressScope(ns, first.Name)
		rec := record(ns, scope)
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))

		By("the same message again: 200, a duplicate with the recorded outcome, no object made")
		status, again := deliver("msg-1", `{"amount":5}`)
		Expect(status).To(Equal(http.StatusOK), "%+v", again)
		Expect(again).To(Equal(ingress.Answer{Name: first.Name, Namespace: ns, MessageID: "msg-1",
			State: v1.StateCommitted, Duplicate: true, ExternalObjectID: rec.Spec.Outcome.ExternalObjectID}))
		Expect(gone(op)()).To(BeTrue(), "the message made its operation again")

		By("the same id with another payload: 409, the first message stands, no object made")
		status, other := deliver("msg-1", `{"amount":6}`)
		Expect(status).To(Equal(http.StatusConflict), "%+v", other)
		Expect(other.Error).To(Equal(ingress.CodeMismatch))
		Expect(other.Name).To(Equal(first.Name))
		Expect(gone(op)()).To(BeTrue(), "the other payload made an operation")
		Expect(effectsIn(ns)).To(Equal(1))
	})

	It("answers the same message whose operation the tool refused as that operation did: 200, FailedFinal", func() {
		first, op := deliveredAndGone("msg-2", `{"amount":7}`)

		By("the record keeping a refusal of the key by the tool, as an operation the tool answered 409 leaves it")
		rec := record(ns, ingressScope(ns, first.Name))
		Expect(rec).NotTo(BeNil())
		rec.Spec.Outcome.State, rec.Spec.Outcome.ErrorClass = v1.StateFailedFinal, v1.ErrorConflict
		rec.Spec.Outcome.ExternalObjectID, rec.Spec.Outcome.Result = "", nil
		rec.Spec.Outcome.ErrorMessage = "the tool answered 409: the key is bound to another request"
		Expect(k8sClient.Update(ctx, rec)).To(Succeed())

		By("the same message again: the outcome it had, not a refusal of its payload")
		status, again := deliver("msg-2", `{"amount":7}`)
		Expect(status).To(Equal(http.StatusOK), "%+v", again)
		Expect(again).To(Equal(ingress.Answer{Name: first.Name, Namespace: ns, MessageID: "msg-2",
			State: v1.StateFailedFinal, Duplicate: true}))
		Expect(gone(op)()).To(BeTrue(), "the message made its operation again")
	})
})

// ingressScope is the name of the record of the ingress's operation name:
// its key is its name.
func ingressScope(ns, name string) string {
	return protocol.Scope{Namespace: ns, Tool: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
		Operation: "charge.create", Key: name}.RecordName()
}

// A saga's steps are checkpointed in its status: a committed step whose
// operation went is still compensated, from what the checkpoint keeps.
var _ = Describe("A saga whose committed step's operation went", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		newDesk(ns)
	})

	It("compensates the step from its checkpoint and reports Compensated", func() {
		steps := changeSteps()[:2]
		steps[1].RequiresApproval = true
		steps[1].Parameters = raw(map[string]any{"reject": "no"}) // refused for good: 422
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		Eventually(func() string {
			return sagaCondition(getSaga(ns, "scale"), v1.ConditionStalled).Reason
		}, 30*time.Second).Should(Equal("WaitingForApproval"))
		checkpoint := stepStatus(getSaga(ns, "scale"), "ticket")
		Expect(checkpoint.State).To(Equal(v1.StateCommitted))
		Expect(checkpoint.ExternalObjectID).NotTo(BeEmpty())

		By("deleting the committed step's operation: its outcome goes to its record")
		ticket := get(ns, checkpoint.Operation)
		Expect(k8sClient.Delete(ctx, ticket)).To(Succeed())
		Eventually(func() bool {
			fresh := &v1.SideEffectOperation{}
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ticket), fresh)
			return apierrors.IsNotFound(err) || (err == nil && fresh.UID != ticket.UID)
		}, 20*time.Second, 50*time.Millisecond).Should(BeTrue())

		By("approving the step that fails: the ticket is closed once, from the checkpoint")
		s := getSaga(ns, "scale")
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "bob"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCompensated)
		ss := stepStatus(s, "ticket")
		Expect(ss.State).To(Equal(v1.StateCompensated))
		Expect(ss.ExternalObjectID).To(Equal(checkpoint.ExternalObjectID))
		Expect(ss.Compensation.State).To(Equal(v1.StateCompensated))
		Expect(stepStatus(s, "config").State).To(Equal(v1.StateFailedFinal))
		Expect(s.Status.CompensationsDone).To(BeEquivalentTo(1))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "cancel tickets"}))
	})
})
