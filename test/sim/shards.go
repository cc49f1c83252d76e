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

// Shards (Options.Shards): each manager runs the product's shard.Sharder,
// on the simulated API server's Leases and its own clock, and reconciles
// only the objects of the shards it holds (docs/design.md, "The
// simulator").

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/once-dev/once/internal/controller"
	"github.com/once-dev/once/internal/shard"
)

// The shards' Leases and their timing: cmd/main.go's defaults.
const (
	shardNamespace = "once-system"
	shardLease     = 15 * time.Second
	shardRenew     = 5 * time.Second
	kindLease      = "Lease"
)

// sharder is one incarnation's shard.Sharder, run as a manager runs it
// (Start, in its own goroutine), with a ticker the simulated clock drives:
// each renewal happens at its time, while the world waits for it.
type sharder struct {
	*shard.Sharder
	m           *Manager
	incarnation int
	cancel      context.CancelFunc
	// tick wakes the Sharder's loop; idle says it waits for the next tick;
	// exited that Start returned.
	tick   chan time.Time
	idle   chan struct{}
	exited chan struct{}
	timer  clock.Timer
	// warped are the shards held when the clock last leapt over this
	// Sharder's renewals (warp): its next renewal takes them again.
	warped []int
	// mu serialises the Lease calls the Sharder makes side by side in a
	// renewal: the simulated API server takes one call at a time.
	mu sync.Mutex
}

// get is the Sharder, nil without shards: a nil Sharder holds everything.
func (s *sharder) get() *shard.Sharder {
	if s == nil {
		return nil
	}
	return s.Sharder
}

// createShardNamespace makes the namespace that holds the Leases.
func (w *World) createShardNamespace() {
	if w.opts.Shards > 0 {
		must(w.server.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: shardNamespace}}))
	}
}

// startSharder starts the Sharder of the manager's incarnation, and waits
// for its first renewal; nil without shards.
func (m *Manager) startSharder() *sharder {
	if m.w.opts.Shards <= 0 {
		return nil
	}
	s := &sharder{m: m, incarnation: m.incarnation, tick: make(chan time.Time), idle: make(chan struct{}),
		exited: make(chan struct{})}
	c := &leaseClient{Client: NewClient(m.w.server, nil, leaseGate{s}), mu: &s.mu}
	sh, err := shard.New(shard.Options{Client: c, Reader: leaseReader{c}, Namespace: shardNamespace,
		Holder: m.holder(), Shards: m.w.opts.Shards, LeaseDuration: shardLease, RenewPeriod: shardRenew,
		Clock: shardClock{processClock{m.w.clock, m.w, m.skew}, s}})
	must(err)
	s.Sharder = sh
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		_ = sh.Start(ctx)
		close(s.exited)
	}()
	<-s.idle
	return s
}

// end stops the Sharder, as the manager does first when it stops: it
// releases its shards and deletes its membership, if its incarnation is
// still alive and reaches the API server; a process killed does neither.
func (s *sharder) end() {
	if s == nil || s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	<-s.exited
}

// fire is a renewal: the Sharder's loop runs one tick, and the shards it
// acquired bring their objects to the manager's queues.
func (s *sharder) fire() {
	if s.cancel == nil {
		return
	}
	before := s.Held()
	if s.warped != nil {
		before, s.warped = s.warped, nil
	}
	s.tick <- s.m.w.clock.Now()
	<-s.idle
	after := s.Held()
	gained := slices.DeleteFunc(slices.Clone(after), func(i int) bool { return slices.Contains(before, i) })
	lost := slices.DeleteFunc(before, func(i int) bool { return slices.Contains(after, i) })
	if len(gained) == 0 && len(lost) == 0 {
		return
	}
	s.m.w.note("manager %s's shards: %v (took %v, gave up %v)", s.m.holder(), after, gained, lost)
	s.m.resync(gained)
}

// C is the ticker's channel. The Sharder's loop asks for it each time it
// waits for the next tick: that is when a tick has ended.
func (s *sharder) C() <-chan time.Time {
	s.idle <- struct{}{}
	return s.tick
}

// Stop stops the ticker.
func (s *sharder) Stop() {
	if s.timer != nil {
		s.timer.Stop()
	}
}

// shardClock is the process's clock, whose ticker the world drives.
type shardClock struct {
	processClock
	s *sharder
}

// NewTicker arms the Sharder's renewals every d, in the background: the
// scheduler's moves to the next due time do not stop at each.
func (c shardClock) NewTicker(d time.Duration) clock.Ticker {
	var next func()
	next = func() {
		c.s.timer = c.Background(d, next)
		c.s.fire()
		c.s.m.w.warp()
	}
	c.s.timer = c.Background(d, next)
	return c.s
}

// leaseGate is the Sharder's connection to the API server: the manager's
// own, cut off with it, dead with its incarnation.
type leaseGate struct{ s *sharder }

func (g leaseGate) API(string, string, runtime.Object) error {
	if g.s.incarnation != g.s.m.incarnation || g.s.m.cutOff {
		return ErrUnreachable
	}
	return nil
}

func (leaseGate) Read(runtime.Object)                            {}
func (leaseGate) AnswerLost(string, string, runtime.Object) bool { return false }

// leaseClient is the Sharder's client: writes past any cache, one at a
// time.
type leaseClient struct {
	*Client
	mu *sync.Mutex
}

func (c *leaseClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Client.Create(ctx, obj, opts...)
}

