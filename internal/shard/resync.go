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

package shard

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Resync returns a source for a controller of the kind list holds: when
// this manager acquires shards, every object of that kind in them, as
// reader (the manager's cache) lists them, is enqueued. Their events were
// filtered out while another manager held the shards, or while nobody did.
// due, when not nil, leaves out the objects for which it is false: those
// the controller has nothing to do for, as its own event filter does.
// Call it before the manager starts.
func (s *Sharder) Resync(reader client.Reader, list client.ObjectList, due func(client.Object) bool) source.Source {
	r := &resync{s: s, reader: reader, list: list, due: due}
	s.mu.Lock()
	s.resyncs = append(s.resyncs, r)
	s.mu.Unlock()
	return source.Func(r.start)
}

// resync enqueues the objects of acquired shards into a controller's
// queue.
type resync struct {
	s      *Sharder
	reader client.Reader
	list   client.ObjectList
	due    func(client.Object) bool

	mu sync.Mutex
	// enqueueIn enqueues the objects of shards into the controller's
	// queue; nil until the controller starts.
	enqueueIn func(shards []int)
}

// start is called when the controller starts, with its queue: the shards
// acquired before that are enqueued now. A shard acquired meanwhile is
// enqueued twice at worst, which the queue folds into one.
func (r *resync) start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	r.mu.Lock()
	r.enqueueIn = func(shards []int) { go r.enqueue(ctx, q, shards) }
	r.mu.Unlock()
	r.enqueueIn(r.s.Held())
	return nil
}

// acquired enqueues the objects of newly acquired shards, once the
// controller has started.
func (r *resync) acquired(shards []int) {
	r.mu.Lock()
	enqueue := r.enqueueIn
	r.mu.Unlock()
	if enqueue != nil {
		enqueue(shards)
	}
}

// enqueue adds the objects of shards to q.
func (r *resync) enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], shards []int) {
	if len(shards) == 0 {
		return
	}
	want := make(map[int]bool, len(shards))
	for _, i := range shards {
		want[i] = true
	}
	list := r.list.DeepCopyObject().(client.ObjectList)
	// Read only: the cache's objects, not a copy of every one.
	if err := r.reader.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		r.s.log.Error(err, "Listing the objects of acquired shards failed; they wait for their next event", "shards", shards)
		return
	}
	n := 0
	_ = meta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return nil
		}
		if r.due != nil && !r.due(obj) {
			return nil
		}
		if k, ok := ObjectKey(obj); ok && want[k.Shard(r.s.o.Shards)] {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			n++
		}
		return nil
	})
	r.s.log.V(1).Info("Enqueued the objects of acquired shards", "shards", shards, "objects", n)
}
