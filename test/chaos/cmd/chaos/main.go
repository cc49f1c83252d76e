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

// Command chaos runs Once's chaos run (package test/chaos): N logical
// operations against the sandbox tool in all three idempotency modes, with
// duplicates, conflicts and re-applies, and sagas of several steps whose
// compensations run when a step is refused, while the tool fails requests
// (compensations too) and the manager is killed. Then it prints a table of
// the figures that docs/design.md lists under Figures to report. It writes
// them as JSON, and exits non-zero if it saw a duplicate effect, a lost operation or saga, a saga
// compensated early or a violated invariant.
//
//	make build && go run ./test/chaos/cmd/chaos -n 300 -sagas 50
//
// It needs bin/manager-failpoints and bin/sandbox-tool from make build.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/once-dev/once/test/chaos"
)

func main() {
	os.Exit(run())
}

func run() int {
	var c chaos.Config
	flag.IntVar(&c.Operations, "n", 2000, "number of logical operations")
	flag.IntVar(&c.Sagas, "sagas", -1, "number of sagas besides the operations (-1: n/8; 0: none)")
	flag.Float64Var(&c.SagaFailShare, "saga-fail-share", 0.4,
		"share of the sagas with a step the tool refuses for good, so that compensations run (0: none)")
	flag.Float64Var(&c.CompensationFaultShare, "compensation-fault-share", 0.3,
		"share of the compensations whose first 1-3 requests fail (429, 503) (0: none)")
	flag.Float64Var(&c.CompensationRefusalShare, "compensation-refusal-share", 0.1,
		"share of the compensations refused for good (422); a person then retries, marks or leaves them (0: none)")
	flag.IntVar(&c.MCPCalls, "mcp", 0, "number of logical tool calls an agent makes through the MCP gateway "+
		"(bin/once-mcp), some with the gateway killed mid-call (0: none)")
	flag.Int64Var(&c.Seed, "seed", 1, "seed of every random choice (workload, faults, kills)")
	flag.Float64Var(&c.FaultRate, "fault-rate", 0.3, "share of the tool's requests that fail (0 for none)")
	flag.Float64Var(&c.LieShare, "lie-share", 0.3,
		"share of the failures drawn from the lies of gateways, proxies and tools (0: none)")
	flag.DurationVar(&c.KillInterval, "kill-interval", 5*time.Second,
		"mean time between two kills of the manager (0: no kills)")
	flag.Float64Var(&c.FailpointShare, "failpoint-share", 0.4,
		"share of the kills made by arming a failpoint (0: SIGKILL only)")
	flag.Float64Var(&c.StallShare, "stall-share", 0.15,
		"share of the kills replaced by stalling the manager's calls after the claim while a successor runs (0: none)")
	flag.Float64Var(&c.TermShare, "term-share", 0.15,
		"share of the kills replaced by a graceful stop: SIGTERM, then a wait for the manager to exit (0: none)")
	flag.Float64Var(&c.Rate, "rate", 20, "logical operations created per second")
	flag.IntVar(&c.Creators, "creators", 4, "concurrent creators")
	flag.DurationVar(&c.Tail, "tail", 10*time.Second, "chaos after the last operation is created")
	flag.DurationVar(&c.SettleTimeout, "settle-timeout", 10*time.Minute, "bound on the wait for every operation to settle")
	flag.StringVar(&c.Dir, "dir", "", "state and logs folder (default: a new temporary folder)")
	flag.StringVar(&c.Out, "out", "", "JSON report file (default: report.json in the run's folder)")
	quiet := flag.Bool("quiet", false, "do not print progress")
	flag.Parse()
	// The library reads zero as "the default"; here zero means none.
	switch c.Sagas {
	case -1:
		c.Sagas = 0
	case 0:
		c.Sagas = -1
	}
	for _, v := range []*float64{&c.SagaFailShare, &c.CompensationFaultShare, &c.CompensationRefusalShare} {
		if *v == 0 {
			*v = -1
		}
	}
	if c.FaultRate == 0 {
		c.NoFaults = true
	}
	if c.FailpointShare == 0 {
		c.FailpointShare = -1
	}
	if c.StallShare == 0 {
		c.StallShare = -1
	}
	if c.LieShare == 0 {
		c.LieShare = -1
	}
	if c.TermShare == 0 {
		c.TermShare = -1
	}
	if c.KillInterval == 0 {
		c.KillInterval = -1
	}
	if c.Tail == 0 {
		c.Tail = -1
	}
	if !*quiet {
		c.Log = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := chaos.Run(ctx, c)
	if rep.Operations > 0 {
		fmt.Print(rep.Table())
	}
	if rep.LogDir != "" {
		fmt.Printf("\nlogs:   %s\n", rep.LogDir)
	}
	if rep.ReportPath != "" {
		fmt.Printf("report: %s\n", rep.ReportPath)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: %v\n", err)
		if errors.Is(err, context.Canceled) {
			return 130
		}
		return 2
	}
	if problems := rep.Problems(); len(problems) > 0 {
		fmt.Println("\nFAIL:")
		for _, p := range problems {
			fmt.Printf("  - %s\n", p)
		}
		return 1
	}
	fmt.Println("\nPASS: no duplicate effect, no lost operation or saga, no saga compensated early, no violated invariant")
	return 0
}
