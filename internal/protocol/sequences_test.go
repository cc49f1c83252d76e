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
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The decisions behind the sequences of docs/design.md, The sequences (S1
// to S11), that could lead to a second effect, each as a table.

func TestArbitrate(t *testing.T) {
	self := v1.RecordOwner{Name: "b", UID: "uid-b"}
	prev := v1.RecordOwner{Name: "a", UID: "uid-a"}
	planned := v1.SideEffectOperationStatus{RequestHash: "sha256:1", IdempotencyKey: "k"}
	committed := &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1", ExpiryTime: *at(time.Hour)}
	expired := &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1", ExpiryTime: *at(-time.Second)}
	rec := func(owner v1.RecordOwner, o *v1.RecordOutcome) v1.IdempotencyRecordSpec {
		return v1.IdempotencyRecordSpec{Owner: owner, RequestHash: "sha256:1", Outcome: o,
			Retention: metav1.Duration{Duration: time.Second}}
	}
	cases := map[string]struct {
		reason  string
		st      v1.SideEffectOperationStatus
		rec     v1.IdempotencyRecordSpec
		created bool
		owner   Owner
		action  ScopeAction
		state   v1.OperationState
	}{
		"Created": {reason: "The operation that created the record executes.",
			st: planned, rec: rec(self, nil), created: true, action: ScopeProceed},
		"Owns": {reason: "The owner executes.",
			st: planned, rec: rec(self, nil), action: ScopeProceed},
		"TakeoverInterrupted": {
			reason: "Sequence 2: the record names this operation after a takeover, but its unknown outcome was never recorded: it starts from Unknown, never executes blindly.",
			st:     planned, rec: func() v1.IdempotencyRecordSpec { r := rec(self, nil); r.PreviousOwner = &prev; return r }(),
			action: ScopeWrite, state: v1.StateUnknown},
		"TakeoverRecorded": {
			reason: "Once the inherited unknown outcome is recorded, the owner goes on.",
			st: func() v1.SideEffectOperationStatus {
				s := planned
				s.State, s.Attempts = v1.StateUnknown, 1
				return s
			}(),
			rec:    func() v1.IdempotencyRecordSpec { r := rec(self, nil); r.PreviousOwner = &prev; return r }(),
			action: ScopeProceed},
		"Mismatch": {reason: "I4: other parameters never execute.",
			st:  func() v1.SideEffectOperationStatus { s := planned; s.RequestHash = "sha256:2"; return s }(),
			rec: rec(prev, nil), owner: Owner{Alive: true}, action: ScopeWrite, state: v1.StateFailedFinal},
		"WaitForLiveOwner": {reason: "A live owner that has not ended is waited for.",
			st: planned, rec: rec(prev, nil), owner: Owner{Alive: true}, action: ScopeWrite, state: v1.StatePlanned},
		"AdoptLiveOwner": {reason: "I5: a live owner's outcome is reported.",
			st: planned, rec: rec(prev, nil), owner: Owner{Alive: true, Outcome: committed},
			action: ScopeWrite, state: v1.StateCommitted},
		"AdoptRecord": {reason: "I5: a deleted owner's recorded outcome is reported within its retention.",
			st: planned, rec: rec(prev, committed), action: ScopeWrite, state: v1.StateCommitted},
		"CollectExpired": {reason: "I7: after its retention, the record is collected and the key is free.",
			st: planned, rec: rec(prev, expired), action: ScopeCollect},
		"NoOutcomeNeverExpires": {
			reason: "Sequence 1: a record whose owner never ended does not expire by time: the next operation takes it over and starts from Unknown.",
			st:     planned, rec: rec(prev, nil), action: ScopeTakeOver, state: v1.StateUnknown},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := env()
			e.Now = now.Add(24 * time.Hour) // long past the records' retention
			if tc.rec.Outcome != nil {
				e.Now = now
			}
			d := Arbitrate(tc.st, self, tc.rec, tc.created, tc.owner, policy(v1.IdempotencyLookup), e)
			if d.Action != tc.action {
				t.Fatalf("%s: action: want %s, got %s", tc.reason, tc.action, d.Action)
			}
			if tc.state != "" && d.Decision.Status.State != tc.state {
				t.Errorf("%s: state: want %s, got %s", tc.reason, tc.state, d.Decision.Status.State)
			}
			if d.Action == ScopeTakeOver {
				if d.Record.Owner != self || d.Record.PreviousOwner == nil || *d.Record.PreviousOwner != prev {
					t.Errorf("%s: the takeover must name the new and the previous owner in one write: %+v", tc.reason, d.Record)
				}
			}
		})
	}
}

func TestRecordExpiry(t *testing.T) {
	if _, ok := RecordExpiry(v1.IdempotencyRecordSpec{Retention: metav1.Duration{Duration: time.Second}}); ok {
		t.Error("Sequence 1: a record without an outcome must never expire on time alone")
	}
	o := &v1.RecordOutcome{ExpiryTime: *at(time.Hour)}
	if got, ok := RecordExpiry(v1.IdempotencyRecordSpec{Outcome: o}); !ok || !got.Equal(now.Add(time.Hour)) {
		t.Errorf("a record with an outcome expires with it: got %v, %v", got, ok)
	}
}

