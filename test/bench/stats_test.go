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
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/once-dev/once/test/chaos"
)

func TestMedian(t *testing.T) {
	cases := map[string]struct {
		reason string
		xs     []float64
		want   float64
	}{
		"None":  {reason: "no values have median 0", want: 0},
		"One":   {reason: "one value is its own median", xs: []float64{7}, want: 7},
		"Odd":   {reason: "the middle of the sorted values", xs: []float64{9, 1, 5}, want: 5},
		"Even":  {reason: "the mean of the middle two", xs: []float64{4, 1, 3, 10}, want: 3.5},
		"Equal": {reason: "repeated values", xs: []float64{2, 2, 2}, want: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Median(tc.xs)); diff != "" {
				t.Errorf("%s\nMedian(%v): -want, +got:\n%s", tc.reason, tc.xs, diff)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[len(hundred)-1-i] = float64(i + 1) // 100 … 1, unsorted
	}
	cases := map[string]struct {
		reason string
		xs     []float64
		p      float64
		want   float64
	}{
		"None":       {reason: "no values give 0", p: 50, want: 0},
		"One":        {reason: "every percentile of one value is that value", xs: []float64{3}, p: 99, want: 3},
		"P50":        {reason: "nearest rank: the 50th of 1…100", xs: hundred, p: 50, want: 50},
		"P95":        {reason: "nearest rank: the 95th of 1…100", xs: hundred, p: 95, want: 95},
		"P99":        {reason: "nearest rank: the 99th of 1…100", xs: hundred, p: 99, want: 99},
		"P100":       {reason: "the largest", xs: hundred, p: 100, want: 100},
		"SmallCount": {reason: "p99 of four values is the largest", xs: []float64{1, 2, 3, 4}, p: 99, want: 4},
		"RoundUp":    {reason: "p50 of three values is the second", xs: []float64{30, 10, 20}, p: 50, want: 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, chaos.Percentile(tc.xs, tc.p)); diff != "" {
				t.Errorf("%s\nPercentile(p%v): -want, +got:\n%s", tc.reason, tc.p, diff)
			}
		})
	}
}

// managerMetrics is an excerpt of a manager's /metrics.
const managerMetrics = `# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.34
# HELP process_resident_memory_bytes Resident memory size in bytes.
# TYPE process_resident_memory_bytes gauge
process_resident_memory_bytes 7.0254592e+07
# HELP workqueue_depth Current depth of workqueue
# TYPE workqueue_depth gauge
workqueue_depth{controller="sideeffectoperation",name="sideeffectoperation"} 0
`

func TestParseGauge(t *testing.T) {
	cases := map[string]struct {
		reason  string
		metric  string
		want    float64
		wantErr bool
	}{
		"Counter": {reason: "a counter's value", metric: "process_cpu_seconds_total", want: 12.34},
		"Gauge":   {reason: "a gauge's value", metric: "process_resident_memory_bytes", want: 70254592},
		"Missing": {reason: "an absent metric is an error", metric: "process_open_fds", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseGauge(strings.NewReader(managerMetrics), tc.metric)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nParseGauge(%s): error %v, want error %v", tc.reason, tc.metric, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParseGauge(%s): -want, +got:\n%s", tc.reason, tc.metric, diff)
			}
		})
	}
}

