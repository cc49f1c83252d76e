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
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/once-dev/once/internal/celregex"
	"github.com/once-dev/once/internal/worstcase"
)

const (
	// fuzzLimit is the cost limit of FuzzProgram: a saga expression's.
	fuzzLimit = 1_000_000
	// fuzzInputBytes bounds the inputs, as a saga's spec.inputs are.
	fuzzInputBytes = 64 << 10
	// fuzzAllocBound is what one evaluation may allocate within
	// fuzzLimit: a few bytes a unit of cost, and MaxValueBytes for JSON.
	fuzzAllocBound = 64 << 20
	// fuzzTimeout is the evaluation's time limit; fuzzTimeBound what it
	// may take, the limit checked at each step of a comprehension.
	fuzzTimeout, fuzzTimeBound = time.Second, 5 * time.Second
)

// inputSizes bounds what an expression reads by fuzzInputBytes.
type inputSizes struct{}

func (inputSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if path := n.Path(); len(path) > 0 && path[0] == "inputs" {
		return &checker.SizeEstimate{Min: 0, Max: fuzzInputBytes}
	}
	return nil
}

func (inputSizes) EstimateCallCost(_, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return celregex.Estimate(overloadID, target, args, fuzzInputBytes)
}

// FuzzProgram compiles an expression with Library and Program, as the
// manager's environments do, and runs it on JSON inputs. Either Program
// refuses it, or it ends within the cost limit (its actual cost at most
// the limit), or it stops with the cost limit's error, a refusal of a
// guard, or another error of CEL's; it allocates at most fuzzAllocBound
// bytes and takes at most fuzzTimeBound, and JSON refuses a value over
// MaxValueBytes.
func FuzzProgram(f *testing.F) {
	inputs := `{"a":"aaaa","list":[1,2,3],"items":[{"q":1},{"q":2}],"s":"x,y"}`
	for _, expr := range []string{
		"inputs.a.replace('a', inputs.a)",
		"inputs.list.map(x, inputs.a).join()",
		"inputs.a.split(inputs.a + 'b')",
		"'%s'.format([inputs.list.map(x, inputs.a)])",
		"inputs.items.map(i, i.q).size()",
		"[string(inputs.a) + 'b'].map(u, [[u + 'c', u + 'd']].map(l, u in l + l))",
		"{'q': inputs.items[0].q, 'pair': [size(inputs.a), 2], 'of': ['a', 'b', 'c']}",
		"inputs.s.matches('^[a-z,]{1,40}$')",
		"inputs.list.map(a, inputs.list.map(b, inputs.list.map(c, [a, b, c])))",
		"strings.quote(inputs.a) + base64.encode(bytes(inputs.a))",
		"inputs.a.indexOf('a') + inputs.a.lastIndexOf('a') + size(inputs.a.substring(1))",
		"inputs.list.all(x, x < size(inputs.list)) ? inputs.a.upperAscii() : inputs.a.reverse()",
	} {
		f.Add(expr, inputs)
	}
	env, err := cel.NewEnv(cel.Variable("inputs", cel.DynType), Library(),
		cel.ASTValidators(celregex.Validator{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr, inputs string) {
		if len(inputs) > fuzzInputBytes || len(expr) > 4096 {
			return
		}
		var in any
		if err := json.Unmarshal([]byte(inputs), &in); err != nil {
			return
		}
		checked, iss := env.Compile(expr)
		if iss.Err() != nil {
			return
		}
		prg, err := Program(env, checked, inputSizes{}, fuzzLimit)
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), fuzzTimeout)
		defer cancel()
		var (
			out     []byte
			details *cel.EvalDetails
		)
		alloc, took := worstcase.Allocated(func() {
			var v ref.Val
			v, details, err = prg.ContextEval(ctx, map[string]any{"inputs": in})
			if err == nil {
				out, _, err = JSON(v, 0, MaxValueBytes)
			}
		})
		if alloc > fuzzAllocBound {
			t.Fatalf("%q allocated %d bytes, more than %d", expr, alloc, fuzzAllocBound)
		}
		if took > fuzzTimeBound {
			t.Fatalf("%q ran for %s, past its time limit of %s", expr, took, fuzzTimeout)
		}
		var cancelled interpreter.EvalCancelledError
		switch {
		case errors.As(err, &cancelled):
			if cancelled.Cause != interpreter.CostLimitExceeded && ctx.Err() == nil {
				t.Fatalf("%q cancelled, not by the cost limit or the time limit: %v", expr, err)
			}
		case err == nil:
			if len(out) > MaxValueBytes {
				t.Fatalf("%q returned %d bytes of JSON, more than %d", expr, len(out), MaxValueBytes)
			}
			if cost := details.ActualCost(); cost == nil || *cost > fuzzLimit {
				t.Fatalf("%q ended at a cost of %v, over the limit of %d", expr, cost, fuzzLimit)
			}
		}
	})
}
