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
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/test/sandbox"
)

// kstatusOf computes, with the library Flux and kubectl use, how GitOps
// tools read the saga as the controller left it.
func kstatusOf(s *v1.Saga) status.Status {
	GinkgoHelper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
	Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

var _ = Describe("Saga", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		newDesk(ns)
	})

	It("runs its steps in order, once each, with data flowing from step to step", func() {
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateCommitted)
		Expect(s.Status.StepsDone).To(BeEquivalentTo(3))
		Expect(s.Status.IdempotencyKey).To(Equal("scale"))
		Expect(sagaCondition(s, v1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		Expect(kstatusOf(s)).To(Equal(status.CurrentStatus))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))

		ticket := stepStatus(s, "ticket")
		Expect(ticket.Operation).To(Equal("scale.ticket"))
		Expect(ticket.IdempotencyKey).To(Equal("scale/ticket"))
		Expect(ticket.ExternalObjectID).NotTo(BeEmpty())
		Expect(ticket.ResultDigest).To(HavePrefix("sha256:"))

		By("recording the computed parameters in the step's operation, which its request hash binds")
		var params map[string]any
		Expect(json.Unmarshal(get(ns, "scale.config").Spec.Parameters.Raw, &params)).To(Succeed())
		Expect(params).To(Equal(map[string]any{"replicas": 4.0, "ticket": ticket.ExternalObjectID, "service": "checkout"}))
		Expect(json.Unmarshal(get(ns, "scale.notify").Spec.Parameters.Raw, &params)).To(Succeed())
		Expect(params["text"]).To(Equal("scaled checkout under " + ticket.ExternalObjectID))

		op := get(ns, "scale.config")
		Expect(op.Spec.IdempotencyKey).To(Equal("scale/config"))
		Expect(metav1.IsControlledBy(op, s)).To(BeTrue())

		By("running nothing again when GitOps re-applies the finished saga")
		patch := client.MergeFrom(s.DeepCopy())
		s.Annotations = map[string]string{"argocd.argoproj.io/sync": "again"}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		Consistently(func() []string { return sagaEffects(ns) }, 2*time.Second, 200*time.Millisecond).
			Should(HaveLen(3))
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.config", "scale.notify", "scale.ticket"}))
		Expect(getSaga(ns, "scale").Status.State).To(Equal(v1.StateCommitted))
	})

	It("reads as in progress to kstatus while a step runs", func() {
		// The desk refuses the ticket twice with a 429 and the step backs
		// off: the saga is Started, working, not stalled. Twice, because a
		// backoff has full jitter and one alone may be over before a poll
		// sees it.
		faults(ns, sandbox.FaultRule{Mode: "native", Collection: "tickets", Fault: "429", Count: 2})
		steps := changeSteps()
		steps[0].RetryPolicy.InitialBackoff = &metav1.Duration{Duration: 4 * time.Second}
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		Eventually(func() v1.OperationState {
			op := &v1.SideEffectOperation{}
			_ = k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "scale.ticket"}, op)
			return op.Status.State
		}, 30*time.Second, 50*time.Millisecond).Should(Equal(v1.StateFailedRetryable))
		Eventually(func() string { return getSaga(ns, "scale").Status.Conditions[0].Message }).Should(ContainSubstring("FailedRetryable"))
		s := getSaga(ns, "scale")
		Expect(s.Status.State).To(Equal(v1.StateStarted))
		Expect(sagaCondition(s, v1.ConditionReconciling).Status).To(Equal(metav1.ConditionTrue))
		Expect(kstatusOf(s)).To(Equal(status.InProgressStatus))
		waitSaga(ns, "scale", v1.StateCommitted)
	})

	DescribeTable("compensates the committed steps, last first, when a step fails for good",
		func(failing int, wantState v1.OperationState, wantEffects []string) {
			steps := changeSteps()
			var params map[string]any
			Expect(json.Unmarshal(steps[failing].Parameters.Raw, &params)).To(Succeed())
			params["reject"] = "not today" // the sandbox refuses it for good: 422
			steps[failing].Parameters = raw(params)
			Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

			s := waitSaga(ns, "scale", wantState)
			Expect(s.Status.FailedStep).To(Equal(steps[failing].Name))
			Expect(s.Status.CompensationsTotal).To(BeEquivalentTo(failing))
			Expect(s.Status.CompensationsDone).To(BeEquivalentTo(failing))
			Expect(sagaEffects(ns)).To(Equal(wantEffects))
			for _, done := range steps[:failing] {
				ss := stepStatus(s, done.Name)
				Expect(ss.State).To(Equal(v1.StateCompensated), done.Name)
				Expect(ss.Compensation.State).To(Equal(v1.StateCompensated), done.Name)
				Expect(ss.Compensation.IdempotencyKey).To(Equal("scale/" + done.Name + "/compensate"))
				Expect(get(ns, ss.Compensation.Operation).Status.State).To(Equal(v1.StateCommitted))
			}
			Expect(stepStatus(s, steps[failing].Name).State).To(Equal(v1.StateFailedFinal))
			// Compensated or failed before any effect, the saga did not do
			// what it was applied for: kstatus reads both as failed.
			Expect(kstatusOf(s)).To(Equal(status.FailedStatus))
		},
		Entry("the first: nothing to undo", 0, v1.StateFailedFinal, []string(nil)),
		Entry("the second: the ticket is closed", 1, v1.StateCompensated,
			[]string{"create tickets", "cancel tickets"}),
		Entry("the irreversible last: the config reverted, then the ticket closed", 2, v1.StateCompensated,
			[]string{"create tickets", "create configs", "cancel configs", "cancel tickets"}),
	)

	It("retries a compensation that failed without effect, and reports Compensated only after it", func() {
		faults(ns, sandbox.FaultRule{Mode: "native", Collection: "tickets", Fault: "503", Count: 2,
			KeyPrefix: "Tool:desk/ticket.close/"})
		steps := changeSteps()[:2]
		steps[1].Parameters = raw(map[string]any{"reject": "no"})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateCompensated)
		op := get(ns, stepStatus(s, "ticket").Compensation.Operation)
		Expect(op.Status.Attempts).To(BeEquivalentTo(3), "two 503s, then the close")
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "cancel tickets"}))
	})

	It("stops for a person when a compensation fails for good, and ends only when every step is undone", func() {
		steps := changeSteps()[:2]
		// The close names a ticket the desk does not have: 404, for good.
		steps[0].Compensation.ParametersFrom[0].Expression = "'gone-' + steps.ticket.externalObjectID"
		steps[1].Parameters = raw(map[string]any{"reject": "no"})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateNeedsReview)
		Expect(sagaCondition(s, v1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal("CompensationFailed"))
		Expect(kstatusOf(s)).To(Equal(status.FailedStatus))
		Expect(stepStatus(s, "ticket").State).To(Equal(v1.StateCompensating))
		Expect(stepStatus(s, "ticket").Compensation.State).To(Equal(v1.StateFailedFinal))
		Expect(s.Status.CompensationsDone).To(BeZero())
		Consistently(func() v1.OperationState { return getSaga(ns, "scale").Status.State }, time.Second).
			Should(Equal(v1.StateNeedsReview), "never reported compensated early")

		By("closing the ticket by hand and saying so")
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Resolutions = []v1.SagaResolution{{Step: "ticket", Action: v1.SagaMarkCompensated, By: "alice",
			Reason: "closed it in the desk's UI"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCompensated)
		Expect(stepStatus(s, "ticket").Compensation.Resolution.By).To(Equal("alice"))
		Expect(stepStatus(s, "ticket").Compensation.Resolution.User).NotTo(BeEmpty(), "the writer, as the API server saw them")
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets"}))
	})

	It("runs a failed compensation again, as a new operation, when a person says Retry", func() {
		faults(ns, sandbox.FaultRule{Mode: "native", Collection: "tickets", Fault: "429", Count: 1,
			KeyPrefix: "Tool:desk/ticket.close/"})
		steps := changeSteps()[:2]
		steps[0].Compensation.RetryPolicy.MaxAttempts = 1 // the 429 is its last attempt
		steps[1].Parameters = raw(map[string]any{"reject": "no"})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		s := waitSaga(ns, "scale", v1.StateNeedsReview)

		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Resolutions = []v1.SagaResolution{{Step: "ticket", Action: v1.SagaRetry, By: "alice"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCompensated)
		cs := stepStatus(s, "ticket").Compensation
		Expect(cs.Round).To(BeEquivalentTo(2))
		Expect(cs.Operation).To(Equal("scale.ticket.undo.2"))
		Expect(cs.IdempotencyKey).To(Equal("scale/ticket/compensate/2"))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "cancel tickets"}))
	})

	It("makes each step's effect once for two sagas with one key", func() {
		first, second := newSaga(ns, "scale", changeSteps()), newSaga(ns, "scale-again", changeSteps())
		second.Spec.IdempotencyKey = "scale"
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Expect(k8sClient.Create(ctx, second)).To(Succeed())

		a, b := waitSaga(ns, "scale", v1.StateCommitted), waitSaga(ns, "scale-again", v1.StateCommitted)
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
		for i := range a.Status.Steps {
			Expect(b.Status.Steps[i].ExternalObjectID).To(Equal(a.Status.Steps[i].ExternalObjectID), a.Status.Steps[i].Name)
		}
	})

	It("stops for a person before compensating when a later step's key holds another saga's effect", func() {
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())
		waitSaga(ns, "scale", v1.StateCommitted)

		By("running a saga of the same key whose config the key's record refuses (other parameters)")
		steps := changeSteps()
		steps[1].Parameters = raw(map[string]any{"replicas": 5})
		again := newSaga(ns, "scale-again", steps)
		again.Spec.IdempotencyKey = "scale"
		Expect(k8sClient.Create(ctx, again)).To(Succeed())

		s := waitSaga(ns, "scale-again", v1.StateNeedsReview)
		Expect(s.Status.FailedStep).To(Equal("config"))
		Expect(s.Status.CurrentStep).To(Equal("notify"), "last first: the notice the first saga sent stands")
		Expect(sagaCondition(s, v1.ConditionReady).Reason).To(Equal(saga.ReasonCannotCompensate))
		Expect(sagaCondition(s, v1.ConditionReady).Message).To(ContainSubstring("scale.notify committed effect"))
		Expect(stepStatus(s, "notify").Operation).To(BeEmpty(), "the step did not run in this saga")
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
	})

	It("stops for a person when a step after the pivot fails for good, and runs it again on their Retry", func() {
		faults(ns, sandbox.FaultRule{Mode: "native", Collection: "configs", Fault: sandbox.Fault422, Count: 1})
		steps := changeSteps()
		// The notice is the pivot; the config change after it must be
		// done, not undone.
		steps[1], steps[2] = steps[2], steps[1]
		steps[1].ParametersFrom = steps[1].ParametersFrom[:1]
		steps[2].RetryUntilDone = true
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateNeedsReview)
		Expect(s.Status.CurrentStep).To(Equal("config"))
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal("StepFailed"))
		Expect(s.Status.FailedStep).To(BeEmpty(), "nothing is compensated past an irreversible step")
		Expect(get(ns, "scale.config").Spec.RetryPolicy.MaxAttempts).To(BeEquivalentTo(5), "the step set a retry policy of its own")

		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Resolutions = []v1.SagaResolution{{Step: "config", Action: v1.SagaRetry, By: "alice",
			Reason: "the config store is fixed"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCommitted)
		Expect(stepStatus(s, "config").Round).To(BeEquivalentTo(2))
		Expect(stepStatus(s, "config").Operation).To(Equal("scale.config.2"))
		Expect(get(ns, "scale.config.2").Spec.IdempotencyKey).To(Equal("scale/config/2"))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create notices", "create configs"}))
	})

	It("holds a step until a person approves it, and records who approved it and when", func() {
		steps := changeSteps()
		steps[1].RequiresApproval = true
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		Eventually(func() string {
			return sagaCondition(getSaga(ns, "scale"), v1.ConditionStalled).Reason
		}, 30*time.Second).Should(Equal("WaitingForApproval"))
		s := getSaga(ns, "scale")
		Expect(s.Status.CurrentStep).To(Equal("config"))
		Expect(s.Status.State).To(Equal(v1.StateStarted))
		Expect(kstatusOf(s)).To(Equal(status.FailedStatus))
		Consistently(func() []string { return sagaEffects(ns) }, time.Second).Should(Equal([]string{"create tickets"}))

		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "bob", Reason: "change window open"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCommitted)
		a := stepStatus(s, "config").Approval
		Expect(a.By).To(Equal("bob"))
		Expect(a.User).NotTo(BeEmpty())
		Expect(a.Time.IsZero()).To(BeFalse())
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
	})

	It("does not make again a committed step whose operation a person deleted, and reads its id from the checkpoint", func() {
		steps := changeSteps()
		steps[1].RequiresApproval = true
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		Eventually(func() string {
			return sagaCondition(getSaga(ns, "scale"), v1.ConditionStalled).Reason
		}, 30*time.Second).Should(Equal("WaitingForApproval"))
		ticket := stepStatus(getSaga(ns, "scale"), "ticket").ExternalObjectID
		Expect(ticket).NotTo(BeEmpty())

		// Made again once its record expired, the ticket would be opened
		// a second time; the saga's checkpoint already holds its outcome.
		Expect(k8sClient.Delete(ctx, get(ns, "scale.ticket"))).To(Succeed())
		Eventually(func() []string { return operationsOf(ns, "scale") }, 30*time.Second).Should(BeEmpty())
		Consistently(func() []string { return operationsOf(ns, "scale") }, 2*time.Second, 100*time.Millisecond).
			Should(BeEmpty())

		s := getSaga(ns, "scale")
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "bob"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCommitted)
		Expect(stepStatus(s, "ticket").ExternalObjectID).To(Equal(ticket))
		Expect(get(ns, "scale.config").Spec.Parameters.Raw).To(ContainSubstring(ticket))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
	})

	It("takes its manifest again over a saga stored with kind Tool in its steps, as the same saga: the same operations, "+
		"each effect once", func() {
		// The manifest names no kind, as config/samples/sagas does.
		manifest := changeSteps()
		manifest[1].RequiresApproval = true
		for i := range manifest {
			if c := manifest[i].Compensation; c != nil {
				c.ToolRef = &v1.StepToolReference{Name: "desk"}
			}
		}
		By("storing the saga as an earlier release did: the API server wrote kind Tool into every toolRef")
		earlier := make([]v1.SagaStep, len(manifest))
		for i := range manifest {
			earlier[i] = *manifest[i].DeepCopy()
			earlier[i].ToolRef.Kind = v1.ToolKindTool
			if c := earlier[i].Compensation; c != nil {
				c.ToolRef.Kind = v1.ToolKindTool
			}
		}
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", earlier))).To(Succeed())
		Eventually(func() string {
			return sagaCondition(getSaga(ns, "scale"), v1.ConditionStalled).Reason
		}, 30*time.Second).Should(Equal("WaitingForApproval"))
		stored := getSaga(ns, "scale")
		Expect(stored.Spec.Steps[0].ToolRef).To(Equal(v1.StepToolReference{Kind: v1.ToolKindTool, Name: "desk"}))
		ticket := get(ns, "scale.ticket").Spec

		By("applying the manifest again, as kubectl apply does: a merge patch that replaces the list of steps")
		steps, err := json.Marshal(map[string]any{"spec": map[string]any{"steps": manifest}})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Patch(ctx, &v1.Saga{ObjectMeta: stored.ObjectMeta}, client.RawPatch(types.MergePatchType, steps))).
			To(Succeed())
		// What is stored now is what the manifest says, so the next apply
		// has nothing to patch: kubectl says unchanged.
		again := getSaga(ns, "scale")
		Expect(again.Spec.Steps[0].ToolRef).To(Equal(v1.StepToolReference{Name: "desk"}))
		Expect(*again.Spec.Steps[0].Compensation.ToolRef).To(Equal(v1.StepToolReference{Name: "desk"}))
		Expect(k8sClient.Patch(ctx, &v1.Saga{ObjectMeta: again.ObjectMeta}, client.RawPatch(types.MergePatchType, steps))).
			To(Succeed())
		Expect(again.Generation).To(Equal(stored.Generation+1), "the kind went")
		Expect(getSaga(ns, "scale").Generation).To(Equal(again.Generation), "the same manifest is no change")

		By("refusing, as before, another tool for a step or its compensation")
		for _, p := range []string{
			`{"kind":"ClusterTool","name":"desk"}`, `{"name":"other"}`, `{"kind":"Tool","name":"other"}`,
		} {
			changed := getSaga(ns, "scale")
			Expect(json.Unmarshal([]byte(p), &changed.Spec.Steps[0].ToolRef)).To(Succeed())
			Expect(k8sClient.Update(ctx, changed)).To(MatchError(ContainSubstring("spec.steps are immutable")), p)
			changed = getSaga(ns, "scale")
			Expect(json.Unmarshal([]byte(p), changed.Spec.Steps[1].Compensation.ToolRef)).To(Succeed())
			Expect(k8sClient.Update(ctx, changed)).To(MatchError(ContainSubstring("spec.steps are immutable")), p)
		}

		By("approving: the steps made after name the same tool, with the same names and keys, and nothing runs twice")
		s := getSaga(ns, "scale")
		patch := client.MergeFrom(s.DeepCopy())
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "bob"}}
		Expect(k8sClient.Patch(ctx, s, patch)).To(Succeed())
		s = waitSaga(ns, "scale", v1.StateCommitted)
		Expect(get(ns, "scale.ticket").Spec).To(Equal(ticket))
		desk := v1.ToolReference{Kind: v1.ToolKindTool, Name: "desk"}
		for _, step := range []string{"ticket", "config", "notify"} {
			op := get(ns, "scale."+step)
			Expect(op.Spec.ToolRef).To(Equal(desk), step)
			Expect(op.Spec.IdempotencyKey).To(Equal("scale/"+step), step)
			Expect(stepStatus(s, step).Operation).To(Equal("scale."+step), step)
		}
		Expect(operationsOf(ns, "scale")).To(Equal([]string{"scale.config", "scale.notify", "scale.ticket"}))
		Consistently(func() []string { return sagaEffects(ns) }, 2*time.Second, 200*time.Millisecond).
			Should(Equal([]string{"create tickets", "create configs", "create notices"}))
	})

	It("refuses, before any effect, parameters the operation's schema refuses", func() {
		Expect(k8sClient.Delete(ctx, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"}})).To(Succeed())
		newDesk(ns, func(s *v1.ToolSpec) {
			s.Operations[2].ParametersSchema = raw(map[string]any{
				"type": "object", "properties": map[string]any{"replicas": map[string]any{"maximum": 10}}})
		})
		steps := changeSteps()
		steps[1].ParametersFrom = nil // known before any step runs
		steps[1].Parameters = raw(map[string]any{"replicas": 40})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal("ValidationFailed"))
		Expect(stepStatus(s, "config").Validation.Outcome).To(Equal(v1.ValidationFailed))
		Expect(stepStatus(s, "config").Validation.Message).To(ContainSubstring("replicas"))
		Expect(stepStatus(s, "notify").Validation.Outcome).To(Equal(v1.ValidationDeferred))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
		Expect(sagaEffects(ns)).To(BeEmpty())
	})

	It("refuses, before any effect, a number that has more precision than a double", func() {
		steps := changeSteps()
		steps[1].ParametersFrom = nil // known before any step runs
		steps[1].Parameters = &runtime.RawExtension{Raw: []byte(`{"replicas":4,"account":12345678901234567}`)}
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal("ValidationFailed"))
		Expect(stepStatus(s, "config").Validation.Outcome).To(Equal(v1.ValidationFailed))
		Expect(stepStatus(s, "config").Validation.Message).To(ContainSubstring("more precision than a double"))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
		Expect(sagaEffects(ns)).To(BeEmpty())
	})

	It("waits, at the step's timeout, on a dry run whose token endpoint never answers", func() {
		Expect(k8sClient.Delete(ctx, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"}})).To(Succeed())
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth"},
			StringData: map[string]string{"clientID": "once", "clientSecret": "s3cr3t-client"}})).To(Succeed())
		url := silentTokenEndpoint()
		newDesk(ns, func(s *v1.ToolSpec) {
			s.HTTP.Auth = &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{TokenURL: url, SecretName: "oauth"}}
			s.Timeout = &metav1.Duration{Duration: 2 * time.Second}
			s.Operations[0].Validate = &v1.ValidateRequest{Path: "/native/tickets/validate"}
		})
		steps := changeSteps()
		steps[1].ParametersFrom = nil
		steps[1].Parameters = raw(map[string]any{"replicas": 4})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		Eventually(func() string { return stepStatus(getSaga(ns, "scale"), "ticket").Message }, 30*time.Second,
			200*time.Millisecond).Should(And(ContainSubstring("validation waits"),
			ContainSubstring("auth.oauth2: getting a token"), ContainSubstring("deadline exceeded")))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
	})

	It("asks a dry run that decides nothing again after its wait, however its answer changes", func() {
		// A busy tool answers each dry run with another request id: each
		// message the saga writes differs from the last.
		var calls atomic.Int32
		busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, `{"error":"busy","requestId":"req-%d"}`, calls.Add(1))
		}))
		DeferCleanup(busy.Close)
		Expect(k8sClient.Delete(ctx, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"}})).To(Succeed())
		newDesk(ns, func(s *v1.ToolSpec) {
			s.HTTP.URL = busy.URL
			s.Operations[0].Validate = &v1.ValidateRequest{Path: "/native/tickets/validate"}
		})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())
		Eventually(func() string { return stepStatus(getSaga(ns, "scale"), "ticket").Message }, 30*time.Second,
			100*time.Millisecond).Should(ContainSubstring("validation waits"))

		// Each write of the message woke the next pass at once, which
		// asked the tool again: hundreds of dry runs a second.
		before := calls.Load()
		time.Sleep(3 * time.Second)
		Expect(calls.Load() - before).To(BeNumerically("<=", 1))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
	})

	It("asks the tool's dry run before the first step, and stops before any effect when it refuses", func() {
		Expect(k8sClient.Delete(ctx, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"}})).To(Succeed())
		newDesk(ns, func(s *v1.ToolSpec) {
			for _, i := range []int{0, 2} {
				collection := map[int]string{0: "tickets", 2: "configs"}[i]
				s.Operations[i].Validate = &v1.ValidateRequest{Path: "/native/" + collection + "/validate",
					Message: "response.body.message"}
			}
		})
		steps := changeSteps()
		steps[1].ParametersFrom = nil
		steps[1].Parameters = raw(map[string]any{"replicas": 4, "reject": "the change window is closed"})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateFailedFinal)
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal("ValidationFailed"))
		Expect(stepStatus(s, "ticket").Validation.Outcome).To(Equal(v1.ValidationPassed))
		val := stepStatus(s, "config").Validation
		Expect(val.Outcome).To(Equal(v1.ValidationFailed))
		Expect(val.HTTPStatus).To(BeEquivalentTo(422))
		Expect(val.Message).NotTo(BeEmpty())
		Expect(sagaCondition(s, v1.ConditionReady).Message).To(ContainSubstring(val.Message))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
		Expect(sagaEffects(ns)).To(BeEmpty())
	})

	It("validates a step that uses earlier steps when it starts, and compensates if it does not validate", func() {
		Expect(k8sClient.Delete(ctx, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "desk"}})).To(Succeed())
		newDesk(ns, func(s *v1.ToolSpec) {
			s.Operations[4].ParametersSchema = raw(map[string]any{
				"type": "object", "properties": map[string]any{"text": map[string]any{"maxLength": 5}}})
		})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateCompensated)
		Expect(stepStatus(s, "notify").Validation.Outcome).To(Equal(v1.ValidationFailed))
		Expect(operationsOf(ns, "scale")).NotTo(ContainElement("scale.notify"))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "cancel configs", "cancel tickets"}))
	})

	It("refuses, before any effect, a saga whose expressions do not compile or refer to a later step", func() {
		steps := changeSteps()
		steps[0].ParametersFrom = []v1.ParameterExpression{{Name: "notice", Expression: "steps.notify.externalObjectID"}}
		steps[1].ParametersFrom = append(steps[1].ParametersFrom, v1.ParameterExpression{Name: "x", Expression: "inputs.("})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())

		s := waitSaga(ns, "scale", v1.StateFailedFinal)
		msg := sagaCondition(s, v1.ConditionReady).Message
		Expect(msg).To(ContainSubstring("spec.steps[0].parametersFrom[0] (notice): steps.notify: the first step has no earlier steps"))
		Expect(msg).To(ContainSubstring("spec.steps[1].parametersFrom[2] (x)"))
		Expect(sagaCondition(s, v1.ConditionStalled).Reason).To(Equal(v1.ReasonInvalidSpec))
		Expect(operationsOf(ns, "scale")).To(BeEmpty())
	})
})

