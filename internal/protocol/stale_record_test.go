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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestStaleForRecord: a late answer whose operation is gone goes into the
// scope's record only where the record still speaks for that operation,
// and is raised wherever it may name an effect no one records.
func TestStaleForRecord(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	self := v1.RecordOwner{Name: "op", UID: "uid-old"}
	other := v1.RecordOwner{Name: "op", UID: "uid-new"}
	effect := &CallResult{Outcome: v1.OutcomeSucceeded, ExternalObjectID: "ch_1"}
	unknown := func(owner v1.RecordOwner, attempts int32) *v1.IdempotencyRecordSpec {
		return &v1.IdempotencyRecordSpec{Owner: owner, Retention: metav1.Duration{Duration: time.Hour},
			Attempt: &v1.RecordAttempt{Mode: v1.IdempotencyLookup, Attempts: attempts}}
	}
	ended := func(state v1.OperationState, reason, id string) *v1.IdempotencyRecordSpec {
		return &v1.IdempotencyRecordSpec{Owner: self, Outcome: &v1.RecordOutcome{State: state, Attempts: 1,
			Reason: reason, ExternalObjectID: id}}
	}
	taken := unknown(other, 0)
	taken.PreviousOwner = &self
	cases := map[string]struct {
		reason  string
		rec     *v1.IdempotencyRecordSpec
		attempt int32
		effect  *CallResult
		want    LateVerdict
		written bool
	}{
		"CommitsTheUnknownAttempt": {reason: "the record holds the answer's attempt as unknown: the effect settles it",
			rec: unknown(self, 1), attempt: 1, effect: effect, want: LateCommits, written: true},
		"EarlierAttempt": {reason: "a later attempt may have had an effect of its own: raised, not written",
			rec: unknown(self, 2), attempt: 1, effect: effect, want: LateSecondEffect},
		"UncountedAttempt": {reason: "a record that does not count attempts cannot say which one is open",
			rec: unknown(self, 0), attempt: 1, effect: effect, want: LateSecondEffect},
		"NoEffect": {reason: "an answer that names no effect is evidence; the next owner reconciles",
			rec: unknown(self, 1), attempt: 1, want: LateEvidence},
		"LaterAttempt": {reason: "an answer to an attempt the record has not reached is ignored",
			rec: unknown(self, 1), attempt: 2, effect: effect, want: LateIgnored},
		"TakenOver": {reason: "the record speaks for a successor, which reconciles: raised, never written",
			rec: taken, attempt: 1, effect: effect, want: LateSecondEffect},
		"AnotherOwner": {reason: "a record of another operation is never written",
			rec: unknown(other, 1), attempt: 1, effect: effect, want: LateSecondEffect},
		"NoRecord": {reason: "nothing keeps the answer: raised",
			attempt: 1, effect: effect, want: LateSecondEffect},
		"NoRecordNoEffect": {reason: "nothing to raise", attempt: 1, want: LateEvidence},
		"SameEffect": {reason: "the record already holds it",
			rec: ended(v1.StateCommitted, v1.ReasonCommitted, "ch_1"), attempt: 1, effect: effect, want: LateEvidence},
		"OtherEffect": {reason: "two effects for one key",
			rec: ended(v1.StateCommitted, v1.ReasonCommitted, "ch_0"), attempt: 1, effect: effect, want: LateSecondEffect},
		"FailureSaidNoEffect": {reason: "a failure stops saying no effect",
			rec: ended(v1.StateFailedFinal, v1.ReasonRetriesExhausted, ""), attempt: 1, effect: effect,
			want: LateSecondEffect, written: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			next, got := StaleForRecord(tc.rec, self.UID, Late{Attempt: tc.attempt, Effect: tc.effect}, now)
			if got != tc.want || (next != nil) != tc.written {
				t.Fatalf("%s: got %s (written %v), want %s (written %v)", tc.reason, got, next != nil, tc.want, tc.written)
			}
			switch {
			case got == LateCommits:
				o := next.Outcome
				if o == nil || o.State != v1.StateCommitted || o.ExternalObjectID != "ch_1" || next.Attempt != nil ||
					!o.ExpiryTime.Equal(&metav1.Time{Time: now.Add(time.Hour)}) {
					t.Fatalf("%s: wrote %+v", tc.reason, next)
				}
			case next != nil && next.Outcome.Reason != v1.ReasonEffectReported:
				t.Fatalf("%s: wrote reason %s", tc.reason, next.Outcome.Reason)
			}
			if next != nil && tc.rec.Outcome != nil && tc.rec.Outcome.Reason == v1.ReasonEffectReported {
				t.Fatalf("%s: changed the record read", tc.reason)
			}
		})
	}
}
