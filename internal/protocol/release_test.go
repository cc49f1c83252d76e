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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestAtDeletion(t *testing.T) {
	me := v1.RecordOwner{Name: "pay", UID: "uid-pay"}
	other := v1.RecordOwner{Name: "pay-2", UID: "uid-pay-2"}
	gone := v1.RecordOwner{Name: "old", UID: "uid-old"}
	outcome := &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1"}
	own := func(o *v1.RecordOutcome) v1.IdempotencyRecordSpec {
		return v1.IdempotencyRecordSpec{IdempotencyKey: "pay", RequestHash: "sha256:a", Owner: me, Outcome: o}
	}
	committed := v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1}
	cancelledSt := v1.SideEffectOperationStatus{State: v1.StateFailedFinal, ErrorClass: v1.ErrorCancelled}
	cancelledOut := &v1.RecordOutcome{State: v1.StateFailedFinal, ErrorClass: v1.ErrorCancelled, Reason: v1.ReasonCancelled}
	cases := map[string]struct {
		reason string
		st     v1.SideEffectOperationStatus
		rec    *v1.IdempotencyRecordSpec
		own    v1.IdempotencyRecordSpec
		want   Release
	}{
		"NeverClaimed": {
			reason: "An operation that made no attempt had no effect: nothing to keep.",
			st:     v1.SideEffectOperationStatus{}, own: own(nil),
			want: Release{Action: ReleaseNow},
		},
		"CancelledKeepsItsOutcome": {
			reason: "A cancel before any attempt is the key's answer: a replay within the retention says Cancelled, and the same manifest applied again does not execute.",
			st:     cancelledSt, rec: &v1.IdempotencyRecordSpec{Owner: me}, own: own(cancelledOut),
			want: Release{Action: ReleaseUpdate, Record: v1.IdempotencyRecordSpec{Owner: me, Outcome: cancelledOut}},
		},
		"CancelledCreatesItsRecord": {
			reason: "A cancelled operation whose key is its name bound no record: it creates one with the cancel.",
			st:     cancelledSt, own: own(cancelledOut),
			want: Release{Action: ReleaseCreate, Record: own(cancelledOut)},
		},
		"CancelledTakesNoOthersRecord": {
			reason: "A cancelled operation never claimed: a record that names another owner is that owner's.",
			st:     cancelledSt, rec: &v1.IdempotencyRecordSpec{Owner: other}, own: own(cancelledOut),
			want: Release{Action: ReleaseNow},
		},
		"NeverClaimedOwnerDropsRecord": {
			reason: "A record bound to an operation that never made an attempt goes with it: the next one binds afresh, with nothing to reconcile.",
			st:     v1.SideEffectOperationStatus{}, rec: &v1.IdempotencyRecordSpec{Owner: me}, own: own(nil),
			want: Release{Action: ReleaseDelete},
		},
		"NeverClaimedHeirKeepsRecord": {
			reason: "An owner that inherited a deleted owner's unknown outcome keeps the record that says so.",
			st:     v1.SideEffectOperationStatus{}, rec: &v1.IdempotencyRecordSpec{Owner: me, PreviousOwner: &gone}, own: own(nil),
			want: Release{Action: ReleaseNow},
		},
		"NeverClaimedOthersRecord": {
			reason: "Another owner's record is not this operation's to drop.",
			st:     v1.SideEffectOperationStatus{}, rec: &v1.IdempotencyRecordSpec{Owner: other}, own: own(nil),
			want: Release{Action: ReleaseNow},
		},
		"Duplicate": {
			reason: "A duplicate's outcome is its original's.",
			st:     v1.SideEffectOperationStatus{State: v1.StateCommitted, DuplicateOf: "pay-2"},
			rec:    &v1.IdempotencyRecordSpec{Owner: other}, own: own(outcome),
			want: Release{Action: ReleaseNow},
		},
		"LiveClaimWaits": {
			reason: "A claim that has not expired may still bring an answer, which must reach the record.",
			st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1,
				Claim: claim(self, 1, -time.Second, 30*time.Second)},
			own:  own(nil),
			want: Release{Action: ReleaseWait, Wait: 30 * time.Second},
		},
		"ExpiredClaimWritesUnknown": {
			reason: "A claim that expired without an answer leaves a record without outcome: the next operation reconciles.",
			st: v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1,
				Claim: claim(self, 1, -time.Minute, -time.Second)},
			own:  own(nil),
			want: Release{Action: ReleaseCreate, Record: own(nil)},
		},
		"CommittedNameKeyedCreates": {
			reason: "A name-keyed owner has no record while it lives: it creates one with its outcome (I7).",
			st:     committed, own: own(outcome),
			want: Release{Action: ReleaseCreate, Record: own(outcome)},
		},
		"OwnedRecordGetsOutcome": {
			reason: "A shared key's owner writes its outcome into the record it bound, keeping the rest.",
			st:     committed,
			rec:    &v1.IdempotencyRecordSpec{IdempotencyKey: "pay", Owner: me, PreviousOwner: &gone},
			own:    own(outcome),
			want: Release{Action: ReleaseUpdate, Record: v1.IdempotencyRecordSpec{IdempotencyKey: "pay",
				Owner: me, PreviousOwner: &gone, Outcome: outcome}},
		},
		"OwnedRecordWithOutcomeIsDone": {
			reason: "Nothing is written twice.",
			st:     committed,
			rec:    &v1.IdempotencyRecordSpec{Owner: me, Outcome: outcome},
			own:    own(outcome),
			want:   Release{Action: ReleaseNow},
		},
		"RecordBoundAfterTheClaimIsTaken": {
			reason: "A record bound by an explicit key after this name-keyed operation claimed names an owner that never executed: it is taken.",
			st:     committed,
			rec:    &v1.IdempotencyRecordSpec{IdempotencyKey: "pay", RequestHash: "sha256:b", Owner: other},
			own:    own(outcome),
			want:   Release{Action: ReleaseUpdate, Record: own(outcome)},
		},
		"ExpiredOutcomeKeptNowhere": {
			reason: "An outcome past its retention is forgotten: a record that names another owner is a later lifetime's, which a late release must not take.",
			st:     v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExpiryTime: at(-time.Second)},
			rec:    &v1.IdempotencyRecordSpec{IdempotencyKey: "pay", RequestHash: "sha256:a", Owner: other},
			own:    own(outcome),
			want:   Release{Action: ReleaseNow},
		},
		"ExpiredOutcomeCreatesNothing": {
			reason: "Nor does it make a record that would only be collected.",
			st:     v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExpiryTime: at(0)},
			own:    own(outcome),
			want:   Release{Action: ReleaseNow},
		},
		"ExpiredOutcomeEndsItsOwnRecord": {
			reason: "A record that names the operation gets its outcome, expired or not: without one it would be an unknown attempt for ever.",
			st:     v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExpiryTime: at(-time.Second)},
			rec:    &v1.IdempotencyRecordSpec{IdempotencyKey: "pay", Owner: me},
			own:    own(outcome),
			want:   Release{Action: ReleaseUpdate, Record: v1.IdempotencyRecordSpec{IdempotencyKey: "pay", Owner: me, Outcome: outcome}},
		},
		"OutcomeWithinRetentionIsKept": {
			reason: "An outcome within its retention is kept, as before.",
			st:     v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExpiryTime: at(time.Second)},
			own:    own(outcome),
			want:   Release{Action: ReleaseCreate, Record: own(outcome)},
		},
		"TerminalWithStaleClaim": {
			reason: "A terminal record's claim is history, not a reason to wait.",
			st: v1.SideEffectOperationStatus{State: v1.StateFailedFinal, Attempts: 2,
				Claim: claim(self, 2, -time.Second, 30*time.Second)},
			own:  own(outcome),
			want: Release{Action: ReleaseCreate, Record: own(outcome)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := AtDeletion(tc.st, me, tc.rec, tc.own, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n(-want +got):\n%s", tc.reason, diff)
			}
		})
	}
}

