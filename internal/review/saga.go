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

package review

import (
	"context"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
)

// ResolveSaga writes r into the spec.resolutions of s, a saga in
// NeedsReview because a compensation (or a retryUntilDone step) failed for
// good, conditional on the version of s. r.Step is the step s waits on. If
// empty, it is filled in. An entry for that step is replaced, otherwise r
// is appended. It refuses what s would not apply:
//
//   - a saga not in NeedsReview;
//   - a step it does not wait on;
//   - a step whose operation (or compensation's operation) is itself in
//     NeedsReview. That operation is resolved instead (ResolveOperation).
//   - an action the step does not take;
//   - an entry the same as the one s holds.
//
// On success s is the object the API server returned.
func ResolveSaga(ctx context.Context, c client.Client, s *v1.Saga, r v1.SagaResolution) error {
	i, err := sagaStep(s, r)
	if err != nil {
		return err
	}
	r.Step = s.Spec.Steps[i].Name
	if op, err := reviewedOperation(ctx, c, s, r.Step); err != nil {
		return err
	} else if op != "" {
		return fmt.Errorf("saga %s waits on operation %s, which is in NeedsReview: resolve that operation "+
			"(kubectl once resolve %s --committed --external-id ID | --retry | --fail)", s.Name, op, op)
	}
	resolutions, err := sagaResolutions(s, i, r)
	if err != nil {
		return err
	}
	patched := s.DeepCopy()
	patched.Spec.Resolutions = resolutions
	if err := patch(ctx, c, patched, s, KindSaga); err != nil {
		return err
	}
	*s = *patched
	return nil
}

// sagaStep is the index in the spec of the step s waits on, if r may be
// written for it: s is in NeedsReview for a reason a resolution mends
// (sagaResolvable), and r names that step or none.
func sagaStep(s *v1.Saga, r v1.SagaResolution) (int, error) {
	state := s.Status.State
	switch {
	case state.IsTerminal():
		return 0, fmt.Errorf("saga %s is %s: there is nothing to resolve", s.Name, state)
	case state != v1.StateNeedsReview:
		return 0, fmt.Errorf("saga %s is %s: only a saga in NeedsReview can be resolved", s.Name, state.OrPlanned())
	}
	if err := sagaResolvable(s, r.Action); err != nil {
		return 0, err
	}
	step := s.Status.CurrentStep
	if r.Step != "" && r.Step != step {
		return 0, fmt.Errorf("saga %s waits on step %s, not %s: a resolution can be written only for it", s.Name, step, r.Step)
	}
	i := slices.IndexFunc(s.Spec.Steps, func(st v1.SagaStep) bool { return st.Name == step })
	if i < 0 {
		return 0, fmt.Errorf("saga %s waits on step %q, which its spec does not have", s.Name, step)
	}
	return i, nil
}

// sagaResolvable refuses a resolution the saga would not apply for the
// reason it waits. A step Once cannot undo takes only MarkCompensated. A
// foreign operation or a spec that no longer compiles takes none.
func sagaResolvable(s *v1.Saga, action v1.SagaResolutionAction) error {
	c := meta.FindStatusCondition(s.Status.Conditions, v1.ConditionStalled)
	if c == nil {
		return nil
	}
	switch c.Reason {
	case saga.ReasonForeignOperation:
		return fmt.Errorf("saga %s waits because %s: no resolution applies; it goes on once that operation "+
			"is gone", s.Name, lowerFirst(c.Message))
	case v1.ReasonInvalidSpec:
		return fmt.Errorf("saga %s stopped because %s: no resolution applies", s.Name, lowerFirst(c.Message))
	case saga.ReasonCannotCompensate:
		if action != v1.SagaMarkCompensated {
			return fmt.Errorf("saga %s waits because %s: Once cannot undo it, so only --compensated applies, "+
				"once you have undone the effect by other means", s.Name, lowerFirst(c.Message))
		}
	}
	return nil
}

// sagaResolutions are the spec.resolutions of s with r, the entry for its
// step i, in place of the one for that step: refused if the step does not
// take r's action, or if s holds r already (saga.SameResolution).
func sagaResolutions(s *v1.Saga, i int, r v1.SagaResolution) ([]v1.SagaResolution, error) {
	spec := s.Spec.Steps[i]
	switch {
	case r.Action == v1.SagaMarkCompensated && spec.Compensation == nil && !waitsOnDecidedStep(s, r.Step):
		return nil, fmt.Errorf("step %s of saga %s has no compensation: it takes --retry only", r.Step, s.Name)
	case r.Action == v1.SagaRetry && spec.Compensation == nil && !spec.RetryUntilDone:
		return nil, fmt.Errorf("step %s of saga %s has neither a compensation nor retryUntilDone: it cannot be resolved",
			r.Step, s.Name)
	}
	resolutions := slices.Clone(s.Spec.Resolutions)
	j := slices.IndexFunc(resolutions, func(old v1.SagaResolution) bool { return old.Step == r.Step })
	if j < 0 {
		return append(resolutions, r), nil
	}
	if saga.SameResolution(&r, &resolutions[j]) {
		return nil, fmt.Errorf("saga %s already holds this resolution of step %s; to apply it again, "+
			"write it with another --reason", s.Name, r.Step)
	}
	resolutions[j] = r
	return resolutions, nil
}

// reviewedOperation is the operation of a saga's step (or of its
// compensation) that is itself in NeedsReview, if one is: that operation is
// resolved, not the saga.
func reviewedOperation(ctx context.Context, c client.Client, s *v1.Saga, step string) (string, error) {
	var names []string
	for _, ss := range s.Status.Steps {
		if ss.Name != step {
			continue
		}
		if ss.Compensation != nil {
			names = append(names, ss.Compensation.Operation)
		}
		if ss.Operation != "" {
			names = append(names, ss.Operation)
		}
	}
	for _, name := range names {
		op := &v1.SideEffectOperation{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, op); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", &RequestError{Verb: "get", Kind: KindOperation, Namespace: s.Namespace, Name: name, Err: err}
		}
		if op.Status.State == v1.StateNeedsReview {
			return name, nil
		}
	}
	return "", nil
}

// lowerFirst turns a condition's message, a sentence, into a clause.
func lowerFirst(msg string) string {
	r, size := utf8.DecodeRuneInString(msg)
	if next, _ := utf8.DecodeRuneInString(msg[size:]); unicode.IsUpper(next) {
		return msg // an acronym or a kind's name
	}
	return string(unicode.ToLower(r)) + msg[size:]
}

// waitsOnDecidedStep reports whether s waits in review on step because the
// step ended on a person's decision. That decision does not establish that
// the step had no effect. So an irreversible step may then be marked
// compensated by the person who undid, or found no, effect.
func waitsOnDecidedStep(s *v1.Saga, step string) bool {
	if s.Status.State != v1.StateNeedsReview || s.Status.CurrentStep != step || s.Status.FailedStep != step {
		return false
	}
	c := meta.FindStatusCondition(s.Status.Conditions, v1.ConditionStalled)
	return c != nil && c.Reason == saga.ReasonStepFailed
}
