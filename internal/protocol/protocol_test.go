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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var (
	now  = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	self = "worker-a"
)

// env is deterministic: jitter returns its ceiling.
func env() Env {
	return Env{Now: now, Holder: self, Generation: 1, Jitter: func(d time.Duration) time.Duration { return d }}
}

func policy(mode v1.IdempotencyMode) Policy {
	return Policy{Mode: mode, MaxAttempts: 3, ReconcileLimit: 2, InitialBackoff: time.Second,
		MaxBackoff: 10 * time.Second, ClaimDuration: 40 * time.Second, LookupDelay: 30 * time.Second,
		Retention: time.Hour, DedupeWindow: 24 * time.Hour}
}

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(d))
	return &t
}

func claim(holder string, attempt int32, acquired, expires time.Duration) *v1.Claim {
	return &v1.Claim{Holder: holder, Attempt: attempt, AcquireTime: *at(acquired), RenewTime: *at(acquired),
		ExpiryTime: *at(expires)}
}

// view is the part of a decision the tables assert on.
type view struct {
	Action            Action
	State             v1.OperationState
	Attempts          int32
	ReconcileAttempts int32
	Claimed           bool
	Reason            string
	Ready             metav1.ConditionStatus
	Stalled           metav1.ConditionStatus
	RequeueAfter      time.Duration
	NextAttemptIn     time.Duration
	Retry             bool
	ExternalObjectID  string
}

func viewOf(d Decision) view {
	v := view{Action: d.Action, RequeueAfter: d.RequeueAfter, Retry: d.Retry}
	if d.Action == ActionWait || d.Action == ActionDone {
		return v
	}
	st := d.Status
	v.State, v.Attempts, v.ReconcileAttempts = st.State, st.Attempts, st.ReconcileAttempts
	v.Claimed = st.Claim != nil && st.Claim.Holder == self && st.Claim.Attempt == st.Attempts &&
		st.Claim.ExpiryTime.Equal(at(40*time.Second))
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		v.Reason, v.Ready = c.Reason, c.Status
	}
	if len(st.Conditions) > 0 {
		// Stalled is there only while True; kstatus reads it absent as
		// False.
		v.Stalled = metav1.ConditionFalse
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionStalled); c != nil {
		v.Stalled = c.Status
	}
	if st.NextAttemptTime != nil {
		v.NextAttemptIn = st.NextAttemptTime.Sub(now)
	}
	v.ExternalObjectID = st.ExternalObjectID
	return v
}

const (
	condTrue  = metav1.ConditionTrue
	condFalse = metav1.ConditionFalse
)

