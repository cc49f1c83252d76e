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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// An answer in hand is never dropped (I12). This file holds that rule.
//
// A call's answer is written by the pass that made the call, fenced on
// the claim it ran under (writeAnswer). The write can fail in five ways,
// and each has one place to go:
//
//   - It loses to a newer version while the claim still holds: the answer
//     is applied again to the new status (writeFenced).
//   - The claim has moved on: the answer is written as evidence, as a
//     commit, or as a second effect raised at once (keepEvidence).
//   - The operation is gone, or its name is another object's: the answer
//     goes to the scope's record (answerGone).
//   - The API server cannot be reached: the answer is held in memory, by
//     the operation's UID (holdAnswer), and the next pass writes it before
//     it decides anything else.
//   - It keeps losing to newer versions: it is held, as above.
//
// A held answer is written whatever happened meanwhile. Another manager
// may have settled the operation (writeHeldAnswer). Its tool may be gone
// (writeAnswerWithoutTool). The operation may be being deleted
// (writeHeldAtRelease). The operation may be gone, or its name another
// object's: the answer then goes to the scope's record (answerGone). A
// stopping manager writes what it holds before it exits (WriteHeld).

// heldAnswer is an answer kept for a later pass, with the operation it
// answers as the pass that kept it read it. If that object goes, the
// answer still knows its scope, and is written into the scope's record.
type heldAnswer struct {
	op *v1.SideEffectOperation
	a  *answer
}

// holdAnswer remembers an answer whose write failed for a reason other
// than a conflict (the API server was unreachable, say). The next pass
// writes it rather than treating the attempt as unknown. It is kept by the
// operation's UID: an object made again under the name is another
// operation, which never takes it (answerOrphans).
func (r *SideEffectOperationReconciler) holdAnswer(p *pass, a *answer) {
	r.held.Store(p.op.UID, &heldAnswer{op: p.op.DeepCopy(), a: a})
}

// takeHeld returns the answer held for the pass's operation, if any, and
// forgets it.
func (r *SideEffectOperationReconciler) takeHeld(p *pass) *answer {
	if v, ok := r.held.LoadAndDelete(p.op.UID); ok {
		return v.(*heldAnswer).a
	}
	return nil
}

// writeAnswer writes the decision an answer leads to, fenced on the claim
// the call ran under.
func (r *SideEffectOperationReconciler) writeAnswer(p *pass, a *answer) (reconcile.Result, error) {
	d, err := r.writeFenced(p, a.apply(p.st, p.policy, p.env), a)
	return reconcile.Result{RequeueAfter: d.RequeueAfter}, err
}

// writeFenced writes the decision that follows a call's answer. If the
// write loses to a newer version, it reads the status again. While this
// worker still holds the claim, it applies the answer to the new status.
// Once the claim has moved on, the worker is stale: what it learned is
// kept as evidence only, if it does not contradict the status (I6).
// It returns the decision it wrote.
func (r *SideEffectOperationReconciler) writeFenced(p *pass, d protocol.Decision, a *answer) (protocol.Decision, error) {
	for range fencedRetries {
		err := r.writeStatus(p, d)
		if !apierrors.IsConflict(err) {
			if err != nil {
				return protocol.Decision{Action: protocol.ActionWait}, r.keepOrAnswerGone(p, a, err)
			}
			return d, nil
		}
		fresh, err := r.readOp(p.ctx, p.op)
		if err != nil {
			return protocol.Decision{Action: protocol.ActionWait}, r.keepOrAnswerGone(p, a, err)
		}
		p.adopt(fresh)
		if !a.claimHeld(fresh.Status, r.Holder) {
			return protocol.Decision{Action: protocol.ActionWait}, r.keepEvidence(p, a)
		}
		p.st = *fresh.Status.DeepCopy()
		if err := p.identify(); err != nil {
			return d, err
		}
		d = a.apply(p.st, p.policy, p.env)
	}
	r.holdAnswer(p, a)
	return d, errors.New("outcome write kept losing to newer versions; it will be retried")
}

