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
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/outbox/cloudevent"
	"github.com/once-dev/once/internal/shard"
)

// DefaultOutboxTimeout bounds one delivery unless the manager says
// otherwise.
const DefaultOutboxTimeout = 10 * time.Second

// OutboxReconciler is the relay of the transactional outbox, for one kind
// of object. It delivers the announcements that a terminal status write
// wrote (status.outbox entries in Pending), at least once. It writes each
// delivery with a write conditional on the object's resourceVersion.
//
// It is a controller of its own, with its own workers, so a slow
// subscriber never holds an operation's worker. It is woken only by
// objects with a Pending entry, so objects without subscribers cost it
// nothing. A crash between a delivery and its write redelivers the same
// event, with the same id: consumers dedupe on it.
type OutboxReconciler struct {
	client.Client
	// APIReader reads past the cache: the relay reads the object it is
	// about to deliver for from the API server, so that a cache still
	// behind the relay's own last write does not deliver again.
	APIReader client.Reader
	Recorder  events.EventRecorder
	// Connector makes the client of a subscriber's sink tool, and
	// Validator checks the tool's definition, as for a call.
	Connector effects.Connector
	Validator ToolValidator
	Clock     clock.Clock
	// Jitter draws a uniform duration in [0, d] for the backoff between
	// deliveries (full jitter); math/rand if nil.
	Jitter func(d time.Duration) time.Duration
	// Budget bounds the deliveries of one entry.
	Budget outbox.Budget
	// Timeout bounds one delivery.
	Timeout time.Duration
	// WatchNamespaces are the namespaces the manager watches. None means
	// all. A manager that watches some serves no ClusterTool.
	WatchNamespaces []string
	// Shards says which objects this manager handles. Nil means all.
	Shards                  *shard.Sharder
	MaxConcurrentReconciles int
	// ErrorBackoff is how a pass that returned an error is retried.
	ErrorBackoff ErrorBackoff

	kind outboxKind
}

// outboxKind is what the relay needs to know of a kind of object.
type outboxKind struct {
	name        outbox.Kind
	newObject   func() client.Object
	newList     func() client.ObjectList
	entries     func(client.Object) *[]v1.OutboxEntry
	subscribers func(client.Object) []v1.Subscriber
	event       func(client.Object, v1.OutboxEntry) outbox.Event
}

var (
	operationOutbox = outboxKind{
		name:        outbox.KindOperation,
		newObject:   func() client.Object { return &v1.SideEffectOperation{} },
		newList:     func() client.ObjectList { return &v1.SideEffectOperationList{} },
		entries:     func(o client.Object) *[]v1.OutboxEntry { return &o.(*v1.SideEffectOperation).Status.Outbox },
		subscribers: func(o client.Object) []v1.Subscriber { return o.(*v1.SideEffectOperation).Spec.Subscribers },
		event: func(o client.Object, e v1.OutboxEntry) outbox.Event {
			return outbox.OperationEvent(o.(*v1.SideEffectOperation), e)
		},
	}
	sagaOutbox = outboxKind{
		name:        outbox.KindSaga,
		newObject:   func() client.Object { return &v1.Saga{} },
		newList:     func() client.ObjectList { return &v1.SagaList{} },
		entries:     func(o client.Object) *[]v1.OutboxEntry { return &o.(*v1.Saga).Status.Outbox },
		subscribers: func(o client.Object) []v1.Subscriber { return o.(*v1.Saga).Spec.Subscribers },
		event:       func(o client.Object, e v1.OutboxEntry) outbox.Event { return outbox.SagaEvent(o.(*v1.Saga), e) },
	}
)

