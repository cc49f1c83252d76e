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

const opUID = "0e5e0000-0000-4000-8000-000000000001"

// subscribed is env() for an operation with subscribers.
func subscribed(names ...string) Env {
	e := env()
	e.UID = opUID
	for _, n := range names {
		e.Subscribers = append(e.Subscribers, v1.Subscriber{Name: n, URL: "http://" + n + ".example/"})
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
			want: []string{"audit " + opUID + "/Committed/audit dev.once.operation.committed Pending",
				"crm " + opUID + "/Committed/crm dev.once.operation.committed Pending"},
		},
		"Rejected": {
			reason: "A rejection for good is an outcome",
			decide: func(e Env) Decision {
				return AfterCall(started1(), policy(v1.IdempotencyNone), e, CallResult{Outcome: v1.OutcomePermanent, HTTPStatus: 422})
			},
			want: []string{"audit " + opUID + "/FailedFinal/audit dev.once.operation.failedfinal Pending",
				"crm " + opUID + "/FailedFinal/crm dev.once.operation.failedfinal Pending"},
		},
		"InvalidSpec": {
			reason: "An operation failed before any call is announced too",
			decide: func(e Env) Decision {
				return Fail(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyNone), e, v1.ErrorInvalid, v1.ReasonInvalidSpec, "bad")
			},
			want: []string{"audit " + opUID + "/FailedFinal/audit dev.once.operation.failedfinal Pending",
				"crm " + opUID + "/FailedFinal/crm dev.once.operation.failedfinal Pending"},
		},
		"Duplicate": {
			reason: "A duplicate reports, and announces, its original's outcome",
			decide: func(e Env) Decision {
				return Adopt(v1.SideEffectOperationStatus{}, policy(v1.IdempotencyNone), e, "first",
					v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1"})
			},
			want: []string{"audit " + opUID + "/Committed/audit dev.once.operation.committed Pending",
				"crm " + opUID + "/Committed/crm dev.once.operation.committed Pending"},
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
				t.Errorf("%s: without subscribers the record has an outbox: %+v", tc.reason, plain.Status.Outbox)
			}
		})
	}
}