var _ = Describe("Saga admission", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	DescribeTable("the API server refuses a saga that cannot be run as written",
		func(mutate func(*v1.Saga), want string) {
			s := newSaga(ns, "bad", changeSteps())
			mutate(s)
			Expect(k8sClient.Create(ctx, s)).To(MatchError(ContainSubstring(want)))
		},
		Entry("a compensable step after an irreversible one", func(s *v1.Saga) {
			s.Spec.Steps[0], s.Spec.Steps[2] = s.Spec.Steps[2], s.Spec.Steps[0]
		}, "every step after the first irreversible step must be retryUntilDone"),
		Entry("two irreversible steps", func(s *v1.Saga) {
			s.Spec.Steps[1].Compensation, s.Spec.Steps[1].Irreversible = nil, true
		}, "every step after the first irreversible step must be retryUntilDone"),
		Entry("a step with neither a compensation nor irreversible", func(s *v1.Saga) {
			s.Spec.Steps[0].Compensation = nil
		}, "a step needs exactly one of compensation and irreversible: true"),
		Entry("a step with both", func(s *v1.Saga) {
			s.Spec.Steps[0].Irreversible = true
		}, "a step needs exactly one of compensation and irreversible: true"),
		Entry("two steps with one name", func(s *v1.Saga) {
			s.Spec.Steps[1].Name = "ticket"
		}, "Duplicate value"),
		Entry("a step name that is not a DNS label", func(s *v1.Saga) {
			s.Spec.Steps[1].Name = "Config.Set"
		}, "spec.steps[1].name"),
		Entry("an approval of a step that needs none", func(s *v1.Saga) {
			s.Spec.Approvals = []v1.SagaApproval{{Step: "ticket", By: "bob"}}
		}, "an approval must name a step that requires approval"),
		Entry("resolutions written before anything went wrong", func(s *v1.Saga) {
			s.Spec.Resolutions = []v1.SagaResolution{{Step: "ticket", Action: v1.SagaMarkCompensated, By: "bob"}}
		}, "a Saga cannot be created with spec.resolutions"),
		Entry("a key with a slash", func(s *v1.Saga) {
			s.Spec.IdempotencyKey = "change/2041"
		}, "spec.idempotencyKey"),
	)

	It("takes a typed client's update that changes nothing, also of a saga written with empty lists", func() {
		b, err := json.Marshal(newSaga(ns, "empty-list", changeSteps()))
		Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		Expect(json.Unmarshal(b, &u.Object)).To(Succeed())
		u.SetAPIVersion(v1.GroupVersion.String())
		u.SetKind("Saga")
		delete(u.Object, "status")
		u.Object["spec"].(map[string]any)["steps"].([]any)[0].(map[string]any)["parametersFrom"] = []any{}
		Expect(k8sClient.Create(ctx, u)).To(Succeed())
		Expect(k8sClient.Update(ctx, getSaga(ns, "empty-list"))).To(Succeed())
	})

	It("records who approved, and keeps it when GitOps re-applies the approval after the saga ended", func() {
		steps := changeSteps()
		steps[1].RequiresApproval = true
		Expect(k8sClient.Create(ctx, newSaga(ns, "gitops", steps))).To(Succeed())
		grant(ns, "alice", "sagas", "get", "patch")
		alice := userClient("alice")
		s := getSaga(ns, "gitops")
		p := client.MergeFrom(s.DeepCopy())
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "alice", User: "someone-else"}}
		Expect(alice.Patch(ctx, s, p)).To(Succeed())
		Expect(getSaga(ns, "gitops").Spec.Approvals[0].User).To(Equal("alice"), "the writer, as the API server saw her")

		s = getSaga(ns, "gitops")
		s.Status.State = v1.StateCommitted
		Expect(k8sClient.Status().Update(ctx, s)).To(Succeed())
		c := rest.CopyConfig(cfg)
		c.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:argocd:argocd-application-controller",
			Groups: []string{"system:masters"}}
		argo, err := client.New(c, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		// What client-side apply sends once the manifest in Git records
		// the approval: the list replaced, without the user.
		patch := []byte(`{"spec":{"approvals":[{"step":"config","by":"alice"}]}}`)
		Expect(argo.Patch(ctx, &v1.Saga{ObjectMeta: s.ObjectMeta}, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
		Expect(getSaga(ns, "gitops").Spec.Approvals[0].User).To(Equal("alice"))
	})

	It("keeps the spec immutable but for approvals and resolutions, and those only while they can apply", func() {
		steps := changeSteps()
		steps[1].RequiresApproval = true
		s := newSaga(ns, "fixed", steps)
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		changed := s.DeepCopy()
		changed.Spec.Steps[0].Operation = "ticket.other"
		Expect(k8sClient.Update(ctx, changed)).To(MatchError(ContainSubstring("spec.steps are immutable")))
		changed = s.DeepCopy()
		changed.Spec.Inputs = raw(map[string]any{"service": "search"})
		Expect(k8sClient.Update(ctx, changed)).To(MatchError(ContainSubstring("spec.inputs are immutable")))
		changed = s.DeepCopy()
		changed.Spec.Resolutions = []v1.SagaResolution{{Step: "ticket", Action: v1.SagaRetry, By: "bob"}}
		Expect(k8sClient.Update(ctx, changed)).To(MatchError(ContainSubstring("only while the saga is in NeedsReview")))

		By("refusing a resolution for a step the saga does not wait on")
		review := getSaga(ns, "fixed")
		review.Status.State, review.Status.CurrentStep = v1.StateNeedsReview, "config"
		Expect(k8sClient.Status().Update(ctx, review)).To(Succeed())
		review = getSaga(ns, "fixed")
		review.Spec.Resolutions = []v1.SagaResolution{{Step: "ticket", Action: v1.SagaMarkCompensated, By: "bob"}}
		Expect(k8sClient.Update(ctx, review)).To(MatchError(ContainSubstring("only for the step the saga waits on")))
		review = getSaga(ns, "fixed")
		review.Status.State, review.Status.CurrentStep = v1.StateStarted, "config"
		Expect(k8sClient.Status().Update(ctx, review)).To(Succeed())

		By("approving while it runs")
		// A typed client writes durations its own way ("5m0s" for the
		// default "5m"): an update that changes nothing is no change.
		Expect(k8sClient.Update(ctx, getSaga(ns, "fixed"))).To(Succeed())
		changed = getSaga(ns, "fixed")
		changed.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "bob"}}
		Expect(k8sClient.Update(ctx, changed)).To(Succeed())

		By("refusing a change of approvals after the saga ended")
		ended := getSaga(ns, "fixed")
		ended.Status.State = v1.StateCommitted
		Expect(k8sClient.Status().Update(ctx, ended)).To(Succeed())
		ended = getSaga(ns, "fixed")
		ended.Spec.Approvals = nil
		Expect(k8sClient.Update(ctx, ended)).To(MatchError(ContainSubstring("spec.approvals cannot change after the saga ended")))
	})
})
