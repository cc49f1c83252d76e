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
	"fmt"
	"io"
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
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(in)
	if err != nil {
		return 0, fmt.Errorf("parsing metrics: %w", err)
	}
	fam := families[name]
	if fam == nil || len(fam.GetMetric()) == 0 {
		return 0, fmt.Errorf("no metric %s", name)
	}
	m := fam.GetMetric()[0]
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue(), nil
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue(), nil
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue(), nil
	}
	return 0, fmt.Errorf("metric %s is neither a counter nor a gauge", name)
}

// ParseVmHWM reads a /proc/<pid>/status file and returns the process's
// peak resident set size (VmHWM) in bytes.
func ParseVmHWM(status string) (float64, error) {
	for line := range strings.SplitSeq(status, "\n") {
		rest, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		var kb float64
		if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb); err != nil {
			return 0, fmt.Errorf("reading VmHWM %q: %w", rest, err)
		}
		return kb * 1024, nil
	}
	return 0, fmt.Errorf("no VmHWM line")
}
