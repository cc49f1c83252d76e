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

// The effects of one scope at its tool.
//
// I1: at most one effect per scope while its record is kept. An effect a
// person allowed, or one a tool's lie let through, does not count.
// I4: the same key with other parameters never executes. No operation is
// Committed with an effect made with other parameters.
// I5: the same key with the same parameters returns the first result.
//
// The helpers at the end say which effects count: those of the same
// request, made before a time, known to Once, allowed by no person, or
// made by hand.

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// checkOneEffect is I1: at most one effect per scope while its record is
// kept.
func (w *World) checkOneEffect() {
	seen := map[string]bool{}
	for _, e := range w.ledger {
		if seen[e.Ref] || byHand(e) {
			continue
		}
		seen[e.Ref] = true
		// A second effect a person allowed (a Retry, their word that
		// nothing had happened) is theirs to answer for, as is what they
		// undo by hand, one refund for each effect they see.
		if cur := w.current(e.Ref); len(cur) > 1 && len(unlicensed(untilHidden(cur)[1:])) > 0 {
			w.fail(InvOneEffect, e.Ref, "%d effects (%s)", len(cur), effectList(cur))
		}
	}
}

// checkParameters is I4, when a tool makes an effect: no effect of its
// scope's current lifetime was made with other parameters. A person's
// Retry allows the same request again, never another one.
func (w *World) checkParameters(e *Effect) {
	if byHand(e) || e.Params == "" {
		return
	}
	for _, o := range w.current(e.Ref) {
		if o != e && o.Params != "" && o.Params != e.Params && !byHand(o) {
			w.fail(InvParameters, e.Ref, "effect %s made with %s after %s with %s", e.ID, e.Params, o.ID, o.Params)
			return
		}
	}
}

// checkAccepted is I4's other half: an operation is never Committed with
// an effect of its key's lifetime made with other parameters (a silent
// acceptance), unless a person said so. An earlier lifetime's effect that
// a tool's search still shows is I10's to judge: a search by key cannot
// tell which request made it.
func (w *World) checkAccepted(op *v1.SideEffectOperation) {
	st := op.Status
	if st.State != v1.StateCommitted || st.Resolution != nil || st.ExternalObjectID == "" {
		return
	}
	e := w.effectByID(st.ExternalObjectID)
	if e == nil || e.Params == "" || byHand(e) || !slices.Contains(w.current(e.Ref), e) {
		return
	}
	if want := canonicalParams(op); want != "" && e.Params != want {
		w.fail(InvParameters, op.Name, "Committed as %s, made with %s, for a request with %s", e.ID, e.Params, want)
	}
}

// checkFirstResult is I5 over the operations of one scope: two that are
// Committed with the same parameters name the same effect, unless a
// person decided one of them, or their effects belong to different
// lifetimes of the key, or a person allowed the second.
func (w *World) checkFirstResult(ref string, list []*v1.SideEffectOperation) {
	for i, a := range list {
		for _, b := range list[i+1:] {
			if !w.sameResultOwed(ref, a, b) {
				continue
			}
			w.fail(InvFirstResult, b.Name, "Committed as %s while %s, the same request, is Committed as %s",
				b.Status.ExternalObjectID, a.Name, a.Status.ExternalObjectID)
		}
	}
}

// sameResultOwed reports whether a and b must name the same effect and do
// not.
func (w *World) sameResultOwed(ref string, a, b *v1.SideEffectOperation) bool {
	if a.Status.State != v1.StateCommitted || b.Status.State != v1.StateCommitted ||
		a.Status.ExternalObjectID == b.Status.ExternalObjectID || a.Status.Resolution != nil || b.Status.Resolution != nil {
		return false
	}
	if canonicalParams(a) != canonicalParams(b) {
		return false
	}
	cur := w.current(ref)
	ea, eb := w.effectByID(a.Status.ExternalObjectID), w.effectByID(b.Status.ExternalObjectID)
	return ea != nil && eb != nil && slices.Contains(cur, ea) && slices.Contains(cur, eb) && !ea.Licensed && !eb.Licensed
}

// canonicalParams are an operation's parameters as the tools record them.
func canonicalParams(op *v1.SideEffectOperation) string {
	var raw []byte
	if op.Spec.Parameters != nil {
		raw = op.Spec.Parameters.Raw
	}
	c, err := protocol.Canonical(raw)
	if err != nil {
		return ""
	}
	return string(c)
}

// sameRequest are the effects made with an operation's parameters.
func sameRequest(es []*Effect, op *v1.SideEffectOperation) []*Effect {
	want := canonicalParams(op)
	if want == "" {
		return nil
	}
	var out []*Effect
	for _, e := range es {
		if e.Params == want {
			out = append(out, e)
		}
	}
	return out
}

// untilHidden are a scope's effects up to the first that its tool hid
// past its declared lookup delay (Effect.Hidden): a lookup that proved it
// absent let the next attempt go, and the effects after it are the lie's.
func untilHidden(es []*Effect) []*Effect {
	for i, e := range es {
		if e.Hidden {
			return es[:i+1]
		}
	}
	return es
}

// knowable are the effects Once can know of: all but those the tool's
// search hid past its declared delay while no answer named them.
func knowable(es []*Effect) []*Effect {
	return slices.DeleteFunc(slices.Clone(es), func(e *Effect) bool { return e.Hidden && !e.Known })
}

// unlicensed are the effects no person allowed.
func unlicensed(es []*Effect) []*Effect {
	var out []*Effect
	for _, e := range es {
		if !e.Licensed {
			out = append(out, e)
		}
	}
	return out
}

// before are the effects made before t.
func before(es []*Effect, t time.Time) []*Effect {
	var out []*Effect
	for _, e := range es {
		if e.At.Before(t) {
			out = append(out, e)
		}
	}
	return out
}

func effectList(es []*Effect) string {
	parts := make([]string, 0, len(es))
	for _, e := range es {
		parts = append(parts, fmt.Sprintf("%s at %s by %s on %s", e.ID, e.At.Sub(start).Round(time.Millisecond), e.Holder, e.Endpoint))
	}
	return strings.Join(parts, ", ")
}

// byHand reports whether a person made the effect by hand (an undo), not
// Once: no record is meant to keep it.
func byHand(e *Effect) bool {
	return strings.HasSuffix(e.Ref, byHandSuffix)
}