func TestResolutionWhileBlocked(t *testing.T) {
	// Sequence 10: the operation entered NeedsReview at generation 1; the
	// tool went missing, and the Blocked write stamped generation 2, the
	// resolution's, into observedGeneration. The resolution still applies.
	p := policy(v1.IdempotencyNone)
	e := env()
	st := needsReview(v1.SideEffectOperationStatus{Attempts: 1}, e, "review").Status
	e.Generation = 2
	st = Blocked(st, e, v1.ReasonToolNotFound, "Tool payments does not exist")
	res := &v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_1", By: "alice"}
	if NeedsTool(st, res, e) {
		t.Error("MarkCommitted must not need the tool")
	}
	d := Next(st, res, p, e)
	if d.Status.State != v1.StateCommitted {
		t.Fatalf("the resolution was dropped: %s", d.Status.State)
	}
	retry := &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	if !NeedsTool(st, retry, e) {
		t.Error("Retry calls the tool: it needs it")
	}
	e.Generation = 1
	if d := Next(st, retry, p, e); NeedsTool(st, retry, e) || d.Status.State != v1.StateNeedsReview ||
		d.Status.Resolution != nil || d.Status.Attempts != st.Attempts {
		t.Errorf("a resolution written before the operation entered NeedsReview must not apply: %s, %s, attempt %d",
			d.Action, d.Status.State, d.Status.Attempts)
	}
}

func TestAttemptMode(t *testing.T) {
	// Sequence 12: attempt 1 was made while the tool was None or Lookup;
	// the tool was switched while the outcome is unknown. A re-send would
	// go to a tool that never deduped the first request, a lookup may not
	// find what was sent under another promise: a person decides.
	for _, c := range []struct{ was, now v1.IdempotencyMode }{
		{v1.IdempotencyNone, v1.IdempotencyNative},
		{v1.IdempotencyLookup, v1.IdempotencyNative},
		{v1.IdempotencyNative, v1.IdempotencyNone},
	} {
		st := v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1, IdempotencyMode: c.was}
		if d := Next(st, nil, policy(c.now), env()); d.Status.State != v1.StateNeedsReview {
			t.Errorf("%s → %s: decided %s / %s", c.was, c.now, d.Action, d.Status.State)
		}
	}
	st := v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1, IdempotencyMode: v1.IdempotencyLookup}
	if d := Next(st, nil, policy(v1.IdempotencyLookup), env()); d.Action != ActionLookup {
		t.Errorf("an unchanged promise is used: %s", d.Action)
	}
	d := execute(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyLookup), env(), false)
	if d.Status.IdempotencyMode != v1.IdempotencyLookup {
		t.Errorf("an attempt must record the mode it is made under, got %q", d.Status.IdempotencyMode)
	}
}

func TestInheritWaitsForTheLongestClaim(t *testing.T) {
	// Sequence 6: a deleted owner's worker may still send until its claim
	// ends, which this worker cannot see: the first lookup waits for the
	// longest claim plus the tool's lookup delay.
	p := policy(v1.IdempotencyLookup)
	p.MaxClaimDuration = time.Minute
	d := Inherit(v1.SideEffectOperationStatus{}, p, env(), "a", nil)
	want := now.Add(time.Minute + p.LookupDelay)
	if d.Status.NextAttemptTime == nil || !d.Status.NextAttemptTime.Equal(&metav1.Time{Time: want}) {
		t.Errorf("first lookup at %v, want %v", d.Status.NextAttemptTime, want)
	}
}

// TestInheritCarriesAPersonsRetry: a person's Retry vouched that an
// attempt of the deleted owner had no effect. The next owner's failure
// rests on that word too, and says so, as the owner's would have (I11);
// without the pin's resolution it says "no effect" as a proof.
func TestInheritCarriesAPersonsRetry(t *testing.T) {
	p := policy(v1.IdempotencyLookup)
	p.MaxAttempts = 1
	retry := &v1.RecordResolution{Action: v1.ResolutionRetry, By: "alice", Reason: "nothing at the tool"}
	cases := map[string]struct {
		pin    *v1.RecordAttempt
		reason string
	}{
		"RetryCarried": {&v1.RecordAttempt{Mode: v1.IdempotencyLookup, Attempts: 3, Resolution: retry},
			v1.ReasonFailedAfterRetry},
		"NoRetry": {&v1.RecordAttempt{Mode: v1.IdempotencyLookup, Attempts: 3}, v1.ReasonRetriesExhausted},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := Inherit(v1.SideEffectOperationStatus{}, p, env(), "a", tc.pin).Status
			e := env()
			e.Now = now.Add(time.Hour)
			d := Next(st, nil, p, e)
			if d.Action != ActionLookup {
				t.Fatalf("want a lookup of the inherited attempt, got %s", d.Action)
			}
			d = AfterLookup(d.Status, p, e, LookupResult{Verdict: VerdictAbsent})
			if got := ReadyReason(d.Status); got != tc.reason {
				t.Errorf("failure reason %s, want %s (%s)", got, tc.reason, d.Status.ErrorMessage)
			}
		})
	}
}

