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
	"encoding/xml"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestClientURL(t *testing.T) {
	cases := map[string]struct {
		reason string
		args   []string
		want   string
	}{
		"Advertised": {reason: "The advertised client URL comes first.",
			args: []string{"etcd", "--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://127.0.0.1:2379"},
			want: "http://127.0.0.1:2379"},
		"Listen": {reason: "Without one, the first URL etcd listens on.",
			args: []string{"etcd", "--listen-client-urls", "http://127.0.0.1:4001/,http://127.0.0.1:4002"},
			want: "http://127.0.0.1:4001"},
		"None": {reason: "No client URL, none found.", args: []string{"etcd", "--data-dir=/x"}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := clientURL(tc.args); got != tc.want {
				t.Errorf("%s\nclientURL(%q): want %q, got %q", tc.reason, tc.args, tc.want, got)
			}
		})
	}
}

func TestHoursToQuota(t *testing.T) {
	cases := map[string]struct {
		reason           string
		bytesPerOp, rate float64
		want             float64
	}{
		"8KBAt5PerSecond": {reason: "2 GiB at 8192 bytes an operation is 262 144 operations: 14.6 hours at 5/s.",
			bytesPerOp: 8192, rate: 5, want: 262144.0 / 5 / 3600},
		"NoCost": {reason: "Nothing kept, no figure.", bytesPerOp: 0, rate: 5, want: 0},
		"NoRate": {reason: "No load, no figure.", bytesPerOp: 8192, rate: 0, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := HoursToQuota(tc.bytesPerOp, tc.rate)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateApprox(1e-12, 0)); diff != "" {
				t.Errorf("%s\nHoursToQuota(%v, %v): -want, +got:\n%s", tc.reason, tc.bytesPerOp, tc.rate, diff)
			}
		})
	}
}

func TestPerOp(t *testing.T) {
	points := []MemoryPoint{
		{Binary: "a", Retained: 0, RSSBytes: 50, HeapInuseBytes: 10},
		{Binary: "a", Retained: 10, RSSBytes: 150, HeapInuseBytes: 60},
		{Binary: "b", Retained: 10, RSSBytes: 150, HeapInuseBytes: 60},
	}
	want := []MemoryPerOp{{Binary: "a", Retained: 10, RSSPerOp: 10, HeapInusePerOp: 5}}
	if diff := cmp.Diff(want, PerOp(points)); diff != "" {
		t.Errorf("PerOp gives each point over the empty cluster's, per operation, for binaries measured at 0 "+
			"only: -want, +got:\n%s", diff)
	}
}

// soakSamples are samples every minute for minutes, each series at its
// level plus perHour times the hours passed.
func soakSamples(minutes int, level, perHour float64) []SoakSample {
	var out []SoakSample
	for m := 0; m <= minutes; m++ {
		v := level + perHour*float64(m)/60
		out = append(out, SoakSample{Seconds: float64(m * 60), EtcdInUseBytes: v * (1 << 20),
			ManagerRSSBytes: v * (1 << 20), ManagerHeapInuseBytes: v * (1 << 20), Operations: int(v), Records: int(v)})
	}
	return out
}

