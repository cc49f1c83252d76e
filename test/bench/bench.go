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

// Package bench is Once's benchmark (make bench): the throughput of a
// plain client doing the minimum writes of an operation on Once's own CRD
// (the ceiling), against Once executing the same number of operations
// against the sandbox tool with one manager and with more, on the local
// control plane. Figures are ratios within one run, never timed
// assertions.
package bench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/chaos"
	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// Config shapes a benchmark.
type Config struct {
	// Operations per phase.
	Operations int
	// Workers are the concurrent creators, and the ceiling's clients.
	Workers int
	// Runs is how many times every phase is repeated; figures are the
	// medians.
	Runs int
	// Managers lists the numbers of managers of the Once phases, e.g. 1, 2.
	Managers []int
	// Reconcilers is every manager's --max-concurrent-reconciles; 0 means
	// Workers, the ceiling's concurrency.
	Reconcilers int
	// StatusCeiling adds a second ceiling, ceiling-status: the same three
	// writes, with the statuses Once's decision core computes.
	StatusCeiling bool
	// SharedKeys adds a phase with one manager in which every two
	// operations share an explicit key and their parameters: one effect
	// per pair, the other a duplicate.
	SharedKeys bool
	// Dir holds the state and logs.
	Dir string
	// Root is the repository's root; found from the working directory if
	// empty.
	Root string
	// SettleTimeout bounds the wait for every operation to commit.
	SettleTimeout time.Duration
	// Log receives progress; nil for none.
	Log io.Writer
	// Shards is every Once phase's --shards, for every manager (0: no
	// sharding).
	Shards int
	// Profile, if above zero, is how long the CPU profiles of the first
	// manager and of the API server run in every Once phase; the manager's
	// heap is profiled at the phase's end.
	Profile time.Duration
	// Retained, if not empty, runs the memory benchmark (memory.go)
	// instead: numbers of committed operations the cluster retains.
	Retained []int
	// RetainedRecords gives every retained operation its scope's record
	// with the outcome: the steady state before outcomes moved to the
	// deletion. Without it the population is today's: operations keyed by
	// their name have no record while they exist.
	RetainedRecords bool
	// Manager is the manager binary of the Once phases; bin/manager if
	// empty. Another release's binary measures it against this one's
	// CRDs and ceiling, in the same run's conditions.
	Manager string
	// MemoryManagers are the manager binaries the memory benchmark
	// compares; bin/manager if empty.
	MemoryManagers []string
	// EtcdQuotaBytes is the memory benchmark's etcd --quota-backend-bytes
	// (default 8 GiB: the default 2 GiB would stop large populations).
	EtcdQuotaBytes int64
	// Throughput are rates (operations per second) at which the memory
	// benchmark says how long etcd's default quota lasts, besides 5.
	Throughput []float64
	// ToolLatency, if above zero, is how long the sandbox takes to answer
	// every create call (the effect) of the Once phases, re-sends with the
	// same key included (its delay-before-commit fault): a
	// tool that waits on something slow, such as a payment on the card
	// network or a model's answer. It shows how throughput grows with
	// managers while their workers, not the API server, are the limit.
	ToolLatency time.Duration
}

// operation, resources: what the phases create and count.
const (
	ceilingTool = "ceiling"
	operation   = "charge.create"
)

// budgetResources are the resources of the write budget (docs/design.md, The write budget);
// events are counted apart.
var budgetResources = map[string]bool{"sideeffectoperations": true, "idempotencyrecords": true, "events": true}

