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
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"testing"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestLeastSquaresSlope(t *testing.T) {
	cases := map[string]struct {
		reason string
		xs, ys []float64
		want   float64
	}{
		"Line":       {reason: "Points on a line give its slope.", xs: []float64{0, 10, 20}, ys: []float64{5, 25, 45}, want: 2},
		"Noisy":      {reason: "The fit goes between scattered points.", xs: []float64{0, 1, 2, 3}, ys: []float64{0, 2, 1, 3}, want: 0.8},
		"TwoPoints":  {reason: "Two points give the slope between them.", xs: []float64{10000, 50000}, ys: []float64{1e8, 5e8}, want: 1e4},
		"OnePoint":   {reason: "One point has no slope.", xs: []float64{1}, ys: []float64{1}, want: 0},
		"SameX":      {reason: "Points at one x have no slope.", xs: []float64{3, 3}, ys: []float64{1, 2}, want: 0},
		"Mismatched": {reason: "Unequal lengths have no slope.", xs: []float64{1, 2}, ys: []float64{1}, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := LeastSquaresSlope(tc.xs, tc.ys)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("%s\nLeastSquaresSlope(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSlopes(t *testing.T) {
	points := []MemoryPoint{
		{Binary: "old", Retained: 0, RSSBytes: 50, HWMBytes: 50, HeapInuseBytes: 10, HeapAllocBytes: 8},
		{Binary: "new", Retained: 0, RSSBytes: 50, HWMBytes: 50, HeapInuseBytes: 10, HeapAllocBytes: 8},
		{Binary: "old", Retained: 10, RSSBytes: 350, HWMBytes: 450, HeapInuseBytes: 210, HeapAllocBytes: 108},
		{Binary: "new", Retained: 10, RSSBytes: 150, HWMBytes: 250, HeapInuseBytes: 110, HeapAllocBytes: 58},
	}
	want := []MemorySlope{
		{Binary: "old", RSSPerOp: 30, HWMPerOp: 40, HeapInusePerOp: 20, HeapAllocPerOp: 10},
		{Binary: "new", RSSPerOp: 10, HWMPerOp: 20, HeapInusePerOp: 10, HeapAllocPerOp: 5},
		{Binary: "unmeasured"},
	}
	got := Slopes(points, []string{"old", "new", "unmeasured"})
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("Slopes(...): each binary's points fit apart; -want, +got:\n%s", diff)
	}
}

func TestSumOf(t *testing.T) {
	fams := map[string][]series{
		"workqueue_depth": {
			{labels: map[string]string{"name": "sideeffectoperation"}, value: 3},
			{labels: map[string]string{"name": "saga"}, value: 7},
		},
		"controller_runtime_reconcile_total": {
			{labels: map[string]string{"controller": "sideeffectoperation", "result": "success"}, value: 90},
			{labels: map[string]string{"controller": "sideeffectoperation", "result": "error"}, value: 10},
			{labels: map[string]string{"controller": "idempotencyrecord", "result": "success"}, value: 5},
		},
		"go_memstats_heap_inuse_bytes": {{labels: map[string]string{}, value: 1024}},
	}
	cases := map[string]struct {
		reason             string
		name, label, value string
		want               float64
	}{
		"OneSeries":     {reason: "A label picks its series.", name: "workqueue_depth", label: "name", value: "sideeffectoperation", want: 3},
		"EveryResult":   {reason: "Series that share the label add up.", name: "controller_runtime_reconcile_total", label: "controller", value: "sideeffectoperation", want: 100},
		"NoLabel":       {reason: "Without a label every series counts.", name: "go_memstats_heap_inuse_bytes", want: 1024},
		"MissingFamily": {reason: "A family not served sums to nothing.", name: "absent", want: 0},
		"MissingSeries": {reason: "A label value not served sums to nothing.", name: "workqueue_depth", label: "name", value: "tool", want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sumOf(fams, tc.name, tc.label, tc.value); got != tc.want {
				t.Errorf("%s\nsumOf(%s, %s=%s): want %v, got %v", tc.reason, tc.name, tc.label, tc.value, tc.want, got)
			}
		})
	}
}

func TestProcField(t *testing.T) {
	status := "Name:\tmanager\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
	got, err := procField(status, "VmRSS:")
	if err != nil || got != 100<<20 {
		t.Errorf("procField(VmRSS): want %d, <nil>; got %v, %v", 100<<20, got, err)
	}
	if _, err := procField(status, "VmSwap:"); err == nil {
		t.Errorf("procField(VmSwap): want an error for a missing line, got none")
	}
}

func TestRetainedOperation(t *testing.T) {
	op, err := retainedOperation("ns", 7)
	if err != nil {
		t.Fatalf("retainedOperation: %v", err)
	}
	st := op.Status
	if st.Result == nil || len(st.Result.Raw) < 900 || !json.Valid(st.Result.Raw) {
		t.Errorf("result: want about 1 KiB of valid JSON, got %d bytes", len(st.Result.Raw))
	}
	if n := len(op.Spec.Parameters.Raw); n < 250 || !json.Valid(op.Spec.Parameters.Raw) {
		t.Errorf("parameters: want about 300 bytes of valid JSON, got %d bytes", n)
	}
	if st.RequestHash == "" || st.CompletionTime == nil || st.ExpiryTime == nil || len(st.Conditions) != 2 ||
		len(st.Observations) != 0 || st.RecordName != "" {
		t.Errorf("status: want a hash, times, a committed operation's two conditions and no observation or "+
			"record name (an ended operation keeps neither), got %+v", st)
	}
	if len(op.Finalizers) != 1 || op.Finalizers[0] != v1.FinalizerRecord {
		t.Errorf("finalizers: want the one a manager adds before the first claim, got %v", op.Finalizers)
	}
	rec := retainedRecord(op, st)
	if rec.Name != protocol.OperationScope(op).RecordName() || rec.Spec.Outcome == nil || rec.Spec.Outcome.ExternalObjectID != st.ExternalObjectID {
		t.Errorf("record: want the scope's record holding the outcome, got %+v", rec)
	}
}

func TestMedianPoint(t *testing.T) {
	cases := map[string]struct {
		reason  string
		samples []MemoryPoint
		want    MemoryPoint
	}{
		"Three": {
			reason: "Each figure is its own median: one run's high RSS does not carry its heap along.",
			samples: []MemoryPoint{
				{Binary: "m", Retained: 10, RSSBytes: 300, HWMBytes: 400, HeapInuseBytes: 10, HeapAllocBytes: 9,
					LiveHeapBytes: 5, Reconciled: 0, SyncSeconds: 3},
				{Binary: "m", Retained: 10, RSSBytes: 100, HWMBytes: 500, HeapInuseBytes: 30, HeapAllocBytes: 7,
					LiveHeapBytes: 4, Reconciled: 2, SyncSeconds: 1},
				{Binary: "m", Retained: 10, RSSBytes: 200, HWMBytes: 450, HeapInuseBytes: 20, HeapAllocBytes: 8,
					LiveHeapBytes: 6, Reconciled: 1, SyncSeconds: 2},
			},
			want: MemoryPoint{Binary: "m", Retained: 10, RSSBytes: 200, HWMBytes: 450, HeapInuseBytes: 20,
				HeapAllocBytes: 8, LiveHeapBytes: 5, Reconciled: 1, SyncSeconds: 2},
		},
		"One": {
			reason:  "One sample is its own median.",
			samples: []MemoryPoint{{Binary: "m", Retained: 5, RSSBytes: 7}},
			want:    MemoryPoint{Binary: "m", Retained: 5, RSSBytes: 7},
		},
		"None": {reason: "No sample, no point.", want: MemoryPoint{}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MedianPoint(tc.samples)); diff != "" {
				t.Errorf("%s\nMedianPoint: -want +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLiveHeap(t *testing.T) {
	dir := t.TempDir()
	keep := make([]byte, 8<<20)
	// The profile reports the heap as of the last collection: one now,
	// while keep is live.
	runtime.GC()
	file := filepath.Join(dir, "heap.pprof")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(keep)
	if got, err := liveHeap(file); err != nil || got < 8<<20 {
		t.Errorf("liveHeap of a heap profile with 8 MiB live: want at least that, got %v, %v", got, err)
	}

	bad := filepath.Join(dir, "not-a-profile")
	if err := os.WriteFile(bad, []byte("VmRSS: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := liveHeap(bad); err == nil {
		t.Error("liveHeap of a file that is no profile: want an error, got none")
	}
}
