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
	"cmp"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Adopt makes st report the outcome of the operation it duplicates, which
// ended in o, as the scope's record keeps it. No call is made.
func Adopt(st v1.SideEffectOperationStatus, p Policy, env Env, original string, o v1.RecordOutcome) Decision {
	st.DuplicateOf = original
	st.Attempts = 0
	st.ExternalObjectID = o.ExternalObjectID
	st.ExternalRequestID = o.ExternalRequestID
	st.Result = o.Result
	st.ResultDigest = o.ResultDigest
	st.ErrorClass = o.ErrorClass
	st.ErrorMessage = o.ErrorMessage
	if r := o.Resolution; r != nil {
		// The outcome rests on a person's decision: the duplicate says
		// who decided, as the original does (I11).
		st.Resolution = adoptedResolution(r, o.ExternalObjectID)
	}
	end(&st, p, env)
	if !o.ExpiryTime.IsZero() {
		// A duplicate reports the scope's outcome for as long as the scope
		// keeps it, no longer: a replay after that executes again (I7),
		// and a duplicate that outlived it would say otherwise.
		st.ExpiryTime = o.ExpiryTime.DeepCopy()
	}
	state, msg := o.State, fmt.Sprintf("Duplicate of %s, which ended %s", original, o.State)
	if state == v1.StateCommitted {
		st.CommittedTime = timePtr(env.Now)
	}
	reason := v1.ReasonDuplicate
	if Unproven(o.Reason) {
		// A person's decision is not a proof that nothing happened, nor is
		// a failure the tool contradicted: the duplicate reports it as the
		// original does, so that no client reads "no effect" into it (I11).
		reason = o.Reason
		msg = fmt.Sprintf("Duplicate of %s, which ended on a person's decision: %s", original, o.ErrorMessage)
		if o.Reason == v1.ReasonEffectReported {
			msg = fmt.Sprintf("Duplicate of %s, whose failure the tool contradicted: %s", original, o.ErrorMessage)
		}
	}
	transition(&st, state, reason, msg, env)
	return Decision{Action: ActionWrite, Status: st, Event: &Event{Reason: v1.ReasonDuplicate, Message: msg}}
}

// adoptedResolution is the original's applied resolution, as its record
// keeps it, for a duplicate's status. A resolution is applied out of
// NeedsReview only; a MarkCommitted one named the effect the outcome
// holds. Its generation is none of the duplicate's: nothing of the
// duplicate's own spec was applied.
func adoptedResolution(r *v1.RecordResolution, externalObjectID string) *v1.AppliedResolution {
	a := &v1.AppliedResolution{Resolution: v1.Resolution{Action: r.Action, By: r.By, User: r.User, Reason: r.Reason},
		Time: r.Time, FromState: v1.StateNeedsReview}
	if r.Action == v1.ResolutionMarkCommitted {
		a.ExternalObjectID = externalObjectID
	}
	return a
}

// WaitForOriginal is the status that says st duplicates an operation that has not
// ended yet.
func WaitForOriginal(st v1.SideEffectOperationStatus, env Env, original string, inReview bool) v1.SideEffectOperationStatus {
	st.DuplicateOf = original
	msg := fmt.Sprintf("Duplicate of %s; waiting for it to end", original)
	if inReview {
		// The original waits for a person, and so does its duplicate:
		// Stalled, so that kubectl wait, Flux and Argo CD see it (I13).
		msg = fmt.Sprintf("Duplicate of %s, which needs review: resolve %s", original, original)
	}
	transitionBlocked(&st, v1.StatePlanned, v1.ReasonWaitingForOriginal, msg, inReview, env)
	return st
}

// Inherit starts st from an unknown outcome. st took over a scope whose
// previous owner was deleted before it ended, so an effect may exist. The
// previous owner's worker may still send its request until its claim
// ends, which can be as late as the longest claim from now.
func Inherit(st v1.SideEffectOperationStatus, p Policy, env Env, previous string, pin *v1.RecordAttempt) Decision {
	st.Attempts = max(st.Attempts, 1)
	// The inherited attempt is reconciled as it was made. A record kept
	// before attempts were pinned says nothing: the tool's present mode
	// stands in for the attempt's, as it did before, but nothing says when
	// its key was first sent (attemptMode).
	st.IdempotencyMode, st.Promise = p.Mode, promiseUnknown
	if pin != nil {
		st.IdempotencyMode = cmp.Or(pin.Mode, p.Mode)
		st.Promise = pin.Promise
		if pin.StartedTime != nil {
			st.StartedTime = pin.StartedTime.DeepCopy()
		}
		if r := pin.Resolution; r != nil && st.Resolution == nil {
			// A person's Retry vouched that an earlier attempt of the
			// deleted owner had no effect: a failure here rests on that
			// word too, and says so (I11).
			st.Resolution = adoptedResolution(r, "")
		}
	}
	if st.StartedTime == nil && !env.RecordCreated.IsZero() {
		// The record does not say when the key was first sent. Either its
		// owner was deleted before the record it bound was written (a
		// pass that read it alive wrote it after), or the record was kept
		// before attempts were pinned. A lookup must not take an effect
		// of an earlier lifetime of the key for this one's (since). So
		// the record's creation (the API server's clock) stands in for
		// the first attempt.
		//
		// An attempt bound to the record came after it, but for two cases
		// where it may have come before:
		//   - a name's holder handed a record made after its claim, whose
		//     deletion pins the attempt.
		//   - a record that an operation whose key is its name kept at its
		//     deletion, before attempts were pinned.
		//
		// In those two the time is late. A lookup then rejects this
		// lifetime's effect made before it, and a person decides. found
		// alone reads since. A Native re-send of an attempt pinned
		// without a time goes by the window from it, where it went by
		// none.
		st.StartedTime = &metav1.Time{Time: env.RecordCreated}
	}
	return unknown(st, p, env, env.Now.Add(p.MaxClaimDuration),
		"Takes over the key from %s, deleted before it ended; whether it took effect is unknown", previous)
}