// Run runs the benchmark: cfg.Runs times the ceiling and a Once phase per
// number of managers, each on a control plane of its own.
func Run(ctx context.Context, cfg Config) (Report, error) {
	if cfg.Operations <= 0 || cfg.Workers <= 0 || cfg.Runs <= 0 {
		return Report{}, errors.New("operations, workers and runs must be positive")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 10 * time.Minute
	}
	var err error
	if cfg.Root == "" {
		if cfg.Root, err = harness.Root(); err != nil {
			return Report{}, err
		}
	}
	b := &bench{cfg: cfg}
	var runs []RunResult
	for i := 1; i <= cfg.Runs; i++ {
		r := RunResult{}
		dir := filepath.Join(cfg.Dir, fmt.Sprintf("run-%d", i))
		b.logf("run %d of %d: ceiling, %d operations, %d workers", i, cfg.Runs, cfg.Operations, cfg.Workers)
		if r.Ceiling, err = b.phase(ctx, filepath.Join(dir, "ceiling"), 0, i, false); err != nil {
			return Report{}, fmt.Errorf("run %d, ceiling: %w", i, err)
		}
		b.logf("run %d: ceiling %.0f ops/s", i, r.Ceiling.OpsPerSecond)
		if cfg.StatusCeiling {
			p, err := b.phase(ctx, filepath.Join(dir, "ceiling-status"), 0, i, true)
			if err != nil {
				return Report{}, fmt.Errorf("run %d, ceiling with Once's statuses: %w", i, err)
			}
			b.logf("run %d: ceiling with Once's statuses %.0f ops/s", i, p.OpsPerSecond)
			r.StatusCeiling = &p
		}
		for _, m := range cfg.Managers {
			b.logf("run %d: Once with %d manager(s)", i, m)
			p, err := b.phase(ctx, filepath.Join(dir, fmt.Sprintf("once-%dm", m)), m, i, false)
			if err != nil {
				return Report{}, fmt.Errorf("run %d, Once with %d manager(s): %w", i, m, err)
			}
			b.logf("run %d: Once with %d manager(s) %.0f ops/s, %.2f writes/operation, p50 %.0f ms",
				i, m, p.OpsPerSecond, p.WritesPerOperation, p.LatencyP50ms)
			r.Once = append(r.Once, p)
		}
		if cfg.SharedKeys {
			b.logf("run %d: Once with 1 manager, keys shared by pairs of operations", i)
			p, err := b.phase(ctx, filepath.Join(dir, "once-1m-shared"), 1, i, true)
			if err != nil {
				return Report{}, fmt.Errorf("run %d, Once with shared keys: %w", i, err)
			}
			b.logf("run %d: Once with shared keys %.0f ops/s, %.2f writes/operation, p50 %.0f ms",
				i, p.OpsPerSecond, p.WritesPerOperation, p.LatencyP50ms)
			r.Once = append(r.Once, p)
		}
		runs = append(runs, r)
	}
	rep := Summarize(cfg, runs)
	rep.Path = filepath.Join(cfg.Dir, "bench.json")
	data, err := rep.JSON()
	if err == nil {
		err = os.WriteFile(rep.Path, append(data, '\n'), 0o644)
	}
	return rep, err
}

type bench struct {
	cfg Config
	mu  sync.Mutex
}

func (b *bench) logf(format string, args ...any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, _ = fmt.Fprintf(b.cfg.Log, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// env is one phase's control plane and clients.
type env struct {
	cp      *harness.ControlPlane
	c       client.WithWatch
	metrics rest.Interface
	dir     string
	// procs are the control plane's kube-apiserver and etcd.
	procs controlPlaneProcs
}

// phase runs the ceiling (managers 0) or Once with managers on a control
// plane of its own in dir; with shared, pairs of operations share a key,
// and the ceiling writes the statuses Once's decision core computes.
func (b *bench) phase(ctx context.Context, dir string, managers, run int, shared bool) (Phase, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Phase{}, err
	}
	cpDir := filepath.Join(dir, "controlplane")
	defer func() {
		cp := &harness.ControlPlane{Root: b.cfg.Root, Dir: cpDir}
		if err := cp.Stop(); err != nil {
			b.logf("stopping the control plane: %v", err)
		}
	}()
	cp, err := harness.StartControlPlane(b.cfg.Root, cpDir)
	if err != nil {
		return Phase{}, err
	}
	e, err := newEnv(cp, dir)
	if err != nil {
		return Phase{}, err
	}
	if e.procs, err = findControlPlane(cpDir); err != nil {
		return Phase{}, err
	}
	etcd, err := etcdOf(cpDir)
	if err != nil {
		return Phase{}, err
	}
	before, err := etcd.compactedSize(ctx)
	if err != nil {
		return Phase{}, err
	}
	var p Phase
	if managers == 0 {
		p, err = b.ceiling(ctx, e, shared)
	} else {
		p, err = b.once(ctx, e, managers, run, shared)
	}
	if err != nil {
		return p, err
	}
	// What the phase's operations, as they ended, keep in etcd.
	after, err := etcd.compactedSize(ctx)
	if err != nil {
		return Phase{}, err
	}
	p.EtcdInUseBytesPerOp = (after.InUseBytes - before.InUseBytes) / float64(p.Operations)
	return p, nil
}

func newEnv(cp *harness.ControlPlane, dir string) (*env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// The client's rate limit off: the API server is what is measured.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.UserAgent = "once-bench"
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &env{cp: cp, c: c, metrics: cs.Discovery().RESTClient(), dir: dir}, nil
}

func (e *env) namespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := e.c.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("creating a namespace: %w", err)
	}
	return ns.Name, nil
}

