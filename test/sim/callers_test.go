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

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestCallerChecksFire: what a caller is told is checked against the
// ledger, through the caller's own code (pkg/once's Do, the gateway's
// tools/call), and each check fires when an operation's status tells a
// caller what did not happen.
func TestCallerChecksFire(t *testing.T) {
	cases := map[string]struct {
		inv    string
		caller string
		breaks func(t *testing.T, w *World, op *v1.SideEffectOperation)
	}{
		"a program told Committed as another request's effect": {InvCommittedHasEffect, "program-1",
			func(t *testing.T, w *World, op *v1.SideEffectOperation) {
				e := w.recordEffect(w.tools[toolDesk], "/v1/charges", "k", "desk/other")
				commit(t, w, op, e.ID)
			}},
		"an agent told Committed with no effect at all": {InvCommittedHasEffect, "agent-1",
			func(t *testing.T, w *World, op *v1.SideEffectOperation) {
				commit(t, w, op, "pay_404")
			}},
		"a program told no effect while the tool holds one": {InvNoFalseNoEffect, "program-1",
			func(t *testing.T, w *World, op *v1.SideEffectOperation) {
				e := w.recordEffect(w.tools[toolDesk], "/v1/charges", "k", "desk/program-1")
				e.Params = canonicalParams(op)
				failFinal(t, w, op)
			}},
		"a model told no effect while the tool holds one": {InvNoFalseNoEffect, "model-1",
			func(t *testing.T, w *World, op *v1.SideEffectOperation) {
				e := w.recordEffect(w.tools[toolChat], "/v1/charges", "", "chat/model-1")
				e.Params = canonicalParams(op)
				failFinal(t, w, op)
			}},
		"an agent told two effects for one request": {InvFirstResult, "agent-1",
			func(t *testing.T, w *World, op *v1.SideEffectOperation) {
				for range 2 {
					e := w.recordEffect(w.tools[toolPay], "/v1/charges", "k", "pay/agent-1")
					e.Params = canonicalParams(op)
					op = commit(t, w, op, e.ID)
					w.Apply(Action{Kind: Call, Name: "agent-1", N: callAgain})
				}
			}},
	}
	t.Run("a true answer", func(t *testing.T) {
		w := NewWorld(DefaultOptions(1))
		defer w.Close()
		w.Apply(Action{Kind: Call, Name: "program-1", N: callNew})
		op := w.operationOf("program-1")
		e := w.recordEffect(w.tools[toolDesk], "/v1/charges", "k", "desk/program-1")
		e.Params = canonicalParams(op)
		commit(t, w, op, e.ID)
		w.Apply(Action{Kind: Call, Name: "program-1", N: callAgain})
		w.Apply(Action{Kind: Call, Name: "program-1", N: callOther})
		if len(w.violations) > 0 || len(w.callers.requests["program-1"].told) != 3 {
			t.Fatalf("violations %v\n%s", w.violations, w.story)
		}
	})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := NewWorld(DefaultOptions(1))
			defer w.Close()
			w.Apply(Action{Kind: Call, Name: tc.caller, N: callNew})
			op := w.operationOf(tc.caller)
			if op == nil || len(w.violations) > 0 {
				t.Fatalf("the first call made no operation, or failed: %v", w.violations)
			}
			tc.breaks(t, w, op)
			w.Apply(Action{Kind: Call, Name: tc.caller, N: callAgain})
			for _, v := range w.violations {
				if v.Invariant == tc.inv && v.Message[:len("caller")] == "caller" {
					return
				}
			}
			t.Errorf("%s did not fire for the caller; violations: %v\n%s", tc.inv, w.violations, w.story)
		})
	}
}

// operationOf is the operation a caller's request made.
func (w *World) operationOf(request string) *v1.SideEffectOperation {
	ref := newRequest(request).ref
	for _, o := range w.server.peek(kindOperation) {
		if op := o.(*v1.SideEffectOperation); refOf(op) == ref {
			return op.DeepCopy()
		}
	}
	return nil
}

// failFinal writes a FailedFinal status that says the tool refused it.
func failFinal(t *testing.T, w *World, op *v1.SideEffectOperation) {
	t.Helper()
	op.Status.State, op.Status.Attempts = v1.StateFailedFinal, 1
	op.Status.ErrorClass, op.Status.ErrorMessage = v1.ErrorPermanent, "declined"
	must(w.server.Update(op, true))
}
