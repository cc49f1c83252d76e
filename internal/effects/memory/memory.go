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

// Package memory is an in-memory backend of effects, for tests: a tool that
// keeps its effects in a map and answers each call as a script says, so
// that the controller's logic can be table-tested fast, without HTTP. It
// keeps the effects contract: Execute makes at most one effect per call,
// Lookup makes none, and answers are classified as the HTTP backend's
// default table would.
package memory

import (
	"context"
	"fmt"
	"sync"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// Answer is what the tool does with one call.
type Answer string

const (
	// Succeed performs the effect (or, in Native mode, replays it) and
	// answers.
	Succeed Answer = "Succeed"
	// Lose performs the effect and answers nothing: the caller's request
	// times out after the tool committed.
	Lose Answer = "Lose"
	// Refuse answers 400 without an effect.
	Refuse Answer = "Refuse"
	// Unavailable answers 429 without an effect.
	Unavailable Answer = "Unavailable"
	// GatewayTimeout performs the effect, then a gateway answers 504.
	GatewayTimeout Answer = "GatewayTimeout"
	// Unauthorized answers 401 without an effect: a rotated credential.
	Unauthorized Answer = "Unauthorized"
)

// Tool is an in-memory tool in one idempotency mode. Calls beyond the
// script succeed.
type Tool struct {
	Mode   v1.IdempotencyMode
	Script []Answer

	mu      sync.Mutex
	calls   int
	effects map[string][]string // key → external ids
	seq     int
}

var (
	_ effects.Connector = &Tool{}
	_ effects.Client    = &Tool{}
)

// Connect returns the tool itself.
func (t *Tool) Connect(context.Context, v1.GenericTool) (effects.Client, error) { return t, nil }

// Effects returns the number of effects made for a key.
func (t *Tool) Effects(key string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.effects[key])
}

// Calls returns the number of Execute calls so far.
func (t *Tool) Calls() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.calls
}

// Execute answers the next scripted answer, unless the request's fence
// stops it before it is sent.
func (t *Tool) Execute(_ context.Context, req effects.Request) protocol.CallResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	if req.Fence != nil {
		if err := req.Fence(); err != nil {
			return protocol.CallResult{Request: "POST /" + req.Operation, Outcome: v1.OutcomeRetryable,
				Message: "request never left: " + err.Error()}
		}
	}
	a := Succeed
	if t.calls < len(t.Script) {
		a = t.Script[t.calls]
	}
	t.calls++
	r := protocol.CallResult{Request: "POST /" + req.Operation}
	switch a {
	case Refuse:
		return withStatus(r, 400, v1.OutcomePermanent, "rejected")
	case Unauthorized:
		return withStatus(r, 401, v1.OutcomePermanent, "invalid credential")
	case Unavailable:
		return withStatus(r, 429, v1.OutcomeRetryable, "slow down")
	}
	id, replayed := t.effect(req.Key)
	switch a {
	case Lose:
		r.Outcome, r.Message = v1.OutcomeUnknown, "no answer after the request was sent"
		return r
	case GatewayTimeout:
		r = withStatus(r, 504, v1.OutcomeUnknown, "gateway timeout")
		if t.Mode == v1.IdempotencyNative {
			r.Outcome, r.Relayed = v1.OutcomeRetryable, true
		}
		return r
	}
	r = withStatus(r, 200, v1.OutcomeSucceeded, "ok")
	r.ExternalObjectID, r.Replayed = id, replayed
	return r
}

// effect performs the effect of key: a new one, or in Native mode the
// first one again.
func (t *Tool) effect(key string) (id string, replayed bool) {
	if t.effects == nil {
		t.effects = map[string][]string{}
	}
	if ids := t.effects[key]; len(ids) > 0 && t.Mode == v1.IdempotencyNative {
		return ids[0], true
	}
	t.seq++
	id = fmt.Sprintf("fx_%d", t.seq)
	t.effects[key] = append(t.effects[key], id)
	return id, false
}

// Lookup finds the first effect of the key.
func (t *Tool) Lookup(_ context.Context, req effects.Request) protocol.LookupResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := protocol.LookupResult{Request: "GET /" + req.Operation, Verdict: protocol.VerdictAbsent, HTTPStatus: 404}
	if ids := t.effects[req.Key]; len(ids) > 0 {
		r.Verdict, r.HTTPStatus, r.ExternalObjectID = protocol.VerdictFound, 200, ids[0]
	}
	return r
}

func withStatus(r protocol.CallResult, status int32, o v1.Outcome, msg string) protocol.CallResult {
	r.HTTPStatus, r.Outcome, r.Message = status, o, msg
	return r
}

// Validate offers no dry run.
func (t *Tool) Validate(context.Context, effects.Request) effects.ValidateResult {
	return effects.ValidateResult{Verdict: effects.ValidateNotOffered}
}
