//go:build e2e

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

package e2e

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var (
	// promqlStrings are string literals, which may hold anything.
	promqlStrings = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// promqlMatchers are label matchers and range or subquery brackets,
	// once the strings are gone: label names and durations, not metrics.
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	// promqlLabelLists are the label lists of grouping and vector matching.
	promqlLabelLists = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent      = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promqlKeywords   = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "atan2": true}
)

// promqlMetricNames returns the metric names a PromQL expression selects,
// sorted. It is not a PromQL parser (the real one,
// github.com/prometheus/prometheus/promql/parser, would pull Prometheus into
// go.mod): it drops strings, label matchers, ranges and label lists, then
// takes the identifiers that are neither functions or aggregations (followed
// by a parenthesis), nor keywords, nor the unit of a number or duration.
func promqlMetricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, " ")
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlLabelLists.ReplaceAllString(s, " ")
	var names []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "0123456789.") {
			continue // 15m, 1e3
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // sum(, rate(
		}
		if promqlKeywords[strings.ToLower(name)] {
			continue
		}
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func TestPromQLMetricNames(t *testing.T) {
	cases := map[string]struct {
		reason string
		expr   string
		want   []string
	}{
		"Aggregation": {
			reason: "an aggregation's grouping labels are not metrics",
			expr:   "sum by (namespace) (once_operations_needs_review) > 0",
			want:   []string{"once_operations_needs_review"},
		},
		"Histogram": {
			reason: "a histogram is named by its series, and Grafana's range variable is not a metric",
			expr:   "histogram_quantile(0.99, sum by (le) (rate(once_recovery_duration_seconds_bucket[$__rate_interval])))",
			want:   []string{"once_recovery_duration_seconds_bucket"},
		},
		"Matchers": {
			reason: "label matchers and their strings name no metric, even when they hold identifiers",
			expr:   `sum by (controller) (rate(controller_runtime_reconcile_errors_total{controller=~"saga|tool", x!="a}b"}[5m])) > 0`,
			want:   []string{"controller_runtime_reconcile_errors_total"},
		},
		"VectorMatching": {
			reason: "on, group_left and their labels, offset and set operators are not metrics",
			expr:   "a / on (x) group_left (y) b offset 1h unless c or absent(d) and vector(0)",
			want:   []string{"a", "b", "c", "d"},
		},
		"Numbers": {
			reason: "the letters of numbers and durations are not metrics",
			expr:   "1e3 * foo_total + 0.5 > bool Inf",
			want:   []string{"foo_total"},
		},
		"Ratio": {
			reason: "every side of a binary operation counts, once",
			expr:   "sum(rate(h_sum[5m])) / sum(rate(h_count[5m])) / sum(rate(h_sum[1m]))",
			want:   []string{"h_count", "h_sum"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := promqlMetricNames(tc.expr)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\npromqlMetricNames(%q): -want, +got:\n%s", tc.reason, tc.expr, diff)
			}
		})
	}
}
