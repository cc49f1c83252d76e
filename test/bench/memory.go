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
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/google/pprof/profile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/chaos"
	"github.com/once-dev/once/test/harness"
)

// The memory benchmark: how much a manager holds per retained operation.
// On one control plane it grows a population of operations that are
// already Committed, each with its scope's record holding the outcome (the
// steady state of a cluster after the work is done), and at every size it
// starts a fresh manager of each binary compared, waits until the manager
// has passed over every operation and record, and reads its memory.

// MemoryPoint is one manager's memory over one population.
type MemoryPoint struct {
	// Binary is the manager's binary, as given.
	Binary string `json:"binary"`
	// Retained is the number of committed operations (and records).
	Retained int `json:"retained"`
	// RSS and HWM (peak RSS) from /proc/<pid>/status, in bytes.
	RSSBytes float64 `json:"rss_bytes"`
	HWMBytes float64 `json:"hwm_bytes"`
	// HeapInuse and HeapAlloc from the manager's metrics
	// (go_memstats_heap_inuse_bytes, go_memstats_heap_alloc_bytes): the
	// live heap and whatever garbage the last collection left, in bytes.
	HeapInuseBytes float64 `json:"heap_inuse_bytes"`
	HeapAllocBytes float64 `json:"heap_alloc_bytes"`
	// LiveHeapBytes is the live heap as of the last collection: the heap
	// profile's in-use bytes, which the runtime estimates from its samples.
	LiveHeapBytes float64 `json:"live_heap_bytes"`
	// Reconciled is how many passes over operations the manager had made
	// when it settled (controller_runtime_reconcile_total).
	Reconciled float64 `json:"operations_reconciled"`
	// SyncSeconds is from the manager's start to its settling.
	SyncSeconds float64 `json:"sync_seconds"`
}

// MemorySlope is what one more retained operation costs a binary: the
// least-squares slope of each figure over the populations, in bytes.
type MemorySlope struct {
	Binary         string  `json:"binary"`
	RSSPerOp       float64 `json:"rss_bytes_per_op"`
	HWMPerOp       float64 `json:"hwm_bytes_per_op"`
	HeapInusePerOp float64 `json:"heap_inuse_bytes_per_op"`
	HeapAllocPerOp float64 `json:"heap_alloc_bytes_per_op"`
	LiveHeapPerOp  float64 `json:"live_heap_bytes_per_op"`
}

// MemoryReport is the memory benchmark's result.
type MemoryReport struct {
	// Points are, per binary and population, the medians of the runs'
	// samples: every figure below is computed from them.
	Points []MemoryPoint `json:"points"`
	// Samples are every run's measurement: a fresh manager each.
	Samples []MemoryPoint `json:"samples"`
	Slopes  []MemorySlope `json:"slopes"`
	// PerOp is each point's figures over its population: (figure at n −
	// figure at 0) / n, for the binaries measured at 0 too.
	PerOp  []MemoryPerOp  `json:"per_op"`
	Sizes  RetainedSizes  `json:"sizes"`
	Etcd   EtcdRetained   `json:"etcd"`
	Path   string         `json:"-"`
	Config map[string]any `json:"config"`
}

// MemoryPerOp is what each retained operation costs at one population
// size: the difference to the empty cluster's figure, over the size.
type MemoryPerOp struct {
	Binary         string  `json:"binary"`
	Retained       int     `json:"retained"`
	RSSPerOp       float64 `json:"rss_bytes_per_op"`
	HeapInusePerOp float64 `json:"heap_inuse_bytes_per_op"`
	LiveHeapPerOp  float64 `json:"live_heap_bytes_per_op"`
}

// EtcdRetained is what the retained population costs etcd: its sizes
// after a compaction to the current revision at every population size,
// what one more operation and one more record keep in use, and how long
// etcd's default quota lasts at that cost.
type EtcdRetained struct {
	Points []EtcdPoint `json:"points"`
	// InUsePerOp is the least-squares slope of the in-use bytes over the
	// populations: one retained operation as the population is (with its
	// record under -retained-records).
	InUsePerOp float64 `json:"in_use_bytes_per_op"`
	// Records is how many records were created apart, after the manager
	// points, for InUsePerRecord: one record holding its operation's
	// outcome, as a deleted operation leaves it.
	Records        int     `json:"records"`
	InUsePerRecord float64 `json:"in_use_bytes_per_record"`
	// QuotaBytes is the quota the local etcd ran with (raised for the
	// measurement); QuotaHours the hours until etcd's default quota (2
	// GiB) at InUsePerOp bytes an operation, by throughput (ops/s).
	QuotaBytes int64              `json:"quota_backend_bytes"`
	QuotaHours map[string]float64 `json:"hours_to_2gib_quota"`
}

