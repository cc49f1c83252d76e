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

package celbound

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"

	"github.com/once-dev/once/internal/worstcase"
)

func newEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("inputs", cel.DynType), Library())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// allocated is the bytes the heap gave out while f ran.
func allocated(f func()) uint64 {
	runtime.GC()
	n, _ := worstcase.Allocated(f)
	return n
}

// TestRefusedBeforeBuilt: each function that builds more than it reads
// refuses a result over the bound, and allocates little doing so. Without
// Library, the replace() case allocates 144 MB and the join() case 768 MB.
func TestRefusedBeforeBuilt(t *testing.T) {
	inputs := map[string]any{
		"a":    strings.Repeat("a", 12_000),
		"list": make([]any, 12_000),
	}
	for i := range inputs["list"].([]any) {
		inputs["list"].([]any)[i] = i
	}
	cases := map[string]struct {
		reason string
		expr   string
		want   string
	}{
		"Replace": {
			reason: "each of 12 000 characters replaced by the 12 000 of the input",
			expr:   "inputs.a.replace('a', inputs.a)",
			want:   "replace() would build a string of 144000000 bytes",
		},
		"ReplaceEmpty": {
			reason: "an empty old string matches between every two characters",
			expr:   "inputs.a.replace('', inputs.a)",
			want:   "replace() would build",
		},
		"ReplaceN": {
			reason: "a count of replacements bounds the result only when it is small",
			expr:   "inputs.a.replace('a', inputs.a, 1000)",
			want:   "replace() would build a string of 12011000 bytes",
		},
		"Join": {
			reason: "a list made by map() holds one large string many times",
			expr:   "inputs.list.map(x, inputs.a).join()",
			want:   "join() would build",
		},
		"JoinSeparator": {
			reason: "the separator counts once per element",
			expr:   "inputs.list.map(x, 'b').join(inputs.a)",
			want:   "join() would build",
		},
		"Split": {
			reason: "a split() compares its text with its separator at each place: 12 000 by 12 000",
			expr:   "inputs.a.split(inputs.a + 'b')",
			want:   "split() would compare a text and a separator of 12000 bytes by 12001",
		},
		"Format": {
			reason: "format() writes out every element of its list",
			expr:   "'%s'.format([inputs.list.map(x, inputs.a)])",
			want:   "format() would build",
		},
	}
	env := newEnv(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ast, iss := env.Compile(tc.expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			prg, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			act := map[string]any{"inputs": inputs}
			var evalErr error
			bytes := allocated(func() { _, _, evalErr = prg.Eval(act) })
			if evalErr == nil || !strings.Contains(evalErr.Error(), tc.want) {
				t.Errorf("%s: got error %v, want one that says %q", tc.reason, evalErr, tc.want)
			}
			// The list of 12 000 references and the evaluation's own
			// bookkeeping take about a megabyte.
			if bytes > 4<<20 {
				t.Errorf("%s: allocated %d bytes, more than 4 MiB", tc.reason, bytes)
			}
		})
	}
}

