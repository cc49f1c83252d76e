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
	"cmp"
	"context"
	"fmt"
	nethttp "net/http"
	"time"

	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/shard"
)

// Config is what a manager decides for Once's controllers: cmd/main.go
// from its flags, the test suites and the simulator from their needs. One
// Build serves them all, so the tests run the controllers the way the
// manager does.
type Config struct {
	// Holder identifies this manager process in claims; it must differ
	// between processes, also across restarts.
	Holder string
	// ClusterResourceNamespace holds the Secrets ClusterTools refer to.
	ClusterResourceNamespace string
	// MaxConcurrentReconciles bounds the operations handled at once.
	MaxConcurrentReconciles int
	// MaxWorkersPerTool bounds the operations inside one tool's calls at
	// once (a bulkhead); DefaultWorkersPerTool of MaxConcurrentReconciles
	// if zero.
	MaxWorkersPerTool int
	// MaxWorkersPerNamespace bounds the operations of one namespace inside
	// calls at once (its share of the workers); its sagas' dry runs get a
	// share as large of the saga workers. DefaultWorkersPerNamespace of
	// MaxConcurrentReconciles if zero.
	MaxWorkersPerNamespace int
	// MaxClaim bounds a claim before renewal; ClaimGrace is added to every
	// claim, for writing the outcome after the call's timeout.
	MaxClaim, ClaimGrace time.Duration
	// MaxErrorBackoff caps the wait before every controller retries a
	// reconcile that returned an error; DefaultMaxErrorBackoff if zero.
	MaxErrorBackoff time.Duration
	// Egress is where tools may be called; nil refuses loopback,
	// link-local, metadata and unspecified addresses, and allows the rest.
	Egress *httpeffects.Egress
	// Transport carries effect calls and deliveries, for Setup;
	// httpeffects.NewTransport(Egress) if nil.
	Transport nethttp.RoundTripper
	// Clock is Setup's clock; the real clock if nil.
	Clock clock.WithTickerAndDelayedExecution
	// OutboxBudget bounds the deliveries of one outcome announcement;
	// outbox.DefaultBudget if zero. OutboxTimeout bounds one delivery;
	// DefaultOutboxTimeout if zero.
	OutboxBudget  outbox.Budget
	OutboxTimeout time.Duration

	// WatchNamespaces are the only namespaces the manager watches. Empty
	// means all. Its cache must be restricted to them too (WatchOnly). A
	// manager restricted to some serves no ClusterTools and reads no
	// Namespaces, so that it needs no cluster-wide rights.
	WatchNamespaces []string

	// Shards splits the operations, sagas and scope records among the
	// managers that run with the same number, through Leases; 0 turns
	// sharding off and every manager handles every object. Sharding is for
	// throughput only: see package shard.
	Shards int
	// ShardNamespace holds the shards' Leases; ClusterResourceNamespace if
	// empty.
	ShardNamespace string
	// ShardLeaseDuration is how long a shard stays with a manager that
	// stopped renewing; ShardRenewPeriod how often a manager renews.
	ShardLeaseDuration, ShardRenewPeriod time.Duration
}

// shutdownSlack is time, beyond the longest claim, for the last writes.
const shutdownSlack = 15 * time.Second

// GracefulShutdownTimeout is how long a stopping manager waits for passes
// in flight: a call runs to the end of its claim at most, then its answer
// is written. The Deployment's terminationGracePeriodSeconds must be at
// least this.
func (c Config) GracefulShutdownTimeout() time.Duration {
	return c.MaxClaim + c.ClaimGrace + shutdownSlack
}

