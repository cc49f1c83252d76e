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
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// answerGone writes an answer whose operation is gone (deleted, or another
// object under its name now) where it still belongs. That is the scope's
// record, if the record still speaks for that operation, as
// protocol.StaleForRecord decides. An answer that may name an effect no
// record keeps is raised at once. It is never written into another object
// of the name (I6). A write that fails returns its error. Its two callers,
// keepOrAnswerGone and answerHeldGone, then hold the answer for the next
// pass of the name (I12). A new caller must do the same.
func (r *SideEffectOperationReconciler) answerGone(p *pass, a *answer) error {
	metrics.StaleWrites.Inc()
	p.env.Now = r.Clock.Now()
	late := a.late(p.env)
	raised := false
	for range fencedRetries {
		rec, err := r.getRecord(p, r.APIReader)
		if err != nil {
			return err
		}
		// The time is read after the record, as a release reads it: a
		// write that lost, or a pass that stalled, must not stamp the
		// outcome with a time from before the record it settles.
		p.env.Now = r.Clock.Now()
		var cur *v1.IdempotencyRecordSpec
		if rec != nil {
			cur = &rec.Spec
		}
		next, verdict := protocol.StaleForRecord(cur, p.op.UID, late, p.env.Now)
		// An answer naming an effect for an attempt the record does not
		// know of is raised too: the record is behind what was sent.
		if (verdict == protocol.LateSecondEffect || verdict == protocol.LateIgnored && late.Effect != nil) && !raised {
			r.raiseGone(p, late, rec)
			raised = true
		}
		if next == nil {
			p.log.Info("The operation a late answer was for is gone; its scope's record does not take it",
				"operation", p.op.Name, "uid", p.op.UID, "record", p.env.RecordName, "attempt", late.Attempt,
				"outcome", late.Observation.Outcome, "message", late.Observation.Message, "externalObjectID", late.Observation.ExternalObjectID,
				"verdict", string(verdict))
			return nil
		}
		rec.Spec = *next
		err = r.Update(p.ctx, rec)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		p.log.Info("Kept the late answer of a deleted operation in its scope's record", "operation", p.op.Name,
			"uid", p.op.UID, "record", rec.Name, "attempt", late.Attempt, "verdict", string(verdict))
		return nil
	}
	return errors.New("the scope's record kept changing under a late answer; it will be retried")
}

// raiseGone tells a person at once of a late answer, to an operation that
// is gone, that names an effect its scope's record does not hold: there
// may be an effect that nothing remembers, or two for one key.
func (r *SideEffectOperationReconciler) raiseGone(p *pass, late protocol.Late, rec *v1.IdempotencyRecord) {
	metrics.ContradictingAnswers.Inc()
	where := "no record is left for its scope"
	if rec != nil {
		where = "its scope's record " + rec.Name + " speaks for " + rec.Spec.Owner.Name + " (uid " +
			string(rec.Spec.Owner.UID) + ")"
		if o := rec.Spec.Outcome; o != nil && rec.Spec.Owner.UID == p.op.UID {
			where = "its scope's record " + rec.Name + " holds its outcome " + string(o.State) +
				" with effect " + o.ExternalObjectID
		} else if rec.Spec.Owner.UID == p.op.UID {
			where = "its scope's record " + rec.Name + " holds a later attempt, or does not count them"
		}
	}
	p.log.Error(nil, "A late answer names an effect of an operation that is gone", "operation", p.op.Name,
		"uid", p.op.UID, "attempt", late.Attempt, "externalObjectID", late.Observation.ExternalObjectID,
		"where", where)
	var related runtime.Object
	if rec != nil {
		related = rec
	}
	r.Recorder.Eventf(p.op, related, corev1.EventTypeWarning, v1.EventSecondEffect, "KeepEvidence",
		"A late answer to attempt %d of %s (uid %s), which is gone, names effect %q, but %s: there may be an effect no one records, or two",
		late.Attempt, p.op.Name, p.op.UID, late.Observation.ExternalObjectID, where)
}