// EtcdPoint is etcd's size after a compaction with retained operations.
type EtcdPoint struct {
	Retained int `json:"retained"`
	EtcdSize
}

// RetainedSizes are the sizes of one retained operation and its record as
// the API server serves them (JSON), for comparison with the slopes.
type RetainedSizes struct {
	OperationJSON     int `json:"operation_json_bytes"`
	RecordJSON        int `json:"record_json_bytes"`
	LastApplied       int `json:"last_applied_bytes"`
	ManagedFieldsJSON int `json:"managed_fields_json_bytes"`
	ResultJSON        int `json:"result_json_bytes"`
	ParametersJSON    int `json:"parameters_json_bytes"`
}

// memoryTool is the tool the retained operations name; no call is made.
const memoryTool = "payments"

// settleQuiet is how long the manager's queue must stay empty, polled
// every second, before its memory is read.
const settleQuiet = 5

// Memory runs the memory benchmark over cfg.Retained with each of
// cfg.MemoryManagers (bin/manager if none), on one control plane in
// cfg.Dir, and writes memory.json there.
func Memory(ctx context.Context, cfg Config) (MemoryReport, error) {
	if len(cfg.Retained) == 0 {
		return MemoryReport{}, errors.New("no population sizes to measure")
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.SettleTimeout == 0 {
		cfg.SettleTimeout = 10 * time.Minute
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 32
	}
	var err error
	if cfg.Root == "" {
		if cfg.Root, err = harness.Root(); err != nil {
			return MemoryReport{}, err
		}
	}
	binaries := cfg.MemoryManagers
	if len(binaries) == 0 {
		binaries = []string{filepath.Join(cfg.Root, "bin", "manager")}
	}
	sizes := slices.Sorted(slices.Values(cfg.Retained))
	runs := max(cfg.Runs, 1)
	b := &bench{cfg: cfg}
	dir := filepath.Join(cfg.Dir, "memory")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return MemoryReport{}, err
	}
	cpDir := filepath.Join(dir, "controlplane")
	defer func() {
		cp := &harness.ControlPlane{Root: cfg.Root, Dir: cpDir}
		if err := cp.Stop(); err != nil {
			b.logf("stopping the control plane: %v", err)
		}
	}()
	// etcd's default quota (2 GiB of file) would stop the largest
	// populations: etcd reads its flags from ETCD_* variables too, and the
	// control plane's processes inherit the bench's environment.
	quota := cmp.Or(cfg.EtcdQuotaBytes, 8<<30)
	restore := setEnv("ETCD_QUOTA_BACKEND_BYTES", strconv.FormatInt(quota, 10))
	cp, err := harness.StartControlPlane(cfg.Root, cpDir)
	restore()
	if err != nil {
		return MemoryReport{}, err
	}
	e, err := newEnv(cp, dir)
	if err != nil {
		return MemoryReport{}, err
	}
	etcd, err := etcdOf(cpDir)
	if err != nil {
		return MemoryReport{}, err
	}
	ns, err := e.memoryNamespace(ctx)
	if err != nil {
		return MemoryReport{}, err
	}
	rep := MemoryReport{Config: map[string]any{"retained": sizes, "binaries": binaries, "workers": cfg.Workers,
		"records": cfg.RetainedRecords, "runs": runs}}
	rep.Etcd.QuotaBytes = quota
	created := 0
	for _, n := range sizes {
		if n > created {
			b.logf("memory: creating operations %d to %d", created, n-1)
			began := time.Now()
			if err := e.createRetained(ctx, ns, created, n, max(cfg.Workers, 64), cfg.RetainedRecords); err != nil {
				return MemoryReport{}, err
			}
			b.logf("memory: %d operations created in %.0fs", n-created, time.Since(began).Seconds())
			created = n
		}
		if len(rep.Etcd.Points) == 0 || rep.Etcd.Points[len(rep.Etcd.Points)-1].Retained != n {
			sz, err := etcd.compactedSize(ctx)
			if err != nil {
				return MemoryReport{}, err
			}
			b.logf("memory: etcd with %d retained, compacted: %.1f MiB in use, file %.1f MiB", n,
				sz.InUseBytes/(1<<20), sz.FileBytes/(1<<20))
			rep.Etcd.Points = append(rep.Etcd.Points, EtcdPoint{Retained: n, EtcdSize: sz})
		}
		for i, bin := range binaries {
			var samples []MemoryPoint
			for r := range runs {
				pt, err := b.measureManager(ctx, e, bin, n, i*runs+r)
				if err != nil {
					return MemoryReport{}, fmt.Errorf("%d retained, %s: %w", n, bin, err)
				}
				b.logf("memory: %s, %d retained, run %d: RSS %.1f MiB, peak %.1f MiB, heap in use %.1f MiB",
					filepath.Base(bin), n, r+1, pt.RSSBytes/(1<<20), pt.HWMBytes/(1<<20), pt.HeapInuseBytes/(1<<20))
				samples = append(samples, pt)
			}
			rep.Samples = append(rep.Samples, samples...)
			rep.Points = append(rep.Points, MedianPoint(samples))
		}
	}
	if created > 0 {
		if rep.Sizes, err = e.retainedSizes(ctx, ns); err != nil {
			return MemoryReport{}, err
		}
		if err := b.recordCost(ctx, e, etcd, ns, &rep.Etcd, min(created, 10000)); err != nil {
			return MemoryReport{}, err
		}
	}
	rep.Slopes = Slopes(rep.Points, binaries)
	rep.PerOp = PerOp(rep.Points)
	rep.Etcd.InUsePerOp = etcdSlope(rep.Etcd.Points)
	rep.Etcd.QuotaHours = map[string]float64{}
	for _, rate := range append([]float64{5}, cfg.Throughput...) {
		rep.Etcd.QuotaHours[strconv.FormatFloat(rate, 'f', -1, 64)] = HoursToQuota(rep.Etcd.InUsePerOp, rate)
	}
	rep.Path = filepath.Join(cfg.Dir, "memory.json")
	data, err := json.MarshalIndent(rep, "", "  ")
	if err == nil {
		err = os.WriteFile(rep.Path, append(data, '\n'), 0o644)
	}
	return rep, err
}