func TestNext(t *testing.T) {
	type args struct {
		st   v1.SideEffectOperationStatus
		res  *v1.Resolution
		mode v1.IdempotencyMode
		gen  int64
	}
	mark := &v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_9", By: "alice"}
	retry := &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	failIt := &v1.Resolution{Action: v1.ResolutionFail, By: "alice"}
	review := v1.SideEffectOperationStatus{State: v1.StateNeedsReview, Attempts: 2, ObservedGeneration: 1}
	cases := map[string]struct {
		reason string
		args   args
		want   view
	}{
		"NewClaimsFirstAttempt": {
			reason: "A new operation claims attempt 1 before any call (I2).",
			args:   args{mode: v1.IdempotencyNative},
			want: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 1, Claimed: true,
				Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse},
		},
		"PlannedClaimsFirstAttempt": {
			reason: "A duplicate that stopped waiting is Planned and claims like a new one.",
			args:   args{st: v1.SideEffectOperationStatus{State: v1.StatePlanned}, mode: v1.IdempotencyNone},
			want: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 1, Claimed: true,
				Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse},
		},
		"StartedOthersLiveClaimWaits": {
			reason: "Another worker's unexpired claim is respected until it expires.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1,
				Claim: claim("worker-b", 1, -5*time.Second, 25*time.Second)}, mode: v1.IdempotencyNative},
			want: view{Action: ActionWait, RequeueAfter: 25 * time.Second},
		},
		"StartedExpiredClaimIsUnknown": {
			reason: "A claim that expired mid-call leaves the attempt's outcome unknown, never failed.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1,
				Claim: claim("worker-b", 1, -60*time.Second, -1*time.Second)}, mode: v1.IdempotencyNative},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 1,
				Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
		"StartedOwnAbandonedClaimIsUnknown": {
			reason: "This worker's own claim with no call in flight was abandoned: unknown at once; its request could have left until the claim's end, so the first lookup counts from there.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 2,
				Claim: claim(self, 2, -5*time.Second, 25*time.Second)}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 2, NextAttemptIn: 55 * time.Second,
				RequeueAfter: 55 * time.Second, Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
		"StartedExpiredClaimLookupWaitsFromExpiry": {
			reason: "A stalled worker may send until its claim expires: the first lookup counts from the expiry.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1,
				Claim: claim("worker-b", 1, -60*time.Second, -10*time.Second)}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 1, NextAttemptIn: 20 * time.Second,
				RequeueAfter: 20 * time.Second, Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
		"StartedWithoutClaimIsUnknown": {
			reason: "A Started status without its claim cannot tell whether a call was made.",
			args:   args{st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1}, mode: v1.IdempotencyNone},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 1,
				Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
		"FailedRetryableWaitsForBackoff": {
			reason: "A retry waits for its backoff.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1,
				NextAttemptTime: at(3 * time.Second)}, mode: v1.IdempotencyNative},
			want: view{Action: ActionWait, RequeueAfter: 3 * time.Second},
		},
		"FailedRetryableRetriesWhenDue": {
			reason: "A due retry claims the next attempt and is marked for the retry budget.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1,
				NextAttemptTime: at(-time.Second)}, mode: v1.IdempotencyNone},
			want: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 2, Claimed: true, Retry: true,
				Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse},
		},
		"UnknownNativeResends": {
			reason: "A Native tool is asked again with the same key, under a new claim (I3).",
			args:   args{st: v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1}, mode: v1.IdempotencyNative},
			want: view{Action: ActionResend, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				Claimed: true, Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"UnknownLookupLooksUp": {
			reason: "A Lookup tool is asked by key, under a new claim (I3).",
			args:   args{st: v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionLookup, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				Claimed: true, Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"UnknownLookupWaitsForLookupDelay": {
			reason: "A lookup before the attempt can have landed would prove nothing.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1,
				NextAttemptTime: at(10 * time.Second)}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionWait, RequeueAfter: 10 * time.Second},
		},
		"UnknownNoneNeedsReview": {
			reason: "A tool that can neither dedupe nor be asked leaves it to a person.",
			args:   args{st: v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1}, mode: v1.IdempotencyNone},
			want: view{Action: ActionWrite, State: v1.StateNeedsReview, Attempts: 1,
				Reason: v1.ReasonNeedsReview, Ready: condFalse, Stalled: condTrue},
		},
		"ReconcilingOthersLiveClaimWaits": {
			reason: "Another worker is reconciling.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				Claim: claim("worker-b", 1, -time.Second, 9*time.Second)}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionWait, RequeueAfter: 9 * time.Second},
		},
		"ReconcilingBacksOff": {
			reason: "An unsettled reconciliation asks again after its backoff.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				NextAttemptTime: at(2 * time.Second)}, mode: v1.IdempotencyNative},
			want: view{Action: ActionWait, RequeueAfter: 2 * time.Second},
		},
		"ReconcilingAsksAgainWhenDue": {
			reason: "A due reconciliation asks again, counting the question.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				NextAttemptTime: at(-time.Second)}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionLookup, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 2,
				Claimed: true, Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"ReconcilingExpiredClaimAsksAgain": {
			reason: "A reconciler that died is replaced after its claim expires.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				Claim: claim("worker-b", 1, -60*time.Second, -time.Second)}, mode: v1.IdempotencyNative},
			want: view{Action: ActionResend, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 2,
				Claimed: true, Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"ReconcilingLimitNeedsReview": {
			reason: "After the reconcile limit a person decides.",
			args: args{st: v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 2,
				NextAttemptTime: at(-time.Second)}, mode: v1.IdempotencyLookup},
			want: view{Action: ActionWrite, State: v1.StateNeedsReview, Attempts: 1, ReconcileAttempts: 2,
				Reason: v1.ReasonNeedsReview, Ready: condFalse, Stalled: condTrue},
		},
		"NeedsReviewWaitsForAPerson": {
			reason: "Nothing but a resolution leaves NeedsReview.",
			args:   args{st: review, mode: v1.IdempotencyLookup, gen: 1},
			want:   view{Action: ActionWait},
		},
		"NeedsReviewIgnoresAnEarlierResolution": {
			reason: "A resolution already there when the status was last written is not applied; a review " +
				"that began without earlierResolutions keeps it there.",
			args: args{st: review, res: retry, mode: v1.IdempotencyNone, gen: 1},
			want: view{Action: ActionWrite, State: v1.StateNeedsReview, Attempts: 2},
		},
		"NeedsReviewMarkCommitted": {
			reason: "A person's MarkCommitted records the effect they found.",
			args:   args{st: review, res: mark, mode: v1.IdempotencyNone, gen: 2},
			want: view{Action: ActionWrite, State: v1.StateCommitted, Attempts: 2, ExternalObjectID: "ch_9",
				Reason: v1.ReasonResolvedCommitted, Ready: condTrue, Stalled: condFalse},
		},
		"NeedsReviewRetry": {
			reason: "A person's Retry claims one more attempt; it bypasses the retry budget.",
			args:   args{st: review, res: retry, mode: v1.IdempotencyNone, gen: 2},
			want: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 3, Claimed: true,
				Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse},
		},
		"NeedsReviewFail": {
			reason: "A person's Fail ends the operation.",
			args:   args{st: review, res: failIt, mode: v1.IdempotencyNative, gen: 2},
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Attempts: 2,
				Reason: v1.ReasonResolvedFailed, Ready: condFalse, Stalled: condTrue},
		},
		"CommittedIsDone":   {reason: "Terminal stays terminal.", args: args{st: v1.SideEffectOperationStatus{State: v1.StateCommitted}, res: retry, gen: 5}, want: view{Action: ActionDone}},
		"FailedFinalIsDone": {reason: "Terminal stays terminal.", args: args{st: v1.SideEffectOperationStatus{State: v1.StateFailedFinal}, res: retry, gen: 5}, want: view{Action: ActionDone}},
		"CompensatedIsDone": {reason: "Terminal stays terminal.", args: args{st: v1.SideEffectOperationStatus{State: v1.StateCompensated}}, want: view{Action: ActionDone}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := env()
			e.Generation = max(tc.args.gen, 1)
			got := viewOf(Next(tc.args.st, tc.args.res, policy(tc.args.mode), e))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nNext(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAfterCall(t *testing.T) {
	started := func(attempt int32) v1.SideEffectOperationStatus {
		return v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: attempt,
			Claim: claim(self, attempt, -time.Second, 39*time.Second)}
	}
	cases := map[string]struct {
		reason string
		st     v1.SideEffectOperationStatus
		mode   v1.IdempotencyMode
		r      CallResult
		want   view
	}{
		"SucceededCommits": {
			reason: "A success is Committed with the external id.",
			st:     started(1), mode: v1.IdempotencyNative,
			r: CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201, ExternalObjectID: "ch_1"},
			want: view{Action: ActionWrite, State: v1.StateCommitted, Attempts: 1, ExternalObjectID: "ch_1",
				Reason: v1.ReasonCommitted, Ready: condTrue, Stalled: condFalse},
		},
		"PermanentFailsFinal": {
			reason: "A 4xx rejection fails the operation for good.",
			st:     started(1), mode: v1.IdempotencyLookup,
			r: CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 422},
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Attempts: 1,
				Reason: v1.ReasonRejected, Ready: condFalse, Stalled: condTrue},
		},
		"RetryableBacksOff": {
			reason: "A refusal without effect backs off exponentially: attempt 2 waits up to 2s.",
			st:     started(2), mode: v1.IdempotencyNone,
			r: CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 503},
			want: view{Action: ActionWrite, State: v1.StateFailedRetryable, Attempts: 2,
				NextAttemptIn: 2 * time.Second, RequeueAfter: 2 * time.Second,
				Reason: v1.ReasonBackingOff, Ready: condFalse, Stalled: condFalse},
		},
		"RetryableHonoursRetryAfter": {
			reason: "Retry-After wins over a shorter backoff.",
			st:     started(1), mode: v1.IdempotencyNative,
			r: CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 429, RetryAfter: 7 * time.Second},
			want: view{Action: ActionWrite, State: v1.StateFailedRetryable, Attempts: 1,
				NextAttemptIn: 7 * time.Second, RequeueAfter: 7 * time.Second,
				Reason: v1.ReasonBackingOff, Ready: condFalse, Stalled: condFalse},
		},
		"RetryableAtMaxAttemptsFails": {
			reason: "The last allowed attempt failing without effect ends the operation.",
			st:     started(3), mode: v1.IdempotencyNative,
			r: CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 429},
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Attempts: 3,
				Reason: v1.ReasonRetriesExhausted, Ready: condFalse, Stalled: condTrue},
		},
		"UnknownIsUnknownNotRetryable": {
			reason: "A timeout after the request was sent is an unknown outcome (I3).",
			st:     started(1), mode: v1.IdempotencyNative,
			r: CallResult{Outcome: v1.OutcomeUnknown},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 1,
				Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
		"UnknownAtMaxAttemptsIsStillUnknown": {
			reason: "Attempts are spent, but an unknown outcome is reconciled, not failed.",
			st:     started(3), mode: v1.IdempotencyNone,
			r: CallResult{Outcome: v1.OutcomeUnknown},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 3,
				Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
		"UnknownLookupSchedulesTheFirstLookup": {
			reason: "In Lookup mode the first lookup waits until the attempt cannot be in flight.",
			st:     started(1), mode: v1.IdempotencyLookup,
			r: CallResult{Outcome: v1.OutcomeUnknown},
			want: view{Action: ActionWrite, State: v1.StateUnknown, Attempts: 1,
				NextAttemptIn: 30 * time.Second, RequeueAfter: 30 * time.Second,
				Reason: v1.ReasonOutcomeUnknown, Ready: condFalse, Stalled: condFalse},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := viewOf(AfterCall(tc.st, policy(tc.mode), env(), tc.r))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAfterCall(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAfterResend(t *testing.T) {
	reconciling := v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 2,
		Claim: claim(self, 1, 0, 40*time.Second)}
	cases := map[string]struct {
		reason string
		r      CallResult
		want   view
	}{
		"FirstResultCommits": {
			reason: "The tool answers a re-send with the first result.",
			r:      CallResult{Outcome: v1.OutcomeSucceeded, ExternalObjectID: "ch_1"},
			want: view{Action: ActionWrite, State: v1.StateCommitted, Attempts: 1, ReconcileAttempts: 2,
				ExternalObjectID: "ch_1", Reason: v1.ReasonCommitted, Ready: condTrue, Stalled: condFalse},
		},
		"ReplayedRejectionFails": {
			reason: "A first answer that was a rejection, replayed as the tool marks it, fails the operation.",
			r:      CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 402, Replayed: true},
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Attempts: 1, ReconcileAttempts: 2,
				Reason: v1.ReasonRejected, Ready: condFalse, Stalled: condTrue},
		},
		"UnmarkedRejectionNeedsReview": {
			reason: "Sequence 5: a 401/403/404 to a re-send (a rotated credential, a moved route) answers the re-send, not the attempt: a person decides.",
			r:      CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 401},
			want: view{Action: ActionWrite, State: v1.StateNeedsReview, Attempts: 1, ReconcileAttempts: 2,
				Reason: v1.ReasonNeedsReview, Ready: condFalse, Stalled: condTrue},
		},
		"InFlightAsksLater": {
			reason: "409: the first request is still in flight; wait and ask again.",
			r:      CallResult{Outcome: v1.OutcomeUnknown, HTTPStatus: 409},
			want: view{Action: ActionWrite, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 2,
				NextAttemptIn: 2 * time.Second, RequeueAfter: 2 * time.Second,
				Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
		"NoAnswerAsksLater": {
			reason: "A re-send that is lost too settles nothing.",
			r:      CallResult{Outcome: v1.OutcomeUnknown},
			want: view{Action: ActionWrite, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 2,
				NextAttemptIn: 2 * time.Second, RequeueAfter: 2 * time.Second,
				Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := viewOf(AfterResend(reconciling, policy(v1.IdempotencyNative), env(), tc.r))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAfterResend(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAfterLookup(t *testing.T) {
	reconciling := func(attempt int32) v1.SideEffectOperationStatus {
		return v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: attempt, ReconcileAttempts: 1,
			Claim: claim(self, attempt, 0, 40*time.Second)}
	}
	cases := map[string]struct {
		reason string
		st     v1.SideEffectOperationStatus
		r      LookupResult
		want   view
	}{
		"FoundCommits": {
			reason: "Found: the effect exists; Committed with its id, no second call.",
			st:     reconciling(1), r: LookupResult{Verdict: VerdictFound, ExternalObjectID: "tk_7"},
			want: view{Action: ActionWrite, State: v1.StateCommitted, Attempts: 1, ReconcileAttempts: 1,
				ExternalObjectID: "tk_7", Reason: v1.ReasonCommitted, Ready: condTrue, Stalled: condFalse},
		},
		"AbsentRetriesSafely": {
			reason: "Proven absent: a safe retry, due now, through the retry budget.",
			st:     reconciling(1), r: LookupResult{Verdict: VerdictAbsent, HTTPStatus: 404},
			want: view{Action: ActionWrite, State: v1.StateFailedRetryable, Attempts: 1, ReconcileAttempts: 1,
				Reason: v1.ReasonBackingOff, Ready: condFalse, Stalled: condFalse},
		},
		"AbsentAtMaxAttemptsFails": {
			reason: "Proven absent with no attempts left: failed, and provably without effect.",
			st:     reconciling(3), r: LookupResult{Verdict: VerdictAbsent, HTTPStatus: 404},
			want: view{Action: ActionWrite, State: v1.StateFailedFinal, Attempts: 3, ReconcileAttempts: 1,
				Reason: v1.ReasonRetriesExhausted, Ready: condFalse, Stalled: condTrue},
		},
		"UndecidableAsksLater": {
			reason: "A failed or ambiguous lookup keeps reconciling with backoff.",
			st:     reconciling(1), r: LookupResult{Verdict: VerdictUndecidable, HTTPStatus: 503},
			want: view{Action: ActionWrite, State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
				NextAttemptIn: time.Second, RequeueAfter: time.Second,
				Reason: v1.ReasonReconciling, Ready: condFalse, Stalled: condFalse},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := viewOf(AfterLookup(tc.st, policy(v1.IdempotencyLookup), env(), tc.r))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAfterLookup(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestInvariants runs every state against every mode and resolution, and
// every answer against every mode, and checks the rules that must hold
// whatever the table above says.
func TestInvariants(t *testing.T) {
	modes := []v1.IdempotencyMode{v1.IdempotencyNative, v1.IdempotencyLookup, v1.IdempotencyNone}
	states := []v1.OperationState{"", v1.StatePlanned, v1.StateStarted, v1.StateCommitted,
		v1.StateFailedRetryable, v1.StateFailedFinal, v1.StateUnknown, v1.StateReconciling,
		v1.StateNeedsReview, v1.StateCompensating, v1.StateCompensated}
	claims := map[string]*v1.Claim{
		"none":       nil,
		"own":        claim(self, 1, -time.Second, 39*time.Second),
		"otherLive":  claim("worker-b", 1, -time.Second, 39*time.Second),
		"otherStale": claim("worker-b", 1, -time.Minute, -time.Second),
	}
	resolutions := map[string]*v1.Resolution{
		"none":  nil,
		"mark":  {Action: v1.ResolutionMarkCommitted, ExternalObjectID: "x", By: "p"},
		"retry": {Action: v1.ResolutionRetry, By: "p"},
		"fail":  {Action: v1.ResolutionFail, By: "p"},
	}
	for _, mode := range modes {
		for _, state := range states {
			for cn, c := range claims {
				for rn, res := range resolutions {
					for _, next := range []*metav1.Time{nil, at(-time.Second), at(time.Second)} {
						st := v1.SideEffectOperationStatus{State: state, Attempts: 1, Claim: c,
							NextAttemptTime: next, ObservedGeneration: 1}
						e := env()
						e.Generation = 2
						d := Next(st, res, policy(mode), e)
						name := fmt.Sprintf("%s/%s/claim=%s/res=%s/next=%v", mode, stateLabel(state), cn, rn, next != nil)
						checkDecision(t, name, st, d, mode)
						if state != v1.StateNeedsReview && d.Status.Resolution != nil {
							t.Errorf("%s: a resolution was applied outside NeedsReview", name)
						}
					}
				}
			}
		}
	}
	outcomes := []v1.Outcome{v1.OutcomeSucceeded, v1.OutcomeRetryable, v1.OutcomePermanent, v1.OutcomeUnknown}
	for _, mode := range modes {
		for _, o := range outcomes {
			for _, attempt := range []int32{1, 3} {
				st := v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: attempt,
					Claim: claim(self, attempt, 0, 40*time.Second)}
				d := AfterCall(st, policy(mode), env(), CallResult{Outcome: o})
				name := fmt.Sprintf("AfterCall/%s/%s/attempt=%d", mode, o, attempt)
				checkDecision(t, name, st, d, mode)
				if d.Action != ActionWrite || d.Status.Claim != nil {
					t.Errorf("%s: an answer must be written and release the claim, got %s", name, d.Action)
				}
				if o == v1.OutcomeUnknown && d.Status.State != v1.StateUnknown {
					t.Errorf("%s: an unknown outcome became %s", name, d.Status.State)
				}
				if o != v1.OutcomeSucceeded && d.Status.State == v1.StateCommitted {
					t.Errorf("%s: committed without a success", name)
				}
			}
		}
	}
	for _, v := range []Verdict{VerdictFound, VerdictAbsent, VerdictUndecidable} {
		st := v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, ReconcileAttempts: 1,
			Claim: claim(self, 1, 0, 40*time.Second)}
		d := AfterLookup(st, policy(v1.IdempotencyLookup), env(), LookupResult{Verdict: v})
		if d.Action.IsCall() {
			t.Errorf("AfterLookup/%s: a lookup's answer must be written before any call, got %s", v, d.Action)
		}
		if v != VerdictAbsent && d.Status.State == v1.StateFailedRetryable {
			t.Errorf("AfterLookup/%s: retry without proof of absence", v)
		}
	}
}

// checkDecision asserts the rules every decision keeps.
func checkDecision(t *testing.T, name string, st v1.SideEffectOperationStatus, d Decision, mode v1.IdempotencyMode) {
	t.Helper()
	if d.Action.IsCall() {
		c := d.Status.Claim
		if c == nil || c.Holder != self || c.Attempt != d.Status.Attempts || !c.ExpiryTime.After(now) {
			t.Errorf("%s: %s without a live claim of this worker for attempt %d (I2): %+v", name, d.Action, d.Status.Attempts, c)
		}
	}
	if st.State.IsTerminal() && d.Action != ActionDone {
		t.Errorf("%s: terminal state left with %s", name, d.Action)
	}
	unsettled := st.State == v1.StateUnknown || st.State == v1.StateReconciling
	if unsettled && d.Action == ActionExecute {
		t.Errorf("%s: an unknown outcome was retried before it was reconciled (I3)", name)
	}
	if mode != v1.IdempotencyNative && d.Action == ActionResend {
		t.Errorf("%s: re-send to a tool that does not dedupe", name)
	}
	if mode != v1.IdempotencyLookup && d.Action == ActionLookup {
		t.Errorf("%s: lookup at a tool that cannot be asked", name)
	}
	if st.State == v1.StateNeedsReview && d.Action != ActionWait && d.Status.Resolution == nil {
		t.Errorf("%s: left NeedsReview without a resolution", name)
	}
	if d.Action == ActionExecute && d.Status.Attempts != st.Attempts+1 {
		t.Errorf("%s: execute must claim the next attempt", name)
	}
}

func stateLabel(s v1.OperationState) string {
	if s == "" {
		return "New"
	}
	return string(s)
}

func TestBackoffIsCappedExponential(t *testing.T) {
	p := policy(v1.IdempotencyNative)
	cases := map[string]struct {
		n    int32
		want time.Duration
	}{
		"First":  {1, time.Second},
		"Second": {2, 2 * time.Second},
		"Fourth": {4, 8 * time.Second},
		"Capped": {30, 10 * time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := backoff(p, tc.n, env()); got != tc.want {
				t.Errorf("backoff(%d): want %s, got %s", tc.n, tc.want, got)
			}
		})
	}
}

// failedFinal is a status that failed for good with this Ready reason.
func failedFinal(reason string) v1.SideEffectOperationStatus {
	st := v1.SideEffectOperationStatus{State: v1.StateFailedFinal, Attempts: 1}
	SetConditions(&st.Conditions, st.State, false, 1, time.Unix(0, 0), reason, "failed")
	return st
}

func TestStale(t *testing.T) {
	found := &CallResult{Outcome: v1.OutcomeSucceeded, ExternalObjectID: "ch_1"}
	committed := v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 2, ExternalObjectID: "ch_2"}
	cases := map[string]struct {
		reason  string
		cur     v1.SideEffectOperationStatus
		late    Late
		verdict LateVerdict
		state   v1.OperationState
		// ready is the Ready reason the status must read after, if set.
		ready string
	}{
		"FailureIsEvidence": {
			reason:  "An answer that names no effect is evidence, whatever the status.",
			cur:     v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1},
			late:    Late{Attempt: 1, Observation: v1.Observation{Attempt: 1, Outcome: "Unknown"}},
			verdict: LateEvidence, state: v1.StateReconciling,
		},
		"SuccessAfterProvenAbsentCommits": {
			reason: "Sequence 7: a success of attempt 1 after a lookup proved it absent, before attempt 2 was claimed, is the effect: it commits.",
			cur: v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1,
				NextAttemptTime: at(0)},
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded", ExternalObjectID: "ch_1"}},
			verdict: LateCommits, state: v1.StateCommitted,
		},
		"SuccessWhileReconcilingCommits": {
			reason:  "A success of the attempt the status is reconciling commits: no later attempt was claimed.",
			cur:     v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, Claim: claim("b", 1, 0, time.Minute)},
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded"}},
			verdict: LateCommits, state: v1.StateCommitted,
		},
		"SuccessInNeedsReviewCommits": {
			reason:  "The evidence a person waits for arrived: it commits.",
			cur:     v1.SideEffectOperationStatus{State: v1.StateNeedsReview, Attempts: 1},
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded"}},
			verdict: LateCommits, state: v1.StateCommitted,
		},
		"SuccessAfterLaterClaimIsSecondEffect": {
			reason:  "Sequence 7: a success of attempt 1 after attempt 2 was claimed may be a second effect: raised, the status stands.",
			cur:     v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 2, Claim: claim("b", 2, 0, time.Minute)},
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded"}},
			verdict: LateSecondEffect, state: v1.StateStarted,
		},
		"SameEffectAsCommitted": {
			reason: "The effect the status already holds confirms it.",
			cur:    committed,
			late: Late{Attempt: 1, Effect: &CallResult{Outcome: v1.OutcomeSucceeded, ExternalObjectID: "ch_2"},
				Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded", ExternalObjectID: "ch_2"}},
			verdict: LateEvidence, state: v1.StateCommitted,
		},
		"OtherEffectThanCommitted": {
			reason:  "A different effect than the committed status names is a second effect.",
			cur:     committed,
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded", ExternalObjectID: "ch_1"}},
			verdict: LateSecondEffect, state: v1.StateCommitted,
		},
		"SuccessAfterFailedFinal": {
			reason: "Sequence 6: a terminal failure stays terminal, but stops saying the request had no effect: " +
				"the effect it denied is raised, and the reason reads EffectReported.",
			cur:     failedFinal(v1.ReasonRetriesExhausted),
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded"}},
			verdict: LateSecondEffect, state: v1.StateFailedFinal, ready: v1.ReasonEffectReported,
		},
		"SuccessAfterAPersonsFail": {
			reason:  "A person's Fail already says nothing of the effect: the answer is raised, the decision stands.",
			cur:     failedFinal(v1.ReasonResolvedFailed),
			late:    Late{Attempt: 1, Effect: found, Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded"}},
			verdict: LateSecondEffect, state: v1.StateFailedFinal, ready: v1.ReasonResolvedFailed,
		},
		"FailureAfterFailedFinal": {
			reason:  "An answer that names no effect leaves a failure as it is.",
			cur:     failedFinal(v1.ReasonRetriesExhausted),
			late:    Late{Attempt: 1, Observation: v1.Observation{Attempt: 1, Outcome: "Retryable"}},
			verdict: LateEvidence, state: v1.StateFailedFinal, ready: v1.ReasonRetriesExhausted,
		},
		"FutureAttempt": {
			reason:  "An answer about an attempt the status never claimed is ignored.",
			cur:     v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1},
			late:    Late{Attempt: 2, Effect: found, Observation: v1.Observation{Attempt: 2, Outcome: "Succeeded"}},
			verdict: LateIgnored, state: v1.StateStarted,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d, verdict := Stale(tc.cur, policy(v1.IdempotencyLookup), env(), tc.late)
			if verdict != tc.verdict {
				t.Fatalf("%s: verdict: want %s, got %s", tc.reason, tc.verdict, verdict)
			}
			if verdict == LateIgnored {
				return
			}
			if d.Status.State != tc.state {
				t.Errorf("%s: state: want %s, got %s", tc.reason, tc.state, d.Status.State)
			}
			if got := ReadyReason(d.Status); tc.ready != "" && got != tc.ready {
				t.Errorf("%s: Ready reason: want %s, got %s", tc.reason, tc.ready, got)
			}
			if verdict != LateCommits && d.Status.ExternalObjectID != tc.cur.ExternalObjectID {
				t.Errorf("%s: evidence changed the record's effect: %+v", tc.reason, d.Status)
			}
			obs := d.Status.Observations
			if len(obs) == 0 || obs[len(obs)-1].Kind != v1.ObservationStaleCall {
				t.Errorf("%s: answer not kept as a StaleCall observation: %+v", tc.reason, obs)
			}
		})
	}
}

// TestRoutineEvents pins which decisions are written as Kubernetes Events:
// the first attempt's claim and commit are routine (logged, not written),
// everything after a retry or an unknown outcome is an Event.
func TestRoutineEvents(t *testing.T) {
	started := func(attempt int32) v1.SideEffectOperationStatus {
		return v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: attempt,
			Claim: claim(self, attempt, -time.Second, 39*time.Second)}
	}
	unknown := v1.SideEffectOperationStatus{State: v1.StateReconciling, Attempts: 1, UnknownTime: at(-time.Minute)}
	retrying := v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1, NextAttemptTime: at(-time.Second)}
	ok := CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201, ExternalObjectID: "ch_1"}
	cases := map[string]struct {
		d           Decision
		wantReason  string
		wantRoutine bool
	}{
		"FirstClaim":        {Next(v1.SideEffectOperationStatus{}, nil, policy(v1.IdempotencyNative), env()), v1.EventClaimed, true},
		"RetryClaim":        {Next(retrying, nil, policy(v1.IdempotencyNative), env()), v1.EventClaimed, false},
		"FirstCommit":       {AfterCall(started(1), policy(v1.IdempotencyNative), env(), ok), v1.ReasonCommitted, true},
		"CommitAfterRetry":  {AfterCall(started(2), policy(v1.IdempotencyNative), env(), ok), v1.ReasonCommitted, false},
		"CommitAfterResend": {AfterResend(unknown, policy(v1.IdempotencyNative), env(), ok), v1.ReasonCommitted, false},
		"CommitAfterLookup": {AfterLookup(unknown, policy(v1.IdempotencyLookup), env(),
			LookupResult{Verdict: VerdictFound, ExternalObjectID: "ch_1"}), v1.ReasonCommitted, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := tc.d.Event
			if e == nil {
				t.Fatalf("no event; decision %+v", tc.d.Status.State)
			}
			if e.Reason != tc.wantReason || e.Routine != tc.wantRoutine {
				t.Errorf("event %s routine=%v, want %s routine=%v", e.Reason, e.Routine, tc.wantReason, tc.wantRoutine)
			}
		})
	}
}