// TestSameResults: below the bound, the guarded functions answer what
// ext.Strings answers.
func TestSameResults(t *testing.T) {
	cases := map[string]string{
		"Replace":       "'a-b-c'.replace('-', '--') == 'a--b--c'",
		"ReplaceN":      "'a-b-c'.replace('-', '--', 1) == 'a--b-c'",
		"ReplaceEmpty":  "'ab'.replace('', '.') == '.a.b.'",
		"ReplaceShrink": "'a--b'.replace('--', '') == 'ab'",
		"Join":          "['a', 'b'].join() == 'ab'",
		"JoinSeparator": "['a', 'b'].join(', ') == 'a, b'",
		"JoinEmpty":     "[].join('-') == ''",
		"Format":        "'%s and %d'.format(['x', 2]) == 'x and 2'",
		"FormatList":    "'%s'.format([['a', 1]]) == '[a, 1]'",
	}
	env := newEnv(t)
	for name, expr := range cases {
		t.Run(name, func(t *testing.T) {
			ast, iss := env.Compile(expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			prg, err := env.Program(ast)
			if err != nil {
				t.Fatal(err)
			}
			v, _, err := prg.Eval(map[string]any{"inputs": map[string]any{}})
			if err != nil || v != types.True {
				t.Errorf("%s: got %v, %v; want true", expr, v, err)
			}
		})
	}
}

// TestSizes: JSONSize is never below the length of a value's JSON, as
// encoding/json writes it, and not far above it for plain data; what the
// format() guard counts is never below what format() writes with any verb.
func TestSizes(t *testing.T) {
	values := map[string]any{
		"String":   "plain",
		"Escapes":  "\x00\x01\"\\<>&\u2028é\xff",
		"Number":   -1.7976931348623157e308,
		"Int":      int64(-9223372036854775808),
		"Nested":   map[string]any{"a": []any{"x", true, nil, 3.5, map[string]any{"\x00": "y"}}},
		"Empty":    map[string]any{"l": []any{}, "m": map[string]any{}},
		"Large":    strings.Repeat("\x01", 1000),
		"ManyKeys": map[string]any{"k1": 1, "k2": 2, "k3": []any{1, 2, 3}},
		"Bytes":    []byte("\x00\xffbytes"),
		"Ints": func() []any {
			l := make([]any, 3000)
			for i := range l {
				l[i] = int64(i)
			}
			return l
		}(),
	}
	env, err := cel.NewEnv(cel.Variable("v", cel.DynType), Library())
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			js, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			val := types.DefaultTypeAdapter.NativeToValue(v)
			got := JSONSize(val, MaxValueBytes)
			if got < int64(len(js)) {
				t.Errorf("JSONSize = %d, below the %d bytes of %s", got, len(js), js)
			}
			if got > 6*int64(len(js))+64 {
				t.Errorf("JSONSize = %d, more than six times the %d bytes of its JSON", got, len(js))
			}
			counted := size(val, MaxValueBytes, formatted)
			for _, verb := range []string{"%s", "%d", "%f", "%.100f", "%e", "%x", "%X", "%b", "%o"} {
				ast, iss := env.Compile("'" + verb + "'.format([v])")
				if iss.Err() != nil {
					t.Fatal(iss.Err())
				}
				prg, err := env.Program(ast)
				if err != nil {
					t.Fatal(err)
				}
				out, _, err := prg.Eval(map[string]any{"v": v})
				if err != nil {
					continue // a verb that does not take the value
				}
				if n := int64(len(out.(types.String))); n > counted+int64(len(verb)) {
					t.Errorf("%s wrote %d bytes; the guard counted %d", verb, n, counted)
				}
			}
		})
	}
	// A list of a million references to one list of a million: counted
	// to the limit, not through its 10^12 elements.
	inner := make([]any, 1_000_000)
	outer := make([]any, 1_000_000)
	for i := range outer {
		outer[i] = inner
	}
	if got := JSONSize(types.DefaultTypeAdapter.NativeToValue(outer), 1000); got > 1000+2*asJSON.item+40 {
		t.Errorf("JSONSize counted to %d, past the limit of 1000 by more than one element", got)
	}
}

// costLimit is the manager's limit for one expression.
const costLimit = 1_000_000

// TestCharged: calls cel-go charged by far less than their work are
// charged by it, so that the cost limit stops them before they allocate
// much or run long. Each of these passed the estimate; without the
// charges, the first allocated 3 GB, the second 1.5 GB, the third 1.7 GB
// and ran a second.
func TestCharged(t *testing.T) {
	l := make([]any, 16_000)
	for i := range l {
		l[i] = int64(0)
	}
	inputs := map[string]any{"s": strings.Repeat("a", 34_000), "ss": []any{strings.Repeat("b", 30_000)}, "l": l}
	hundred := "[" + strings.TrimSuffix(strings.Repeat("0,", 100), ",") + "]"
	sixty := "[" + strings.TrimSuffix(strings.Repeat("0,", 60), ",") + "]"
	nest := func(levels int, start, step, end string) string {
		// [start].map(v0, [step(v0)].map(v1, ... end(vN)))
		e := strings.ReplaceAll(end, "$", fmt.Sprintf("v%d", levels))
		for i := levels; i >= 1; i-- {
			e = "[" + strings.ReplaceAll(step, "$", fmt.Sprintf("v%d", i-1)) + "].map(v" + fmt.Sprint(i) + ", " + e + ")"
		}
		return "[" + start + "].map(v0, " + e + ")"
	}
	sizes := strings.TrimSuffix(strings.Repeat("size(s), ", 400), ", ")
	stamps := strings.TrimSuffix(strings.Repeat("timestamp(s) < timestamp(s) || true, ", 110), ", ")
	cases := map[string]string{
		// A review's expressions, each within the estimate: a join()
		// estimated at a byte, doubled by + on dyn values, which cel-go
		// charges 1 (491 MB live at 12 levels); size() and conversions of
		// a large string, charged 1 each (3 s, 1.6 GB); a join() of
		// doubled lists of empty strings (34 s in one call); in on them.
		"DynDoubling":   nest(12, "[inputs.s].join()", "dyn($) + dyn($)", "size($)"),
		"Size":          "[inputs.s].map(s, " + hundred + ".map(i, [" + sizes + "]))",
		"Conversions":   "[inputs.s].map(s, " + hundred + ".map(i, [" + stamps + "]))",
		"EmptyStrings":  nest(10, "[inputs.s].join().split('a')", "$ + $", "$.join()"),
		"InDoubled":     nest(12, "[inputs.s].join().split('a')", "$ + $", "'x' in $"),
		"Format":        hundred + ".map(y, " + sixty + ".map(x, '%s%s%s%s%s'.format([inputs.s, inputs.s, inputs.s, inputs.s, inputs.s])))",
		"FormatEach":    "inputs.l.map(x, '%s'.format(inputs.ss))",
		"IndexOfEmpty":  "inputs.l.map(x, inputs.s.indexOf(''))",
		"LastIndexOf":   "inputs.l.map(x, inputs.s.lastIndexOf(''))",
		"Quote":         "inputs.l.map(x, strings.quote(inputs.s))",
		"RefusalHidden": hundred + ".map(y, '%s'.format([inputs.l]).size() > 0 || true)",
	}
	env := newEnv(t)
	for name, expr := range cases {
		t.Run(name, func(t *testing.T) {
			ast, iss := env.Compile(expr)
			if iss.Err() != nil {
				t.Fatal(iss.Err())
			}
			prg, err := env.Program(ast, cel.CostLimit(costLimit), cel.CostTracking(Cost{}))
			if err != nil {
				t.Fatal(err)
			}
			var evalErr error
			start := time.Now()
			bytes := allocated(func() { _, _, evalErr = prg.Eval(map[string]any{"inputs": inputs}) })
			if took := time.Since(start); took > time.Second {
				t.Errorf("took %s, more than a second", took)
			}
			if evalErr == nil || !strings.Contains(evalErr.Error(), "cost limit") {
				t.Errorf("want the cost limit, got %v", evalErr)
			}
			// A search is charged a tenth per byte, as cel-go charges
			// text: the limit lets 10 MB be searched, which indexOf()
			// holds as 40 MB of runes, one call's worth at a time.
			if bytes > 48<<20 {
				t.Errorf("allocated %d bytes, more than 48 MiB", bytes)
			}
		})
	}
}

