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

package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/chaos"
	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// The soak (make soak): a sustained load on one local control plane, with
// operations that go when they are done (ttlSecondsAfterFinished) and
// records that expire (retention), for long enough to see whether what
// the cluster and the manager hold stays flat. It samples etcd's in-use
// bytes (after a compaction), the manager's RSS and heap, and the live
// operations and records, and fits each series' slope over the last
// window.

// SoakConfig shapes a soak.
type SoakConfig struct {
	// Rate is the operations created per second; 0: half the API server
	// writes per second that Once with one manager reaches on this machine
	// (measured first: MeasureOperations operations, one run of the bench),
	// at the writes a soak's operation costs (soakWritesPerOp).
	Rate              float64
	MeasureOperations int
	// Duration of the load.
	Duration time.Duration
	// TTL is every operation's ttlSecondsAfterFinished, Retention its
	// spec.retention (its record's life after the completion).
	TTL       time.Duration
	Retention time.Duration
	// Interval between samples.
	Interval time.Duration
	// Window is the span, at the end, over which slopes are fitted (20
	// minutes; at most the part of the soak after WarmUp).
	Window time.Duration
	// WarmUp is the time before which no sample is fitted (default: TTL
	// + Retention + 1 minute, when the first records expire).
	WarmUp time.Duration
	// Workers are the concurrent creators.
	Workers int
	// Dir holds the state, logs, soak.json and soak.svg.
	Dir  string
	Root string
	Log  io.Writer
}

// SoakSample is one reading.
type SoakSample struct {
	// Seconds since the load began.
	Seconds float64 `json:"t_s"`
	// EtcdInUseBytes after a compaction to the current revision;
	// EtcdFileBytes the database file.
	EtcdInUseBytes float64 `json:"etcd_in_use_bytes"`
	EtcdFileBytes  float64 `json:"etcd_file_bytes"`
	// The manager's VmRSS and go_memstats_heap_inuse_bytes.
	ManagerRSSBytes       float64 `json:"manager_rss_bytes"`
	ManagerHeapInuseBytes float64 `json:"manager_heap_inuse_bytes"`
	// Live objects of the soak's namespace.
	Operations int `json:"operations"`
	Records    int `json:"records"`
	// Created so far.
	Created int64 `json:"created"`
}

// SoakSeries is one series' fit over the window.
type SoakSeries struct {
	Name string `json:"name"`
	Unit string `json:"unit"`
	// Level is the series' mean over the window, SlopePerHour the
	// least-squares slope there, in units per hour, and PercentPerHour
	// the slope over the level.
	Level          float64 `json:"level"`
	SlopePerHour   float64 `json:"slope_per_hour"`
	PercentPerHour float64 `json:"percent_per_hour"`
	// Flat: the slope adds less than FlatPercentPerHour of the level per
	// hour.
	Flat bool `json:"flat"`
}

// Units of the series.
const (
	unitMiB     = "MiB"
	unitObjects = "objects"
)

// FlatPercentPerHour is what a flat series may add to its level per hour.
const FlatPercentPerHour = 5

// SoakReport is the soak's result.
type SoakReport struct {
	Config map[string]any `json:"config"`
	// Rate is the operations per second asked for; MeasuredOnceOpsPerS
	// what the bench measured first (0 if the rate was given).
	Rate                float64 `json:"rate_ops_per_s"`
	MeasuredOnceOpsPerS float64 `json:"measured_once_ops_per_s,omitempty"`
	MeasuredRatio       float64 `json:"measured_ratio,omitempty"`
	MeasuredWritesPerOp float64 `json:"measured_writes_per_op,omitempty"`
	// Created operations, Late the creates that started more than a
	// second behind their schedule, CreateErrors the refused ones.
	Created      int64 `json:"created"`
	Late         int64 `json:"late"`
	CreateErrors int64 `json:"create_errors"`
	// Effects and DuplicateEffects are the sandbox ledger's at the end.
	Effects          int `json:"effects"`
	DuplicateEffects int `json:"duplicate_effects"`
	// WindowStart and WindowEnd bound the fit, in seconds since the load
	// began.
	WindowStart float64      `json:"window_start_s"`
	WindowEnd   float64      `json:"window_end_s"`
	Series      []SoakSeries `json:"series"`
	Flat        bool         `json:"flat"`
	Samples     []SoakSample `json:"samples"`
	Path        string       `json:"-"`
	Plot        string       `json:"-"`
}

