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

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// AfterCall decides on the answer to an attempt that st claims.
func AfterCall(st v1.SideEffectOperationStatus, p Policy, env Env, r CallResult) Decision {
	if firstCommit(st, r) {
		// The status says all there is: the state, the external ids, the
		// result and its times. No one reviews an operation whose first
		// attempt committed, and the observation (the tool's body among
		// it) would be most of its status.
		return committed(st, p, env, r, true)
	}
	observe(&st, CallObservation(env, v1.ObservationCall, st.Attempts, r))
	switch r.Outcome {
	case v1.OutcomeSucceeded:
		return committed(st, p, env, r, st.Attempts == 1)
	case v1.OutcomePermanent:
		if st.ErrorClass == v1.ErrorOutcomeUnknown && !r.Replayed {
			// An earlier attempt was answered by a gateway that may have
			// passed it on (a Native tool's 502, 503, 504 or 408). This
			// attempt is its same-key re-send. A refusal that is not the
			// tool's replay answers the re-send, not the earlier one.
			return needsReview(st, env, fmt.Sprintf(
				"An earlier attempt may have taken effect and attempt %d, its re-send, was refused with an answer that is not the tool's replay (%s); a person must decide",
				st.Attempts, r.Message))
		}
		return Fail(st, p, env, v1.ErrorPermanent, v1.ReasonRejected, "Tool rejected the request: "+r.Message)
	case v1.OutcomeRetryable:
		if st.Attempts >= p.MaxAttempts {
			if effectPossible(st, r) {
				// An earlier attempt may have taken effect: "failed
				// without effect" would be a guess. Reconcile it.
				return unknown(st, p, env, env.Now,
					"All %d attempts were refused, but one may have taken effect behind a gateway: %s", st.Attempts, r.Message)
			}
			return Fail(st, p, env, v1.ErrorRetryable, v1.ReasonRetriesExhausted,
				fmt.Sprintf("All %d attempts failed without effect; last: %s", st.Attempts, r.Message))
		}
		wait := max(backoff(p, st.Attempts, env), r.RetryAfter)
		st.NextAttemptTime = timePtr(env.Now.Add(wait))
		if effectPossible(st, r) {
			// An effect may exist: retried only because the retry is a
			// same-key re-send, and it stays so for later attempts.
			st.ErrorClass = v1.ErrorOutcomeUnknown
		} else {
			st.ErrorClass = v1.ErrorRetryable
		}
		st.ErrorMessage = r.Message
		msg := fmt.Sprintf("Attempt %d failed without effect and will be retried: %s", st.Attempts, r.Message)
		transition(&st, v1.StateFailedRetryable, v1.ReasonBackingOff, msg, env)
		return Decision{Action: ActionWrite, Status: st, RequeueAfter: wait,
			Event: &Event{Warning: true, Reason: v1.ReasonBackingOff, Message: msg}}
	default:
		// The call has returned: its request left no later than now.
		return unknown(st, p, env, env.Now, "Attempt %d has an unknown outcome: %s", st.Attempts, r.Message)
	}
}

// firstCommit reports whether r commits the first attempt of a status
// that has observed nothing else: the happy path, which keeps no
// observation. An attempt after a retry, a takeover or a person's decision
// keeps its call as evidence, as every unknown outcome does.
func firstCommit(st v1.SideEffectOperationStatus, r CallResult) bool {
	return r.Outcome == v1.OutcomeSucceeded && st.Attempts == 1 && len(st.Observations) == 0
}

// effectPossible reports whether a retryable answer leaves an effect
// possible: it came from a gateway that may have passed the request on
// (r.Relayed), or an earlier attempt's did.
func effectPossible(st v1.SideEffectOperationStatus, r CallResult) bool {
	return r.Relayed || st.ErrorClass == v1.ErrorOutcomeUnknown
}

// AfterResend decides on the answer to a re-send of an unknown attempt to a
// tool that dedupes natively. A 2xx settles it. A refusal settles it only
// when the tool marks it as its replay of the first answer. Otherwise the
// refusal answers the re-send (a rotated credential, a moved route), not
// the attempt, and a person must decide.
func AfterResend(st v1.SideEffectOperationStatus, p Policy, env Env, r CallResult) Decision {
	observe(&st, CallObservation(env, v1.ObservationResend, st.Attempts, r))
	switch {
	case r.Outcome == v1.OutcomeSucceeded:
		return committed(st, p, env, r, false)
	case r.Outcome == v1.OutcomePermanent && r.Replayed:
		return Fail(st, p, env, v1.ErrorPermanent, v1.ReasonRejected, "Tool rejected the request: "+r.Message)
	case r.Outcome == v1.OutcomePermanent:
		return needsReview(st, env, fmt.Sprintf(
			"Attempt %d has an unknown outcome and the re-send was refused with an answer that is not the tool's replay (%s); a person must decide",
			st.Attempts, r.Message))
	default:
		// In flight (409), unavailable, or no answer again: ask later.
		return askLater(st, p, env, r.RetryAfter, r.Message)
	}
}

