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

package protocol

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestAddHistory(t *testing.T) {
	step := func(state v1.OperationState, reason string, attempt int32) v1.Transition {
		return v1.Transition{State: state, Reason: reason, Attempt: attempt}
	}
	tests := map[string]struct {
		add  []v1.Transition
		want []string // state/reason/attempt of each entry kept
	}{
		"the happy path is two entries": {
			add:  []v1.Transition{step(v1.StateStarted, v1.ReasonExecuting, 1), step(v1.StateCommitted, v1.ReasonCommitted, 1)},
			want: []string{"Started/Executing/1", "Committed/Committed/1"},
		},
		"a question asked again is told once": {
			add: []v1.Transition{
				step(v1.StateUnknown, v1.ReasonOutcomeUnknown, 1),
				step(v1.StateReconciling, v1.ReasonReconciling, 1),
				step(v1.StateReconciling, v1.ReasonReconciling, 1),
				step(v1.StateReconciling, v1.ReasonReconciling, 1),
			},
			want: []string{"Unknown/OutcomeUnknown/1", "Reconciling/Reconciling/1"},
		},
		"a new attempt in the same state is told": {
			add: []v1.Transition{
				step(v1.StateFailedRetryable, v1.ReasonBackingOff, 1),
				step(v1.StateFailedRetryable, v1.ReasonBackingOff, 2),
			},
			want: []string{"FailedRetryable/BackingOff/1", "FailedRetryable/BackingOff/2"},
		},
	}
	for reason, tt := range tests {
		t.Run(reason, func(t *testing.T) {
			var h []v1.Transition
			for _, tr := range tt.add {
				AddHistory(&h, tr)
			}
			if diff := cmp.Diff(tt.want, summary(h)); diff != "" {
				t.Errorf("history (-want, +got):\n%s", diff)
			}
		})
	}
}

// TestAddHistoryBounded: a long story keeps its first transition and its
// newest ones, never more than v1.MaxHistory, and the caller's slice is
// left as it was.
func TestAddHistoryBounded(t *testing.T) {
	var h []v1.Transition
	for attempt := int32(1); attempt <= 40; attempt++ {
		before := summary(h)
		shared := h
		AddHistory(&h, v1.Transition{State: v1.StateFailedRetryable, Reason: v1.ReasonBackingOff, Attempt: attempt,
			Message: strings.Repeat("x", 1000)})
		if diff := cmp.Diff(before, summary(shared)); diff != "" {
			t.Fatalf("attempt %d changed the caller's slice (-before, +after):\n%s", attempt, diff)
		}
	}
	var want []string
	want = append(want, "FailedRetryable/BackingOff/1")
	for attempt := 40 - v1.MaxHistory + 2; attempt <= 40; attempt++ {
		want = append(want, fmt.Sprintf("FailedRetryable/BackingOff/%d", attempt))
	}
	if diff := cmp.Diff(want, summary(h)); diff != "" {
		t.Errorf("history (-want, +got):\n%s", diff)
	}
	for i, tr := range h {
		if len(tr.Message) > maxHistoryMessage {
			t.Errorf("entry %d has a message of %d bytes, over %d", i, len(tr.Message), maxHistoryMessage)
		}
	}
}

func summary(h []v1.Transition) []string {
	var out []string
	for _, tr := range h {
		out = append(out, fmt.Sprintf("%s/%s/%d", tr.State, tr.Reason, tr.Attempt))
	}
	return out
}
