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

package saga

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

const sagaUID = "5a9a0000-0000-4000-8000-000000000001"

// outboxOf lists the announcements of a checkpoint as "subscriber eventID
// type state".
func outboxOf(st v1.SagaStatus) []string {
	var out []string
	for _, e := range st.Outbox {
		out = append(out, e.Subscriber+" "+e.EventID+" "+e.Type+" "+string(e.State))
	}
	return out
}

// TestOutbox: a saga's outcome and its announcements are one checkpoint;
// nothing before the outcome is announced, NeedsReview included.
func TestOutbox(t *testing.T) {
	audit := []v1.Subscriber{{Name: "audit", URL: "http://audit.example/events"}}
	cases := map[string]struct {
		reason string
		subs   []v1.Subscriber
		stages []stage
		want   []string
	}{
		"Committed": {
			reason: "Every step committed: the checkpoint that says so carries the announcement",
			subs:   audit,
			stages: []stage{start, toCharge, toShip,
				same("Committed.", set(committed, "order.ship"), outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted})},
			want: []string{"audit " + sagaUID + "/Committed/audit dev.once.saga.committed Pending"},
		},
		"Compensated": {
			reason: "A rollback's end is the outcome announced",
			subs:   audit,
			stages: []stage{start, toCharge,
				{reason: "Reserve is compensated.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
				same("Compensated.", set(committed, "order.reserve.undo"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated})},
			want: []string{"audit " + sagaUID + "/Compensated/audit dev.once.saga.compensated Pending"},
		},
		"FailedFinal": {
			reason: "A saga stopped before any effect announces FailedFinal",
			subs:   audit,
			stages: []stage{start, same("FailedFinal.", set(failedFinal, "order.reserve"),
				outcome{State: failedFinal, Failed: "reserve", Reason: ReasonStepFailed, Stalled: true})},
			want: []string{"audit " + sagaUID + "/FailedFinal/audit dev.once.saga.failedfinal Pending"},
		},
		"InProgress": {
			reason: "A running saga announces nothing",
			subs:   audit,
			stages: []stage{start, toCharge},
		},
		"NoSubscribers": {
			reason: "A saga without subscribers records no outbox",
			stages: []stage{start, toCharge, toShip,
				same("Committed.", set(committed, "order.ship"), outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted})},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSim(t, threeSteps())
			s.spec.Subscribers = tc.subs
			run(t, s, tc.stages)
			if diff := gocmp.Diff(tc.want, outboxOf(s.status)); diff != "" {
				t.Errorf("%s: outbox -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
