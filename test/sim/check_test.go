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

package sim

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// TestChecksFire: each check at a write, at a request, or after an
// object is gone fires on a world that breaks its invariant, and only
// there: a check that cannot fail would let every hunt pass.
func TestChecksFire(t *testing.T) {
	cases := map[string]struct {
		inv    string
		breaks func(t *testing.T, w *World)
	}{
		"a call whose holder never stored a claim": {InvClaimFirst, func(t *testing.T, w *World) {
			op := applied(t, w, "pay-1")
			pr := &passRun{m: w.managers[0], incarnation: 1, uid: op.UID,
				req: request{ctrlOperation, types.NamespacedName{Namespace: Namespace, Name: op.Name}}}
			w.checkClaimed(pr, "POST pay/v1/charges")
		}},
		"an effect of a key made with other parameters": {InvParameters, func(t *testing.T, w *World) {
			a := w.recordEffect(w.tools[toolDesk], "/v1/charges", "ticket-9", "desk/ticket-9")
			a.Params = `{"amount":2}`
			b := w.recordEffect(w.tools[toolDesk], "/v1/charges", "ticket-9", "desk/ticket-9")
			b.Params = `{"amount":3}`
			w.checkParameters(b)
		}},
		"a commit with an effect of other parameters": {InvParameters, func(t *testing.T, w *World) {
			e := w.recordEffect(w.tools[toolPay], "/v1/charges", "order-7", "pay/order-7")
			e.Params = `{"amount":1}`
			commit(t, w, applied(t, w, "pay-2"), e.ID)
			w.check()
		}},
		"two commits of one request naming two effects": {InvFirstResult, func(t *testing.T, w *World) {
			for _, name := range []string{"pay-2", "pay-3"} {
				op := applied(t, w, name)
				e := w.recordEffect(w.tools[toolPay], "/v1/charges", "order-7", "pay/order-7")
				e.Params = canonicalParams(op)
				commit(t, w, op, e.ID)
			}
			w.check()
		}},
		"a terminal outcome written over": {InvNoStaleWrite, func(t *testing.T, w *World) {
			op := commit(t, w, applied(t, w, "pay-1"), "pay_1")
			op.Status.State = v1.StateStarted
			must(w.server.Update(op, true))
		}},
		"a record that answers with no effect": {InvCommittedHasEffect, func(t *testing.T, w *World) {
			w.refs[scopeOf(toolPay, opCharge, "order-7")] = "pay/order-7"
			rec := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "scope-1"},
				Spec: v1.IdempotencyRecordSpec{ToolRef: v1.ToolReference{Name: toolPay}, Operation: opCharge,
					IdempotencyKey: "order-7", Outcome: &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "pay_9",
						ExpiryTime: metav1.NewTime(w.clock.Now().Add(time.Hour))}}}
			must(w.server.Create(rec))
			w.checkRecords()
		}},
		"an announcement its object took away": {InvOneAnnouncement, func(t *testing.T, w *World) {
			w.history.announced["scope-1/Committed/pay_1/audit"] = announcement{object: "pay-2", state: v1.DeliveryPending}
			w.checkAnnounced()
		}},
		"a record deleted while its owner stands": {InvRetention, func(t *testing.T, w *World) {
			op := applied(t, w, "pay-2")
			rec := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "scope-1"},
				Spec: v1.IdempotencyRecordSpec{ToolRef: v1.ToolReference{Name: toolPay}, Operation: opCharge,
					IdempotencyKey: "order-7", Owner: v1.RecordOwner{Name: op.Name, UID: op.UID}}}
			must(w.server.Create(rec))
			must(w.server.Delete(rec, nil))
		}},
		"a record deleted while its owner, which made an attempt, is being deleted": {InvRetention, func(t *testing.T, w *World) {
			op := applied(t, w, "pay-2")
			op.Finalizers = []string{v1.FinalizerRecord}
			must(w.server.Update(op, false))
			op.Status.State, op.Status.Attempts = v1.StateUnknown, 1
			must(w.server.Update(op, true))
			must(w.server.Delete(op, nil))
			rec := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "scope-1"},
				Spec: v1.IdempotencyRecordSpec{ToolRef: v1.ToolReference{Name: toolPay}, Operation: opCharge,
					IdempotencyKey: "order-7", Owner: v1.RecordOwner{Name: op.Name, UID: op.UID}}}
			must(w.server.Create(rec))
			must(w.server.Delete(rec, nil))
		}},
		"a decision told not recorded that the object holds": {InvDecisionTold, func(t *testing.T, w *World) {
			r := &callRequest{name: "agent-1", ref: "pay/agent-1", recorded: true}
			w.checkDecisionTold(r, told{text: "the decision was not recorded: http2: client connection lost"})
		}},
		"a finalizer removed from an operation that stands": {InvRetention, func(t *testing.T, w *World) {
			op := applied(t, w, "pay-1")
			op.Finalizers = nil
			must(w.server.Update(op, false))
		}},
		"a first attempt claimed on a suspended operation": {InvBrakes, func(t *testing.T, w *World) {
			op := braked(t, w, "pay-1", func(s *v1.SideEffectOperationSpec) { s.Suspend = true })
			claimAs(t, w, op, v1.StateStarted, "")
		}},
		"a re-send claimed on a cancelled operation": {InvBrakes, func(t *testing.T, w *World) {
			op := braked(t, w, "pay-1", func(s *v1.SideEffectOperationSpec) { s.Cancel = true })
			claimAs(t, w, op, v1.StateReconciling, v1.IdempotencyNative)
		}},
		"a claim by a pass that read its tool suspended": {InvBrakes, func(t *testing.T, w *World) {
			op := applied(t, w, "pay-1")
			w.running = &passRun{m: w.managers[0], incarnation: 1, uid: op.UID,
				req: request{ctrlOperation, types.NamespacedName{Namespace: Namespace, Name: op.Name}}}
			defer func() { w.running = nil }()
			tool := &v1.Tool{}
			must(w.server.Get(toolObjKey(toolPay), tool))
			tool.Spec.Suspend = true
			w.running.readTool(tool)
			claimAs(t, w, op, v1.StateStarted, "")
		}},
		"a Cancelled failure while the tool holds the request's effect": {InvNoFalseNoEffect, func(t *testing.T, w *World) {
			op := braked(t, w, "pay-1", func(s *v1.SideEffectOperationSpec) { s.Cancel = true })
			e := w.recordEffect(w.tools[toolPay], "/v1/charges", "pay-1", "pay/pay-1")
			e.Params = canonicalParams(op)
			// Its one attempt had, it says, provably no effect.
			op.Status.Attempts = 1
			op.Status = protocol.Fail(op.Status, protocol.Policy{Retention: time.Hour}, protocol.Env{Now: w.clock.Now()},
				v1.ErrorCancelled, v1.ReasonCancelled, "Cancelled after 1 attempts that provably had no effect").Status
			must(w.server.Update(op, true))
			w.check()
		}},
		"an answer dropped with its operation": {InvAnswerKept, func(t *testing.T, w *World) {
			e := w.recordEffect(w.tools[toolPay], "/v1/charges", "pay-1", "pay/pay-1")
			w.checkHeldAfterGone(&heldAnswer{effect: e, m: w.managers[0], incarnation: 1,
				op: types.NamespacedName{Namespace: Namespace, Name: "pay-1"}, uid: "uid-gone"})
		}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := NewWorld(DefaultOptions(1))
			defer w.Close()
			w.check()
			if len(w.violations) > 0 {
				t.Fatalf("a fresh world fails: %v", w.violations)
			}
			// A case builds its state in pieces that no pass writes (an
			// effect before any claim): it is judged when its check runs,
			// not at each of its writes.
			w.server.Landed = nil
			tc.breaks(t, w)
			for _, v := range w.violations {
				if v.Invariant == tc.inv {
					return
				}
			}
			t.Errorf("%s did not fire; violations: %v", tc.inv, w.violations)
		})
	}
}

