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

// Package chaos is Once's chaos run. It runs thousands of side-effecting
// operations against the sandbox tool, in all three idempotency modes:
//   - duplicate deliveries, same-key-different-payload conflicts and GitOps
//     re-applies;
//   - sagas of several steps whose data flows from step to step; a step
//     refused for good makes some of them compensate.
//
// Meanwhile it breaks things:
//   - the tool injects the failures of docs/design.md, The fault matrix, and
//     the lies of real gateways, proxies and tools, into compensations too;
//   - compensations fail a few times, or for good until a person decides
//     (F9 of docs/design.md);
//   - the manager is killed at random moments and inside the protocol's
//     crash windows, or stopped gracefully as a rolling update stops it.
//
// When every operation and saga has settled, Run counts the effects at the
// tool's ledger, never from the operator's own status. It computes the
// figures that docs/design.md lists under Figures to report. It checks the
// falsifiers of the invariants (docs/design.md, Invariants) that can be
// observed from outside:
//   - two effects for one key, a create's or a cancel's (I1);
//   - an effect nobody claimed (I2);
//   - a conflicting request that executed (I4);
//   - a duplicate that reports another answer (I5);
//   - a saga that reports an effect undone while it stands (I8);
//   - compensations out of reverse order;
//   - a record that does not match the tool.
//
// Run starts everything it needs as processes of their own, through
// test/harness: a local control plane, the sandbox tool and the manager
// built with failpoints (bin/manager-failpoints, from make build). It never
// exits the process, and it stops what it started before it returns, also
// when its context is cancelled. The command is test/chaos/cmd/chaos.
package chaos

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/once-dev/once/test/harness"
)

// Config shapes a chaos run. The zero value of a field means its default;
// a negative share means none (for example FailpointShare -1: every kill
// is a SIGKILL).
type Config struct {
	// Operations is the number of logical operations (default 2000).
	// Duplicates and conflicts add objects, not operations.
	Operations int
	// Seed drives every random choice of the run: the workload, the
	// sandbox's fault draws and the kill schedule (default 1). Process
	// timing still varies between runs with the same seed.
	Seed int64
	// FaultRate is the share of effect requests the sandbox fails, spread
	// over the failure kinds of docs/design.md, The fault matrix (default 0.3). Lookups fail
	// at the same rate.
	FaultRate float64
	// LieShare is the share of those failures drawn from the ways real
	// gateways, proxies and tools lie (a gateway's 5xx after the commit, a
	// conditional create's 409, a re-send answered 4xx, a lagging lookup
	// index, an ingress's 404 for a lookup), each kept within the tool's
	// declared contract (default 0.3; see faultRules).
	LieShare float64
	// NoFaults turns the sandbox's faults off, as a negative FaultRate
	// does.
	NoFaults bool
	// KillInterval is the mean time between two kills of the manager
	// (default 5s); each kill comes after a uniform draw in [0.5, 1.5] of
	// it. Negative means the manager is never killed.
	KillInterval time.Duration
	// FailpointShare is the share of kills that arm a failpoint with
	// return("kill") instead of sending SIGKILL, so that the crash lands in
	// a protocol window (default 0.4).
	FailpointShare float64
	// StallShare is the share of kills replaced by a stall: the manager's
	// next claimed attempts wait between the claim and the call for longer
	// than the claim and the Lookup tool's lookupDelay, while a successor
	// runs next to it; then it is killed. It is docs/design.md's fault matrix's "worker
	// double execution" (a GC pause, a frozen node). Default 0.15.
	StallShare float64
	// TermShare is the share of kills replaced by a graceful stop: SIGTERM,
	// as a rolling update sends, then a wait for the manager to drain its
	// calls and exit on its own (default 0.15). A manager that has not
	// exited after termGrace is killed and counted.
	TermShare float64
	// Rate is how many logical operations are created per second, in waves
	// of that size (default 20).
	Rate float64
	// Creators is the number of concurrent creators (default 4).
	Creators int
	// Tail is how long the chaos goes on after the last operation was
	// created (default 10s; negative for none).
	Tail time.Duration
	// SettleTimeout bounds the wait, after the chaos, for every operation
	// to end or need a person (default 10m).
	SettleTimeout time.Duration
	// DuplicateShare, ConflictShare and ReapplyShare are the chances that
	// a logical operation gets a duplicate delivery (another object, same
	// key and parameters), a conflicting request (another object, same
	// key, other parameters) or a GitOps re-apply (an update with the same
	// spec). Defaults 0.15, 0.1 and 0.2.
	DuplicateShare, ConflictShare, ReapplyShare float64
	// NativeShare and LookupShare split the operations over the tools; the
	// rest goes to the None tool. Defaults 0.4 and 0.4.
	NativeShare, LookupShare float64
	// MaxConcurrentReconciles is the manager's flag (default 20).
	MaxConcurrentReconciles int

	// Sagas is the number of sagas created besides the operations, spread
	// over the same waves (default Operations/8; negative for none). Each
	// has 2 to 4 steps on the run's tools, data flowing from an earlier
	// step's externalObjectID, and compensations through the tools' cancel
	// endpoints.
	Sagas int
	// SagaFailShare is the share of sagas that carry a business rejection
	// (the sandbox's "reject" field, 422) at a drawn step, so that the
	// steps before it are compensated (default 0.4).
	SagaFailShare float64
	// IrreversibleShare is the share of sagas whose last step is
	// irreversible, without a compensation (default 0.3).
	IrreversibleShare float64
	// CompensationFaultShare is the share of the compensations of failing
	// sagas that a rule of their own fails a few times (429, or 503 where
	// the tool dedupes) before they may succeed: F9 of docs/design.md's fault matrix,
	// "compensation fails midway" (default 0.3).
	CompensationFaultShare float64
	// CompensationRefusalShare is the share of those compensations that a
	// rule of their own refuses for good (422); a person then retries,
	// marks the step compensated, or leaves the saga for review, a third
	// of the time each (default 0.1).
	CompensationRefusalShare float64
	// SagaDuplicateShare and SagaReapplyShare are the chances that a saga
	// gets a duplicate (another Saga, same idempotency key and spec) or a
	// GitOps re-apply (an update with the same spec). Defaults 0.05 and
	// 0.2.
	SagaDuplicateShare, SagaReapplyShare float64

	// MCPCalls is the number of logical tool calls an agent makes through
	// the MCP gateway (bin/once-mcp over stdio, a gateway process per
	// attempt, some killed mid-call), in a namespace of their own with the
	// same tools and faults; 0 for none (the default). Their operations'
	// writes are in the API server's counts, and so in the writes per
	// operation, which they then overstate.
	MCPCalls int

	// Root is the repository's root (default: found from the working
	// directory).
	Root string
	// Dir holds the run's state and its logs folder (default: a new
	// temporary folder). It is kept after the run.
	Dir string
	// Out is where the JSON report is written (default Dir/report.json).
	Out string
	// ControlPlane, when set, is used instead of starting one; it is not
	// stopped. No other manager may run against it meanwhile (the run
	// kills its own managers, not others), and the writes per operation
	// then also count any other client's writes to SideEffectOperations.
	ControlPlane *harness.ControlPlane
	// Log receives progress lines (default: discarded).
	Log io.Writer
}

