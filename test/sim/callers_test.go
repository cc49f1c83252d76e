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
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
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

// TestSagaCallerChecksFire: what a saga's caller is told is checked
// against the ledger, through DoSaga and the gateway's saga tool, and each
// check fires when a saga's status tells a caller what did not happen.
func TestSagaCallerChecksFire(t *testing.T) {
	cases := map[string]struct {
		inv    string
		caller string
		verb   int64
		breaks func(t *testing.T, w *World, r *callRequest)
	}{
		"a program told Committed with no effect at all": {InvCommittedHasEffect, "checkout-1", callAgain,
			func(t *testing.T, w *World, r *callRequest) {
				commitSaga(t, w, r, map[string]string{"charge": "pay_404"})
			}},
		"an agent told Committed with another step's effect": {InvCommittedHasEffect, "assistant-1", callAgain,
			func(t *testing.T, w *World, r *callRequest) {
				e := stepEffect(w, r, "ticket", false)
				commitSaga(t, w, r, map[string]string{"charge": e.ID})
			}},
		"a program told Committed while a step's key made two effects": {InvOneEffect, "checkout-1", callAgain,
			func(t *testing.T, w *World, r *callRequest) {
				e := stepEffect(w, r, "charge", false)
				stepEffect(w, r, "charge", false).Licensed = false
				commitSaga(t, w, r, map[string]string{"charge": e.ID})
			}},
		"an agent told Committed twice with two effects": {InvFirstResult, "assistant-1", callAgain,
			func(t *testing.T, w *World, r *callRequest) {
				commitSaga(t, w, r, map[string]string{"charge": stepEffect(w, r, "charge", false).ID})
				w.Apply(Action{Kind: Call, Name: r.name, N: callAgain})
				// The second is told as if no person had allowed it: I5
				// says it, whether or not I1 does.
				e := stepEffect(w, r, "charge", false)
				e.Licensed = false
				commitSaga(t, w, r, map[string]string{"charge": e.ID})
			}},
		"a program told Compensated while a step's effect stands": {InvCompensated, "checkout-2", callAgain,
			func(t *testing.T, w *World, r *callRequest) {
				stepEffect(w, r, "charge", false)
				endSaga(t, w, r, v1.StateCompensated)
			}},
		"an agent told Compensated while a step's effect stands": {InvCompensated, "assistant-2", callAgain,
			func(t *testing.T, w *World, r *callRequest) {
				stepEffect(w, r, "charge", false)
				endSaga(t, w, r, v1.StateCompensated)
			}},
		"a program told the mismatch while its other steps ran": {InvParameters, "checkout-1", callOther,
			func(t *testing.T, w *World, r *callRequest) {
				stepEffect(w, r, "charge", true)
			}},
		"an agent told the mismatch while its other steps ran": {InvParameters, "assistant-2", callOther,
			func(t *testing.T, w *World, r *callRequest) {
				stepEffect(w, r, "charge", true)
			}},
	}
	t.Run("true answers", func(t *testing.T) {
		for _, name := range []string{"checkout-1", "assistant-1"} {
			w := NewWorld(DefaultOptions(1))
			w.Apply(Action{Kind: Call, Name: name, N: callNew})
			r := w.callers.requests[name]
			ids := map[string]string{}
			for _, st := range r.steps(false) {
				ids[st.Name] = stepEffect(w, r, st.Name, false).ID
			}
			commitSaga(t, w, r, ids)
			w.Apply(Action{Kind: Call, Name: name, N: callAgain})
			w.Apply(Action{Kind: Call, Name: name, N: callOther})
			told := r.told
			if len(w.violations) > 0 || len(told) != 3 || told[1].what != toldCommitted || told[2].what != toldMismatch {
				t.Fatalf("%s: violations %v, told %v, %v\n%s", name, w.violations, told[1].text, told[2].what,
					strings.Join(w.story, "\n"))
			}
			w.Close()
		}
	})
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := NewWorld(DefaultOptions(1))
			defer w.Close()
			w.Apply(Action{Kind: Call, Name: tc.caller, N: callNew})
			r := w.callers.requests[tc.caller]
			if r == nil || w.sagaOf(r) == nil || len(w.violations) > 0 {
				t.Fatalf("the first call made no saga, or failed: %v\n%s", w.violations, w.story)
			}
			tc.breaks(t, w, r)
			w.Apply(Action{Kind: Call, Name: tc.caller, N: tc.verb})
			for _, v := range w.violations {
				if v.Invariant == tc.inv && strings.HasPrefix(v.Message, "caller "+tc.caller+":") {
					return
				}
			}
			t.Errorf("%s did not fire for the caller; violations: %v\n%s", tc.inv, w.violations, w.story)
		})
	}
}

