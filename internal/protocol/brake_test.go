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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestBrakes holds the brakes people set to what is safe: suspend holds
// every call but a lookup, and cancel fails only what provably had no
// effect.
func TestBrakes(t *testing.T) {
	failed := v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 2,
		ErrorClass: v1.ErrorRetryable, IdempotencyMode: v1.IdempotencyNative}
	unknownNative := v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1,
		ErrorClass: v1.ErrorOutcomeUnknown, IdempotencyMode: v1.IdempotencyNative, StartedTime: at(-time.Minute)}
	unknownLookup := v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1,
		ErrorClass: v1.ErrorOutcomeUnknown, IdempotencyMode: v1.IdempotencyLookup, StartedTime: at(-time.Minute)}
	// A retry of an unknown outcome as a same-key re-send, which a tool
	// that dedupes makes safe: its earlier attempt may have taken effect.
	failedUnknown := v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1,
		ErrorClass: v1.ErrorOutcomeUnknown, IdempotencyMode: v1.IdempotencyNative, StartedTime: at(-time.Minute)}
	review := v1.SideEffectOperationStatus{State: v1.StateNeedsReview, Attempts: 2, ObservedGeneration: 1}
	retry := &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}

	cases := map[string]struct {
		reason    string
		st        v1.SideEffectOperationStatus
		mode      v1.IdempotencyMode
		res       *v1.Resolution
		gen       int64
		suspended string
		cancel    bool
		want      view
	}{
		"SuspendHoldsFirstAttempt": {
			reason:    "A suspended operation claims nothing; its state stays Planned and it is not stalled.",
			mode:      v1.IdempotencyNative,
			suspended: "Tool pay",
			want: view{Action: ActionWrite, State: v1.StatePlanned, Reason: v1.ReasonSuspended,
				Ready: condFalse, Stalled: condFalse},
		},
		"SuspendHoldsRetry": {
			reason:    "A retry after a failure that provably had no effect waits too.",
			st:        failed,
			mode:      v1.IdempotencyNative,
			suspended: "the operation",
			want: view{Action: ActionWrite, State: v1.StateFailedRetryable, Attempts: 2, Reason: v1.ReasonSuspended,
				Ready: condFalse, Stalled: condFalse},
		},
		"SuspendHoldsResend": {
			reason:    "An unknown outcome that only a re-send settles waits: a re-send may make the effect.",
			st:        unknownNative,
			mode:      v1.IdempotencyNative,
			suspended: "Tool pay",
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 1, Reason: v1.ReasonSuspended,
				Ready: condFalse, Stalled: condFalse},
		},
		"SuspendLetsLookupRun": {
			reason:    "A lookup makes no effect, and settles the unknown outcome: it runs while suspended.",
			st:        unknownLookup,
			mode:      v1.IdempotencyLookup,
			suspended: "Tool pay",
			want: view{Action: ActionLookup, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				Claimed: true, Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"SuspendLetsPersonsRetryRun": {
			reason:    "A person's Retry, written while suspended, is the person's decision: it is applied.",
			st:        review,
			res:       retry,
			gen:       2,
			mode:      v1.IdempotencyNative,
			suspended: "Tool pay",
			want: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 3, Claimed: true,
				Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse},
		},
		"CancelBeforeAnyAttemptFails": {
			reason: "Nothing was sent: the operation fails, Cancelled, with no call.",
			mode:   v1.IdempotencyNative,
			cancel: true,
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Reason: v1.ReasonCancelled,
				Ready: condFalse, Stalled: condTrue},
		},
		"CancelAfterProvenFailuresFails": {
			reason: "Every attempt provably had no effect: the operation fails, Cancelled, with no retry.",
			st:     failed,
			mode:   v1.IdempotencyNative,
			cancel: true,
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Attempts: 2, Reason: v1.ReasonCancelled,
				Ready: condFalse, Stalled: condTrue},
		},
		"CancelOfUnknownResendGoesToPerson": {
			reason: "Only a re-send could settle the outcome, and it could make the effect: a person decides.",
			st:     unknownNative,
			mode:   v1.IdempotencyNative,
			cancel: true,
			want: view{Action: ActionWrite, State: v1.StateNeedsReview, Attempts: 1, Reason: v1.ReasonNeedsReview,
				Ready: condFalse, Stalled: condTrue},
		},
		"CancelOfUnknownRetryGoesToPerson": {
			reason: "A retry that is a same-key re-send of an unknown outcome is no proof of no effect: a person decides.",
			st:     failedUnknown,
			mode:   v1.IdempotencyNative,
			cancel: true,
			want: view{Action: ActionWrite, State: v1.StateNeedsReview, Attempts: 1, Reason: v1.ReasonNeedsReview,
				Ready: condFalse, Stalled: condTrue},
		},
		"CancelLetsLookupRun": {
			reason: "A lookup settles what happened before the cancel, and makes no effect.",
			st:     unknownLookup,
			mode:   v1.IdempotencyLookup,
			cancel: true,
			want: view{Action: ActionLookup, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				Claimed: true, Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"CancelBeatsSuspend": {
			reason: "A cancelled operation that is also suspended fails where it safely can: nothing waits for a resume.",
			mode:   v1.IdempotencyNative, cancel: true, suspended: "Tool pay",
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Reason: v1.ReasonCancelled,
				Ready: condFalse, Stalled: condTrue},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := env()
			e.Suspended, e.Cancel = tc.suspended, tc.cancel
			if tc.gen != 0 {
				e.Generation = tc.gen
			}
			got := viewOf(Next(tc.st, tc.res, policy(tc.mode), e))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nNext(...) mismatch (-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

// TestSuspendWritesOnce holds that a suspended operation's status is
// written once: a pass that finds it already says so writes nothing, until
// the spec changes.
func TestSuspendWritesOnce(t *testing.T) {
	e := env()
	e.Suspended = "Tool pay"
	first := Next(v1.SideEffectOperationStatus{}, nil, policy(v1.IdempotencyNative), e)
	if first.Action != ActionWrite {
		t.Fatalf("first pass: %s, want Write", first.Action)
	}
	if first.Event == nil || !first.Event.Routine {
		t.Errorf("first pass's event: %+v, want a routine one (a Tool's suspend holds all its operations)", first.Event)
	}
	if again := Next(first.Status, nil, policy(v1.IdempotencyNative), e); again.Action != ActionWait {
		t.Errorf("second pass over the written status: %s, want Wait", again.Action)
	}
	e.Generation = 2
	if edited := Next(first.Status, nil, policy(v1.IdempotencyNative), e); edited.Action != ActionWrite {
		t.Errorf("after a spec edit: %s, want Write (observedGeneration moves on)", edited.Action)
	}
	e.Generation, e.Suspended = 1, ""
	if resumed := Next(first.Status, nil, policy(v1.IdempotencyNative), e); resumed.Action != ActionExecute {
		t.Errorf("resumed: %s, want Execute", resumed.Action)
	}
}
