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
	"encoding/json"
	"fmt"
	"strings"
)

// Phase is what one phase of a run measured.
type Phase struct {
	// Name is "ceiling", "once-<managers>m", or "once-1m-shared".
	Name     string `json:"name"`
	Managers int    `json:"managers,omitempty"`
	// SharedKeys: every two operations share an explicit key.
	SharedKeys bool `json:"shared_keys,omitempty"`
	// Operations were created; every one committed.
	Operations int `json:"operations"`
	// Seconds from the first create to the last commit seen.
	Seconds      float64 `json:"seconds"`
	OpsPerSecond float64 `json:"ops_per_s"`
	// Latency from just before the create to the moment the bench's watch
	// saw the operation Committed (for the ceiling: to the commit write's
	// answer), in ms.
	LatencyP50ms float64 `json:"latency_p50_ms"`
	LatencyP95ms float64 `json:"latency_p95_ms"`
	LatencyP99ms float64 `json:"latency_p99_ms"`
	// ServerLatency is status.committedTime − metadata.creationTimestamp,
	// both of 1 s resolution, in ms; Once phases only.
	ServerLatencyP50ms float64 `json:"server_latency_p50_ms,omitempty"`
	ServerLatencyP99ms float64 `json:"server_latency_p99_ms,omitempty"`
	// Writes to SideEffectOperations, IdempotencyRecords and Events, by
	// "resource[/subresource] VERB", every response code, from the API
	// server's apiserver_request_total.
	Writes map[string]int64 `json:"writes"`
	// Conflicts are the writes answered 409.
	Conflicts int64 `json:"conflicts"`
	// WritesPerOperation counts the writes to operations and records, the
	// creates included; EventsPerOperation the events.
	WritesPerOperation float64 `json:"writes_per_operation"`
	EventsPerOperation float64 `json:"events_per_operation"`
	// Of the managers, together: CPU seconds per 1000 operations (delta of
	// process_cpu_seconds_total), and the largest peak RSS (VmHWM).
	ManagerCPUSecondsPer1000 float64 `json:"manager_cpu_s_per_1000,omitempty"`
	ManagerPeakRSSMB         float64 `json:"manager_peak_rss_mb,omitempty"`
	// Of the control plane: kube-apiserver's and etcd's CPU seconds per
	// 1000 operations (their user and system time, from /proc), from just
	// before the first create to the last commit: what a phase costs the
	// control plane.
	APIServerCPUSecondsPer1000 float64 `json:"apiserver_cpu_s_per_1000"`
	EtcdCPUSecondsPer1000      float64 `json:"etcd_cpu_s_per_1000"`
	// EtcdInUseBytesPerOp is etcd's in-use bytes after the phase over
	// those before it, both after a compaction to the current revision,
	// per operation: what an operation as it ended (and its record, if it
	// has one) keeps in etcd.
	EtcdInUseBytesPerOp float64 `json:"etcd_in_use_bytes_per_op"`
	// Effects and DuplicateEffects are the sandbox ledger's.
	Effects          int `json:"effects,omitempty"`
	DuplicateEffects int `json:"duplicate_effects"`
}

// RunResult is one run: the ceiling and a Once phase per number of
// managers.
type RunResult struct {
	Ceiling Phase `json:"ceiling"`
	// StatusCeiling writes the statuses Once's decision core computes.
	StatusCeiling *Phase  `json:"ceiling_status,omitempty"`
	Once          []Phase `json:"once"`
}

