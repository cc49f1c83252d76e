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
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/mcpgateway"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// The invariants the simulator checks after every step, as docs/design.md
// numbers them ("Invariants").
const (
	// InvOneEffect (I1): at most one effect per scope while its record is
	// kept, for every tool that keeps its contract.
	InvOneEffect = "I1 at most one effect per scope"
	// InvCommittedHasEffect (I10): no Committed without an effect at the
	// tool.
	InvCommittedHasEffect = "I10 no Committed without an effect"
	// InvNoFalseNoEffect (I11): nothing reports "no effect" while the tool
	// holds the effect; a person's decision is reported as a decision.
	InvNoFalseNoEffect = "I11 no false \"no effect\""
	// InvAnswerKept (I12): an answer a manager received is recorded, as
	// the outcome or as evidence, by its next pass that reaches the API
	// server; it is never dropped.
	InvAnswerKept = "I12 an answer in hand is never dropped"
	// InvRetention (I7): a scope's record outlives its retention; runs
	// shorter than a retention forget nothing.
	InvRetention = "I7 records outlive the retention"
	// InvOneAnnouncement (I15): the outbox announces each effect under one
	// id, whatever object carries it, at least once.
	InvOneAnnouncement = "I15 one effect, one announcement id"
	// InvLiveness (I13): once faults stop, every operation reaches a
	// terminal state or NeedsReview within ten simulated minutes, longer
	// only where a declared delay says so.
	InvLiveness = "I13 liveness"
	// InvCompensated (I8): a saga is never Compensated while a step's
	// effect stands.
	InvCompensated = "I8 no Compensated while an effect stands"
	// InvSagaOrder (I14): a saga step's effect comes only after the step
	// before it committed; a compensation's only for an effect that
	// stands, once every later step's standing effect is undone.
	InvSagaOrder = "I14 saga order"
)

// fail records a violation once per invariant and subject.
func (w *World) fail(inv, subject, format string, args ...any) {
	for _, v := range w.violations {
		if v.Invariant == inv && strings.HasPrefix(v.Message, subject+":") {
			return
		}
	}
	v := Violation{Invariant: inv, Step: w.step, Message: subject + ": " + fmt.Sprintf(format, args...)}
	w.violations = append(w.violations, v)
	w.story = append(w.story, "    !! "+v.Invariant+": "+v.Message)
}

// check runs the invariants on the world after a step.
func (w *World) check() {
	w.forget()
	ops := map[string][]*v1.SideEffectOperation{}
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		ops[refOf(op)] = append(ops[refOf(op)], op)
	}
	w.checkOneEffect()
	refs := make([]string, 0, len(ops))
	for ref := range ops {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		list := ops[ref]
		w.checkFirstResult(ref, list)
		effects := w.current(ref)
		for _, op := range list {
			w.checkAccepted(op)
			st := op.Status
			switch st.State {
			case v1.StateCommitted:
				// The effect it names is one of its scope's, of this
				// lifetime, or one that the tool answered this
				// operation's request with (a Native tool replays an
				// effect Once forgot, as after a namespace's deletion,
				// and its answer stays true after its window passes), or
				// that something still answered the key with when the
				// operation committed (I10 judges a commit once, as it is
				// made): a searchable tool's search, which still finds it
				// by its key, or another object of the scope that still
				// holds it (an original that outlived its retention
				// answers its duplicates). One that names none needs some
				// effect.
				expired := st.ExpiryTime != nil && !w.clock.Now().Before(st.ExpiryTime.Time)
				if id := st.ExternalObjectID; id != "" && !expired && w.vouched[op.UID] != id {
					e := w.effectByID(id)
					if e == nil || e.Ref != ref || (e.Epoch != w.epochs[ref] && !slices.Contains(w.answered[op.UID], id) &&
						!w.replays(e) && !w.heldElsewhere(op, e, list) && !w.justForgotten(e)) {
						w.fail(InvCommittedHasEffect, op.Name, "Committed (%s) as %s, which is no effect of %s in this lifetime", protocol.ReadyReason(st), id, ref)
					}
					w.vouched[op.UID] = id
				} else if id == "" && len(sortedEffects(w.ledger, ref)) == 0 {
					w.fail(InvCommittedHasEffect, op.Name, "Committed (%s) with no effect at the tool", protocol.ReadyReason(st))
				}
			case v1.StateFailedFinal:
				// The failure speaks of this request, for as long as its
				// retention: an effect of the same scope with other
				// parameters is another's, and one after it expired is a
				// replay's (I7).
				effects := sameRequest(effects, op)
				if st.ExpiryTime != nil {
					effects = before(effects, st.ExpiryTime.Time)
				}
				// An answer a manager still holds is not known to Once
				// yet: I12 sees that it is recorded. An effect the tool's
				// search hid past its declared delay is not either, until
				// an answer that names it reaches this record.
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
	}
	w.checkCompensated()
	w.checkSagaGone()
	w.checkRecords()
	w.accountGone()
	for _, h := range w.held {
		if h.m.incarnation != h.incarnation {
			h.effect = nil // the process that held it is gone
		}
	}
	w.pruneHeld()
}

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

// checkSagaGone is part of I13: a step stalled because its saga is gone
// (SagaGone) would wait for ever if its saga lived, with that UID and not
// being deleted.
func (w *World) checkSagaGone() {
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		stalled := meta.FindStatusCondition(op.Status.Conditions, v1.ConditionStalled)
		ref := metav1.GetControllerOfNoCopy(op)
		if stalled == nil || stalled.Reason != v1.ReasonSagaGone || ref == nil {
			continue
		}
		for _, s := range w.server.peek(kindSaga) {
			if s.GetUID() == ref.UID && s.GetDeletionTimestamp().IsZero() {
				w.fail(InvLiveness, op.Name, "stalled as %s while saga %s lives: %s", v1.ReasonSagaGone, s.GetName(), stalled.Message)
			}
		}
	}
}

