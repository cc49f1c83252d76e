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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/shard"
)

// IdempotencyRecordReconciler collects scope records: a record goes once
// its retention has passed and its owner is gone, never before. While its
// owner exists the scope stays bound to it.
type IdempotencyRecordReconciler struct {
	client.Client
	APIReader client.Reader
	Clock     clock.Clock
	// Shards says which records this manager collects. Nil means all. A
	// record's shard is its operations'.
	Shards *shard.Sharder
	// ErrorBackoff is how a pass that returned an error is retried.
	ErrorBackoff ErrorBackoff
	// MaxConcurrentReconciles bounds the records collected at once. Under
	// a sustained load with TTLs, records expire as fast as operations are
	// made, and each collection is a read of its owner and a delete: one
	// worker fell behind at about ten a second on two cores (make soak).
	MaxConcurrentReconciles int
}

// Reconcile collects one record if its time has come.
func (r *IdempotencyRecordReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rec := &v1.IdempotencyRecord{}
	if err := r.Get(ctx, req.NamespacedName, rec); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Shards.OwnsObject(rec) {
		// Another manager holds the record's shard; a deleted operation
		// woke it here.
		return ctrl.Result{}, nil
	}
	expiry, ok := protocol.RecordExpiry(rec.Spec)
	if !ok {
		// Its owner never ended: the record stays until an operation with
		// the same scope takes it over and settles it.
		return ctrl.Result{}, nil
	}
	if wait := expiry.Sub(r.Clock.Now()); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	owner := &v1.SideEffectOperation{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Spec.Owner.Name}, owner)
	if err == nil && owner.UID == rec.Spec.Owner.UID {
		// Its owner's deletion brings the record back here.
		return ctrl.Result{}, nil
	}
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	uid, rv := rec.UID, rec.ResourceVersion
	if err := r.Delete(ctx, rec, client.Preconditions{UID: &uid, ResourceVersion: &rv}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	logf.FromContext(ctx).Info("Collected an expired scope record", "owner", rec.Spec.Owner.Name,
		"key", rec.Spec.IdempotencyKey)
	return ctrl.Result{}, nil
}

// SetupWithManager registers the controller; a deleted operation wakes its
// scope's record.
func (r *IdempotencyRecordReconciler) SetupWithManager(mgr ctrl.Manager) error {
	onlyDeletes := predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		UpdateFunc:  func(event.UpdateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1.IdempotencyRecord{}, builder.WithPredicates(r.Shards.Predicate())).
		Watches(&v1.SideEffectOperation{}, handler.EnqueueRequestsFromMapFunc(
			func(_ context.Context, o client.Object) []reconcile.Request {
				// Derived from the spec: an ended operation's status
				// does not keep the name.
				name := protocol.OperationScope(o.(*v1.SideEffectOperation)).RecordName()
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
			}), builder.WithPredicates(onlyDeletes)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(1, r.MaxConcurrentReconciles),
			RateLimiter: r.ErrorBackoff.rateLimiter()}).
		Named("idempotencyrecord")
	if r.Shards != nil {
		b = b.WatchesRawSource(r.Shards.Resync(mgr.GetClient(), &v1.IdempotencyRecordList{}, nil))
	}
	return b.Complete(r)
}
