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

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// keepClaim bounds a call by its claim, and renews the claim while a call
// that may outlive it runs.
//
// After the claim's expiry, the attempt belongs to whoever takes it over.
// That worker counts on no request of this attempt leaving later: a worker
// that stalled between its claim and its call must not send at all. Two
// things keep it so:
//
//   - fence, which the transport asks just before it writes the request,
//     lets it go only until the claim's expiry less the claim grace (the
//     margin for clocks skewed between managers);
//   - the call's context ends when the claim expires or is lost.
//
// The timer alone is not enough: a process that was frozen wakes up with
// its timers and its writers racing. The renewals work on a copy of the
// operation. stop ends them, waits for them, and hands the pass the newest
// version they wrote.
func (r *SideEffectOperationReconciler) keepClaim(p *pass, a *answer) (ctx context.Context, fence func() error, stop func()) {
	ctx, cancel := context.WithCancel(p.ctx)
	var expiry atomic.Int64 // the claim's expiry, in Unix nanoseconds
	expiry.Store(p.st.Claim.ExpiryTime.UnixNano())
	fence = func() error {
		if ctx.Err() != nil {
			return errClaimLost
		}
		at := time.Unix(0, expiry.Load())
		if !r.Clock.Now().Before(at.Add(-r.ClaimGrace)) {
			return fmt.Errorf("%w (claim expiry %s, less %s of grace for skewed clocks)",
				errClaimExpired, at.UTC().Format(time.RFC3339), r.ClaimGrace)
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
			p.adopt(latest)
			p.st = *latest.Status.DeepCopy()
		}
	}
}

var (
	// errClaimExpired stops a request whose claim's time to send ran out
	// before it was written: the attempt may be another worker's now.
	errClaimExpired = errors.New("the claim's time to send ran out before the request was written")
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
		err := r.putStatus(p.ctx, next, protocol.Renew(op.Status, p.policy, env))
		if err == nil {
			return next, true
		}
		if apierrors.IsNotFound(err) {
			// The operation was deleted: nobody will write the answer.
			return op, false
		}
		if !apierrors.IsConflict(err) {
			// Keep calling; the claim holds until it expires.
			p.log.Error(err, "Renewing the claim failed")
			return op, true
		}
		fresh, err := r.readOp(p.ctx, op)
		if apierrors.IsNotFound(err) {
			// Gone, or another object under its name: not this claim.
			return op, false
		}
		if err != nil {
			return op, true
		}
		if !a.claimHeld(fresh.Status, r.Holder) {
			return op, false
		}
		op = fresh
	}
	return op, true
}