// checkCompensated is I8: no saga is Compensated while a step's effect
// stands.
func (w *World) checkCompensated() {
	for _, o := range w.server.peek(kindSaga) {
		s := o.(*v1.Saga)
		if s.Status.State != v1.StateCompensated {
			continue
		}
		for _, step := range s.Spec.Steps {
			for _, e := range knowable(w.standing(s.Name + "/" + step.Name)) {
				w.fail(InvCompensated, s.Name, "Compensated while step %s's effect %s stands", step.Name, e.ID)
			}
		}
	}
}

// inEpoch names a ref in one lifetime of its key (World.epochs).
func inEpoch(ref string, epoch int) string {
	return fmt.Sprintf("%s#%d", ref, epoch)
}

// inNamespace names a ref in one lifetime of the workload's namespace: a
// step committed before the namespace was deleted still came first for a
// later step whose call was in flight then.
func inNamespace(ref string, lifetime int) string {
	return fmt.Sprintf("%s@%d", ref, lifetime)
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

// heldByLive reports whether a manager that still runs holds the answer
// that names e, not yet recorded.
func (w *World) heldByLive(e *Effect) bool {
	for _, h := range w.held {
		if h.effect == e && h.m.incarnation == h.incarnation {
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

// forget starts a new epoch for every scope that nothing remembers: no
// operation of it knows its outcome and its record's retention has passed
// (I7: a replay after that executes again, as documented).
// A later effect of that scope is a new one, not a second one.
func (w *World) forget() {
	remembered := map[string]bool{}
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		sc := protocol.OperationScope(op)
		w.refs[scopeOf(sc.Tool.Name, sc.Operation, sc.Key)] = refOf(op)
		if op.Status.State == v1.StateCommitted {
			w.committed[inNamespace(refOf(op), w.namespaces)] = true
			if ref := metav1.GetControllerOfNoCopy(op); ref != nil && ref.Kind == "Saga" {
				w.stepCommitted[string(ref.UID)+" "+refOf(op)] = true
			}
		}
		// An operation remembers its scope once it has made an attempt
		// or taken an outcome over; a new one knows nothing yet, nor does a
		// duplicate still waiting for its original, and one refused before
		// any call (other parameters) holds nothing.
		// Its retention bounds that, as it bounds a record's (I7).
		st := op.Status
		expired := st.ExpiryTime != nil && !w.horizon().Before(st.ExpiryTime.Time)
		adopted := st.DuplicateOf != "" && st.State.IsTerminal()
		if (st.Attempts > 0 || adopted || st.State == v1.StateCommitted) && !expired {
			remembered[refOf(op)] = true
		}
		if st.ExpiryTime != nil {
			w.keepUntil(refOf(op), st.ExpiryTime.Time)
		}
	}
	for _, o := range w.server.peek(kindRecord) {
		rec := o.(*v1.IdempotencyRecord)
		ref := w.refs[scopeOf(rec.Spec.ToolRef.Name, rec.Spec.Operation, rec.Spec.IdempotencyKey)]
		at, ok := protocol.RecordExpiry(rec.Spec)
		if !ok || w.horizon().Before(at) {
			remembered[ref] = true
		}
		if ok {
			w.keepUntil(ref, at)
		}
	}
	for _, e := range w.ledger {
		if !remembered[e.Ref] && e.Epoch == w.epochs[e.Ref] && !byHand(e) {
			if !w.opts.SecondLifetimes && !w.wiped[e.Namespace] && !w.lapsed(e.Ref) {
				// A run is shorter than the default retention: a scope
				// forgotten in it, unless a short retention of its own
				// passed, lost its record (I7).
				w.fail(InvRetention, e.Ref, "forgotten within its retention: no operation and no record keeps effect %s", e.ID)
			}
			delete(w.expiries, e.Ref)
			w.epochs[e.Ref]++
			w.began[e.Ref] = w.clock.Now()
			if !w.wiped[e.Namespace] {
				// A key used again in the same namespace starts over; a
				// deleted namespace's steps keep their order for the
				// calls still in flight in it.
				delete(w.committed, inNamespace(e.Ref, e.Namespace))
			}
			w.note("nothing remembers %s any more: a new effect of it is a first one", e.Ref)
		}
	}
}

// keepUntil notes that a scope's outcome is kept until at, at least: an
// operation's expiryTime, or its record's. One that ended before the
// current lifetime of the key began is an earlier lifetime's (its record
// not collected yet), and excuses nothing in this one.
func (w *World) keepUntil(ref string, at time.Time) {
	if at.After(w.expiries[ref]) && at.After(w.began[ref]) {
		w.expiries[ref] = at
	}
}

// horizon is the latest time a manager may judge an expiry by now: one
// manager's clock stamps an expiry and another's reads it, each off by up
// to the skew (Options.ClockSkew). A scope is remembered for sure only
// until twice the skew before its expiry; from then on, a manager may
// already take its key for a new lifetime (I1, I7), and another may still
// answer from the old one for as long again (justForgotten).
func (w *World) horizon() time.Time { return w.clock.Now().Add(2 * w.opts.ClockSkew) }

// justForgotten reports whether e is of the lifetime of its key that
// ended within the skew's window (horizon): a manager whose clock is
// behind may still answer with it from a record, or its cache of one.
func (w *World) justForgotten(e *Effect) bool {
	return e.Epoch == w.epochs[e.Ref]-1 && w.clock.Now().Before(w.began[e.Ref].Add(4*w.opts.ClockSkew))
}

// lapsed reports whether the latest retention seen of a scope in this
// lifetime of its key has passed, as a manager may judge it (horizon): its
// records' short retention (spec.retention, Options.People) ends within a
// run, and forgetting then is what I7 promises, not a breach of it.
func (w *World) lapsed(ref string) bool {
	at, ok := w.expiries[ref]
	return ok && !w.horizon().Before(at)
}

// recordedIn reports whether an operation's status, or an Event about it,
// names the effect.
func (w *World) recordedIn(op *v1.SideEffectOperation, e *Effect) bool {
	st := op.Status
	if st.ExternalObjectID == e.ID {
		return true
	}
	for _, o := range st.Observations {
		if o.ExternalObjectID == e.ID {
			return true
		}
	}
	for _, ev := range w.events {
		if ev.regarding.Name == op.Name && strings.Contains(ev.note, e.ID) {
			return true
		}
	}
	return false
}

// checkHeld runs after a pass of an operation that reached the API server
// throughout: every answer the manager holds for it must now be recorded.
func (w *World) checkHeld(m *Manager, nn types.NamespacedName) {
	op := &v1.SideEffectOperation{}
	exists := w.server.Get(objKey{Kind: kindOperation, NamespacedName: nn}, op) == nil
	for _, h := range w.held {
		if h.effect == nil || h.m != m || h.incarnation != m.incarnation || h.op != nn {
			continue
		}
		if !exists || h.uid != op.UID {
			w.checkHeldAfterGone(h)
			continue
		}
		if w.recordedIn(op, h.effect) {
			h.effect.Known = true
			h.effect = nil
			continue
		}
		w.fail(InvAnswerKept, nn.Name, "manager %s received effect %s at step %d, and its pass ended with %s %s without recording it",
			m.Name, h.effect.ID, h.step, op.Status.State.OrPlanned(), protocol.ReadyReason(op.Status))
		h.effect = nil
	}
}

func (w *World) pruneHeld() {
	kept := w.held[:0]
	for _, h := range w.held {
		if h.effect != nil {
			kept = append(kept, h)
		}
	}
	w.held = kept
}

// standing are the effects of a scope since it was last forgotten that no
// refund undid.
func (w *World) standing(ref string) []*Effect {
	var out []*Effect
	for _, e := range w.current(ref) {
		if e.Vouched {
			// A person said it did not happen (I11: their word).
			continue
		}
		undone := false
		for _, u := range w.ledger {
			if u.Target == e.ID {
				undone = true
			}
		}
		if !undone {
			out = append(out, e)
		}
	}
	return out
}

// checkSagaOrder runs when a tool makes an effect of a saga's step or of
// its compensation.
func (w *World) checkSagaOrder(e *Effect) {
	parts := strings.Split(e.Ref, "/")
	if len(parts) < 2 || byHand(e) {
		// A person undoing an effect by hand keeps an order of their own.
		return
	}
	var steps []v1.SagaStep
	for _, mf := range w.manifests {
		if s, ok := mf.(*v1.Saga); ok && s.Name == parts[0] {
			steps = s.Spec.Steps
		}
	}
	i := slices.IndexFunc(steps, func(s v1.SagaStep) bool { return s.Name == parts[1] })
	if i < 0 {
		return
	}
	if len(parts) == 2 && i > 0 {
		// The step before committed in this lifetime of its key, or under
		// the saga whose step made the effect: a step the saga created
		// then may run much later, after that commit was forgotten.
		prev := parts[0] + "/" + steps[i-1].Name
		if !w.committed[inNamespace(prev, e.Namespace)] && (e.Saga == "" || !w.stepCommitted[string(e.Saga)+" "+prev]) {
			w.fail(InvSagaOrder, e.Ref, "effect %s before step %s committed", e.ID, steps[i-1].Name)
		}
	}
	if len(parts) == 3 {
		for _, later := range steps[i+1:] {
			if st := knowable(w.standing(parts[0] + "/" + later.Name)); len(st) > 0 && later.Compensation != nil {
				w.fail(InvSagaOrder, e.Ref, "compensation %s while the later step %s's effect %s stands", e.ID, later.Name, st[0].ID)
			}
		}
	}
}

// scopeOf names a scope as the simulator maps scopes to the refs of the
// workload: a record names its scope, not its ref.
func scopeOf(tool, operation, key string) string {
	return tool + "/" + operation + "/" + key
}

// checkAnnouncement runs when the subscriber receives an announcement: an
// effect already announced under another id is announced twice.
func (w *World) checkAnnouncement(d Delivery) {
	if d.ExternalObjectID == "" {
		return
	}
	for _, o := range w.deliveries {
		if o.ExternalObjectID == d.ExternalObjectID && o.State == d.State && o.ID != d.ID {
			w.fail(InvOneAnnouncement, d.ExternalObjectID, "%s announced as %s (by %s) and as %s (by %s)",
				d.State, o.ID, o.Name, d.ID, d.Name)
			return
		}
	}
}

// checkDelivered runs once everything has settled: every announcement a
// status says was delivered reached the subscriber, and none is pending.
func (w *World) checkDelivered() {
	received := map[string]bool{}
	for _, d := range w.deliveries {
		received[d.ID] = true
	}
	for _, kind := range []string{kindOperation, kindSaga} {
		for _, o := range w.server.peek(kind) {
			var entries []v1.OutboxEntry
			switch x := o.(type) {
			case *v1.SideEffectOperation:
				entries = x.Status.Outbox
			case *v1.Saga:
				entries = x.Status.Outbox
			}
			for _, e := range entries {
				switch {
				case e.State == v1.DeliveryPending:
					w.fail(InvOneAnnouncement, o.GetName(), "announcement %s still pending after the faults stopped", e.EventID)
				case e.State == v1.DeliveryDelivered && !received[e.EventID]:
					w.fail(InvOneAnnouncement, o.GetName(), "announcement %s recorded as delivered, never received", e.EventID)
				}
			}
		}
	}
}

// byHand reports whether a person made the effect by hand (an undo), not
// Once: no record is meant to keep it.
func byHand(e *Effect) bool {
	return strings.HasSuffix(e.Ref, byHandSuffix)
}
