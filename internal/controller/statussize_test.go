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
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// demoTool is config/samples' payments Tool, on the sandbox: the tool the
// demo commits charge-order-1001 with.
func demoTool(ns string) *v1.Tool {
	GinkgoHelper()
	t := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"}}
	t.Spec.HTTP = v1.HTTPBackend{URL: toolURL}
	t.Spec.Idempotency = v1.ToolIdempotency{Mode: v1.IdempotencyNative, Header: "Idempotency-Key",
		ReplayWindow: &metav1.Duration{Duration: 24 * time.Hour},
		Replayed:     "response.headers['idempotent-replayed'] == 'true'"}
	t.Spec.Timeout = &metav1.Duration{Duration: 10 * time.Second}
	t.Spec.Operations = []v1.ToolOperation{{Name: "charge.create", Method: "POST", Path: "/native/charges",
		Response: v1.ResponseMapping{ExternalObjectID: "response.body.id",
			Result: "{'id': response.body.id, 'amount': response.body.parameters.amount, " +
				"'currency': response.body.parameters.currency}"}}}
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	return t
}

// demoOperation is config/samples' charge-order-1001.
func demoOperation(ns string) *v1.SideEffectOperation {
	return &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "charge-order-1001"},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:        v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
			Operation:      "charge.create",
			IdempotencyKey: "order-1001",
			Parameters:     &runtime.RawExtension{Raw: []byte(`{"amount":4200,"currency":"eur","customer":"cus_42"}`)},
			Retention:      &metav1.Duration{Duration: 24 * time.Hour},
		},
	}
}

// statusBytes is the status's JSON size, and a line per field, largest
// first, for the test's output.
func statusBytes(st v1.SideEffectOperationStatus) (int, string) {
	GinkgoHelper()
	b, err := json.Marshal(st)
	Expect(err).NotTo(HaveOccurred())
	var fields map[string]json.RawMessage
	Expect(json.Unmarshal(b, &fields)).To(Succeed())
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return len(fields[b]) - len(fields[a]) })
	var lines strings.Builder
	for _, k := range names {
		fmt.Fprintf(&lines, "  %-20s %5d  %s\n", k, len(k)+3+len(fields[k]), fields[k])
	}
	return len(b), lines.String()
}

// managedBytes is the JSON size of each manager's managed fields entry.
func managedBytes(op *v1.SideEffectOperation) string {
	GinkgoHelper()
	var s strings.Builder
	for _, m := range op.ManagedFields {
		b, err := json.Marshal(m)
		Expect(err).NotTo(HaveOccurred())
		fmt.Fprintf(&s, "  %s %s %s: %d bytes: %s\n", m.Manager, m.Operation, m.Subresource, len(b), b)
	}
	return s.String()
}

var _ = Describe("The happy path's status", func() {
	It("is at most 1 KiB for the demo's charge, committed by its first attempt", func() {
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		demoTool(ns)
		create(demoOperation(ns))
		op := waitFor(ns, "charge-order-1001", v1.StateCommitted)
		Expect(op.Status.Result).NotTo(BeNil(), "the demo's result is counted")
		size, fields := statusBytes(op.Status)
		GinkgoWriter.Printf("status: %d bytes\n%s", size, fields)
		GinkgoWriter.Printf("managed fields:\n%s", managedBytes(op))
		AddReportEntry("status bytes", size)
		Expect(size).To(BeNumerically("<=", 1024), fields)
	})
})