// newOperation is the i-th operation of a phase, keyed by its name.
func newOperation(ns, tool string, i int) *v1.SideEffectOperation {
	return &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("op-%06d", i)},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:    v1.ToolReference{Name: tool},
			Operation:  operation,
			Parameters: &runtime.RawExtension{Raw: []byte(`{"amount":` + strconv.Itoa(100+i) + `,"currency":"eur"}`)},
		},
	}
}

// newSharedOperation is the i-th operation of a phase with shared keys:
// operations 2k and 2k+1 carry the key key-k and the same parameters.
func newSharedOperation(ns, tool string, i int) *v1.SideEffectOperation {
	op := newOperation(ns, tool, i-i%2)
	op.Name = fmt.Sprintf("op-%06d", i)
	op.Spec.IdempotencyKey = fmt.Sprintf("key-%06d", i/2)
	return op
}

// parallel runs f(i) for i in [0, n) on workers goroutines, and returns
// the first error.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// ceiling does the minimum of an operation with a plain client: the
// create, a status write claiming it (Started, with a claim) and a status
// write committing it, each conditional on the resourceVersion the
// previous one returned. No manager runs, and the tool does not exist.
func (b *bench) ceiling(ctx context.Context, e *env, onceStatus bool) (Phase, error) {
	ns, err := e.namespace(ctx, "bench-ceiling-")
	if err != nil {
		return Phase{}, err
	}
	before, err := chaos.APIWrites(ctx, e.metrics, budgetResources)
	if err != nil {
		return Phase{}, err
	}
	cpuBefore, err := e.usage(ctx, nil)
	if err != nil {
		return Phase{}, err
	}
	n := b.cfg.Operations
	lat := make([]float64, n)
	began := time.Now()
	err = parallel(ctx, n, b.cfg.Workers, func(ctx context.Context, i int) error {
		t0 := time.Now()
		op := newOperation(ns, ceilingTool, i)
		if err := e.c.Create(ctx, op); err != nil {
			return fmt.Errorf("creating %s: %w", op.Name, err)
		}
		claim, commit := minimalStatuses(op)
		if onceStatus {
			var err error
			if claim, commit, err = protocolStatuses(ns, op); err != nil {
				return err
			}
		}
		op.Status = claim
		if err := e.c.Status().Update(ctx, op); err != nil {
			return fmt.Errorf("claiming %s: %w", op.Name, err)
		}
		op.Status = commit
		if err := e.c.Status().Update(ctx, op); err != nil {
			return fmt.Errorf("committing %s: %w", op.Name, err)
		}
		lat[i] = float64(time.Since(t0).Microseconds()) / 1000
		return nil
	})
	elapsed := time.Since(began)
	if err != nil {
		return Phase{}, err
	}
	cpuAfter, err := e.usage(ctx, nil)
	if err != nil {
		return Phase{}, err
	}
	after, err := chaos.APIWrites(ctx, e.metrics, budgetResources)
	if err != nil {
		return Phase{}, err
	}
	name := "ceiling"
	if onceStatus {
		name = "ceiling-status"
	}
	p := Phase{Name: name, Operations: n, Seconds: elapsed.Seconds(),
		OpsPerSecond: float64(n) / elapsed.Seconds()}
	p.setLatency(lat)
	p.setWrites(after.Sub(before))
	p.setCPU(cpuAfter.since(cpuBefore))
	return p, nil
}

