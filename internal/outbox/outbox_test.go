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

package outbox

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(d))
	return &t
}

const uid = types.UID("0b8f6c1e-1111-2222-3333-444455556666")

var subs = []v1.Subscriber{{Name: "audit", URL: "http://a.example/"}, {Name: "billing", URL: "http://b.example/"}}

func pending(sub string, state v1.OperationState) v1.OutboxEntry {
	return v1.OutboxEntry{Subscriber: sub, EventID: EventID(uid, state, sub),
		Type: EventType(KindOperation, state), State: v1.DeliveryPending}
}

func TestAnnounce(t *testing.T) {
	cases := map[string]struct {
		reason  string
		entries []v1.OutboxEntry
		state   v1.OperationState
		subs    []v1.Subscriber
		want    []v1.OutboxEntry
	}{
		"NoSubscribers": {
			reason: "An object without subscribers records nothing: no extra bytes, no relay pass",
			state:  v1.StateCommitted,
			want:   nil,
		},
		"Committed": {
			reason: "A terminal state records one Pending entry per subscriber",
			state:  v1.StateCommitted, subs: subs,
			want: []v1.OutboxEntry{pending("audit", v1.StateCommitted), pending("billing", v1.StateCommitted)},
		},
		"FailedFinal": {
			reason: "A failure for good is an outcome too",
			state:  v1.StateFailedFinal, subs: subs[:1],
			want: []v1.OutboxEntry{pending("audit", v1.StateFailedFinal)},
		},
		"Compensated": {
			reason: "A saga's compensation is its outcome",
			state:  v1.StateCompensated, subs: subs[:1],
			want: []v1.OutboxEntry{pending("audit", v1.StateCompensated)},
		},
		"NeedsReview": {
			reason: "NeedsReview waits for a person: not an outcome, not announced",
			state:  v1.StateNeedsReview, subs: subs,
			want: nil,
		},
		"Started": {
			reason: "Work in progress is not announced",
			state:  v1.StateStarted, subs: subs,
			want: nil,
		},
		"AlreadyAnnounced": {
			reason: "Deciding the same terminal state again adds nothing, and keeps what the relay recorded",
			entries: []v1.OutboxEntry{{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: EventType(KindOperation, v1.StateCommitted), State: v1.DeliveryDelivered, Attempts: 1}},
			state: v1.StateCommitted, subs: subs,
			want: []v1.OutboxEntry{{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: EventType(KindOperation, v1.StateCommitted), State: v1.DeliveryDelivered, Attempts: 1},
				pending("billing", v1.StateCommitted)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Announce(tc.entries, KindOperation, uid, tc.state, tc.subs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAnnounce(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestEventIDIsStable(t *testing.T) {
	a := EventID(uid, v1.StateCommitted, "audit")
	if b := EventID(uid, v1.StateCommitted, "audit"); a != b {
		t.Errorf("EventID differs between calls: %q, %q", a, b)
	}
	for _, other := range []string{
		EventID("another-uid", v1.StateCommitted, "audit"),
		EventID(uid, v1.StateFailedFinal, "audit"),
		EventID(uid, v1.StateCommitted, "billing"),
	} {
		if other == a {
			t.Errorf("EventID %q is shared by another object, outcome or subscriber", a)
		}
	}
	if got, want := EventType(KindSaga, v1.StateCompensated), "dev.once.saga.compensated"; got != want {
		t.Errorf("EventType: want %q, got %q", want, got)
	}
}

func TestAfter(t *testing.T) {
	budget := Budget{MaxAttempts: 3, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Second}
	cases := map[string]struct {
		reason     string
		entry      v1.OutboxEntry
		answer     Answer
		want       v1.OutboxEntry
		wantFailed bool
	}{
		"Acknowledged": {
			reason: "A 2xx delivers the entry",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{HTTPStatus: 202, Message: "Delivered (HTTP 202)"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryDelivered, Attempts: 1,
				LastAttemptTime: at(0), DeliveredTime: at(0), HTTPStatus: 202, Message: "Delivered (HTTP 202)"},
		},
		"Unavailable": {
			reason: "A 503 is retried after a backoff, rounded up to a whole second",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{HTTPStatus: 503, Message: "Subscriber answered HTTP 503"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryPending, Attempts: 1,
				LastAttemptTime: at(0), NextAttemptTime: at(3 * time.Second), HTTPStatus: 503,
				Message: "Subscriber answered HTTP 503"},
		},
		"BackoffIsCapped": {
			reason: "The wait doubles up to the cap",
			entry: func() v1.OutboxEntry {
				e := pending("audit", v1.StateCommitted)
				e.Attempts = 1
				e.NextAttemptTime = at(0)
				return e
			}(),
			answer: Answer{Message: "No answer: connection reset"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryPending, Attempts: 2,
				LastAttemptTime: at(0), NextAttemptTime: at(5 * time.Second), Message: "No answer: connection reset"},
		},
		"BudgetSpent": {
			reason: "The last attempt of the budget fails the entry for good",
			entry: func() v1.OutboxEntry {
				e := pending("audit", v1.StateCommitted)
				e.Attempts = 2
				return e
			}(),
			answer: Answer{HTTPStatus: 500, Message: "Subscriber answered HTTP 500"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryFailed, Attempts: 3,
				LastAttemptTime: at(0), HTTPStatus: 500, Message: "Subscriber answered HTTP 500"},
			wantFailed: true,
		},
		"Refused": {
			reason: "A delivery the egress policy refuses never leaves and never will: failed at once",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{Refused: true, Message: "Delivery never left: egress refused"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryFailed, Attempts: 1,
				LastAttemptTime: at(0), Message: "Delivery never left: egress refused"},
			wantFailed: true,
		},
		"LongMessage": {
			reason: "The message is capped to what the API accepts",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{HTTPStatus: 200, Message: strings.Repeat("x", 600)},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(uid, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryDelivered, Attempts: 1,
				LastAttemptTime: at(0), DeliveredTime: at(0), HTTPStatus: 200,
				Message: strings.Repeat("x", 509) + "..."},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, failed := After(tc.entry, budget, now, nil, tc.answer)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAfter(...): -want, +got:\n%s", tc.reason, diff)
			}
			if failed != tc.wantFailed {
				t.Errorf("%s\nAfter(...): want failed %v, got %v", tc.reason, tc.wantFailed, failed)
			}
		})
	}
}

func TestDue(t *testing.T) {
	later := pending("audit", v1.StateCommitted)
	later.NextAttemptTime = at(4 * time.Second)
	done := pending("billing", v1.StateCommitted)
	done.State = v1.DeliveryDelivered
	cases := map[string]struct {
		entries  []v1.OutboxEntry
		wantDue  bool
		wantWait time.Duration
	}{
		"None":        {},
		"Delivered":   {entries: []v1.OutboxEntry{done}},
		"New":         {entries: []v1.OutboxEntry{done, pending("x", v1.StateCommitted)}, wantDue: true},
		"BackingOff":  {entries: []v1.OutboxEntry{later, done}, wantWait: 4 * time.Second},
		"OneIsDueNow": {entries: []v1.OutboxEntry{later, pending("x", v1.StateCommitted)}, wantDue: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			due, wait := Due(tc.entries, now)
			if due != tc.wantDue || wait != tc.wantWait {
				t.Errorf("Due: want (%v, %v), got (%v, %v)", tc.wantDue, tc.wantWait, due, wait)
			}
		})
	}
}

// TestAnnounceLeavesItsInputAlone: two announcements decided from the same
// entries, whose array has room to spare, must not write into one array.
func TestAnnounceLeavesItsInputAlone(t *testing.T) {
	entries := make([]v1.OutboxEntry, 0, 4)
	uid := types.UID("u-1")
	a := Announce(entries, KindOperation, uid, v1.StateCommitted, []v1.Subscriber{{Name: "audit"}})
	b := Announce(entries, KindOperation, uid, v1.StateCommitted, []v1.Subscriber{{Name: "billing"}})
	if len(a) != 1 || a[0].Subscriber != "audit" {
		t.Errorf("the first announcement was overwritten by the second: %+v", a)
	}
	if len(b) != 1 || b[0].Subscriber != "billing" {
		t.Errorf("the second announcement: %+v", b)
	}
}
