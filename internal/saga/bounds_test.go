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
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/worstcase"
)

// TestCompileBounds: what a saga's expressions may cost, and the inputs
// they read, are checked before any expression runs.
func TestCompileBounds(t *testing.T) {
	cases := map[string]struct {
		reason string
		inputs string
		exprs  []v1.ParameterExpression
		// err must be in the error; empty means Compile succeeds.
		err string
	}{
		"Plain": {
			reason: "what the samples and the docs write costs little",
			exprs: from("title", "'Scale ' + inputs.service + ' to ' + string(inputs.replicas)",
				"id", "inputs.id.matches('^[a-z0-9]{1,40}$')", "tags", "inputs.tags.join(',')",
				"slug", "inputs.name.lowerAscii().replace(' ', '-')", "count", "inputs.items.filter(i, i > 0).size()"),
		},
		"Replace": {
			reason: "each character replaced by the whole input may cost 4 billion",
			exprs:  from("square", "inputs.a.replace('a', inputs.a)"),
			err:    "spec.steps[0].parametersFrom[0] (square): may cost up to 4295104926 on inputs of 64 KiB and step data of 16 KiB, more than the limit of 1000000",
		},
		"Regexes": {
			reason: "three matches() over the largest inputs cost more than one",
			exprs: from("flagged", "inputs.t.matches('[a-z]{1,60}b') || inputs.t.matches('[a-z]{1,60}c') || "+
				"inputs.t.matches('[a-z]{1,60}d')"),
			err: "(flagged): may cost up to",
		},
		"Nested": {
			reason: "a comprehension over the largest list, each element compared with the largest string",
			exprs:  from("n", "inputs.l.filter(x, x.s.startsWith(inputs.p)).map(x, x.s + inputs.p)"),
			err:    "(n): may cost up to",
		},
		"ExpressionsAtLimit": {
			reason: "expressions of 32768 characters together are taken, counted in code points as the API server counts",
			exprs:  append(spaced(v1.MaxExpressionChars-4096), from("é", "'"+strings.Repeat("é", 4094)+"'")...),
		},
		"ExpressionsOverLimit": {
			reason: "one character more is refused",
			exprs:  spaced(v1.MaxExpressionChars + 1),
			err: "spec.steps: the parametersFrom expressions take 32769 characters together, more than the limit of " +
				"32768: shorten them, or split the saga in two",
		},
		"InputsAtLimit": {
			reason: "inputs of 64 KiB of canonical JSON are taken",
			inputs: `{"a": "` + strings.Repeat("a", v1.MaxInputsBytes-8) + `"}`,
		},
		"InputsOverLimit": {
			reason: "one byte more is refused, measured canonical",
			inputs: `{"a":   "` + strings.Repeat("a", v1.MaxInputsBytes-7) + `"}`,
			err:    "spec.inputs take 65537 bytes of canonical JSON; the limit is 65536",
		},
		"InputsNotJSON": {
			reason: "inputs that are no JSON are refused before they are read",
			inputs: `{"a": `,
			err:    "spec.inputs: ",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			spec := &v1.SagaSpec{Steps: []v1.SagaStep{exprStep("order", tc.exprs, nil)}}
			if tc.inputs != "" {
				spec.Inputs = &k8sruntime.RawExtension{Raw: []byte(tc.inputs)}
			}
			plan, err := Compile(spec)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%s: %v", tc.reason, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%s: got %v, want an error that says %q", tc.reason, err, tc.err)
			case tc.err != "" && plan != nil:
				t.Errorf("%s: a refused spec gave a plan", tc.reason)
			}
		})
	}
}

// spaced is expressions of 4096 characters, n together: a digit and
// spaces, the cheapest to compile.
func spaced(n int) []v1.ParameterExpression {
	var pairs []string
	for i := 0; n > 0; i++ {
		size := min(n, 4096)
		pairs = append(pairs, fmt.Sprintf("p%d", i), "0"+strings.Repeat(" ", size-1))
		n -= size
	}
	return from(pairs...)
}

