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
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/outbox"
)

// An ended operation or saga goes when its spec.ttlSecondsAfterFinished has
// run out since it ended, as a Job does (docs/design.md, "Objects that go
// when they are done"). The reconciler of the object deletes it, with the
// version it read as a precondition, so a newer or re-created object is
// never deleted by a decision taken on an older one. An operation's
// deletion goes through its finalizer like any other: its outcome is kept
// in its scope's record, which stays until its own expiry.

// The manager deletes ended operations and sagas whose
// spec.ttlSecondsAfterFinished ran out.
// +kubebuilder:rbac:groups=effects.once.dev,resources=sideeffectoperations;sagas,verbs=delete

// finishedTime is when an ended object ended: status.completionTime, which
// every terminal write sets, or else the Ready condition's last transition
// (an object that ended before the completion time was kept). nil: the
// object holds neither and is kept.
func finishedTime(completion *metav1.Time, conditions []metav1.Condition) *metav1.Time {
	if completion != nil {
		return completion
	}
	if c := meta.FindStatusCondition(conditions, v1.ConditionReady); c != nil && !c.LastTransitionTime.IsZero() {
		return &c.LastTransitionTime
	}
	return nil
}

// expiresIn is how long an ended object has left: due is true when it is
// to be deleted now, and wait is how long until then otherwise. An object
// without a TTL, or that holds no finished time, never expires (wait 0).
func expiresIn(ttl *int32, finished *metav1.Time, now time.Time) (due bool, wait time.Duration) {
	if ttl == nil || finished == nil {
		return false, 0
	}
	at := finished.Add(time.Duration(*ttl) * time.Second)
	if !now.Before(at) {
		return true, 0
	}
	return false, at.Sub(now)
}

// controlledBySaga reports whether a Saga controls op: a step or a
// compensation, which goes with its saga.
func controlledBySaga(op *v1.SideEffectOperation) bool {
	ref := metav1.GetControllerOfNoCopy(op)
	return ref != nil && ref.Kind == "Saga" && strings.HasPrefix(ref.APIVersion, v1.GroupVersion.Group+"/")
}

// keepsOwnTTL reports whether an operation goes by its own TTL: it has one,
// and no saga controls it (a step goes with its saga).
func keepsOwnTTL(op *v1.SideEffectOperation) bool {
	return op.Spec.TTLSecondsAfterFinished != nil && !controlledBySaga(op)
}

// expire deletes obj if its TTL ran out (a delete conditional on the UID
// and the version read) and otherwise asks to be back when it does. The
// deletion is routine, the end of a happy path. It writes no Event and is
// counted instead. One Event per operation, which the API server keeps for
// an hour, would be most of what a busy cluster's etcd holds for Once.
func expire(ctx context.Context, c client.Client, kind string, obj client.Object,
	ttl *int32, finished *metav1.Time, now time.Time, opts ...client.DeleteOption) (ctrl.Result, error) {
	due, wait := expiresIn(ttl, finished, now)
	if !due {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	opts = append(opts, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	err := c.Delete(ctx, obj, opts...)
	switch {
	case apierrors.IsNotFound(err):
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		// A newer version, or a new object of the name: decided again on
		// it.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("deleting after spec.ttlSecondsAfterFinished: %w", err)
	}
	metrics.TTLDeletions.WithLabelValues(kind).Inc()
	logf.FromContext(ctx).V(1).Info("Deleted an ended object whose spec.ttlSecondsAfterFinished ran out",
		"ttlSecondsAfterFinished", *ttl, "finished", finished.UTC().Format(time.RFC3339))
	return ctrl.Result{}, nil
}

// expireOperation deletes an ended operation whose TTL ran out. A step of a
// saga is left to its saga, and an operation that still needs its
// finalizer (keepFinalizer adds it) waits for it: its outcome must reach
// its scope's record when it goes. One with an announcement still to
// deliver (status.outbox in Pending) waits for the relay: the outbox lives
// in the object, and deleting it would drop the announcement (I15).
func (r *SideEffectOperationReconciler) expireOperation(ctx context.Context, op *v1.SideEffectOperation) (
	ctrl.Result, error) {
	if !keepsOwnTTL(op) || !r.Shards.OwnsObject(op) {
		return ctrl.Result{}, nil
	}
	if lacksFinalizer(op) {
		// The finalizer's write brings the operation back.
		return ctrl.Result{}, nil
	}
	if outbox.Pending(op.Status.Outbox) {
		// Its announcements go first (I15): the relay's write of the
		// last one changes the object, which wakes this pass again.
		return ctrl.Result{}, nil
	}
	return expire(ctx, r.Client, "SideEffectOperation", op, op.Spec.TTLSecondsAfterFinished,
		finishedTime(op.Status.CompletionTime, op.Status.Conditions), r.Clock.Now())
}

// expireSaga deletes an ended saga whose TTL ran out; the garbage collector
// deletes its operations, whose finalizers keep their outcomes.
func (r *SagaReconciler) expireSaga(ctx context.Context, s *v1.Saga) (ctrl.Result, error) {
	if s.Spec.TTLSecondsAfterFinished == nil || !r.Shards.OwnsObject(s) || outbox.Pending(s.Status.Outbox) {
		// A pending announcement is delivered (or given up) first: the
		// relay's write wakes the saga again.
		return ctrl.Result{}, nil
	}
	return expire(ctx, r.Client, "Saga", s, s.Spec.TTLSecondsAfterFinished,
		finishedTime(s.Status.CompletionTime, s.Status.Conditions), r.Clock.Now(),
		client.PropagationPolicy(metav1.DeletePropagationBackground))
}
