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
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Median is the median of xs, the mean of the middle two for an even
// count; 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ParseGauge reads metrics in the Prometheus text format and returns the
// value of the metric family name, a counter or a gauge without labels
// (process_cpu_seconds_total, process_resident_memory_bytes).
func ParseGauge(in io.Reader, name string) (float64, error) {
	fams, err := parseSeries(in)
	if err != nil {
		return 0, err
	}
	if len(fams[name]) == 0 {
		return 0, fmt.Errorf("no counter or gauge %s", name)
	}
	return fams[name][0].value, nil
}

// series is one metric's labels and value.
type series struct {
	labels map[string]string
	value  float64
}

// parseSeries reads metrics in the Prometheus text format: every counter,
// gauge and untyped series, by family.
func parseSeries(in io.Reader) (map[string][]series, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(in)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	out := make(map[string][]series, len(fams))
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if m.GetCounter() == nil && m.GetGauge() == nil && m.GetUntyped() == nil {
				continue
			}
			s := series{labels: map[string]string{},
				value: m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			out[name] = append(out[name], s)
		}
	}
	return out, nil
}

// ParseVmHWM reads a /proc/<pid>/status file and returns the process's
// peak resident set size (VmHWM) in bytes.
func ParseVmHWM(status string) (float64, error) {
	return procField(status, "VmHWM:")
}

// procField reads a field in kB of a /proc/<pid>/status file, such as
// "VmRSS:", and returns it in bytes.
func procField(status, field string) (float64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, field)
		if !ok {
			continue
		}
		var kb float64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err != nil {
			return 0, fmt.Errorf("reading %s %q: %w", field, rest, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no %s line", field)
}

// get reads url; the caller closes the body. An answer other than 200 is
// an error.
func get(ctx context.Context, url string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return resp.Body, nil
}