// TestInheritKnowsWhenTheLifetimeBegan: an attempt taken over starts its
// lifetime of the key no later than the attempt did (status.startedTime,
// which lookups see as since). The record's pin says when; a record that
// does not was created before any attempt bound to it, so its creation
// stands in. A lookup then cannot take an earlier lifetime's effect for
// this one's.
func TestInheritKnowsWhenTheLifetimeBegan(t *testing.T) {
	p := policy(v1.IdempotencyLookup)
	created := env()
	created.RecordCreated = now.Add(-time.Hour)
	cases := map[string]struct {
		reason string
		e      Env
		pin    *v1.RecordAttempt
		want   *metav1.Time
	}{
		"Pinned": {"the pin says when the key was first sent", created,
			&v1.RecordAttempt{Mode: v1.IdempotencyLookup, Promise: "sha256:v1", StartedTime: at(-2 * time.Hour)},
			at(-2 * time.Hour)},
		"NoPin": {"a record without a pin was created before any attempt bound to it", created, nil,
			&metav1.Time{Time: now.Add(-time.Hour)}},
		"PinWithoutTime": {"a pin that does not say when is no pin for the time", created,
			&v1.RecordAttempt{Mode: v1.IdempotencyLookup, Promise: "sha256:v1"}, &metav1.Time{Time: now.Add(-time.Hour)}},
		"NoRecordRead": {"without a record read, nothing says when", env(), nil, nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Inherit(v1.SideEffectOperationStatus{}, p, tc.e, "a", tc.pin).Status.StartedTime
			if !got.Equal(tc.want) {
				t.Errorf("%s: startedTime %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}

func TestObservationsKeepTheCalls(t *testing.T) {
	// Sequence 11: ten lookups must not evict the attempt's own call.
	st := v1.SideEffectOperationStatus{}
	observe(&st, v1.Observation{Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown"})
	for i := range 30 {
		observe(&st, v1.Observation{Kind: v1.ObservationLookup, Attempt: 1, Message: fmt.Sprint(i)})
	}
	observe(&st, v1.Observation{Kind: v1.ObservationClaimExpired, Attempt: 1})
	if len(st.Observations) != maxObservations {
		t.Fatalf("want %d observations, got %d", maxObservations, len(st.Observations))
	}
	if st.Observations[0].Kind != v1.ObservationCall {
		t.Errorf("the attempt's call was evicted: %+v", st.Observations[0])
	}
	if last := st.Observations[len(st.Observations)-2]; last.Message != "29" {
		t.Errorf("the newest lookups must stay, got %+v", last)
	}
	// With nothing repeated left, the oldest goes.
	st = v1.SideEffectOperationStatus{}
	for i := range maxObservations + 1 {
		observe(&st, v1.Observation{Kind: v1.ObservationCall, Attempt: int32(i + 1)})
	}
	if st.Observations[0].Attempt != 2 {
		t.Errorf("the oldest call must go first, got attempt %d", st.Observations[0].Attempt)
	}
}

func TestStateFields(t *testing.T) {
	// Which fields each state may hold, written out apart from the table
	// in fields.go.
	legal := map[v1.OperationState][]string{
		v1.StatePlanned:         {"error", "duplicateOf", "earlierResolutions"},
		v1.StateStarted:         {"claim", "error", "earlierResolutions"},
		v1.StateFailedRetryable: {"nextAttemptTime", "error", "earlierResolutions"},
		v1.StateUnknown:         {"nextAttemptTime", "error", "earlierResolutions"},
		v1.StateReconciling:     {"claim", "nextAttemptTime", "error", "earlierResolutions"},
		v1.StateNeedsReview:     {"error", "earlierResolutions"},
		v1.StateCommitted:       {"duplicateOf", "externalObjectID", "externalRequestID", "result", "committedTime", "completionTime", "expiryTime"},
		v1.StateFailedFinal:     {"duplicateOf", "externalObjectID", "externalRequestID", "result", "completionTime", "expiryTime", "error"},
		v1.StateCompensating:    {"externalObjectID", "externalRequestID", "result", "committedTime", "earlierResolutions"},
		v1.StateCompensated:     {"duplicateOf", "externalObjectID", "externalRequestID", "result", "committedTime", "completionTime", "expiryTime"},
	}
	full := v1.SideEffectOperationStatus{DuplicateOf: "original", Claim: claim(self, 1, 0, time.Minute), NextAttemptTime: at(0),
		ExternalObjectID: "ch", ExternalRequestID: "req", ResultDigest: "sha256:r", CommittedTime: at(0),
		CompletionTime: at(0), ExpiryTime: at(time.Hour), ErrorClass: v1.ErrorRetryable, ErrorMessage: "m",
		Attempts: 1, ReconcileAttempts: 2, UnknownTime: at(0),
		EarlierResolutions: []v1.Resolution{{Action: v1.ResolutionRetry, By: "alice", Reason: "nothing there"}}}
	for state, want := range legal {
		t.Run(string(state), func(t *testing.T) {
			st := full
			transition(&st, state, "Reason", "Message", env())
			for _, f := range stateFields {
				if got, should := f.set(&st), slices.Contains(want, f.name); got != should {
					t.Errorf("%s in %s: set %v, want %v", f.name, state, got, should)
				}
			}
			if st.Attempts != 1 || st.ReconcileAttempts != 2 || st.UnknownTime == nil {
				t.Errorf("history was cleared in %s: %+v", state, st)
			}
		})
	}
}

func TestNativeRetryAfterGatewayError(t *testing.T) {
	// A Native attempt answered 504 by a gateway (the upstream may have
	// committed) is retried as a same-key re-send; a 401 to that retry
	// answers the re-send, not the first attempt: a person decides.
	p := policy(v1.IdempotencyNative)
	st := execute(v1.SideEffectOperationStatus{}, p, env(), false).Status
	st = AfterCall(st, p, env(), CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 504, Relayed: true}).Status
	if st.State != v1.StateFailedRetryable {
		t.Fatalf("a Native 504 is retried: %s", st.State)
	}
	e := env()
	e.Now = st.NextAttemptTime.Time
	next := Next(st, nil, p, e)
	if next.Action != ActionExecute {
		t.Fatalf("the retry is due: %s", next.Action)
	}
	st = next.Status
	d := AfterCall(st, p, e, CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 401})
	if d.Status.State != v1.StateNeedsReview {
		t.Errorf("a refusal of the re-send failed the operation for good: %s", d.Status.State)
	}
	d = AfterCall(st, p, e, CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 400, Replayed: true})
	if d.Status.State != v1.StateFailedFinal {
		t.Errorf("the tool's replay of a refusal fails the operation: %s", d.Status.State)
	}
	// A 429 proves nothing happened: a later refusal is a refusal.
	st = execute(v1.SideEffectOperationStatus{}, p, env(), false).Status
	st = AfterCall(st, p, env(), CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 429}).Status
	if next := Next(st, nil, p, e); next.Action != ActionExecute {
		t.Fatalf("the retry after a 429 is due: %s", next.Action)
	} else {
		st = next.Status
	}
	if d := AfterCall(st, p, e, CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 400}); d.Status.State != v1.StateFailedFinal {
		t.Errorf("after a 429 a refusal fails the operation: %s", d.Status.State)
	}
}

func TestPreflight(t *testing.T) {
	if no := CheckParameters(make([]byte, v1.MaxParametersBytes+1)); no == nil || no.Reason != v1.ReasonParametersTooLarge {
		t.Errorf("parameters over the limit must be refused, got %+v", no)
	}
	if no := CheckParameters(make([]byte, v1.MaxParametersBytes)); no != nil {
		t.Errorf("parameters at the limit pass, got %+v", no)
	}
	tool := &v1.ToolSpec{Idempotency: v1.ToolIdempotency{ReplayWindow: &metav1.Duration{Duration: 2 * time.Hour}}}
	if no := CheckRetention(Policy{Retention: time.Hour}, tool, "Tool payments"); no == nil || no.Reason != v1.ReasonRetentionTooShort {
		t.Errorf("I7: a retention shorter than the replay window must be refused, got %+v", no)
	}
	if no := CheckRetention(Policy{Retention: 2 * time.Hour}, tool, "Tool payments"); no != nil {
		t.Errorf("a retention as long as the replay window passes, got %+v", no)
	}
}

func TestNativeGatewayErrorsNeverEndWithoutEffect(t *testing.T) {
	// Review finding: a Native 504 (the upstream may have committed), then
	// 503s until the attempts run out, must not end "failed without
	// effect": the outcome is unknown, and reconciled by a re-send.
	p := policy(v1.IdempotencyNative)
	e := env()
	st := execute(v1.SideEffectOperationStatus{}, p, e, false).Status
	st = AfterCall(st, p, e, CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 504, Relayed: true}).Status
	for st.State == v1.StateFailedRetryable {
		e.Now = st.NextAttemptTime.Time
		st = Next(st, nil, p, e).Status
		st = AfterCall(st, p, e, CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 503, Relayed: true}).Status
	}
	if st.State != v1.StateUnknown {
		t.Fatalf("after %d attempts: %s (%s)", st.Attempts, st.State, st.ErrorMessage)
	}
	if d := Next(st, nil, p, e); d.Action != ActionResend {
		t.Errorf("an unknown Native outcome is reconciled by a re-send, got %s", d.Action)
	}
	// Without a gateway's answer, the attempts fail without effect.
	st = execute(v1.SideEffectOperationStatus{}, p, env(), false).Status
	for st.State != v1.StateFailedFinal {
		st = AfterCall(st, p, e, CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 429}).Status
		if st.State == v1.StateFailedRetryable {
			e.Now = st.NextAttemptTime.Time
			st = Next(st, nil, p, e).Status
		}
	}
	if st.Attempts != p.MaxAttempts {
		t.Errorf("429s exhaust the attempts: %d", st.Attempts)
	}
}

