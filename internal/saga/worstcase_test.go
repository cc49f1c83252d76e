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
	"strings"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/worstcase"
)

// TestWorstCases: what a saga's author writes costs the manager at its
// bound, each measured. docs/threat-model.md's table of bounds quotes the
// figures; each ceiling here is the table's.
func TestWorstCases(t *testing.T) {
	t.Run("Compile", func(t *testing.T) {
		// Expressions of as many characters together as a saga may carry,
		// 8 of 4096, each the costliest to compile of those tried.
		// Compiled once per generation of the saga.
		var err error
		spec := atExpressionBound(0)
		worstcase.Within(t, "compiling 8 expressions of 4096 characters", 2<<30, func() { _, err = Compile(spec) })
		if err != nil {
			t.Errorf("expressions at the bound of characters together: %v", err)
		}
	})
	t.Run("CompileOverBound", func(t *testing.T) {
		// One character more is refused before any expression is compiled:
		// compiling one would allocate tens of MiB.
		var err error
		spec := atExpressionBound(1)
		worstcase.Within(t, "refusing expressions one character over the bound", 1<<20, func() { _, err = Compile(spec) })
		want := fmt.Sprintf("take %d characters together, more than the limit of %d", v1.MaxExpressionChars+1,
			v1.MaxExpressionChars)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error that says %q", err, want)
		}
	})
	t.Run("Inputs", func(t *testing.T) {
		// Inputs at their bound, of the smallest values, read whole by
		// one expression into one parameter.
		inputs := []byte(`{"a":[` + strings.Repeat("0,", (v1.MaxInputsBytes-16)/2) + `0]}`)
		plan, err := Compile(&v1.SagaSpec{Inputs: &k8sruntime.RawExtension{Raw: inputs},
			Steps: []v1.SagaStep{exprStep("order", from("a", "inputs.a"), nil)}})
		if err != nil {
			t.Fatal(err)
		}
		var out []byte
		worstcase.Within(t, "a step's parameters from 64 KiB of inputs", 32<<20, func() {
			out, err = plan.Parameters(context.Background(), 0, false, inputs, nil)
		})
		if err != nil || !json.Valid(out) {
			t.Errorf("inputs at their bound, read whole: %v", err)
		}
	})
}

// atExpressionBound is a saga whose expressions take MaxExpressionChars
// characters together, and more characters beyond: its steps' and its
// compensations' expressions both count.
func atExpressionBound(more int) *v1.SagaSpec {
	var do, undo []string
	for i := range v1.MaxExpressionChars / 4096 {
		pair := []string{fmt.Sprintf("e%d", i), worstcase.Expression(i, 4096)}
		if i%2 == 0 {
			do = append(do, pair...)
		} else {
			undo = append(undo, pair...)
		}
	}
	if more > 0 {
		undo = append(undo, "more", strings.Repeat("0", more))
	}
	return &v1.SagaSpec{Steps: []v1.SagaStep{exprStep("order", from(do...), from(undo...))}}
}
