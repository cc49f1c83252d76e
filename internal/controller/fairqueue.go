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
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Tenants share a manager's workers. In one first-in, first-out queue, a
// namespace that creates a hundred thousand operations would hold every
// other namespace's behind all of them: each of its operations takes
// several passes, and each pass goes to the back of the queue again. The
// controllers that do a tenant's work (operations, sagas, the outbox
// relays) hand out their ready requests namespace by namespace instead,
// round robin. A namespace with one request waiting waits for at most one
// request of each other namespace that has any (docs/threat-model.md).
//
// Everything else stays client-go's work queue:
//   - A request queued twice is queued once.
//   - One being reconciled is not handed out again until it is done.
//   - A request due later waits in the delaying queue.
//   - Errors back off per request (ErrorBackoff).
//
// Only the order of the ready ones changes.

// fairOptions are the options of a controller whose queue is fair between
// namespaces: workers reconcile at once, and errors back off as b says.
func fairOptions(workers int, b ErrorBackoff) controller.Options {
	return controller.Options{MaxConcurrentReconciles: max(1, workers), RateLimiter: b.rateLimiter(),
		NewQueue: newFairQueue}
}

// newFairQueue is a controller's rate-limited work queue, named as the
// controller for its metrics, whose ready requests are handed out by
// namespaceFair.
func newFairQueue(name string, limiter workqueue.TypedRateLimiter[reconcile.Request],
) workqueue.TypedRateLimitingInterface[reconcile.Request] {
	ready := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{
		Name: name, Queue: &namespaceFair{queues: map[string][]reconcile.Request{}}})
	delaying := workqueue.NewTypedDelayingQueueWithConfig(workqueue.TypedDelayingQueueConfig[reconcile.Request]{
		Name: name, Queue: ready})
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
		workqueue.TypedRateLimitingQueueConfig[reconcile.Request]{Name: name, DelayingQueue: delaying})
}

// namespaceFair holds the ready requests of a work queue: one first-in,
// first-out queue per namespace, taken in turn. client-go's queue calls it
// under its own lock, and never pushes a request it already holds.
type namespaceFair struct {
	// queues are the requests of each namespace that has any.
	queues map[string][]reconcile.Request
	// turns are the namespaces that have requests, in the order of their
	// turns; next is the one whose turn it is.
	turns []string
	next  int
	n     int
}

var _ workqueue.Queue[reconcile.Request] = &namespaceFair{}

// Touch is called for a request queued again while it waits: it keeps its
// place.
func (q *namespaceFair) Touch(reconcile.Request) {}

// Push queues a request at the end of its namespace's; a namespace that
// had none takes its turn after every other's.
func (q *namespaceFair) Push(r reconcile.Request) {
	ns := r.Namespace
	if len(q.queues[ns]) == 0 {
		// Just before the namespace whose turn it is: last in the round.
		q.turns = append(q.turns, "")
		copy(q.turns[q.next+1:], q.turns[q.next:])
		q.turns[q.next] = ns
		if len(q.turns) > 1 {
			q.next++
		}
	}
	q.queues[ns] = append(q.queues[ns], r)
	q.n++
}

// Len is how many requests are ready.
func (q *namespaceFair) Len() int { return q.n }

// Pop hands out the oldest request of the namespace whose turn it is, and
// gives the turn to the next namespace. client-go's queue calls it only
// when Len is not zero.
func (q *namespaceFair) Pop() reconcile.Request {
	ns := q.turns[q.next]
	rs := q.queues[ns]
	r := rs[0]
	rs[0] = reconcile.Request{}
	q.n--
	if len(rs) == 1 {
		delete(q.queues, ns)
		q.turns = append(q.turns[:q.next], q.turns[q.next+1:]...)
	} else {
		q.queues[ns] = rs[1:]
		q.next++
	}
	if q.next >= len(q.turns) {
		q.next = 0
	}
	return r
}