// soakSeries are the series fitted and plotted: name, unit, scale to the
// unit, value.
var soakSeries = []struct {
	name, unit string
	scale      float64
	value      func(SoakSample) float64
}{
	{"etcd in use", unitMiB, 1 << 20, func(s SoakSample) float64 { return s.EtcdInUseBytes }},
	{"manager RSS", unitMiB, 1 << 20, func(s SoakSample) float64 { return s.ManagerRSSBytes }},
	{"manager heap in use", unitMiB, 1 << 20, func(s SoakSample) float64 { return s.ManagerHeapInuseBytes }},
	{"operations", unitObjects, 1, func(s SoakSample) float64 { return float64(s.Operations) }},
	{"records", unitObjects, 1, func(s SoakSample) float64 { return float64(s.Records) }},
}

// complete checks cfg and fills in its defaults.
func (cfg *SoakConfig) complete() error {
	if cfg.Duration <= 0 || cfg.TTL < 0 || cfg.Retention <= 0 || cfg.Interval <= 0 {
		return errors.New("duration, retention and interval must be positive, the TTL not negative")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	cfg.Workers = cmp.Or(max(cfg.Workers, 0), 32)
	cfg.WarmUp = cmp.Or(cfg.WarmUp, cfg.TTL+cfg.Retention+time.Minute)
	cfg.Window = cmp.Or(cfg.Window, 20*time.Minute)
	var err error
	if cfg.Root == "" {
		cfg.Root, err = harness.Root()
	}
	return err
}

// Soak runs the soak and writes soak.json and soak.svg in cfg.Dir.
func Soak(ctx context.Context, cfg SoakConfig) (SoakReport, error) {
	if err := cfg.complete(); err != nil {
		return SoakReport{}, err
	}
	b := &bench{cfg: Config{Log: cfg.Log, Workers: cfg.Workers}}
	rep := SoakReport{Config: map[string]any{"duration": cfg.Duration.String(), "ttl": cfg.TTL.String(),
		"retention": cfg.Retention.String(), "interval": cfg.Interval.String(), "window": cfg.Window.String(),
		"warm_up": cfg.WarmUp.String(), "workers": cfg.Workers}}
	rep.Rate = cfg.Rate
	if rep.Rate == 0 {
		if err := b.measureRate(ctx, cfg, &rep); err != nil {
			return SoakReport{}, err
		}
	}

	dir := filepath.Join(cfg.Dir, "soak")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return SoakReport{}, err
	}
	cpDir := filepath.Join(dir, "controlplane")
	defer func() {
		cp := &harness.ControlPlane{Root: cfg.Root, Dir: cpDir}
		if err := cp.Stop(); err != nil {
			b.logf("stopping the control plane: %v", err)
		}
	}()
	cp, err := harness.StartControlPlane(cfg.Root, cpDir)
	if err != nil {
		return SoakReport{}, err
	}
	e, err := newEnv(cp, dir)
	if err != nil {
		return SoakReport{}, err
	}
	etcd, err := etcdOf(cpDir)
	if err != nil {
		return SoakReport{}, err
	}
	ns, sbProc, tool, err := b.sandboxTool(ctx, e, 1)
	if sbProc != nil {
		defer sbProc.Stop(10 * time.Second)
	}
	if err != nil {
		return SoakReport{}, err
	}
	// The tool's replay window bounds the retention from below.
	tool.Spec.Idempotency.ReplayWindow = &metav1.Duration{Duration: min(cfg.Retention, time.Minute)}
	if err := e.c.Update(ctx, tool); err != nil {
		return SoakReport{}, fmt.Errorf("shortening the tool's replay window: %w", err)
	}
	maddr, err := harness.FreeAddr()
	if err != nil {
		return SoakReport{}, err
	}
	mgr, err := e.cp.StartManager(harness.ManagerOptions{
		Binary:      filepath.Join(cfg.Root, "bin", "manager"),
		Holder:      "soak",
		MetricsAddr: maddr,
		Args: []string{"--max-concurrent-reconciles=" + strconv.Itoa(cfg.Workers),
			"--max-workers-per-tool=" + strconv.Itoa(cfg.Workers),
			"--max-workers-per-namespace=" + strconv.Itoa(cfg.Workers), "--shards=16"},
		Log: filepath.Join(dir, "manager.log"),
	})
	if err != nil {
		return SoakReport{}, err
	}
	defer mgr.Stop(15 * time.Second)
	if err := chaos.WaitToolsReady(ctx, e.c, ns, tool.Name); err != nil {
		return SoakReport{}, err
	}

	b.logf("soak: %.1f operations/s for %s, TTL %s, retention %s, a sample every %s (state in %s)",
		rep.Rate, cfg.Duration, cfg.TTL, cfg.Retention, cfg.Interval, dir)
	var created, late, createErrors atomic.Int64
	loadCtx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	began := time.Now()
	var wg sync.WaitGroup
	wg.Go(func() { soakLoad(loadCtx, e, ns, tool.Name, cfg, rep.Rate, began, &created, &late, &createErrors) })

	// Each sample compacts etcd to the revision the previous one read, as
	// kube-apiserver's own compactor does with its interval: compacting to
	// a few seconds before, with deletes in the stream, can outrun a watch
	// that lags (the API server then drops every watcher of the resource
	// and answers "storage is (re)initializing" while it lists again). The
	// in-use bytes so include one interval of history: a constant, under a
	// steady load, that leaves the slopes as they are.
	var keep int64
	sample := func() (SoakSample, error) {
		var err error
		for try := range sampleTries {
			var (
				s   SoakSample
				rev int64
			)
			if s, rev, err = soakSample(ctx, e, etcd, keep, mgr.Pid(), maddr, ns, time.Since(began).Seconds(),
				created.Load()); err == nil {
				// Only a whole sample moves the compaction on: a
				// refused try's revision is seconds old.
				keep = rev
				return s, nil
			}
			b.logf("soak: sample, try %d of %d: %v", try+1, sampleTries, err)
			select {
			case <-ctx.Done():
				return SoakSample{}, ctx.Err()
			case <-time.After(2 * time.Second):
			}
		}
		return SoakSample{}, err
	}
	tick := time.NewTicker(cfg.Interval)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			stopLoad()
			wg.Wait()
			return SoakReport{}, ctx.Err()
		case <-loadCtx.Done():
			// No sample as the load stops: what follows is the drain,
			// not the steady state the slopes are about.
			done = true
			continue
		case <-tick.C:
		}
		s, err := sample()
		if err != nil {
			stopLoad()
			wg.Wait()
			return SoakReport{}, err
		}
		rep.Samples = append(rep.Samples, s)
		b.logf("soak: %4.0fs etcd %.1f MiB in use (file %.1f), manager RSS %.1f MiB heap %.1f MiB, "+
			"%d operations, %d records, %d created", s.Seconds, s.EtcdInUseBytes/(1<<20), s.EtcdFileBytes/(1<<20),
			s.ManagerRSSBytes/(1<<20), s.ManagerHeapInuseBytes/(1<<20), s.Operations, s.Records, s.Created)
	}
	wg.Wait()
	rep.Created, rep.Late, rep.CreateErrors = created.Load(), late.Load(), createErrors.Load()
	summary, err := (&sandbox.Client{BaseURL: sbProc.URL}).Summary(ctx)
	if err != nil {
		return SoakReport{}, fmt.Errorf("reading the ledger: %w", err)
	}
	rep.Effects, rep.DuplicateEffects = summary.Effects, summary.Duplicates
	fitSoak(&rep, cfg.Window, cfg.WarmUp)

	rep.Path = filepath.Join(cfg.Dir, "soak.json")
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, err
	}
	if err := os.WriteFile(rep.Path, append(data, '\n'), 0o644); err != nil {
		return rep, err
	}
	rep.Plot = filepath.Join(cfg.Dir, "soak.svg")
	return rep, os.WriteFile(rep.Plot, []byte(rep.SVG()), 0o644)
}

