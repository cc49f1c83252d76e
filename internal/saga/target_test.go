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
	"testing"

	gocmp "github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestTarget: the tool a step's operation names has its kind spelled out,
// Tool when the step leaves it empty, so that a saga stored with kind Tool
// (the API server's default before it was Once's) and the same saga stored
// with none make the same operations; a ClusterTool stays one.
func TestTarget(t *testing.T) {
	tool := func(kind v1.ToolKind, name string) v1.StepToolReference {
		return v1.StepToolReference{Kind: kind, Name: name}
	}
	step := func(ref v1.StepToolReference, undo *v1.StepToolReference) v1.SagaStep {
		return v1.SagaStep{Name: "charge", ToolRef: ref, Operation: "charge.create",
			Compensation: &v1.Compensation{ToolRef: undo, Operation: "refund.create"}}
	}
	ledger := func(kind v1.ToolKind) *v1.StepToolReference { r := tool(kind, "ledger"); return &r }
	cases := map[string]struct {
		reason string
		step   v1.SagaStep
		undo   bool
		want   v1.ToolReference
		op     string
	}{
		"EmptyKind": {reason: "a manifest that names no kind names a Tool",
			step: step(tool("", "pay"), nil), want: v1.ToolReference{Kind: v1.ToolKindTool, Name: "pay"}, op: "charge.create"},
		"StoredKind": {reason: "a step stored with the old default names the same Tool",
			step: step(tool(v1.ToolKindTool, "pay"), nil), want: v1.ToolReference{Kind: v1.ToolKindTool, Name: "pay"},
			op: "charge.create"},
		"ClusterTool": {reason: "a ClusterTool is one",
			step: step(tool(v1.ToolKindClusterTool, "pay"), nil),
			want: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "pay"}, op: "charge.create"},
		"CompensationOfTheStepsTool": {reason: "a compensation without a toolRef uses the step's, kind and all",
			step: step(tool(v1.ToolKindClusterTool, "pay"), nil), undo: true,
			want: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "pay"}, op: "refund.create"},
		"CompensationEmptyKind": {reason: "a compensation's toolRef without a kind names a Tool, whatever the step's",
			step: step(tool(v1.ToolKindClusterTool, "pay"), ledger("")), undo: true,
			want: v1.ToolReference{Kind: v1.ToolKindTool, Name: "ledger"}, op: "refund.create"},
		"CompensationStoredKind": {reason: "a compensation's toolRef stored with the old default names the same Tool",
			step: step(tool("", "pay"), ledger(v1.ToolKindTool)), undo: true,
			want: v1.ToolReference{Kind: v1.ToolKindTool, Name: "ledger"}, op: "refund.create"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ref, op := Target(tc.step, tc.undo)
			if diff := gocmp.Diff(tc.want, ref); diff != "" {
				t.Errorf("%s\nTarget(...) tool: -want, +got:\n%s", tc.reason, diff)
			}
			if op != tc.op {
				t.Errorf("%s\nTarget(...) operation: want %s, got %s", tc.reason, tc.op, op)
			}
		})
	}
}

// TestStoredKindReapplied: a saga an earlier release stored (its steps'
// and compensations' kind Tool, which the API server filled in) whose
// manifest is applied again (the kind gone) is the same saga: the
// operations it made before are its own, not foreign, and those it makes
// after have the same names, keys and tools.
func TestStoredKindReapplied(t *testing.T) {
	stored := threeSteps()
	for i := range stored {
		stored[i].Compensation.ToolRef = &v1.StepToolReference{Kind: v1.ToolKindTool, Name: "shop"}
	}
	reapplied := func(s *sim) {
		for i := range s.spec.Steps {
			s.spec.Steps[i].ToolRef.Kind = ""
			s.spec.Steps[i].Compensation.ToolRef.Kind = ""
		}
	}
	shop := v1.ToolReference{Kind: v1.ToolKindTool, Name: "shop"}
	runSequences(t, map[string]sequence{
		"Forward": {
			reason: "The manifest applied again while the saga runs changes nothing it does.",
			steps:  stored,
			stages: []stage{start,
				{reason: "The reserve made before is the saga's; the charge is made as before.",
					do:   func(s *sim) { reapplied(s); set(committed, "order.reserve")(s) },
					acts: toCharge.acts, want: toCharge.want},
				toShip, shipFails,
				{reason: "The compensations name the Tool the steps named.", do: func(s *sim) {
					set(committed, "order.charge.undo")(s)
					for _, name := range []string{"order.reserve", "order.charge", "order.ship", "order.charge.undo"} {
						if got := s.children[name].Tool; got != shop {
							t.Errorf("%s names %+v, want %+v", name, got, shop)
						}
					}
				}, acts: []string{"create order.reserve.undo k/reserve/compensate"},
					want: comp("reserve", 2, 1, 2, "ship")},
			},
		},
	})
}
