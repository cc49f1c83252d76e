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

package controller

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
)

// RetryBudgets holds one token bucket of retries per tool, so that an
// outage of one tool cannot make the manager hammer it: first attempts are
// never limited, retries share the tool's budget.
type RetryBudgets struct {
	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

// NewRetryBudgets returns empty budgets; each tool's bucket starts full.
func NewRetryBudgets() *RetryBudgets {
	return &RetryBudgets{limiters: map[string]*rate.Limiter{}}
}

// Take takes one retry from the tool's budget at now. When the budget is
// spent it returns false and how long until a retry is available.
func (b *RetryBudgets) Take(tool string, budget *v1.RetryBudget, now time.Time) (time.Duration, bool) {
	perMinute := v1.DefaultRetriesPerMinute
	if budget != nil && budget.RetriesPerMinute > 0 {
		perMinute = int(budget.RetriesPerMinute)
	}
	limit := rate.Limit(float64(perMinute) / 60)
	// A tenth of a minute's budget may be spent at once.
	burst := max(1, perMinute/10)

	b.mu.Lock()
	l, ok := b.limiters[tool]
	if !ok {
		l = rate.NewLimiter(limit, burst)
		b.limiters[tool] = l
	} else if l.Limit() != limit || l.Burst() != burst {
		l.SetLimit(limit)
		l.SetBurst(burst)
	}
	b.mu.Unlock()

	res := l.ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, false
	}
	return 0, true
}

func budgetExhausted(t v1.GenericTool) {
	metrics.BudgetExhausted.WithLabelValues(metrics.ToolValues(t)...).Inc()
}

func bulkheadFull(t v1.GenericTool) {
	metrics.BulkheadFull.WithLabelValues(metrics.ToolValues(t)...).Inc()
}

func namespaceShareFull(namespace, kind string) {
	metrics.NamespaceShareFull.WithLabelValues(namespace, kind).Inc()
}

func countRetry(t v1.GenericTool) {
	metrics.Retries.WithLabelValues(metrics.ToolValues(t)...).Inc()
}
