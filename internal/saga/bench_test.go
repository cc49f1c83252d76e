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
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The benchmarks of the saga's decision and expressions, the pure code
// every reconcile of a saga runs. Each checks the result of its last call,
// so that a benchmark of the wrong path fails instead of measuring it.

// benchSaga is a saga of the steps, as the controller reads it before its
// first pass.
func benchSaga(tb testing.TB, steps []v1.SagaStep) View {
	tb.Helper()
	spec := &v1.SagaSpec{IdempotencyKey: sagaKey, Steps: steps}
	plan, err := Compile(spec)
	if err != nil {
		tb.Fatal(err)
	}
	return View{Name: sagaName, Generation: 1, Spec: spec, Children: map[string]Child{}, Plan: plan, Now: now}
}

// settle plays one reconcile of the saga controller: it takes decisions
// until one asks for nothing, passing every validation and creating, as
// Planned, every operation asked for. It returns the checkpoint written.
func settle(tb testing.TB, v View) v1.SagaStatus {
	tb.Helper()
	for range 100 {
		d := Decide(v)
		v.Status = d.Status
		switch a := d.Action; a.Kind {
		case ActionNone:
			return d.Status
		case ActionValidate:
			v.Status.Steps[a.Step].Validation = &v1.StepValidation{Outcome: v1.ValidationPassed,
				Time: metav1.NewTime(v.Now)}
		case ActionCreate:
			tool, operation := Target(v.Spec.Steps[a.Step], a.Undo)
			v.Children[a.Name] = Child{State: v1.StatePlanned, Key: a.Key, Tool: tool, Operation: operation}
		}
	}
	tb.Fatal("a pass did not end")
	return v1.SagaStatus{}
}

// finish moves the operation name to state and reconciles the saga.
func finish(tb testing.TB, v *View, name string, state v1.OperationState) {
	tb.Helper()
	c, ok := v.Children[name]
	if !ok {
		tb.Fatalf("%s does not exist", name)
	}
	c.State, c.Message = state, "the tool says "+string(state)
	v.Children[name] = c
	v.Status = settle(tb, *v)
}

// benchDecide benchmarks the decision on v, which must move on to step
// by writing a checkpoint that names its operation.
func benchDecide(b *testing.B, v View, state v1.OperationState, step string) {
	b.ReportAllocs()
	var d Decision
	for b.Loop() {
		d = Decide(v)
	}
	if d.Action.Kind != ActionCheckpoint || d.Status.State != state || d.Status.CurrentStep != step {
		b.Fatalf("Decide: want a checkpoint %s at step %s, got action %d, %s at step %s",
			state, step, d.Action.Kind, d.Status.State, d.Status.CurrentStep)
	}
}

// BenchmarkDecideMidRun: the second of three steps has just committed;
// the saga writes the checkpoint that names the third.
func BenchmarkDecideMidRun(b *testing.B) {
	v := benchSaga(b, threeSteps())
	v.Status = settle(b, v)
	finish(b, &v, "order.reserve", committed)
	c := v.Children["order.charge"]
	c.State = committed
	v.Children["order.charge"] = c
	benchDecide(b, v, started, "ship")
}

// BenchmarkDecideCompensating: of 16 steps, the 13th failed for good after
// 12 committed; the compensations of steps 12 to 9 are done, and that of
// step 8 has just committed: the saga writes the checkpoint that names
// step 7's.
func BenchmarkDecideCompensating(b *testing.B) {
	steps := make([]v1.SagaStep, 16)
	for i := range steps {
		steps[i] = compensable(fmt.Sprintf("s%02d", i+1))
	}
	v := benchSaga(b, steps)
	v.Status = settle(b, v)
	for i := 1; i <= 12; i++ {
		finish(b, &v, fmt.Sprintf("order.s%02d", i), committed)
	}
	finish(b, &v, "order.s13", failedFinal)
	for i := 12; i > 8; i-- {
		finish(b, &v, fmt.Sprintf("order.s%02d.undo", i), committed)
	}
	c := v.Children["order.s08.undo"]
	c.State = committed
	v.Children["order.s08.undo"] = c
	benchDecide(b, v, compensatingS, "s07")
}

func BenchmarkCompile(b *testing.B) {
	b.ReportAllocs()
	steps, _, _ := parametersSaga()
	spec := &v1.SagaSpec{Steps: steps}
	var (
		plan *Plan
		err  error
	)
	for b.Loop() {
		plan, err = Compile(spec)
	}
	if err != nil || !slices.Equal(plan.Refs(1, false), []string{"order"}) {
		b.Fatalf("Compile: got %v", err)
	}
}

func BenchmarkPlanParameters(b *testing.B) {
	b.ReportAllocs()
	steps, inputs, order := parametersSaga()
	plan, err := Compile(&v1.SagaSpec{Steps: steps})
	if err != nil {
		b.Fatal(err)
	}
	data := map[string]StepData{"order": order}
	ctx := context.Background()
	var got []byte
	for b.Loop() {
		got, err = plan.Parameters(ctx, 1, false, inputs, data)
	}
	want := `{"amount":1250,"currency":"EUR","half":true,"line":"B-2","map":{"a":[2,1],"z":"A-1"},` +
		`"order":"ord_1","whole":true}`
	if err != nil || string(got) != want {
		b.Fatalf("Parameters: want %s, got %s, %v", want, got, err)
	}
}
