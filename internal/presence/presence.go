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

// Package presence publishes which managers run and which version each
// runs. Every manager process keeps a Lease (coordination.k8s.io/v1) of its
// own in its namespace, labelled LabelManager. The Lease holds its holder
// identity and its version (AnnotationVersion). It is renewed every
// RenewPeriod and deleted when the manager stops. `kubectl once version` lists them (List) and shows those
// renewed within their duration, so that it finds the managers of a local
// process (make demo), of a Deployment, of several replicas and of shards
// alike.
//
// The Leases are written in the manager's namespace only, with the rights
// its Role there already grants for leader election and shards
// (config/rbac/namespace/role.yaml): create, update, get, list and delete.
// Nothing depends on them but what the plugin prints.
package presence

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/once-dev/once/internal/lease"
)

const (
	// LabelManager marks a manager's presence Lease, with the value
	// "true".
	LabelManager = "once.dev/manager"
	// labelValue is LabelManager's value.
	labelValue = "true"
	// AnnotationVersion holds the version of the manager that renews the
	// Lease, as its binary was stamped (make build).
	AnnotationVersion = "once.dev/version"

	// DefaultRenewPeriod and DefaultLeaseDuration are how often a manager
	// renews its Lease, and how long it counts as running without a
	// renewal: a write every half minute per manager.
	DefaultRenewPeriod   = 30 * time.Second
	DefaultLeaseDuration = 90 * time.Second

	// deadDurations is how many lease durations a Lease stays after it
	// expired before a manager deletes it: a manager that crashed never
	// deletes its own.
	deadDurations = 10
)

// Options configure a Publisher.
type Options struct {
	// Client writes the Lease.
	Client client.Client
	// Reader lists the Leases, past any cache.
	Reader client.Reader
	// Namespace holds the Lease: the manager's own.
	Namespace string
	// Holder identifies the manager process, as in its claims.
	Holder string
	// Version is the manager's version.
	Version string
	// RenewPeriod and LeaseDuration are DefaultRenewPeriod and
	// DefaultLeaseDuration if zero.
	RenewPeriod, LeaseDuration time.Duration
	// Clock is the real clock if nil.
	Clock clock.WithTicker
}

// Publisher is a manager.Runnable that keeps the manager's presence Lease:
// it creates it when the manager starts, renews it every RenewPeriod,
// deletes it when the manager stops, and deletes the Leases of managers
// long gone.
type Publisher struct {
	o       Options
	seconds int32
	log     logr.Logger
	// own is the Lease as last written (nil before the first write); a
	// write that failed leaves it as it was, so that a stop still deletes it.
	own *coordinationv1.Lease
	// failing is whether the last renewal failed, so that a failure is
	// logged once, not at every period.
	failing bool
}

// New checks the options and returns a Publisher; add it to the manager.
func New(o Options) (*Publisher, error) {
	o.RenewPeriod = cmp.Or(o.RenewPeriod, DefaultRenewPeriod)
	o.LeaseDuration = cmp.Or(o.LeaseDuration, DefaultLeaseDuration)
	switch {
	case o.Client == nil || o.Reader == nil:
		return nil, errors.New("the presence Lease needs a client and a reader")
	case o.Holder == "" || o.Namespace == "":
		return nil, errors.New("the presence Lease needs a holder identity and a namespace")
	case o.LeaseDuration < time.Second || o.RenewPeriod >= o.LeaseDuration:
		return nil, fmt.Errorf("the presence Lease's renew period (%s) must be shorter than its duration (%s), "+
			"which must be at least 1s", o.RenewPeriod, o.LeaseDuration)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Publisher{
		o:       o,
		seconds: int32(min(math.Ceil(o.LeaseDuration.Seconds()), math.MaxInt32)),
		log:     logf.Log.WithName("presence"),
	}, nil
}

// NeedLeaderElection is false: every manager, elected or standing by,
// publishes its version.
func (p *Publisher) NeedLeaderElection() bool { return false }

// Start renews the Lease every RenewPeriod until ctx ends, then deletes
// it.
func (p *Publisher) Start(ctx context.Context) error {
	p.log.Info("Publishing the manager's version", "namespace", p.o.Namespace, "lease", LeaseName(p.o.Holder),
		"version", p.o.Version)
	lease.Keep(ctx, p.o.Clock, p.o.RenewPeriod, p.tick, p.leave)
	return nil
}

// LeaseName is the name of a manager's presence Lease: derived from its
// holder identity, or from its digest when the identity does not make a
// valid name.
func LeaseName(holder string) string {
	return lease.Name("once-manager-", holder)
}

// tick lists the presence Leases of the namespace, renews this manager's
// (or creates it) and deletes those of managers long gone.
func (p *Publisher) tick(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, p.o.RenewPeriod)
	defer cancel()
	now := p.o.Clock.Now()
	var list coordinationv1.LeaseList
	if err := p.o.Reader.List(ctx, &list, client.InNamespace(p.o.Namespace),
		client.MatchingLabels{LabelManager: labelValue}); err != nil {
		p.failed(err, "Listing the managers' presence Leases failed")
		return
	}
	name := LeaseName(p.o.Holder)
	var own *coordinationv1.Lease
	for i := range list.Items {
		l := &list.Items[i]
		switch {
		case l.Name == name:
			own = l
		case expiredLong(l, now, p.o.LeaseDuration):
			p.collect(ctx, l)
		}
	}
	if err := p.renew(ctx, own, now); err != nil {
		p.failed(err, "Renewing the manager's presence Lease failed")
		return
	}
	if p.failing {
		p.log.Info("Renewed the manager's presence Lease again", "lease", name)
	}
	p.failing = false
}