// Report is the medians over the runs. The flat figures are the ceiling's
// and those of Once with one manager (the first of Config.Managers).
type Report struct {
	Operations int   `json:"operations"`
	Workers    int   `json:"workers"`
	Runs       int   `json:"runs"`
	Managers   []int `json:"managers"`
	// Manager is the Once phases' manager binary when -manager names one.
	Manager string `json:"manager,omitempty"`
	// ToolLatencyMs is the sandbox's answer time in the Once phases.
	ToolLatencyMs float64 `json:"tool_latency_ms,omitempty"`

	CeilingOpsPerS     float64 `json:"ceiling_ops_per_s"`
	OnceOpsPerS        float64 `json:"once_ops_per_s"`
	Ratio              float64 `json:"ratio"`
	LatencyP50ms       float64 `json:"latency_p50_ms"`
	LatencyP95ms       float64 `json:"latency_p95_ms"`
	LatencyP99ms       float64 `json:"latency_p99_ms"`
	WritesPerOperation float64 `json:"writes_per_operation"`
	EventsPerOperation float64 `json:"events_per_operation"`
	ManagerCPUSPer1000 float64 `json:"manager_cpu_s_per_1000"`
	ManagerPeakRSSMB   float64 `json:"manager_peak_rss_mb"`
	// EtcdInUseBytesPerOp is what a committed operation of Once (one
	// manager) keeps in use in etcd, CeilingEtcdInUseBytesPerOp one of the
	// ceiling's.
	EtcdInUseBytesPerOp        float64 `json:"etcd_in_use_bytes_per_op"`
	CeilingEtcdInUseBytesPerOp float64 `json:"ceiling_etcd_in_use_bytes_per_op"`
	// APIServerCPUSPer1000 and EtcdCPUSPer1000 are Once's (one manager),
	// the Ceiling ones the ceiling's. APIServerCostRatio is Once's
	// kube-apiserver CPU per operation over the ceiling's, CostRatio the
	// same for kube-apiserver and etcd together, each the median of the
	// runs' ratios: how many times the ceiling's work an operation of
	// Once gives them.
	APIServerCPUSPer1000        float64 `json:"apiserver_cpu_s_per_1000"`
	EtcdCPUSPer1000             float64 `json:"etcd_cpu_s_per_1000"`
	CeilingAPIServerCPUSPer1000 float64 `json:"ceiling_apiserver_cpu_s_per_1000"`
	CeilingEtcdCPUSPer1000      float64 `json:"ceiling_etcd_cpu_s_per_1000"`
	APIServerCostRatio          float64 `json:"apiserver_cost_ratio"`
	CostRatio                   float64 `json:"control_plane_cost_ratio"`
	// TwoManagerSpeedup is ops/s with two managers over ops/s with one,
	// the median of the runs' ratios; 0 unless both were run.
	TwoManagerSpeedup float64 `json:"two_manager_speedup"`
	// DuplicateEffects is the sum over every Once phase of every run.
	DuplicateEffects int `json:"duplicate_effects"`
	// StatusCeilingOpsPerS is the ceiling that writes Once's statuses, and
	// RatioToStatusCeiling Once's ratio to it (one manager, median of the
	// runs' ratios); 0 unless it was run.
	StatusCeilingOpsPerS float64 `json:"status_ceiling_ops_per_s,omitempty"`
	RatioToStatusCeiling float64 `json:"ratio_to_status_ceiling,omitempty"`
	// SharedKeysOpsPerS and SharedKeysWritesPerOperation are those of
	// the phase with shared keys; 0 unless it was run.
	SharedKeysOpsPerS            float64 `json:"shared_keys_ops_per_s,omitempty"`
	SharedKeysWritesPerOperation float64 `json:"shared_keys_writes_per_operation,omitempty"`

	// Medians holds the median of every phase's figures, by phase name.
	Medians map[string]Phase `json:"medians"`
	// Results are the runs' own figures.
	Results []RunResult `json:"results"`
	// Path is where the JSON was written.
	Path string `json:"-"`
}

// Summarize computes the medians of runs.
func Summarize(cfg Config, runs []RunResult) Report {
	rep := Report{Operations: cfg.Operations, Workers: cfg.Workers, Runs: len(runs), Managers: cfg.Managers,
		Manager:       cfg.Manager,
		ToolLatencyMs: float64(cfg.ToolLatency.Microseconds()) / 1000, Medians: map[string]Phase{}, Results: runs}
	byName := map[string][]Phase{}
	var names []string
	var ratios, speedups, statusRatios, apiCosts, costs []float64
	for _, r := range runs {
		phases := append([]Phase{r.Ceiling}, r.Once...)
		if r.StatusCeiling != nil {
			phases = append(phases, *r.StatusCeiling)
			if one := find(r.Once, 1); one != nil && r.StatusCeiling.OpsPerSecond > 0 {
				statusRatios = append(statusRatios, one.OpsPerSecond/r.StatusCeiling.OpsPerSecond)
			}
		}
		for _, p := range phases {
			if _, ok := byName[p.Name]; !ok {
				names = append(names, p.Name)
			}
			byName[p.Name] = append(byName[p.Name], p)
			rep.DuplicateEffects += p.DuplicateEffects
		}
		if one := find(r.Once, 1); one != nil && r.Ceiling.OpsPerSecond > 0 {
			ratios = append(ratios, one.OpsPerSecond/r.Ceiling.OpsPerSecond)
			if c := r.Ceiling.APIServerCPUSecondsPer1000; c > 0 {
				apiCosts = append(apiCosts, one.APIServerCPUSecondsPer1000/c)
			}
			if c := r.Ceiling.controlPlaneCPU(); c > 0 {
				costs = append(costs, one.controlPlaneCPU()/c)
			}
			if two := find(r.Once, 2); two != nil && one.OpsPerSecond > 0 {
				speedups = append(speedups, two.OpsPerSecond/one.OpsPerSecond)
			}
		}
	}
	for _, name := range names {
		rep.Medians[name] = medianPhase(byName[name])
	}
	rep.CeilingOpsPerS = rep.Medians["ceiling"].OpsPerSecond
	if one, ok := rep.Medians["once-1m"]; ok {
		rep.OnceOpsPerS = one.OpsPerSecond
		rep.LatencyP50ms, rep.LatencyP95ms, rep.LatencyP99ms = one.LatencyP50ms, one.LatencyP95ms, one.LatencyP99ms
		rep.WritesPerOperation, rep.EventsPerOperation = one.WritesPerOperation, one.EventsPerOperation
		rep.ManagerCPUSPer1000, rep.ManagerPeakRSSMB = one.ManagerCPUSecondsPer1000, one.ManagerPeakRSSMB
		rep.APIServerCPUSPer1000, rep.EtcdCPUSPer1000 = one.APIServerCPUSecondsPer1000, one.EtcdCPUSecondsPer1000
		rep.EtcdInUseBytesPerOp = one.EtcdInUseBytesPerOp
	}
	rep.CeilingEtcdInUseBytesPerOp = rep.Medians["ceiling"].EtcdInUseBytesPerOp
	rep.CeilingAPIServerCPUSPer1000 = rep.Medians["ceiling"].APIServerCPUSecondsPer1000
	rep.CeilingEtcdCPUSPer1000 = rep.Medians["ceiling"].EtcdCPUSecondsPer1000
	rep.APIServerCostRatio = Median(apiCosts)
	rep.CostRatio = Median(costs)
	if sh, ok := rep.Medians["once-1m-shared"]; ok {
		rep.SharedKeysOpsPerS, rep.SharedKeysWritesPerOperation = sh.OpsPerSecond, sh.WritesPerOperation
	}
	rep.StatusCeilingOpsPerS = rep.Medians["ceiling-status"].OpsPerSecond
	rep.RatioToStatusCeiling = Median(statusRatios)
	rep.Ratio = Median(ratios)
	rep.TwoManagerSpeedup = Median(speedups)
	return rep
}

