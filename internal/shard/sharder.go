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
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/once-dev/once/internal/lease"
)

// Labels on the Leases, so that they can be told from others in the
// namespace (the leader election's).
const (
	// LabelMember marks a manager's membership Lease, with the value
	// "true".
	LabelMember = "once.dev/shard-member"
	// memberValue is LabelMember's value.
	memberValue = "true"
	// LabelShard marks a shard's Lease; its value is the shard's number.
	LabelShard = "once.dev/shard"
)

// deadMembers is how many lease durations a member's Lease stays after it
// expired before a manager deletes it: a manager that crashed never
// deletes its own.
const deadMembers = 10

// The shards' Leases are listed past the cache, created, renewed with
// conditional updates and deleted, in one namespace only: the rights are a
// Role there (config/rbac/namespace/role.yaml), not a marker, so that the
// manager cannot touch other Leases of the cluster.

// Options configure a Sharder.
type Options struct {
	// Client writes the Leases.
	Client client.Client
	// Reader reads the Leases, past any cache.
	Reader client.Reader
	// Namespace holds the Leases.
	Namespace string
	// Holder identifies this manager process, uniquely, also across
	// restarts.
	Holder string
	// Shards is the number of shards. Every manager must use the same:
	// managers that disagree split the objects differently and contend
	// for them again (safely).
	Shards int
	// LeaseDuration is how long a Lease lasts without renewal, at least a
	// second; a manager that dies holds its shards that long.
	LeaseDuration time.Duration
	// RenewPeriod is how often the Leases are renewed, shorter than
	// LeaseDuration; a handover takes about two periods.
	RenewPeriod time.Duration
	// Clock is the real clock if nil.
	Clock clock.WithTicker
}

// Sharder is a manager.Runnable that keeps this manager's membership
// Lease, holds the Leases of the shards assigned to it, and says which
// objects it should reconcile (Owns, Predicate). When it acquires a shard,
// the objects of that shard are enqueued again (Resync): their events were
// filtered out while another manager held it.
//
// A shard is reported as held only while this manager holds its Lease by
// its own clock: from a successful write of the Lease until the Lease's
// duration has passed since the write was sent. A manager that cannot
// renew therefore stops reconciling its shards by the time the others may
// take them over, with clocks that agree. If they do not agree, two
// managers work on a shard at once, which is safe (see the package's doc).
//
// The methods that read (Owns, OwnsObject, Held, Predicate) may be called
// on a nil *Sharder: it holds everything, which is how a manager runs
// without shards.
type Sharder struct {
	o       Options
	seconds int32
	log     logr.Logger

	mu sync.RWMutex
	// held[i] is when this manager's hold on shard i ends; zero if it is
	// not held.
	held []time.Time
	// resyncs are the sources to tell of acquired shards.
	resyncs []*resync

	// Used by Start's goroutine only, and mine[i] by the one goroutine that
	// writes shard i's Lease in a tick. They hold the Leases last written:
	// this manager's membership and the shards it holds. They also hold
	// when its membership ends by its own clock if it is not renewed.
	member      *coordinationv1.Lease
	mine        []*coordinationv1.Lease
	memberUntil time.Time
}

