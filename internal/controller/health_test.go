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
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/test/argocd"
	"github.com/once-dev/once/test/sandbox"
)

// How GitOps tools read what the controller writes: for every state an
// operation, a saga and a tool reach here, the object as the API server
// returns it, read by the kstatus library (what Flux and kubectl wait
// use) and by the Argo CD health checks of config/argocd (run in a Lua
// interpreter as Argo CD runs them).
var _ = Describe("GitOps health", Ordered, func() {
	var rows []healthRow
	AfterAll(func() {
		var b strings.Builder
		w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		_, _ = fmt.Fprintln(w, "KIND\tCASE\tSTATE\tREASON\tKSTATUS\tARGO CD\tARGO CD MESSAGE")
		for _, r := range rows {
			msg, _, _ := strings.Cut(r.message, "\n")
			if len(msg) > 100 {
				msg = msg[:97] + "..."
			}
			_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.kind, r.label, r.state, r.reason, r.kstatus, r.health, msg)
		}
		_ = w.Flush()
		AddReportEntry("How kstatus and Argo CD read each state", b.String())
	})
	// expect reads an object from the API server and checks how both read
	// it.
	expect := func(kind string, key client.ObjectKey, label string, wantKstatus status.Status, wantHealth string) {
		GinkgoHelper()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1.GroupVersion.WithKind(kind))
		Expect(k8sClient.Get(ctx, key, u)).To(Succeed())
		ks, err := status.Compute(u)
		Expect(err).NotTo(HaveOccurred())
		script, err := argocd.LoadScript(filepath.Join("..", ".."), kind)
		Expect(err).NotTo(HaveOccurred())
		h, err := argocd.Run(script, u.Object)
		Expect(err).NotTo(HaveOccurred())
		r := healthRow{kind: kind, label: label, kstatus: string(ks.Status), health: h.Status, message: h.Message}
		r.state, _, _ = unstructured.NestedString(u.Object, "status", "state")
		r.reason = reasonOf(u)
		rows = append(rows, r)
		Expect(ks.Status).To(Equal(wantKstatus), "kstatus of %s %s: %s", kind, label, ks.Message)
		Expect(h.Status).To(Equal(wantHealth), "Argo CD health of %s %s: %s", kind, label, h.Message)
		Expect(h.Message).NotTo(BeEmpty())
	}

	It("reads an operation whose call is in flight, and a duplicate waiting for it, as in progress", func() {
		ns := newNamespace()
		// The call's pass stops after its claim and waits: the operation
		// stays Started. A long claim keeps it so while the test reads.
		Expect(failpoint.Enable(failpoint.ExecuteAfterClaim, `1*return("abandon")`)).To(Succeed())
		DeferCleanup(func() { _ = failpoint.Disable(failpoint.ExecuteAfterClaim) })
		DeferCleanup(startManager(managerOptions{watch: []string{ns}, maxClaim: time.Minute}))
		newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: time.Minute}
		})
		first := newOp(ns, "first", "payments", map[string]any{"amount": 1})
		first.Spec.IdempotencyKey = "order-1"
		create(first)
		waitFor(ns, "first", v1.StateStarted)
		expect("SideEffectOperation", client.ObjectKeyFromObject(first), "call in flight", status.InProgressStatus, argocd.Progressing)

		second := newOp(ns, "second", "payments", map[string]any{"amount": 1})
		second.Spec.IdempotencyKey = "order-1"
		create(second)
		Eventually(func() string { return condition(get(ns, "second"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonWaitingForOriginal))
		expect("SideEffectOperation", client.ObjectKeyFromObject(second), "duplicate waiting", status.InProgressStatus, argocd.Progressing)
		Expect(get(ns, "first").Status.State).To(Equal(v1.StateStarted), "still in flight while read")
	})

	It("reads an operation asking the tool about an unknown outcome as in progress", func() {
		ns := newNamespace()
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		Expect(failpoint.Enable(failpoint.ReconcileAfterClaim, `1*return("abandon")`)).To(Succeed())
		DeferCleanup(func() { _ = failpoint.Disable(failpoint.ReconcileAfterClaim) })
		DeferCleanup(startManager(managerOptions{watch: []string{ns}, maxClaim: time.Minute}))
		newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: time.Minute}
		})
		op := create(newOp(ns, "op", "payments", map[string]any{"amount": 1}))
		Eventually(state(ns, "op"), 10*time.Second, 50*time.Millisecond).Should(Equal(v1.StateReconciling))
		expect("SideEffectOperation", client.ObjectKeyFromObject(op), "re-send in flight", status.InProgressStatus, argocd.Progressing)
	})

	It("reads an operation held by a suspend as in progress, and Argo CD as Suspended", func() {
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{watch: []string{ns}}))
		newTool(ns, "payments", v1.IdempotencyNative, func(s *v1.ToolSpec) { s.Suspend = true })
		op := create(newOp(ns, "held", "payments", map[string]any{"amount": 1}))
		Eventually(func() string { return condition(get(ns, "held"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonSuspended))
		expect("SideEffectOperation", client.ObjectKeyFromObject(op), "tool suspended", status.InProgressStatus, argocd.Suspended)
	})

	It("reads every other state of an operation, and of a tool, as Flux and Argo CD must", func() {
		ns := newNamespace()
		stop := stopOnce(startManager(managerOptions{}))
		DeferCleanup(stop)
		// Each rule fails one operation's first request: the key the tool
		// receives starts with the namespace, the tool and the operation.
		faults(ns,
			sandbox.FaultRule{Fault: "429=300", Count: 1, KeyPrefix: "Tool:payments/charge.create/backing-off"},
			sandbox.FaultRule{Fault: sandbox.FaultDropAfterCommit, Count: 1, KeyPrefix: "Tool:tickets/"},
			sandbox.FaultRule{Fault: sandbox.FaultDropAfterCommit, Count: 1, KeyPrefix: "Tool:mailer/"},
		)
		newTool(ns, "payments", v1.IdempotencyNative)
		newTool(ns, "tickets", v1.IdempotencyLookup, func(s *v1.ToolSpec) {
			// The lookup may prove absence only five minutes after the
			// request could have left: the outcome stays unknown meanwhile.
			s.Idempotency.LookupDelay = &metav1.Duration{Duration: 5 * time.Minute}
		})
		newTool(ns, "mailer", v1.IdempotencyNone)
		newTool(ns, "broken", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.Operations[0].Response.ExternalObjectID = "response.body.id +"
		})
		valid, broken := newClusterTool(ns+"-valid", ""), newClusterTool(ns+"-broken", "response.body.id +")

		ops := map[string]*v1.SideEffectOperation{
			"committed":   newOp(ns, "committed", "payments", map[string]any{"amount": 1}),
			"rejected":    newOp(ns, "rejected", "payments", map[string]any{"reject": "card declined"}),
			"backing-off": newOp(ns, "backing-off", "payments", map[string]any{"amount": 2}),
			"unknown":     newOp(ns, "unknown", "tickets", map[string]any{"title": "disk full"}),
			"review":      newOp(ns, "review", "mailer", map[string]any{"to": "a@example.com"}),
			"orphan":      newOp(ns, "orphan", "missing", map[string]any{"amount": 3}),
		}
		for _, op := range ops {
			create(op)
		}
		key := func(name string) client.ObjectKey { return client.ObjectKeyFromObject(ops[name]) }

		waitFor(ns, "committed", v1.StateCommitted)
		expect("SideEffectOperation", key("committed"), "committed", status.CurrentStatus, argocd.Healthy)
		waitFor(ns, "rejected", v1.StateFailedFinal)
		expect("SideEffectOperation", key("rejected"), "rejected for good", status.FailedStatus, argocd.Degraded)
		waitFor(ns, "backing-off", v1.StateFailedRetryable)
		expect("SideEffectOperation", key("backing-off"), "429, backing off", status.InProgressStatus, argocd.Progressing)
		waitFor(ns, "unknown", v1.StateUnknown)
		expect("SideEffectOperation", key("unknown"), "outcome unknown", status.InProgressStatus, argocd.Progressing)
		waitFor(ns, "review", v1.StateNeedsReview)
		expect("SideEffectOperation", key("review"), "needs a person", status.FailedStatus, argocd.Degraded)
		Eventually(func() string { return condition(get(ns, "orphan"), v1.ConditionStalled).Reason }).
			Should(Equal(v1.ReasonToolNotFound))
		expect("SideEffectOperation", key("orphan"), "tool missing", status.FailedStatus, argocd.Degraded)
		Expect(get(ns, "orphan").Status.State).To(Equal(v1.StatePlanned))

		Eventually(func() string { return toolReady(&v1.Tool{}, client.ObjectKey{Namespace: ns, Name: "payments"}) }).
			Should(Equal("True"))
		expect("Tool", client.ObjectKey{Namespace: ns, Name: "payments"}, "valid", status.CurrentStatus, argocd.Healthy)
		Eventually(func() string { return toolReady(&v1.Tool{}, client.ObjectKey{Namespace: ns, Name: "broken"}) }).
			Should(Equal("False"))
		expect("Tool", client.ObjectKey{Namespace: ns, Name: "broken"}, "invalid", status.FailedStatus, argocd.Degraded)
		Eventually(func() string { return toolReady(&v1.ClusterTool{}, client.ObjectKeyFromObject(valid)) }).
			Should(Equal("True"))
		expect("ClusterTool", client.ObjectKeyFromObject(valid), "valid", status.CurrentStatus, argocd.Healthy)
		Eventually(func() string { return toolReady(&v1.ClusterTool{}, client.ObjectKeyFromObject(broken)) }).
			Should(Equal("False"))
		expect("ClusterTool", client.ObjectKeyFromObject(broken), "invalid", status.FailedStatus, argocd.Degraded)

		By("resolving the review while no manager runs: the status describes the generation before")
		stop()
		resolve(ns, "review", v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "msg_1", By: "alice"})
		stale := get(ns, "review")
		Expect(stale.Status.ObservedGeneration).To(BeNumerically("<", stale.Generation))
		expect("SideEffectOperation", key("review"), "resolved, not yet seen", status.InProgressStatus, argocd.Progressing)
	})

	It("warns in a valid Tool's Ready about a lookup that cannot prove what it claims", func() {
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		newTool(ns, "status-alone", v1.IdempotencyLookup, func(s *v1.ToolSpec) {
			s.Operations[0].Lookup.Found = "response.status == 200"
		})
		newTool(ns, "first-page", v1.IdempotencyLookup, func(s *v1.ToolSpec) {
			s.Operations[0].Lookup.Absent = "response.status == 200 && !response.body.items.exists(i, i.key == key)"
		})
		newTool(ns, "sound", v1.IdempotencyLookup)
		ready := func(name string) metav1.Condition {
			t := &v1.Tool{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)).To(Succeed())
			return conditionIn(t.Status.Conditions, v1.ConditionReady)
		}
		Eventually(func() metav1.Condition { return ready("status-alone") }).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("lookup.found reads the status alone"))))
		Eventually(func() metav1.Condition { return ready("first-page") }).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", ContainSubstring("nothing that says it is complete"))))
		Eventually(func() metav1.Condition { return ready("sound") }).Should(And(
			HaveField("Status", metav1.ConditionTrue), HaveField("Message", Not(ContainSubstring("warning")))))
	})

	It("reads every state of a saga as Flux and Argo CD must", func() {
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		newDesk(ns)
		faults(ns,
			sandbox.FaultRule{Fault: "429=300", Count: 1, KeyPrefix: "Tool:desk/ticket.open/backing-off/"},
			sandbox.FaultRule{Fault: "429=300", Count: 1, KeyPrefix: "Tool:desk/ticket.close/compensating/"},
		)
		reject := func(s v1.SagaStep) v1.SagaStep {
			var params map[string]any
			Expect(json.Unmarshal(s.Parameters.Raw, &params)).To(Succeed())
			params["reject"] = "not today" // the desk refuses it for good: 422
			s.Parameters = raw(params)
			return s
		}
		approveFirst, approveSecond := changeSteps(), changeSteps()
		approveFirst[0].RequiresApproval = true
		approveSecond[1].RequiresApproval = true
		failFirst := changeSteps()
		failFirst[0] = reject(failFirst[0])
		failSecond := changeSteps()[:2]
		failSecond[1] = reject(failSecond[1])
		undoFails := changeSteps()[:2]
		undoFails[1] = reject(undoFails[1])
		// The close names a ticket the desk does not have: 404, for good.
		undoFails[0].Compensation.ParametersFrom[0].Expression = "'gone-' + steps.ticket.externalObjectID"
		sagas := map[string][]v1.SagaStep{
			"committed":     changeSteps(),
			"backing-off":   changeSteps(),
			"approve-first": approveFirst, "approve-second": approveSecond,
			"compensating": failSecond, "compensated": failSecond,
			"failed": failFirst, "review": undoFails,
		}
		sagas["suspended"], sagas["cancelled"] = changeSteps(), changeSteps()
		for name, steps := range sagas {
			s := newSaga(ns, name, steps)
			s.Spec.Suspend, s.Spec.Cancel = name == "suspended", name == "cancelled"
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
		}
		key := func(name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
		reason := func(name string) func() string {
			return func() string { return sagaCondition(getSaga(ns, name), v1.ConditionStalled).Reason }
		}

		waitSaga(ns, "committed", v1.StateCommitted)
		expect("Saga", key("committed"), "every step committed", status.CurrentStatus, argocd.Healthy)
		Eventually(func() v1.OperationState { return get(ns, "backing-off.ticket").Status.State }).
			Should(Equal(v1.StateFailedRetryable))
		Eventually(func() string { return sagaCondition(getSaga(ns, "backing-off"), v1.ConditionReady).Message }).
			Should(ContainSubstring("FailedRetryable"))
		expect("Saga", key("backing-off"), "step backing off", status.InProgressStatus, argocd.Progressing)
		Expect(getSaga(ns, "backing-off").Status.State).To(Equal(v1.StateStarted))
		Eventually(reason("approve-first")).Should(Equal("WaitingForApproval"))
		expect("Saga", key("approve-first"), "first step awaits approval", status.FailedStatus, argocd.Suspended)
		Eventually(reason("approve-second")).Should(Equal("WaitingForApproval"))
		expect("Saga", key("approve-second"), "second step awaits approval", status.FailedStatus, argocd.Suspended)
		Expect(getSaga(ns, "approve-second").Status.State).To(Equal(v1.StateStarted))
		waitSaga(ns, "compensating", v1.StateCompensating)
		Eventually(func() v1.OperationState { return get(ns, "compensating.ticket.undo").Status.State }).
			Should(Equal(v1.StateFailedRetryable))
		expect("Saga", key("compensating"), "undo backing off", status.InProgressStatus, argocd.Progressing)
		waitSaga(ns, "compensated", v1.StateCompensated)
		expect("Saga", key("compensated"), "every committed step undone", status.FailedStatus, argocd.Degraded)
		waitSaga(ns, "failed", v1.StateFailedFinal)
		expect("Saga", key("failed"), "first step refused", status.FailedStatus, argocd.Degraded)
		waitSaga(ns, "review", v1.StateNeedsReview)
		expect("Saga", key("review"), "undo failed for good", status.FailedStatus, argocd.Degraded)
		Eventually(func() string { return sagaCondition(getSaga(ns, "suspended"), v1.ConditionReady).Reason }).
			Should(Equal(v1.ReasonSuspended))
		expect("Saga", key("suspended"), "suspended", status.InProgressStatus, argocd.Suspended)
		waitSaga(ns, "cancelled", v1.StateFailedFinal)
		expect("Saga", key("cancelled"), "cancelled before any step", status.FailedStatus, argocd.Degraded)
	})
})

