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
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var now = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(now.Add(d))
	return &t
}

// scope is a scope record's name, as protocol.Scope.RecordName makes one.
const scope = "scope-2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"

// charge is the identity of a commit whose effect the tool named ch_1.
var charge = Identity{Scope: scope, Effect: "ch_1"}

// oldID is the id an earlier version gave an announcement: the object's UID,
// the state and the subscriber.
func oldID(state v1.OperationState, sub string) string {
	return "0b8f6c1e-1111-2222-3333-444455556666/" + string(state) + "/" + sub
}

var subs = []v1.Subscriber{
	{Name: "audit", ToolRef: v1.SinkToolReference{Name: "audit-log"}, Operation: "events.publish"},
	{Name: "billing", ToolRef: v1.SinkToolReference{Kind: v1.ToolKindClusterTool, Name: "billing"}, Operation: "events.publish"},
}

func pending(sub string, state v1.OperationState) v1.OutboxEntry {
	return v1.OutboxEntry{Subscriber: sub, EventID: EventID(charge, state, sub),
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
			entries: []v1.OutboxEntry{{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
				Type: EventType(KindOperation, v1.StateCommitted), State: v1.DeliveryDelivered, Attempts: 1}},
			state: v1.StateCommitted, subs: subs,
			want: []v1.OutboxEntry{{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
				Type: EventType(KindOperation, v1.StateCommitted), State: v1.DeliveryDelivered, Attempts: 1},
				pending("billing", v1.StateCommitted)},
		},
		"AnnouncedUnderTheOldID": {
			reason: "An entry an earlier version wrote under the object's UID stands for its announcement: " +
				"an upgrade announces nothing again to that subscriber",
			entries: []v1.OutboxEntry{{Subscriber: "audit", EventID: oldID(v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryPending, Attempts: 2}},
			state: v1.StateCommitted, subs: subs,
			want: []v1.OutboxEntry{{Subscriber: "audit", EventID: oldID(v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryPending, Attempts: 2},
				pending("billing", v1.StateCommitted)},
		},
		"AnnouncedOnceWhateverTheEffect": {
			reason: "An entry counts by subscriber and type, not by id: the announcement stands even if the effect " +
				"read now differs from the one it was named with",
			entries: []v1.OutboxEntry{{Subscriber: "audit", EventID: scope + "/Committed/-/audit",
				Type: "dev.once.operation.committed", State: v1.DeliveryDelivered}},
			state: v1.StateCommitted, subs: subs[:1],
			want: []v1.OutboxEntry{{Subscriber: "audit", EventID: scope + "/Committed/-/audit",
				Type: "dev.once.operation.committed", State: v1.DeliveryDelivered}},
		},
		"AnotherStateAnnounced": {
			reason: "An entry for another outcome of the same subscriber does not stand for this one",
			entries: []v1.OutboxEntry{{Subscriber: "audit", EventID: oldID(v1.StateFailedFinal, "audit"),
				Type: "dev.once.operation.failedfinal", State: v1.DeliveryDelivered}},
			state: v1.StateCommitted, subs: subs[:1],
			want: []v1.OutboxEntry{{Subscriber: "audit", EventID: oldID(v1.StateFailedFinal, "audit"),
				Type: "dev.once.operation.failedfinal", State: v1.DeliveryDelivered},
				pending("audit", v1.StateCommitted)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Announce(tc.entries, KindOperation, charge, tc.state, tc.subs)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nAnnounce(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestEventID(t *testing.T) {
	long := strings.Repeat("x", 65)
	cases := map[string]struct {
		reason string
		id     Identity
		state  v1.OperationState
		sub    string
		want   string
	}{
		"Effect": {
			reason: "A short external id is part of the id as it is",
			id:     charge, state: v1.StateCommitted, sub: "audit",
			want: scope + "/Committed/ch_1/audit",
		},
		"NoEffect": {
			reason: "An outcome without an external id says so with a dash",
			id:     Identity{Scope: scope}, state: v1.StateFailedFinal, sub: "audit",
			want: scope + "/FailedFinal/-/audit",
		},
		"LongestPlainEffect": {
			reason: "An external id of 64 characters is part of the id as it is",
			id:     Identity{Scope: scope, Effect: long[:64]}, state: v1.StateCommitted, sub: "audit",
			want: scope + "/Committed/" + long[:64] + "/audit",
		},
		"EffectStartingWithADash": {
			reason: "An external id that starts with '-' is named by its digest",
			id:     Identity{Scope: scope, Effect: "-1"}, state: v1.StateCommitted, sub: "audit",
			want: scope + "/Committed/sha256:" + digest("-1") + "/audit",
		},
		"LongEffect": {
			reason: "An external id longer than 64 characters is named by its digest",
			id:     Identity{Scope: scope, Effect: long}, state: v1.StateCommitted, sub: "audit",
			want: scope + "/Committed/sha256:" + digest(long) + "/audit",
		},
		"EffectWithSlashes": {
			reason: "An external id with characters outside letters, digits, '.', '_' and '-' is named by its digest",
			id:     Identity{Scope: scope, Effect: "orders/1001"}, state: v1.StateCommitted, sub: "audit",
			want: scope + "/Committed/sha256:" + digest("orders/1001") + "/audit",
		},
		"EffectThatIsADash": {
			reason: "An external id \"-\" is not taken for no effect",
			id:     Identity{Scope: scope, Effect: "-"}, state: v1.StateCommitted, sub: "audit",
			want: scope + "/Committed/sha256:" + digest("-") + "/audit",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := EventID(tc.id, tc.state, tc.sub); got != tc.want {
				t.Errorf("%s\nEventID(...): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
	if got, want := EventType(KindSaga, v1.StateCompensated), "dev.once.saga.compensated"; got != want {
		t.Errorf("EventType: want %q, got %q", want, got)
	}
}

// digest is the first 32 hex digits of the SHA-256 of s, computed apart
// from EffectPart.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", sum)[:32]
}

// TestEventIDNamesTheAnnouncement: another scope, outcome, effect or
// subscriber makes another id. (That every object of one scope announces
// one outcome under one id is proven where the objects are: the protocol's
// and the saga's tests.)
func TestEventIDNamesTheAnnouncement(t *testing.T) {
	other := "scope-" + strings.Repeat("0", 64)
	long := strings.Repeat("y", 65)
	cases := map[string]struct {
		reason string
		a, b   string
	}{
		"AnotherScope": {
			reason: "Another scope is another announcement",
			a:      EventID(charge, v1.StateCommitted, "audit"),
			b:      EventID(Identity{Scope: other, Effect: "ch_1"}, v1.StateCommitted, "audit"),
		},
		"AnotherState": {
			reason: "Another outcome is another announcement",
			a:      EventID(charge, v1.StateCommitted, "audit"),
			b:      EventID(charge, v1.StateCompensated, "audit"),
		},
		"AnotherEffect": {
			reason: "Another effect (the key used again after its record expired) is another announcement",
			a:      EventID(charge, v1.StateCommitted, "audit"),
			b:      EventID(Identity{Scope: scope, Effect: "ch_2"}, v1.StateCommitted, "audit"),
		},
		"NoEffect": {
			reason: "An outcome without an effect is not one with an effect",
			a:      EventID(charge, v1.StateCommitted, "audit"),
			b:      EventID(Identity{Scope: scope}, v1.StateCommitted, "audit"),
		},
		"AnotherSubscriber": {
			reason: "Each subscriber has an id of its own",
			a:      EventID(charge, v1.StateCommitted, "audit"),
			b:      EventID(charge, v1.StateCommitted, "billing"),
		},
		"EffectThatReadsLikeADigest": {
			reason: "An external id that reads like another's digest does not take that digest's place",
			a:      EventID(Identity{Scope: scope, Effect: long}, v1.StateCommitted, "audit"),
			b:      EventID(Identity{Scope: scope, Effect: EffectPart(long)}, v1.StateCommitted, "audit"),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.a == tc.b {
				t.Errorf("%s\nEventID: both are %q", tc.reason, tc.a)
			}
		})
	}
}

// TestEventIDFitsTheAPI: the longest id, of the longest scope name, state,
// plain effect and subscriber name the API allows, fits the API's bound.
func TestEventIDFitsTheAPI(t *testing.T) {
	longestScope := "scope-" + strings.Repeat("f", 64)
	longestSub := strings.Repeat("s", 63)
	for _, state := range []v1.OperationState{v1.StateCommitted, v1.StateFailedFinal, v1.StateCompensated} {
		for _, effect := range []string{strings.Repeat("e", 64), strings.Repeat("e", 4096), ""} {
			id := EventID(Identity{Scope: longestScope, Effect: effect}, state, longestSub)
			if len(id) > MaxEventIDLength {
				t.Errorf("EventID of %s with a %d-byte effect is %d bytes, over the API's %d", state, len(effect),
					len(id), MaxEventIDLength)
			}
		}
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
			answer: Answer{Delivered: true, HTTPStatus: 202, Message: "Delivered (HTTP 202)"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryDelivered, Attempts: 1,
				LastAttemptTime: at(0), DeliveredTime: at(0), HTTPStatus: 202, Message: "Delivered (HTTP 202)"},
		},
		"Unavailable": {
			reason: "A 503 is retried after a backoff, rounded up to a whole second",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{HTTPStatus: 503, Message: "Subscriber answered HTTP 503"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
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
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
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
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryFailed, Attempts: 3,
				LastAttemptTime: at(0), HTTPStatus: 500, Message: "Subscriber answered HTTP 500"},
			wantFailed: true,
		},
		"Final": {
			reason: "A delivery the egress policy refuses never leaves and never will: failed at once",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{Final: true, Message: "Delivery never left: egress refused"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryFailed, Attempts: 1,
				LastAttemptTime: at(0), Message: "Delivery never left: egress refused"},
			wantFailed: true,
		},
		"SuccessStatusNotDelivered": {
			reason: "A 2xx the sink's tool does not call a success (a page in front of it) is tried again",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{HTTPStatus: 200, Message: "a 200 answer that is not the tool's"},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
				Type: "dev.once.operation.committed", State: v1.DeliveryPending, Attempts: 1,
				LastAttemptTime: at(0), NextAttemptTime: at(3 * time.Second), HTTPStatus: 200,
				Message: "a 200 answer that is not the tool's"},
		},
		"LongMessage": {
			reason: "The message is capped to what the API accepts",
			entry:  pending("audit", v1.StateCommitted),
			answer: Answer{Delivered: true, HTTPStatus: 200, Message: strings.Repeat("x", 600)},
			want: v1.OutboxEntry{Subscriber: "audit", EventID: EventID(charge, v1.StateCommitted, "audit"),
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
	a := Announce(entries, KindOperation, charge, v1.StateCommitted, []v1.Subscriber{{Name: "audit"}})
	b := Announce(entries, KindOperation, charge, v1.StateCommitted, []v1.Subscriber{{Name: "billing"}})
	if len(a) != 1 || a[0].Subscriber != "audit" {
		t.Errorf("the first announcement was overwritten by the second: %+v", a)
	}
	if len(b) != 1 || b[0].Subscriber != "billing" {
		t.Errorf("the second announcement: %+v", b)
	}
}