// New checks the options and returns a Sharder; add it to the manager.
func New(o Options) (*Sharder, error) {
	switch {
	case o.Client == nil || o.Reader == nil:
		return nil, errors.New("shards need a client and a reader")
	case o.Shards <= 0:
		return nil, fmt.Errorf("the number of shards must be positive, not %d", o.Shards)
	case o.Holder == "" || o.Namespace == "":
		return nil, errors.New("shards need a holder identity and a namespace")
	case o.LeaseDuration < time.Second:
		return nil, fmt.Errorf("the shard lease duration must be at least 1s, not %s", o.LeaseDuration)
	case o.RenewPeriod <= 0 || o.RenewPeriod >= o.LeaseDuration:
		return nil, fmt.Errorf("the shard renew period (%s) must be positive and shorter than the lease duration (%s)",
			o.RenewPeriod, o.LeaseDuration)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Sharder{
		o:       o,
		seconds: int32(min(math.Ceil(o.LeaseDuration.Seconds()), math.MaxInt32)),
		log:     logf.Log.WithName("shard"),
		held:    make([]time.Time, o.Shards),
		mine:    make([]*coordinationv1.Lease, o.Shards),
	}, nil
}

// NeedLeaderElection is false: every manager holds shards.
func (s *Sharder) NeedLeaderElection() bool { return false }

// Start renews the Leases every RenewPeriod until ctx ends; then it
// releases the shards it holds and deletes its membership, so that the
// others take them over at once rather than after the Leases expire.
func (s *Sharder) Start(ctx context.Context) error {
	s.log.Info("Holding shards", "shards", s.o.Shards, "namespace", s.o.Namespace,
		"member", MemberLeaseName(s.o.Holder))
	lease.Keep(ctx, s.o.Clock, s.o.RenewPeriod, s.tick, s.leave)
	return nil
}

// Owns reports whether this manager holds the shard of k now.
func (s *Sharder) Owns(k Key) bool {
	if s == nil {
		return true
	}
	i := k.Shard(s.o.Shards)
	s.mu.RLock()
	until := s.held[i]
	s.mu.RUnlock()
	return s.o.Clock.Now().Before(until)
}

// OwnsObject reports whether this manager reconciles o now: it holds o's
// shard, or o's kind is not sharded.
func (s *Sharder) OwnsObject(o client.Object) bool {
	k, ok := ObjectKey(o)
	return !ok || s.Owns(k)
}

// Held lists the shards held now, in order; nil for a nil Sharder.
func (s *Sharder) Held() []int {
	if s == nil {
		return nil
	}
	now := s.o.Clock.Now()
	s.mu.RLock()
	defer s.mu.RUnlock()
	var held []int
	for i, until := range s.held {
		if now.Before(until) {
			held = append(held, i)
		}
	}
	return held
}

// Predicate passes the events of the objects this manager reconciles now.
func (s *Sharder) Predicate() predicate.Predicate {
	return predicate.NewPredicateFuncs(s.OwnsObject)
}

// MemberLeaseName is the name of a manager's membership Lease: derived
// from its holder identity, or from its digest when the identity does not
// make a valid name.
func MemberLeaseName(holder string) string {
	return lease.Name("once-member-", holder)
}

// ShardLeaseName is the name of shard i's Lease.
func ShardLeaseName(i int) string {
	return "once-shard-" + strconv.Itoa(i)
}

// tick renews this manager's membership, computes the assignment from the
// live members, and acquires, renews or releases each shard's Lease.
func (s *Sharder) tick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.o.RenewPeriod)
	defer cancel()
	now := s.o.Clock.Now()
	var list coordinationv1.LeaseList
	if err := s.o.Reader.List(ctx, &list, client.InNamespace(s.o.Namespace)); err != nil {
		s.log.Error(err, "Listing the shard Leases failed; the shards held lapse unless renewed", "namespace", s.o.Namespace)
		return
	}
	var members []string
	var own *coordinationv1.Lease
	shards := map[string]*coordinationv1.Lease{}
	for i := range list.Items {
		l := &list.Items[i]
		switch {
		case l.Labels[LabelMember] == memberValue && holderOf(l) == s.o.Holder:
			own = l
		case l.Labels[LabelMember] == memberValue && lease.Alive(l, now):
			members = append(members, holderOf(l))
		case l.Labels[LabelMember] == memberValue:
			s.collect(ctx, l, now)
		case l.Labels[LabelShard] != "":
			shards[l.Name] = l
		}
	}
	renewed, live := s.renewMember(ctx, own, now)
	if live {
		members = append(members, s.o.Holder)
	}
	// The shards' Leases are written in parallel: a tick must fit in a
	// renew period even when the API server is slow.
	owners := Assign(s.o.Shards, members)
	changed := make([]string, len(owners))
	var wg sync.WaitGroup
	for i, owner := range owners {
		l := shards[ShardLeaseName(i)]
		switch {
		case owner == s.o.Holder && !renewed && !s.holds(i, now):
			// A membership that may lapse takes no new shard: it would
			// give it up again, and its objects would be listed twice.
			s.drop(i)
		case owner == s.o.Holder:
			was := s.holds(i, now)
			wg.Go(func() {
				if s.acquire(ctx, i, l, now) && !was {
					changed[i] = "acquired"
				}
			})
		case l != nil && holderOf(l) == s.o.Holder:
			changed[i] = "released"
			wg.Go(func() { s.release(ctx, i, l) })
		default:
			s.drop(i)
		}
	}
	wg.Wait()
	var acquired, released []int
	for i, c := range changed {
		switch c {
		case "acquired":
			acquired = append(acquired, i)
		case "released":
			released = append(released, i)
		}
	}
	if len(acquired) > 0 || len(released) > 0 {
		s.log.Info("Shards changed hands", "acquired", acquired, "released", released,
			"held", s.Held(), "members", len(members))
	}
	if len(acquired) > 0 {
		s.mu.RLock()
		resyncs := slices.Clone(s.resyncs)
		s.mu.RUnlock()
		for _, r := range resyncs {
			r.acquired(acquired)
		}
	}
}

