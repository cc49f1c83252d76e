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
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	req := effects.Request{Operation: p.op.Spec.Operation, Key: p.st.ToolIdempotencyKey,
		Parameters: p.params, Timeout: p.timeout, Mode: p.st.IdempotencyMode, Fence: fence}
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

// keepClaim bounds a call by its claim and renews the claim while a call
// that may outlive it runs. After the claim's expiry the attempt belongs to
// whoever takes it over, who counts on no request of it leaving later (a
// worker that stalled between its claim and its call must not send at
// all). Two things keep it so: fence, which the transport asks at the last
// moment before the request is written, compares the clock with the
// claim's expiry; and the call's context ends when the claim expires or is
// lost. The timer alone is not enough: a process that was frozen wakes up
// with its timers and its writers racing. The renewals work on a copy of
// the operation; stop ends them, waits for them, and hands the pass the
// newest version they wrote.
func (r *SideEffectOperationReconciler) keepClaim(p *pass, a *answer) (ctx context.Context, fence func() error, stop func()) {
	ctx, cancel := context.WithCancel(p.ctx)
	var expiry atomic.Int64 // the claim's expiry, in Unix nanoseconds
	expiry.Store(p.st.Claim.ExpiryTime.UnixNano())
	fence = func() error {
		if ctx.Err() != nil {
			return errClaimLost
		}
		if at := time.Unix(0, expiry.Load()); !r.Clock.Now().Before(at) {
			return fmt.Errorf("%w (claim expiry %s)", errClaimExpired, at.UTC().Format(time.RFC3339))
		}
		return nil
	}
	left := p.st.Claim.ExpiryTime.Sub(r.Clock.Now())
	if left <= 0 {
		cancel()
		return ctx, fence, cancel
	}
	timer := r.Clock.AfterFunc(left, cancel)
	if p.timeout <= r.MaxClaim {
		return ctx, fence, func() {
			timer.Stop()
			cancel()
		}
	}
	done := make(chan struct{})
	latest := p.op.DeepCopy()
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := r.Clock.NewTicker(p.policy.ClaimDuration / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C():
				op, held := r.renew(p, latest, a)
				if !held {
					cancel()
					return
				}
				latest = op
				at := op.Status.Claim.ExpiryTime
				expiry.Store(at.UnixNano())
				timer.Reset(at.Sub(r.Clock.Now()))
			}
		}
	})
	return ctx, fence, func() {
		close(done)
		wg.Wait()
		timer.Stop()
		cancel()
		if latest.ResourceVersion != p.op.ResourceVersion {
			p.op = latest
			p.st = *latest.Status.DeepCopy()
		}
	}
}

var (
	// errClaimExpired stops a request whose claim expired before it was
	// written: the attempt may be another worker's now.
	errClaimExpired = errors.New("the claim expired before the request was written")
	// errClaimLost stops a request whose claim was lost or whose pass ended.
	errClaimLost = errors.New("the claim was lost before the request was written")
)

// renew extends the claim of op, a copy of the pass's operation, and
// returns the version it wrote; false means the claim is no longer this
// worker's.
func (r *SideEffectOperationReconciler) renew(p *pass, op *v1.SideEffectOperation, a *answer) (*v1.SideEffectOperation, bool) {
	for range fencedRetries {
		env := p.env
		env.Now = r.Clock.Now()
		next := op.DeepCopy()
		next.Status = protocol.Renew(op.Status, p.policy, env)
		err := r.Status().Update(p.ctx, next)
		if err == nil {
			return next, true
		}
		if apierrors.IsNotFound(err) {
			// The operation was deleted: nobody will record the answer.
			return op, false
		}
		if !apierrors.IsConflict(err) {
			// Keep calling; the claim holds until it expires.
			p.log.Error(err, "Renewing the claim failed")
			return op, true
		}
		fresh := &v1.SideEffectOperation{}
		if err := r.APIReader.Get(p.ctx, client.ObjectKeyFromObject(op), fresh); err != nil {
			return op, true
		}
		if !a.claimHeld(fresh.Status, r.Holder) {
			return op, false
		}
		op = fresh
	}
	return op, true
}

// keepPending remembers an answer whose write failed for a reason other
// than a conflict (the API server was unreachable, say), so that the next
// pass records it rather than treating the attempt as unknown.
func (r *SideEffectOperationReconciler) keepPending(p *pass, a *answer) {
	r.pending.Store(p.op.UID, a)
}

// takePending returns the remembered answer, if any, and forgets it.
func (r *SideEffectOperationReconciler) takePending(p *pass) *answer {
	if v, ok := r.pending.LoadAndDelete(p.op.UID); ok {
		return v.(*answer)
	}
	return nil
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	return string(s[0]|0x20) + s[1:]
}
