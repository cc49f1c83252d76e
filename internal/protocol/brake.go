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

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The brakes people set: suspend and cancel. Both act on a decision to
// call the tool, before its claim is written, and only where that is safe.
//
//   - A lookup is never held. It makes no effect, and it is how an unknown
//     outcome is settled.
//   - A first attempt, a retry and a re-send wait while the operation or
//     its tool is suspended. The status says so; the state stays as it is.
//   - A cancelled operation that no attempt of may have taken effect
//     fails with reason Cancelled and makes no call.
//   - A cancelled operation whose earlier attempt may have taken effect,
//     and that only a re-send could settle, goes to a person: a re-send
//     could make the effect the cancel asked to stop.
//   - A person's resolution of a review is applied as it is. The person
//     decided after the brake was set.

// brake applies suspend and cancel to d, the decision Next made from st.
func brake(st v1.SideEffectOperationStatus, d Decision, p Policy, env Env) Decision {
	if st.State == v1.StateNeedsReview || (d.Action != ActionExecute && d.Action != ActionResend) {
		return d
	}
	if env.Cancel {
		return cancel(st, d, p, env)
	}
	if env.Suspended != "" {
		return suspended(st, d, env)
	}
	return d
}

// cancel is what a cancelled operation does instead of the call d.
func cancel(st v1.SideEffectOperationStatus, d Decision, p Policy, env Env) Decision {
	switch {
	case st.Attempts == 0:
		return Fail(st, p, env, v1.ErrorCancelled, v1.ReasonCancelled,
			"Cancelled before any attempt: no request was sent")
	case d.Action == ActionExecute && st.ErrorClass != v1.ErrorOutcomeUnknown:
		return Fail(st, p, env, v1.ErrorCancelled, v1.ReasonCancelled, fmt.Sprintf(
			"Cancelled after %d attempts that provably had no effect: no request was sent after the cancel", st.Attempts))
	}
	return needsReview(st, env, fmt.Sprintf(
		"Attempt %d may have taken effect, and the operation was cancelled: only a re-send with the same key could settle it, "+
			"and a re-send could make the effect now; a person must decide", st.Attempts))
}

// suspended is the status that holds the call d while someone suspended
// it. Nothing is written if the status says so already.
func suspended(st v1.SideEffectOperationStatus, d Decision, env Env) Decision {
	what := "attempt 1"
	switch {
	case d.Action == ActionResend:
		what = fmt.Sprintf("the re-send that settles attempt %d", st.Attempts)
	case st.Attempts > 0:
		what = fmt.Sprintf("attempt %d", st.Attempts+1)
	}
	msg := fmt.Sprintf("Suspended by %s (spec.suspend): %s waits until it is resumed", env.Suspended, what)
	if ReadyReason(st) == v1.ReasonSuspended && readyMessage(st.Conditions) == msg && st.ObservedGeneration == env.Generation {
		return Decision{Action: ActionWait}
	}
	// Routine: a person set the brake, and a Tool's suspend holds every
	// operation of it. An Event for each would flood the namespace.
	return Decision{Action: ActionWrite, Status: Waiting(st, env, v1.ReasonSuspended, msg),
		Event: &Event{Routine: true, Reason: v1.ReasonSuspended, Message: msg}}
}
