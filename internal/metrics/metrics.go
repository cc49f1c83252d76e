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

// Package metrics holds the figures Once exports on the manager's metrics
// endpoint, registered with controller-runtime's registry.
package metrics

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// toolLabels name the tool a figure is about: its kind (Tool or
// ClusterTool), namespace (empty for a ClusterTool) and name. Tools of one
// name in different namespaces, and a ClusterTool of that name, are
// different tools.
var toolLabels = []string{"tool_kind", "tool_namespace", "tool"}

// ToolValues returns the values of toolLabels for t, followed by values:
// for WithLabelValues of a figure about a tool.
func ToolValues(t v1.GenericTool, values ...string) []string {
	return append([]string{string(t.Kind()), t.GetNamespace(), t.GetName()}, values...)
}

// labelKind labels a metric by the kind of object it counts.
const labelKind = "kind"

var (
	// Transitions counts state transitions of operations.
	Transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_operation_transitions_total",
		Help: "State transitions of SideEffectOperations, by the state left and the state entered.",
	}, []string{"from", "to"})

	// ToolCalls counts requests to tools, by kind of request and outcome.
	ToolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_tool_requests_total",
		Help: "Requests sent to tools: execute, resend or lookup, by classified outcome.",
	}, append(toolLabels, "request", "outcome"))

	// Reconciliations counts the answers to questions about unknown
	// outcomes.
	Reconciliations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_reconciliation_outcomes_total",
		Help: "Answers to questions about attempts with an unknown outcome: found, absent or undecidable.",
	}, []string{"mode", "outcome"})

	// Conflicts counts operations that shared a scope with another.
	Conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_idempotency_conflicts_total",
		Help: "Operations whose scope was held by another operation: duplicates of the same request, or parameter mismatches.",
	}, []string{"reason"})

	// Retries counts attempts after a failed attempt.
	Retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_retries_total",
		Help: "Attempts made after an attempt that failed without effect.",
	}, toolLabels)

	// BudgetExhausted counts retries deferred by a spent retry budget.
	BudgetExhausted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_retry_budget_exhausted_total",
		Help: "Retries deferred because the tool's retry budget was spent.",
	}, toolLabels)

	// BulkheadFull counts calls deferred because the tool's calls took
	// their share of the workers.
	BulkheadFull = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_tool_bulkhead_full_total",
		Help: "Calls deferred because the tool's calls in flight took their share of the workers (--max-workers-per-tool).",
	}, toolLabels)

	// NamespaceShareFull counts calls deferred because their namespace's
	// calls took its share of the workers, by namespace and by the kind of
	// object whose call waits (SideEffectOperation, or a Saga's dry run).
	NamespaceShareFull = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_namespace_share_full_total",
		Help: "Calls deferred because their namespace's calls in flight took its share of the workers (--max-workers-per-namespace), by namespace and kind.",
	}, []string{"namespace", labelKind})

	// StaleWrites counts writes lost by a worker whose claim had moved on.
	StaleWrites = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "once_stale_worker_writes_total",
		Help: "Outcome writes refused because the worker no longer held the claim; what it learned is kept as evidence.",
	})

	// ContradictingAnswers counts answers of stale workers that name
	// another effect than the committed status: a second effect at the tool.
	ContradictingAnswers = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "once_contradicting_answers_total",
		Help: "Answers of workers that had lost their claim naming another effect than the status: a second effect at the tool, for a person to undo.",
	})

	// RecoveryTime measures the time from an unknown outcome to a terminal
	// state.
	RecoveryTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "once_recovery_duration_seconds",
		Help:    "Time from an attempt's outcome becoming unknown to a terminal state.",
		Buckets: prometheus.ExponentialBuckets(0.1, 2, 16),
	}, []string{"state"})

	// TTLDeletions counts the ended objects deleted because their
	// spec.ttlSecondsAfterFinished ran out, by kind (SideEffectOperation,
	// Saga): routine deletions, which write no Event.
	TTLDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_ttl_deletions_total",
		Help: "Ended operations and sagas deleted because their spec.ttlSecondsAfterFinished ran out, by kind.",
	}, []string{labelKind})

	// OutboxDeliveries counts deliveries of outcome announcements, by the
	// kind of object (operation, saga) and what came of them (Delivered,
	// Retry, Failed).
	OutboxDeliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "once_outbox_deliveries_total",
		Help: "Deliveries of outcome announcements to subscribers, by kind and result: Delivered, Retry (will be tried again) or Failed (budget spent).",
	}, []string{labelKind, "result"})

	// OutboxDelay measures the time from an outcome to its delivery.
	OutboxDelay = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "once_outbox_delivery_delay_seconds",
		Help:    "Time from an outcome being recorded to its announcement being acknowledged by the subscriber.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 16),
	}, []string{labelKind})
)

// Register adds the metrics to controller-runtime's registry, with a
// collector that counts the operations in NeedsReview from reader (the
// manager's cache) at scrape time.
func Register(reader client.Reader) {
	crmetrics.Registry.MustRegister(Transitions, ToolCalls, Reconciliations, Conflicts, Retries,
		BudgetExhausted, BulkheadFull, NamespaceShareFull, StaleWrites, ContradictingAnswers, RecoveryTime, OutboxDeliveries, OutboxDelay, TTLDeletions, &needsReview{reader: reader})
}

var needsReviewDesc = prometheus.NewDesc("once_operations_needs_review",
	"SideEffectOperations waiting for a person's resolution, by namespace.", []string{"namespace"}, nil)

// needsReview counts operations in NeedsReview when scraped, so the figure
// is right after a restart too.
type needsReview struct {
	reader client.Reader
}

func (c *needsReview) Describe(ch chan<- *prometheus.Desc) { ch <- needsReviewDesc }

// IndexNeedsReview is a field index of the manager's cache that holds the
// operations in NeedsReview alone (value "true"). So a scrape lists those
// and not every operation the cluster keeps. At 20 000 retained operations
// a full list was 16 MB of garbage a scrape, even uncopied.
const IndexNeedsReview = "status.state.needsReview"

func (c *needsReview) Collect(ch chan<- prometheus.Metric) {
	ctx := context.Background()
	var list v1.SideEffectOperationList
	// Read only, never copied (a client that is not a cache ignores the
	// option). A reader without the index, an API server, lists them all.
	err := c.reader.List(ctx, &list, client.MatchingFields{IndexNeedsReview: "true"}, client.UnsafeDisableDeepCopy)
	if err != nil {
		err = c.reader.List(ctx, &list, client.UnsafeDisableDeepCopy)
	}
	if err != nil {
		ch <- prometheus.NewInvalidMetric(needsReviewDesc, err)
		return
	}
	counts := map[string]int{}
	for _, op := range list.Items {
		if op.Status.State == v1.StateNeedsReview {
			counts[op.Namespace]++
		}
	}
	for ns, n := range counts {
		ch <- prometheus.MustNewConstMetric(needsReviewDesc, prometheus.GaugeValue, float64(n), ns)
	}
}
