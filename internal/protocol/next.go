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
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Next decides what to do with an operation that no call of this worker is
// in flight for. res is the object's spec.resolution. A call it decides on
// waits while the operation or its tool is suspended, and a cancelled
// operation makes none where that is safe (brake).
func Next(st v1.SideEffectOperationStatus, res *v1.Resolution, p Policy, env Env) Decision {
	return brake(st, next(st, res, p, env), p, env)
}

// next is what Next decides, brakes aside.
func next(st v1.SideEffectOperationStatus, res *v1.Resolution, p Policy, env Env) Decision {
	switch st.State {
	case "", v1.StatePlanned:
		return execute(st, p, env, false)
	case v1.StateStarted:
		return nextStarted(st, p, env)
	case v1.StateFailedRetryable:
		if wait := until(st.NextAttemptTime, env.Now); wait > 0 {
			return Decision{Action: ActionWait, RequeueAfter: wait}
		}
		if mode, _ := attemptMode(st, p, env); st.ErrorClass == v1.ErrorOutcomeUnknown && mode != v1.IdempotencyNative {
			// The retry was safe as a same-key re-send to a tool that
			// dedupes; the tool no longer says it does. Reconcile the
			// earlier attempt the way its mode allows instead.
			return unknown(st, p, env, env.Now,
				"Attempt %d may have taken effect and the tool no longer dedupes; its outcome is unknown", st.Attempts)
		}
		return execute(st, p, env, true)
	case v1.StateUnknown:
		return nextUnknown(st, p, env)
	case v1.StateReconciling:
		return nextReconciling(st, p, env)
	case v1.StateNeedsReview:
		return nextNeedsReview(st, res, p, env)
	case v1.StateCommitted, v1.StateFailedFinal, v1.StateCompensated:
		return Decision{Action: ActionDone}
	default:
		// Compensating belongs to sagas; an operation never enters it on
		// its own, so there is nothing to decide.
		return Decision{Action: ActionWait}
	}
}

// NeedsTool reports whether deciding on st needs the tool: everything but a
// terminal operation and a person's MarkCommitted or Fail, which must be
// applied even while the tool is missing or broken.
func NeedsTool(st v1.SideEffectOperationStatus, res *v1.Resolution, env Env) bool {
	if st.State.IsTerminal() {
		return false
	}
	if st.State == v1.StateNeedsReview {
		return resolutionPending(st, res, env) && res.Action == v1.ResolutionRetry
	}
	return true
}

// attemptMode is how the current attempt's unknown outcome may be
// reconciled. It is the way the mode the attempt was made under allows, if
// the tool still promises the same. Only a person can settle an outcome
// when the tool's promise changed while it was unknown:
//
//   - None to Native: the first request was never deduped.
//   - Native to None: a re-send would no longer be.
//   - Another endpoint, key header, body or lookup: a re-send or a lookup
//     would ask something else.
//
// Only a person can settle a Native attempt either, when its re-send would
// reach the tool after it forgot the key (docs/design.md, "What a re-send
// and a lookup rest on"). why says which, when the mode is None for it.
func attemptMode(st v1.SideEffectOperationStatus, p Policy, env Env) (mode v1.IdempotencyMode, why string) {
	switch {
	case st.IdempotencyMode != "" && st.IdempotencyMode != p.Mode:
		return v1.IdempotencyNone, fmt.Sprintf("the tool's mode changed from %s to %s since it was made", st.IdempotencyMode, p.Mode)
	case st.Promise != "" && st.Promise != promiseUnknown && st.Promise != p.Promise:
		return v1.IdempotencyNone, "the tool's description changed since it was made, so a re-send or a lookup would ask something else"
	case st.Promise == promiseUnknown && p.Mode == v1.IdempotencyNative:
		// Taken over from a record that does not say when the key was
		// first sent (one written before attempts were pinned).
		return v1.IdempotencyNone, "it was taken over from a record that does not say when its key was first sent, " +
			"so a re-send may come after the tool's dedupe window"
	case p.Mode == v1.IdempotencyNative && st.StartedTime != nil &&
		!env.Now.Add(p.ClaimDuration).Before(st.StartedTime.Add(p.DedupeWindow)):
		// A re-send leaves before its claim ends, and the tool's window
		// runs from the key's first request, no earlier than the first
		// claim.
		return v1.IdempotencyNone, fmt.Sprintf("a re-send would reach the tool after its dedupe window of %s from the key's first request",
			p.DedupeWindow)
	}
	return p.Mode, ""
}