// Deps are what the reconcilers take from outside. Setup takes them from a
// manager, for cmd/main.go and the envtest suites; the simulator makes its
// own. The reconcilers reach past them for no global.
type Deps struct {
	// Client reads from a cache and writes to the API server.
	Client client.Client
	// APIReader reads past the cache: where a stale view would be wrong,
	// and for Secrets, which the manager neither watches nor caches.
	APIReader client.Reader
	// Recorder emits the events of operations and sagas.
	Recorder events.EventRecorder
	// Clock is what the reconcilers read the time from; a claim's expiry,
	// its timer and its fence are read on it.
	Clock clock.WithTickerAndDelayedExecution
	// Transport carries the calls to tools and the deliveries to
	// subscribers.
	Transport nethttp.RoundTripper
	// Jitter draws a uniform duration in [0, d] for the backoffs of calls
	// and deliveries (full jitter) and of reconciles that returned an
	// error; math/rand if nil.
	Jitter func(d time.Duration) time.Duration
	// Shards says which objects this manager handles. Nil means all.
	Shards *shard.Sharder
}

// Reconcilers are Once's reconcilers, built by Config.Build.
type Reconcilers struct {
	Operation *SideEffectOperationReconciler
	Saga      *SagaReconciler
	Record    *IdempotencyRecordReconciler
	// Outbox are the relays of outcome announcements, one per kind of
	// object that announces.
	Outbox []*OutboxReconciler
	// Tools validate Tools and, for a manager that watches every
	// namespace, ClusterTools.
	Tools []*ToolReconciler
}

// Build makes Once's reconcilers from c and d: the one place they are
// wired, for cmd/main.go (through Setup), the test suites and the
// simulator.
func (c Config) Build(d Deps) (*Reconcilers, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	compiler, err := httpeffects.NewCompiler()
	if err != nil {
		return nil, err
	}
	// Secrets are read past the cache: the manager neither watches nor
	// caches them.
	connector := &httpeffects.Connector{
		Secrets:                  d.APIReader,
		ClusterResourceNamespace: c.ClusterResourceNamespace,
		Compiler:                 compiler,
		Transport:                d.Transport,
		Egress:                   c.Egress,
	}
	budget := c.OutboxBudget
	if budget.MaxAttempts <= 0 {
		budget = outbox.DefaultBudget
	}
	errorBackoff := ErrorBackoff{Max: c.MaxErrorBackoff, Jitter: d.Jitter}
	bulkhead := &Bulkhead{Max: cmp.Or(c.MaxWorkersPerTool, DefaultWorkersPerTool(c.MaxConcurrentReconciles))}
	// The operations and the sagas have workers of their own: a share of
	// each.
	share := cmp.Or(c.MaxWorkersPerNamespace, DefaultWorkersPerNamespace(c.MaxConcurrentReconciles))
	return &Reconcilers{
		Operation: &SideEffectOperationReconciler{
			Client:                  d.Client,
			APIReader:               d.APIReader,
			Recorder:                d.Recorder,
			Connector:               connector,
			Validator:               connector,
			Budgets:                 NewRetryBudgets(),
			Bulkhead:                bulkhead,
			NamespaceShare:          &Bulkhead{Max: share},
			Clock:                   d.Clock,
			Jitter:                  d.Jitter,
			Holder:                  c.Holder,
			MaxClaim:                c.MaxClaim,
			ClaimGrace:              c.ClaimGrace,
			MaxConcurrentReconciles: c.MaxConcurrentReconciles,
			WatchNamespaces:         c.WatchNamespaces,
			Shards:                  d.Shards,
			ErrorBackoff:            errorBackoff,
			// Within the manager's graceful shutdown, after the longest
			// pass in flight.
			StopGrace: c.MaxClaim + c.ClaimGrace + shutdownSlack/2,
		},
		Saga: &SagaReconciler{
			Client: d.Client, APIReader: d.APIReader, Recorder: d.Recorder,
			Connector: connector, Bulkhead: bulkhead, NamespaceShare: &Bulkhead{Max: share},
			Validator: connector, Clock: d.Clock,
			MaxConcurrentReconciles: c.MaxConcurrentReconciles, WatchNamespaces: c.WatchNamespaces, Shards: d.Shards,
			ErrorBackoff: errorBackoff, plans: lru.New(plansSize), undecided: lru.New(plansSize),
		},
		Record: &IdempotencyRecordReconciler{
			Client: d.Client, APIReader: d.APIReader, Clock: d.Clock, Shards: d.Shards, ErrorBackoff: errorBackoff,
			MaxConcurrentReconciles: c.MaxConcurrentReconciles,
		},
		Outbox: NewOutboxReconcilers(OutboxReconciler{
			Client: d.Client, APIReader: d.APIReader, Recorder: d.Recorder,
			// A subscriber's sink is a tool: its requests go through the
			// connector, under the tools' egress policy and credentials.
			Connector: connector, Validator: connector, Clock: d.Clock, Jitter: d.Jitter,
			WatchNamespaces: c.WatchNamespaces,
			Budget:          budget, Timeout: cmp.Or(c.OutboxTimeout, DefaultOutboxTimeout), Shards: d.Shards,
			MaxConcurrentReconciles: c.MaxConcurrentReconciles, ErrorBackoff: errorBackoff,
		}),
		Tools: newToolReconcilers(ToolReconciler{
			Client: d.Client, Validator: connector, Headers: connector, Clock: d.Clock, ErrorBackoff: errorBackoff,
			MaxConcurrentReconciles: c.MaxConcurrentReconciles,
		}, len(c.WatchNamespaces) == 0),
	}, nil
}

