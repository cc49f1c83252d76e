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

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// Run runs the chaos and returns its report. The error is for a run that
// could not be carried out (a process that would not start, a cancelled
// context); a run that found a problem returns a report whose Passed is
// false and whose Problems say why. Run stops every process it started
// before it returns and keeps the logs in the report's LogDir.
func Run(ctx context.Context, cfg Config) (rep Report, err error) {
	cfg = cfg.Defaults()
	if err := cfg.validate(); err != nil {
		return rep, err
	}
	began := time.Now()
	if cfg.Root == "" {
		if cfg.Root, err = harness.Root(); err != nil {
			return rep, err
		}
	}
	if cfg.Dir == "" {
		if cfg.Dir, err = os.MkdirTemp("", "once-chaos-"); err != nil {
			return rep, err
		}
	}
	logDir := filepath.Join(cfg.Dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return rep, err
	}
	// Logs of an earlier run in the same folder would be appended to.
	stale, _ := filepath.Glob(filepath.Join(logDir, "*.log"))
	for _, f := range stale {
		_ = os.Remove(f)
	}
	if cfg.Out == "" {
		cfg.Out = filepath.Join(cfg.Dir, "report.json")
	}
	runLog, err := os.Create(filepath.Join(logDir, "chaos.log"))
	if err != nil {
		return rep, err
	}
	defer func() { _ = runLog.Close() }()
	var logMu sync.Mutex
	out := io.MultiWriter(cfg.Log, runLog)
	logf := func(format string, args ...any) {
		logMu.Lock()
		defer logMu.Unlock()
		_, _ = fmt.Fprintf(out, "%s chaos: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
	}
	logf("seed %d, %d operations, fault rate %v, kill interval %s; state and logs in %s",
		cfg.Seed, cfg.Operations, cfg.FaultRate, cfg.KillInterval, cfg.Dir)

	r := &run{cfg: cfg, logDir: logDir, log: logf}
	defer r.cleanup()
	rep, err = r.run(ctx)
	rep.Seed = cfg.Seed
	rep.LogDir = logDir
	rep.TotalSeconds = time.Since(began).Seconds()
	if err != nil {
		logf("run failed: %v", err)
		return rep, err
	}
	rep.ReportPath = cfg.Out
	data, jerr := rep.JSON()
	if jerr == nil {
		jerr = os.WriteFile(cfg.Out, append(data, '\n'), 0o644)
	}
	if jerr != nil {
		return rep, fmt.Errorf("writing the report: %w", jerr)
	}
	logf("report written to %s", cfg.Out)
	return rep, nil
}

// run is the state of one chaos run.
type run struct {
	cfg    Config
	logDir string
	log    func(format string, args ...any)

	cleanups []func()
	cp       *harness.ControlPlane
	c        client.Client
	metrics  rest.Interface
	ns       string
	// mcpNs is the namespace of the calls through the MCP gateway.
	mcpNs string
	sb    *sandbox.Client
	sup   *supervisor
	// driverWrites and driverSagaWrites count the driver's own writes to
	// operations and to sagas.
	driverWrites, driverSagaWrites atomic.Int64
	// personDecisions counts the resolutions the run wrote as a person.
	personDecisions atomic.Int64
	// last and lastSagas are the last lists of the operations and the
	// sagas, kept in the logs.
	last      []v1.SideEffectOperation
	lastSagas []v1.Saga
}

// onCleanup registers f to run at cleanup, in the reverse order of
// registration.
func (r *run) onCleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *run) cleanup() {
	for _, f := range slices.Backward(r.cleanups) {
		f()
	}
}