// soakExtraWrites are the writes a soak's operation costs beyond the
// bench's (docs/design.md, the write budget): when its TTL ends, the record
// that takes its outcome (W5), the delete, the finalizer's removal (W6),
// and at the record's expiry the record's delete. The bench's phase ends at
// Committed, so half its operations per second would be 7/6 of what the
// machine can write for a soak's operations: a backlog, not a steady state.
const soakExtraWrites = 4

// measureRate runs the bench's ceiling and once-1m phases once and sets
// the soak's rate to half of the write load Once reached: the bench's
// operations per second times its writes per operation, over twice what a
// soak's operation costs.
func (b *bench) measureRate(ctx context.Context, cfg SoakConfig, rep *SoakReport) error {
	b.logf("soak: measuring Once's throughput on this machine (%d operations, one run)", cfg.MeasureOperations)
	m, err := Run(ctx, Config{Operations: cfg.MeasureOperations, Workers: cfg.Workers, Runs: 1,
		Managers: []int{1}, Shards: 16, Dir: filepath.Join(cfg.Dir, "measure"), Root: cfg.Root,
		Log: cfg.Log, SettleTimeout: 10 * time.Minute})
	if err != nil {
		return fmt.Errorf("measuring the rate: %w", err)
	}
	rep.MeasuredOnceOpsPerS, rep.MeasuredRatio = m.OnceOpsPerS, m.Ratio
	rep.MeasuredWritesPerOp = m.WritesPerOperation
	rep.Rate = SoakRate(m.OnceOpsPerS, m.WritesPerOperation)
	b.logf("soak: Once reached %.1f operations/s (%.3f of the ceiling) at %.2f writes each: the soak creates "+
		"%.1f per second, at %.2f writes each", m.OnceOpsPerS, m.Ratio, m.WritesPerOperation, rep.Rate,
		m.WritesPerOperation+soakExtraWrites)
	return nil
}