// once creates the operations against the Native tool of the sandbox and
// lets managers execute them.
func (b *bench) once(ctx context.Context, e *env, managers, run int, shared bool) (Phase, error) {
	ns, sbProc, tool, err := b.sandboxTool(ctx, e, managers)
	if sbProc != nil {
		defer sbProc.Stop(10 * time.Second)
	}
	if err != nil {
		return Phase{}, err
	}
	sb := &sandbox.Client{BaseURL: sbProc.URL}
	if b.cfg.ToolLatency > 0 {
		slow := sandbox.FaultRule{Action: sandbox.ActionCreate,
			Fault: sandbox.FaultDelayBeforeCommit + "=" + b.cfg.ToolLatency.String()}
		if err := sb.SetFaults(ctx, 1, []sandbox.FaultRule{slow}); err != nil {
			return Phase{}, fmt.Errorf("giving the sandbox a latency of %s: %w", b.cfg.ToolLatency, err)
		}
	}

	prof := &profiler{e: e}
	procs, metricsAddrs, err := b.startManagers(e, managers, run, prof)
	defer func() {
		for _, p := range procs {
			p.Stop(15 * time.Second)
		}
	}()
	if err != nil {
		return Phase{}, err
	}
	if err := chaos.WaitToolsReady(ctx, e.c, ns, tool.Name); err != nil {
		return Phase{}, err
	}
	before, err := chaos.APIWrites(ctx, e.metrics, budgetResources)
	if err != nil {
		return Phase{}, err
	}

	n := b.cfg.Operations
	w, err := watchCommits(ctx, e.c, ns, n)
	if err != nil {
		return Phase{}, err
	}
	defer w.stop()
	cpuBefore, err := e.usage(ctx, metricsAddrs)
	if err != nil {
		return Phase{}, err
	}
	created := make([]time.Time, n)
	if prof.manager != "" {
		prof.cpu(ctx, b.cfg.Profile)
	}
	began := time.Now()
	err = parallel(ctx, n, b.cfg.Workers, func(ctx context.Context, i int) error {
		op := newOperation(ns, tool.Name, i)
		if shared {
			op = newSharedOperation(ns, tool.Name, i)
		}
		created[i] = time.Now()
		if err := e.c.Create(ctx, op); err != nil {
			return fmt.Errorf("creating %s: %w", op.Name, err)
		}
		return nil
	})
	if err != nil {
		return Phase{}, err
	}
	b.logf("%d operations created in %.1fs; waiting for every one to commit", n, time.Since(began).Seconds())
	select {
	case <-w.done:
	case <-time.After(b.cfg.SettleTimeout):
		return Phase{}, fmt.Errorf("%d of %d operations committed after %s", w.count(), n, b.cfg.SettleTimeout)
	case <-ctx.Done():
		return Phase{}, ctx.Err()
	}
	last := w.last()
	cpuAfter, err := e.usage(ctx, metricsAddrs)
	if err != nil {
		return Phase{}, err
	}
	if prof.manager != "" {
		prof.heap(ctx)
		if err := prof.wait(); err != nil {
			return Phase{}, err
		}
		b.logf("profiles in %s", e.dir)
	}
	peak, err := peakRSS(procs)
	if err != nil {
		return Phase{}, err
	}
	// Stop the managers before counting, so that every write they made
	// is in.
	for _, p := range procs {
		p.Stop(15 * time.Second)
	}
	procs = nil
	after, err := chaos.APIWrites(ctx, e.metrics, budgetResources)
	if err != nil {
		return Phase{}, err
	}
	summary, err := sb.Summary(ctx)
	if err != nil {
		return Phase{}, fmt.Errorf("reading the ledger: %w", err)
	}

	name, want := fmt.Sprintf("once-%dm", managers), n
	if shared {
		name, want = name+"-shared", (n+1)/2
	}
	if distinct := summary.Effects - summary.Duplicates; distinct != want {
		return Phase{}, fmt.Errorf("the ledger holds effects for %d keys of %d operations, want %d", distinct, n, want)
	}
	elapsed := last.Sub(began)
	p := Phase{Name: name, Managers: managers, SharedKeys: shared, Operations: n,
		Seconds: elapsed.Seconds(), OpsPerSecond: float64(n) / elapsed.Seconds(),
		ManagerPeakRSSMB: peak / (1 << 20),
		Effects:          summary.Effects, DuplicateEffects: summary.Duplicates}
	seen := w.times()
	lat := make([]float64, 0, n)
	for i, t0 := range created {
		if t, ok := seen[fmt.Sprintf("op-%06d", i)]; ok {
			lat = append(lat, float64(t.Sub(t0).Microseconds())/1000)
		}
	}
	p.setLatency(lat)
	if err := p.setServerLatency(ctx, e.c, ns); err != nil {
		return Phase{}, err
	}
	p.setWrites(after.Sub(before))
	p.setCPU(cpuAfter.since(cpuBefore))
	return p, nil
}

