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

// Package review holds a person's decisions on Once's objects. They are
// checked and written one way for every writer: kubectl once, and the
// simulator's people. The decisions are:
//
//   - the resolution of an operation in NeedsReview (docs/design.md,
//     "NeedsReview and resolutions");
//   - the resolution of the step a saga in NeedsReview waits on;
//   - the approval of a saga's step.
//
// Each write is a JSON merge patch of the spec under a resourceVersion
// precondition, so that it lands on the object the checks read, or not at
// all. A conflict is returned as the API server answered it
// (apierrors.IsConflict): read the object again and call again. Any other
// error of the API server is a *RequestError, which names the request. A
// decision the object would not apply is refused before any write, with a
// message for a person; where a flag of kubectl once is the remedy, the
// message names it.
package review

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// Kinds a RequestError names.
const (
	KindOperation = "SideEffectOperation"
	KindSaga      = "Saga"
)

// RequestError is an error of the API server, other than a conflict, with
// the request that met it.
type RequestError struct {
	// Verb is the request's verb: get or patch.
	Verb string
	// Kind is the kind of the object requested: KindOperation or KindSaga.
	Kind string
	// Namespace and Name name the object requested.
	Namespace, Name string
	// Err is the API server's error.
	Err error
}

// Error says the request and the API server's error.
func (e *RequestError) Error() string {
	return fmt.Sprintf("%s %s %s/%s: %v", e.Verb, e.Kind, e.Namespace, e.Name, e.Err)
}

// Unwrap returns the API server's error.
func (e *RequestError) Unwrap() error { return e.Err }

// ResolveOperation writes r into the spec.resolution of op, an operation
// in NeedsReview, conditional on the version of op. It refuses an
// operation that cannot be resolved (CanResolve) and a resolution the same
// as the one op holds. On success op is the object the API server
// returned.
func ResolveOperation(ctx context.Context, c client.Client, op *v1.SideEffectOperation, r v1.Resolution) error {
	if err := checkOperation(op, r); err != nil {
		return err
	}
	patched := op.DeepCopy()
	patched.Spec.Resolution = &r
	if err := patch(ctx, c, patched, op, KindOperation); err != nil {
		return err
	}
	*op = *patched
	return nil
}

// CanResolve says why op cannot be resolved, if it cannot: only an
// operation in NeedsReview can.
func CanResolve(op *v1.SideEffectOperation) error {
	state := op.Status.State
	switch {
	case state == v1.StateNeedsReview:
		return nil
	case state.IsTerminal():
		return fmt.Errorf("%s is %s: there is nothing to resolve", op.Name, state)
	case op.Status.DuplicateOf != "":
		return fmt.Errorf("%s is a duplicate of %s and makes no call of its own: resolve %s if it needs review",
			op.Name, op.Status.DuplicateOf, op.Status.DuplicateOf)
	}
	return fmt.Errorf("%s is %s: only an operation in NeedsReview can be resolved, and Once is still working on this one",
		op.Name, state.OrPlanned())
}

// checkOperation says why r cannot be written into op, if it cannot:
//
//   - op cannot be resolved;
//   - r is the decision already applied to an earlier review, or one that
//     stood when a review began;
//   - op already holds r. The user is left out, as admission writes it.
//
// A resolution already there is applied if it was written during this
// review. It is never applied if it was written before or was applied
// already (docs/decisions.md, "reviewGeneration for resolutions"). Writing
// it again changes nothing either way.
func checkOperation(op *v1.SideEffectOperation, r v1.Resolution) error {
	if err := CanResolve(op); err != nil {
		return err
	}
	if protocol.SameDecision(r, op.Status.Resolution) {
		return fmt.Errorf("%s was resolved with this decision in an earlier review, and Once applies a decision "+
			"once: to decide this review, write it with another --reason", op.Name)
	}
	if old := op.Spec.Resolution; old != nil && protocol.SameResolution(*old, r) {
		if protocol.ResolutionPending(op) {
			return fmt.Errorf("%s already holds this resolution, written during this review: Once applies it "+
				"on its next pass", op.Name)
		}
		return fmt.Errorf("%s already holds this resolution from before it entered review, and Once applies only "+
			"one written since: write it with another --reason", op.Name)
	}
	if protocol.Earlier(&r, op.Status) {
		return fmt.Errorf("%s was decided with this resolution before this review, or held it when the review "+
			"began, and Once applies a decision once: write it with another --reason", op.Name)
	}
	return nil
}

// patch writes the difference from old to obj as a JSON merge patch,
// conditional on old's resourceVersion. kind is obj's, for a RequestError.
func patch(ctx context.Context, c client.Client, obj, old client.Object, kind string) error {
	err := c.Patch(ctx, obj, client.MergeFromWithOptions(old, client.MergeFromWithOptimisticLock{}))
	if err == nil || apierrors.IsConflict(err) {
		return err
	}
	return &RequestError{Verb: "patch", Kind: kind, Namespace: old.GetNamespace(), Name: old.GetName(), Err: err}
}