// applied creates the operation of a workload manifest, as the API server
// stores it.
func applied(t *testing.T, w *World, name string) *v1.SideEffectOperation {
	t.Helper()
	op := w.operationManifest(name).DeepCopy()
	must(w.server.Create(op))
	must(w.server.Get(opObjKey(name), op))
	return op
}

// commit writes a Committed status naming id.
func commit(t *testing.T, w *World, op *v1.SideEffectOperation, id string) *v1.SideEffectOperation {
	t.Helper()
	op.Status.State, op.Status.ExternalObjectID, op.Status.Attempts = v1.StateCommitted, id, 1
	must(w.server.Update(op, true))
	must(w.server.Get(opObjKey(op.Name), op))
	return op
}

// TestBrakeCheckAllows: I17 leaves alone what a brake lets through: a
// lookup's claim, a person's Retry applied from NeedsReview, and a pass
// that read its tool running before it read it suspended.
func TestBrakeCheckAllows(t *testing.T) {
	cases := map[string]func(t *testing.T, w *World){
		"a lookup on a suspended operation": func(t *testing.T, w *World) {
			op := braked(t, w, "desk-1", func(s *v1.SideEffectOperationSpec) { s.Suspend = true })
			claimAs(t, w, op, v1.StateReconciling, v1.IdempotencyLookup)
		},
		"a person's Retry of a cancelled operation": func(t *testing.T, w *World) {
			op := braked(t, w, "pay-1", func(s *v1.SideEffectOperationSpec) { s.Cancel = true })
			op.Status.State = v1.StateNeedsReview
			must(w.server.Update(op, true))
			claimAs(t, w, op, v1.StateStarted, "")
		},
		"a pass that read its tool running, then suspended": func(t *testing.T, w *World) {
			op := applied(t, w, "pay-1")
			w.running = &passRun{m: w.managers[0], incarnation: 1, uid: op.UID,
				req: request{ctrlOperation, types.NamespacedName{Namespace: Namespace, Name: op.Name}}}
			defer func() { w.running = nil }()
			tool := &v1.Tool{}
			must(w.server.Get(toolObjKey(toolPay), tool))
			w.running.readTool(tool)
			tool.Spec.Suspend = true
			w.running.readTool(tool)
			claimAs(t, w, op, v1.StateStarted, "")
		},
		"a renewal of a claim made before the suspend": func(t *testing.T, w *World) {
			op := applied(t, w, "pay-1")
			claimAs(t, w, op, v1.StateStarted, "")
			op.Spec.Suspend = true
			must(w.server.Update(op, false))
			op.Status.Claim.RenewTime = metav1.NewTime(w.clock.Now().Add(time.Second))
			must(w.server.Update(op, true))
		},
	}
	for name, breaks := range cases {
		t.Run(name, func(t *testing.T) {
			w := NewWorld(DefaultOptions(1))
			defer w.Close()
			w.server.Landed = nil
			breaks(t, w)
			if len(w.violations) > 0 {
				t.Errorf("violations: %v", w.violations)
			}
		})
	}
}

// braked creates the operation of a workload manifest, then sets a brake
// on its spec, as a person's edit does.
func braked(t *testing.T, w *World, name string, brake func(*v1.SideEffectOperationSpec)) *v1.SideEffectOperation {
	t.Helper()
	op := applied(t, w, name)
	brake(&op.Spec)
	must(w.server.Update(op, false))
	return op
}

// claimAs writes a status that claims the operation's next attempt in
// state (Started: an attempt; Reconciling: a question of mode), as
// w.managers[0] would.
func claimAs(t *testing.T, w *World, op *v1.SideEffectOperation, state v1.OperationState, mode v1.IdempotencyMode) {
	t.Helper()
	now := metav1.NewTime(w.clock.Now())
	op.Status.State, op.Status.IdempotencyMode = state, mode
	if state == v1.StateStarted {
		op.Status.Attempts++
	} else {
		op.Status.ReconcileAttempts++
	}
	op.Status.Claim = &v1.Claim{Holder: w.managers[0].holder(), Attempt: max(1, op.Status.Attempts), AcquireTime: now,
		RenewTime: now, ExpiryTime: metav1.NewTime(now.Add(time.Minute))}
	must(w.server.Update(op, true))
}