// sandboxTool creates the phase's namespaces, starts the sandbox and
// creates a Native tool in front of it. The sandbox is returned, to be
// stopped, also on an error after it started.
func (b *bench) sandboxTool(ctx context.Context, e *env, managers int) (string, *harness.Sandbox, *v1.Tool, error) {
	sys := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "once-system"}}
	if err := e.c.Create(ctx, sys); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, nil, fmt.Errorf("creating namespace once-system: %w", err)
	}
	ns, err := e.namespace(ctx, fmt.Sprintf("bench-once-%dm-", managers))
	if err != nil {
		return "", nil, nil, err
	}
	addr, err := harness.FreeAddr()
	if err != nil {
		return "", nil, nil, err
	}
	sbProc, err := harness.StartSandbox(b.cfg.Root, addr, filepath.Join(e.dir, "ledger.jsonl"),
		filepath.Join(e.dir, "sandbox.log"))
	if err != nil {
		return "", nil, nil, err
	}
	tool := chaos.NativeTool(ns, sbProc.URL)
	if b.cfg.ToolLatency > 0 {
		// A slow tool, not a lost answer: the call's timeout leaves room.
		tool.Spec.Timeout = &metav1.Duration{Duration: b.cfg.ToolLatency + tool.Spec.Timeout.Duration}
	}
	if err := e.c.Create(ctx, tool); err != nil {
		return "", sbProc, nil, fmt.Errorf("creating tool %s: %w", tool.Name, err)
	}
	return ns, sbProc, tool, nil
}

// startManagers starts the phase's managers, the first with pprof if the
// benchmark profiles. It returns the processes started, also on an error.
func (b *bench) startManagers(e *env, managers, run int, prof *profiler) ([]*harness.Process, []string, error) {
	var procs []*harness.Process
	var metricsAddrs []string
	for m := 1; m <= managers; m++ {
		maddr, err := harness.FreeAddr()
		if err != nil {
			return procs, nil, err
		}
		// The same concurrency as the ceiling's clients, all of it for the
		// one tool in one namespace: the bench measures Once, not the
		// bulkhead or the namespace's share.
		reconcilers := strconv.Itoa(cmp.Or(b.cfg.Reconcilers, b.cfg.Workers))
		args := []string{"--max-concurrent-reconciles=" + reconcilers, "--max-workers-per-tool=" + reconcilers,
			"--max-workers-per-namespace=" + reconcilers,
			fmt.Sprintf("--shards=%d", b.cfg.Shards)}
		if m == 1 && b.cfg.Profile > 0 {
			if prof.manager, err = harness.FreeAddr(); err != nil {
				return procs, nil, err
			}
			args = append(args, "--pprof-bind-address="+prof.manager)
		}
		p, err := e.cp.StartManager(harness.ManagerOptions{
			Binary:      cmp.Or(b.cfg.Manager, filepath.Join(b.cfg.Root, "bin", "manager")),
			Holder:      fmt.Sprintf("bench-r%d-%dm-m%d", run, managers, m),
			MetricsAddr: maddr,
			Args:        args,
			Log:         filepath.Join(e.dir, fmt.Sprintf("manager-%d.log", m)),
		})
		if err != nil {
			return procs, nil, err
		}
		procs, metricsAddrs = append(procs, p), append(metricsAddrs, maddr)
	}
	return procs, metricsAddrs, nil
}

// peakRSS is the largest VmHWM of procs, in bytes.
func peakRSS(procs []*harness.Process) (float64, error) {
	var peak float64
	for _, p := range procs {
		status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
		if err != nil {
			return 0, err
		}
		hwm, err := ParseVmHWM(string(status))
		if err != nil {
			return 0, err
		}
		peak = max(peak, hwm)
	}
	return peak, nil
}

