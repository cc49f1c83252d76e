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
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// sagaNamespace is the namespace of the saga under test.
const sagaNamespace = "shop"

// sagaScope is the first part of the ids of the announcements of the saga
// under test.
var sagaScope = ScopeName(sagaNamespace, sagaKey)

// digest is the first 32 hex digits of the SHA-256 of s, as an event id
// names a saga's effects.
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return fmt.Sprintf("%x", sum)[:32]
}

// committedAs commits an existing operation with the effect id.
func committedAs(name, id string) func(*sim) {
	return func(s *sim) {
		set(committed, name)(s)
		c := s.children[name]
		c.ExternalObjectID = id
		s.children[name] = c
	}
}

// doing is st with do in place of its own.
func doing(st stage, do func(*sim)) stage {
	st.do = do
	return st
}

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
	audit := []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "audit"}, Operation: "events.deliver"}}
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
			want: []string{"audit " + sagaScope + "/Committed/-/audit dev.once.saga.committed Pending"},
		},
		"CommittedWithEffects": {
			reason: "The id names the steps' effects by their external ids, so that the key used again after " +
				"its steps' records expired (new effects) is announced under another id",
			subs: audit,
			stages: []stage{start, doing(toCharge, committedAs("order.reserve", "r_1")),
				doing(toShip, committedAs("order.charge", "ch_1")),
				same("Committed.", committedAs("order.ship", "s_1"),
					outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted})},
			want: []string{"audit " + sagaScope + "/Committed/sha256:" + digest("reserve=r_1&charge=ch_1&ship=s_1") +
				"/audit dev.once.saga.committed Pending"},
		},
		"Compensated": {
			reason: "A rollback's end is the outcome announced",
			subs:   audit,
			stages: []stage{start, toCharge,
				{reason: "Reserve is compensated.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
				same("Compensated.", set(committed, "order.reserve.undo"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true})},
			want: []string{"audit " + sagaScope + "/Compensated/-/audit dev.once.saga.compensated Pending"},
		},
		"FailedFinal": {
			reason: "A saga stopped before any effect announces FailedFinal",
			subs:   audit,
			stages: []stage{start, same("FailedFinal.", set(failedFinal, "order.reserve"),
				outcome{State: failedFinal, Failed: "reserve", Reason: ReasonStepFailed, Stalled: true})},
			want: []string{"audit " + sagaScope + "/FailedFinal/-/audit dev.once.saga.failedfinal Pending"},
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

// TestAnnouncementIdentity: sagas of one scope (namespace and effective
// key) that reach one outcome with the same effects name it alike, whatever
// their names; another scope or other effects name another announcement.
func TestAnnouncementIdentity(t *testing.T) {
	keyed := &v1.SagaSpec{IdempotencyKey: "order"}
	unkeyed := &v1.SagaSpec{}
	steps := func(name string, ids ...string) v1.SagaStatus {
		var st v1.SagaStatus
		for i, id := range ids {
			step := []string{"reserve", "charge", "ship"}[i]
			st.Steps = append(st.Steps, v1.SagaStepStatus{Name: step, State: committed, Operation: name + "." + step,
				IdempotencyKey: "order/" + step, ExternalObjectID: id, Round: 1})
		}
		return st
	}
	compensated := steps("order", "r_1", "ch_1")
	compensated.Steps[1].Compensation = &v1.CompensationStatus{Operation: "order.charge.undo",
		IdempotencyKey: "order/charge/compensate", State: committed, Round: 1, ExternalObjectID: "re_1"}
	cases := map[string]struct {
		reason string
		a, b   string
		same   bool
	}{
		"SameKeyAnotherName": {
			reason: "A saga of another name with the key another saga's name gave it is in the same scope",
			a:      ScopeName("shop", Key("order", unkeyed)), b: ScopeName("shop", Key("order-again", keyed)), same: true,
		},
		"AnotherNamespace": {
			reason: "The same key in another namespace is another scope",
			a:      ScopeName("shop", "order"), b: ScopeName("shop-2", "order"),
		},
		"AnotherKey": {
			reason: "Another key is another scope",
			a:      ScopeName("shop", "order"), b: ScopeName("shop", "order-2"),
		},
		"NoForgedScope": {
			reason: "No choice of namespace and key spells another pair's scope",
			a:      ScopeName("a/b", "c"), b: ScopeName("a", "b/c"),
		},
		"DuplicateSteps": {
			reason: "A saga whose steps duplicate another's adopts their effects, under its own operations' names",
			a:      Effect(steps("order", "r_1", "ch_1", "s_1")), b: Effect(steps("order-again", "r_1", "ch_1", "s_1")),
			same: true,
		},
		"OtherEffects": {
			reason: "New effects (the key used again after its steps' records expired) are another announcement",
			a:      Effect(steps("order", "r_1", "ch_1", "s_1")), b: Effect(steps("order", "r_2", "ch_2", "s_2")),
		},
		"CompensationEffect": {
			reason: "A compensation's effect is part of the saga's",
			a:      Effect(steps("order", "r_1", "ch_1")), b: Effect(compensated),
		},
		"NoForgedEffect": {
			reason: "No external id spells another step's effect",
			a:      Effect(steps("order", "r_1&charge=ch_1")), b: Effect(steps("order", "r_1", "ch_1")),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if (tc.a == tc.b) != tc.same {
				t.Errorf("%s: %q and %q: want the same %v", tc.reason, tc.a, tc.b, tc.same)
			}
		})
	}
	if n := ScopeName("shop", strings.Repeat("k", 200)); !strings.HasPrefix(n, "saga-") || len(n) != len("saga-")+64 {
		t.Errorf("ScopeName: want saga- and 64 hex digits, got %q", n)
	}
	if got := Effect(steps("order", "", "")); got != "" {
		t.Errorf("Effect of steps without external ids: want none, got %q", got)
	}
}