// TestDecisionsLeaveTheirInputAlone: the decision core takes a status and
// returns a new one; the status it was given, which the controller may
// still hold as the status it read, must come back as it went in. Each
// step starts from the last one's decision, so every one of them gets a
// status whose slices are shared with an earlier status.
func TestDecisionsLeaveTheirInputAlone(t *testing.T) {
	p, e := policy(v1.IdempotencyNative), env()
	steps := []struct {
		name   string
		decide func(v1.SideEffectOperationStatus) v1.SideEffectOperationStatus
	}{
		{"Next claims", func(st v1.SideEffectOperationStatus) v1.SideEffectOperationStatus {
			return Next(st, nil, p, e).Status
		}},
		{"AfterCall commits", func(st v1.SideEffectOperationStatus) v1.SideEffectOperationStatus {
			return AfterCall(st, p, e, CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201,
				ExternalObjectID: "ch_1"}).Status
		}},
		{"Blocked", func(st v1.SideEffectOperationStatus) v1.SideEffectOperationStatus {
			return Blocked(st, e, v1.ReasonToolNotFound, "tool payments is missing")
		}},
		{"Waiting", func(st v1.SideEffectOperationStatus) v1.SideEffectOperationStatus {
			return Waiting(st, e, v1.ReasonWaitingForNamespaceShare, "namespace shop waits for its share")
		}},
		{"Fail", func(st v1.SideEffectOperationStatus) v1.SideEffectOperationStatus {
			return Fail(st, p, e, v1.ErrorInvalid, v1.ReasonParametersInvalid, "no").Status
		}},
	}
	st := v1.SideEffectOperationStatus{}
	for _, s := range steps {
		before := st.DeepCopy()
		next := s.decide(st)
		if diff := cmp.Diff(*before, st); diff != "" {
			t.Errorf("%s changed the status it was given (-before +after):\n%s", s.name, diff)
		}
		st = next
	}
}

