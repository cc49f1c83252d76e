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

package controller

import (
	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// answer is what the tool said to one call, and the claim the call ran
// under.
type answer struct {
	action  protocol.Action
	attempt int32
	state   v1.OperationState
	call    protocol.CallResult
	lookup  protocol.LookupResult
}

// apply is the decision the answer leads to from st.
func (a *answer) apply(st v1.SideEffectOperationStatus, p protocol.Policy, env protocol.Env) protocol.Decision {
	switch a.action {
	case protocol.ActionResend:
		return protocol.AfterResend(st, p, env, a.call)
	case protocol.ActionLookup:
		return protocol.AfterLookup(st, p, env, a.lookup)
	default:
		return protocol.AfterCall(st, p, env, a.call)
	}
}

// claimHeld reports whether st still shows the claim the call ran under.
func (a *answer) claimHeld(st v1.SideEffectOperationStatus, holder string) bool {
	return protocol.Fenced(st, protocol.Fence{Holder: holder, State: a.state, Attempt: a.attempt})
}

// late is the answer as a worker that lost its claim knows it.
func (a *answer) late(env protocol.Env) protocol.Late {
	l := protocol.Late{Attempt: a.attempt}
	switch a.action {
	case protocol.ActionLookup:
		l.Observation = protocol.LookupObservation(env, a.attempt, a.lookup)
		if a.lookup.Verdict == protocol.VerdictFound {
			c := a.lookup.Call()
			l.Effect = &c
		}
	default:
		kind := v1.ObservationCall
		if a.action == protocol.ActionResend {
			kind = v1.ObservationResend
		}
		l.Observation = protocol.CallObservation(env, kind, a.attempt, a.call)
		if a.call.Outcome == v1.OutcomeSucceeded {
			c := a.call
			l.Effect = &c
		}
	}
	return l
}

// call asks the tool what the claimed decision wants, renewing the claim
// while a long call runs. abandoned is true when a failpoint stopped the
// pass, as a crash would.
func (r *SideEffectOperationReconciler) call(p *pass, action protocol.Action) (a *answer, abandoned bool) {
	before, after := failpoint.ReconcileAfterClaim, failpoint.ReconcileAfterAnswer
	if action == protocol.ActionExecute {
		before, after = failpoint.ExecuteAfterClaim, failpoint.ExecuteAfterAnswer
	}
	if failpoint.Hit(p.stopping, before) {
		return nil, true
	}
	a = &answer{action: action, attempt: p.st.Claim.Attempt, state: p.st.State}
	ctx, fence, stop := r.keepClaim(p, a)
	req := effects.Request{Operation: p.op.Spec.Operation, Key: p.scope.ToolKey(),
		Parameters: p.params, Timeout: p.timeout, Mode: p.st.IdempotencyMode, Fence: fence, Clock: r.Clock.Now}
	if p.st.StartedTime != nil {
		req.Since = p.st.StartedTime.Time
	}
	outcome := ""
	switch action {
	case protocol.ActionLookup:
		a.lookup = p.client.Lookup(ctx, req)
		outcome = string(a.lookup.Verdict)
		metrics.Reconciliations.WithLabelValues(string(p.policy.Mode), lowerFirst(outcome)).Inc()
	case protocol.ActionResend:
		a.call = p.client.Execute(ctx, req)
		outcome = string(a.call.Outcome)
		verdict := "undecidable"
		if a.call.Outcome == v1.OutcomeSucceeded || a.call.Outcome == v1.OutcomePermanent {
			verdict = "found"
		}
		metrics.Reconciliations.WithLabelValues(string(p.policy.Mode), verdict).Inc()
	default:
		a.call = p.client.Execute(ctx, req)
		outcome = string(a.call.Outcome)
	}
	stop()
	metrics.ToolCalls.WithLabelValues(metrics.ToolValues(p.tool, lowerFirst(string(action)), outcome)...).Inc()
	if failpoint.Hit(p.stopping, after) {
		return nil, true
	}
	return a, false
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}