// controlPlaneCPU is p's kube-apiserver and etcd CPU seconds per 1000
// operations.
func (p Phase) controlPlaneCPU() float64 {
	return p.APIServerCPUSecondsPer1000 + p.EtcdCPUSecondsPer1000
}

// find is the phase with keys equal to names and managers managers.
func find(phases []Phase, managers int) *Phase {
	for i := range phases {
		if phases[i].Managers == managers && !phases[i].SharedKeys {
			return &phases[i]
		}
	}
	return nil
}

// medianPhase is the median of each figure of ps, which share a name; the
// writes by request are those of the run with the median ops/s.
func medianPhase(ps []Phase) Phase {
	of := func(f func(Phase) float64) float64 {
		xs := make([]float64, len(ps))
		for i, p := range ps {
			xs[i] = f(p)
		}
		return Median(xs)
	}
	m := Phase{Name: ps[0].Name, Managers: ps[0].Managers, SharedKeys: ps[0].SharedKeys, Operations: ps[0].Operations,
		Seconds:                    of(func(p Phase) float64 { return p.Seconds }),
		OpsPerSecond:               of(func(p Phase) float64 { return p.OpsPerSecond }),
		LatencyP50ms:               of(func(p Phase) float64 { return p.LatencyP50ms }),
		LatencyP95ms:               of(func(p Phase) float64 { return p.LatencyP95ms }),
		LatencyP99ms:               of(func(p Phase) float64 { return p.LatencyP99ms }),
		ServerLatencyP50ms:         of(func(p Phase) float64 { return p.ServerLatencyP50ms }),
		ServerLatencyP99ms:         of(func(p Phase) float64 { return p.ServerLatencyP99ms }),
		Conflicts:                  int64(of(func(p Phase) float64 { return float64(p.Conflicts) })),
		WritesPerOperation:         of(func(p Phase) float64 { return p.WritesPerOperation }),
		EventsPerOperation:         of(func(p Phase) float64 { return p.EventsPerOperation }),
		ManagerCPUSecondsPer1000:   of(func(p Phase) float64 { return p.ManagerCPUSecondsPer1000 }),
		ManagerPeakRSSMB:           of(func(p Phase) float64 { return p.ManagerPeakRSSMB }),
		APIServerCPUSecondsPer1000: of(func(p Phase) float64 { return p.APIServerCPUSecondsPer1000 }),
		EtcdCPUSecondsPer1000:      of(func(p Phase) float64 { return p.EtcdCPUSecondsPer1000 }),
		EtcdInUseBytesPerOp:        of(func(p Phase) float64 { return p.EtcdInUseBytesPerOp }),
		Effects:                    int(of(func(p Phase) float64 { return float64(p.Effects) })),
	}
	mid := ps[0]
	for _, p := range ps {
		m.DuplicateEffects += p.DuplicateEffects
		if p.OpsPerSecond == m.OpsPerSecond || (mid.OpsPerSecond != m.OpsPerSecond &&
			abs(p.OpsPerSecond-m.OpsPerSecond) < abs(mid.OpsPerSecond-m.OpsPerSecond)) {
			mid = p
		}
	}
	m.Writes = mid.Writes
	return m
}