// setEnv sets the variable name of this process to value, and returns
// what puts it back.
func setEnv(name, value string) (restore func()) {
	old, had := os.LookupEnv(name)
	_ = os.Setenv(name, value)
	return func() {
		if had {
			_ = os.Setenv(name, old)
		} else {
			_ = os.Unsetenv(name)
		}
	}
}

// recordCost measures what a record holding an outcome keeps in etcd:
// it creates n records apart, each the record of one of the first n
// retained operations under a name of its own (so that each is a record
// more, whatever the population holds; no manager runs any more, so
// nothing collects them), compacts, and divides the difference by n.
func (b *bench) recordCost(ctx context.Context, e *env, etcd *etcdClient, ns string, out *EtcdRetained, n int) error {
	before, err := etcd.compactedSize(ctx)
	if err != nil {
		return err
	}
	b.logf("memory: creating %d records to measure one", n)
	err = parallel(ctx, n, max(b.cfg.Workers, 64), func(ctx context.Context, i int) error {
		op, err := retainedOperation(ns, i)
		if err != nil {
			return err
		}
		rec := retainedRecord(op, op.Status)
		// Another name than the scope's, so that it is a record more
		// whatever the population holds.
		rec.Name = fmt.Sprintf("%s-r", rec.Name)
		if err := e.c.Create(ctx, rec); err != nil {
			return fmt.Errorf("creating record %s: %w", rec.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	after, err := etcd.compactedSize(ctx)
	if err != nil {
		return err
	}
	out.Records = n
	out.InUsePerRecord = (after.InUseBytes - before.InUseBytes) / float64(n)
	return nil
}

// MedianPoint is the median of each figure over samples of one binary and
// population: the manager restarted on the same objects, so that one slow
// collection or a neighbour's burst does not make the figure.
func MedianPoint(samples []MemoryPoint) MemoryPoint {
	if len(samples) == 0 {
		return MemoryPoint{}
	}
	med := func(f func(MemoryPoint) float64) float64 {
		xs := make([]float64, len(samples))
		for i, p := range samples {
			xs[i] = f(p)
		}
		return Median(xs)
	}
	return MemoryPoint{Binary: samples[0].Binary, Retained: samples[0].Retained,
		RSSBytes:       med(func(p MemoryPoint) float64 { return p.RSSBytes }),
		HWMBytes:       med(func(p MemoryPoint) float64 { return p.HWMBytes }),
		HeapInuseBytes: med(func(p MemoryPoint) float64 { return p.HeapInuseBytes }),
		HeapAllocBytes: med(func(p MemoryPoint) float64 { return p.HeapAllocBytes }),
		LiveHeapBytes:  med(func(p MemoryPoint) float64 { return p.LiveHeapBytes }),
		Reconciled:     med(func(p MemoryPoint) float64 { return p.Reconciled }),
		SyncSeconds:    med(func(p MemoryPoint) float64 { return p.SyncSeconds }),
	}
}

// PerOp is, for every point of a binary also measured at 0 retained, its
// RSS, heap in use and live heap over the empty cluster's, per retained
// operation.
func PerOp(points []MemoryPoint) []MemoryPerOp {
	zero := map[string]MemoryPoint{}
	for _, p := range points {
		if p.Retained == 0 {
			zero[p.Binary] = p
		}
	}
	var out []MemoryPerOp
	for _, p := range points {
		z, ok := zero[p.Binary]
		if !ok || p.Retained == 0 {
			continue
		}
		n := float64(p.Retained)
		out = append(out, MemoryPerOp{Binary: p.Binary, Retained: p.Retained,
			RSSPerOp: (p.RSSBytes - z.RSSBytes) / n, HeapInusePerOp: (p.HeapInuseBytes - z.HeapInuseBytes) / n,
			LiveHeapPerOp: (p.LiveHeapBytes - z.LiveHeapBytes) / n})
	}
	return out
}

// etcdSlope is the least-squares slope of etcd's in-use bytes over the
// populations.
func etcdSlope(points []EtcdPoint) float64 {
	xs, ys := make([]float64, len(points)), make([]float64, len(points))
	for i, p := range points {
		xs[i], ys[i] = float64(p.Retained), p.InUseBytes
	}
	return LeastSquaresSlope(xs, ys)
}

// memoryNamespace makes the namespaces and the tool the operations name.
func (e *env) memoryNamespace(ctx context.Context) (string, error) {
	sys := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "once-system"}}
	if err := e.c.Create(ctx, sys); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("creating namespace once-system: %w", err)
	}
	ns, err := e.namespace(ctx, "bench-memory-")
	if err != nil {
		return "", err
	}
	// Nothing listens there: no operation is executed.
	tool := chaos.NativeTool(ns, "http://127.0.0.1:9")
	tool.Name = memoryTool
	if err := e.c.Create(ctx, tool); err != nil {
		return "", fmt.Errorf("creating tool %s: %w", tool.Name, err)
	}
	return ns, nil
}

// createRetained creates operations [from, to) of ns, each as a client
// that applied it with kubectl and a manager that committed it would
// leave it: the operation, its scope's record holding the outcome, and
// the operation's Committed status. Three writes each.
func (e *env) createRetained(ctx context.Context, ns string, from, to, workers int, records bool) error {
	return parallel(ctx, to-from, workers, func(ctx context.Context, i int) error {
		op, err := retainedOperation(ns, from+i)
		if err != nil {
			return err
		}
		st := op.Status
		if err := e.c.Create(ctx, op); err != nil {
			return fmt.Errorf("creating %s: %w", op.Name, err)
		}
		if records {
			rec := retainedRecord(op, st)
			if err := e.c.Create(ctx, rec); err != nil {
				return fmt.Errorf("creating record %s: %w", rec.Name, err)
			}
		}
		op.Status = st
		if err := e.c.Status().Update(ctx, op); err != nil {
			return fmt.Errorf("committing %s: %w", op.Name, err)
		}
		return nil
	})
}

// retainedOperation is the i-th retained operation, its status already
// filled in (the create drops it; the caller writes it afterwards).
func retainedOperation(ns string, i int) (*v1.SideEffectOperation, error) {
	name := fmt.Sprintf("order-%06d-charge", i)
	ref := v1.ToolReference{Kind: v1.ToolKindTool, Name: memoryTool}
	params := fmt.Sprintf(`{"amount":%d,"currency":"eur","customer":"cus_%08d",`+
		`"description":"Order %06d: 2 items, shipping to the customer's default address",`+
		`"metadata":{"order":"ord_%06d","cart":"cart_%08d","channel":"web","campaign":"winter-sale"},`+
		`"paymentMethod":"pm_card_%08d","statementDescriptor":"ONCE SHOP %06d","captureMethod":"automatic"}`,
		1000+i, i, i, i, i, i, i)
	op := &v1.SideEffectOperation{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "SideEffectOperation"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:    ref,
			Operation:  operation,
			Parameters: &runtime.RawExtension{Raw: []byte(params)},
		},
	}
	// kubectl apply keeps what it applied in this annotation.
	applied, err := json.Marshal(op)
	if err != nil {
		return nil, err
	}
	op.Annotations = map[string]string{corev1.LastAppliedConfigAnnotation: string(applied) + "\n"}
	// A manager gives an operation this finalizer before its first claim.
	op.Finalizers = []string{v1.FinalizerRecord}

	hash, _, err := protocol.RequestHash(ref, operation, []byte(params))
	if err != nil {
		return nil, err
	}
	started := metav1.NewTime(time.Now().Add(-2 * time.Second).Truncate(time.Second))
	done := metav1.NewTime(started.Add(time.Second))
	expiry := metav1.NewTime(done.Add(v1.DefaultRetention))
	id := fmt.Sprintf("ch_%024d", i)
	result := retainedResult(i, id)
	// A first attempt that committed, as the manager leaves it: no
	// observation, no tool key, record name, mode or promise once ended,
	// and the newest transition's message in Ready alone.
	st := v1.SideEffectOperationStatus{
		State:             v1.StateCommitted,
		IdempotencyKey:    name,
		RequestHash:       hash,
		Attempts:          1,
		ExternalObjectID:  id,
		ExternalRequestID: fmt.Sprintf("req_%020d", i),
		Result:            &runtime.RawExtension{Raw: result},
		ResultDigest:      protocol.Digest(result),
		History: []v1.Transition{
			{Time: started, State: v1.StateStarted, Reason: v1.ReasonExecuting, Attempt: 1},
			{Time: done, State: v1.StateCommitted, Reason: v1.ReasonCommitted, Attempt: 1},
		},
		StartedTime:        &started,
		CommittedTime:      &done,
		CompletionTime:     &done,
		ExpiryTime:         &expiry,
		ObservedGeneration: 1,
	}
	protocol.SetConditions(&st.Conditions, v1.StateCommitted, false, 1, done.Time, v1.ReasonCommitted,
		"Committed as "+id)
	op.Status = st
	return op, nil
}

