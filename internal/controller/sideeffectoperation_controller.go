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
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/shard"
)

// Field indexes over SideEffectOperations.
const (
	// indexToolRef holds "Kind/namespace/name" of the referenced tool, so a
	// tool's change reaches the operations waiting for it.
	indexToolRef = "spec.toolRef"
	// indexDuplicateOf holds the operation a duplicate waits for.
	indexDuplicateOf = "status.duplicateOf"
)

// ToolValidator checks a tool's definition beyond what the API server can.
type ToolValidator interface {
	Validate(spec *v1.ToolSpec) error
	// Warnings are what a valid definition may still get wrong; the
	// tool's Ready condition shows them.
	Warnings(spec *v1.ToolSpec) []string
	// CheckParameters checks an operation's canonical parameters against
	// its operation's schema.
	CheckParameters(spec *v1.ToolSpec, operation string, params []byte) error
}

// SideEffectOperationReconciler drives SideEffectOperations through the
// idempotency protocol: it loads the operation and its tool, binds the
// scope, asks the protocol what to do, claims, calls the tool, and writes
// the outcome with conditional writes.
type SideEffectOperationReconciler struct {
	client.Client
	// APIReader reads past the cache, where a stale view would be wrong.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Connector effects.Connector
	Validator ToolValidator
	Budgets   *RetryBudgets
	// Bulkhead bounds the passes inside one tool's calls. Nil means no
	// bound.
	Bulkhead *Bulkhead
	// NamespaceShare bounds the passes inside one namespace's calls, keyed
	// by namespace. Nil means no bound.
	NamespaceShare *Bulkhead
	// Clock is the manager's clock; a claim's expiry, its timer and its
	// fence are read on it.
	Clock clock.WithTickerAndDelayedExecution
	// Jitter draws a uniform duration in [0, d] for backoffs (full
	// jitter); math/rand if nil. The simulator draws from its seed.
	Jitter func(d time.Duration) time.Duration

	// Holder identifies this manager process in claims; it must differ
	// between processes, also across restarts.
	Holder string
	// MaxClaim bounds a claim's duration before renewal; a call whose
	// timeout is longer renews its claim while it runs.
	MaxClaim time.Duration
	// ClaimGrace is added to a claim's duration, for the outcome write.
	ClaimGrace time.Duration
	// MaxConcurrentReconciles bounds the operations handled at once.
	MaxConcurrentReconciles int
	// StopGrace bounds how long a stopping manager goes on writing the
	// answers it holds, once its passes in flight have ended.
	StopGrace time.Duration
	// WatchNamespaces are the only namespaces the manager watches. Empty
	// means all. A manager restricted to some neither watches nor reads
	// ClusterTools and Namespaces, which are cluster-scoped.
	WatchNamespaces []string
	// Shards says which operations this manager handles. Nil means all.
	Shards *shard.Sharder
	// ErrorBackoff is how a pass that returned an error is retried.
	ErrorBackoff ErrorBackoff

	// held keeps answers whose write failed for a reason other than a
	// conflict, so the next pass writes them instead of reconciling
	// (sideeffectoperation_answer.go).
	held sync.Map // types.UID → *heldAnswer
	// inflight counts the passes running now: a stopping manager writes
	// the answers it holds once they have ended (heldWriter).
	inflight atomic.Int32
}