// managersCPU is the sum of process_cpu_seconds_total over the managers'
// metrics endpoints, which may take a moment to listen after a start.
func managersCPU(ctx context.Context, addrs []string) (float64, error) {
	var sum float64
	for _, addr := range addrs {
		var v float64
		var err error
		for range 100 {
			if v, err = scrape(ctx, "http://"+addr+"/metrics", "process_cpu_seconds_total"); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return 0, fmt.Errorf("reading the CPU seconds of the manager at %s: %w", addr, err)
		}
		sum += v
	}
	return sum, nil
}

func scrape(ctx context.Context, url, name string) (float64, error) {
	body, err := get(ctx, url)
	if err != nil {
		return 0, err
	}
	defer func() { _ = body.Close() }()
	return ParseGauge(body, name)
}

// commitWatcher records when a watch first saw each operation Committed.
type commitWatcher struct {
	mu     sync.Mutex
	seen   map[string]time.Time
	latest time.Time
	want   int
	done   chan struct{}
	cancel context.CancelFunc
}

// watchCommits watches the operations of ns from now on (re-watching
// should the API server end the watch) until want of them committed.
func watchCommits(ctx context.Context, c client.WithWatch, ns string, want int) (*commitWatcher, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &commitWatcher{seen: map[string]time.Time{}, want: want, done: make(chan struct{}), cancel: cancel}
	wi, err := c.Watch(ctx, &v1.SideEffectOperationList{}, client.InNamespace(ns))
	if err != nil {
		cancel()
		return nil, fmt.Errorf("watching operations: %w", err)
	}
	go func() {
		for {
			for ev := range wi.ResultChan() {
				op, ok := ev.Object.(*v1.SideEffectOperation)
				if ok && op.Status.State == v1.StateCommitted && w.record(op.Name, time.Now()) {
					close(w.done)
					wi.Stop()
					return
				}
			}
			if ctx.Err() != nil {
				return
			}
			// A watch without a resourceVersion starts with every
			// existing object: nothing committed meanwhile is missed.
			for {
				if wi, err = c.Watch(ctx, &v1.SideEffectOperationList{}, client.InNamespace(ns)); err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	}()
	return w, nil
}

// record notes name committed at t, once; it reports whether every
// wanted operation is now seen.
func (w *commitWatcher) record(name string, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[name]; ok {
		return false
	}
	w.seen[name] = t
	w.latest = t
	return len(w.seen) == w.want
}

func (w *commitWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

func (w *commitWatcher) last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.latest
}

func (w *commitWatcher) times() map[string]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.seen)
}

func (w *commitWatcher) stop() { w.cancel() }

// setLatency sets the percentiles of the latencies in ms.
func (p *Phase) setLatency(ms []float64) {
	p.LatencyP50ms, p.LatencyP95ms, p.LatencyP99ms = chaos.Percentile(ms, 50), chaos.Percentile(ms, 95), chaos.Percentile(ms, 99)
}

// setServerLatency sets the percentiles of committedTime −
// creationTimestamp, both of 1 s resolution, over the operations of ns.
func (p *Phase) setServerLatency(ctx context.Context, c client.Client, ns string) error {
	var list v1.SideEffectOperationList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return err
	}
	var ms []float64
	for _, op := range list.Items {
		if op.Status.CommittedTime != nil {
			ms = append(ms, float64(op.Status.CommittedTime.Sub(op.CreationTimestamp.Time).Milliseconds()))
		}
	}
	p.ServerLatencyP50ms, p.ServerLatencyP99ms = chaos.Percentile(ms, 50), chaos.Percentile(ms, 99)
	return nil
}

// setWrites sets the write counts from the API server's counters.
func (p *Phase) setWrites(w chaos.Writes) {
	p.Writes = w.ByRequest()
	p.Conflicts = 0
	for _, n := range w.Conflicts() {
		p.Conflicts += n
	}
	events := w.Of("events")
	p.WritesPerOperation = float64(w.Total()-events) / float64(p.Operations)
	p.EventsPerOperation = float64(events) / float64(p.Operations)
}

// requests lists the writes by request, largest first, for the table.
func requests(m map[string]int64) []string {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b string) int {
		if m[a] != m[b] {
			return int(m[b] - m[a])
		}
		return strings.Compare(a, b)
	})
	return keys
}