// retainedResult is a payment API's answer, about 1 KiB of JSON.
func retainedResult(i int, id string) []byte {
	return fmt.Appendf(nil, `{"id":%q,"object":"charge","amount":%d,"amount_captured":%d,"amount_refunded":0,`+
		`"balance_transaction":"txn_%024d","billing_details":{"address":{"city":"Lisbon","country":"PT",`+
		`"line1":"Rua Augusta %d","postal_code":"1100-053"},"email":"customer%d@example.com","name":"Customer %d"},`+
		`"captured":true,"created":%d,"currency":"eur","customer":"cus_%08d",`+
		`"description":"Order %06d: 2 items, shipping to the customer's default address","livemode":false,`+
		`"metadata":{"order":"ord_%06d","cart":"cart_%08d","channel":"web","campaign":"winter-sale"},`+
		`"outcome":{"network_status":"approved_by_network","risk_level":"normal","risk_score":%d,`+
		`"seller_message":"Payment complete.","type":"authorized"},"paid":true,`+
		`"payment_intent":"pi_%024d","payment_method":"pm_card_%08d","payment_method_details":{"card":{`+
		`"brand":"visa","country":"PT","exp_month":12,"exp_year":2029,"fingerprint":"Xt5EWLLDS7FJjR1c",`+
		`"funding":"credit","last4":"4242","network":"visa"},"type":"card"},`+
		`"receipt_url":"https://pay.example.com/receipts/acct_1032D82eZvKYlo2C/%s/rcpt_%020d",`+
		`"refunded":false,"status":"succeeded"}`,
		id, 1000+i, 1000+i, i, i%200, i, i, 1767225600+i, i, i, i, i, i%100, i, i, id, i)
}

