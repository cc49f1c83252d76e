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

// What callers are told (callers.go), checked at each answer against the
// tools' ledger, under the invariant each answer rests on:
//
//   - I10: told Committed, the effect named is one of the request's scope,
//     made with the call's arguments (unless a person decided), or one of
//     an earlier lifetime, which I10 judged as the outcome was made;
//   - I11: told "no effect" (a failure neither decided nor reported as an
//     effect), no effect of the call's arguments stands in the key's
//     lifetime, but one the tool hid (Options.Lies), one a person allowed
//     or one whose answer a live manager still holds (I12's);
//   - I5: a request told Committed twice with effects of the current
//     lifetime of its key (and of its namespace: a person who deletes it
//     forgets its keys), by
//     the same key or a fresh one under a derived key, is told the same
//     effect both times;
//   - I4: a call with other arguments under a key is never told of the
//     operation of the key's first request: it is told the mismatch.
//
// A saga's caller (sagacallers.go) may rely on what docs/guarantee.md
// ("Sagas") and docs/client.md ("Sagas") promise, step by step:
//
//   - I10: told Committed, each step's effect named is one of that step's
//     scope, made with the step's parameters in this call, unless a person
//     decided the step;
//   - I1: told Committed, the tool holds that effect once for the step's
//     key: no second one stands beside it, but one a person allowed or
//     one after the tool hid an effect (Options.Lies);
//   - I5: a saga told Committed twice for the same steps is told the same
//     effects both times, within a lifetime of each step's key;
//   - I8: told the saga failed (Compensated, or FailedFinal: its first
//     step failed), no effect of its steps stands: its compensations ran,
//     or nothing took effect. The exceptions are I11's: one the tool hid,
//     one a person allowed, one whose answer a live manager still holds;
//   - I4: told the mismatch, and never told anything else for the same
//     steps under the key, the call made no saga: no effect of its steps'
//     parameters exists. A call told an error may have made one (its
//     answer lost) and lifts this;
//   - NeedsReview, Pending, a step waiting for approval and an error
//     promise nothing. A caller that calls again after them still gets at
//     most one effect per step (I1, and I5 above).

