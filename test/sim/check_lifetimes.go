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
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// The invariants checked here hold across an object's lifetime: at each
// write the API server stores, at each request a tool receives, and after
// the object is gone.
const (
	// InvClaimFirst (I2): no call before a claim of that attempt is
	// durably written.
	InvClaimFirst = "I2 no call before a durable claim"
	// InvParameters (I4): the same key with other parameters never
	// executes.
	InvParameters = "I4 other parameters never execute"
	// InvFirstResult (I5): the same key with the same parameters returns
	// the first result.
	InvFirstResult = "I5 the same request returns the first result"
	// InvNoStaleWrite (I6): a stale worker cannot overwrite a newer
	// attempt's status.
	InvNoStaleWrite = "I6 no stale write"
)

// history is what the API server stored over a run, kept by the world as
// each write lands (APIServer.Observe): what a check needs once the
// object that held it is gone.
type history struct {
	// claims holds every claim an operation's status held: its UID, its
	// holder and its attempt.
	claims map[claimKey]bool
	// announced holds, by event id, the last state an outbox entry had
	// and the lifetime of the namespace it was written in.
	announced map[string]announcement
}

type claimKey struct {
	uid     string
	holder  string
	attempt int32
}

type announcement struct {
	object    string
	state     v1.DeliveryState
	namespace int
}

// observe is the API server's hook: it runs at every stored write,
// before the write is visible, with the object as it was and as it is
// (nil when absent).
func (w *World) observe(old, cur client.Object) {
	if cur == nil {
		if rec, ok := old.(*v1.IdempotencyRecord); ok {
			w.checkRecordOwed(rec)
		}
		return
	}
	switch o := cur.(type) {
	case *v1.SideEffectOperation:
		if c := o.Status.Claim; c != nil {
			w.history.claims[claimKey{uid: string(o.UID), holder: c.Holder, attempt: c.Attempt}] = true
		}
		w.noteAnnouncements(o.Name, o.Status.Outbox)
		if prev, ok := old.(*v1.SideEffectOperation); ok && prev.UID == o.UID {
			w.checkStaleWrite(prev, o)
			w.checkFinalizerKept(prev, o)
		}
	case *v1.Saga:
		w.noteAnnouncements(o.Name, o.Status.Outbox)
	}
}

func (w *World) noteAnnouncements(object string, entries []v1.OutboxEntry) {
	for _, e := range entries {
		w.history.announced[e.EventID] = announcement{object: object, state: e.State, namespace: w.namespaces}
	}
}

// checkStaleWrite is I6 at each write of an operation's status: the
// attempts never go back, nor the claim's attempt, and a terminal outcome
// stays as it is (terminal means terminal: a late answer may add evidence,
// never change the state or the effect).
func (w *World) checkStaleWrite(prev, cur *v1.SideEffectOperation) {
	ps, cs := prev.Status, cur.Status
	switch {
	case cs.Attempts < ps.Attempts:
		w.fail(InvNoStaleWrite, cur.Name, "a write took attempts back from %d to %d", ps.Attempts, cs.Attempts)
	case ps.Claim != nil && cs.Claim != nil && cs.Claim.Attempt < ps.Claim.Attempt:
		w.fail(InvNoStaleWrite, cur.Name, "a write took the claim back from attempt %d (%s) to %d (%s)",
			ps.Claim.Attempt, ps.Claim.Holder, cs.Claim.Attempt, cs.Claim.Holder)
	case ps.State.IsTerminal() && (cs.State != ps.State || cs.ExternalObjectID != ps.ExternalObjectID):
		w.fail(InvNoStaleWrite, cur.Name, "a write changed the terminal outcome %s %q to %s %q",
			ps.State, ps.ExternalObjectID, cs.State.OrPlanned(), cs.ExternalObjectID)
	}
}

// checkRecordOwed is I7 at each delete of a scope's record: no record
// goes while the operation it names as its owner stands, not being
// deleted. That operation's outcome is owed to the record (its release
// writes it there), and a duplicate of its key reads the record to wait
// for it; without it, another object of the key may claim the scope. A
// namespace being deleted takes its records with it, in any order.
func (w *World) checkRecordOwed(rec *v1.IdempotencyRecord) {
	if ns, ok := w.server.objects[namespaceKey(rec.Namespace)]; !ok || !ns.GetDeletionTimestamp().IsZero() {
		return
	}
	owner := w.operationByUID(rec.Spec.Owner.UID)
	if owner == nil || !owner.DeletionTimestamp.IsZero() {
		return
	}
	w.fail(InvRetention, rec.Name, "deleted while its owner %s (uid %s) stands, not being deleted, %s at attempt %d",
		owner.Name, owner.UID, owner.Status.State.OrPlanned(), owner.Status.Attempts)
}

