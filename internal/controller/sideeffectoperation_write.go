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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// The operation's one status writer, and its one re-read. Both are sinks:
// they write or read what they are given and return. What follows a
// failed write, the caller decides.

// fencedRetries bounds how often a worker that still holds its claim
// retries an outcome write that lost to an unrelated change (a label, a
// resolution edit).
const fencedRetries = 5

// putStatus is the operation reconciler's one status writer. It writes st
// as op's status with op's resourceVersion as the precondition, so that a
// worker with a stale view loses with a conflict. It leaves op as the API
// server answered, or as it was on failure. A pass's decisions
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

// writeStatus writes a decision's status. On success the pass carries the
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