// execute claims the next attempt, under the tool's current mode.
func execute(st v1.SideEffectOperationStatus, p Policy, env Env, retry bool) Decision {
	st.Attempts++
	st.ReconcileAttempts = 0
	st.NextAttemptTime = nil
	st.IdempotencyMode = p.Mode
	st.Promise = p.Promise
	st.Claim = newClaim(env, p, st.Attempts)
	if st.StartedTime == nil {
		st.StartedTime = timePtr(env.Now)
	}
	msg := claimedMessage(st.Attempts)
	transition(&st, v1.StateStarted, v1.ReasonExecuting, msg, env)
	return Decision{Action: ActionExecute, Status: st, Retry: retry,
		Event: &Event{Reason: v1.EventClaimed, Message: msg, Routine: st.Attempts == 1}}
}

// claimedMessage is the message of a claim of attempt: it says no more
// than its reason (Executing) and its attempt, so the history does not keep
// it (addTransition).
func claimedMessage(attempt int32) string {
	return fmt.Sprintf("Attempt %d claimed", attempt)
}

func nextStarted(st v1.SideEffectOperationStatus, p Policy, env Env) Decision {
	c := st.Claim
	switch {
	case c == nil:
		// A Started status always carries its claim; without one nothing
		// tells whether or until when a call was made, so the outcome is
		// unknown and a request may leave as late as any claim allows.
		return unknown(st, p, env, env.Now.Add(p.MaxClaimDuration),
			"Attempt %d lost its claim; its outcome is unknown", st.Attempts)
	case c.Holder == env.Holder:
		// This worker holds the claim but runs no call for it: the call
		// was abandoned (the pass crashed or its outcome write failed).
		// Its request could have left until the claim ends.
		return unknown(st, p, env, c.ExpiryTime.Time,
			"Attempt %d was abandoned by its worker; its outcome is unknown", c.Attempt)
	case env.Now.Before(c.ExpiryTime.Time):
		return Decision{Action: ActionWait, RequeueAfter: c.ExpiryTime.Sub(env.Now)}
	default:
		observeExpiredClaim(&st, env, c, "Claim expired while the attempt was in progress")
		return unknown(st, p, env, c.ExpiryTime.Time, "Claim of attempt %d expired; its outcome is unknown", c.Attempt)
	}
}

// unknown marks the current attempt's outcome unknown. lastSend
// is the latest moment its request could have left: a worker never sends
// past its claim. In Lookup mode the first question waits until lookupDelay
// after that, when the attempt can no longer be in flight at the tool nor
// missing from its lookups, so that an absent answer proves absence.
func unknown(st v1.SideEffectOperationStatus, p Policy, env Env, lastSend time.Time, format string, args ...any) Decision {
	st.Claim = nil
	st.NextAttemptTime = nil
	// The attempt's own mode, not whether the tool promises the same now:
	// a tool whose description changes back before the question is asked
	// must still not be asked before the delay has passed.
	if cmp.Or(st.IdempotencyMode, p.Mode) == v1.IdempotencyLookup {
		if at := lastSend.Add(p.LookupDelay + p.ClockMargin); at.After(env.Now) {
			// Status times keep whole seconds: round up, never down, or
			// the lookup could come before the delay has passed.
			st.NextAttemptTime = timePtr(ceilSecond(at))
		}
	}
	if st.UnknownTime == nil {
		st.UnknownTime = timePtr(env.Now)
	}
	st.ErrorClass = v1.ErrorOutcomeUnknown
	msg := fmt.Sprintf(format, args...)
	st.ErrorMessage = msg
	transition(&st, v1.StateUnknown, v1.ReasonOutcomeUnknown, msg, env)
	return Decision{Action: ActionWrite, Status: st, RequeueAfter: until(st.NextAttemptTime, env.Now),
		Event: &Event{Warning: true, Reason: v1.ReasonOutcomeUnknown, Message: msg}}
}

func nextUnknown(st v1.SideEffectOperationStatus, p Policy, env Env) Decision {
	if wait := until(st.NextAttemptTime, env.Now); wait > 0 {
		return Decision{Action: ActionWait, RequeueAfter: wait}
	}
	return reconcileUnknown(st, p, env)
}

func nextReconciling(st v1.SideEffectOperationStatus, p Policy, env Env) Decision {
	c := st.Claim
	if c == nil {
		if wait := until(st.NextAttemptTime, env.Now); wait > 0 {
			return Decision{Action: ActionWait, RequeueAfter: wait}
		}
		return reconcileUnknown(st, p, env)
	}
	if c.Holder != env.Holder && env.Now.Before(c.ExpiryTime.Time) {
		return Decision{Action: ActionWait, RequeueAfter: c.ExpiryTime.Sub(env.Now)}
	}
	// The question was claimed and never answered: its worker died or gave
	// up. Say so in the evidence, and ask again.
	observeExpiredClaim(&st, env, c, "Claim expired while the tool was being asked")
	return reconcileUnknown(st, p, env)
}