// failed logs err, once for a run of failures.
func (p *Publisher) failed(err error, msg string) {
	if !p.failing {
		p.log.Error(err, msg+"; kubectl once version may not find this manager", "namespace", p.o.Namespace)
	}
	p.failing = true
}

// renew creates the Lease (own, as listed, is nil) or renews it,
// conditionally on the version listed.
func (p *Publisher) renew(ctx context.Context, own *coordinationv1.Lease, now time.Time) error {
	written, err := lease.Own{Namespace: p.o.Namespace, Name: LeaseName(p.o.Holder), Holder: p.o.Holder,
		Seconds: p.seconds, Labels: map[string]string{LabelManager: labelValue},
		Annotations: map[string]string{AnnotationVersion: p.o.Version}}.Renew(ctx, p.o.Client, own, now)
	if err != nil {
		return err
	}
	p.own = written
	return nil
}

// leave deletes the Lease when the manager stops, so that the plugin stops
// listing it at once.
func (p *Publisher) leave(ctx context.Context) {
	if p.own == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.RenewPeriod)
	defer cancel()
	if err := p.o.Client.Delete(ctx, p.own, client.Preconditions{UID: &p.own.UID}); client.IgnoreNotFound(err) != nil {
		p.log.Error(err, "Deleting the manager's presence Lease failed; it expires", "lease", p.own.Name)
	}
}

// collect deletes the Lease of a manager long gone, conditionally on the
// version listed: a manager that came back renews it first.
func (p *Publisher) collect(ctx context.Context, l *coordinationv1.Lease) {
	if err := lease.DeleteDeparted(ctx, p.o.Client, l); err != nil {
		p.log.V(1).Info("Deleting a departed manager's presence Lease failed", "lease", l.Name, "error", err.Error())
	}
}

// Manager is a running manager, as its presence Lease tells.
type Manager struct {
	// Namespace and Lease name the Lease.
	Namespace string `json:"namespace"`
	Lease     string `json:"lease"`
	// Holder is the manager's identity in claims.
	Holder string `json:"holder"`
	// Version is the manager's version.
	Version string `json:"version"`
	// RenewTime is when the manager last renewed the Lease.
	RenewTime time.Time `json:"renewTime"`
}

// List lists the managers whose presence Lease in namespace (all
// namespaces if empty) was renewed within its duration at now, by
// namespace and holder.
func List(ctx context.Context, r client.Reader, namespace string, now time.Time) ([]Manager, error) {
	var list coordinationv1.LeaseList
	opts := []client.ListOption{client.MatchingLabels{LabelManager: labelValue}}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	return Running(list.Items, now), nil
}

// Running are the managers of the Leases that were renewed within their
// duration at now, by namespace and holder.
func Running(leases []coordinationv1.Lease, now time.Time) []Manager {
	managers := []Manager{}
	for i := range leases {
		l := &leases[i]
		if l.Labels[LabelManager] != labelValue || !lease.Alive(l, now) {
			continue
		}
		managers = append(managers, Manager{Namespace: l.Namespace, Lease: l.Name, Holder: *l.Spec.HolderIdentity,
			Version: l.Annotations[AnnotationVersion], RenewTime: l.Spec.RenewTime.UTC()})
	}
	slices.SortFunc(managers, func(a, b Manager) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Holder, b.Holder))
	})
	return managers
}

// expiredLong reports whether l expired deadDurations durations ago (of
// its own duration, or of d if it has none) or has never been renewed.
func expiredLong(l *coordinationv1.Lease, now time.Time, d time.Duration) bool {
	if l.Spec.RenewTime == nil {
		return true
	}
	if s := l.Spec.LeaseDurationSeconds; s != nil {
		d = time.Duration(*s) * time.Second
	}
	return now.Sub(l.Spec.RenewTime.Time) >= deadDurations*d
}