// retainedRecord is the scope record of op, holding its outcome as a
// manager writes it when the operation ends.
func retainedRecord(op *v1.SideEffectOperation, st v1.SideEffectOperationStatus) *v1.IdempotencyRecord {
	return &v1.IdempotencyRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: op.Namespace, Name: protocol.OperationScope(op).RecordName()},
		Spec: v1.IdempotencyRecordSpec{
			ToolRef:        op.Spec.ToolRef,
			Operation:      op.Spec.Operation,
			IdempotencyKey: st.IdempotencyKey,
			RequestHash:    st.RequestHash,
			Owner:          v1.RecordOwner{Name: op.Name, UID: op.UID},
			Retention:      metav1.Duration{Duration: v1.DefaultRetention},
			Outcome: &v1.RecordOutcome{
				State:             st.State,
				Attempts:          st.Attempts,
				ExternalObjectID:  st.ExternalObjectID,
				ExternalRequestID: st.ExternalRequestID,
				Result:            st.Result,
				ResultDigest:      st.ResultDigest,
				Reason:            v1.ReasonCommitted,
				CompletionTime:    *st.CompletionTime,
				ExpiryTime:        *st.ExpiryTime,
			},
		},
	}
}

// retainedSizes measures the first retained operation and its record as
// the API server serves them.
func (e *env) retainedSizes(ctx context.Context, ns string) (RetainedSizes, error) {
	var s RetainedSizes
	op := &v1.SideEffectOperation{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("order-%06d-charge", 0)}, op); err != nil {
		return s, err
	}
	rec := &v1.IdempotencyRecord{}
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: protocol.OperationScope(op).RecordName()}, rec); apierrors.IsNotFound(err) {
		// Operations keyed by their name have no record while they exist.
		rec = nil
	} else if err != nil {
		return s, err
	}
	for _, x := range []struct {
		v   any
		out *int
	}{{op, &s.OperationJSON}, {rec, &s.RecordJSON}, {op.ManagedFields, &s.ManagedFieldsJSON}} {
		data, err := json.Marshal(x.v)
		if err != nil {
			return s, err
		}
		*x.out = len(data)
	}
	if rec != nil {
		mf, err := json.Marshal(rec.ManagedFields)
		if err != nil {
			return s, err
		}
		s.ManagedFieldsJSON += len(mf)
	} else {
		s.RecordJSON = 0
	}
	s.LastApplied = len(op.Annotations[corev1.LastAppliedConfigAnnotation])
	s.ResultJSON = len(op.Status.Result.Raw)
	s.ParametersJSON = len(op.Spec.Parameters.Raw)
	return s, nil
}