func TestModeSwitchAfterNativeGatewayError(t *testing.T) {
	// Review finding: after a Native 504 the tool is switched to None; the
	// pending retry is no longer a safe re-send.
	st := execute(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyNative), env(), false).Status
	st = AfterCall(st, policy(v1.IdempotencyNative), env(), CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 504, Relayed: true}).Status
	e := env()
	e.Now = st.NextAttemptTime.Time
	d := Next(st, nil, policy(v1.IdempotencyNone), e)
	if d.Action == ActionExecute {
		t.Fatalf("a new attempt went out to a tool that no longer dedupes")
	}
	if d = Next(d.Status, nil, policy(v1.IdempotencyNone), e); d.Status.State != v1.StateNeedsReview {
		t.Errorf("the tool's promise changed while the outcome is unknown: a person decides; got %s", d.Status.State)
	}
}

func TestTakeoverClearsDuplicateOf(t *testing.T) {
	// Review finding: a duplicate waiting for an owner that was deleted
	// takes the scope over; it is no longer a duplicate, or its own outcome
	// would never reach the record.
	self := v1.RecordOwner{Name: "b", UID: "uid-b"}
	waiting := WaitForOriginal(v1.SideEffectOperationStatus{RequestHash: "sha256:1"}, env(), "a", false)
	rec := v1.IdempotencyRecordSpec{Owner: v1.RecordOwner{Name: "a", UID: "uid-a"}, RequestHash: "sha256:1"}
	d := Arbitrate(waiting, self, rec, false, Owner{}, policy(v1.IdempotencyLookup), env())
	if d.Action != ScopeTakeOver || d.Decision.Status.DuplicateOf != "" {
		t.Errorf("takeover: %s, duplicateOf %q", d.Action, d.Decision.Status.DuplicateOf)
	}
}

