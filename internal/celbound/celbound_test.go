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
	"runtime"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/ext"
)

func newEnv(t *testing.T) *cel.Env {
	t.Helper()
	env, err := cel.NewEnv(cel.Variable("inputs", cel.DynType), ext.Strings(), Library())
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// allocated is the bytes the heap gave out while f ran.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
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

// TestSizeBoundsJSON: Size is never below the length of the value's JSON,
// and stops counting past its limit.
func TestSizeBoundsJSON(t *testing.T) {
	values := map[string]any{
		"String":   "plain",
		"Escapes":  "\x00\x01\"\\\u2028é",
		"Number":   -1.7976931348623157e308,
		"Int":      int64(-9223372036854775808),
		"Nested":   map[string]any{"a": []any{"x", true, nil, 3.5, map[string]any{"\x00": "y"}}},
		"Empty":    map[string]any{"l": []any{}, "m": map[string]any{}},
		"Large":    strings.Repeat("\x01", 1000),
		"ManyKeys": map[string]any{"k1": 1, "k2": 2, "k3": []any{1, 2, 3}},
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			js, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			got := Size(types.DefaultTypeAdapter.NativeToValue(v), MaxValueBytes)
			if got < int64(len(js)) {
				t.Errorf("Size = %d, below the %d bytes of %s", got, len(js), js)
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
	if got := Size(types.DefaultTypeAdapter.NativeToValue(outer), 1000); got > 1000+2*element+scalar {
		t.Errorf("Size counted to %d, past the limit of 1000 by more than one element", got)
	}
}
