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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Fence is the claim a call ran under: who held it, in which state, for
// which attempt.
type Fence struct {
	Holder  string
	State   v1.OperationState
	Attempt int32
}

// Fenced reports whether the status st still shows the claim f: only then
// may the worker write its answer as the attempt's outcome (I6).
// Otherwise its answer is late, and Stale decides what it is worth.
func Fenced(st v1.SideEffectOperationStatus, f Fence) bool {
	return st.State == f.State && st.Claim != nil && st.Claim.Holder == f.Holder && st.Claim.Attempt == f.Attempt
}

// Late is what a worker learned from a call after its claim had moved on:
// the answer came after a successor took the attempt over.
type Late struct {
	// Attempt the call was made for.
	Attempt int32
	// Effect is the effect the answer names, when it says one exists (a
	// call that succeeded, a lookup that found it); nil otherwise.
	Effect *CallResult
	// Observation is the answer as evidence.
	Observation v1.Observation
}

// LateVerdict says what a late answer means for the status.
type LateVerdict string

const (
	// LateEvidence: the answer is kept as evidence. The status stands.
	LateEvidence LateVerdict = "Evidence"
	// LateCommits: the answer names the effect of the attempt the status is
	// still about, and no later attempt was claimed. It commits.
	LateCommits LateVerdict = "Commits"
	// LateSecondEffect: the answer names an effect while a later attempt
	// was claimed, or one the status contradicts. There may be two
	// effects, and a person must hear of it at once. The status keeps the
	// answer as evidence.
	LateSecondEffect LateVerdict = "SecondEffect"
	// LateIgnored: the answer is about an attempt the status has not
	// reached. Nothing is written.
	LateIgnored LateVerdict = "Ignored"
)

// Stale decides what a late answer does to the current status cur. It
// never moves a terminal status, and never undoes a later claim: an effect
// it names either is the attempt's own (then it commits, if the status is
// still about that attempt) or it is a second effect, raised.
func Stale(cur v1.SideEffectOperationStatus, p Policy, env Env, l Late) (Decision, LateVerdict) {
	if cur.Attempts < l.Attempt {
		return Decision{Action: ActionWait}, LateIgnored
	}
	o := l.Observation
	o.Kind = v1.ObservationStaleCall
	verdict := LateEvidence
	if e := l.Effect; e != nil {
		switch {
		case cur.State == v1.StateCommitted && sameEffect(cur.ExternalObjectID, e.ExternalObjectID):
			// The status already holds this effect (a tool that dedupes
			// answers every request of the key with it).
		case cur.Attempts == l.Attempt && !cur.State.IsTerminal() && cur.State != v1.StateStarted:
			observe(&cur, o)
			d := committed(cur, p, env, *e, false)
			d.Event.Message += ", by the answer of a worker that had lost its claim"
			return d, LateCommits
		case cur.State == v1.StateFailedFinal && !Unproven(ReadyReason(cur)):
			// The failure said the request had no effect; the tool says
			// otherwise. The status stays terminal, but stops saying so.
			observe(&cur, o)
			msg := fmt.Sprintf("Failed for good (%s), but a late answer to attempt %d names effect %q: "+
				"the effect may stand; a person should look", ReadyReason(cur), l.Attempt, e.ExternalObjectID)
			cur.ErrorMessage = msg
			transition(&cur, v1.StateFailedFinal, v1.ReasonEffectReported, msg, env)
			return Decision{Action: ActionWrite, Status: cur,
				Event: &Event{Warning: true, Reason: v1.ReasonEffectReported, Message: msg}}, LateSecondEffect
		default:
			verdict = LateSecondEffect
		}
	}
	observe(&cur, o)
	return Decision{Action: ActionWrite, Status: cur}, verdict
}

// sameEffect reports whether two external ids may name one effect: they do
// unless both are known and differ.
func sameEffect(a, b string) bool {
	return a == "" || b == "" || a == b
}

// ReadyReason is the reason of an operation's Ready condition: the reason
// its state was reached with.
func ReadyReason(st v1.SideEffectOperationStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// StaleForRecord decides what a late answer does once its operation is
// gone: deleted, or another object under its name now. The answer can
// only go into the scope's record rec (nil if there is none). It goes
// there only where the record still speaks for that operation, self. next
// is the record's new spec, nil if nothing is written. The verdict is
// Stale's. LateSecondEffect is raised at once, whether or not next is
// written. The cases:
//
//   - rec names self as its owner and holds its last attempt as unknown.
//     An answer to that attempt that names an effect commits it there, as
//     Stale commits a status still about that attempt. The next operation
//     of the scope then reports it instead of reconciling. An answer to an
//     earlier attempt may name a second effect, which is raised. So may an
//     answer to an attempt the record does not count (kept before it
//     counted them).
//   - rec names self as its owner with an outcome. This is as Stale on a
//     terminal status. The same effect changes nothing. A failure that
//     said "no effect" stops saying so (EffectReported). Any other effect
//     is raised.
//   - rec names another owner, or none is left. The answer has no place.
//     An effect is raised: the owner that took the scope over from self
//     reconciles the attempt, but a person must know what this answer
//     says. Anything else is evidence, logged.
func StaleForRecord(rec *v1.IdempotencyRecordSpec, self types.UID, l Late, now time.Time) (
	next *v1.IdempotencyRecordSpec, verdict LateVerdict) {
	if rec == nil || rec.Owner.UID != self {
		if l.Effect != nil {
			return nil, LateSecondEffect
		}
		return nil, LateEvidence
	}
	if o := rec.Outcome; o != nil {
		return staleForOutcome(rec, o, l)
	}
	attempts := int32(0)
	if rec.Attempt != nil {
		attempts = rec.Attempt.Attempts
	}
	switch {
	case attempts > 0 && l.Attempt > attempts:
		return nil, LateIgnored
	case l.Effect == nil:
		return nil, LateEvidence
	case attempts == 0 || l.Attempt < attempts:
		return nil, LateSecondEffect
	}
	e := l.Effect
	out := *rec.DeepCopy()
	out.Outcome = &v1.RecordOutcome{State: v1.StateCommitted, Attempts: attempts,
		ExternalObjectID: e.ExternalObjectID, ExternalRequestID: e.ExternalRequestID,
		Result: e.Result.DeepCopy(), ResultDigest: e.ResultDigest, Reason: v1.ReasonCommitted,
		CompletionTime: metav1.NewTime(now), ExpiryTime: metav1.NewTime(now.Add(rec.Retention.Duration))}
	out.Attempt = nil
	return &out, LateCommits
}

// staleForOutcome is StaleForRecord on a record that holds its owner's
// outcome: Stale's rules for a terminal status.
func staleForOutcome(rec *v1.IdempotencyRecordSpec, o *v1.RecordOutcome, l Late) (
	*v1.IdempotencyRecordSpec, LateVerdict) {
	e := l.Effect
	switch {
	case o.Attempts < l.Attempt:
		return nil, LateIgnored
	case e == nil:
		return nil, LateEvidence
	case o.State == v1.StateCommitted && sameEffect(o.ExternalObjectID, e.ExternalObjectID):
		return nil, LateEvidence
	case o.State == v1.StateFailedFinal && !Unproven(o.Reason):
		out := *rec.DeepCopy()
		out.Outcome.ErrorMessage = fmt.Sprintf("Failed for good (%s), but a late answer to attempt %d names effect %q: "+
			"the effect may stand; a person should look", o.Reason, l.Attempt, e.ExternalObjectID)
		out.Outcome.Reason = v1.ReasonEffectReported
		return &out, LateSecondEffect
	default:
		return nil, LateSecondEffect
	}
}