// healthRow is one line of the table the health spec prints.
type healthRow struct {
	kind, label, state, reason, kstatus, health, message string
}

// reasonOf is the reason of an object's Stalled condition when it is
// True, else of its Ready condition.
func reasonOf(u *unstructured.Unstructured) string {
	raw, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var conds []metav1.Condition
	for _, c := range raw {
		m, _ := c.(map[string]any)
		typ, _ := m["type"].(string)
		st, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		conds = append(conds, metav1.Condition{Type: typ, Status: metav1.ConditionStatus(st), Reason: reason})
	}
	if c := meta.FindStatusCondition(conds, v1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c.Reason
	}
	return conditionIn(conds, v1.ConditionReady).Reason
}

// newClusterTool creates a ClusterTool for the sandbox's native charges;
// an externalObjectID expression that does not compile makes it invalid.
func newClusterTool(name, externalObjectID string) *v1.ClusterTool {
	GinkgoHelper()
	if externalObjectID == "" {
		externalObjectID = "response.body.id"
	}
	t := &v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	t.Spec.HTTP = v1.HTTPBackend{URL: toolURL}
	t.Spec.Idempotency = v1.ToolIdempotency{Mode: v1.IdempotencyNative}
	t.Spec.Operations = []v1.ToolOperation{{Name: "charge.create", Path: "/native/charges",
		Response: v1.ResponseMapping{ExternalObjectID: externalObjectID}}}
	t.Spec.NamespaceSelector = &metav1.LabelSelector{}
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, t))).To(Succeed()) })
	return t
}

// toolReady is the status of a Tool's or ClusterTool's Ready condition.
func toolReady(t v1.GenericTool, key client.ObjectKey) string {
	GinkgoHelper()
	Expect(k8sClient.Get(ctx, key, t)).To(Succeed())
	return string(conditionIn(t.GetStatus().Conditions, v1.ConditionReady).Status)
}

// stopOnce lets a test stop a manager early and DeferCleanup stop it
// again harmlessly.
func stopOnce(stop func()) func() {
	var once sync.Once
	return func() { once.Do(stop) }
}