func TestLookupWaitRoundsUp(t *testing.T) {
	// Review finding: status times keep whole seconds; a not-before time
	// rounded down lets a lookup come before lookupDelay has passed.
	p := policy(v1.IdempotencyLookup)
	p.LookupDelay = 1500 * time.Millisecond
	d := unknown(v1.SideEffectOperationStatus{}, p, env(), now.Add(200*time.Millisecond), "unknown")
	if got, min := d.Status.NextAttemptTime.Time, now.Add(1700*time.Millisecond); got.Before(min) || !got.Equal(got.Truncate(time.Second)) {
		t.Errorf("first lookup at %v; want a whole second not before %v", got, min)
	}
}

func TestFenced(t *testing.T) {
	held := v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 2, Claim: claim(self, 2, 0, time.Minute)}
	f := Fence{Holder: self, State: v1.StateStarted, Attempt: 2}
	cases := map[string]struct {
		st   v1.SideEffectOperationStatus
		want bool
	}{
		"Held":          {held, true},
		"OtherHolder":   {v1.SideEffectOperationStatus{State: v1.StateStarted, Claim: claim("b", 2, 0, time.Minute)}, false},
		"LaterAttempt":  {v1.SideEffectOperationStatus{State: v1.StateStarted, Claim: claim(self, 3, 0, time.Minute)}, false},
		"OtherState":    {v1.SideEffectOperationStatus{State: v1.StateReconciling, Claim: claim(self, 2, 0, time.Minute)}, false},
		"ClaimReleased": {v1.SideEffectOperationStatus{State: v1.StateStarted}, false},
	}
	for name, tc := range cases {
		if got := Fenced(tc.st, f); got != tc.want {
			t.Errorf("%s: want %v, got %v", name, tc.want, got)
		}
	}
}

// TestWhatAResendRestsOn: an unknown attempt is reconciled as it was made,
// and a Native re-send only while the tool still remembers the key (the
// simulator's stories in test/sim/testdata/stories found each case).
func TestWhatAResendRestsOn(t *testing.T) {
	native := policy(v1.IdempotencyNative)
	native.Promise = "sha256:v1"
	unknownAt := func(p Policy, e Env) v1.SideEffectOperationStatus {
		st := execute(v1.SideEffectOperationStatus{}, p, e, false).Status
		return AfterCall(st, p, e, CallResult{Outcome: v1.OutcomeUnknown, Message: "reset"}).Status
	}
	edited := native
	edited.Promise = "sha256:v2"
	late := env()
	late.Now = now.Add(native.DedupeWindow)
	cases := map[string]struct {
		reason string
		st     v1.SideEffectOperationStatus
		p      Policy
		e      Env
		want   Action
	}{
		"WithinTheWindow": {"A re-send that reaches the tool in its window is a re-send.",
			unknownAt(native, env()), native, env(), ActionResend},
		"PastTheWindow": {"A re-send after the tool forgot the key would be a new request: a person decides.",
			unknownAt(native, env()), native, late, ActionWrite},
		"ToolEdited": {"The tool's description changed under the unknown outcome: a person decides.",
			unknownAt(native, env()), edited, env(), ActionWrite},
		"TakenOverWithoutPins": {"Taken over from a record that does not say when the key was first sent: a person decides.",
			Inherit(v1.SideEffectOperationStatus{}, native, env(), "a", nil).Status, native, late, ActionWrite},
		"TakenOverWithPins": {"Taken over with the attempt's pins: reconciled as it was made.",
			Inherit(v1.SideEffectOperationStatus{}, native, env(), "a",
				&v1.RecordAttempt{Mode: v1.IdempotencyNative, Promise: "sha256:v1", StartedTime: at(0)}).Status,
			native, env(), ActionResend},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			st := tc.st
			st.NextAttemptTime = nil
			d := Next(st, nil, tc.p, tc.e)
			if d.Action != tc.want {
				t.Fatalf("%s\nNext: %s (%s), want %s", tc.reason, d.Action, d.Status.ErrorMessage, tc.want)
			}
			if tc.want == ActionWrite && d.Status.State != v1.StateNeedsReview {
				t.Errorf("%s\nstate %s, want NeedsReview", tc.reason, d.Status.State)
			}
		})
	}
}