// measureManager starts a manager, waits until it has listed every
// operation and record and has nothing left to do, and reads its memory.
// Nothing is forced: no garbage collection; the heap profile it then takes
// reports the heap as of the last one.
func (b *bench) measureManager(ctx context.Context, e *env, bin string, n, i int) (MemoryPoint, error) {
	maddr, err := harness.FreeAddr()
	if err != nil {
		return MemoryPoint{}, err
	}
	paddr, err := harness.FreeAddr()
	if err != nil {
		return MemoryPoint{}, err
	}
	haddr, err := harness.FreeAddr()
	if err != nil {
		return MemoryPoint{}, err
	}
	began := time.Now()
	p, err := e.cp.StartManager(harness.ManagerOptions{
		Binary:      bin,
		Holder:      fmt.Sprintf("bench-memory-%d-%d", n, i),
		MetricsAddr: maddr,
		Args:        []string{"--pprof-bind-address=" + paddr, "--health-probe-bind-address=" + haddr},
		Log:         filepath.Join(e.dir, fmt.Sprintf("manager-%d-%d.log", n, i)),
	})
	if err != nil {
		return MemoryPoint{}, err
	}
	defer p.Stop(15 * time.Second)
	url := "http://" + maddr + "/metrics"
	records := 0
	if b.cfg.RetainedRecords {
		records = n
	}
	if err := waitSettled(ctx, url, "http://"+haddr+"/readyz", records, b.cfg.SettleTimeout); err != nil {
		return MemoryPoint{}, err
	}
	pt := MemoryPoint{Binary: bin, Retained: n, SyncSeconds: time.Since(began).Seconds()}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return MemoryPoint{}, err
	}
	if pt.RSSBytes, err = procField(string(status), "VmRSS:"); err != nil {
		return MemoryPoint{}, err
	}
	if pt.HWMBytes, err = ParseVmHWM(string(status)); err != nil {
		return MemoryPoint{}, err
	}
	fams, err := scrapeAll(ctx, url)
	if err != nil {
		return MemoryPoint{}, err
	}
	pt.HeapInuseBytes = sumOf(fams, "go_memstats_heap_inuse_bytes", "", "")
	pt.HeapAllocBytes = sumOf(fams, "go_memstats_heap_alloc_bytes", "", "")
	pt.Reconciled = sumOf(fams, "controller_runtime_reconcile_total", "controller", "sideeffectoperation")
	// The heap as of the last collection, by allocation site, for
	// go tool pprof; taking it collects nothing.
	prof := &profiler{e: e, manager: paddr}
	file := fmt.Sprintf("heap-%d-%d-%s.pprof", n, i, filepath.Base(bin))
	if err := prof.fromManager(ctx, "/debug/pprof/heap", file); err != nil {
		return MemoryPoint{}, err
	}
	if pt.LiveHeapBytes, err = liveHeap(filepath.Join(e.dir, file)); err != nil {
		return MemoryPoint{}, err
	}
	return pt, nil
}