// SoakRate is half the write load of opsPerS operations of writesPerOp
// writes each, in soak operations per second.
func SoakRate(opsPerS, writesPerOp float64) float64 {
	if opsPerS <= 0 || writesPerOp <= 0 {
		return 0
	}
	return opsPerS * writesPerOp / (2 * (writesPerOp + soakExtraWrites))
}

// sampleTries bounds the tries of one sample: an API server may refuse a
// list for a moment (a 429 while its cache lists again), which is no
// reason to end a half-hour soak.
const sampleTries = 3

// soakSample reads etcd's size after a compaction to keep (none if 0), the
// manager's memory and the live objects of ns; and etcd's revision as the
// sample began, for the next sample to compact to once this one is whole.
func soakSample(ctx context.Context, e *env, etcd *etcdClient, keep int64, pid int, maddr, ns string,
	seconds float64, created int64) (s SoakSample, rev int64, err error) {
	s = SoakSample{Seconds: seconds, Created: created}
	if rev, err = etcd.revision(ctx); err != nil {
		return s, 0, err
	}
	var sz EtcdSize
	if keep > 0 {
		sz, err = etcd.compactTo(ctx, keep)
	} else {
		sz, err = etcd.size(ctx)
	}
	if err != nil {
		return s, rev, err
	}
	s.EtcdInUseBytes, s.EtcdFileBytes = sz.InUseBytes, sz.FileBytes
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, rev, fmt.Errorf("the manager: %w", err)
	}
	if s.ManagerRSSBytes, err = procField(string(status), "VmRSS:"); err != nil {
		return s, rev, err
	}
	fams, err := scrapeAll(ctx, "http://"+maddr+"/metrics")
	if err != nil {
		return s, rev, err
	}
	s.ManagerHeapInuseBytes = sumOf(fams, "go_memstats_heap_inuse_bytes", "", "")
	if s.Operations, err = countOf(ctx, e.c, ns, "SideEffectOperationList"); err != nil {
		return s, rev, err
	}
	if s.Records, err = countOf(ctx, e.c, ns, "IdempotencyRecordList"); err != nil {
		return s, rev, err
	}
	return s, rev, nil
}

// soakLoad creates operations at rate per second until ctx ends, each
// with cfg's TTL and retention, on cfg.Workers creators. A create that
// starts more than a second behind its schedule counts as late.
func soakLoad(ctx context.Context, e *env, ns, tool string, cfg SoakConfig, rate float64, began time.Time,
	created, late, createErrors *atomic.Int64) {
	ttl := int32(cfg.TTL / time.Second)
	retention := &metav1.Duration{Duration: cfg.Retention}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range cfg.Workers {
		wg.Go(func() {
			for i := range jobs {
				op := newOperation(ns, tool, i)
				op.Name = fmt.Sprintf("op-%08d", i)
				op.Spec.TTLSecondsAfterFinished = &ttl
				op.Spec.Retention = retention
				if err := e.c.Create(ctx, op); err != nil {
					if ctx.Err() == nil {
						createErrors.Add(1)
					}
					continue
				}
				created.Add(1)
			}
		})
	}
	defer func() {
		close(jobs)
		wg.Wait()
	}()
	for i := 0; ; i++ {
		due := began.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(due)):
		}
		select {
		case <-ctx.Done():
			return
		case jobs <- i:
		}
		if time.Since(due) > time.Second {
			late.Add(1)
		}
	}
}

// countOf counts the objects of kind list (Once's group) in ns, reading
// only their metadata.
func countOf(ctx context.Context, c client.Client, ns, list string) (int, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(schema.GroupVersionKind{Group: v1.GroupVersion.Group, Version: v1.GroupVersion.Version,
		Kind: list})
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("listing %s: %w", list, err)
	}
	return len(l.Items), nil
}