func (r *run) run(ctx context.Context) (Report, error) {
	plan, sagas := makePlan(r.cfg), makeSagaPlan(r.cfg)
	if err := r.setUp(ctx, sagas); err != nil {
		return Report{}, err
	}

	before, err := apiWrites(ctx, r.metrics)
	if err != nil {
		return Report{}, err
	}
	driverBefore, driverSagasBefore := r.driverWrites.Load(), r.driverSagaWrites.Load()

	// The chaos: creators, re-applies and kills, then a short tail.
	calm, calmed := make(chan struct{}), make(chan struct{})
	superviseCtx, stopSupervising := context.WithCancel(ctx)
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		r.sup.supervise(superviseCtx, r.cfg.KillInterval, r.cfg.FailpointShare, r.cfg.StallShare, r.cfg.TermShare,
			calm, calmed)
	}()
	r.onCleanup(func() {
		stopSupervising()
		<-supervised
		r.sup.stop()
	})

	chaosStart := time.Now()
	waitMCP := r.startMCP(ctx)
	d := newDriver(r.c, r.ns, r.log)
	d.run(ctx, plan, sagas, r.cfg.Rate, r.cfg.Creators)
	r.log("every operation and saga is created; chaos goes on for %s", r.cfg.Tail)
	if err := sleep(ctx, r.cfg.Tail); err != nil {
		return Report{}, err
	}
	close(calm)
	select {
	case <-calmed:
	case <-ctx.Done():
		return Report{}, ctx.Err()
	}
	chaosSeconds := time.Since(chaosStart).Seconds()
	k := r.sup.counts()
	r.log("chaos over after %.0fs: %d managers started, %d SIGKILLs, %d failpoint kills, %d graceful stops; "+
		"settling (at most %s)", chaosSeconds, k.starts, k.killsRandom, k.killsFailpoint, k.terms, r.cfg.SettleTimeout)

	settleStart := time.Now()
	settled, err := r.settle(ctx, plan, sagas, d)
	if err != nil {
		return Report{}, err
	}
	mcpReport := waitMCP()
	settleSeconds := time.Since(settleStart).Seconds()

	// Stop the manager before counting, so that every write it made is in.
	stopSupervising()
	<-supervised
	r.sup.stop()

	after, err := apiWrites(ctx, r.metrics)
	if err != nil {
		return Report{}, err
	}
	snap, err := r.collect(ctx, plan, sagas, d)
	if err != nil {
		return Report{}, err
	}
	if data, err := json.MarshalIndent(r.last, "", " "); err == nil {
		_ = os.WriteFile(filepath.Join(r.logDir, "objects.json"), data, 0o644)
	}
	if data, err := json.MarshalIndent(r.lastSagas, "", " "); err == nil {
		_ = os.WriteFile(filepath.Join(r.logDir, "sagas.json"), data, 0o644)
	}
	effects, err := r.sb.Effects(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("reading the ledger: %w", err)
	}
	faults, err := r.sb.Faults(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("reading the fault counters: %w", err)
	}

	operations := map[int]bool{}
	for _, o := range snap.objects {
		if o.Saga == "" {
			operations[o.Logical] = true
		}
	}
	rep := Analyse(len(operations), snap.objects, snap.sagas, r.ownEffects(effects))
	rep.Settled = settled
	rep.MCP = mcpReport
	rep.Reapplies = int(d.reapplies.Load())
	rep.SagaReapplies = int(d.sagaReapplies.Load())
	rep.PersonDecisions = int(r.personDecisions.Load())
	for _, ps := range sagas {
		for _, st := range ps.steps {
			switch {
			case st.fault.refusal():
				rep.CompensationRefusalsPlanned++
			case st.fault.fault != "":
				rep.CompensationFaultsPlanned++
			}
		}
	}
	rep.ChaosSeconds, rep.SettleSeconds = chaosSeconds, settleSeconds

	writes := after.Sub(before)
	rep.WritesByRequest = writes.ByRequest()
	rep.WritesByCode = writes
	rep.WritesSagas = writes.Of(sagaResource)
	rep.WritesTotal = writes.Total() - rep.WritesSagas
	rep.WritesConflictsByRequest = writes.Conflicts()
	for _, n := range rep.WritesConflictsByRequest {
		rep.WritesConflicts += n
	}
	rep.WritesDriver = r.driverWrites.Load() - driverBefore
	rep.WritesOperator = rep.WritesTotal - rep.WritesDriver
	rep.WritesPerOperation = ratio64(rep.WritesOperator, rep.Operations+rep.SagaOperations)
	rep.WritesPerObject = ratio64(rep.WritesOperator, rep.Objects+rep.SagaOperationObjects)
	rep.WritesSagasDriver = r.driverSagaWrites.Load() - driverSagasBefore
	rep.WritesPerSaga = ratio64(rep.WritesSagas-rep.WritesSagasDriver, rep.Sagas)

	k = r.sup.counts()
	rep.ManagerStarts = k.starts
	rep.KillsRandom = k.killsRandom
	rep.KillsFailpoint = k.killsFailpoint
	rep.FailpointKills = k.fpKills
	rep.FailpointMisses = k.misses
	rep.Stalls = k.stalls
	rep.UnexpectedExits = len(k.unexpected)
	for _, u := range k.unexpected {
		rep.Findings = append(rep.Findings, Issue{Kind: "ManagerExit", Detail: u})
	}
	rep.GracefulStops = k.terms
	rep.GracefulStopTimeouts = k.termTimeouts
	rep.GracefulStopLongestms = k.termLongest.Milliseconds()
	for _, u := range k.termIssues {
		rep.Findings = append(rep.Findings, Issue{Kind: "ManagerStop", Detail: u})
	}
	rep.FaultsFired, rep.FaultsFiredCancels = map[string]int{}, map[string]int{}
	for _, f := range r.ownRules(faults.Rules, rep.MCP) {
		name, _, _ := strings.Cut(f.Fault, "=")
		switch {
		case f.KeyPrefix != r.ns+"/" && name == sandbox.Fault422:
			// A rule of one compensation's own (F9 of docs/design.md, The fault matrix).
			rep.CompensationRefusalsFired += f.Fired
		case f.KeyPrefix != r.ns+"/":
			rep.CompensationFaultsFired += f.Fired
		default:
			rep.FaultsFired[name] += f.Fired
			if f.Action == sandbox.ActionCancel {
				rep.FaultsFiredCancels[name] += f.Fired
			}
		}
	}
	rep.MaskedDuplicates = rep.FaultsFired[sandbox.Fault409Exists]
	for name, why := range d.refusedReapply {
		rep.Findings = append(rep.Findings, Issue{Kind: "Reapply",
			Detail: fmt.Sprintf("re-applying %s with its unchanged spec was refused: %s", name, why)})
	}
	rep.Passed = len(rep.Problems()) == 0
	if len(d.failed) > 0 {
		// The driver's trouble, not the operator's: the run proves less.
		return rep, fmt.Errorf("%d objects could not be created, e.g. %v", len(d.failed), first(d.failed))
	}
	return rep, nil
}

