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

// Command bench runs Once's benchmark (package test/bench): the ceiling of
// a plain client doing an operation's minimum writes, then Once executing
// as many operations with one manager and with two, each on a local
// control plane of its own, -runs times; it prints the medians as a table
// and writes them as JSON to bench.json in -dir.
//
//	make bench BENCH_FLAGS="-n 300 -runs 1"
//
// With -retained it measures instead a manager's memory per retained
// (committed) operation, and writes memory.json:
//
//	make bench BENCH_FLAGS="-retained 0,10000,25000,50000"
//
// It needs bin/manager and bin/sandbox-tool from make build.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/once-dev/once/test/bench"
)

func main() {
	os.Exit(run())
}

func run() int {
	var c bench.Config
	flag.IntVar(&c.Operations, "n", 2000, "operations per phase")
	flag.IntVar(&c.Workers, "workers", 32, "concurrent creators, and the ceiling's concurrent clients")
	flag.IntVar(&c.Runs, "runs", 3, "runs; every figure is the median of the runs")
	flag.StringVar(&c.Dir, "dir", "", "state, logs and bench.json (default: a new temporary folder)")
	flag.DurationVar(&c.SettleTimeout, "settle-timeout", 10*time.Minute, "bound on the wait for every operation to commit")
	managers := flag.String("managers", "1,2",
		"comma-separated numbers of managers, one Once phase each (empty: the ceiling only)")
	flag.DurationVar(&c.Profile, "profile", 0,
		"if set, CPU-profile the first manager and the API server for this long in every Once phase, "+
			"and the manager's heap at the phase's end (files in the phase's folder)")
	flag.IntVar(&c.Reconcilers, "reconcilers", 0, "every manager's --max-concurrent-reconciles (default: -workers)")
	flag.BoolVar(&c.StatusCeiling, "status-ceiling", true,
		"add a second ceiling that writes the statuses Once's decision core computes")
	flag.BoolVar(&c.SharedKeys, "shared", true,
		"add a phase with one manager in which every two operations share an explicit key")
	flag.IntVar(&c.Shards, "shards", 16, "every Once manager's --shards; 0 runs them without sharding")
	flag.DurationVar(&c.ToolLatency, "tool-latency", 0,
		"how long the sandbox takes to answer every create call (the effect) of the Once phases (default: at once); "+
			"raise -settle-timeout with it")
	retained := flag.String("retained", "",
		"comma-separated numbers of committed operations, e.g. 0,10000,25000,50000: run the memory benchmark "+
			"(a manager's memory per retained operation) instead of the throughput phases")
	flag.BoolVar(&c.RetainedRecords, "retained-records", false,
		"give every retained operation its scope's record, as before outcomes moved to the deletion")
	flag.StringVar(&c.Manager, "manager", "",
		"the manager binary of the Once phases (default: bin/manager), e.g. a build of an earlier commit to compare")
	memoryManagers := flag.String("memory-managers", "",
		"comma-separated manager binaries the memory benchmark compares (default: bin/manager)")
	flag.Int64Var(&c.EtcdQuotaBytes, "etcd-quota", 8<<30,
		"the memory benchmark's etcd --quota-backend-bytes (etcd's default, 2 GiB, would stop large populations)")
	throughput := flag.String("throughput", "",
		"comma-separated rates (operations/s, e.g. once_ops_per_s of bench.json) at which the memory benchmark "+
			"says how long etcd's 2 GiB quota lasts, besides 5/s")
	quiet := flag.Bool("quiet", false, "do not print progress")
	flag.Parse()
	for s := range strings.SplitSeq(*throughput, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || r <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -throughput: %q is not a positive rate\n", s)
			return 2
		}
		c.Throughput = append(c.Throughput, r)
	}
	for s := range strings.SplitSeq(*retained, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			fmt.Fprintf(os.Stderr, "bench: -retained: %q is not a number of operations\n", s)
			return 2
		}
		c.Retained = append(c.Retained, n)
	}
	for s := range strings.SplitSeq(*memoryManagers, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.MemoryManagers = append(c.MemoryManagers, s)
		}
	}
	for s := range strings.SplitSeq(*managers, ",") {
		if strings.TrimSpace(s) == "" {
			continue
		}
		m, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || m < 1 {
			fmt.Fprintf(os.Stderr, "bench: -managers: %q is not a positive number\n", s)
			return 2
		}
		c.Managers = append(c.Managers, m)
	}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "once-bench-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
		c.Dir = dir
	}
	// Absolute: the control plane's script resolves a relative folder
	// against the repository's root, the bench against where it runs.
	if dir, err := filepath.Abs(c.Dir); err == nil {
		c.Dir = dir
	}
	if !*quiet {
		c.Log = os.Stderr
	}
	fmt.Printf("state and logs: %s\n", c.Dir)
	// The clients' own logs are not wanted; errors come back as errors.
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(c.Retained) > 0 {
		rep, err := bench.Memory(ctx, c)
		return printed(rep.Table, rep.Path, err)
	}
	rep, err := bench.Run(ctx, c)
	return printed(rep.Table, rep.Path, err)
}

// printed prints a benchmark's table and where its report is, or the error
// that stopped it, and returns the exit code.
func printed(table func() string, path string, err error) int {
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		if errors.Is(err, context.Canceled) {
			return 130
		}
		return 2
	}
	fmt.Print("\n" + table())
	fmt.Printf("\nreport: %s\n", path)
	return 0
}
