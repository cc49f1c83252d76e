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
	"context"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// connect connects the pass to its tool, once per pass. Connecting reads
// the tool's Secrets; the call fetches its token. The error says why the
// tool cannot be called.
func (r *SideEffectOperationReconciler) connect(p *pass) error {
	if p.client != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(p.ctx, p.timeout)
	defer cancel()
	c, err := r.Connector.Connect(ctx, p.tool)
	if err != nil {
		return err
	}
	p.client = c
	return nil
}

// takeRetry takes a retry from the tool's budget, for a decision that
// retries. When the budget is spent, ok is false and wait says when it
// has a retry again.
func (r *SideEffectOperationReconciler) takeRetry(p *pass, d protocol.Decision) (wait time.Duration, ok bool) {
	if !d.Retry {
		return 0, true
	}
	if wait, ok := r.Budgets.Take(toolIDOf(p.tool), p.tool.GetSpec().RetryBudget, p.env.Now); !ok {
		budgetExhausted(p.tool)
		p.log.V(1).Info("Retry budget spent; retry deferred", "tool", p.tool.GetName(), "wait", wait)
		return wait, false
	}
	countRetry(p.tool)
	return 0, true
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