// setUp starts the control plane, the sandbox tool and the first manager,
// and creates the namespaces, the fault rules (the sagas' compensations'
// own first) and the tools.
func (r *run) setUp(ctx context.Context, sagas []plannedSaga) error {
	cfg := r.cfg
	r.cp = cfg.ControlPlane
	if r.cp == nil {
		r.log("starting a control plane in %s", filepath.Join(cfg.Dir, "controlplane"))
		dir := filepath.Join(cfg.Dir, "controlplane")
		// Stopping is safe to repeat, and needed also after a start that
		// failed half-way (an interrupt, a readiness timeout).
		r.onCleanup(func() {
			cp := &harness.ControlPlane{Root: cfg.Root, Dir: dir}
			if err := cp.Stop(); err != nil {
				r.log("stopping the control plane: %v", err)
			}
		})
		cp, err := harness.StartControlPlane(cfg.Root, dir)
		if err != nil {
			return err
		}
		r.cp = cp
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	restCfg, err := clientcmd.BuildConfigFromFlags("", r.cp.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 200, 400
	restCfg.UserAgent = "once-chaos"
	plain := rest.CopyConfig(restCfg)
	restCfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &writeCounter{next: rt, ops: &r.driverWrites, sagas: &r.driverSagaWrites}
	})
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1.AddToScheme(scheme); err != nil {
		return err
	}
	if r.c, err = client.New(restCfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(plain)
	if err != nil {
		return err
	}
	r.metrics = cs.Discovery().RESTClient()

	sys := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "once-system"}}
	if err := r.c.Create(ctx, sys); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace once-system: %w", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("chaos-s%d-", cfg.Seed)}}
	if err := r.c.Create(ctx, ns); err != nil {
		return fmt.Errorf("creating the run's namespace: %w", err)
	}
	r.ns = ns.Name
	r.log("namespace %s", r.ns)
	if cfg.MCPCalls > 0 {
		mns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: fmt.Sprintf("chaos-s%d-mcp-", cfg.Seed)}}
		if err := r.c.Create(ctx, mns); err != nil {
			return fmt.Errorf("creating the namespace of the MCP calls: %w", err)
		}
		r.mcpNs = mns.Name
		r.log("namespace %s for %d calls through the MCP gateway", r.mcpNs, cfg.MCPCalls)
	}

	addr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	// A ledger left by an earlier run in the same folder would be
	// replayed: start from an empty one.
	ledger := filepath.Join(r.logDir, "ledger.jsonl")
	if err := os.Remove(ledger); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	sb, err := harness.StartSandbox(cfg.Root, addr, ledger, filepath.Join(r.logDir, "sandbox.log"))
	if err != nil {
		return err
	}
	r.onCleanup(func() { sb.Stop(10 * time.Second) })
	r.sb = &sandbox.Client{BaseURL: sb.URL}
	r.log("sandbox tool on %s", sb.URL)
	if !cfg.NoFaults {
		rules := slices.Concat(compensationRules(r.ns, sagas), faultRules(r.ns, cfg.FaultRate, cfg.LieShare))
		if r.mcpNs != "" {
			rules = append(rules, faultRules(r.mcpNs, cfg.FaultRate, cfg.LieShare)...)
		}
		if err := r.sb.SetFaults(ctx, cfg.Seed, rules); err != nil {
			return fmt.Errorf("setting the fault rules: %w", err)
		}
	}

	for _, ns := range []string{r.ns, r.mcpNs} {
		for _, t := range tools {
			if ns == "" {
				continue
			}
			if err := r.c.Create(ctx, t.object(ns, sb.URL)); err != nil {
				return fmt.Errorf("creating tool %s in %s: %w", t.name, ns, err)
			}
		}
	}
	r.sup = newSupervisor(r.cp, cfg, r.logDir, r.log)
	if err := r.sup.start(); err != nil {
		return err
	}
	r.onCleanup(r.sup.stop)
	return r.waitForTools(ctx)
}