// TestLookupWaitsWhateverTheToolSays: the lookup delay runs from the
// attempt's last send even when the tool's description differs when the
// outcome becomes unknown (it may change back before the question).
func TestLookupWaitsWhateverTheToolSays(t *testing.T) {
	p := policy(v1.IdempotencyLookup)
	p.Promise = "sha256:v1"
	st := execute(v1.SideEffectOperationStatus{}, p, env(), false).Status
	edited := p
	edited.Promise = "sha256:v2"
	st = AfterCall(st, edited, env(), CallResult{Outcome: v1.OutcomeUnknown, Message: "reset"}).Status
	if st.NextAttemptTime == nil || st.NextAttemptTime.Before(at(p.LookupDelay)) {
		t.Fatalf("no lookup before the delay: next attempt %v", st.NextAttemptTime)
	}
	if d := Next(st, nil, p, env()); d.Action != ActionWait {
		t.Errorf("the tool described as before, the lookup still waits: %s", d.Action)
	}
}

// TestDecisionsAreReportedAsDecisions: a failure after a person's Retry
// rests on their word, and a duplicate of a decided failure says so (I11).
func TestDecisionsAreReportedAsDecisions(t *testing.T) {
	p := policy(v1.IdempotencyNone)
	st := execute(v1.SideEffectOperationStatus{}, p, env(), false).Status
	st = AfterCall(st, p, env(), CallResult{Outcome: v1.OutcomeUnknown, Message: "reset"}).Status
	st = Next(st, nil, p, env()).Status
	if st.State != v1.StateNeedsReview {
		t.Fatalf("a None tool's unknown outcome goes to a person: %s", st.State)
	}
	e := env()
	e.Generation = 2
	retry := &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	st = Next(st, retry, p, e).Status
	st = AfterCall(st, p, e, CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 400, Message: "400 Bad Request"}).Status
	reason := meta.FindStatusCondition(st.Conditions, v1.ConditionReady).Reason
	if st.State != v1.StateFailedFinal || reason != v1.ReasonFailedAfterRetry || !Decided(reason) {
		t.Fatalf("a failure after a person's Retry: %s %s, want FailedFinal FailedAfterRetry", st.State, reason)
	}
	o := v1.RecordOutcome{State: st.State, Reason: reason, ErrorMessage: st.ErrorMessage, ExpiryTime: *at(time.Hour)}
	dup := Adopt(v1.SideEffectOperationStatus{}, p, env(), "a", o).Status
	if r := meta.FindStatusCondition(dup.Conditions, v1.ConditionReady).Reason; !Decided(r) {
		t.Errorf("a duplicate of a decided failure reads %s, not a decision", r)
	}
	if !dup.ExpiryTime.Equal(at(time.Hour)) {
		t.Errorf("a duplicate reports the scope's outcome as long as the scope keeps it: expiry %v", dup.ExpiryTime)
	}
}

// TestDuplicateSaysWhoDecided: a duplicate that adopts an outcome a person
// decided carries that person's resolution, as its original does, and
// reports it as the record keeps it (I11).
func TestDuplicateSaysWhoDecided(t *testing.T) {
	decided := metav1.NewTime(now.Add(-time.Minute))
	alice := func(action v1.ResolutionAction) *v1.RecordResolution {
		return &v1.RecordResolution{Action: action, By: "alice", User: "alice@corp", Reason: "checked the ledger",
			Time: decided}
	}
	applied := func(action v1.ResolutionAction, id string) *v1.AppliedResolution {
		return &v1.AppliedResolution{Resolution: v1.Resolution{Action: action, ExternalObjectID: id, By: "alice",
			User: "alice@corp", Reason: "checked the ledger"}, Time: decided, FromState: v1.StateNeedsReview}
	}
	cases := map[string]struct {
		reason  string
		outcome v1.RecordOutcome
		want    *v1.AppliedResolution
	}{
		"NoPerson": {reason: "an outcome Once established carries no resolution",
			outcome: v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1"}},
		"MarkCommitted": {reason: "a person found the effect: its id is the resolution's",
			outcome: v1.RecordOutcome{State: v1.StateCommitted, Reason: v1.ReasonResolvedCommitted, ExternalObjectID: "ch_1",
				Resolution: alice(v1.ResolutionMarkCommitted)},
			want: applied(v1.ResolutionMarkCommitted, "ch_1")},
		"RetryThenCommitted": {reason: "a person's Retry, then a commit: the effect is the retry's, not the person's",
			outcome: v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_2", Resolution: alice(v1.ResolutionRetry)},
			want:    applied(v1.ResolutionRetry, "")},
		"Fail": {reason: "a person's Fail",
			outcome: v1.RecordOutcome{State: v1.StateFailedFinal, Reason: v1.ReasonResolvedFailed, ErrorClass: v1.ErrorPermanent,
				ErrorMessage: "Failed by alice", Resolution: alice(v1.ResolutionFail)},
			want: applied(v1.ResolutionFail, "")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.outcome.ExpiryTime = *at(time.Hour)
			dup := Adopt(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyNone), env(), "a", tc.outcome).Status
			if diff := gocmp.Diff(tc.want, dup.Resolution); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := gocmp.Diff(tc.outcome.Resolution, dup.Resolution.Record()); diff != "" {
				t.Errorf("%s: the duplicate reports another decision than the record keeps: -want, +got:\n%s",
					tc.reason, diff)
			}
		})
	}
}

