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
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// fencedRetries bounds how often a worker that still holds its claim
// retries an outcome write that lost to an unrelated change (a label, a
// resolution edit).
const fencedRetries = 5

// writeStatus writes d.Status with the object's resourceVersion as the
// precondition: a worker with a stale view loses with a conflict. On
// success the pass carries the new version.
func (r *SideEffectOperationReconciler) writeStatus(p *pass, d protocol.Decision) error {
	from := p.op.Status.State
	prev := p.op.Status
	p.op.Status = d.Status
	if err := r.Status().Update(p.ctx, p.op); err != nil {
		p.op.Status = prev
		return err
	}
	p.st = *p.op.Status.DeepCopy()
	r.observe(p, from, d)
	return nil
}

// writeFenced writes the decision that follows a call's answer. If the
// write loses to a newer version, it reads the record again: while this
// worker still holds the claim it re-applies the answer to the new record;
// once the claim has moved on, the worker is stale and what it learned is
// kept as evidence only, if it does not contradict the record (I6).
// It returns the decision it wrote.
func (r *SideEffectOperationReconciler) writeFenced(p *pass, d protocol.Decision, a *answer) (protocol.Decision, error) {
	for range fencedRetries {
		err := r.writeStatus(p, d)
		if !apierrors.IsConflict(err) {
			if err != nil {
				r.keepPending(p, a)
			}
			return d, err
		}
		fresh, err := r.fresh(p)
		if err != nil {
			r.keepPending(p, a)
			return d, err
		}
		p.op = fresh
		p.env.Generation = fresh.Generation
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

// fresh reads the pass's operation from the API server, past the cache.
func (r *SideEffectOperationReconciler) fresh(p *pass) (*v1.SideEffectOperation, error) {
	op := &v1.SideEffectOperation{}
	return op, r.APIReader.Get(p.ctx, client.ObjectKeyFromObject(p.op), op)
}

// keepEvidence records what a worker learned after its claim moved on, as
// protocol.Stale decides: evidence, a commit when the record is still about
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
				// Kept for the next pass: an answer in hand is never
				// dropped (I12).
				r.keepPending(p, a)
			}
			return err
		}
		fresh, err := r.fresh(p)
		if apierrors.IsNotFound(err) {
			// The operation is gone, finalizer and all: nothing is left
			// to record the answer in.
			return nil
		}
		if err != nil {
			r.keepPending(p, a)
			return err
		}
		p.op = fresh
	}
	r.keepPending(p, a)
	return errors.New("the late answer's write kept losing to newer versions; it will be retried")
}

// raiseSecondEffect tells a person at once of an answer that names an
// effect besides the recorded one: the record stays as it is, but there may
// be two effects for one key.
func (r *SideEffectOperationReconciler) raiseSecondEffect(p *pass, late protocol.Late) {
	st := p.op.Status
	metrics.ContradictingAnswers.Inc()
	p.log.Error(nil, "A worker that lost its claim got an answer naming a possible second effect",
		"attempt", late.Attempt, "externalObjectID", late.Observation.ExternalObjectID,
		"recorded", st.ExternalObjectID, "state", stateLabel(st.State), "attempts", st.Attempts)
	r.Recorder.Eventf(p.op, nil, corev1.EventTypeWarning, v1.EventSecondEffect, "KeepEvidence",
		"A worker that had lost its claim on attempt %d got an answer naming effect %q while the record is %s at attempt %d with effect %q: there may be two effects",
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