// waitForTools waits until the manager found every tool valid.
func (r *run) waitForTools(ctx context.Context) error {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.name
	}
	if err := WaitToolsReady(ctx, r.c, r.ns, names...); err != nil {
		return fmt.Errorf("%w; see %s", err, r.sup.proc.Log)
	}
	return nil
}

// WaitToolsReady waits, up to two minutes, until a manager has found each
// named Tool of ns valid; a Tool found invalid fails it at once.
func WaitToolsReady(ctx context.Context, c client.Client, ns string, names ...string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ready := 0
		for _, name := range names {
			tool := &v1.Tool{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, tool); err != nil {
				return err
			}
			if cond := meta.FindStatusCondition(tool.Status.Conditions, v1.ConditionReady); cond != nil {
				if cond.Status != metav1.ConditionTrue {
					return fmt.Errorf("tool %s is not valid: %s", name, cond.Message)
				}
				ready++
			}
		}
		if ready == len(names) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the tools are not ready after 2m")
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
}

// faultRules are the sandbox's faults for the run's namespace, for each
// tool: the failures of docs/design.md, The fault matrix and, lieShare of the draws, the lies
// of real gateways, proxies and tools, so that about rate of all effect
// requests fail, creates and cancels (the sagas' compensations) alike,
// each drawn by rules of their own so that the report can tell them
// apart; and lookups that fail at the same rate. Every fault drawn stays
// within the tool's declared contract, so that the run can demand zero
// duplicates:
//
//   - 502/503/504-after-commit: any tool (a gateway may say so of any
//     upstream).
//   - resend-401/403/404: only the Native tool, the one that re-sends an
//     unknown attempt with the same key.
//   - 409-exists: only the Lookup and None tools, the ones that may do a
//     conditional create with a client-supplied id. It fires only when an
//     object exists for the key, that is when the operator sent a second
//     create for an effect that exists: each firing is a duplicate the
//     tool prevented (Report.MaskedDuplicates). It never fires on a
//     cancel: the sandbox refuses any second cancel of an object itself
//     (409 already_cancelled; Report.MaskedCancels).
//   - lookup-lag: only lookupLag, below the Lookup tool's lookupDelay minus
//     the longest injected processing time.
//   - hold-before-commit is never drawn: a request held past the declared
//     lookupDelay breaks the tool's contract, and a client can only detect
//     and raise it, not prevent its duplicate. It has its own envtest test.
//
// The rules match the tool key's namespace prefix: the run's keys are far
// below the 255 bytes past which the operator sends a digest instead.
func faultRules(ns string, rate, lieShare float64) []sandbox.FaultRule {
	delay := faultDelay.String()
	failures := []string{
		sandbox.FaultDropAfterCommit,
		sandbox.FaultDelayAfterCommit + "=" + delay,
		sandbox.Fault500AfterCommit,
		sandbox.FaultResetAfterCommit,
		sandbox.FaultResetBeforeCommit,
		sandbox.Fault500BeforeCommit,
		sandbox.Fault503 + "=1",
		sandbox.Fault429 + "=1",
		sandbox.Fault502,
		// A Native re-send sees 409 while the first request is in flight.
		sandbox.FaultDelayBeforeCommit + "=" + delay,
	}
	var rules []sandbox.FaultRule
	for _, t := range tools {
		lies := []string{sandbox.Fault502AfterCommit, sandbox.Fault503AfterCommit, sandbox.Fault504AfterCommit}
		switch t.mode {
		case v1.IdempotencyNative:
			lies = append(lies, sandbox.FaultResend401, sandbox.FaultResend403, sandbox.FaultResend404)
		default:
			lies = append(lies, sandbox.Fault409Exists)
		}
		rules = append(rules, drawRules(t, ns, http.MethodPost, sandbox.ActionCreate, rate, lieShare, failures, lies)...)
		// 409-exists never fires on a cancel, so a cancel's lies go
		// without it.
		cancelLies := slices.DeleteFunc(slices.Clone(lies), func(f string) bool { return f == sandbox.Fault409Exists })
		rules = append(rules, drawRules(t, ns, http.MethodPost, sandbox.ActionCancel, rate, lieShare, failures, cancelLies)...)
		if t.mode == v1.IdempotencyLookup {
			lookupLies := []string{sandbox.FaultLookupLag + "=" + lookupLag.String(), sandbox.FaultLookupRoute404}
			rules = append(rules, drawRules(t, ns, http.MethodGet, "", rate, lieShare,
				[]string{sandbox.FaultLookup503 + "=1"}, lookupLies)...)
		}
	}
	return rules
}