// Refit fits a soak's report again, from its samples and its own window
// and warm-up, leaving out any sample taken after the load's duration (a
// report written before soaks stopped sampling there has one, taken as
// the load stopped and the drain began), and writes soak.json and
// soak.svg in dir.
func Refit(rep SoakReport, dir string) (SoakReport, error) {
	duration, err1 := time.ParseDuration(fmt.Sprint(rep.Config["duration"]))
	window, err2 := time.ParseDuration(fmt.Sprint(rep.Config["window"]))
	warmUp, err3 := time.ParseDuration(fmt.Sprint(rep.Config["warm_up"]))
	if err := errors.Join(err1, err2, err3); err != nil {
		return rep, fmt.Errorf("the report's duration, window and warm-up: %w", err)
	}
	var kept []SoakSample
	for _, s := range rep.Samples {
		if s.Seconds <= duration.Seconds()+1 {
			kept = append(kept, s)
		}
	}
	rep.Samples, rep.Series = kept, nil
	fitSoak(&rep, window, warmUp)
	rep.Path, rep.Plot = filepath.Join(dir, "soak.json"), filepath.Join(dir, "soak.svg")
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return rep, err
	}
	if err := os.WriteFile(rep.Path, append(data, '\n'), 0o644); err != nil {
		return rep, err
	}
	return rep, os.WriteFile(rep.Plot, []byte(rep.SVG()), 0o644)
}

// fitSoak fits every series over the last window of the samples after
// warmUp, and says whether each is flat.
func fitSoak(rep *SoakReport, window, warmUp time.Duration) {
	if len(rep.Samples) == 0 {
		return
	}
	end := rep.Samples[len(rep.Samples)-1].Seconds
	start := max(end-window.Seconds(), warmUp.Seconds())
	rep.WindowStart, rep.WindowEnd = start, end
	var in []SoakSample
	for _, s := range rep.Samples {
		if s.Seconds >= start {
			in = append(in, s)
		}
	}
	rep.Flat = len(in) >= 2
	for _, def := range soakSeries {
		xs, ys := make([]float64, len(in)), make([]float64, len(in))
		var sum float64
		for i, s := range in {
			xs[i], ys[i] = s.Seconds/3600, def.value(s)/def.scale
			sum += ys[i]
		}
		ser := SoakSeries{Name: def.name, Unit: def.unit}
		if len(in) > 0 {
			ser.Level = sum / float64(len(in))
		}
		ser.SlopePerHour = LeastSquaresSlope(xs, ys)
		if ser.Level != 0 {
			ser.PercentPerHour = ser.SlopePerHour / ser.Level * 100
		}
		ser.Flat = len(in) >= 2 && ser.PercentPerHour < FlatPercentPerHour
		rep.Flat = rep.Flat && ser.Flat
		rep.Series = append(rep.Series, ser)
	}
}

// Table renders the soak's result for a person.
func (r SoakReport) Table() string {
	var b []byte
	b = fmt.Appendf(b, "%.1f operations/s", r.Rate)
	if r.MeasuredOnceOpsPerS > 0 {
		b = fmt.Appendf(b, " (half the writes of Once's %.1f at %.2f each, measured first, %.3f of the ceiling)",
			r.MeasuredOnceOpsPerS, r.MeasuredWritesPerOp, r.MeasuredRatio)
	}
	b = fmt.Appendf(b, ", TTL %v, retention %v, %v: %d created (%d late by over a second, %d refused), "+
		"%d effects at the ledger, %d duplicate\n", r.Config["ttl"], r.Config["retention"], r.Config["duration"],
		r.Created, r.Late, r.CreateErrors, r.Effects, r.DuplicateEffects)
	b = fmt.Appendf(b, "\nslopes from %.0f s to %.0f s (flat: under %d %% of the level per hour):\n",
		r.WindowStart, r.WindowEnd, FlatPercentPerHour)
	b = fmt.Appendf(b, "%-22s %12s %16s %10s %6s\n", "series", "level", "slope per hour", "% per hour", "flat")
	for _, s := range r.Series {
		b = fmt.Appendf(b, "%-22s %8.1f %-3s %12.1f/h %10.1f %6v\n", s.Name, s.Level, unitShort(s.Unit),
			s.SlopePerHour, s.PercentPerHour, s.Flat)
	}
	b = fmt.Appendf(b, "flat: %v\n", r.Flat)
	return string(b)
}

func unitShort(u string) string {
	if u == unitObjects {
		return ""
	}
	return u
}