// waitSettled waits until the manager whose metrics are at url is ready
// at readyz (its informers have listed every object), has reconciled at
// least records records, and its operation queue has stayed empty for
// settleQuiet polls. A manager passes over the operations that have
// something to do and over every record (each has an expiry to keep);
// how many operations it passed over is reported, not awaited: an ended
// operation with nothing due is not reconciled at a start.
func waitSettled(ctx context.Context, url, readyz string, records int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	quiet := 0
	var last string
	for quiet < settleQuiet {
		if time.Now().After(deadline) {
			return fmt.Errorf("the manager did not settle within %s: %s", timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
		if err := ready(ctx, readyz); err != nil {
			last, quiet = err.Error(), 0
			continue
		}
		fams, err := scrapeAll(ctx, url)
		if err != nil {
			last, quiet = err.Error(), 0
			continue
		}
		ops := sumOf(fams, "controller_runtime_reconcile_total", "controller", "sideeffectoperation")
		recs := sumOf(fams, "controller_runtime_reconcile_total", "controller", "idempotencyrecord")
		_, hasDepth := fams["workqueue_depth"]
		depth := sumOf(fams, "workqueue_depth", "name", "sideeffectoperation")
		last = fmt.Sprintf("ready; %.0f operations and %.0f records of %d reconciled, queue depth %.0f",
			ops, recs, records, depth)
		if hasDepth && recs >= float64(records) && depth == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return nil
}

// ready asks a manager's readiness endpoint, which answers 200 once its
// informers have synced.
func ready(ctx context.Context, url string) error {
	body, err := get(ctx, url)
	if err != nil {
		return fmt.Errorf("not ready: %w", err)
	}
	return body.Close()
}

// liveHeap is the in-use bytes of the heap profile in file: the live heap
// as of the manager's last collection.
func liveHeap(file string) (float64, error) {
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	prof, err := profile.Parse(f)
	if err != nil {
		return 0, fmt.Errorf("reading the heap profile %s: %w", file, err)
	}
	i := slices.IndexFunc(prof.SampleType, func(t *profile.ValueType) bool { return t.Type == "inuse_space" })
	if i < 0 {
		return 0, fmt.Errorf("the heap profile %s has no inuse_space", file)
	}
	var sum int64
	for _, smp := range prof.Sample {
		sum += smp.Value[i]
	}
	return float64(sum), nil
}

// scrapeAll reads every counter, gauge and untyped metric the endpoint at
// url serves, by family.
func scrapeAll(ctx context.Context, url string) (map[string][]series, error) {
	body, err := get(ctx, url)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	return parseSeries(body)
}

// sumOf sums the counters, gauges and untyped values of the family name
// whose label has value; every series if label is empty.
func sumOf(fams map[string][]series, name, label, value string) float64 {
	var sum float64
	for _, s := range fams[name] {
		if label == "" || s.labels[label] == value {
			sum += s.value
		}
	}
	return sum
}

// Slopes fits, per binary, each figure against the number retained by
// least squares: the bytes one more retained operation costs. A binary
// measured at fewer than two sizes has no slope.
func Slopes(points []MemoryPoint, binaries []string) []MemorySlope {
	out := make([]MemorySlope, 0, len(binaries))
	for _, bin := range binaries {
		var pts []MemoryPoint
		for _, p := range points {
			if p.Binary == bin {
				pts = append(pts, p)
			}
		}
		fit := func(y func(MemoryPoint) float64) float64 {
			xs, ys := make([]float64, len(pts)), make([]float64, len(pts))
			for i, p := range pts {
				xs[i], ys[i] = float64(p.Retained), y(p)
			}
			return LeastSquaresSlope(xs, ys)
		}
		out = append(out, MemorySlope{Binary: bin,
			RSSPerOp:       fit(func(p MemoryPoint) float64 { return p.RSSBytes }),
			HWMPerOp:       fit(func(p MemoryPoint) float64 { return p.HWMBytes }),
			HeapInusePerOp: fit(func(p MemoryPoint) float64 { return p.HeapInuseBytes }),
			HeapAllocPerOp: fit(func(p MemoryPoint) float64 { return p.HeapAllocBytes }),
			LiveHeapPerOp:  fit(func(p MemoryPoint) float64 { return p.LiveHeapBytes }),
		})
	}
	return out
}

// LeastSquaresSlope is the slope of the least-squares line through
// (xs[i], ys[i]); 0 with fewer than two distinct xs.
func LeastSquaresSlope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0
	}
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var sxy, sxx float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
	}
	if sxx == 0 {
		return 0
	}
	return sxy / sxx
}

