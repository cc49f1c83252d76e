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

package sim

// Sagas: the order of a saga's steps and of their undoing.
//
// I8: a compensation's failure is never reported as success. No saga is
// Compensated while a step's effect stands.
// I14: a step's effect comes only after the step before it committed. A
// compensation comes only for an effect that stands, once every later
// step's standing effect is undone.
// I13, in part: a step stalls as SagaGone only once its saga is gone.

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// checkCompensated is I8: no saga is Compensated while a step's effect
// stands.
func (w *World) checkCompensated() {
	for _, o := range w.server.peek(kindSaga) {
		s := o.(*v1.Saga)
		if s.Status.State != v1.StateCompensated {
			continue
		}
		for _, step := range s.Spec.Steps {
			for _, e := range knowable(w.standing(s.Name + "/" + step.Name)) {
				w.fail(InvCompensated, s.Name, "Compensated while step %s's effect %s stands", step.Name, e.ID)
			}
		}
	}
}

// checkSagaOrder runs when a tool makes an effect of a saga's step or of
// its compensation.
func (w *World) checkSagaOrder(e *Effect) {
	parts := strings.Split(e.Ref, "/")
	if len(parts) < 2 || byHand(e) {
		// A person undoing an effect by hand keeps an order of their own.
		return
	}
	steps := w.sagaSteps(parts[0])
	i := slices.IndexFunc(steps, func(s v1.SagaStep) bool { return s.Name == parts[1] })
	if i < 0 {
		return
	}
	if len(parts) == 2 && i > 0 {
		// The step before committed in this lifetime of its key, or under
		// the saga whose step made the effect: a step the saga created
		// then may run much later, after that commit was forgotten.
		prev := parts[0] + "/" + steps[i-1].Name
		if !w.committed[inNamespace(prev, e.Namespace)] && (e.Saga == "" || !w.stepCommitted[string(e.Saga)+" "+prev]) {
			w.fail(InvSagaOrder, e.Ref, "effect %s before step %s committed", e.ID, steps[i-1].Name)
		}
	}
	if len(parts) == 3 {
		for _, later := range steps[i+1:] {
			if st := knowable(w.standing(parts[0] + "/" + later.Name)); len(st) > 0 && later.Compensation != nil {
				w.fail(InvSagaOrder, e.Ref, "compensation %s while the later step %s's effect %s stands", e.ID, later.Name, st[0].ID)
			}
		}
	}
}

// sagaSteps are the steps of the saga of that name: a manifest's, or a
// saga caller's (the steps of its own request: another one under its key
// has the same names).
func (w *World) sagaSteps(name string) []v1.SagaStep {
	for _, mf := range w.manifests {
		if s, ok := mf.(*v1.Saga); ok && s.Name == name {
			return s.Spec.Steps
		}
	}
	if w.callers == nil {
		return nil
	}
	for _, c := range []string{callerCheckout, callerAssistant} {
		for i := 1; i <= callerLimits[c]; i++ {
			if r := w.callers.requests[fmt.Sprintf("%s-%d", c, i)]; r != nil && r.ref == name {
				return r.steps(false)
			}
		}
	}
	return nil
}

// checkSagaGone is part of I13: a step stalled because its saga is gone
// (SagaGone) would wait for ever if its saga lived, with that UID and not
// being deleted.
func (w *World) checkSagaGone() {
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		stalled := meta.FindStatusCondition(op.Status.Conditions, v1.ConditionStalled)
		ref := metav1.GetControllerOfNoCopy(op)
		if stalled == nil || stalled.Reason != v1.ReasonSagaGone || ref == nil {
			continue
		}
		for _, s := range w.server.peek(kindSaga) {
			if s.GetUID() == ref.UID && s.GetDeletionTimestamp().IsZero() {
				w.fail(InvLiveness, op.Name, "stalled as %s while saga %s lives: %s", v1.ReasonSagaGone, s.GetName(), stalled.Message)
			}
		}
	}
}

// standing are the effects of a scope since it was last forgotten that no
// refund undid.
func (w *World) standing(ref string) []*Effect {
	var out []*Effect
	for _, e := range w.current(ref) {
		if e.Vouched {
			// A person said it did not happen (I11: their word).
			continue
		}
		undone := false
		for _, u := range w.ledger {
			if u.Target == e.ID {
				undone = true
			}
		}
		if !undone {
			out = append(out, e)
		}
	}
	return out
}