// check refuses Deps with a dependency missing; Jitter and Shards may be.
func (d Deps) check() error {
	var missing string
	switch {
	case d.Client == nil:
		missing = "Client"
	case d.APIReader == nil:
		missing = "APIReader"
	case d.Recorder == nil:
		missing = "Recorder"
	case d.Clock == nil:
		missing = "Clock"
	case d.Transport == nil:
		missing = "Transport"
	default:
		return nil
	}
	return fmt.Errorf("building the reconcilers: Deps.%s is nil", missing)
}

// SetupWithManager registers the reconcilers, their indexes and their
// watches with mgr.
func (rs *Reconcilers) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if err := rs.Operation.SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the sideeffectoperation controller: %w", err)
	}
	if err := rs.Saga.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the saga controller: %w", err)
	}
	if err := rs.Record.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the idempotencyrecord controller: %w", err)
	}
	for _, r := range rs.Outbox {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the outbox relay of %ss: %w", r.kind.name, err)
		}
	}
	for _, r := range rs.Tools {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the %s controller: %w", r.name, err)
		}
	}
	return nil
}

// Setup registers Once's controllers, their indexes and their watches with
// mgr: their dependencies are the manager's, the clock c.Clock or the
// real one, the transport c.Transport or one under c.Egress.
func Setup(ctx context.Context, mgr ctrl.Manager, c Config) error {
	d, err := c.depsOf(mgr)
	if err != nil {
		return err
	}
	rs, err := c.Build(d)
	if err != nil {
		return err
	}
	return rs.SetupWithManager(ctx, mgr)
}

// depsOf takes the reconcilers' dependencies from mgr, adding the Sharder
// to it when sharding is on.
func (c Config) depsOf(mgr ctrl.Manager) (Deps, error) {
	shards, err := c.sharder(mgr)
	if err != nil {
		return Deps{}, err
	}
	d := Deps{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorder("once"),
		Clock:     c.Clock,
		Transport: c.Transport,
		Shards:    shards,
	}
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.Transport == nil {
		d.Transport = httpeffects.NewTransport(c.Egress)
	}
	return d, nil
}

// sharder adds the Sharder to mgr when sharding is on; nil otherwise,
// which reconciles every object. Leases are read past the cache: the
// manager neither watches nor caches them.
func (c Config) sharder(mgr ctrl.Manager) (*shard.Sharder, error) {
	if c.Shards <= 0 {
		return nil, nil
	}
	s, err := shard.New(shard.Options{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespace: cmp.Or(c.ShardNamespace, c.ClusterResourceNamespace), Holder: c.Holder, Shards: c.Shards,
		LeaseDuration: c.ShardLeaseDuration, RenewPeriod: c.ShardRenewPeriod,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(s); err != nil {
		return nil, fmt.Errorf("adding the shards: %w", err)
	}
	return s, nil
}
