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
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// What a pass knows: the operation as it read it, the working copy of its
// status, its tool and policy, and the answer a call brought. readTool
// reads the tool, through the cache. Every file before this one works on
// a pass, and this file calls none of them.

// pass is one reconciliation of one operation: what it learned, and the
// working copy of its status.
type pass struct {
	// ctx is for the pass's calls and writes. It does not end when the
	// manager stops, so that a call in flight is finished and its answer
	// written within its claim (the manager's graceful shutdown waits).
	// A pass that writes what a stopping manager holds keeps its bound.
	ctx context.Context
	// stopping ends when the manager stops. Only failpoints wait on it.
	stopping context.Context
	log      logr.Logger
	op       *v1.SideEffectOperation
	st       v1.SideEffectOperationStatus
	scope    protocol.Scope
	params   []byte
	env      protocol.Env
	policy   protocol.Policy
	// timeout bounds one call.
	timeout time.Duration
	tool    v1.GenericTool
	client  effects.Client
}

func (r *SideEffectOperationReconciler) newPass(ctx context.Context, op *v1.SideEffectOperation) *pass {
	own := context.WithoutCancel(ctx)
	if ctx.Value(answersOnly{}) != nil {
		// A stopping manager's writes of what it holds end with the
		// bound heldWriter gives them. Nothing waits for them after.
		own = ctx
	}
	return &pass{
		ctx:      own,
		stopping: ctx,
		log:      logf.FromContext(ctx),
		op:       op,
		st:       *op.Status.DeepCopy(),
		env: protocol.Env{Now: r.Clock.Now(), Holder: r.Holder, Generation: op.Generation, Jitter: r.jitter(),
			RecordName: protocol.OperationScope(op).RecordName(), Subscribers: op.Spec.Subscribers,
			Resolution: op.Spec.Resolution},
		// Until the tool is loaded, the policy knows what the operation
		// alone says: enough to apply a person's resolution or to fail.
		policy: protocol.Policy{Retention: protocol.Retention(&op.Spec),
			MaxClaimDuration: r.limits().MaxClaimDuration()},
	}
}

// answersOnly marks a pass's context: the pass writes the answer it holds
// and whatever follows from it without a call, and makes no call.
type answersOnly struct{}

// makesNoCall reports whether the pass may make no call to the tool: it
// writes what a stopping manager holds (answersOnly).
func (p *pass) makesNoCall() bool { return p.ctx.Value(answersOnly{}) != nil }

// adopt makes op, read again, the object of the pass: its version, and
// what the decisions read of its metadata and spec.
func (p *pass) adopt(op *v1.SideEffectOperation) {
	p.op = op
	p.env.Generation, p.env.Resolution = op.Generation, op.Spec.Resolution
}

// identify computes the operation's scope and request hash, and puts them
// in the working status.
func (p *pass) identify() error {
	spec := p.op.Spec
	p.scope = protocol.OperationScope(p.op)
	var raw []byte
	if spec.Parameters != nil {
		raw = spec.Parameters.Raw
	}
	hash, canonical, err := protocol.RequestHash(p.scope.Tool, spec.Operation, raw)
	if err != nil {
		return fmt.Errorf("spec.parameters cannot be hashed: %w", err)
	}
	p.params = canonical
	p.st.IdempotencyKey = p.scope.Key
	p.st.ToolIdempotencyKey = p.scope.ToolKey()
	p.st.RequestHash = hash
	p.st.RecordName = p.scope.RecordName()
	return nil
}

// readTool reads the operation's tool and derives the policy. reason and
// msg say why the operation must wait for the tool to exist or be fixed.
// Nothing is written.
func (r *SideEffectOperationReconciler) readTool(p *pass) (reason, msg string, err error) {
	tool, reason, msg, err := usableTool(p.ctx, r.Client, r.Validator, r.WatchNamespaces, p.scope.Tool, p.op.Namespace, p.op.Spec.Operation)
	if err != nil || reason != "" {
		return reason, msg, err
	}
	spec := tool.GetSpec()
	p.tool = tool
	p.timeout = protocol.Timeout(spec, &p.op.Spec)
	p.policy = protocol.NewPolicy(spec, &p.op.Spec, r.limits())
	return "", "", nil
}

// result turns a pass's outcome into what controller-runtime expects.
// Conflicts are requeued quietly, never surfaced.
func (p *pass) result(res reconcile.Result, err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		p.log.V(1).Info("Lost a write to a newer version; waiting for it")
		return reconcile.Result{}, nil
	}
	return res, err
}

// decide is the protocol's decision on the pass's operation, with the
// brakes people set on it and on its tool (spec.suspend, spec.cancel).
func (p *pass) decide() protocol.Decision {
	p.env.Cancel = p.op.Spec.Cancel
	p.env.Suspended = ""
	switch {
	case p.op.Spec.Suspend:
		p.env.Suspended = "the operation"
	case p.tool != nil && p.tool.GetSpec().Suspend:
		p.env.Suspended = string(p.tool.Kind()) + " " + p.tool.GetName()
	}
	return protocol.Next(p.st, p.op.Spec.Resolution, p.policy, p.env)
}

// limits are this manager's bounds on claims.
func (r *SideEffectOperationReconciler) limits() protocol.Limits {
	return protocol.Limits{MaxClaim: r.MaxClaim, ClaimGrace: r.ClaimGrace}
}

// jitter is the reconciler's Jitter, or randomJitter.
func (r *SideEffectOperationReconciler) jitter() func(time.Duration) time.Duration {
	if r.Jitter != nil {
		return r.Jitter
	}
	return randomJitter
}

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

// rawParameters are an operation's parameters as written.
func rawParameters(op *v1.SideEffectOperation) []byte {
	if op.Spec.Parameters == nil {
		return nil
	}
	return op.Spec.Parameters.Raw
}