func TestParseVmHWM(t *testing.T) {
	cases := map[string]struct {
		reason  string
		status  string
		want    float64
		wantErr bool
	}{
		"Present": {reason: "VmHWM in kB, as bytes",
			status: "Name:\tmanager\nVmPeak:\t 1816208 kB\nVmHWM:\t   68420 kB\nVmRSS:\t   60000 kB\n",
			want:   68420 * 1024},
		"Absent": {reason: "a status without VmHWM (a kernel thread) is an error",
			status: "Name:\tkthreadd\n", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseVmHWM(tc.status)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nParseVmHWM: error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nParseVmHWM: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSetWrites(t *testing.T) {
	line := func(code, resource, sub, verb string, n int) string {
		return `apiserver_request_total{code="` + code + `",group="",resource="` + resource +
			`",subresource="` + sub + `",verb="` + verb + `"} ` + strconv.Itoa(n) + "\n"
	}
	text := "# TYPE apiserver_request_total counter\n" +
		line("201", "sideeffectoperations", "", "POST", 10) +
		line("200", "sideeffectoperations", "status", "PUT", 20) +
		line("409", "sideeffectoperations", "status", "PUT", 4) +
		line("201", "idempotencyrecords", "", "POST", 10) +
		line("201", "events", "", "POST", 20) +
		line("200", "sideeffectoperations", "", "WATCH", 3) +
		line("201", "namespaces", "", "POST", 1)
	w, err := chaos.ParseResourceWrites(strings.NewReader(text), budgetResources)
	if err != nil {
		t.Fatal(err)
	}
	p := Phase{Operations: 10}
	p.setWrites(w)
	want := Phase{Operations: 10, WritesPerOperation: 4.4, EventsPerOperation: 2, Conflicts: 4,
		Writes: map[string]int64{"sideeffectoperations POST": 10, "sideeffectoperations/status PUT": 24,
			"idempotencyrecords POST": 10, "events POST": 20}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("setWrites: -want, +got:\n%s", diff)
	}
}

func TestSummarize(t *testing.T) {
	// ceilingCPU and oneCPU are the phases' kube-apiserver and etcd CPU
	// seconds per 1000 operations, three quarters of it kube-apiserver's.
	run := func(ceiling, one, two, ceilingCPU, oneCPU float64) RunResult {
		return RunResult{Ceiling: Phase{Name: "ceiling", OpsPerSecond: ceiling,
			APIServerCPUSecondsPer1000: ceilingCPU * 3 / 4, EtcdCPUSecondsPer1000: ceilingCPU / 4},
			Once: []Phase{{Name: "once-1m", Managers: 1, OpsPerSecond: one,
				APIServerCPUSecondsPer1000: oneCPU * 3 / 4, EtcdCPUSecondsPer1000: oneCPU / 4},
				{Name: "once-2m", Managers: 2, OpsPerSecond: two}}}
	}
	cases := map[string]struct {
		reason string
		runs   []RunResult
		want   map[string]float64
	}{
		"Medians": {
			reason: "ratios 0.5, 0.25, 0.4; speedups 1.5, 1, 2; costs 2, 3, 1, whose median is not the ratio of the medians (12 / 8)",
			runs:   []RunResult{run(100, 50, 75, 8, 16), run(200, 50, 50, 4, 12), run(100, 40, 80, 10, 10)},
			want: map[string]float64{"ceiling": 100, "once": 50, "ratio": 0.4, "speedup": 1.5,
				"api cost": 2, "cost": 2, "ceiling api": 6, "ceiling etcd": 2, "once api": 9, "once etcd": 3},
		},
		"NoCeilingCPU": {
			reason: "a run whose ceiling has no CPU figure gives no cost ratio rather than an infinite one",
			runs:   []RunResult{run(100, 50, 75, 8, 16), run(100, 50, 75, 0, 16)},
			want: map[string]float64{"ceiling": 100, "once": 50, "ratio": 0.5, "speedup": 1.5,
				"api cost": 2, "cost": 2, "ceiling api": 3, "ceiling etcd": 1, "once api": 12, "once etcd": 4},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rep := Summarize(Config{Operations: 10, Workers: 2, Managers: []int{1, 2}}, tc.runs)
			got := map[string]float64{"ceiling": rep.CeilingOpsPerS, "once": rep.OnceOpsPerS, "ratio": rep.Ratio,
				"speedup": rep.TwoManagerSpeedup, "api cost": rep.APIServerCostRatio, "cost": rep.CostRatio,
				"ceiling api": rep.CeilingAPIServerCPUSPer1000, "ceiling etcd": rep.CeilingEtcdCPUSPer1000,
				"once api": rep.APIServerCPUSPer1000, "once etcd": rep.EtcdCPUSPer1000}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nSummarize: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestControlPlaneRole(t *testing.T) {
	const dir = "/tmp/bench/run-1/ceiling/controlplane"
	cases := map[string]struct {
		reason string
		comm   string
		args   []string
		want   string
	}{
		"APIServer": {reason: "kube-apiserver with the folder's certs",
			comm: "kube-apiserver", args: []string{"kube-apiserver", "--cert-dir=" + dir + "/certs", "--secure-port=6443"},
			want: roleAPIServer},
		"Etcd": {reason: "etcd with the folder's data",
			comm: "etcd", args: []string{"etcd", "--data-dir=" + dir + "/etcd", "--listen-client-urls=http://127.0.0.1:2379"},
			want: roleEtcd},
		"SeparateValue": {reason: "a flag's value may be the next argument",
			comm: "etcd", args: []string{"etcd", "--data-dir", dir + "/etcd"}, want: roleEtcd},
		"OtherFolder": {reason: "another control plane's etcd, in a folder that starts like this one",
			comm: "etcd", args: []string{"etcd", "--data-dir=" + dir + "2/etcd"}},
		"Child": {reason: "a folder inside this one's is not this one's",
			comm: "etcd", args: []string{"etcd", "--data-dir=" + dir + "/etcd/member"}},
		"OtherExecutable": {reason: "a shell that mentions the folder is not the control plane",
			comm: "bash", args: []string{"bash", "-c", "etcd --data-dir=" + dir + "/etcd"}},
		"WrongFlag": {reason: "kube-apiserver recognised by its certs, not by any flag naming the folder",
			comm: "kube-apiserver", args: []string{"kube-apiserver", "--data-dir=" + dir + "/etcd"}},
		"LastArgument": {reason: "a flag without a value after it",
			comm: "etcd", args: []string{"etcd", "--data-dir"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := controlPlaneRole(tc.comm, tc.args, dir); got != tc.want {
				t.Errorf("%s\ncontrolPlaneRole(%q, %q) = %q, want %q", tc.reason, tc.comm, tc.args, got, tc.want)
			}
		})
	}
}