// drawRules are rules for t's requests with method and action (any
// action if empty), tried in order, that fail about rate of them:
// lieShare of those with one of lies, the rest with one of failures, each
// fault of a list equally likely.
func drawRules(t toolDef, ns, method, action string, rate, lieShare float64, failures, lies []string) []sandbox.FaultRule {
	faults := make([]string, 0, len(failures)+len(lies))
	shares := make([]float64, 0, len(failures)+len(lies))
	for _, f := range failures {
		faults, shares = append(faults, f), append(shares, rate*(1-lieShare)/float64(len(failures)))
	}
	for _, f := range lies {
		faults, shares = append(faults, f), append(shares, rate*lieShare/float64(len(lies)))
	}
	rules := make([]sandbox.FaultRule, 0, len(faults))
	left := 1.0 // the chance that no earlier rule fired
	for i, f := range faults {
		if shares[i] <= 0 {
			continue
		}
		// A rule fires on the requests no earlier rule took, so its
		// probability is its share of what is left.
		rules = append(rules, sandbox.FaultRule{Mode: t.sandboxMode(), Collection: t.collection, Method: method,
			Action: action, KeyPrefix: ns + "/", Fault: f, Probability: min(shares[i]/left, 1)})
		left -= shares[i]
	}
	return rules
}

// settle waits until every object and every saga ended, needs a person
// or waits for one, or until the settle timeout; meanwhile it plays the
// person that the plan says decides on a compensation refused for good.
// It reports whether all settled.
func (r *run) settle(ctx context.Context, plan []logicalOp, sagas []plannedSaga, d *driver) (bool, error) {
	deadline := time.Now().Add(r.cfg.SettleTimeout)
	for {
		snap, err := r.collect(ctx, plan, sagas, d)
		if err != nil {
			r.log("listing operations and sagas: %v", err)
		} else {
			n, states := Unsettled(snap.objects)
			decided := r.decide(ctx, sagas, snap.found)
			m, sagaStates := unsettledSagas(sagas, snap, d)
			r.log("%d of %d objects not settled yet: %s; %d of %d sagas: %s; %d decisions by a person",
				n, len(snap.objects), formatCounts(states), m, len(snap.sagas), formatCounts(sagaStates), decided)
			if n == 0 && m == 0 && decided == 0 {
				return true, nil
			}
		}
		if time.Now().After(deadline) {
			r.log("settle timeout %s reached", r.cfg.SettleTimeout)
			return false, nil
		}
		if err := sleep(ctx, 3*time.Second); err != nil {
			return false, err
		}
	}
}

// unsettledSagas counts the sagas that have not settled, and counts every
// saga by state.
func unsettledSagas(sagas []plannedSaga, snap snapshot, d *driver) (int, map[string]int) {
	byName := map[string]*Object{}
	for i := range snap.objects {
		byName[snap.objects[i].Name] = &snap.objects[i]
	}
	waiting := map[string]bool{}
	for name, o := range byName {
		if state, _ := settledState(o, byName); state == stateWaitingForReview {
			waiting[name] = true
		}
	}
	n, states := 0, map[string]int{}
	for _, ps := range sagas {
		for _, name := range ps.names() {
			if !d.isCreated(name) {
				continue
			}
			s := snap.found[name]
			state := stateMissing
			if s != nil {
				state = string(s.Status.State.OrPlanned())
			}
			states[state]++
			if !sagaSettled(ps, s, waiting) {
				n++
			}
		}
	}
	return n, states
}