// AfterLookup decides on the answer to a lookup of an unknown attempt.
func AfterLookup(st v1.SideEffectOperationStatus, p Policy, env Env, r LookupResult) Decision {
	observe(&st, LookupObservation(env, st.Attempts, r))
	switch r.Verdict {
	case VerdictFound:
		return committed(st, p, env, r.Call(), false)
	case VerdictAbsent:
		if st.Attempts >= p.MaxAttempts {
			return Fail(st, p, env, v1.ErrorRetryable, v1.ReasonRetriesExhausted,
				fmt.Sprintf("All %d attempts failed without effect; the last was proven absent", st.Attempts))
		}
		st.NextAttemptTime = timePtr(env.Now)
		st.ErrorClass = v1.ErrorRetryable
		st.ErrorMessage = fmt.Sprintf("Attempt %d was proven absent at the tool", st.Attempts)
		msg := st.ErrorMessage + "; it will be retried"
		transition(&st, v1.StateFailedRetryable, v1.ReasonBackingOff, msg, env)
		return Decision{Action: ActionWrite, Status: st, Event: &Event{Reason: v1.EventProvenAbsent, Message: msg}}
	default:
		return askLater(st, p, env, 0, r.Message)
	}
}

// Call is the found effect as an answer to the attempt.
func (r LookupResult) Call() CallResult {
	return CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: r.HTTPStatus, ExternalObjectID: r.ExternalObjectID,
		ExternalRequestID: r.ExternalRequestID, Result: r.Result, ResultDigest: r.ResultDigest,
		Request: r.Request, Message: r.Message}
}

// askLater keeps reconciling after an answer that settled nothing.
func askLater(st v1.SideEffectOperationStatus, p Policy, env Env, retryAfter time.Duration, why string) Decision {
	wait := max(backoff(p, st.ReconcileAttempts, env), retryAfter)
	st.Claim = nil
	st.NextAttemptTime = timePtr(env.Now.Add(wait))
	msg := fmt.Sprintf("Attempt %d is still unsettled after %d questions: %s", st.Attempts, st.ReconcileAttempts, why)
	transition(&st, v1.StateReconciling, v1.ReasonReconciling, msg, env)
	return Decision{Action: ActionWrite, Status: st, RequeueAfter: wait}
}

// committed is the decision that an effect happened. routine is true for the first attempt's
// own answer, the path every operation takes.
func committed(st v1.SideEffectOperationStatus, p Policy, env Env, r CallResult, routine bool) Decision {
	msg := fmt.Sprintf("Committed after %d attempts", st.Attempts)
	if st.Attempts == 1 {
		msg = "Committed"
	}
	if r.ExternalObjectID != "" {
		msg += " as " + r.ExternalObjectID
	}
	commit(&st, p, env, r, v1.ReasonCommitted, msg)
	return Decision{Action: ActionWrite, Status: st,
		Event: &Event{Reason: v1.ReasonCommitted, Message: msg, Routine: routine}}
}

func commit(st *v1.SideEffectOperationStatus, p Policy, env Env, r CallResult, reason, msg string) {
	st.ExternalObjectID = r.ExternalObjectID
	st.ExternalRequestID = r.ExternalRequestID
	st.Result = r.Result
	st.ResultDigest = r.ResultDigest
	st.CommittedTime = timePtr(env.Now)
	end(st, p, env)
	transition(st, v1.StateCommitted, reason, msg, env)
}

func fail(st *v1.SideEffectOperationStatus, p Policy, env Env, class v1.ErrorClass, reason, msg string) {
	if r := st.Resolution; r != nil && r.Action == v1.ResolutionRetry && reason != v1.ReasonResolvedFailed {
		// A person's Retry vouched that an earlier attempt had no effect:
		// the failure says so, and clients report it as a decision (I11).
		reason = v1.ReasonFailedAfterRetry
		msg += fmt.Sprintf("; that an earlier attempt had no effect rests on the word of %s, who allowed a retry",
			r.Attribution())
	}
	st.ErrorClass = class
	st.ErrorMessage = msg
	end(st, p, env)
	transition(st, v1.StateFailedFinal, reason, msg, env)
}

// Decided reports whether a failure with this Ready reason rests on a
// person's decision, not on a proof that the request had no effect: a Fail
// resolution, or a failure after a Retry a person allowed. Clients (pkg/once,
// the MCP gateway, sagas) report it as a decision (I11).
func Decided(reason string) bool {
	return reason == v1.ReasonResolvedFailed || reason == v1.ReasonFailedAfterRetry
}

// Unproven reports whether a failure with this Ready reason leaves open
// whether the request had an effect: it rests on a person's decision
// (Decided), or a late answer of the tool named an effect after it
// (EffectReported). Clients never report it as "no effect" (I11).
func Unproven(reason string) bool {
	return Decided(reason) || reason == v1.ReasonEffectReported
}

// end closes the status with a completion time and an expiry; what a
// terminal status may not hold, stateFields clears.
func end(st *v1.SideEffectOperationStatus, p Policy, env Env) {
	st.CompletionTime = timePtr(env.Now)
	st.ExpiryTime = timePtr(env.Now.Add(p.Retention))
}

// Fail ends an operation for good, with a warning event. The reason is
// found before any call (an invalid spec, a parameter mismatch), or it is
// an answer that ends the operation (a refusal, the last retry spent).
func Fail(st v1.SideEffectOperationStatus, p Policy, env Env, class v1.ErrorClass, reason, msg string) Decision {
	fail(&st, p, env, class, reason, msg)
	return Decision{Action: ActionWrite, Status: st,
		Event: &Event{Warning: true, Reason: reason, Message: msg}}
}