// Defaults returns c with every unset field set to its default.
func (c Config) Defaults() Config {
	setInt := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	setFloat := func(v *float64, d float64) {
		switch {
		case *v == 0:
			*v = d
		case *v < 0:
			*v = 0
		}
	}
	setDuration := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	setInt(&c.Operations, 2000)
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.NoFaults || c.FaultRate < 0 {
		c.FaultRate, c.NoFaults = 0, true
	} else {
		setFloat(&c.FaultRate, 0.3)
	}
	setFloat(&c.LieShare, 0.3)
	setFloat(&c.TermShare, 0.15)
	setDuration(&c.KillInterval, 5*time.Second)
	setFloat(&c.FailpointShare, 0.4)
	setFloat(&c.StallShare, 0.15)
	setFloat(&c.Rate, 20)
	setInt(&c.Creators, 4)
	setDuration(&c.Tail, 10*time.Second)
	setDuration(&c.SettleTimeout, 10*time.Minute)
	setFloat(&c.DuplicateShare, 0.15)
	setFloat(&c.ConflictShare, 0.1)
	setFloat(&c.ReapplyShare, 0.2)
	setFloat(&c.NativeShare, 0.4)
	setFloat(&c.LookupShare, 0.4)
	setInt(&c.MaxConcurrentReconciles, 20)
	switch {
	case c.Sagas == 0:
		c.Sagas = c.Operations / 8
	case c.Sagas < 0:
		c.Sagas = 0
	}
	setFloat(&c.SagaFailShare, 0.4)
	setFloat(&c.IrreversibleShare, 0.3)
	setFloat(&c.CompensationFaultShare, 0.3)
	setFloat(&c.CompensationRefusalShare, 0.1)
	setFloat(&c.SagaDuplicateShare, 0.05)
	setFloat(&c.SagaReapplyShare, 0.2)
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// validate reports a configuration that cannot run.
func (c Config) validate() error {
	var errs []error
	share := func(name string, v float64) {
		if v < 0 || v > 1 {
			errs = append(errs, fmt.Errorf("%s %v is not within [0, 1]", name, v))
		}
	}
	if c.Operations < 1 {
		errs = append(errs, fmt.Errorf("operations %d must be at least 1", c.Operations))
	}
	share("fault rate", c.FaultRate)
	share("failpoint share", c.FailpointShare)
	share("stall share", c.StallShare)
	share("lie share", c.LieShare)
	share("term share", c.TermShare)
	if c.FailpointShare+c.StallShare+c.TermShare > 1 {
		errs = append(errs, fmt.Errorf("failpoint share %v, stall share %v and term share %v exceed 1",
			c.FailpointShare, c.StallShare, c.TermShare))
	}
	share("duplicate share", c.DuplicateShare)
	share("conflict share", c.ConflictShare)
	share("re-apply share", c.ReapplyShare)
	share("native share", c.NativeShare)
	share("lookup share", c.LookupShare)
	if c.NativeShare+c.LookupShare > 1 {
		errs = append(errs, fmt.Errorf("native share %v and lookup share %v exceed 1", c.NativeShare, c.LookupShare))
	}
	share("saga fail share", c.SagaFailShare)
	share("irreversible share", c.IrreversibleShare)
	share("compensation fault share", c.CompensationFaultShare)
	share("compensation refusal share", c.CompensationRefusalShare)
	if c.CompensationFaultShare+c.CompensationRefusalShare > 1 {
		errs = append(errs, fmt.Errorf("compensation fault share %v and compensation refusal share %v exceed 1",
			c.CompensationFaultShare, c.CompensationRefusalShare))
	}
	share("saga duplicate share", c.SagaDuplicateShare)
	share("saga re-apply share", c.SagaReapplyShare)
	if c.Rate <= 0 {
		errs = append(errs, fmt.Errorf("rate %v must be positive", c.Rate))
	}
	if c.Creators < 1 {
		errs = append(errs, fmt.Errorf("creators %d must be at least 1", c.Creators))
	}
	if c.SettleTimeout <= 0 {
		errs = append(errs, errors.New("settle timeout must be positive"))
	}
	return errors.Join(errs...)
}