func TestHolderMayExecute(t *testing.T) {
	cases := map[string]struct {
		st          v1.SideEffectOperationStatus
		terminating bool
		want        bool
	}{
		"New":                   {v1.SideEffectOperationStatus{}, false, true},
		"NewBeingDeleted":       {v1.SideEffectOperationStatus{}, true, false},
		"Claimed":               {v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1}, false, true},
		"ClaimedBeingDeleted":   {v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1}, true, true},
		"CommittedBeingDeleted": {v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1}, true, true},
		"WaitingAsDuplicate":    {v1.SideEffectOperationStatus{DuplicateOf: "x"}, false, true},
		"RefusedBeforeAnyCall":  {v1.SideEffectOperationStatus{State: v1.StateFailedFinal}, false, false},
		"CancelledBeforeAnyCall": {v1.SideEffectOperationStatus{State: v1.StateFailedFinal,
			ErrorClass: v1.ErrorCancelled}, false, true},
		"CancelledBeingDeleted": {v1.SideEffectOperationStatus{State: v1.StateFailedFinal,
			ErrorClass: v1.ErrorCancelled}, true, true},
		"AdoptedACancel": {v1.SideEffectOperationStatus{State: v1.StateFailedFinal,
			ErrorClass: v1.ErrorCancelled, DuplicateOf: "x"}, false, false},
		"AdoptedAnotherOutcome": {v1.SideEffectOperationStatus{State: v1.StateCommitted, DuplicateOf: "x"}, false, false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := HolderMayExecute(tc.st, tc.terminating); got != tc.want {
				t.Errorf("HolderMayExecute = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNameKeyed(t *testing.T) {
	for _, tc := range []struct {
		key, name string
		want      bool
	}{{"", "pay", true}, {"pay", "pay", true}, {"order-42", "pay", false}, {"saga/step", "saga.step", false}} {
		if got := NameKeyed(tc.key, tc.name); got != tc.want {
			t.Errorf("NameKeyed(%q, %q) = %v, want %v", tc.key, tc.name, got, tc.want)
		}
	}
}

func TestHolds(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	kept, gone := metav1.NewTime(now.Add(time.Hour)), metav1.NewTime(now)
	owner := v1.RecordOwner{Name: "order.notify", UID: "uid-1"}
	outcome := func(state v1.OperationState, reason string, expiry metav1.Time) *v1.RecordOutcome {
		return &v1.RecordOutcome{State: state, Reason: reason, ExternalObjectID: "n_1", ExpiryTime: expiry}
	}
	cases := map[string]struct {
		rec  v1.IdempotencyRecordSpec
		want string
	}{
		"bound, no attempt":     {v1.IdempotencyRecordSpec{Owner: owner}, ""},
		"an attempt in flight":  {v1.IdempotencyRecordSpec{Owner: owner, Attempt: &v1.RecordAttempt{}}, "operation order.notify made an attempt whose outcome is unknown"},
		"committed":             {v1.IdempotencyRecordSpec{Owner: owner, Outcome: outcome(v1.StateCommitted, "", kept)}, `operation order.notify committed effect "n_1"`},
		"committed, forgotten":  {v1.IdempotencyRecordSpec{Owner: owner, Outcome: outcome(v1.StateCommitted, "", gone)}, ""},
		"failed, proven":        {v1.IdempotencyRecordSpec{Owner: owner, Outcome: outcome(v1.StateFailedFinal, v1.ReasonRejected, kept)}, ""},
		"failed by a person":    {v1.IdempotencyRecordSpec{Owner: owner, Outcome: outcome(v1.StateFailedFinal, v1.ReasonResolvedFailed, kept)}, "operation order.notify ended FailedFinal (" + v1.ReasonResolvedFailed + ") without proof that it had no effect"},
		"failed, contradicted":  {v1.IdempotencyRecordSpec{Owner: owner, Outcome: outcome(v1.StateFailedFinal, v1.ReasonEffectReported, kept)}, "operation order.notify ended FailedFinal (" + v1.ReasonEffectReported + ") without proof that it had no effect"},
		"an attempt, forgotten": {v1.IdempotencyRecordSpec{Owner: owner, Attempt: &v1.RecordAttempt{}, Outcome: outcome(v1.StateCommitted, "", gone)}, ""},
	}
	for name, tc := range cases {
		if got := Holds(tc.rec, now); got != tc.want {
			t.Errorf("%s: Holds = %q, want %q", name, got, tc.want)
		}
	}
}