// The manager's rights, each for a call the code makes (docs/install.md
// lists them):
//
//   - operations are watched and read, and patched only to add or remove
//     the finalizer. Their status is replaced with a conditional update.
//   - scope records are created, updated and deleted.
//   - Secrets are read by name past the cache, never listed or watched.
//   - events are created, and patched when they repeat.
// +kubebuilder:rbac:groups=effects.once.dev,resources=sideeffectoperations,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=effects.once.dev,resources=sideeffectoperations/status,verbs=update
// +kubebuilder:rbac:groups=effects.once.dev,resources=idempotencyrecords,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=effects.once.dev,resources=tools;clustertools,verbs=get;list;watch
// +kubebuilder:rbac:groups=effects.once.dev,resources=sagas,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile moves one operation as far as it can go now.
func (r *SideEffectOperationReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.inflight.Add(1)
	defer r.inflight.Add(-1)
	if ctx.Err() != nil {
		// The manager is stopping: it drains the passes in flight, but
		// starts none (a new claim would outlive it).
		return ctrl.Result{}, nil
	}
	op := &v1.SideEffectOperation{}
	err := r.Get(ctx, req.NamespacedName, op)
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, err
	}
	if err != nil {
		op = &v1.SideEffectOperation{}
	}
	if err := r.answerOrphans(ctx, req.NamespacedName, op.UID); err != nil || op.UID == "" {
		return ctrl.Result{}, err
	}
	if !op.DeletionTimestamp.IsZero() {
		// A deleted operation never claims; its outcome goes to its
		// scope's record, which outlives it.
		return r.release(ctx, op)
	}
	if settledElsewhere(op) {
		if _, held := r.held.Load(op.UID); held {
			// Another manager moved the operation on while this one could
			// not write the answer it holds: write it before anything
			// else, or it is lost (I12).
			fresh, done, err := r.writeHeldAnswer(ctx, op)
			if done || err != nil {
				return ctrl.Result{}, err
			}
			op = fresh
		}
	}
	if op.Status.State.IsTerminal() {
		if err := r.keepFinalizer(ctx, op); err != nil {
			return ctrl.Result{}, err
		}
		return r.expireOperation(ctx, op)
	}
	if _, answered := r.held.Load(op.UID); !answered && !r.Shards.OwnsObject(op) {
		// Another manager holds the operation's shard (a tool, namespace
		// or duplicate watch woke it here). An answer this manager still
		// holds is written all the same: otherwise it would be unknown.
		return ctrl.Result{}, nil
	}
	if no := refusedByCache(op); no != nil {
		if op.Status.State.IsPlanned() {
			// The cache kept none of the parameters: they are too large,
			// which is reason enough to fail before any call.
			p := r.newPass(ctx, op)
			return p.result(r.refuse(p, no))
		}
		// Not reached while the limit holds (such an operation never left
		// Planned); read the parameters past the cache.
		fresh, err := r.readOp(ctx, op)
		if err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		op = fresh
	}
	p := r.newPass(ctx, op)
	if err := p.identify(); err != nil {
		return p.result(r.fail(p, v1.ErrorInvalid, v1.ReasonInvalidSpec, err.Error()))
	}
	return p.result(r.drive(p))
}

// settledElsewhere reports whether an operation no longer waits for a call
// of any manager: it is terminal, or a person must decide.
func settledElsewhere(op *v1.SideEffectOperation) bool {
	return op.Status.State.IsTerminal() || op.Status.State == v1.StateNeedsReview
}

// atRest reports whether Reconcile has nothing to do for an operation
// until it changes. It ended, is not being deleted, has the finalizer it
// needs, and has no TTL of its own to keep (a saga's step goes with its
// saga). Nearly every operation a cluster retains is at rest. A manager
// that starts, or takes over a shard, does not pass over them.
func atRest(o client.Object) bool {
	op, ok := o.(*v1.SideEffectOperation)
	return ok && op.Status.State.IsTerminal() && op.DeletionTimestamp.IsZero() && !lacksFinalizer(op) &&
		!keepsOwnTTL(op)
}

// OperationChangeWakes reports whether a change of an operation, seen by a
// watch, wakes Reconcile: from old (nil when a start lists it) to cur (nil
// when it was deleted). A start, which lists every operation the cluster
// retains, and a periodic resync, which repeats an unchanged object, wake
// none at rest; a change of one at rest, a label or a TTL added, does.
// The manager's event filter, and the simulator's.
func OperationChangeWakes(old, cur client.Object) bool {
	if cur == nil || (old != nil && old.GetResourceVersion() != cur.GetResourceVersion()) {
		return true
	}
	return !atRest(cur)
}

// operationChanges filters the operation controller's events by
// OperationChangeWakes.
var operationChanges = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return OperationChangeWakes(nil, e.Object) },
	UpdateFunc: func(e event.UpdateEvent) bool { return OperationChangeWakes(e.ObjectOld, e.ObjectNew) },
}

// IndexFields registers the field indexes the reconciler lists by: the
// manager's cache, or the simulator's. Both hold unfinished operations
// alone: the watches that list by them wake only those, and a cluster's
// terminal operations would make them as large as the cache's store.
func (r *SideEffectOperationReconciler) IndexFields(ctx context.Context, idx client.FieldIndexer) error {
	if err := idx.IndexField(ctx, &v1.SideEffectOperation{}, indexToolRef, func(o client.Object) []string {
		op := o.(*v1.SideEffectOperation)
		if op.Status.State.IsTerminal() {
			return nil
		}
		return []string{toolID(op.Spec.ToolRef, op.Namespace)}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1.SideEffectOperation{}, indexDuplicateOf, func(o client.Object) []string {
		op := o.(*v1.SideEffectOperation)
		if d := op.Status.DuplicateOf; d != "" && !op.Status.State.IsTerminal() {
			return []string{d}
		}
		return nil
	}); err != nil {
		return err
	}
	// What the once_operations_needs_review gauge counts at every scrape.
	return idx.IndexField(ctx, &v1.SideEffectOperation{}, metrics.IndexNeedsReview, func(o client.Object) []string {
		if o.(*v1.SideEffectOperation).Status.State == v1.StateNeedsReview {
			return []string{"true"}
		}
		return nil
	})
}

// SetupWithManager registers the controller, its indexes and its watches.
func (r *SideEffectOperationReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := r.IndexFields(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1.SideEffectOperation{}, builder.WithPredicates(operationChanges, r.Shards.Predicate())).
		Watches(&v1.SideEffectOperation{}, handler.EnqueueRequestsFromMapFunc(r.duplicatesOf)).
		Watches(&v1.Tool{}, handler.EnqueueRequestsFromMapFunc(r.operationsOfTool)).
		WithOptions(fairOptions(r.MaxConcurrentReconciles, r.ErrorBackoff)).
		Named("sideeffectoperation")
	if err := mgr.Add(heldWriter{r: r, grace: r.StopGrace}); err != nil {
		return err
	}
	if len(r.WatchNamespaces) == 0 {
		b = b.Watches(&v1.ClusterTool{}, handler.EnqueueRequestsFromMapFunc(r.operationsOfTool)).
			Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.operationsInNamespace), namespaceLabelsChanged)
	}
	if r.Shards != nil {
		b = b.WatchesRawSource(r.Shards.Resync(mgr.GetClient(), &v1.SideEffectOperationList{},
			func(o client.Object) bool { return !atRest(o) }))
	}
	return b.Complete(r)
}

