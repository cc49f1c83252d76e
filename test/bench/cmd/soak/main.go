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

// Command soak runs Once's soak (test/bench, soak.go): on one local
// control plane, one manager executes a sustained load of operations that
// go when they are done (ttlSecondsAfterFinished) and whose records expire
// (retention), at half the rate Once reaches on this machine (measured
// first, or -rate), for -duration; it samples etcd's in-use bytes, the
// manager's RSS and heap and the live operations and records, and fits
// their slopes over the last -window. It writes soak.json and soak.svg
// in -dir and exits 0 if every series is flat, 1 if one is not, 2 on an
// error.
//
//	make soak SOAK_FLAGS="-duration 10m -ttl 2m -retention 3m"
//
// It needs bin/manager and bin/sandbox-tool from make build.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
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
	var c bench.SoakConfig
	flag.Float64Var(&c.Rate, "rate", 0,
		"operations created per second (default: half of what Once with one manager reaches here, measured first)")
	flag.IntVar(&c.MeasureOperations, "measure-n", 1000, "operations of the bench run that measures the rate")
	flag.DurationVar(&c.Duration, "duration", 30*time.Minute, "how long the load runs")
	flag.DurationVar(&c.TTL, "ttl", 3*time.Minute, "every operation's ttlSecondsAfterFinished")
	flag.DurationVar(&c.Retention, "retention", 5*time.Minute,
		"every operation's spec.retention: its record's life after the operation ends")
	flag.DurationVar(&c.Interval, "interval", 30*time.Second, "time between samples")
	flag.DurationVar(&c.Window, "window", 20*time.Minute, "the span at the end over which slopes are fitted")
	flag.DurationVar(&c.WarmUp, "warm-up", 0,
		"no sample before it is fitted (default: ttl + retention + 1m, when the first records expire)")
	flag.IntVar(&c.Workers, "workers", 32, "concurrent creators, and the manager's --max-concurrent-reconciles")
	flag.StringVar(&c.Dir, "dir", "", "state, logs, soak.json and soak.svg (default: a new temporary folder)")
	quiet := flag.Bool("quiet", false, "do not print progress")
	refit := flag.String("refit", "",
		"a soak.json to fit again (samples after the load's end left out), "+
			"writing soak.json and soak.svg in -dir; runs nothing")
	flag.Parse()
	if *refit != "" {
		return refitReport(*refit, c.Dir)
	}
	if c.Dir == "" {
		dir, err := os.MkdirTemp("", "once-soak-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak: %v\n", err)
			return 2
		}
		c.Dir = dir
	}
	if dir, err := filepath.Abs(c.Dir); err == nil {
		c.Dir = dir
	}
	if !*quiet {
		c.Log = os.Stderr
	}
	fmt.Printf("state and logs: %s\n", c.Dir)
	ctrllog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Soak(ctx, c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		if errors.Is(err, context.Canceled) {
			return 130
		}
		return 2
	}
	fmt.Print("\n" + rep.Table())
	fmt.Printf("\nreport: %s\nplot: %s\n", rep.Path, rep.Plot)
	if !rep.Flat {
		return 1
	}
	return 0
}

// refitReport fits the report at path again into dir (default: path's
// folder) and prints it; the exit code is the soak's.
func refitReport(path, dir string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	var rep bench.SoakReport
	if err := json.Unmarshal(data, &rep); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %s: %v\n", path, err)
		return 2
	}
	if rep, err = bench.Refit(rep, cmp.Or(dir, filepath.Dir(path))); err != nil {
		fmt.Fprintf(os.Stderr, "soak: %v\n", err)
		return 2
	}
	fmt.Print(rep.Table())
	fmt.Printf("\nreport: %s\nplot: %s\n", rep.Path, rep.Plot)
	if !rep.Flat {
		return 1
	}
	return 0
}