// Reconcile delivers an object's due announcements and writes what came
// of them.
func (r *OutboxReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if ctx.Err() != nil {
		// The manager is stopping: a delivery started now could not be
		// written. The next manager delivers it.
		return ctrl.Result{}, nil
	}
	obj := r.kind.newObject()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Shards.OwnsObject(obj) {
		return ctrl.Result{}, nil
	}
	if due, wait := outbox.Due(*r.kind.entries(obj), r.Clock.Now()); !due {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// Due in the cache: confirm it on the object itself, which the
	// conditional write below is made against. Another UID under the name
	// is another object: the cache's is gone, and the new one's own
	// changes bring it here.
	uid := obj.GetUID()
	if err := r.APIReader.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetUID() != uid {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	entries := r.kind.entries(obj)
	due, wait := outbox.Due(*entries, r.Clock.Now())
	if !due {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if failpoint.Hit(ctx, failpoint.OutboxBeforeDeliver) {
		return ctrl.Result{}, nil
	}
	next, spent := r.deliver(ctx, obj, *entries)
	if failpoint.Hit(ctx, failpoint.OutboxAfterDeliver) {
		return ctrl.Result{}, nil
	}
	*entries = next
	if err := r.Status().Update(ctx, obj); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// Delivered, not written: the next pass delivers the same
			// events again, with the same ids.
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	for _, e := range spent {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, v1.EventDeliveryFailed, "Deliver",
			"Gave up delivering %s to subscriber %s after %d attempts: %s", e.Type, e.Subscriber, e.Attempts, e.Message)
	}
	_, wait = outbox.Due(next, r.Clock.Now())
	return ctrl.Result{RequeueAfter: wait}, nil
}

// deliver tries every due entry once, one after the other, each bounded by
// the timeout. It returns the entries after the deliveries, and those that
// spent their budget now.
func (r *OutboxReconciler) deliver(ctx context.Context, obj client.Object,
	entries []v1.OutboxEntry) (next, spent []v1.OutboxEntry) {
	log := logf.FromContext(ctx)
	now := r.Clock.Now()
	next = make([]v1.OutboxEntry, len(entries))
	for i := range entries {
		e := *entries[i].DeepCopy()
		next[i] = e
		if !outbox.EntryDue(e, now) {
			continue
		}
		ev := r.kind.event(obj, e)
		a := outbox.Answer{Final: true, Message: "Subscriber " + e.Subscriber + " is not in spec.subscribers"}
		if sub, ok := subscriber(r.kind.subscribers(obj), e.Subscriber); ok {
			a = r.send(ctx, obj.GetNamespace(), sub, ev)
		}
		after, failed := outbox.After(e, r.Budget, r.Clock.Now(), r.jitter(), a)
		next[i] = after
		switch {
		case after.State == v1.DeliveryDelivered:
			metrics.OutboxDeliveries.WithLabelValues(string(r.kind.name), string(v1.DeliveryDelivered)).Inc()
			if t := ev.Time; !t.IsZero() {
				metrics.OutboxDelay.WithLabelValues(string(r.kind.name)).Observe(r.Clock.Since(t).Seconds())
			}
			log.V(1).Info("Delivered the outcome", "eventID", e.EventID, "subscriber", e.Subscriber,
				"attempts", after.Attempts)
		case failed:
			metrics.OutboxDeliveries.WithLabelValues(string(r.kind.name), string(v1.DeliveryFailed)).Inc()
			spent = append(spent, after)
			log.Info("Gave up delivering the outcome", "eventID", e.EventID, "subscriber", e.Subscriber,
				"attempts", after.Attempts, "message", after.Message)
		default:
			metrics.OutboxDeliveries.WithLabelValues(string(r.kind.name), "Retry").Inc()
			log.Info("Delivery failed; it will be retried", "eventID", e.EventID, "subscriber", e.Subscriber,
				"attempts", after.Attempts, "message", after.Message)
		}
	}
	return next, spent
}

// jitter is the relay's Jitter, or randomJitter.
func (r *OutboxReconciler) jitter() func(time.Duration) time.Duration {
	if r.Jitter != nil {
		return r.Jitter
	}
	return randomJitter
}

// subscriber is the named subscriber.
func subscriber(subs []v1.Subscriber, name string) (v1.Subscriber, bool) {
	for _, s := range subs {
		if s.Name == name {
			return s, true
		}
	}
	return v1.Subscriber{}, false
}

// send delivers ev once to the subscriber's sink: its tool's operation,
// called with the event's id as the idempotency key, its attributes as
// headers and its data as parameters, within the relay's timeout. A sink
// the namespace may not use, or cannot use yet (the tool is missing, not
// valid, lacks the operation or its Secrets), is tried again within the
// budget: the people who declare tools may be on their way.
func (r *OutboxReconciler) send(ctx context.Context, namespace string, sub v1.Subscriber, ev outbox.Event) outbox.Answer {
	if sub.ToolRef.Name == "" || sub.Operation == "" {
		// Stored by a version whose subscribers were URLs: the API server
		// drops the url, and no sink is named.
		return outbox.Answer{Final: true, Message: "Subscriber " + sub.Name +
			" names no sink (toolRef and operation); a url is no longer delivered to"}
	}
	// One bound for the whole delivery: reading the sink's tool and its
	// Secrets, and the request.
	ctx, cancel := context.WithTimeout(ctx, max(r.Timeout, time.Second))
	defer cancel()
	ref := sub.ToolRef.Tool()
	tool, reason, msg, err := usableTool(ctx, r.Client, r.Validator, r.WatchNamespaces, ref, namespace, sub.Operation)
	switch {
	case err != nil:
		logf.FromContext(ctx).Error(err, "Reading a subscriber's sink", "subscriber", sub.Name, "tool", ref.Name)
		return outbox.Answer{Message: fmt.Sprintf("The sink %s %s cannot be read now", ref.Kind, ref.Name)}
	case reason != "":
		return outbox.Answer{Message: "The sink cannot be used: " + msg}
	}
	spec := tool.GetSpec()
	if !spec.Operation(sub.Operation).Sink {
		// A Tool's other operations are effects of their own, made under
		// the protocol: the relay never calls them.
		return outbox.Answer{Final: true, Message: fmt.Sprintf("Operation %s of %s %s is not a sink: only an operation "+
			"marked sink: true receives announcements", sub.Operation, ref.Kind, ref.Name)}
	}
	headers, body, err := cloudevent.Binary(ev)
	if err != nil {
		return outbox.Answer{Final: true, Message: err.Error()}
	}
	if err := r.Validator.CheckParameters(spec, sub.Operation, body); err != nil {
		// The sink's schema does not take Once's events: no delivery
		// would change that.
		return outbox.Answer{Final: true, Message: fmt.Sprintf("The event does not fit the parametersSchema of "+
			"operation %s of %s %s: %v", sub.Operation, ref.Kind, ref.Name, err)}
	}
	cl, err := r.Connector.Connect(ctx, tool)
	if err != nil {
		logf.FromContext(ctx).Error(err, "Reading a subscriber's sink's credentials", "subscriber", sub.Name,
			"tool", ref.Name)
		return outbox.Answer{Message: fmt.Sprintf("The credentials of the sink %s %s cannot be read now; its "+
			"Ready condition says why", ref.Kind, ref.Name)}
	}
	res := cl.Execute(ctx, effects.Request{
		Operation: sub.Operation, Key: ev.ID, Parameters: body, Headers: headers,
		Timeout: max(r.Timeout, time.Second), Clock: r.Clock.Now,
	})
	a := outbox.Answer{HTTPStatus: res.HTTPStatus}
	switch res.Outcome {
	case v1.OutcomeSucceeded:
		a.Delivered, a.Message = true, fmt.Sprintf("Delivered (HTTP %d)", res.HTTPStatus)
	case v1.OutcomePermanent:
		a.Final, a.Message = true, "The sink refused the event for good: "+res.Message
	default:
		a.Message = "Not delivered yet: " + res.Message
	}
	return a
}

// SetupWithManager runs the relay over the objects of its kind that have
// an announcement to deliver.
func (r *OutboxReconciler) SetupWithManager(mgr ctrl.Manager) error {
	hasPending := func(o client.Object) bool { return outbox.Pending(*r.kind.entries(o)) }
	b := ctrl.NewControllerManagedBy(mgr).
		For(r.kind.newObject(), builder.WithPredicates(predicate.NewPredicateFuncs(hasPending), r.Shards.Predicate())).
		WithOptions(fairOptions(r.MaxConcurrentReconciles, r.ErrorBackoff)).
		Named("outbox-" + string(r.kind.name))
	if r.Shards != nil {
		// A shard taken over brings here its objects with a pending
		// entry.
		b = b.WatchesRawSource(r.Shards.Resync(mgr.GetClient(), r.kind.newList(), hasPending))
	}
	return b.Complete(r)
}

// NewOutboxReconcilers are the relays of operations and sagas, sharing
// everything but their kind.
func NewOutboxReconcilers(base OutboxReconciler) []*OutboxReconciler {
	op, sg := base, base
	op.kind, sg.kind = operationOutbox, sagaOutbox
	return []*OutboxReconciler{&op, &sg}
}