// TestComparisons: ==, != and in need an operand bounded by what the
// expression reads. Two lists computed from each other can share their
// elements: the refused case, ten levels deep, took two seconds in one
// call that the time limit cannot interrupt, and each level doubles it.
func TestComparisons(t *testing.T) {
	doubled := "[[inputs.l] + [inputs.l]].map(a1, [a1 + a1].map(a2, [a2 + a2].map(a3, a3 == a3)))"
	cases := map[string]struct {
		expr    string
		refused bool
	}{
		"Scalar":         {expr: "inputs.status == 200"},
		"ScalarComputed": {expr: "inputs.l.map(x, x * 2).size() != 3"},
		"String":         {expr: "inputs.a + 'x' == inputs.b + 'y'"},
		"Literal":        {expr: "inputs.l.map(x, x) == [1, 2, 3]"},
		"LiteralMap":     {expr: "inputs.m.filter(k, k != 'a') == ['b']"},
		"ReadAsIs":       {expr: "inputs.a == inputs.b"},
		"Element":        {expr: "inputs.items.exists(i, i == inputs.target)"},
		"InScalar":       {expr: "'error' in inputs.m"},
		"InLiteral":      {expr: "inputs.x in [[1], [2]]"},
		"InReadAsIs":     {expr: "inputs.x in inputs.l"},
		"Type":           {expr: "type(inputs.m) == map"},
		"Filtered":       {expr: "inputs.items.filter(i, i.ok).exists(i, i.ref == inputs.ref)"},
		"Mapped":         {expr: "inputs.items.map(i, i.id).exists(id, id == inputs.id)"},
		"InMapped":       {expr: "inputs.id in inputs.items.map(i, i.id)"},
		"FilteredIndex":  {expr: "inputs.items.filter(i, i.ok)[0].amount == inputs.amount"},
		"Dyn":            {expr: "dyn(inputs.a) == inputs.b"},
		"Ternary":        {expr: "(inputs.c ? inputs.a : inputs.b.c) == inputs.d"},
		"InMap":          {expr: "inputs.l + inputs.l in {'a': 1}"},
		"MappedWhole":    {expr: "inputs.l.map(x, inputs.l) == inputs.l.map(x, inputs.l)", refused: true},
		"MappedComputed": {expr: "inputs.l.map(x, [x, x]) == inputs.l", refused: true},
		"Doubled":        {expr: doubled, refused: true},
		"ComputedBoth":   {expr: "inputs.l.map(x, inputs.l) == inputs.l.map(x, inputs.l)", refused: true},
		"NotEqual":       {expr: "inputs.l + inputs.l != inputs.l + inputs.l", refused: true},
		"InComputed":     {expr: "inputs.l + inputs.l in [inputs.l + inputs.l]", refused: true},
		"Accumulator":    {expr: "inputs.l.map(x, [x]).exists(y, y == inputs.l + inputs.l)", refused: true},
	}
	env := newEnv(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, iss := env.Compile(tc.expr)
			switch {
			case tc.refused && (iss.Err() == nil || !strings.Contains(iss.Err().Error(), "may both be large and computed")):
				t.Errorf("%s: want it refused, got %v", tc.expr, iss.Err())
			case !tc.refused && iss.Err() != nil:
				t.Errorf("%s: %v", tc.expr, iss.Err())
			}
		})
	}
}
