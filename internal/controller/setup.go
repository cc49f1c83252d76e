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

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/outbox/sender"
	"github.com/once-dev/once/internal/shard"
)

// Config is what a manager decides for Once's controllers: cmd/main.go
// from its flags, the test suites from their needs. One Setup serves both,
// so the tests run the controllers the way the manager does.
type Config struct {
	// Holder identifies this manager process in claims; it must differ
	// between processes, also across restarts.
	Holder string
	// ClusterResourceNamespace holds the Secrets ClusterTools refer to.
	ClusterResourceNamespace string
	// MaxConcurrentReconciles bounds the operations handled at once.
	MaxConcurrentReconciles int
	// MaxClaim bounds a claim before renewal; ClaimGrace is added to every
	// claim, for writing the outcome after the call's timeout.
	MaxClaim, ClaimGrace time.Duration
	// Egress is where tools may be called; nil refuses loopback,
	// link-local, metadata and unspecified addresses, and allows the rest.
	Egress *httpeffects.Egress
	// Transport carries effect calls; httpeffects.NewTransport(Egress) if
	// nil.
	Transport nethttp.RoundTripper
	// Clock is the real clock if nil.
	Clock clock.WithTickerAndDelayedExecution
	// OutboxBudget bounds the deliveries of one outcome announcement;
	// outbox.DefaultBudget if zero. OutboxTimeout bounds one delivery;
	// DefaultOutboxTimeout if zero.
	OutboxBudget  outbox.Budget
	OutboxTimeout time.Duration

	// WatchNamespaces are the only namespaces the manager watches (its
	// cache must be restricted to them too: WatchOnly); empty: all. A
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
// is recorded. The Deployment's terminationGracePeriodSeconds must be at
// least this.
func (c Config) GracefulShutdownTimeout() time.Duration {
	return c.MaxClaim + c.ClaimGrace + shutdownSlack
}

// Setup registers Once's controllers, their indexes and their watches with
// mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, c Config) error {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Transport == nil {
		c.Transport = httpeffects.NewTransport(c.Egress)
	}
	shards, err := c.sharder(mgr)
	if err != nil {
		return err
	}
	compiler, err := httpeffects.NewCompiler()
	if err != nil {
		return err
	}
	// Secrets are read past the cache: the manager neither watches nor
	// caches them.
	connector := &httpeffects.Connector{
		Secrets:                  mgr.GetAPIReader(),
		ClusterResourceNamespace: c.ClusterResourceNamespace,
		Compiler:                 compiler,
		Transport:                c.Transport,
		Egress:                   c.Egress,
	}
	if err := (&SideEffectOperationReconciler{
		Client:                  mgr.GetClient(),
		APIReader:               mgr.GetAPIReader(),
		Recorder:                mgr.GetEventRecorder("once"),
		Connector:               connector,
		Validator:               connector,
		Budgets:                 NewRetryBudgets(),
		Clock:                   c.Clock,
		Holder:                  c.Holder,
		MaxClaim:                c.MaxClaim,
		ClaimGrace:              c.ClaimGrace,
		MaxConcurrentReconciles: c.MaxConcurrentReconciles,
		WatchNamespaces:         c.WatchNamespaces,
		Shards:                  shards,
	}).SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the sideeffectoperation controller: %w", err)
	}
	if err := (&SagaReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("once"),
		Connector: connector, Validator: connector, Clock: c.Clock,
		MaxConcurrentReconciles: c.MaxConcurrentReconciles, WatchNamespaces: c.WatchNamespaces, Shards: shards,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the saga controller: %w", err)
	}
	if err := (&IdempotencyRecordReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Clock: c.Clock, Shards: shards,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the idempotencyrecord controller: %w", err)
	}
	if err := c.setupOutbox(mgr, shards); err != nil {
		return err
	}
	if err := SetupToolReconcilers(mgr, ToolReconciler{
		Client: mgr.GetClient(), Validator: connector, Headers: connector, Clock: c.Clock,
	}, len(c.WatchNamespaces) == 0); err != nil {
		return fmt.Errorf("setting up the tool controllers: %w", err)
	}
	return nil
}

// setupOutbox registers the relays, which deliver outcome announcements
// through the effect transport: subscribers are dialled under the same
// egress policy as tools.
func (c Config) setupOutbox(mgr ctrl.Manager, shards *shard.Sharder) error {
	snd, err := sender.New(c.Transport, c.Egress)
	if err != nil {
		return err
	}
	budget := c.OutboxBudget
	if budget.MaxAttempts <= 0 {
		budget = outbox.DefaultBudget
	}
	for _, r := range NewOutboxReconcilers(OutboxReconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("once"),
		Sender: snd, Clock: c.Clock,
		Budget: budget, Timeout: cmp.Or(c.OutboxTimeout, DefaultOutboxTimeout), Shards: shards,
		MaxConcurrentReconciles: c.MaxConcurrentReconciles,
	}) {
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("setting up the outbox relay of %ss: %w", r.kind.name, err)
		}
	}
	return nil
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