// TestContradictedFailureStaysOpen: a FailedFinal that a late answer
// contradicts reads EffectReported, and so does its duplicate (I11).
func TestContradictedFailureStaysOpen(t *testing.T) {
	p := policy(v1.IdempotencyLookup)
	st := execute(v1.SideEffectOperationStatus{}, p, env(), false).Status
	st = Fail(st, p, env(), v1.ErrorRetryable, v1.ReasonRetriesExhausted, "All 1 attempts failed without effect").Status
	late := Late{Attempt: 1, Effect: &CallResult{Outcome: v1.OutcomeSucceeded, ExternalObjectID: "ch_1"},
		Observation: v1.Observation{Attempt: 1, Outcome: "Succeeded", ExternalObjectID: "ch_1"}}
	d, verdict := Stale(st, p, env(), late)
	reason := ReadyReason(d.Status)
	if verdict != LateSecondEffect || d.Status.State != v1.StateFailedFinal || reason != v1.ReasonEffectReported ||
		!Unproven(reason) || Decided(reason) {
		t.Fatalf("a contradicted failure: %s %s %s, want a raised FailedFinal EffectReported", verdict, d.Status.State, reason)
	}
	o := v1.RecordOutcome{State: d.Status.State, Reason: reason, ErrorMessage: d.Status.ErrorMessage, ExpiryTime: *at(time.Hour)}
	dup := Adopt(v1.SideEffectOperationStatus{}, p, env(), "a", o).Status
	if r := ReadyReason(dup); r != v1.ReasonEffectReported {
		t.Errorf("a duplicate of a contradicted failure reads %s, not EffectReported", r)
	}
	if again, v := Stale(d.Status, p, env(), late); v != LateSecondEffect || ReadyReason(again.Status) != v1.ReasonEffectReported {
		t.Errorf("the same answer again: %s %s", v, ReadyReason(again.Status))
	}
}

// TestDuplicateOfAReviewWaitsStalled: the duplicate of an operation in
// review is Stalled, and deciding again changes nothing (no write).
func TestDuplicateOfAReviewWaitsStalled(t *testing.T) {
	w := WaitForOriginal(v1.SideEffectOperationStatus{}, env(), "a", true)
	if !meta.IsStatusConditionTrue(w.Conditions, v1.ConditionStalled) {
		t.Fatalf("not Stalled: %+v", w.Conditions)
	}
	later := env()
	later.Now = now.Add(time.Minute)
	if again := WaitForOriginal(w, later, "a", true); !equality.Semantic.DeepEqual(again, w) {
		t.Errorf("deciding again changed the status:\n%s", gocmp.Diff(w, again))
	}
}

func TestResolutionAppliedOnce(t *testing.T) {
	// An operation entered NeedsReview at generation 1; alice's Retry
	// (generation 2) was applied and attempt 2's outcome was lost too, so
	// the operation entered NeedsReview again at generation 2. The Retry
	// stays in the spec. An edit of another field of the spec (its
	// ttlSecondsAfterFinished) moves the generation to 3: the Retry
	// decided the first review, not this one, and must not run attempt 3.
	p := policy(v1.IdempotencyNone)
	e := env()
	retry := &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: "nothing at the tool"}
	st := needsReview(v1.SideEffectOperationStatus{Attempts: 1}, e, "review 1").Status
	e.Generation = 2
	d := Next(st, retry, p, e)
	if d.Action != ActionExecute || d.Status.Attempts != 2 {
		t.Fatalf("the first review's Retry must run attempt 2: %s, attempt %d", d.Action, d.Status.Attempts)
	}
	second := needsReview(d.Status, e, "review 2").Status
	cases := map[string]struct {
		reason string
		res    *v1.Resolution
		gen    int64
		apply  bool
	}{
		"SameGeneration": {reason: "Nothing was written since the review began.",
			res: retry, gen: 2},
		"OtherFieldEdited": {reason: "An edit of another field does not make the applied Retry a new decision.",
			res: retry, gen: 3},
		"OtherFieldEditedTwice": {reason: "Nor do two.",
			res: retry, gen: 7},
		"UserRewritten": {reason: "The same decision, written again by another account, is still the same decision.",
			res: &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", User: "system:admin", Reason: "nothing at the tool"}, gen: 3},
		"NewReason": {reason: "A Retry with another reason is a new decision: it applies.",
			res: &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: "still nothing"}, gen: 3, apply: true},
		"OtherPerson": {reason: "A Retry by someone else is a new decision.",
			res: &v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "nothing at the tool"}, gen: 3, apply: true},
		"Fail": {reason: "Another action is a new decision.",
			res: &v1.Resolution{Action: v1.ResolutionFail, By: "alice", Reason: "nothing at the tool"}, gen: 3, apply: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := e
			e.Generation = tc.gen
			d := Next(second, tc.res, p, e)
			if applied := d.Action != ActionWait; applied != tc.apply {
				t.Errorf("%s: applied: want %t, got %t (%s, state %s, attempt %d)", tc.reason, tc.apply, applied,
					d.Action, d.Status.State, d.Status.Attempts)
			}
			if !tc.apply && NeedsTool(second, tc.res, e) {
				t.Errorf("%s: a resolution that is not applied needs no tool", tc.reason)
			}
		})
	}
}