// TestWaiting: a call that waits for its namespace's share of the workers
// says so, is not stalled, and changes nothing the next decision reads.
func TestWaiting(t *testing.T) {
	type want struct {
		State   v1.OperationState
		Reason  string
		Stalled metav1.ConditionStatus
		Next    view
	}
	cases := map[string]struct {
		reason string
		st     v1.SideEffectOperationStatus
		mode   v1.IdempotencyMode
		want   want
	}{
		"NewIsPlanned": {
			reason: "A new operation waits Planned, and claims attempt 1 once it has a place.",
			mode:   v1.IdempotencyNative,
			want: want{State: v1.StatePlanned, Reason: v1.ReasonWaitingForNamespaceShare, Stalled: condFalse,
				Next: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 1, Claimed: true,
					Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse}},
		},
		"RetryKeepsItsAttempts": {
			reason: "A due retry waits in FailedRetryable, and its next attempt is still a retry.",
			st: v1.SideEffectOperationStatus{State: v1.StateFailedRetryable, Attempts: 1,
				NextAttemptTime: at(-time.Second)},
			mode: v1.IdempotencyNone,
			want: want{State: v1.StateFailedRetryable, Reason: v1.ReasonWaitingForNamespaceShare, Stalled: condFalse,
				Next: view{Action: ActionExecute, State: v1.StateStarted, Attempts: 2, Claimed: true, Retry: true,
					Reason: v1.ReasonExecuting, Ready: condFalse, Stalled: condFalse}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, e := policy(tc.mode), env()
			st := Waiting(tc.st, e, v1.ReasonWaitingForNamespaceShare, "Namespace shop waits for its share")
			got := want{State: st.State, Stalled: condFalse, Next: viewOf(Next(st, nil, p, e))}
			if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
				got.Reason = c.Reason
			}
			if c := meta.FindStatusCondition(st.Conditions, v1.ConditionStalled); c != nil {
				got.Stalled = c.Status
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if d := viewOf(Next(tc.st, nil, p, e)); d != got.Next {
				t.Errorf("%s\nthe wait changed the next decision: %+v before, %+v after", tc.reason, d, got.Next)
			}
		})
	}
}
