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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// fencedRetries bounds how often a worker that still holds its claim
// retries an outcome write that lost to an unrelated change (a label, a
// resolution edit).
const fencedRetries = 5

// putStatus is the operation reconciler's one status writer: it writes st
// as op's status with op's resourceVersion as the precondition, so that a
// worker with a stale view loses with a conflict, and leaves op as the API
// server answered (as it was, on failure). A pass's decisions
// (writeStatus) and the claim's renewals (renew) go through it.
func (r *SideEffectOperationReconciler) putStatus(ctx context.Context, op *v1.SideEffectOperation,
	st v1.SideEffectOperationStatus) error {
	prev := op.Status
	op.Status = st
	if err := r.Status().Update(ctx, op); err != nil {
		op.Status = prev
		return err
	}
	return nil
}

// writeStatus writes a decision's status; on success the pass carries the
// new version, and the decision's event and metrics are emitted.
func (r *SideEffectOperationReconciler) writeStatus(p *pass, d protocol.Decision) error {
	from := p.op.Status.State
	if err := r.putStatus(p.ctx, p.op, d.Status); err != nil {
		return err
	}
	p.st = *p.op.Status.DeepCopy()
	r.observe(p, from, d)
	return nil
}

// writeAnswer writes the decision an answer leads to, fenced on the claim
// the call ran under.
func (r *SideEffectOperationReconciler) writeAnswer(p *pass, a *answer) (reconcile.Result, error) {
	d, err := r.writeFenced(p, a.apply(p.st, p.policy, p.env), a)
	return reconcile.Result{RequeueAfter: d.RequeueAfter}, err
}

// resume writes an answer whose write failed in an earlier pass: as the
// attempt's outcome while the status still shows its claim, else as a late
// answer, never dropped.
func (r *SideEffectOperationReconciler) resume(p *pass, a *answer) (reconcile.Result, error) {
	if ok, err := r.seeClaim(p, a); !ok {
		return reconcile.Result{}, err
	}
	if a.claimHeld(p.st, r.Holder) {
		return r.writeAnswer(p, a)
	}
	if err := r.keepEvidence(p, a); err != nil {
		return reconcile.Result{}, err
	}
	p.st = *p.op.Status.DeepCopy()
	return r.step(p, protocol.Next(p.st, p.op.Spec.Resolution, p.policy, p.env))
}

// seeClaim reads the operation past the cache when the cache does not show
// the claim the answer a ran under: the cache may lag behind the claim. ok
// is false when the read failed; the answer is then kept for the next
// pass, or written into the scope's record if the operation is gone.
func (r *SideEffectOperationReconciler) seeClaim(p *pass, a *answer) (ok bool, err error) {
	if a.claimHeld(p.st, r.Holder) {
		return true, nil
	}
	fresh, err := r.fresh(p)
	if err != nil {
		return false, r.keepOrAnswerGone(p, a, err)
	}
	p.adopt(fresh)
	p.st = *fresh.Status.DeepCopy()
	return true, nil
}

// writeHeldAnswer writes an answer this manager holds for an operation
// its cache shows settled by someone else, as protocol.Stale decides: as
// evidence, as the commit a person was about to be asked for, or as a
// second effect, raised at once. done is false when the API server shows
// the answer's claim still held (the cache lagged): the pass goes on with
// fresh, whose drive writes the answer as the attempt's outcome.
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
	a := r.takePending(p)
	if a == nil {
		return fresh, false, nil
	}
	if a.claimHeld(p.st, r.Holder) {
		r.keepPending(p, a)
		return fresh, false, nil
	}
	return nil, true, r.keepEvidence(p, a)
}