// TestParametersBounds: what an expression reads and builds is checked as
// it runs, before the work: a step's data over what the estimate assumed,
// a string or a value past celbound's bound. Each stays within a few MiB.
func TestParametersBounds(t *testing.T) {
	list := make([]any, 12_000)
	for i := range list {
		list[i] = i
	}
	big, err := json.Marshal(map[string]any{"a": strings.Repeat("a", 12_000), "list": list})
	if err != nil {
		t.Fatal(err)
	}
	items := make([]any, 1500)
	for i := range items {
		items[i] = map[string]any{"id": fmt.Sprintf("item-%d", i), "qty": i}
	}
	plain, err := json.Marshal(map[string]any{"numbers": list[:3000], "items": items})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		expr   string
		inputs []byte
		data   map[string]StepData
		err    string
	}{
		"Join": {
			reason: "cel-go estimates join() by the list's length: it runs, and stops before it builds",
			expr:   "inputs.list.map(x, inputs.a).join()",
			inputs: big,
			err:    "join() would build a string of",
		},
		"Value": {
			reason: "a value of 12 000 references to 12 000 characters is refused before it becomes JSON",
			expr:   "inputs.list.map(x, inputs.a)",
			inputs: big,
			err:    `("inputs.list.map(x, inputs.a)"): the values may take`,
		},
		"CostLimit": {
			reason: "format() is estimated by its pattern and charged by what it builds: 100 times 12 000 bytes",
			expr:   "[" + strings.TrimSuffix(strings.Repeat("0,", 100), ",") + "].map(y, '%s'.format([inputs.a]))",
			inputs: big,
			err:    "stopped at the cost limit of 1000000",
		},
		"ListOfNumbers": {
			reason: "3 000 numbers, 14 KB of JSON, are a parameter like any other",
			expr:   "inputs.numbers",
			inputs: plain,
		},
		"ListOfObjects": {
			reason: "1 500 small objects, 40 KB of JSON, are too",
			expr:   "inputs.items",
			inputs: plain,
		},
		"ExternalObjectID": {
			reason: "a step's id longer than the estimate assumed is not read",
			expr:   "steps.order.externalObjectID",
			data:   map[string]StepData{"order": {ExternalObjectID: strings.Repeat("x", maxStepBytes+1)}},
			err:    "the externalObjectID of step order takes 16385 bytes; the limit is 16384",
		},
		"Result": {
			reason: "a step's result longer than the estimate assumed is not read",
			expr:   "steps.order.result",
			data:   map[string]StepData{"order": {Result: []byte(`{"a": "` + strings.Repeat("x", maxStepBytes) + `"}`)}},
			err:    "the result of step order takes 16392 bytes of canonical JSON; the limit is 16384",
		},
		"ResultWritten": {
			reason: "a result whose stored form is longer than its canonical one is measured canonical",
			expr:   "steps.order.result.a",
			data:   map[string]StepData{"order": {Result: []byte(`{"a":      "` + strings.Repeat("x", maxStepBytes-8) + `"}`)}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			steps := []v1.SagaStep{exprStep("order", nil, nil), exprStep("charge", from("p", tc.expr), nil)}
			plan, err := Compile(&v1.SagaSpec{Steps: steps})
			if err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			n, _ := worstcase.Allocated(func() { _, err = plan.Parameters(context.Background(), 1, false, tc.inputs, tc.data) })
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%s: %v", tc.reason, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%s: got %v, want an error that says %q", tc.reason, err, tc.err)
			}
			if n > 8<<20 {
				t.Errorf("%s: allocated %d bytes, more than 8 MiB", tc.reason, n)
			}
		})
	}
}

// TestParametersShareTheBound: the values of one step share one bound, so
// that many values each under it cannot add up to megabytes. Four lists
// of a 64 000-character string twice, each character one that JSON
// escapes in six, come to 3 MB.
func TestParametersShareTheBound(t *testing.T) {
	inputs, err := json.Marshal(map[string]any{"s": strings.Repeat("<", 64_000)})
	if err != nil {
		t.Fatal(err)
	}
	pairs := from("a", "[inputs.s, inputs.s]", "b", "[inputs.s, inputs.s]", "c", "[inputs.s, inputs.s]",
		"d", "[inputs.s, inputs.s]")
	plan, err := Compile(&v1.SagaSpec{Steps: []v1.SagaStep{exprStep("order", pairs, nil)}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = plan.Parameters(context.Background(), 0, false, inputs, nil)
	if err == nil || !strings.Contains(err.Error(), "more than the limit of 1048576") {
		t.Errorf("want the step's values refused past the bound they share, got %v", err)
	}
	one, err := Compile(&v1.SagaSpec{Steps: []v1.SagaStep{exprStep("order", pairs[:1], nil)}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.Parameters(context.Background(), 0, false, inputs, nil); err != nil {
		t.Errorf("one of them alone is within the bound: %v", err)
	}
}

// TestWorkBounded: what a third review found within the estimate, on the
// saga's own path (Compile, then Parameters). cel-go charged a literal 10
// however many entries it has, built again at each step of a
// comprehension (229 MB live); compared a large computed string with each
// element of a large computed list in one call (2 s); and checked the
// time limit every hundred steps of a comprehension. Ordinary expressions
// stay well within.
func TestWorkBounded(t *testing.T) {
	zeros := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]" }
	items := make([]any, 4000)
	for i := range items {
		items[i] = map[string]any{"q": i}
	}
	inputs, err := json.Marshal(map[string]any{"a": strings.Repeat("x", 60_000), "items": items})
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		expr    string
		timeout time.Duration
		// err is in the error of Compile or of Parameters; none: it runs.
		err []string
	}{
		"Literals": {expr: "size(" + zeros(10) + ".map(a, " + zeros(10) + ".map(b, " + zeros(10) + ".map(c, " +
			zeros(300) + "))))", err: []string{"cost"}},
		"InComputed": {expr: "[string(inputs.a) + 'b'].map(u, [[u + 'c', u + 'd']].map(l, u in l + l))",
			err: []string{"may both be large and computed"}},
		"TimeInLoop":    {expr: "inputs.items.map(i, i.q)", timeout: time.Nanosecond, err: []string{"time limit"}},
		"SizeOfList":    {expr: "inputs.items.all(i, i.q < size(inputs.items))"},
		"MapToField":    {expr: "inputs.items.map(i, i.q).size()"},
		"SmallLiterals": {expr: "{'q': inputs.items[0].q, 'pair': [size(inputs.a), 2], 'of': ['a', 'b', 'c']}"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Compile(&v1.SagaSpec{Steps: []v1.SagaStep{exprStep("order", from("p", tc.expr), nil)}})
			if err == nil {
				plan.EvalTimeout = tc.timeout
				runtime.GC()
				n, took := worstcase.Allocated(func() { _, err = plan.Parameters(context.Background(), 0, false, inputs, nil) })
				if n > 48<<20 || took > time.Second {
					t.Errorf("allocated %d bytes in %s", n, took)
				}
			}
			switch {
			case len(tc.err) == 0 && err != nil:
				t.Errorf("%s: %v", tc.expr, err)
			case len(tc.err) > 0 && (err == nil || !strings.Contains(err.Error(), tc.err[0])):
				t.Errorf("%s: want an error about %q, got %v", tc.expr, tc.err[0], err)
			}
		})
	}
}
