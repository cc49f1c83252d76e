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

// Package effects is the contract between Once and the systems that perform
// side effects. Each backend implements it in a package of its own; the one
// Once has, effects/http, is wired in controller.Config.Build
// (internal/controller/setup.go), which cmd/main.go, the tests and the
// simulator share.
package effects

import (
	"context"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// Request is one operation to perform, or to ask about.
type Request struct {
	// Operation names one of the tool's operations.
	Operation string
	// Key is the idempotency key sent to the tool.
	Key string
	// Since is when the first attempt of this lifetime of the key was
	// claimed (the operation's status.startedTime): every effect of this
	// lifetime was made after it. An effect made before it is of an earlier
	// lifetime, one whose record expired. Zero when not known.
	Since time.Time
	// Clock reads the caller's clock: an answer that names a time
	// (Retry-After as a date) is read against it as it arrives. Nil reads
	// the host's clock.
	Clock func() time.Time
	// Parameters is the canonical JSON of the operation's parameters.
	Parameters []byte
	// Timeout bounds the call.
	Timeout time.Duration
	// Mode is the idempotency mode the attempt was made under, which
	// decides how an answer is classified; empty means the tool's.
	Mode v1.IdempotencyMode
	// Fence, if set, is asked at the last moment before the request is
	// written; an error stops it there, and the request never left. The
	// operation reconciler checks its claim so.
	Fence func() error
	// Headers are sent with the request, under the tool's own headers,
	// which win on a clash: the outbox relay sends an event's CloudEvents
	// attributes so. Names are canonical; values hold no secrets.
	Headers map[string]string
}

// Now reads the request's clock.
func (r Request) Now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock()
}

// ValidateVerdict is a tool's answer to a dry run.
type ValidateVerdict string

const (
	// ValidateValid: the tool would accept the request.
	ValidateValid ValidateVerdict = "Valid"
	// ValidateInvalid: the tool would refuse the request for good, or the
	// request cannot be made at all.
	ValidateInvalid ValidateVerdict = "Invalid"
	// ValidateUndecided: no answer that decides (the request did not
	// arrive, a 5xx, a gateway's page). Ask again later.
	ValidateUndecided ValidateVerdict = "Undecided"
	// ValidateNotOffered: the operation has no validate request.
	ValidateNotOffered ValidateVerdict = "NotOffered"
)

// ValidateResult is what a dry run found.
type ValidateResult struct {
	Verdict    ValidateVerdict
	HTTPStatus int32
	// Message explains a refusal, or why the answer decides nothing.
	Message string
}

// Client performs the side effects of one tool. Its contract:
//
//   - Execute sends the request at most once. It never retries, and no
//     layer beneath it may retry either: a hidden retry is an effect the
//     protocol did not claim.
//   - Execute classifies the answer. Retryable only when the request
//     provably had no effect: it never left, or the tool refused it before
//     doing anything (429, 503, …). Unknown whenever it may have had an
//     effect: the request was sent and no classifiable answer came back.
//   - Lookup asks whether the effect of Key exists and has no effect of its
//     own. Absent only when the tool's answer proves it.
//   - Validate asks, with no effect, whether the tool would accept the
//     request (a dry run). It is sent at most once, like every call. It is
//     Invalid on the tool's own refusal. It is Invalid too where Execute
//     would fail for good without sending anything (no such operation,
//     parameters the request cannot be built from). It is Undecided on any
//     other answer, or on none.
//   - Compensation is not a method of its own. A compensation is an
//     operation of the tool (a refund, a close). It is executed and looked
//     up through Execute and Lookup under the whole protocol, with a key
//     of its own, so that it is as idempotent as any effect.
//   - Nothing it returns holds a secret: no header values, no credentials.
type Client interface {
	Execute(ctx context.Context, req Request) protocol.CallResult
	Lookup(ctx context.Context, req Request) protocol.LookupResult
	Validate(ctx context.Context, req Request) ValidateResult
}

// Connector makes the Client of a tool, reading what it needs (Secrets)
// at the time of the call.
type Connector interface {
	Connect(ctx context.Context, tool v1.GenericTool) (Client, error)
}