// An earlier release wrote four conditions with one message each, the
// call that committed a first attempt as an observation, every transition's
// message in the history, and the attempt's mode and promise on ended
// operations. A manager of this release reads such statuses as they are.
var _ = Describe("A status written by the previous release", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
	})

	// oldConditions are the four conditions as the previous release set
	// them: every one with the message.
	oldConditions := func(at metav1.Time, ready, succeeded, reconciling, stalled metav1.ConditionStatus,
		reason, msg string) []metav1.Condition {
		var cs []metav1.Condition
		for _, c := range []struct {
			typ    string
			status metav1.ConditionStatus
		}{{v1.ConditionReady, ready}, {v1.ConditionSucceeded, succeeded},
			{v1.ConditionReconciling, reconciling}, {v1.ConditionStalled, stalled}} {
			cs = append(cs, metav1.Condition{Type: c.typ, Status: c.status, ObservedGeneration: 1,
				LastTransitionTime: at, Reason: reason, Message: msg})
		}
		return cs
	}
	// writeOld creates an operation on the tool, keyed by its name, and
	// writes st as its status, as the previous release's manager did.
	writeOld := func(name string, st v1.SideEffectOperationStatus) *v1.SideEffectOperation {
		GinkgoHelper()
		op := create(newOp(ns, name, "payments", map[string]any{"amount": 4200, "currency": "eur"}))
		scope := protocol.OperationScope(op)
		st.IdempotencyKey, st.ToolIdempotencyKey, st.RecordName = scope.Key, scope.ToolKey(), scope.RecordName()
		hash, _, err := protocol.RequestHash(scope.Tool, op.Spec.Operation, op.Spec.Parameters.Raw)
		Expect(err).NotTo(HaveOccurred())
		st.RequestHash = hash
		op.Status = st
		Expect(k8sClient.Status().Update(ctx, op)).To(Succeed())
		return get(ns, name)
	}

	It("keeps a committed operation's outcome, and a new manager reconciles an unknown one to its commit", func() {
		tool := newTool(ns, "payments", v1.IdempotencyNative)
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tool), tool)).To(Succeed())
		promise := protocol.PromiseOf(&tool.Spec, "charge.create")
		t0 := metav1.NewTime(time.Now().Add(-time.Minute).Truncate(time.Second))
		t1 := metav1.NewTime(t0.Add(time.Second))
		expiry := metav1.NewTime(t1.Add(24 * time.Hour))

		By("writing a committed operation as the previous release did")
		body := `200 OK: {"id":"ch_old","key":"` + ns + `/Tool:payments/charge.create/old-commit","parameters":{"amount":4200}}`
		committed := writeOld("old-commit", v1.SideEffectOperationStatus{
			State: v1.StateCommitted, Attempts: 1, IdempotencyMode: v1.IdempotencyNative, Promise: promise,
			ExternalObjectID: "ch_old", Result: &runtime.RawExtension{Raw: []byte(`{"id":"ch_old","amount":4200}`)},
			ResultDigest: "sha256:" + strings.Repeat("ab", 32),
			Observations: []v1.Observation{{Time: t1, Kind: v1.ObservationCall, Attempt: 1, Holder: "manager-old",
				Outcome: string(v1.OutcomeSucceeded), Request: "POST /native/charges", HTTPStatus: 200,
				ExternalObjectID: "ch_old", Message: body}},
			History: []v1.Transition{
				{Time: t0, State: v1.StateStarted, Reason: v1.ReasonExecuting, Message: "Attempt 1 claimed", Attempt: 1},
				{Time: t1, State: v1.StateCommitted, Reason: v1.ReasonCommitted, Message: "Committed as ch_old", Attempt: 1}},
			StartedTime: &t0, CommittedTime: &t1, CompletionTime: &t1, ExpiryTime: &expiry, ObservedGeneration: 1,
			Conditions: oldConditions(t1, metav1.ConditionTrue, metav1.ConditionTrue, metav1.ConditionFalse,
				metav1.ConditionFalse, v1.ReasonCommitted, "Committed as ch_old"),
		})

		By("writing an operation whose first attempt's answer was lost, as the previous release did")
		lost := "Attempt 1 has an unknown outcome: no answer after the request was sent: connection reset"
		writeOld("old-unknown", v1.SideEffectOperationStatus{
			State: v1.StateUnknown, Attempts: 1, IdempotencyMode: v1.IdempotencyNative, Promise: promise,
			ErrorClass: v1.ErrorOutcomeUnknown, ErrorMessage: lost,
			Observations: []v1.Observation{{Time: t1, Kind: v1.ObservationCall, Attempt: 1, Holder: "manager-old",
				Outcome: string(v1.OutcomeUnknown), Request: "POST /native/charges",
				Message: "no answer after the request was sent: connection reset"}},
			History: []v1.Transition{
				{Time: t0, State: v1.StateStarted, Reason: v1.ReasonExecuting, Message: "Attempt 1 claimed", Attempt: 1},
				{Time: t1, State: v1.StateUnknown, Reason: v1.ReasonOutcomeUnknown, Message: lost, Attempt: 1}},
			StartedTime: &t0, UnknownTime: &t1, ObservedGeneration: 1,
			Conditions: oldConditions(t1, metav1.ConditionFalse, metav1.ConditionUnknown, metav1.ConditionTrue,
				metav1.ConditionFalse, v1.ReasonOutcomeUnknown, lost),
		})

		By("starting a manager of this release")
		DeferCleanup(startManager(managerOptions{}))

		By("the unknown outcome is reconciled by a re-send with the same key, and commits once")
		op := waitFor(ns, "old-unknown", v1.StateCommitted)
		Expect(effectsOf(v1.IdempotencyNative, ns, "old-unknown")).To(Equal(1))
		Expect(observationKinds(op)).To(Equal([]v1.ObservationKind{v1.ObservationCall, v1.ObservationResend}))
		Expect(op.Status.History[1].Message).To(Equal(lost), "the old story is kept")
		Expect(op.Status.ErrorClass).To(BeEmpty())
		Expect(op.Status.Promise).To(BeEmpty())
		Expect(meta.FindStatusCondition(op.Status.Conditions, v1.ConditionReconciling)).To(BeNil())
		Expect(meta.FindStatusCondition(op.Status.Conditions, v1.ConditionStalled)).To(BeNil())
		Expect(condition(op, v1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

		By("the committed one stays as it was, terminal, with its outcome")
		Consistently(func() v1.SideEffectOperationStatus { return get(ns, "old-commit").Status },
			2*time.Second, 200*time.Millisecond).Should(Equal(committed.Status))
		Expect(effectsOf(v1.IdempotencyNative, ns, "old-commit")).To(BeZero())

		By("deleting it keeps its outcome in its scope's record")
		remove(committed)
		rec := record(ns, committed.Status.RecordName)
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		Expect(rec.Spec.Outcome.State).To(Equal(v1.StateCommitted))
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal("ch_old"))
		Expect(rec.Spec.Outcome.Result.Raw).To(MatchJSON(`{"id":"ch_old","amount":4200}`))
	})
})
