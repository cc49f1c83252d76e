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

package celregex

import (
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
)

func TestSize(t *testing.T) {
	cases := map[string]struct {
		reason  string
		pattern string
		want    int
	}{
		"Plain":    {"A pattern without repetitions is about as long as its program.", "^ch_[a-z]+$", 9},
		"Bounded":  {"A bounded repetition is copied once per repeat.", "a{1,10}", 21},
		"Nested":   {"Nested bounded repetitions multiply.", "((a{1,10}){1,10}){1,10}b", 2222},
		"UUID":     {"A UUID's shape is small.", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", 40},
		"Unbound":  {"* and + add no copies.", "^(a+b*)*$", 11},
		"Alternat": {"An alternation adds its branches.", "^(foo|bar|baz)$", 13},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Size(tc.pattern)
			if err != nil || got != tc.want {
				t.Errorf("%s\nSize(%q) = %d, %v; want %d", tc.reason, tc.pattern, got, err, tc.want)
			}
		})
	}
}

func TestValidator(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("s", cel.StringType), cel.Variable("p", cel.StringType),
		cel.ASTValidators(Validator{}))
	if err != nil {
		t.Fatal(err)
	}
	atBound := "^" + strings.Repeat("[a-z]", MaxProgram-4) + "$"
	overBound := "^" + strings.Repeat("[a-z]", MaxProgram-3) + "$"
	cases := map[string]struct {
		reason string
		expr   string
		want   string // in the error; empty: compiles
	}{
		"Literal":      {"A literal pattern of a small program compiles.", "s.matches('^[a-z]+$')", ""},
		"AtBound":      {"A program of MaxProgram instructions compiles.", "s.matches('" + atBound + "')", ""},
		"OverBound":    {"One instruction more is refused.", "s.matches('" + overBound + "')", "129 instructions, more than the limit of 128"},
		"Nested":       {"Nested bounded repetitions are counted expanded.", "s.matches('((a{1,10}){1,10}){1,10}b')", "2222 instructions"},
		"Global":       {"The function form is checked too.", "matches(s, '(x{1,10}){1,20}')", "more than the limit"},
		"Computed":     {"A pattern from a variable cannot be bounded before it runs.", "s.matches(p)", "must be a string literal"},
		"Concatenated": {"Nor one built from literals.", "s.matches('a' + 'b')", "must be a string literal"},
		"Invalid":      {"A pattern that does not parse is refused when compiled.", "s.matches('(')", "missing closing )"},
		"InMacro":      {"A matches() inside a comprehension is checked too.", "[s].exists(x, x.matches(p))", "must be a string literal"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, iss := env.Compile(tc.expr)
			err := iss.Err()
			if tc.want == "" && err != nil {
				t.Errorf("%s\nwant %q to compile, got %v", tc.reason, tc.expr, err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("%s\nwant %q refused with %q, got %v", tc.reason, tc.expr, tc.want, err)
			}
		})
	}
}

// TestCost shows that a matches() is charged by its input's length times
// its program's size, at run time and in the estimate.
func TestCost(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("s", cel.StringType), cel.ASTValidators(Validator{}))
	if err != nil {
		t.Fatal(err)
	}
	ast, iss := env.Compile("s.matches('((a{1,10}){1,5})b')")
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast, cel.CostTracking(Cost{}))
	if err != nil {
		t.Fatal(err)
	}
	_, det, err := prg.Eval(map[string]any{"s": strings.Repeat("a", 999)})
	if err != nil {
		t.Fatal(err)
	}
	n, _ := Size("((a{1,10}){1,5})b")
	// (999+1) characters × n instructions × 0.1, and 1 for reading s.
	if want := uint64(100*n) + 1; *det.ActualCost() != want {
		t.Errorf("actual cost %d, want %d", *det.ActualCost(), want)
	}
}