func (c *leaseClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Client.Update(ctx, obj, opts...)
}

func (c *leaseClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Client.Delete(ctx, obj, opts...)
}

// leaseReader reads the Leases past the cache, as the manager's APIReader.
type leaseReader struct{ c *leaseClient }

func (r leaseReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.Reader().Get(ctx, key, obj, opts...)
}

func (r leaseReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.c.mu.Lock()
	defer r.c.mu.Unlock()
	return r.c.Reader().List(ctx, list, opts...)
}

// owns is the shard predicate of a controller's own kind (For): an event
// passes if the manager holds the shard of its object (the object as it
// is, or as it was when deleted).
func (m *Manager) owns(old, cur client.Object) bool {
	o := cur
	if o == nil {
		o = old
	}
	return o == nil || m.sharder.get().OwnsObject(o)
}

// resync is shard.Sharder.Resync for each controller: the objects of the
// shards acquired, as the cache lists them, are queued, each controller
// leaving out those its own event filter does.
func (m *Manager) resync(shards []int) {
	if len(shards) == 0 {
		return
	}
	for _, k := range sortedKeysOf(m.cache.objects) {
		o := m.cache.objects[k]
		key, ok := shard.ObjectKey(o)
		if !ok || !slices.Contains(shards, key.Shard(m.w.opts.Shards)) {
			continue
		}
		switch k.Kind {
		case kindOperation:
			if controller.OperationChangeWakes(nil, o) {
				m.enqueue(request{ctrlOperation, k.NamespacedName}, 0)
			}
			if pendingOutbox(o) {
				m.enqueue(request{ctrlRelayOperation, k.NamespacedName}, 0)
			}
		case kindSaga:
			m.enqueue(request{ctrlSaga, k.NamespacedName}, 0)
			if pendingOutbox(o) {
				m.enqueue(request{ctrlRelaySaga, k.NamespacedName}, 0)
			}
		case kindRecord:
			m.enqueue(request{ctrlRecord, k.NamespacedName}, 0)
		}
	}
}

// sortedKeysOf are a map's keys in a stable order.
func sortedKeysOf[T any](objects map[objKey]T) []objKey {
	keys := make([]objKey, 0, len(objects))
	for k := range objects {
		keys = append(keys, k)
	}
	sortKeys(keys)
	return keys
}

// untilAny is untilDue counting the background timers too (the Sharders'
// renewals): what the quiet phase waits for.
func (w *World) untilAny() time.Duration {
	d := w.untilDue()
	if t, ok := w.clock.NextAny(); ok {
		if b := t.Sub(w.clock.Now()).Round(time.Millisecond) + time.Millisecond; b > 0 && (d <= 0 || b < d) {
			d = b
		}
	}
	return d
}

// warp leaps over the renewals of a long move of the clock while the
// shards are at rest: every manager runs, reaches the API server, and
// holds the shards the assignment gives it, under Leases that name it.
// Each renewal would then only move the Leases' renewTime; the leap moves
// them, and the Sharders' next renewals, by the same whole number of
// periods, and leaves two Lease durations of renewals to run as they
// come. An hour's move costs a few renewals, not seven hundred.
func (w *World) warp() {
	until := w.clock.until
	if until.IsZero() || until.Sub(w.clock.Now()) < 4*shardLease || !w.shardsAtRest() {
		return
	}
	leap := (until.Sub(w.clock.Now()) - 2*shardLease) / shardRenew * shardRenew
	for _, o := range w.server.objects {
		if l, ok := o.(*coordinationv1.Lease); ok && l.Spec.RenewTime != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: l.Spec.RenewTime.Add(leap)}
		}
	}
	for _, m := range w.managers {
		if s := m.sharder; s != nil && s.cancel != nil {
			s.warped = s.Held()
			s.timer.Reset(s.timer.(*timer).at.Add(leap).Sub(w.clock.Now()))
		}
	}
}

// shardsAtRest reports whether a renewal would change nothing but the
// Leases' renewTime: the managers that run and reach the API server hold
// the shards the assignment among them gives each, under Leases that name
// them; the others hold none, and no Lease names them.
func (w *World) shardsAtRest() bool {
	var holders []string
	for _, m := range w.managers {
		switch {
		case m.sharder != nil && m.sharder.cancel != nil && !m.cutOff:
			holders = append(holders, m.holder())
		case len(m.sharder.get().Held()) > 0:
			return false
		}
	}
	owners := shard.Assign(w.opts.Shards, holders)
	members := 0
	for k, o := range w.server.objects {
		l, ok := o.(*coordinationv1.Lease)
		if !ok || k.Namespace != shardNamespace {
			continue
		}
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		switch {
		case l.Labels[shard.LabelMember] != "":
			if !slices.Contains(holders, holder) {
				return false
			}
			members++
		case holder != owners[shardOf(l)]:
			return false
		}
	}
	if members != len(holders) {
		return false
	}
	for _, m := range w.managers {
		if !slices.Contains(holders, m.holder()) {
			continue
		}
		for i, owner := range owners {
			if (owner == m.holder()) != m.sharder.Owns(shard.Key(i)) {
				return false
			}
		}
	}
	return true
}

// shardOf is the number of a shard's Lease.
func shardOf(l *coordinationv1.Lease) int {
	i, err := strconv.Atoi(l.Labels[shard.LabelShard])
	if err != nil {
		return -1
	}
	return i
}