// resume writes an answer whose write failed in an earlier pass: as the
// attempt's outcome while the status still shows its claim, else as a late
// answer. done is false when the answer went in as evidence: the pass then
// decides on the status it wrote.
func (r *SideEffectOperationReconciler) resume(p *pass, a *answer) (res reconcile.Result, done bool, err error) {
	if ok, err := r.seeClaim(p, a); !ok {
		return reconcile.Result{}, true, err
	}
	if a.claimHeld(p.st, r.Holder) {
		res, err := r.writeAnswer(p, a)
		return res, true, err
	}
	if err := r.keepEvidence(p, a); err != nil {
		return reconcile.Result{}, true, err
	}
	p.st = *p.op.Status.DeepCopy()
	return reconcile.Result{}, false, nil
}

// seeClaim reads the operation past the cache when the cache does not show
// the claim the answer a ran under: the cache may lag behind the claim. ok
// is false when the read failed. The answer is then held for the next
// pass, or written into the scope's record if the operation is gone.
func (r *SideEffectOperationReconciler) seeClaim(p *pass, a *answer) (ok bool, err error) {
	if a.claimHeld(p.st, r.Holder) {
		return true, nil
	}
	fresh, err := r.readOp(p.ctx, p.op)
	if err != nil {
		return false, r.keepOrAnswerGone(p, a, err)
	}
	p.adopt(fresh)
	p.st = *fresh.Status.DeepCopy()
	return true, nil
}

// writeHeldAnswer writes an answer this manager holds for an operation
// its cache shows settled by someone else. protocol.Stale decides how: as
// evidence, as the commit a person was about to be asked for, or as a
// second effect, raised at once. done is false when the API server shows
// the answer's claim still held (the cache lagged). The pass then goes on
// with fresh, whose drive writes the answer as the attempt's outcome.
func (r *SideEffectOperationReconciler) writeHeldAnswer(ctx context.Context, op *v1.SideEffectOperation) (
	fresh *v1.SideEffectOperation, done bool, err error) {
	fresh, err = r.readOp(ctx, op)
	if apierrors.IsNotFound(err) {
		// Gone, or another object under its name: the answer goes to the
		// scope's record, never into that object.
		return nil, true, r.answerHeldGone(ctx, op.UID)
	}
	if err != nil {
		return nil, true, err
	}
	p := r.newPass(ctx, fresh)
	a := r.takeHeld(p)
	if a == nil {
		return fresh, false, nil
	}
	if a.claimHeld(p.st, r.Holder) {
		r.holdAnswer(p, a)
		return fresh, false, nil
	}
	return nil, true, r.keepEvidence(p, a)
}

// writeAnswerWithoutTool writes an answer in hand while its tool cannot be
// used (deleted, made invalid, or gone with its terminating namespace). It
// writes under the policy the attempt pinned: the answer was classified
// when it came, under the mode the attempt was made in. Waiting for the
// tool could hold it for ever, and a crash would lose it. loadErr is why
// the tool could not be read, if reading failed. The answer is then held
// for the next pass instead, as after any failed read.
func (r *SideEffectOperationReconciler) writeAnswerWithoutTool(p *pass, a *answer, loadErr error) error {
	if loadErr != nil {
		r.holdAnswer(p, a)
		return loadErr
	}
	if ok, err := r.seeClaim(p, a); !ok {
		return err
	}
	p.policy = protocol.NewPolicy(&v1.ToolSpec{Idempotency: v1.ToolIdempotency{Mode: p.st.IdempotencyMode}},
		&p.op.Spec, r.limits())
	p.policy.Promise = p.st.Promise
	if !a.claimHeld(p.st, r.Holder) {
		return r.keepEvidence(p, a)
	}
	_, err := r.writeAnswer(p, a)
	return err
}

// writeHeldAtRelease writes an answer this manager holds before a deleted
// operation's outcome is kept in its scope's record. Otherwise the record
// would say unknown for an answer in hand. The claim it ran under must
// still be the status's; once the claim has moved on, the answer is
// evidence only. An answer whose tool is not usable is written all the
// same: the tool of an operation in a terminating namespace never comes
// back.
func (r *SideEffectOperationReconciler) writeHeldAtRelease(p *pass) error {
	a := r.takeHeld(p)
	if a == nil {
		return nil
	}
	if !a.claimHeld(p.st, r.Holder) {
		return r.keepEvidence(p, a)
	}
	if reason, _, err := r.readTool(p); err != nil || reason != "" {
		return r.writeAnswerWithoutTool(p, a, err)
	}
	_, err := r.writeAnswer(p, a)
	return err
}