// snapshot is what collect found.
type snapshot struct {
	// objects are the plain operations, paired with what the driver asked
	// for, and the operations of the sagas.
	objects []Object
	// sagas are the sagas as the analysis sees them; found the Saga
	// objects by name.
	sagas []Saga
	found map[string]*v1.Saga
}

// collect lists the run's operations and sagas, and pairs each with what
// the driver asked for. Objects the driver could not create are left out.
func (r *run) collect(ctx context.Context, plan []logicalOp, sagas []plannedSaga, d *driver) (snapshot, error) {
	var list v1.SideEffectOperationList
	if err := r.c.List(ctx, &list, client.InNamespace(r.ns)); err != nil {
		return snapshot{}, err
	}
	byName := map[string]*v1.SideEffectOperation{}
	var snap snapshot
	for i := range list.Items {
		op := &list.Items[i]
		if _, ok := op.Labels[saga.LabelSaga]; ok {
			snap.objects = append(snap.objects, sagaObject(r.ns, op))
			continue
		}
		byName[op.Name] = op
	}
	for _, op := range plan {
		scope := op.scopeKey(r.ns, reportedToolKey(op, byName))
		for _, po := range op.objects {
			if !d.isCreated(po.name) {
				continue
			}
			o := Object{Name: po.name, Logical: op.index, Role: po.role, Mode: op.tool.mode,
				ScopeKey: scope, BodySHA: bodySHA(po.params)}
			if got := byName[po.name]; got != nil {
				o.Found, o.Status = true, got.Status
			}
			snap.objects = append(snap.objects, o)
		}
	}
	r.last = list.Items
	var sl v1.SagaList
	if err := r.c.List(ctx, &sl, client.InNamespace(r.ns)); err != nil {
		return snapshot{}, err
	}
	snap.found = map[string]*v1.Saga{}
	for i := range sl.Items {
		snap.found[sl.Items[i].Name] = &sl.Items[i]
	}
	for _, ps := range sagas {
		for _, name := range ps.names() {
			if d.isCreated(name) {
				snap.sagas = append(snap.sagas, ps.analysed(r.ns, name, snap.found[name]))
			}
		}
	}
	r.lastSagas = sl.Items
	return snap, nil
}

// reportedToolKey is the key the operator sent to the tool for op, as the
// first of its objects that reports one has it in status.toolIdempotencyKey;
// "" if none does. Every object of a scope reports the same key; an ended
// operation no longer reports it, so for a run's ended operations this is
// "" and the caller derives the key from the scope.
func reportedToolKey(op logicalOp, byName map[string]*v1.SideEffectOperation) string {
	for _, po := range op.objects {
		if o := byName[po.name]; o != nil && o.Status.ToolIdempotencyKey != "" {
			return o.Status.ToolIdempotencyKey
		}
	}
	return ""
}

// ownEffects are the effects of the run's own namespace: those of the
// calls through the MCP gateway are checked on their own (checkMCP).
func (r *run) ownEffects(effects []sandbox.Effect) []sandbox.Effect {
	if r.mcpNs == "" {
		return effects
	}
	var own []sandbox.Effect
	for _, e := range effects {
		if !strings.HasPrefix(e.Key, r.mcpNs+"/") {
			own = append(own, e)
		}
	}
	return own
}

// ownRules are the fault rules of the run's own namespace; the firings of
// the rules of the calls through the MCP gateway are added to m.
func (r *run) ownRules(rules []sandbox.FaultRuleState, m *MCPReport) []sandbox.FaultRuleState {
	if r.mcpNs == "" || m == nil {
		return rules
	}
	var own []sandbox.FaultRuleState
	for _, f := range rules {
		if strings.HasPrefix(f.KeyPrefix, r.mcpNs+"/") {
			m.FaultsFired += f.Fired
			continue
		}
		own = append(own, f)
	}
	return own
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func ratio64(n int64, d int) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// first is some entry of m, for an error message.
func first(m map[string]string) string {
	for k, v := range m {
		return k + ": " + v
	}
	return ""
}