func TestFitSoak(t *testing.T) {
	cases := map[string]struct {
		reason   string
		samples  []SoakSample
		warmUp   time.Duration
		wantFlat bool
		// wantPercent is every series' percent per hour.
		wantPercent float64
		wantStart   float64
	}{
		"Flat": {reason: "A level series is flat.", samples: soakSamples(30, 1000, 0), warmUp: 5 * time.Minute,
			wantFlat: true, wantPercent: 0, wantStart: 600},
		"Growing": {reason: "A series that adds 10 % of its level per hour is not flat.",
			samples: soakSamples(30, 1000, 100), warmUp: 5 * time.Minute, wantFlat: false,
			// Over minutes 10 to 30 the level is 1000 + 100 × 20/60.
			wantPercent: 100 / (1000 + 100*20.0/60) * 100, wantStart: 600},
		"BelowTheBar": {reason: "A series that adds under 5 % of its level per hour is flat.",
			samples: soakSamples(30, 1000, 40), warmUp: 5 * time.Minute, wantFlat: true,
			wantPercent: 40 / (1000 + 40*20.0/60) * 100, wantStart: 600},
		"ShortSoak": {reason: "A soak shorter than the window is fitted after its warm-up.",
			samples: soakSamples(10, 1000, 0), warmUp: 6 * time.Minute, wantFlat: true, wantPercent: 0,
			wantStart: 360},
		"Shrinking": {reason: "A series that goes down adds nothing: flat.",
			samples: soakSamples(30, 1000, -500), warmUp: 5 * time.Minute, wantFlat: true,
			wantPercent: -500 / (1000 - 500*20.0/60) * 100, wantStart: 600},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rep := SoakReport{Samples: tc.samples}
			fitSoak(&rep, 20*time.Minute, tc.warmUp)
			if rep.Flat != tc.wantFlat {
				t.Errorf("%s\nflat: want %v, got %v (%+v)", tc.reason, tc.wantFlat, rep.Flat, rep.Series)
			}
			if rep.WindowStart != tc.wantStart {
				t.Errorf("%s\nwindow start: want %v s, got %v", tc.reason, tc.wantStart, rep.WindowStart)
			}
			if len(rep.Series) != len(soakSeries) {
				t.Fatalf("%s\nwant %d series, got %d", tc.reason, len(soakSeries), len(rep.Series))
			}
			for _, s := range rep.Series {
				// The object counts are rounded down to whole objects.
				if diff := cmp.Diff(tc.wantPercent, s.PercentPerHour, cmpopts.EquateApprox(0, 0.2)); diff != "" {
					t.Errorf("%s\n%s percent per hour: -want, +got:\n%s", tc.reason, s.Name, diff)
				}
			}
		})
	}
}

func TestSoakSVG(t *testing.T) {
	rep := SoakReport{Samples: soakSamples(30, 1000, 100), Rate: 10,
		Config: map[string]any{"ttl": "2m0s", "retention": "3m0s"}}
	fitSoak(&rep, 20*time.Minute, 5*time.Minute)
	svg := rep.SVG()
	// Well-formed XML.
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() != "EOF" {
				t.Fatalf("the plot is not well-formed XML: %v\n%s", err, svg)
			}
			break
		}
	}
	if got := strings.Count(svg, "<polyline"); got != len(soakSeries) {
		t.Errorf("want one curve per series (%d), got %d", len(soakSeries), got)
	}
	for _, want := range []string{"minutes since the load began", "MiB", "objects", "etcd in use", "records"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the plot has no %q", want)
		}
	}
}

func TestTicks(t *testing.T) {
	cases := map[string]struct {
		lo, hi float64
		want   []float64
	}{
		"Minutes": {lo: 0, hi: 30, want: []float64{0, 5, 10, 15, 20, 25, 30}},
		"MiB":     {lo: 0, hi: 1.3, want: []float64{0, 0.5, 1}},
		"Flat":    {lo: 4, hi: 4, want: []float64{4}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ticks(tc.lo, tc.hi), cmpopts.EquateApprox(0, 1e-9)); diff != "" {
				t.Errorf("ticks(%v, %v): -want, +got:\n%s", tc.lo, tc.hi, diff)
			}
		})
	}
}

func TestSoakRate(t *testing.T) {
	cases := map[string]struct {
		reason             string
		opsPerS, writesPer float64
		want               float64
	}{
		"Measured": {reason: "70 operations of 3 writes a second are 210 writes; half is 105, at 7 writes each 15 a second.",
			opsPerS: 70, writesPer: 3, want: 15},
		"NoWrites":  {reason: "Without the writes per operation there is no rate.", opsPerS: 70, want: 0},
		"NoMeasure": {reason: "Without a throughput there is no rate.", writesPer: 3, want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SoakRate(tc.opsPerS, tc.writesPer); math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("%s\nSoakRate(%v, %v): want %v, got %v", tc.reason, tc.opsPerS, tc.writesPer, tc.want, got)
			}
		})
	}
}