func abs(x float64) float64 { return max(x, -x) }

// JSON is the report as indented JSON.
func (r Report) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// Table renders the medians for a person.
func (r Report) Table() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d operations per phase, %d workers, median of %d run(s)", r.Operations, r.Workers, r.Runs)
	if r.ToolLatencyMs > 0 {
		fmt.Fprintf(&b, ", the tool answering in %.0f ms", r.ToolLatencyMs)
	}
	b.WriteString("\n\n")
	names := make([]string, 0, 1+len(r.Managers))
	names = append(names, "ceiling", "ceiling-status")
	for _, m := range r.Managers {
		names = append(names, fmt.Sprintf("once-%dm", m))
	}
	names = append(names, "once-1m-shared")
	fmt.Fprintf(&b, "%-14s %9s %7s %8s %8s %8s %10s %8s %9s %8s %8s %8s %8s %9s %5s\n", "phase", "ops/s", "ratio",
		"p50 ms", "p95 ms", "p99 ms", "writes/op", "events", "409s", "api/1k", "etcd/1k", "mgr/1k", "rss MB",
		"etcd B/op", "dups")
	ceiling := r.Medians["ceiling"].OpsPerSecond
	for _, name := range names {
		p, ok := r.Medians[name]
		if !ok {
			continue
		}
		ratio := 0.0
		if ceiling > 0 {
			ratio = p.OpsPerSecond / ceiling
		}
		fmt.Fprintf(&b, "%-14s %9.1f %7.3f %8.0f %8.0f %8.0f %10.2f %8.2f %9d %8.2f %8.2f %8.2f %8.1f %9.0f %5d\n",
			name, p.OpsPerSecond, ratio, p.LatencyP50ms, p.LatencyP95ms, p.LatencyP99ms, p.WritesPerOperation,
			p.EventsPerOperation, p.Conflicts, p.APIServerCPUSecondsPer1000, p.EtcdCPUSecondsPer1000,
			p.ManagerCPUSecondsPer1000, p.ManagerPeakRSSMB, p.EtcdInUseBytesPerOp, p.DuplicateEffects)
	}
	fmt.Fprintf(&b, "\nratio, Once (1 manager) over the ceiling's ops/s, median of the runs' own ratios: %.3f "+
		"(Once %.1f ops/s, ceiling %.1f, medians)", r.Ratio, r.OnceOpsPerS, r.CeilingOpsPerS)
	if r.ToolLatencyMs > 0 {
		b.WriteString(" (the tool's latency, not the API server, bounds Once here)")
	}
	b.WriteString("\n")
	if r.RatioToStatusCeiling > 0 {
		fmt.Fprintf(&b, "Once/ceiling-status (the same, against a ceiling that writes Once's statuses): %.3f\n",
			r.RatioToStatusCeiling)
	}
	if r.CostRatio > 0 {
		fmt.Fprintf(&b, "CPU per operation, Once over ceiling: kube-apiserver %.2f, kube-apiserver and etcd %.2f\n",
			r.APIServerCostRatio, r.CostRatio)
	}
	if r.EtcdInUseBytesPerOp > 0 {
		fmt.Fprintf(&b, "etcd in use per committed operation, after compaction (median): Once %.0f bytes, "+
			"ceiling %.0f; memory per retained operation: make bench BENCH_FLAGS=\"-retained 0,50000,100000\"\n",
			r.EtcdInUseBytesPerOp, r.CeilingEtcdInUseBytesPerOp)
	}
	if r.TwoManagerSpeedup > 0 {
		fmt.Fprintf(&b, "two-manager speedup: %.2f\n", r.TwoManagerSpeedup)
	}
	for _, name := range names[2:] {
		p, ok := r.Medians[name]
		if !ok {
			continue
		}
		fmt.Fprintf(&b, "\n%s writes by request (run with the median ops/s), per operation:\n", name)
		for _, k := range requests(p.Writes) {
			fmt.Fprintf(&b, "  %-42s %8d  %6.2f\n", k, p.Writes[k], float64(p.Writes[k])/float64(p.Operations))
		}
		fmt.Fprintf(&b, "  server latency committedTime−creationTimestamp (1 s resolution): p50 %.0f ms, p99 %.0f ms\n",
			p.ServerLatencyP50ms, p.ServerLatencyP99ms)
	}
	return b.String()
}
