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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// ScopeAction is what an operation must do about its scope's record before
// anything else.
type ScopeAction string

const (
	// ScopeProceed: the operation holds the scope. Decide with Next.
	ScopeProceed ScopeAction = "Proceed"
	// ScopeWrite: write Decision.Status (a duplicate, a mismatch, an
	// inherited unknown outcome) and stop.
	ScopeWrite ScopeAction = "Write"
	// ScopeWait: nothing to write. Another operation holds the scope and
	// has not ended.
	ScopeWait ScopeAction = "Wait"
	// ScopeTakeOver: replace the record's spec by Record (the operation
	// takes the scope over from a deleted owner, which it names as the
	// previous owner, in the same write), then write Decision.Status.
	ScopeTakeOver ScopeAction = "TakeOver"
	// ScopeCollect: the record has expired and its owner is gone: delete
	// it, then bind the scope anew.
	ScopeCollect ScopeAction = "Collect"
)

// ScopeDecision is what to do about the scope's record.
type ScopeDecision struct {
	Action   ScopeAction
	Decision Decision
	// Record is the record's new spec, for ScopeTakeOver.
	Record v1.IdempotencyRecordSpec
	// Conflict names the kind of same-key conflict, for metrics:
	// "duplicate" or "parameter_mismatch". It is empty if none.
	Conflict string
}

// Owner is what the operation knows of the record's owner.
type Owner struct {
	// Alive reports whether the owner exists (the record's name and UID).
	Alive bool
	// Outcome is the owner's outcome if it is alive and terminal.
	Outcome *v1.RecordOutcome
	// InReview reports whether the owner is alive and waits for a person.
	InReview bool
}

// Arbitrate decides what the operation self, whose status is st, does
// about its scope's record rec. created reports whether this pass created
// rec. The rules:
//
//   - The operation that holds the record executes. It may have taken the
//     record over from a deleted owner and not recorded that yet. Then it
//     starts from an unknown outcome (the takeover's second write is
//     redone).
//   - A request with other parameters never executes (I4).
//   - While the owner is alive, its outcome is reported when it has one,
//     and waited for when it has not (I5).
//   - Once the owner is gone, the record's outcome is reported until it
//     expires. Then the record is collected and the key is free (I7).
//   - A record whose owner never reached an outcome never expires. The
//     owner may have had an effect, so the next operation takes the
//     record over and reconciles before it may execute (I3).
func Arbitrate(st v1.SideEffectOperationStatus, self v1.RecordOwner, rec v1.IdempotencyRecordSpec,
	created bool, owner Owner, p Policy, env Env) ScopeDecision {
	if created {
		return ScopeDecision{Action: ScopeProceed}
	}
	if rec.Owner.UID == self.UID {
		if prev := rec.PreviousOwner; prev != nil && st.Attempts == 0 && st.State.IsPlanned() {
			return ScopeDecision{Action: ScopeWrite, Decision: Inherit(st, p, env, prev.Name, rec.Attempt)}
		}
		return ScopeDecision{Action: ScopeProceed}
	}
	if !owner.Alive && rec.Outcome != nil && !env.Now.Before(rec.Outcome.ExpiryTime.Time) {
		return ScopeDecision{Action: ScopeCollect}
	}
	if rec.RequestHash != st.RequestHash {
		return ScopeDecision{Action: ScopeWrite, Conflict: "parameter_mismatch",
			Decision: Fail(st, p, env, v1.ErrorConflict, v1.ReasonIdempotencyParameterMismatch, fmt.Sprintf(
				"Idempotency key %q is bound to different parameters by %s (%s, this request is %s); use a new key for a new request",
				st.IdempotencyKey, rec.Owner.Name, shortHash(rec.RequestHash), shortHash(st.RequestHash)))}
	}
	outcome := rec.Outcome
	if owner.Alive {
		outcome = owner.Outcome
	}
	switch {
	case outcome != nil:
		return ScopeDecision{Action: ScopeWrite, Conflict: "duplicate",
			Decision: Adopt(st, p, env, rec.Owner.Name, *outcome)}
	case owner.Alive:
		w := WaitForOriginal(st, env, rec.Owner.Name, owner.InReview)
		if equality.Semantic.DeepEqual(w, st) {
			return ScopeDecision{Action: ScopeWait}
		}
		return ScopeDecision{Action: ScopeWrite, Decision: Decision{Action: ActionWrite, Status: w}}
	default:
		// The owner was deleted before it ended: whether it took effect is
		// unknown. Take the scope over, naming the previous owner in the
		// same write, and reconcile before anything else.
		next := rec
		prev := rec.Owner
		next.Owner = self
		next.PreviousOwner = &prev
		next.Retention.Duration = p.Retention
		return ScopeDecision{Action: ScopeTakeOver, Record: next, Decision: Inherit(st, p, env, prev.Name, rec.Attempt)}
	}
}

// RecordExpiry is when a scope's record may be collected once its owner is
// gone. A record without an outcome has none: its owner never ended, so
// an effect may exist, and time alone proves nothing.
func RecordExpiry(rec v1.IdempotencyRecordSpec) (time.Time, bool) {
	if rec.Outcome == nil {
		return time.Time{}, false
	}
	return rec.Outcome.ExpiryTime.Time, true
}

// shortHash abbreviates a request hash for messages.
func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return "sha256:" + h
}