// checkFinalizerKept is I7 at each write of an operation: the finalizer
// that keeps its outcome for its scope's record goes only in its release,
// once it is being deleted. Removed from an operation that stands, it
// lets the outcome go with the object later, never reaching the record.
func (w *World) checkFinalizerKept(prev, cur *v1.SideEffectOperation) {
	if cur.DeletionTimestamp.IsZero() && slices.Contains(prev.Finalizers, v1.FinalizerRecord) &&
		!slices.Contains(cur.Finalizers, v1.FinalizerRecord) {
		w.fail(InvRetention, cur.Name, "its finalizer %s was removed while it stands, not being deleted (uid %s, %s)",
			v1.FinalizerRecord, cur.UID, cur.Status.State.OrPlanned())
	}
}

// checkClaimed is I2, when a request of an operation's pass is about to
// reach its tool: the pass's holder wrote a claim on this object before,
// and the API server stored it. A request that leaves after its claim
// expired still had one (the fence and the tool's contract bound what it
// may do); one that never had a claim is the violation.
func (w *World) checkClaimed(pr *passRun, what string) {
	if pr == nil || pr.req.ctrl != ctrlOperation || pr.uid == "" {
		return
	}
	holder := pr.m.holderOf(pr.incarnation)
	for k := range w.history.claims {
		if k.uid == string(pr.uid) && k.holder == holder {
			return
		}
	}
	w.fail(InvClaimFirst, pr.req.Name, "%s sent %s without a claim of its own ever stored", holder, what)
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

// keptAfterGone reports whether an answer naming e is in a scope's record
// or an Event now, and marks e known if it is.
func (w *World) keptAfterGone(e *Effect) bool {
	for _, o := range w.server.peek(kindRecord) {
		if out := o.(*v1.IdempotencyRecord).Spec.Outcome; out != nil && out.ExternalObjectID == e.ID {
			e.Known = true
			return true
		}
	}
	for _, ev := range w.events {
		if strings.Contains(ev.note, e.ID) {
			e.Known = true
			return true
		}
	}
	return false
}

// accountGone clears, after each step, the held answers that a status, a
// record or an Event keeps already: a write whose answer was lost may have
// landed, and what is kept may go later by its retention, which forgets
// on purpose (I7). An answer of an operation that still exists is cleared
// once its status names the effect; one of an operation that went, once a
// record or an Event does.
func (w *World) accountGone() {
	for _, h := range w.held {
		if h.effect == nil {
			continue
		}
		if op := w.operationByUID(h.uid); op != nil {
			if w.recordedIn(op, h.effect) {
				h.effect.Known, h.effect = true, nil
			}
			continue
		}
		if w.keptAfterGone(h.effect) {
			h.effect = nil
		}
	}
}

// operationByUID is the operation with that UID, or nil.
func (w *World) operationByUID(uid types.UID) *v1.SideEffectOperation {
	for _, o := range w.server.peek(kindOperation) {
		if o.GetUID() == uid {
			return o.(*v1.SideEffectOperation)
		}
	}
	return nil
}

// checkAnnounced is I15 after the objects are gone: every announcement an
// object held was delivered, or given up by the relay, whether or not
// the object still exists. A namespace a person deleted took its
// subscribers' sink with it (the sink is a Tool of that namespace).
func (w *World) checkAnnounced() {
	received := map[string]bool{}
	for _, d := range w.deliveries {
		received[d.ID] = true
	}
	ids := make([]string, 0, len(w.history.announced))
	for id := range w.history.announced {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := w.history.announced[id]
		if received[id] || a.state == v1.DeliveryFailed || w.wiped[a.namespace] {
			continue
		}
		w.fail(InvOneAnnouncement, a.object, "announcement %s was last stored %s, and never received", id, a.state)
	}
}

// checkHeldAfterGone is I12 for an answer whose operation went (deleted, or
// replaced by another object of its name) before the pass that holds it
// ended: the answer is in the scope's record, or raised in an Event that
// names its effect. A namespace a person deleted forgot it on purpose.
func (w *World) checkHeldAfterGone(h *heldAnswer) {
	e := h.effect
	h.effect = nil
	if w.wiped[e.Namespace] || w.keptAfterGone(e) {
		return
	}
	w.fail(InvAnswerKept, h.op.Name, "manager %s received effect %s at step %d for an object that went (uid %s), "+
		"and its pass ended without it in the scope's record or an Event", h.m.Name, e.ID, h.step, h.uid)
}