// renewMember creates or renews this manager's membership Lease (own, as
// listed, or nil), and reports whether it renewed it and whether this
// manager is a live member.
//
// A renewal that fails leaves the membership live until the Lease last
// written expires, by this manager's clock. The other managers count it
// as a member until then, and so does this one. Say a manager left the
// assignment at its first failed renewal, such as one write that timed out
// on a busy API server. It would release every shard it holds, which no
// other manager takes while the membership lasts. It would list all their
// objects again when it acquires them back a period later. That is more
// load on an API server already slow.
func (s *Sharder) renewMember(ctx context.Context, own *coordinationv1.Lease, now time.Time) (renewed, live bool) {
	member, err := lease.Own{Namespace: s.o.Namespace, Name: MemberLeaseName(s.o.Holder), Holder: s.o.Holder,
		Seconds: s.seconds, Labels: map[string]string{LabelMember: memberValue}}.Renew(ctx, s.o.Client, own, now)
	if err != nil {
		live := now.Before(s.memberUntil)
		s.log.Error(err, "Renewing the membership Lease failed", "lease", MemberLeaseName(s.o.Holder),
			"stillMember", live, "until", s.memberUntil)
		return false, live
	}
	s.member, s.memberUntil = member, now.Add(s.o.LeaseDuration)
	return true, true
}

// acquire creates, renews or takes over shard i's Lease l (nil if there
// is none) and reports whether this manager holds the shard now. A Lease
// another live manager holds is left alone: that manager releases it once
// it sees the new assignment.
func (s *Sharder) acquire(ctx context.Context, i int, l *coordinationv1.Lease, now time.Time) bool {
	t := metav1.NewMicroTime(now)
	var err error
	switch {
	case l == nil:
		l = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: s.o.Namespace, Name: ShardLeaseName(i),
				Labels: map[string]string{LabelShard: strconv.Itoa(i)}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &s.o.Holder, LeaseDurationSeconds: &s.seconds,
				AcquireTime: &t, RenewTime: &t},
		}
		err = s.o.Client.Create(ctx, l)
	case holderOf(l) == s.o.Holder:
		l = l.DeepCopy()
		l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &t, &s.seconds
		err = s.o.Client.Update(ctx, l)
	case holderOf(l) == "" || !lease.Alive(l, now):
		// Released or expired: take it over, conditionally on the
		// version read, so that of two managers that try, one wins.
		l = l.DeepCopy()
		transitions := ptr.Deref(l.Spec.LeaseTransitions, 0) + 1
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &s.o.Holder, &s.seconds
		l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseTransitions = &t, &t, &transitions
		err = s.o.Client.Update(ctx, l)
	default:
		s.drop(i)
		return false
	}
	switch {
	case err == nil:
		s.mu.Lock()
		s.held[i] = now.Add(s.o.LeaseDuration)
		s.mu.Unlock()
		s.mine[i] = l
		return true
	case apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err):
		// Another manager wrote the Lease first; it may hold it now.
		s.drop(i)
		return false
	default:
		// The hold lapses by itself if no renewal succeeds.
		s.log.Error(err, "Renewing a shard Lease failed", "shard", i)
		return s.holds(i, now)
	}
}

// release gives shard i up, no longer reporting it as held before the
// Lease says so, so that its new owner takes it at once. A failed release
// is not retried: the Lease expires.
func (s *Sharder) release(ctx context.Context, i int, l *coordinationv1.Lease) {
	s.drop(i)
	l = l.DeepCopy()
	l.Spec.HolderIdentity = nil
	if err := s.o.Client.Update(ctx, l); err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
		s.log.Error(err, "Releasing a shard Lease failed; it will expire", "shard", i)
	}
}

// leave releases every shard held and deletes the membership Lease, when
// the manager stops.
func (s *Sharder) leave(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.o.RenewPeriod)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range s.mine {
		if l != nil && s.holds(i, s.o.Clock.Now()) {
			wg.Go(func() { s.release(ctx, i, l) })
		} else {
			s.drop(i)
		}
	}
	wg.Wait()
	if s.member != nil {
		if err := s.o.Client.Delete(ctx, s.member, client.Preconditions{UID: &s.member.UID}); client.IgnoreNotFound(err) != nil {
			s.log.Error(err, "Deleting the membership Lease failed; it will expire", "lease", s.member.Name)
		}
	}
	s.log.Info("Released all shards")
}

// collect deletes the membership Lease of a manager that has been gone for
// a while, conditionally on the version read.
func (s *Sharder) collect(ctx context.Context, l *coordinationv1.Lease, now time.Time) {
	if l.Spec.RenewTime != nil && now.Sub(l.Spec.RenewTime.Time) < deadMembers*s.o.LeaseDuration {
		return
	}
	if err := lease.DeleteDeparted(ctx, s.o.Client, l); err != nil {
		s.log.V(1).Info("Deleting a departed member's Lease failed", "lease", l.Name, "error", err.Error())
	}
}

// holds reports whether this manager holds shard i at now.
func (s *Sharder) holds(i int, now time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return now.Before(s.held[i])
}

// drop stops reporting shard i as held.
func (s *Sharder) drop(i int) {
	s.mu.Lock()
	s.held[i] = time.Time{}
	s.mu.Unlock()
	s.mine[i] = nil
}

// holderOf is a Lease's holder identity, empty if released.
func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
