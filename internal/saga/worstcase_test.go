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
		// As many expressions of 4096 characters as the API server's
		// object limit of 1.5 MiB holds (22 in each of 16 steps), each a
		// list of 2047 numbers: the most work to compile per character.
		// Compiled once per generation of the saga.
		list := "[" + strings.Repeat("0,", (4096-2)/2) + "]"
		steps := make([]v1.SagaStep, 16)
		for i := range steps {
			var exprs []string
			for j := range 22 {
				exprs = append(exprs, fmt.Sprintf("e%d", j), list)
			}
			steps[i] = exprStep(fmt.Sprintf("s%d", i), from(exprs...), nil)
		}
		var err error
		worstcase.Within(t, "compiling 352 expressions of 4096 characters", 4<<30, func() {
			_, err = Compile(&v1.SagaSpec{Steps: steps})
		})
		if err != nil {
			t.Errorf("lists of 2047 numbers are within the estimate: %v", err)
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