// answerOrphans writes the answers this manager holds for operations named
// key that are gone. cur is the UID the cache shows under the name now
// (empty: none). An operation's cache entry goes only after the object
// did, so any other UID under the name is gone from the API server. Each
// answer goes to its scope's record (answerGone). One whose write fails is
// held again, and the error brings the name back.
func (r *SideEffectOperationReconciler) answerOrphans(ctx context.Context, key client.ObjectKey, cur types.UID) error {
	var errs []error
	r.held.Range(func(k, v any) bool {
		h := v.(*heldAnswer)
		if k.(types.UID) != cur && client.ObjectKeyFromObject(h.op) == key {
			errs = append(errs, r.answerHeldGone(ctx, k.(types.UID)))
		}
		return true
	})
	return errors.Join(errs...)
}

// answerHeldGone writes the answer held for the operation uid, which is
// gone, into its scope's record. Nothing happens if none is held.
func (r *SideEffectOperationReconciler) answerHeldGone(ctx context.Context, uid types.UID) error {
	v, ok := r.held.LoadAndDelete(uid)
	if !ok {
		return nil
	}
	h := v.(*heldAnswer)
	p := r.newPass(ctx, h.op)
	if err := r.answerGone(p, h.a); err != nil {
		r.holdAnswer(p, h.a)
		return err
	}
	return nil
}

// keepOrAnswerGone handles a read or write of the pass's operation that
// failed with err while it holds the answer a. The operation being gone
// (NotFound: deleted, or another object under its name) sends the answer
// to the scope's record. Any other error holds it for the next pass.
func (r *SideEffectOperationReconciler) keepOrAnswerGone(p *pass, a *answer, err error) error {
	if apierrors.IsNotFound(err) {
		err = r.answerGone(p, a)
		if err == nil {
			return nil
		}
	}
	r.holdAnswer(p, a)
	return err
}

// keepEvidence writes what a worker learned after its claim moved on, as
// protocol.Stale decides: evidence, a commit when the status is still about
// that attempt, or a second effect, which is raised at once.
func (r *SideEffectOperationReconciler) keepEvidence(p *pass, a *answer) error {
	metrics.StaleWrites.Inc()
	late := a.late(p.env)
	p.log.Info("Claim moved on while the tool was called; deciding on the late answer",
		"attempt", a.attempt, "outcome", late.Observation.Outcome, "state", stateLabel(p.op.Status.State))
	raised := false
	for range fencedRetries {
		d, verdict := protocol.Stale(p.op.Status, p.policy, p.env, late)
		if verdict == protocol.LateIgnored {
			return nil
		}
		if verdict == protocol.LateSecondEffect && !raised {
			r.raiseSecondEffect(p, late)
			raised = true
		}
		err := r.writeStatus(p, d)
		if !apierrors.IsConflict(err) {
			if err != nil {
				return r.keepOrAnswerGone(p, a, err)
			}
			return nil
		}
		fresh, err := r.readOp(p.ctx, p.op)
		if err != nil {
			return r.keepOrAnswerGone(p, a, err)
		}
		p.adopt(fresh)
	}
	r.holdAnswer(p, a)
	return errors.New("the late answer's write kept losing to newer versions; it will be retried")
}

// raiseSecondEffect tells a person at once of an answer that names an
// effect besides the one the status names. The status stays as it is, but
// there may be two effects for one key.
func (r *SideEffectOperationReconciler) raiseSecondEffect(p *pass, late protocol.Late) {
	st := p.op.Status
	metrics.ContradictingAnswers.Inc()
	p.log.Error(nil, "A worker that lost its claim got an answer naming a possible second effect",
		"attempt", late.Attempt, "externalObjectID", late.Observation.ExternalObjectID,
		"recorded", st.ExternalObjectID, "state", stateLabel(st.State), "attempts", st.Attempts)
	r.Recorder.Eventf(p.op, nil, corev1.EventTypeWarning, v1.EventSecondEffect, "KeepEvidence",
		"A worker that had lost its claim on attempt %d got an answer naming effect %q while the status is %s at attempt %d with effect %q: there may be two effects",
		late.Attempt, late.Observation.ExternalObjectID, stateLabel(st.State), st.Attempts, st.ExternalObjectID)
}
