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

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// shop is the scope of the operations of these tests; other is another.
var (
	shop = Scope{Namespace: "shop", Tool: v1.ToolReference{Kind: v1.ToolKindTool, Name: "pay"},
		Operation: "charge.create", Key: "order-1"}
	other = Scope{Namespace: "shop", Tool: v1.ToolReference{Kind: v1.ToolKindTool, Name: "pay"},
		Operation: "charge.create", Key: "order-2"}
)

// subscribed is env() for an operation of the scope shop with subscribers.
func subscribed(names ...string) Env {
	return subscribedIn(shop, names...)
}

// subscribedIn is env() for an operation of scope with subscribers.
func subscribedIn(scope Scope, names ...string) Env {
	e := env()
	e.RecordName = scope.RecordName()
	for _, n := range names {
		e.Subscribers = append(e.Subscribers, v1.Subscriber{Name: n, ToolRef: v1.SinkToolReference{Name: n}, Operation: "events.deliver"})
	}
	return e
}

func started1() v1.SideEffectOperationStatus {
	return v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1, IdempotencyMode: v1.IdempotencyNone,
		Claim: claim(self, 1, 0, 40e9)}
}

// TestOutboxInTheOutcomeWrite: the write that records an outcome carries
// its announcements, Pending, one per subscriber; no other write does.
func TestOutboxInTheOutcomeWrite(t *testing.T) {
	cases := map[string]struct {
		reason string
		decide func(Env) Decision
		want   []string
	}{
		"Committed": {
			reason: "The commit write announces the commit",
			decide: func(e Env) Decision {
				return AfterCall(started1(), policy(v1.IdempotencyNone), e, CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201})
			},
			want: []string{"audit " + shop.RecordName() + "/Committed/-/audit dev.once.operation.committed Pending",
				"crm " + shop.RecordName() + "/Committed/-/crm dev.once.operation.committed Pending"},
		},
		"Rejected": {
			reason: "A rejection for good is an outcome",
			decide: func(e Env) Decision {
				return AfterCall(started1(), policy(v1.IdempotencyNone), e, CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 422})
			},
			want: []string{"audit " + shop.RecordName() + "/FailedFinal/-/audit dev.once.operation.failedfinal Pending",
				"crm " + shop.RecordName() + "/FailedFinal/-/crm dev.once.operation.failedfinal Pending"},
		},
		"InvalidSpec": {
			reason: "An operation failed before any call is announced too",
			decide: func(e Env) Decision {
				return Fail(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyNone), e, v1.ErrorInvalid, v1.ReasonInvalidSpec, "bad")
			},
			want: []string{"audit " + shop.RecordName() + "/FailedFinal/-/audit dev.once.operation.failedfinal Pending",
				"crm " + shop.RecordName() + "/FailedFinal/-/crm dev.once.operation.failedfinal Pending"},
		},
		"Duplicate": {
			reason: "A duplicate reports, and announces, its original's outcome",
			decide: func(e Env) Decision {
				return Adopt(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyNone), e, "first",
					v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1"})
			},
			want: []string{"audit " + shop.RecordName() + "/Committed/ch_1/audit dev.once.operation.committed Pending",
				"crm " + shop.RecordName() + "/Committed/ch_1/crm dev.once.operation.committed Pending"},
		},
		"Claim": {
			reason: "A claim is not an outcome",
			decide: func(e Env) Decision { return Next(v1.SideEffectOperationStatus{}, nil, policy(v1.IdempotencyNone), e) },
		},
		"Retryable": {
			reason: "A retry is not an outcome",
			decide: func(e Env) Decision {
				return AfterCall(started1(), policy(v1.IdempotencyNone), e, CallResult{Outcome: v1.OutcomeRetryable, HTTPStatus: 503})
			},
		},
		"Unknown": {
			reason: "An unknown outcome is not an outcome",
			decide: func(e Env) Decision {
				return AfterCall(started1(), policy(v1.IdempotencyNone), e, CallResult{Outcome: v1.OutcomeUnknown})
			},
		},
		"NeedsReview": {
			reason: "NeedsReview waits for a person: not announced",
			decide: func(e Env) Decision {
				st := v1.SideEffectOperationStatus{State: v1.StateUnknown, Attempts: 1, IdempotencyMode: v1.IdempotencyNone,
					ErrorClass: v1.ErrorOutcomeUnknown}
				d := Next(st, nil, policy(v1.IdempotencyNone), e)
				if d.Status.State != v1.StateNeedsReview {
					t.Fatalf("want NeedsReview, got %s", d.Status.State)
				}
				return d
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := tc.decide(subscribed("audit", "crm"))
			var got []string
			for _, e := range d.Status.Outbox {
				got = append(got, e.Subscriber+" "+e.EventID+" "+e.Type+" "+string(e.State))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: outbox -want, +got:\n%s", tc.reason, diff)
			}
			if plain := tc.decide(env()); plain.Status.Outbox != nil {
				t.Errorf("%s: without subscribers the status has an outbox: %+v", tc.reason, plain.Status.Outbox)
			}
		})
	}
}