// duplicatesOf wakes the duplicates that wait for an operation.
func (r *SideEffectOperationReconciler) duplicatesOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.SideEffectOperationList
	// Read only: the cache's objects, not copies of them.
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()),
		client.MatchingFields{indexDuplicateOf: o.GetName()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return unfinished(list.Items)
}

// operationsOfTool wakes the unfinished operations that use a tool.
func (r *SideEffectOperationReconciler) operationsOfTool(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.SideEffectOperationList
	// Read only: a tool's every operation, committed ones included, is
	// not copied on each of its changes.
	if err := r.List(ctx, &list, client.MatchingFields{indexToolRef: toolIDOf(o.(v1.GenericTool))},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	return unfinished(list.Items)
}

// unfinished are the requests for the operations that are not terminal.
func unfinished(ops []v1.SideEffectOperation) []reconcile.Request {
	var reqs []reconcile.Request
	for i := range ops {
		if !ops[i].Status.State.IsTerminal() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{
				Namespace: ops[i].Namespace, Name: ops[i].Name}})
		}
	}
	return reqs
}

// A manager that stops may still hold answers: a call finished, and the
// write of its answer failed (the API server was away). The pass that
// would write it never comes once the work queues stop. So a stopping
// manager writes them itself, after its passes in flight have ended, in
// passes that write what they hold and call no tool (I12). What still
// fails to be written when the grace runs out is lost, as in a crash: the
// attempt stays unknown, and the next manager reconciles it.

// heldWriter is the manager's runnable that writes, as it stops, the
// answers the operation reconciler still holds.
type heldWriter struct {
	r *SideEffectOperationReconciler
	// grace bounds the writing: the manager's graceful shutdown.
	grace time.Duration
}

// lastRound bounds the round of writes that follows the grace, for what
// the passes ending at its close still hold. It ends before the manager's
// own deadline, which is half of shutdownSlack past the grace.
const lastRound = shutdownSlack / 4

// Start waits for the manager to stop, then writes what is held once no
// pass is in flight, again while passes end and hold more, until nothing
// is held or the grace has run out. A last round, bounded by lastRound,
// writes what is held then, whether passes are in flight or not.
func (h heldWriter) Start(ctx context.Context) error {
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.grace)
	defer cancel()
	log := logf.FromContext(ctx)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if h.r.inflight.Load() == 0 {
			if h.r.WriteHeld(stop) == 0 {
				return nil
			}
		}
		select {
		case <-stop.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(stop), lastRound)
			defer cancel()
			if n := h.r.WriteHeld(last); n > 0 {
				log.Info("Stopped with answers not written; their attempts stay unknown until reconciled", "answers", n)
			}
			return nil
		case <-tick.C:
		}
	}
}

// WriteHeld runs a pass that makes no call for each operation this
// manager holds an answer for, and returns how many answers are still
// held after.
func (r *SideEffectOperationReconciler) WriteHeld(ctx context.Context) int {
	ctx = context.WithValue(ctx, answersOnly{}, true)
	var names []client.ObjectKey
	r.held.Range(func(_, v any) bool {
		names = append(names, client.ObjectKeyFromObject(v.(*heldAnswer).op))
		return true
	})
	for _, key := range names {
		if ctx.Err() != nil {
			// The bound has run out: what is left stays held.
			break
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			logf.FromContext(ctx).Error(err, "Writing an answer held as the manager stops", "operation", key)
		}
	}
	held := 0
	r.held.Range(func(_, _ any) bool {
		held++
		return true
	})
	return held
}