// Table renders the report for a terminal.
func (r MemoryReport) Table() string {
	var sb strings.Builder
	// An int as measured, a float64 as read back from memory.json.
	if runs, _ := strconv.Atoi(fmt.Sprint(r.Config["runs"])); runs > 1 {
		fmt.Fprintf(&sb, "each figure the median of %d runs, a fresh manager each:\n", runs)
	}
	fmt.Fprintf(&sb, "%-24s %10s %10s %10s %12s %12s %10s %8s %12s\n", "manager", "retained", "RSS MiB", "peak MiB",
		"heap in use", "heap alloc", "live heap", "sync s", "reconciled")
	for _, p := range r.Points {
		fmt.Fprintf(&sb, "%-24s %10d %10.1f %10.1f %12.1f %12.1f %10.1f %8.0f %12.0f\n", filepath.Base(p.Binary),
			p.Retained, p.RSSBytes/(1<<20), p.HWMBytes/(1<<20), p.HeapInuseBytes/(1<<20), p.HeapAllocBytes/(1<<20),
			p.LiveHeapBytes/(1<<20), p.SyncSeconds, p.Reconciled)
	}
	sb.WriteString("\nbytes per retained operation (least-squares slope):\n")
	fmt.Fprintf(&sb, "%-24s %10s %10s %12s %12s %10s\n", "manager", "RSS", "peak", "heap in use", "heap alloc",
		"live heap")
	for _, s := range r.Slopes {
		fmt.Fprintf(&sb, "%-24s %10.0f %10.0f %12.0f %12.0f %10.0f\n", filepath.Base(s.Binary), s.RSSPerOp, s.HWMPerOp,
			s.HeapInusePerOp, s.HeapAllocPerOp, s.LiveHeapPerOp)
	}
	if len(r.PerOp) > 0 {
		sb.WriteString("\nper retained operation at each size ((figure − figure at 0) / retained), bytes:\n")
		fmt.Fprintf(&sb, "%-24s %10s %10s %12s %10s\n", "manager", "retained", "RSS", "heap in use", "live heap")
		for _, p := range r.PerOp {
			fmt.Fprintf(&sb, "%-24s %10d %10.0f %12.0f %10.0f\n", filepath.Base(p.Binary), p.Retained, p.RSSPerOp,
				p.HeapInusePerOp, p.LiveHeapPerOp)
		}
	}
	if len(r.Etcd.Points) > 0 {
		fmt.Fprintf(&sb, "\netcd after a compaction (quota raised to %.0f GiB):\n",
			float64(r.Etcd.QuotaBytes)/(1<<30))
		fmt.Fprintf(&sb, "%10s %14s %14s\n", "retained", "in use MiB", "file MiB")
		for _, p := range r.Etcd.Points {
			fmt.Fprintf(&sb, "%10d %14.1f %14.1f\n", p.Retained, p.InUseBytes/(1<<20), p.FileBytes/(1<<20))
		}
		fmt.Fprintf(&sb, "etcd in use per retained operation (least-squares slope): %.0f bytes\n", r.Etcd.InUsePerOp)
		if r.Etcd.Records > 0 {
			fmt.Fprintf(&sb, "etcd in use per record holding an outcome (%d created apart): %.0f bytes\n",
				r.Etcd.Records, r.Etcd.InUsePerRecord)
		}
		rates := slices.Collect(maps.Keys(r.Etcd.QuotaHours))
		slices.SortFunc(rates, func(a, b string) int {
			x, _ := strconv.ParseFloat(a, 64)
			y, _ := strconv.ParseFloat(b, 64)
			return cmp.Compare(x, y)
		})
		for _, rate := range rates {
			fmt.Fprintf(&sb, "hours until etcd's 2 GiB quota at %s operations/s, every one retained: %.1f\n",
				rate, r.Etcd.QuotaHours[rate])
		}
	}
	z := r.Sizes
	fmt.Fprintf(&sb, "\none retained operation as served (JSON bytes): operation %d (last-applied annotation %d, "+
		"parameters %d, result %d), record %d, managed fields of both %d\n",
		z.OperationJSON, z.LastApplied, z.ParametersJSON, z.ResultJSON, z.RecordJSON, z.ManagedFieldsJSON)
	return sb.String()
}
