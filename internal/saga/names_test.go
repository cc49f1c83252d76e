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

package saga

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestOperationName(t *testing.T) {
	type args struct {
		saga, step string
		undo       bool
		round      int32
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string
	}{
		"Step": {reason: "A step's first operation is <saga>.<step>.",
			args: args{saga: "order", step: "charge", round: 1}, want: "order.charge"},
		"RoundZeroIsFirst": {reason: "A checkpoint without a round is the first round.",
			args: args{saga: "order", step: "charge"}, want: "order.charge"},
		"Compensation": {reason: "A compensation's first operation is <saga>.<step>.undo.",
			args: args{saga: "order", step: "charge", undo: true, round: 1}, want: "order.charge.undo"},
		"StepRound": {reason: "A later round is a segment of its own, which no step name can be.",
			args: args{saga: "order", step: "charge", round: 2}, want: "order.charge.2"},
		"CompensationRound": {reason: "A compensation's later round likewise.",
			args: args{saga: "order", step: "charge", undo: true, round: 3}, want: "order.charge.undo.3"},
		"DottedSaga": {reason: "A saga's name may hold dots; the step is still the segment after it.",
			args: args{saga: "shop.order-1", step: "with-hyphen", round: 1}, want: "shop.order-1.with-hyphen"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OperationName(tc.args.saga, tc.args.step, tc.args.undo, tc.args.round); got != tc.want {
				t.Errorf("%s: want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

func TestOperationKey(t *testing.T) {
	type args struct {
		key, step string
		undo      bool
		round     int32
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string
	}{
		"Step": {reason: "spec.idempotencyKey documents <key>/<step>.",
			args: args{key: "ord-1", step: "charge", round: 1}, want: "ord-1/charge"},
		"Compensation": {reason: "spec.idempotencyKey documents <key>/<step>/compensate.",
			args: args{key: "ord-1", step: "charge", undo: true, round: 1}, want: "ord-1/charge/compensate"},
		"StepRound": {reason: "A Retry's new round has a new key: the failed one had no effect.",
			args: args{key: "ord-1", step: "charge", round: 2}, want: "ord-1/charge/2"},
		"CompensationRound": {reason: "A compensation's new round has a new key.",
			args: args{key: "ord-1", step: "charge", undo: true, round: 2}, want: "ord-1/charge/compensate/2"},
		"KeyWithSlash": {reason: "The saga's key is used as written.",
			args: args{key: "tenant/ord-1", step: "charge", round: 1}, want: "tenant/ord-1/charge"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OperationKey(tc.args.key, tc.args.step, tc.args.undo, tc.args.round); got != tc.want {
				t.Errorf("%s: want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}

// longSagaName is a valid saga name of n characters, in labels of up to
// labelLen characters, so that truncations fall on every kind of character.
func longSagaName(n, labelLen int) string {
	const alnum = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b strings.Builder
	for p := 0; b.Len() < n; p++ { // p: the position in the label
		last := b.Len() == n-1
		switch {
		case p == labelLen && !last && b.Len() < n-2:
			b.WriteByte('.')
			p = -1
		case p%3 == 1 && p < labelLen-1 && !last:
			b.WriteByte('-')
		default:
			b.WriteByte(alnum[b.Len()%len(alnum)])
		}
	}
	return b.String()
}

// stepNames are step names that could be confused with one another's
// rounds or compensations, up to the longest (32 characters).
var stepNames = []string{
	"a", "a-2", "a-3", "a2", "undo", "a-undo", "undo-2", "with-hyphen", "charge",
	"a234567890123456789012345678901z",
}

var rounds = []int32{1, 2, 3, 10, math.MaxInt32}

// TestOperationNameValid: every name is a DNS-1123 subdomain, for saga
// names up to the longest the API server allows.
func TestOperationNameValid(t *testing.T) {
	for n := 1; n <= validation.DNS1123SubdomainMaxLength; n++ {
		for _, labelLen := range []int{5, 63} {
			saga := longSagaName(n, labelLen)
			if errs := validation.IsDNS1123Subdomain(saga); len(errs) > 0 {
				t.Fatalf("test saga name %q is invalid: %v", saga, errs)
			}
			for _, step := range stepNames {
				for _, undo := range []bool{false, true} {
					for _, round := range rounds {
						name := OperationName(saga, step, undo, round)
						if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
							t.Fatalf("OperationName(%q, %q, %v, %d) = %q: %v", saga, step, undo, round, name, errs)
						}
						if !strings.HasSuffix(name, "."+step) && !strings.Contains(name, "."+step+".") {
							t.Errorf("%q: the step %s must be a segment of the name", name, step)
						}
					}
				}
			}
		}
	}
}

// TestOperationNameUnique: within a saga, (step, undo, round) names one
// operation, and so does the key; and two long saga names that share
// their beginning still name different operations.
func TestOperationNameUnique(t *testing.T) {
	long := longSagaName(253, 63)
	other := long[:252] + "x"
	for _, saga := range []string{"order", longSagaName(200, 63), longSagaName(230, 5), long, other} {
		names, keys := map[string]string{}, map[string]string{}
		for _, step := range stepNames {
			for _, undo := range []bool{false, true} {
				for _, round := range rounds {
					what := fmt.Sprintf("(%s, undo=%v, round %d)", step, undo, round)
					name := OperationName(saga, step, undo, round)
					if prev, ok := names[name]; ok {
						t.Errorf("saga %q: %s and %s share the name %q", saga, prev, what, name)
					}
					names[name] = what
					key := OperationKey(saga, step, undo, round)
					if prev, ok := keys[key]; ok {
						t.Errorf("saga %q: %s and %s share the key %q", saga, prev, what, key)
					}
					keys[key] = what
				}
			}
		}
	}
	if a, b := OperationName(long, "a", false, 1), OperationName(other, "a", false, 1); a == b {
		t.Errorf("sagas %q and %q share the name %q", long, other, a)
	}
}

func TestLabelValue(t *testing.T) {
	for _, n := range []int{1, 63, 64, 200, 253} {
		name := strings.Repeat("s", n-1) + "x"
		got := LabelValue(name)
		if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
			t.Errorf("LabelValue of a %d-character name is %q: %v", n, got, errs)
		}
		if n <= 63 && got != name {
			t.Errorf("LabelValue(%q) = %q, want the name itself", name, got)
		}
	}
	a, b := strings.Repeat("a", 100)+"1", strings.Repeat("a", 100)+"2"
	if LabelValue(a) == LabelValue(b) {
		t.Errorf("two long names that start the same share the label value %q", LabelValue(a))
	}
}
