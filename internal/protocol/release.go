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

package protocol

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// NameKeyed reports whether an operation's key is its own name. Object
// names are unique in a namespace, so while such an operation exists no
// other object has its name, and its scope needs no record: the object is
// the index. Only an operation whose key is some other object's name can
// share its scope, and that one checks for the name's holder (see
// HolderMayExecute).
func NameKeyed(key, name string) bool {
	return key == "" || key == name
}

// HolderMayExecute reports whether the operation that holds a key as its
// name must own the scope rather than an operation that uses the same key
// explicitly and has just bound the record. The holder may have read "no
// record" and claimed in between. It owns the scope if it has made an
// attempt, or may still make one. It may still make one when it is
// neither terminal nor being deleted: a terminating operation never
// claims. A holder that a person cancelled owns it too: the key's request
// was cancelled, and the other operation reports that, as its release
// keeps it in the record (AtDeletion).
func HolderMayExecute(holder v1.SideEffectOperationStatus, terminating bool) bool {
	return holder.Attempts > 0 || cancelledItself(holder) || (!holder.State.IsTerminal() && !terminating)
}

// cancelledItself reports whether a person's cancel ended the operation,
// not one it copied from another object of its key.
func cancelledItself(st v1.SideEffectOperationStatus) bool {
	return st.State == v1.StateFailedFinal && st.ErrorClass == v1.ErrorCancelled && st.DuplicateOf == ""
}

// ReleaseAction is what a deleted operation does before its finalizer goes.
type ReleaseAction string

const (
	// ReleaseNow: nothing to keep. Remove the finalizer.
	ReleaseNow ReleaseAction = "Now"
	// ReleaseWait: a claim is live and its answer may still be written.
	// Decide again after Wait.
	ReleaseWait ReleaseAction = "Wait"
	// ReleaseCreate: create the scope's record as Record, then release.
	ReleaseCreate ReleaseAction = "Create"
	// ReleaseUpdate: replace the record's spec by Record (conditional on
	// the version read), then release.
	ReleaseUpdate ReleaseAction = "Update"
	// ReleaseDelete: delete the record (conditional on the version read),
	// then release. The record names this operation, which never made an
	// attempt. Left standing, it would send the next operation of the
	// scope to reconcile an effect that cannot exist.
	ReleaseDelete ReleaseAction = "Delete"
)

// Release is what a deleted operation writes before it goes.
type Release struct {
	Action ReleaseAction
	Record v1.IdempotencyRecordSpec
	Wait   time.Duration
}

// AtDeletion decides what the deleted operation self, whose status is st,
// keeps in its scope's record rec (nil if there is none) before its
// finalizer is removed. own is the record it would write: its scope, its
// request hash, itself as owner, its retention, and its outcome if it has
// one. The rules:
//
//   - A live claim is waited for. The worker holding it will write its
//     answer, which must reach the record.
//   - A cancel keeps its outcome, attempts or none: the key's request was
//     cancelled, and a replay within the retention says so. Without it,
//     the same manifest applied again (a GitOps tool re-creating what a
//     TTL deleted) would execute what a person cancelled. It never takes
//     a record that names another owner.
//   - Any other operation that made no attempt, or duplicated another,
//     had no effect of its own. It has nothing to keep. A record may name it,
//     bound with a shared key or handed to it as the holder of the key's
//     name. Such a record with no outcome and no previous owner goes. The
//     next operation of the scope then binds it afresh instead of
//     reconciling.
//   - An operation that made an attempt makes sure the record names it
//     with its outcome. The outcome is none if it never ended. The next
//     operation then takes over and reconciles before anything else. A
//     record that names another owner is taken. That owner bound the
//     record after this operation claimed (a key that is this operation's
//     name). It defers to this operation once it sees the change.
//   - An outcome past its retention goes only into a record that names
//     this operation. There it ends the lifetime: the next operation
//     collects it and executes afresh. It never goes into a new record or
//     one that names another owner. Nothing remembers that outcome any
//     more (I7). The scope's record may already be a later lifetime's,
//     bound by an operation that executed again. Say a pass read this
//     operation before another manager released it, and writes late.
//     Without this rule, it would take that record and put the old
//     outcome back. The next request of the key, with other parameters,
//     would find it expired and execute. That is a second effect in the
//     new lifetime.
func AtDeletion(st v1.SideEffectOperationStatus, self v1.RecordOwner, rec *v1.IdempotencyRecordSpec,
	own v1.IdempotencyRecordSpec, now time.Time) Release {
	if c := st.Claim; c != nil && !st.State.IsTerminal() && now.Before(c.ExpiryTime.Time) {
		return Release{Action: ReleaseWait, Wait: c.ExpiryTime.Sub(now)}
	}
	expired := st.State.IsTerminal() && st.ExpiryTime != nil && !now.Before(st.ExpiryTime.Time)
	if expired && (rec == nil || rec.Owner.UID != self.UID) {
		return Release{Action: ReleaseNow}
	}
	if st.Attempts == 0 && cancelledItself(st) {
		if rec != nil && rec.Owner.UID != self.UID {
			return Release{Action: ReleaseNow}
		}
	} else if st.Attempts == 0 || st.DuplicateOf != "" {
		if st.Attempts == 0 && rec != nil && rec.Owner.UID == self.UID && rec.Outcome == nil && rec.PreviousOwner == nil {
			return Release{Action: ReleaseDelete}
		}
		return Release{Action: ReleaseNow}
	}
	switch {
	case rec == nil:
		return Release{Action: ReleaseCreate, Record: own}
	case rec.Owner.UID != self.UID:
		return Release{Action: ReleaseUpdate, Record: own}
	case rec.Outcome == nil && (own.Outcome != nil || !equality.Semantic.DeepEqual(rec.Attempt, own.Attempt)):
		next := *rec
		next.Outcome, next.Attempt = own.Outcome, own.Attempt
		return Release{Action: ReleaseUpdate, Record: next}
	default:
		return Release{Action: ReleaseNow}
	}
}

// Holds describes the effect a scope's record may stand for at now, as a
// saga reads the record of a step it never started. It may be the outcome
// of an earlier operation of the key, while it is kept. It may be an
// attempt whose outcome nobody learned. It is empty when the record proves
// nothing stands: no attempt, a failure that establishes no effect, or an
// outcome past its retention, which the key has forgotten.
func Holds(rec v1.IdempotencyRecordSpec, now time.Time) string {
	o := rec.Outcome
	switch {
	case o == nil && rec.Attempt != nil:
		return fmt.Sprintf("operation %s made an attempt whose outcome is unknown", rec.Owner.Name)
	case o == nil || !now.Before(o.ExpiryTime.Time):
		return ""
	case o.State == v1.StateCommitted:
		return fmt.Sprintf("operation %s committed effect %q", rec.Owner.Name, o.ExternalObjectID)
	case o.State == v1.StateFailedFinal && !Unproven(o.Reason):
		return ""
	}
	return fmt.Sprintf("operation %s ended %s (%s) without proof that it had no effect", rec.Owner.Name, o.State, o.Reason)
}