func TestResolutionFromBeforeTheReview(t *testing.T) {
	// An operation was created with alice's Retry in its spec (a manifest
	// that kept the decision about an earlier object of its name) and
	// entered NeedsReview at generation 1 with it standing. An edit of
	// another field of the spec moves the generation past the review's:
	// the Retry was written before this review and must not decide it.
	p := policy(v1.IdempotencyNone)
	e := env()
	retry := &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: "nothing at the tool"}
	e.Resolution = retry
	st := needsReview(v1.SideEffectOperationStatus{Attempts: 1}, e, "review 1").Status
	if !Earlier(retry, st) {
		t.Fatalf("the review must keep the resolution that stood when it began, got %+v", st.EarlierResolutions)
	}
	cases := map[string]struct {
		reason string
		res    *v1.Resolution
		apply  bool
	}{
		"OtherFieldEdited": {reason: "An edit of another field does not make the standing Retry a decision of this review.",
			res: retry},
		"UserRewritten": {reason: "The same words, written again by another account, are still the decision from before.",
			res: &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", User: "system:admin", Reason: "nothing at the tool"}},
		"NewReason": {reason: "A Retry with another reason is a decision of this review: it applies.",
			res: &v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: "still nothing"}, apply: true},
		"Fail": {reason: "Another action is a decision of this review.",
			res: &v1.Resolution{Action: v1.ResolutionFail, By: "alice", Reason: "nothing at the tool"}, apply: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := e
			e.Generation, e.Resolution = 2, tc.res
			d := Next(st, tc.res, p, e)
			if applied := d.Action != ActionWait; applied != tc.apply {
				t.Errorf("%s: applied: want %t, got %t (%s, state %s, attempt %d)", tc.reason, tc.apply, applied,
					d.Action, d.Status.State, d.Status.Attempts)
			}
		})
	}

	t.Run("NoneStanding", func(t *testing.T) {
		// The same Retry, written after a review that began without a
		// resolution, decides it.
		e := env()
		st := needsReview(v1.SideEffectOperationStatus{Attempts: 1}, e, "review 1").Status
		if len(st.EarlierResolutions) != 0 {
			t.Fatalf("no resolution stood, got %+v", st.EarlierResolutions)
		}
		e.Generation, e.Resolution = 2, retry
		if d := Next(st, retry, p, e); d.Action != ActionExecute {
			t.Errorf("a Retry written during the review must run attempt 2: %s", d.Action)
		}
	})

	t.Run("WrittenBackLater", func(t *testing.T) {
		// alice's Retry (from the repository) decided review 1; bob's,
		// written with kubectl, decided review 2. In review 3 a GitOps
		// sync writes alice's back from the repository: it decided an
		// earlier review, and decides nothing now.
		e := env()
		st := needsReview(v1.SideEffectOperationStatus{Attempts: 1}, e, "review 1").Status
		e.Generation, e.Resolution = 2, retry
		d := Next(st, retry, p, e)
		st = needsReview(d.Status, e, "review 2").Status
		bobs := &v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "not at the tool either"}
		e.Generation, e.Resolution = 3, bobs
		d = Next(st, bobs, p, e)
		if d.Action != ActionExecute || d.Status.Attempts != 3 {
			t.Fatalf("bob's Retry must run attempt 3: %s, attempt %d", d.Action, d.Status.Attempts)
		}
		st = needsReview(d.Status, e, "review 3").Status
		e.Generation, e.Resolution = 4, retry
		if d := Next(st, retry, p, e); d.Action != ActionWait {
			t.Errorf("alice's Retry, written back, ran %s (attempt %d)", d.Action, d.Status.Attempts)
		}
	})

	t.Run("ReviewBeganBeforeTheField", func(t *testing.T) {
		// An operation that entered review under a release without
		// earlierResolutions, the Retry standing since: the first pass
		// keeps it there, before an edit can move the generation.
		e := env()
		legacy := needsReview(v1.SideEffectOperationStatus{Attempts: 1}, e, "review 1").Status
		e.Resolution = retry
		d := Next(legacy, retry, p, e)
		if d.Action != ActionWrite || !Earlier(retry, d.Status) {
			t.Fatalf("the standing Retry must be written among the earlier resolutions: %s, %+v", d.Action,
				d.Status.EarlierResolutions)
		}
		if again := Next(d.Status, retry, p, e); again.Action != ActionWait {
			t.Errorf("kept once, it is not written again: %s", again.Action)
		}
		e.Generation = 2
		if d := Next(d.Status, retry, p, e); d.Action != ActionWait {
			t.Errorf("after an edit, the Retry from before the review ran %s", d.Action)
		}
	})

	t.Run("Bounded", func(t *testing.T) {
		var st v1.SideEffectOperationStatus
		for i := range maxEarlierResolutions + 3 {
			remember(&st, v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: fmt.Sprint(i)})
		}
		remember(&st, v1.Resolution{Action: v1.ResolutionRetry, By: "alice", Reason: "10"})
		if n := len(st.EarlierResolutions); n != maxEarlierResolutions {
			t.Fatalf("%d kept, want %d", n, maxEarlierResolutions)
		}
		if first := st.EarlierResolutions[0].Reason; first != "3" {
			t.Errorf("the oldest must go first: the first kept is %q, want \"3\"", first)
		}
	})
}