// outcome is the outcome a terminal operation's scope record keeps for its
// duplicates, as the controller's outcomeOf copies it from the status.
func outcome(st v1.SideEffectOperationStatus) v1.RecordOutcome {
	return v1.RecordOutcome{State: st.State, Attempts: st.Attempts, ExternalObjectID: st.ExternalObjectID,
		ExternalRequestID: st.ExternalRequestID, Result: st.Result, ResultDigest: st.ResultDigest,
		ErrorClass: st.ErrorClass, ErrorMessage: st.ErrorMessage, CompletionTime: *st.CompletionTime,
		ExpiryTime: *st.ExpiryTime}
}

// eventIDs are the ids a decision announces under.
func eventIDs(d Decision) []string {
	var ids []string
	for _, e := range d.Status.Outbox {
		ids = append(ids, e.EventID)
	}
	return ids
}

// TestOneOutcomeOneID: every operation that carries one outcome announces
// it under one id, whatever object it is (the original, a duplicate, an
// operation made again by a redelivered message after the first was
// deleted, which adopts the outcome its record keeps); another scope or
// another effect is announced under another id.
func TestOneOutcomeOneID(t *testing.T) {
	pol := policy(v1.IdempotencyNone)
	commit := func(scope Scope, id string) Decision {
		return AfterCall(started1(), pol, subscribedIn(scope, "audit", "crm"),
			CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201, ExternalObjectID: id})
	}
	reject := func(scope Scope) Decision {
		return AfterCall(started1(), pol, subscribedIn(scope, "audit", "crm"),
			CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 422})
	}
	adopt := func(scope Scope, original Decision) Decision {
		return Adopt(v1.SideEffectOperationStatus{}, pol, subscribedIn(scope, "audit", "crm"), "first",
			outcome(original.Status))
	}
	cases := map[string]struct {
		reason        string
		first, second Decision
		same          bool
	}{
		"Duplicate": {
			reason: "A duplicate (or an operation made again by a redelivered message) adopts the commit and " +
				"announces it under the original's id",
			first: commit(shop, "ch_1"), second: adopt(shop, commit(shop, "ch_1")), same: true,
		},
		"DuplicateOfAFailure": {
			reason: "A duplicate of a failure announces it under the original's id",
			first:  reject(shop), second: adopt(shop, reject(shop)), same: true,
		},
		"AnotherScope": {
			reason: "The same effect id in another scope is another announcement",
			first:  commit(shop, "ch_1"), second: commit(other, "ch_1"),
		},
		"SecondLifetime": {
			reason: "The key used again after its record expired makes another effect, announced under another id",
			first:  commit(shop, "ch_1"), second: commit(shop, "ch_2"),
		},
		"SecondLifetimeFailsAgain": {
			reason: "The one limit (docs/outbox.md, \"The event id\"): a key used again after its record expired " +
				"that fails again without an external id announces under the first failure's id",
			first: reject(shop), second: reject(shop), same: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			a, b := eventIDs(tc.first), eventIDs(tc.second)
			if len(a) != 2 || len(b) != 2 {
				t.Fatalf("%s: want two announcements each, got %q and %q", tc.reason, a, b)
			}
			if same := cmp.Equal(a, b); same != tc.same {
				t.Errorf("%s: ids %q and %q: want the same %v", tc.reason, a, b, tc.same)
			}
		})
	}
}