import (
	"strings"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// checkTold checks what a caller was told for r.
func (w *World) checkTold(r *callRequest, t told) {
	subject := "caller " + r.name
	if r.saga() {
		w.checkSagaTold(subject, r, t)
		return
	}
	switch t.what {
	case toldCommitted:
		e := w.effectByID(t.id)
		if e == nil || e.Ref != r.ref {
			w.fail(InvCommittedHasEffect, subject, "told Committed as %q, which is no effect of its scope (%s)", t.id, t.text)
			return
		}
		// An earlier lifetime's effect was judged where the outcome was
		// made: I10 judges a commit once, as it is made (a tool's replay,
		// a search by key that cannot tell which request made it), and a
		// record's outcome by its scope.
		if !w.ofLifetime(e) {
			return
		}
		if !t.decided && e.Params != t.params {
			w.fail(InvCommittedHasEffect, subject, "told Committed as %s, made with %s, for a call with %s (%s)",
				t.id, e.Params, t.params, t.text)
			return
		}
		for _, before := range r.told {
			b := w.effectByID(before.id)
			if before.what == toldCommitted && b != nil && w.ofLifetime(b) && before.params == t.params &&
				before.id != t.id && !before.decided && !t.decided && !b.Licensed && !e.Licensed {
				w.fail(InvFirstResult, subject, "told Committed as %s at step %d, and now as %s", before.id, before.step, t.id)
			}
		}
	case toldFailed:
		if !t.noEffect {
			break
		}
		for _, e := range w.current(r.ref) {
			if e.Params != t.params || byHand(e) || e.Licensed || (e.Hidden && !e.Known) || w.heldByLive(e) {
				continue
			}
			w.fail(InvNoFalseNoEffect, subject, "told no effect while the tool holds %s (%s)", e.ID, t.text)
		}
	}
	w.checkToldOperation(subject, t)
}

// checkToldOperation is I4 for what a caller was told: never another
// request's operation, unless it was told the mismatch.
func (w *World) checkToldOperation(subject string, t told) {
	if t.what == toldCommitted {
		if e := w.effectByID(t.id); e != nil && e.Params == t.params {
			// The answer is the request's own effect, from its record
			// perhaps: the operation it names may be gone, and its name
			// another request's object now.
			return
		}
	}
	if op := w.namedOperation(t.operation); op != nil && t.what != toldMismatch && canonicalParams(op) != t.params {
		w.fail(InvParameters, subject, "a call with %s is told of %s, made with %s (%s)", t.params, op.Name,
			canonicalParams(op), t.text)
	}
}

// ofLifetime reports whether e is of the current lifetime of its key and
// of the namespace.
func (w *World) ofLifetime(e *Effect) bool {
	return e.Epoch == w.epochs[e.Ref] && e.Namespace == w.namespaces
}

// namedOperation is the operation of that name now, nil if none.
func (w *World) namedOperation(name string) *v1.SideEffectOperation {
	if name == "" {
		return nil
	}
	o, ok := w.server.objects[opObjKey(name)]
	if !ok {
		return nil
	}
	return o.(*v1.SideEffectOperation)
}

// checkSagaTold checks what a saga's caller was told for r.
func (w *World) checkSagaTold(subject string, r *callRequest, t told) {
	switch t.what {
	case toldCommitted:
		for _, st := range t.steps {
			w.checkStepCommitted(subject, r, t, st)
		}
	case toldCompensated, toldFailed:
		for _, st := range t.steps {
			for _, e := range knowable(w.standing(r.ref + "/" + st.name)) {
				if e.Params != st.params || e.Licensed || w.heldByLive(e) {
					continue
				}
				w.fail(InvCompensated, subject, "told %s while step %s's effect %s stands (%s)", t.what, st.name, e.ID, t.text)
			}
		}
	case toldMismatch:
		for _, before := range r.told {
			if before.params == t.params && before.what != toldMismatch {
				// A call with these steps may have made the saga.
				return
			}
		}
		for _, st := range t.steps {
			for _, e := range w.ledger {
				if e.Ref == r.ref+"/"+st.name && e.Params == st.params {
					w.fail(InvParameters, subject, "told the mismatch for steps it never ran, while step %s's effect %s "+
						"was made with this call's parameters (%s)", st.name, e.ID, t.text)
				}
			}
		}
	}
}

// checkStepCommitted checks one step of a saga told Committed: I10, I1
// and I5 for what the caller was told.
func (w *World) checkStepCommitted(subject string, r *callRequest, t told, st toldStep) {
	ref := r.ref + "/" + st.name
	e := w.effectByID(st.id)
	if e == nil || e.Ref != ref {
		w.fail(InvCommittedHasEffect, subject, "told Committed with step %s as %q, which is no effect of the step (%s)",
			st.name, st.id, t.text)
		return
	}
	if !w.ofLifetime(e) {
		// An earlier lifetime's, judged where the step's outcome was made.
		return
	}
	if !st.decided && e.Params != st.params {
		w.fail(InvCommittedHasEffect, subject, "told Committed with step %s as %s, made with %s, for a call with %s",
			st.name, st.id, e.Params, st.params)
		return
	}
	if cur := w.current(ref); len(cur) > 1 && len(unlicensed(untilHidden(cur)[1:])) > 0 {
		w.fail(InvOneEffect, subject, "told Committed with step %s as %s, while the tool holds %d effects of the step (%s)",
			st.name, st.id, len(cur), effectList(cur))
	}
	for _, before := range r.told {
		if before.what != toldCommitted || before.params != t.params {
			continue
		}
		for _, b := range before.steps {
			p := w.effectByID(b.id)
			if b.name == st.name && b.id != st.id && p != nil && w.ofLifetime(p) && !b.decided && !st.decided &&
				!p.Licensed && !e.Licensed {
				w.fail(InvFirstResult, subject, "told Committed with step %s as %s at step %d, and now as %s",
					st.name, b.id, before.step, st.id)
			}
		}
	}
}

// checkDecisionTold is I16 at each call that carries a user's decision: a
// user told that their decision was not recorded may decide again, or
// decide otherwise elsewhere, believing the first counted for nothing. So
// an answer that says so is checked against the object as the call left
// it. A decision the object holds was recorded, whatever the API server
// answered the write (an answer lost after the write landed).
func (w *World) checkDecisionTold(r *callRequest, t told) {
	if !r.recorded {
		return
	}
	if strings.Contains(t.text, "not recorded") || strings.Contains(t.text, "nothing was recorded") {
		w.fail(InvDecisionTold, "caller "+r.name, "told its user's decision was not recorded, but %s holds it: %s",
			r.ref, t.text)
	}
}