// observeExpiredClaim notes, as evidence, a claim whose holder went
// silent.
func observeExpiredClaim(st *v1.SideEffectOperationStatus, env Env, c *v1.Claim, msg string) {
	observe(st, v1.Observation{Time: metav1.NewTime(env.Now), Kind: v1.ObservationClaimExpired,
		Attempt: c.Attempt, Holder: c.Holder, Outcome: string(v1.OutcomeUnknown), Message: msg})
}

// reconcileUnknown asks the tool about the unknown attempt, as the
// attempt's mode allows, or hands the operation to a person.
func reconcileUnknown(st v1.SideEffectOperationStatus, p Policy, env Env) Decision {
	mode, why := attemptMode(st, p, env)
	if mode == v1.IdempotencyNone {
		if why == "" {
			why = "the tool can neither dedupe nor be asked"
		}
		return needsReview(st, env, fmt.Sprintf(
			"Attempt %d has an unknown outcome and %s; a person must decide", st.Attempts, why))
	}
	if st.ReconcileAttempts >= p.ReconcileLimit {
		return needsReview(st, env, fmt.Sprintf(
			"Attempt %d has an unknown outcome and %d questions to the tool did not settle it; a person must decide",
			st.Attempts, st.ReconcileAttempts))
	}
	st.ReconcileAttempts++
	st.NextAttemptTime = nil
	st.Claim = newClaim(env, p, st.Attempts)
	action, how := ActionLookup, "looking it up by key"
	if mode == v1.IdempotencyNative {
		action, how = ActionResend, "re-sending it with the same key"
	}
	msg := fmt.Sprintf("Reconciling attempt %d by %s", st.Attempts, how)
	transition(&st, v1.StateReconciling, v1.ReasonReconciling, msg, env)
	return Decision{Action: action, Status: st}
}

// promiseUnknown is the promise of an attempt taken over from a record
// that does not say what the attempt rested on.
const promiseUnknown = "unknown"

// Blocked is the status that says the operation waits for something outside it (a
// missing or broken tool): the state does not change, Stalled is True.
func Blocked(st v1.SideEffectOperationStatus, env Env, reason, msg string) v1.SideEffectOperationStatus {
	st.State = st.State.OrPlanned()
	setConditions(&st, reason, msg, true, env)
	return st
}

// Waiting is the status that says the operation's next call waits for
// something that comes by itself (its namespace's share of the workers):
// the state does not change, and it is not stalled.
func Waiting(st v1.SideEffectOperationStatus, env Env, reason, msg string) v1.SideEffectOperationStatus {
	st.State = st.State.OrPlanned()
	setConditions(&st, reason, msg, false, env)
	return st
}

// newClaim is a claim of attempt from now. Its expiry is rounded up to a
// whole second, as status times are kept: the holder's fence and its
// successors read the same instant, and the holder loses none of its time
// to send.
func newClaim(env Env, p Policy, attempt int32) *v1.Claim {
	now := metav1.NewTime(env.Now)
	return &v1.Claim{Holder: env.Holder, Attempt: attempt, AcquireTime: now, RenewTime: now,
		ExpiryTime: metav1.NewTime(ceilSecond(env.Now.Add(p.ClaimDuration)))}
}

// Renew extends the claim st holds for this worker.
func Renew(st v1.SideEffectOperationStatus, p Policy, env Env) v1.SideEffectOperationStatus {
	c := *st.Claim
	c.RenewTime = metav1.NewTime(env.Now)
	c.ExpiryTime = metav1.NewTime(ceilSecond(env.Now.Add(p.ClaimDuration)))
	st.Claim = &c
	return st
}

// backoff is exponential with full jitter: a uniform draw below
// min(MaxBackoff, InitialBackoff·2^(n-1)).
func backoff(p Policy, n int32, env Env) time.Duration {
	ceiling := p.InitialBackoff
	for i := int32(1); i < n && ceiling < p.MaxBackoff; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxBackoff)
	if env.Jitter == nil {
		return ceiling
	}
	return env.Jitter(ceiling)
}

func until(t *metav1.Time, now time.Time) time.Duration {
	if t == nil || !t.After(now) {
		return 0
	}
	return t.Sub(now)
}

// ceilSecond rounds t up to a whole second, as status times are kept.
func ceilSecond(t time.Time) time.Time {
	if r := t.Truncate(time.Second); !r.Equal(t) {
		return r.Add(time.Second)
	}
	return t
}

func timePtr(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
