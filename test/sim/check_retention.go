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

// Retention: what records remember, and when they may forget.
//
// I7: records outlive the retention; after it, a replay executes again.
// After each step, forget starts a new lifetime of every key that nothing
// remembers. A run shorter than the default retention forgets a key only
// once a shorter retention passed or its namespace went. At each write,
// no record goes, and no operation loses its record finalizer, while the
// operation stands, not being deleted.

import (
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

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

// checkRecordOwed is I7 at each delete of a scope's record: no record
// goes while the operation it names as its owner exists. That operation's
// outcome is owed to the record (its release writes it there), and a
// duplicate of its key reads the record to wait for it. Without it,
// another object of the key may claim the scope.
//
// Two deletes are allowed. A namespace being deleted takes its records
// with it, in any order. And an owner being deleted that never made an
// attempt drops its own record in its release (protocol.ReleaseDelete):
// the record holds no outcome and no earlier owner. Any other delete while
// the owner is being deleted is a stale pass's, acting for another object.
func (w *World) checkRecordOwed(rec *v1.IdempotencyRecord) {
	if ns, ok := w.server.objects[namespaceKey(rec.Namespace)]; !ok || !ns.GetDeletionTimestamp().IsZero() {
		return
	}
	owner := w.operationByUID(rec.Spec.Owner.UID)
	if owner == nil {
		return
	}
	deleting := !owner.DeletionTimestamp.IsZero()
	if deleting && owner.Status.Attempts == 0 && rec.Spec.Outcome == nil && rec.Spec.PreviousOwner == nil {
		return
	}
	how := "stands, not being deleted"
	if deleting {
		how = "is being deleted, after an attempt its release must keep"
	}
	w.fail(InvRetention, rec.Name, "deleted while its owner %s (uid %s) %s, %s at attempt %d",
		owner.Name, owner.UID, how, owner.Status.State.OrPlanned(), owner.Status.Attempts)
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

// scopeOf names a scope as the simulator maps scopes to the refs of the
// workload: a record names its scope, not its ref.
func scopeOf(tool, operation, key string) string {
	return tool + "/" + operation + "/" + key
}