// TestCallersMeetAPIFaults: with Options.CallerFaults, the callers'
// requests to the API server meet its faults as a manager's writes do. A
// caller told an error calls again, and finds what its first call made:
// one object, whatever answer was lost.
func TestCallersMeetAPIFaults(t *testing.T) {
	for _, name := range []string{"program-1", "agent-1", "checkout-1", "assistant-1"} {
		for _, faults := range []bool{false, true} {
			opts := DefaultOptions(1)
			opts.APIFaultRate, opts.CallerFaults = 1, faults
			w := NewWorld(opts)
			w.Apply(Action{Kind: Call, Name: name, N: callNew, Sub: 7})
			r := w.callers.requests[name]
			if got := r.told[0].what == toldError; got != faults {
				t.Errorf("%s, caller faults %v: told %s (%s)", name, faults, r.told[0].what, r.told[0].text)
			}
			w.Close()
		}
	}
	// An answer lost after the create: the caller is told an error, and
	// its next call finds the object the create made.
	for _, name := range []string{"program-1", "checkout-1"} {
		opts := DefaultOptions(1)
		opts.APIFaultRate = 0.5
		var w *World
		for sub := uint64(1); sub < 500 && w == nil; sub++ {
			w = NewWorld(opts)
			w.Apply(Action{Kind: Call, Name: name, N: callNew, Sub: sub})
			r := w.callers.requests[name]
			if !strings.Contains(strings.Join(w.story, "\n"), "its answer is lost") || r.told[0].what != toldError ||
				w.objectsOf(r) != 1 {
				w.Close()
				w = nil
			}
		}
		if w == nil {
			t.Fatalf("%s: no create's answer was lost", name)
		}
		w.opts.APIFaultRate = 0
		w.Apply(Action{Kind: Call, Name: name, N: callAgain})
		r := w.callers.requests[name]
		if last := r.told[len(r.told)-1]; last.what != toldPending || w.objectsOf(r) != 1 || len(w.violations) > 0 {
			t.Errorf("%s: after a lost answer, told %s (%s); %d objects; violations %v", name, last.what, last.text,
				w.objectsOf(r), w.violations)
		}
		w.Close()
	}
}

// sagaOf is the saga a caller's request made, nil if none.
func (w *World) sagaOf(r *callRequest) *v1.Saga {
	o, ok := w.server.objects[objKey{Kind: kindSaga, NamespacedName: types.NamespacedName{Namespace: Namespace, Name: r.ref}}]
	if !ok {
		return nil
	}
	return o.(*v1.Saga).DeepCopy()
}

// objectsOf counts the objects a caller's request made: its saga, or its
// operations.
func (w *World) objectsOf(r *callRequest) int {
	if r.saga() {
		if w.sagaOf(r) != nil {
			return 1
		}
		return 0
	}
	n := 0
	for _, o := range w.server.peek(kindOperation) {
		if refOf(o.(*v1.SideEffectOperation)) == r.ref {
			n++
		}
	}
	return n
}

// stepEffect makes an effect of a saga step at its tool, with the
// parameters of the request's own steps or of its other ones, and an
// operation of the step Committed as it, which remembers it. A second
// effect of a step is one a person allowed (Effect.Licensed).
func stepEffect(w *World, r *callRequest, step string, other bool) *Effect {
	for _, st := range r.steps(other) {
		if st.Name != step {
			continue
		}
		ref := r.ref + "/" + step
		op := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace,
			Name: fmt.Sprintf("step-%d", len(w.ledger))},
			Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: st.ToolRef.Name}, Operation: opCharge,
				IdempotencyKey: ref, Parameters: st.Parameters}}
		must(w.server.Create(op))
		op.Status.State, op.Status.Attempts = v1.StateStarted, 1
		must(w.server.Update(op, true))
		e := w.recordEffect(w.tools[st.ToolRef.Name], "/v1/charges", "k", ref)
		c, err := protocol.Canonical(st.Parameters.Raw)
		must(err)
		e.Params, e.Licensed = string(c), len(w.current(ref)) > 1
		op.Status.State, op.Status.ExternalObjectID = v1.StateCommitted, e.ID
		must(w.server.Update(op, true))
		return e
	}
	panic("sim: no step " + step)
}

// commitSaga writes a Committed status on a request's saga, its steps
// named by ids; a step missing there is named by a new effect of its own.
func commitSaga(t *testing.T, w *World, r *callRequest, ids map[string]string) {
	t.Helper()
	s := w.sagaOf(r)
	s.Status.State, s.Status.Steps = v1.StateCommitted, nil
	for _, st := range r.steps(false) {
		if _, ok := ids[st.Name]; !ok {
			ids[st.Name] = stepEffect(w, r, st.Name, false).ID
		}
		s.Status.Steps = append(s.Status.Steps, v1.SagaStepStatus{Name: st.Name, State: v1.StateCommitted,
			ExternalObjectID: ids[st.Name]})
	}
	must(w.server.Update(s, true))
}

// endSaga writes a request's saga's end state.
func endSaga(t *testing.T, w *World, r *callRequest, state v1.OperationState) {
	t.Helper()
	s := w.sagaOf(r)
	s.Status.State, s.Status.FailedStep = state, "ticket"
	must(w.server.Update(s, true))
}
