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

// Outcomes: what an operation's status or a scope's record tells of the
// tool.
//
// I10: no Committed without an effect at the tool. The effect a commit
// names is one of its scope's, or one the tool still answers its key with.
// I11: nothing reports "no effect" while the tool holds the request's
// effect. A person's decision is reported as a decision, not a proof.
//
// Both are checked after every step: on each operation (checkOutcome), and
// on each scope's record, which answers once the operation is gone
// (checkRecords).

import (
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/mcpgateway"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// checkOutcome is I10 and I11 for an operation after each step, of ref
// among list, the operations of that ref: a Committed one names an
// effect that backs it, and a FailedFinal one says "no effect" only
// while the tool holds none of its request.
func (w *World) checkOutcome(ref string, op *v1.SideEffectOperation, list []*v1.SideEffectOperation) {
	st := op.Status
	switch st.State {
	case v1.StateCommitted:
		// The effect it names is one of its scope's, of this lifetime, or one
		// that the tool answered this operation's request with (a Native tool
		// replays an effect Once forgot, as after a namespace's deletion, and
		// its answer stays true after its window passes), or that something
		// still answered the key with when the operation committed (I10 judges a
		// commit once, as it is made): a searchable tool's search, which still
		// finds it by its key, or another object of the scope that still holds
		// it (an original that outlived its retention answers its duplicates).
		// One that names none needs some effect.
		expired := st.ExpiryTime != nil && !w.clock.Now().Before(st.ExpiryTime.Time)
		if id := st.ExternalObjectID; id != "" && !expired && w.vouched[op.UID] != id {
			e := w.effectByID(id)
			if e == nil || e.Ref != ref || (e.Epoch != w.epochs[ref] && !slices.Contains(w.answered[op.UID], id) &&
				!w.replays(e) && !w.heldElsewhere(op, e, list) && !w.justForgotten(e) && !w.wipedUnder(e)) {
				w.fail(InvCommittedHasEffect, op.Name, "Committed (%s) as %s, which is no effect of %s in this lifetime", protocol.ReadyReason(st), id, ref)
			}
			w.vouched[op.UID] = id
		} else if id == "" && len(sortedEffects(w.ledger, ref)) == 0 {
			w.fail(InvCommittedHasEffect, op.Name, "Committed (%s) with no effect at the tool", protocol.ReadyReason(st))
		}
	case v1.StateFailedFinal:
		// The failure speaks of this request, for as long as its retention: an
		// effect of the same scope with other parameters is another's, and one
		// after it expired is a replay's (I7).
		effects := sameRequest(w.current(ref), op)
		if st.ExpiryTime != nil {
			effects = before(effects, st.ExpiryTime.Time)
		}
		// An answer a manager still holds is not known to Once yet: I12 sees
		// that it is recorded. An effect the tool's search hid past its declared
		// delay is not either, until an answer that names it reaches this
		// record.
		effects = slices.DeleteFunc(effects, func(e *Effect) bool {
			return w.heldByLive(e) || (e.Hidden && !w.recordedIn(op, e))
		})
		if len(effects) == 0 {
			break
		}
		if who := toldNoEffect(op); who != "" {
			w.fail(InvNoFalseNoEffect, op.Name, "FailedFinal (%s: %s) while the tool holds %s: %s",
				protocol.ReadyReason(st), st.ErrorMessage, effectList(effects), who)
		}
	}
}

// checkRecords is I10 and I11 after an operation is gone: what a scope's
// record answers a later request of the key with is true of what the tool
// holds. A committed outcome names an effect of its scope; a failure that
// says "no effect" has none of the same request in the key's lifetime.
func (w *World) checkRecords() {
	for _, o := range w.server.peek(kindRecord) {
		rec := o.(*v1.IdempotencyRecord)
		out := rec.Spec.Outcome
		if out == nil || !w.clock.Now().Before(out.ExpiryTime.Time) {
			continue
		}
		ref := w.refs[scopeOf(rec.Spec.ToolRef.Name, rec.Spec.Operation, rec.Spec.IdempotencyKey)]
		if ref == "" {
			continue
		}
		switch out.State {
		case v1.StateCommitted:
			if id := out.ExternalObjectID; id != "" {
				if e := w.effectByID(id); e == nil || e.Ref != ref {
					w.fail(InvCommittedHasEffect, rec.Name, "the record of %s answers Committed as %s, no effect of it", ref, id)
				}
			}
		case v1.StateFailedFinal:
			if protocol.Unproven(out.Reason) {
				continue
			}
			for _, e := range w.current(ref) {
				// As for a live failure: within the record's retention, an
				// effect a person did not allow, known to Once or not held
				// in a manager's memory yet.
				if e.Hidden && !e.Known || w.heldByLive(e) || byHand(e) || e.Licensed || !e.At.Before(out.ExpiryTime.Time) {
					continue
				}
				if hash, _, err := protocol.RequestHash(rec.Spec.ToolRef, rec.Spec.Operation, []byte(e.Params)); err == nil &&
					hash == rec.Spec.RequestHash {
					w.fail(InvNoFalseNoEffect, rec.Name, "the record of %s answers FailedFinal (%s) while the tool holds %s",
						ref, out.Reason, e.ID)
				}
			}
		}
	}
}

// clockMargin is what the simulated tools' found allows for a tool's clock
// (toolCR): an effect made within it before a lifetime of its key began
// cannot be told from one of that lifetime.
const clockMargin = time.Hour

// replays reports whether e's tool still answers its key with it: a
// Native tool within its window; a searchable tool's search, unless e was
// made more than clockMargin before the current lifetime of its key began,
// which a lookup tells apart (since).
func (w *World) replays(e *Effect) bool {
	t := w.tools[e.Tool]
	if k := t.remembers(e.Endpoint, e.Key, w.clock.Now()); k != nil && k.effect == e {
		return true
	}
	return t.shows(w, e.Endpoint, e.Key) == e && !e.At.Before(w.began[e.Ref].Add(-clockMargin))
}

// heldElsewhere reports whether another operation of op's scope (among
// list, the operations of its ref) or the scope's record still holds e as
// its outcome: a duplicate may take it from there.
func (w *World) heldElsewhere(op *v1.SideEffectOperation, e *Effect, list []*v1.SideEffectOperation) bool {
	for _, o := range list {
		if o.UID != op.UID && o.Status.ExternalObjectID == e.ID {
			return true
		}
	}
	for _, o := range w.server.peek(kindRecord) {
		rec := o.(*v1.IdempotencyRecord)
		if rec.Spec.Outcome != nil && rec.Spec.Outcome.ExternalObjectID == e.ID {
			return true
		}
	}
	return false
}

// toldNoEffect says who tells that op had no effect, each through its own
// code: its status (a failure whose reason protocol.Unproven does not
// leave open, as kubectl and Flux show it), pkg/once (a FailedError
// neither Decided nor EffectReported) and the MCP gateway (its words to
// the agent, from pkg/once's answer). The ingress answers with the state
// alone.
func toldNoEffect(op *v1.SideEffectOperation) string {
	var who []string
	if !protocol.Unproven(protocol.ReadyReason(op.Status)) {
		who = append(who, "its status")
	}
	if res, done, err := once.Outcome(op); done && err != nil {
		var failed *once.FailedError
		if errors.As(err, &failed) && !failed.Decided && !failed.EffectReported {
			who = append(who, "pkg/once")
		}
		for _, c := range mcpgateway.Answer(res, err).Content {
			if t, ok := c.(*mcp.TextContent); ok && strings.Contains(t.Text, "no lasting effect") {
				who = append(who, "the MCP gateway")
			}
		}
	}
	if len(who) == 0 {
		return ""
	}
	return "told no effect by " + strings.Join(who, ", ")
}

// wipedUnder reports whether e was made in the namespace as it is now, and
// a person has deleted that namespace since: its keys are forgotten, but
// an operation still in it that took e from its scope's record before the
// namespace controller deleted the record (its pass read it, or its cache
// still held it) reports an effect its key really made, in its own
// namespace. Once the namespace is made again, no object of the new one
// may name e.
func (w *World) wipedUnder(e *Effect) bool {
	return w.wiped[e.Namespace] && e.Namespace == w.namespaces
}
