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
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Policy is what a decision needs to know about the tool and the
// operation's own limits.
type Policy struct {
	// Mode is what the tool promises about repeated requests.
	Mode v1.IdempotencyMode
	// MaxAttempts bounds the attempts, the first included.
	MaxAttempts int32
	// ReconcileLimit bounds the questions about one unknown attempt.
	ReconcileLimit int32
	// InitialBackoff and MaxBackoff shape the exponential backoff.
	InitialBackoff, MaxBackoff time.Duration
	// ClaimDuration is how long a claim holds without renewal.
	ClaimDuration time.Duration
	// MaxClaimDuration bounds any worker's claim, of any operation: the
	// longest a request of an operation this worker knows nothing about
	// (a deleted owner's) may still leave after now.
	MaxClaimDuration time.Duration
	// LookupDelay is, in Lookup mode, how long after an attempt was sent a
	// lookup can prove that it had no effect: the tool's processing time
	// plus the lag of its lookup index, as the tool declares them.
	LookupDelay time.Duration
	// ClockMargin is added to LookupDelay: the attempt's last send is
	// stamped by one manager's clock, and the lookup is asked by another's,
	// which may run ahead of it. The claim's grace is that margin.
	ClockMargin time.Duration
	// Retention is how long the scope's record keeps the outcome after the
	// operation ends.
	Retention time.Duration
	// DedupeWindow is, in Native mode, how long the tool remembers a key
	// after its first request: a re-send later than that is a new request.
	DedupeWindow time.Duration
	// Promise is the digest of what an attempt's reconciliation rests on
	// (PromiseOf), pinned in the status when an attempt is claimed.
	Promise string
}

// Env is the world the decision is taken in.
type Env struct {
	// Now is the current time.
	Now time.Time
	// Holder identifies this worker in claims.
	Holder string
	// Generation is the object's metadata.generation.
	Generation int64
	// Jitter returns a uniformly random duration in [0, d].
	Jitter func(d time.Duration) time.Duration
	// RecordName is the name of the operation's scope record
	// (Scope.RecordName), which the ids of its outcome's announcements
	// derive from, with the effect the status holds: every operation of
	// one scope announces one outcome under one id (package outbox).
	RecordName string
	// Subscribers are the object's spec.subscribers: a terminal transition
	// records their announcements in the same write (package outbox).
	Subscribers []v1.Subscriber
	// Resolution is the object's spec.resolution. One that stands when
	// the operation enters NeedsReview was written before that review:
	// the status keeps it among its earlier resolutions, and it never
	// decides the review.
	Resolution *v1.Resolution
	// RecordCreated is when the scope's record the decision reads was
	// created, by the API server's clock; zero when it reads none.
	RecordCreated time.Time
	// Suspended names who suspended the operation's new calls ("Tool
	// pay", "the operation"). Empty means no one did.
	Suspended string
	// Cancel is the object's spec.cancel.
	Cancel bool
}

// Action is what the controller must do after writing Decision.Status.
type Action string

const (
	// ActionWait: write nothing, come back after RequeueAfter (or when the
	// object changes, if zero).
	ActionWait Action = "Wait"
	// ActionWrite: write the status, nothing else.
	ActionWrite Action = "Write"
	// ActionExecute: write the status, which claims an attempt, then call
	// the tool and pass the answer to AfterCall.
	ActionExecute Action = "Execute"
	// ActionResend: write the status, which claims the reconciliation, then
	// re-send the request with the same key and pass the answer to
	// AfterResend.
	ActionResend Action = "Resend"
	// ActionLookup: write the status, which claims the reconciliation, then
	// ask the tool by key and pass the answer to AfterLookup.
	ActionLookup Action = "Lookup"
	// ActionDone: the operation is terminal. Nothing is left to do.
	ActionDone Action = "Done"
)

// IsCall reports whether the action calls the tool after its write.
func (a Action) IsCall() bool {
	return a == ActionExecute || a == ActionResend || a == ActionLookup
}

// Event is what a decision did, for events, logs and metrics.
type Event struct {
	// Warning marks an event a person should look at.
	Warning bool
	// Reason is a CamelCase reason.
	Reason string
	// Message is a stable, capitalised sentence without trailing period.
	Message string
	// Routine marks what every operation does on its way to a commit: the
	// first attempt's claim and its commit. It is logged and counted, not
	// written as a Kubernetes Event: the status already says it, and two
	// Events per operation would cost the API server two writes that no
	// one reads.
	Routine bool
}

// Decision is the next status and what to do with it.
type Decision struct {
	// Action to take.
	Action Action
	// Status is the status to write first, for every action but Wait and
	// Done.
	Status v1.SideEffectOperationStatus
	// RequeueAfter is when to look at the operation again: for Wait, and
	// for Write when the new status needs attention later. Zero means when
	// it changes.
	RequeueAfter time.Duration
	// Retry marks an Execute that retries a failed attempt; it is subject
	// to the tool's retry budget.
	Retry bool
	// Event describes the transition, if any.
	Event *Event
}

// CallResult is what the tool answered to an attempt or a re-send.
type CallResult struct {
	// Outcome classifies the answer.
	Outcome v1.Outcome
	// HTTPStatus of the answer, zero if none arrived.
	HTTPStatus int32
	// ExternalObjectID and ExternalRequestID identify the effect and the
	// request at the tool.
	ExternalObjectID, ExternalRequestID string
	// Result is the mapped result, already capped; ResultDigest identifies
	// it.
	Result       *runtime.RawExtension
	ResultDigest string
	// RetryAfter is the tool's Retry-After, zero if none.
	RetryAfter time.Duration
	// Replayed marks an answer the tool says is its replay of the first
	// answer to the same key (the tool's replayed expression).
	Replayed bool
	// Relayed marks a retryable answer that a gateway or proxy also gives
	// after its upstream committed (by default 408, 502, 503 and 504 from a
	// Native tool): retried only because the retry is a same-key re-send.
	// An answer a tool's own outcome rule classifies is never relayed.
	Relayed bool
	// Request summarises what was sent; Message what came back. Neither
	// holds secrets.
	Request, Message string
}

// Verdict is a lookup's answer to "did the effect of this key happen?".
type Verdict string

const (
	// VerdictFound: the effect exists.
	VerdictFound Verdict = "Found"
	// VerdictAbsent: the effect provably does not exist.
	VerdictAbsent Verdict = "Absent"
	// VerdictUndecidable: the lookup failed or its answer proves nothing.
	VerdictUndecidable Verdict = "Undecidable"
)

// LookupResult is what the tool answered to a lookup.
type LookupResult struct {
	Verdict                             Verdict
	HTTPStatus                          int32
	ExternalObjectID, ExternalRequestID string
	Result                              *runtime.RawExtension
	ResultDigest                        string
	Request, Message                    string
}
