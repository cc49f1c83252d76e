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
// announcements an outcome makes, with which ids, and what a delivery's
// answer does to its entry. It has no client and no clock of its own.
//
// The entries are written by the decision cores (internal/protocol for
// operations, internal/saga for sagas). They go in the same status write
// as the outcome they announce, so an outcome is never written without its
// announcements. The relay (internal/controller) delivers them at least
// once and writes each delivery.
package outbox

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// Identity is what an announcement announces, whatever object carries it:
// the idempotency scope its outcome belongs to and the effect it stands
// for. Every object that carries one outcome (an operation, its duplicates,
// an operation made again by a redelivered message, which adopts the first
// one's outcome) has one identity, so one effect is announced under one id
// (docs/outbox.md, "The event id").
type Identity struct {
	// Scope names the scope. For an operation it is the scope record name
	// (protocol.Scope.RecordName, which status.recordName holds). For a
	// saga it is saga.ScopeName. It must not be empty.
	Scope string
	// Effect identifies the effect the outcome stands for. For an operation
	// it is status.externalObjectID, for a saga saga.Effect. It is empty
	// when the outcome names none (a failure, as a rule).
	Effect string
}

// MaxEventIDLength is the API's bound on an entry's eventID. EventID stays
// within it: a scope's name (70 characters), a state (11), an effect (64),
// a subscriber's name (63) and three slashes.
const MaxEventIDLength = 256

// EventID is the CloudEvent id of the announcement of state to subscriber:
// "<scope>/<state>/<effect>/<subscriber>", where effect is EffectPart of
// id.Effect. It is the same on every delivery and for every object that
// carries the outcome, and different for every scope, outcome, effect and
// subscriber.
func EventID(id Identity, state v1.OperationState, subscriber string) string {
	return id.Scope + "/" + string(state) + "/" + EffectPart(id.Effect) + "/" + subscriber
}

// maxPlainEffect is the longest effect an event id holds as it is.
const maxPlainEffect = 64

// EffectPart is how an event id names an effect:
//
//   - "-" for none.
//   - The external id itself when it has at most 64 characters, all
//     letters, digits, '.', '_' or '-', and does not start with '-'
//     (ch_3PqX).
//   - Otherwise "sha256:" and the first 32 hex digits of its SHA-256.
//
// No plain id is "-" or holds a ':', so no two effects share a part.
func EffectPart(effect string) string {
	if effect == "" {
		return "-"
	}
	if plainEffect(effect) {
		return effect
	}
	sum := sha256.Sum256([]byte(effect))
	return "sha256:" + hex.EncodeToString(sum[:16])
}

// plainEffect reports whether an event id may hold effect as it is.
func plainEffect(effect string) bool {
	if len(effect) > maxPlainEffect || effect[0] == '-' {
		return false
	}
	for _, c := range []byte(effect) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

// EventType is the CloudEvent type of the announcement of state, for
// example dev.once.operation.committed.
func EventType(kind Kind, state v1.OperationState) string {
	return fmt.Sprintf("dev.once.%s.%s", kind, strings.ToLower(string(state)))
}

// Announce returns entries with a Pending entry, under the id of id, for
// every subscriber that has none for the announcement of state yet. An
// entry counts by its subscriber and its type, not by its id. So an entry
// written under an earlier form of the id still stands for its
// announcement. That form was the object's UID, before announcements were
// named by their scope. An upgrade never announces an outcome twice. It
// changes nothing when state is not announced or no one subscribed, so an
// object without subscribers costs nothing.
func Announce(entries []v1.OutboxEntry, kind Kind, id Identity, state v1.OperationState,
	subscribers []v1.Subscriber) []v1.OutboxEntry {
	if !Announced(state) {
		return entries
	}
	typ := EventType(kind, state)
	// An append never writes into the caller's array.
	entries = slices.Clip(entries)
	for _, s := range subscribers {
		if hasEntry(entries, s.Name, typ) || len(entries) >= v1.MaxSubscribers {
			continue
		}
		entries = append(entries, v1.OutboxEntry{Subscriber: s.Name, EventID: EventID(id, state, s.Name),
			Type: typ, State: v1.DeliveryPending})
	}
	return entries
}

// hasEntry reports whether entries announce the event type typ to
// subscriber, under any id.
func hasEntry(entries []v1.OutboxEntry, subscriber, typ string) bool {
	return slices.ContainsFunc(entries, func(e v1.OutboxEntry) bool {
		return e.Subscriber == subscriber && e.Type == typ
	})
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
	// Delivered: the sink took the event (its tool's classification of the
	// answer is a success).
	Delivered bool
	// Final: no later delivery can do better, so none is tried. The
	// request never left and never will while the sink stays as declared
	// (the egress policy refused its address), or the sink's tool
	// classifies the answer as a permanent failure.
	Final bool
	// HTTPStatus is the sink's answer, zero if none arrived.
	HTTPStatus int32
	// Message says what happened; it holds no secrets.
	Message string
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
	case a.Delivered:
		e.State = v1.DeliveryDelivered
		e.DeliveredTime = &t
		return e, false
	case a.Final || e.Attempts >= b.MaxAttempts:
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