// writeAnswerWithoutTool writes an answer in hand while its tool cannot be
// used (deleted, made invalid, or gone with its terminating namespace),
// under the policy the attempt pinned: the answer was classified when it
// came, under the mode the attempt was made in. Waiting for the tool could
// hold it for ever, and a crash would lose it (I12). loadErr is why the
// tool could not be read, if reading failed: the answer is then kept for
// the next pass instead, as after any failed read.
func (r *SideEffectOperationReconciler) writeAnswerWithoutTool(p *pass, a *answer, loadErr error) error {
	if loadErr != nil {
		r.keepPending(p, a)
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

// heldAnswer is an answer kept for a later pass, with the operation it
// answers as the pass that kept it read it: if that object goes, the
// answer still knows its scope, and is written into the scope's record.
type heldAnswer struct {
	op *v1.SideEffectOperation
	a  *answer
}

// keepPending remembers an answer whose write failed for a reason other
// than a conflict (the API server was unreachable, say), so that the next
// pass writes it rather than treating the attempt as unknown. It is kept
// by the operation's UID: an object made again under the name is another
// operation, which never takes it (answerOrphans).
func (r *SideEffectOperationReconciler) keepPending(p *pass, a *answer) {
	r.pending.Store(p.op.UID, &heldAnswer{op: p.op.DeepCopy(), a: a})
}

// takePending returns the remembered answer, if any, and forgets it.
func (r *SideEffectOperationReconciler) takePending(p *pass) *answer {
	if v, ok := r.pending.LoadAndDelete(p.op.UID); ok {
		return v.(*heldAnswer).a
	}
	return nil
}

// answerOrphans writes the answers this manager holds for operations named
// key that are gone: cur is the UID the cache shows under the name now
// (empty: none). An operation's cache entry goes only after the object
// did, so any other UID under the name is gone from the API server. Each
// answer goes to its scope's record (answerGone); one whose write fails is
// kept, and the error brings the name back.
func (r *SideEffectOperationReconciler) answerOrphans(ctx context.Context, key client.ObjectKey, cur types.UID) error {
	var errs []error
	r.pending.Range(func(k, v any) bool {
		h := v.(*heldAnswer)
		if k.(types.UID) != cur && client.ObjectKeyFromObject(h.op) == key {
			errs = append(errs, r.answerHeldGone(ctx, k.(types.UID)))
		}
		return true
	})
	return errors.Join(errs...)
}

// answerHeldGone writes the answer held for the operation uid, which is
// gone, into its scope's record; nothing if none is held.
func (r *SideEffectOperationReconciler) answerHeldGone(ctx context.Context, uid types.UID) error {
	v, ok := r.pending.LoadAndDelete(uid)
	if !ok {
		return nil
	}
	h := v.(*heldAnswer)
	return r.answerGone(r.newPass(ctx, h.op), h.a)
}

// keepOrAnswerGone handles a read or write of the pass's operation that
// failed with err while it holds the answer a: the operation being gone
// (NotFound: deleted, or another object under its name) sends the answer
// to the scope's record; any other error keeps it for the next pass.
func (r *SideEffectOperationReconciler) keepOrAnswerGone(p *pass, a *answer, err error) error {
	if apierrors.IsNotFound(err) {
		return r.answerGone(p, a)
	}
	r.keepPending(p, a)
	return err
}

// writeFenced writes the decision that follows a call's answer. If the
// write loses to a newer version, it reads the status again: while this
// worker still holds the claim it re-applies the answer to the new status;
// once the claim has moved on, the worker is stale and what it learned is
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
		fresh, err := r.fresh(p)
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
	r.keepPending(p, a)
	return d, errors.New("outcome write kept losing to newer versions; it will be retried")
}

// fresh reads the pass's operation from the API server, past the cache,
// bound to its UID (readOp).
func (r *SideEffectOperationReconciler) fresh(p *pass) (*v1.SideEffectOperation, error) {
	return r.readOp(p.ctx, p.op)
}

// readOp reads op from the API server, past the cache. A name is not an
// identity: an object deleted and made again under its name is another
// operation, with another scope perhaps, whose status no decision about op
// may touch. So another UID under the name reads as NotFound: op is gone.
func (r *SideEffectOperationReconciler) readOp(ctx context.Context, op *v1.SideEffectOperation) (
	*v1.SideEffectOperation, error) {
	fresh := &v1.SideEffectOperation{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(op), fresh); err != nil {
		return nil, err
	}
	if op.UID != "" && fresh.UID != op.UID {
		return nil, apierrors.NewNotFound(v1.GroupVersion.WithResource("sideeffectoperations").GroupResource(),
			fmt.Sprintf("%s (uid %s; the name is another object's now)", op.Name, op.UID))
	}
	return fresh, nil
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
				// Kept for the next pass, or written into the scope's
				// record if the operation is gone: an answer in hand is
				// never dropped (I12).
				return r.keepOrAnswerGone(p, a, err)
			}
			return nil
		}
		fresh, err := r.fresh(p)
		if err != nil {
			return r.keepOrAnswerGone(p, a, err)
		}
		p.adopt(fresh)
	}
	r.keepPending(p, a)
	return errors.New("the late answer's write kept losing to newer versions; it will be retried")
}

// raiseSecondEffect tells a person at once of an answer that names an
// effect besides the one the status names: the status stays as it is, but there may
// be two effects for one key.
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

// observe emits the event and the metrics of a written decision.
func (r *SideEffectOperationReconciler) observe(p *pass, from v1.OperationState, d protocol.Decision) {
	to := d.Status.State
	if from != to {
		metrics.Transitions.WithLabelValues(stateLabel(from), stateLabel(to)).Inc()
		if to.IsTerminal() && d.Status.UnknownTime != nil {
			metrics.RecoveryTime.WithLabelValues(string(to)).Observe(
				p.env.Now.Sub(d.Status.UnknownTime.Time).Seconds())
		}
	}
	if e := d.Event; e != nil {
		typ := corev1.EventTypeNormal
		if e.Warning {
			typ = corev1.EventTypeWarning
		}
		if !e.Routine {
			r.Recorder.Eventf(p.op, nil, typ, e.Reason, string(d.Action), "%s", e.Message)
		}
		p.log.Info("Recorded a transition", "from", stateLabel(from), "to", stateLabel(to),
			"reason", e.Reason, "message", e.Message)
	}
}

func stateLabel(s v1.OperationState) string {
	return string(s.OrPlanned())
}
