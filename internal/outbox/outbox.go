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

// Package outbox is the pure part of Once's transactional outbox: which
// announcements an outcome records, with which ids, and what a delivery's
// answer does to its entry. It has no client and no clock of its own.
//
// The entries are recorded by the decision cores (internal/protocol for
// operations, internal/saga for sagas) in the same status write as the
// outcome they announce, so an outcome is never recorded without its
// announcements; the relay (internal/controller) delivers them at least
// once and records each delivery.
package outbox

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/text"
)

// Kind is what an announcement is about.
type Kind string

const (
	// KindOperation announces a SideEffectOperation's outcome.
	KindOperation Kind = "operation"
	// KindSaga announces a Saga's outcome.
	KindSaga Kind = "saga"
)

// Announced reports whether reaching state is announced: the terminal
// states only. NeedsReview is not an outcome: it waits for a person, and
// the outcome the person decides is announced then.
func Announced(state v1.OperationState) bool {
	return state.IsTerminal()
}

// EventID is the CloudEvent id of the announcement of state to subscriber:
// the same on every delivery, and different for every object (the UID),
// outcome and subscriber.
func EventID(uid types.UID, state v1.OperationState, subscriber string) string {
	return fmt.Sprintf("%s/%s/%s", uid, state, subscriber)
}

// EventType is the CloudEvent type of the announcement of state, for
// example dev.once.operation.committed.
func EventType(kind Kind, state v1.OperationState) string {
	return fmt.Sprintf("dev.once.%s.%s", kind, strings.ToLower(string(state)))
}

// Announce returns entries with a Pending entry for every subscriber that
// has none for the announcement of state yet. It changes nothing when
// state is not announced or no one subscribed, so an object without
// subscribers costs nothing.
func Announce(entries []v1.OutboxEntry, kind Kind, uid types.UID, state v1.OperationState,
	subscribers []v1.Subscriber) []v1.OutboxEntry {
	if !Announced(state) {
		return entries
	}
	// An append never writes into the caller's array.
	entries = slices.Clip(entries)
	for _, s := range subscribers {
		id := EventID(uid, state, s.Name)
		if hasEvent(entries, id) || len(entries) >= v1.MaxSubscribers {
			continue
		}
		entries = append(entries, v1.OutboxEntry{Subscriber: s.Name, EventID: id,
			Type: EventType(kind, state), State: v1.DeliveryPending})
	}
	return entries
}

func hasEvent(entries []v1.OutboxEntry, id string) bool {
	for _, e := range entries {
		if e.EventID == id {
			return true
		}
	}
	return false
}

// EntryDue reports whether e is to be delivered now.
func EntryDue(e v1.OutboxEntry, now time.Time) bool {
	return e.State == v1.DeliveryPending && (e.NextAttemptTime == nil || !e.NextAttemptTime.After(now))
}

// Due reports whether some entry is to be delivered now, and otherwise how
// long until the first one is (zero: none is pending).
func Due(entries []v1.OutboxEntry, now time.Time) (bool, time.Duration) {
	var wait time.Duration
	for _, e := range entries {
		if e.State != v1.DeliveryPending {
			continue
		}
		if EntryDue(e, now) {
			return true, 0
		}
		if w := e.NextAttemptTime.Sub(now); wait == 0 || w < wait {
			wait = w
		}
	}
	return false, wait
}

// Pending reports whether some entry is still to be delivered.
func Pending(entries []v1.OutboxEntry) bool {
	for _, e := range entries {
		if e.State == v1.DeliveryPending {
			return true
		}
	}
	return false
}

// Budget bounds the deliveries of one entry.
type Budget struct {
	// MaxAttempts is the number of deliveries tried before the entry is
	// Failed.
	MaxAttempts int32
	// InitialBackoff and MaxBackoff shape the exponential backoff between
	// deliveries.
	InitialBackoff, MaxBackoff time.Duration
}

// DefaultBudget is the manager's delivery budget unless told otherwise:
// about half an hour of attempts.
var DefaultBudget = Budget{MaxAttempts: 12, InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute}

// Answer is what one delivery came to.
type Answer struct {
	// HTTPStatus is the subscriber's answer, zero if none arrived.
	HTTPStatus int32
	// Refused marks a delivery that never left and never will while the
	// subscriber's address stays what it is: the egress policy refused it.
	Refused bool
	// Message says what happened; it holds no secrets.
	Message string
}

// Acknowledged reports whether the subscriber took the event.
func (a Answer) Acknowledged() bool {
	return a.HTTPStatus >= 200 && a.HTTPStatus < 300
}

// After is entry after a delivery that came to a, at now. failed reports
// that this delivery spent the budget: the entry is Failed and a person
// should hear of it. jitter draws a duration uniformly in [0, d]; nil
// takes d.
func After(e v1.OutboxEntry, b Budget, now time.Time, jitter func(time.Duration) time.Duration,
	a Answer) (entry v1.OutboxEntry, failed bool) {
	t := metav1.NewTime(now)
	e.Attempts++
	e.LastAttemptTime = &t
	e.HTTPStatus = a.HTTPStatus
	e.Message = capMessage(a.Message)
	e.NextAttemptTime = nil
	switch {
	case a.Acknowledged():
		e.State = v1.DeliveryDelivered
		e.DeliveredTime = &t
		return e, false
	case a.Refused || e.Attempts >= b.MaxAttempts:
		e.State = v1.DeliveryFailed
		return e, true
	default:
		wait := backoff(b, e.Attempts)
		if jitter != nil {
			wait = jitter(wait)
		}
		// Status times keep whole seconds: round up, so the next attempt
		// never comes before its time.
		next := metav1.NewTime(now.Add(wait).Truncate(time.Second).Add(time.Second))
		e.NextAttemptTime = &next
		return e, false
	}
}

// backoff is the ceiling of the wait after n failed deliveries:
// min(MaxBackoff, InitialBackoff·2^(n-1)).
func backoff(b Budget, n int32) time.Duration {
	d := b.InitialBackoff
	for i := int32(1); i < n && d < b.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, b.MaxBackoff)
}

// maxMessage is the API's bound on an entry's message.
const maxMessage = 512

func capMessage(s string) string {
	return text.Shorten(s, maxMessage)
}
