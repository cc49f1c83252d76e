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
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func raw(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }

func from(pairs ...string) []v1.ParameterExpression {
	out := make([]v1.ParameterExpression, 0, len(pairs)/2)
	for i := 0; i < len(pairs); i += 2 {
		out = append(out, v1.ParameterExpression{Name: pairs[i], Expression: pairs[i+1]})
	}
	return out
}

// exprStep is a compensable step whose parameters are computed by do and
// its compensation's by undo (name, expression pairs).
func exprStep(name string, do, undo []v1.ParameterExpression) v1.SagaStep {
	return v1.SagaStep{Name: name, ToolRef: v1.StepToolReference{Name: "shop"}, Operation: name, ParametersFrom: do,
		Compensation: &v1.Compensation{Operation: "un" + name, ParametersFrom: undo}}
}

func TestCompile(t *testing.T) {
	type refs struct{ Do, Undo [][]string }
	cases := map[string]struct {
		reason string
		steps  []v1.SagaStep
		// errs must all be in the error; none means Compile succeeds.
		errs []string
		refs refs
	}{
		"Literal": {
			reason: "A spec without expressions compiles.",
			steps:  []v1.SagaStep{exprStep("order", nil, nil)},
			refs:   refs{Do: [][]string{nil}, Undo: [][]string{nil}},
		},
		"Inputs": {
			reason: "Every step may use the saga's inputs.",
			steps:  []v1.SagaStep{exprStep("order", from("sku", "inputs.sku", "qty", "inputs.lines.size()"), nil)},
			refs:   refs{Do: [][]string{nil}, Undo: [][]string{nil}},
		},
		"EarlierSteps": {
			reason: "A step may use the steps before it, by name, either way of writing it.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("order", "steps.order.externalObjectID"), nil),
				exprStep("ship", from("to", "steps['order'].result.address", "paid", "steps.charge.result.id"), nil),
			},
			refs: refs{Do: [][]string{nil, {"order"}, {"charge", "order"}}, Undo: [][]string{nil, nil, nil}},
		},
		"HasMacro": {
			reason: "has() on a step's field names the step.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("note", "has(steps.order.result.note) ? steps.order.result.note : ''"), nil),
			},
			refs: refs{Do: [][]string{nil, {"order"}}, Undo: [][]string{nil, nil}},
		},
		"CompensationUsesOwnStep": {
			reason: "A compensation undoes its own step's effect, so it may use that step.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", nil, from("charge", "steps.charge.externalObjectID", "order", "steps.order.result.id")),
			},
			refs: refs{Do: [][]string{nil, nil}, Undo: [][]string{nil, {"charge", "order"}}},
		},
		"HyphenatedName": {
			reason: "A step whose name has a hyphen is used as steps['<name>'].",
			steps: []v1.SagaStep{
				exprStep("with-hyphen", nil, nil),
				exprStep("next", from("id", "steps['with-hyphen'].externalObjectID"), nil),
			},
			refs: refs{Do: [][]string{nil, {"with-hyphen"}}, Undo: [][]string{nil, nil}},
		},
		"ForwardReference": {
			reason: "A step cannot use a step that runs after it.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("ship", "steps.ship.result.id"), nil),
				exprStep("ship", nil, nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[0] (ship): steps.ship is not a step before this one (those are [order])"},
		},
		"ForwardReferenceFromFirst": {
			reason: "The first step has no step to use.",
			steps:  []v1.SagaStep{exprStep("order", from("id", "steps.charge.externalObjectID"), nil), exprStep("charge", nil, nil)},
			errs:   []string{"spec.steps[0].parametersFrom[0] (id): steps.charge: the first step has no earlier steps to use"},
		},
		"SelfReference": {
			reason: "A step's parameters are computed before it runs: it cannot use itself.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("amount", "inputs.amount", "id", "steps.charge.externalObjectID"), nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[1] (id): steps.charge is this step"},
		},
		"UnknownStep": {
			reason: "A name that is no step is refused.",
			steps:  []v1.SagaStep{exprStep("order", nil, nil), exprStep("charge", from("id", "steps.nope.result"), nil)},
			errs:   []string{"spec.steps[1].parametersFrom[0] (id): steps.nope is not a step before this one (those are [order])"},
		},
		"CompensationLaterStep": {
			reason: "A compensation may use its step and those before it, not later ones.",
			steps: []v1.SagaStep{
				exprStep("order", nil, from("charge", "steps.charge.externalObjectID")),
				exprStep("charge", nil, nil),
			},
			errs: []string{"spec.steps[0].compensation.parametersFrom[0] (charge): steps.charge is not a step before this one (those are [order])"},
		},
		"ComputedIndex": {
			reason: "A step must be named literally, so that its references are known before anything runs.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("id", "steps[inputs.step].externalObjectID"), nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[0] (id): steps must be indexed by a step's name written out"},
		},
		"ComputedIndexOfLiterals": {
			reason: "A computed name is refused even when it is made of literals.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("id", "steps['ord' + 'er'].externalObjectID"), nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[0] (id): steps must be indexed by a step's name written out"},
		},
		"BareSteps": {
			reason: "steps is used only as steps.<name>.",
			steps:  []v1.SagaStep{exprStep("order", nil, nil), exprStep("charge", from("n", "size(steps)"), nil)},
			errs:   []string{"spec.steps[1].parametersFrom[0] (n): steps must be used as steps.<name>"},
		},
		"ComprehensionOverSteps": {
			reason: "A macro over steps uses them all, unnamed.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("any", "steps.exists(k, k == 'order')"), nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[0] (any): steps must be used as steps.<name>"},
		},
		"RegexLiteral": {
			reason: "A matches() with a literal pattern of a small program compiles.",
			steps: []v1.SagaStep{exprStep("order", from("ok",
				"inputs.id.matches('^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$')"), nil)},
			refs: refs{Do: [][]string{nil}, Undo: [][]string{nil}},
		},
		"RegexNestedRepetition": {
			reason: "Nested bounded repetitions expand into a program whose match takes seconds and cannot be stopped.",
			steps:  []v1.SagaStep{exprStep("order", from("ok", "inputs.text.matches('((a{1,10}){1,10}){1,10}b')"), nil)},
			errs:   []string{"spec.steps[0].parametersFrom[0] (ok): ", "compiles to 2222 instructions, more than the limit of 128"},
		},
		"RegexComputedPattern": {
			reason: "A pattern computed at run time (from an earlier step's answer, say) cannot be bounded before it runs.",
			steps: []v1.SagaStep{
				exprStep("order", nil, nil),
				exprStep("charge", from("ok", "inputs.text.matches(steps.order.result.pattern)"), nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[0] (ok): ", "the pattern of matches() must be a string literal"},
		},
		"RegexComputedPatternGlobal": {
			reason: "The function form of matches() is held to the same.",
			steps:  []v1.SagaStep{exprStep("order", from("ok", "matches(inputs.text, inputs.pattern)"), nil)},
			errs:   []string{"spec.steps[0].parametersFrom[0] (ok): ", "the pattern of matches() must be a string literal"},
		},
		"SyntaxError": {
			reason: "An expression that does not parse is refused, naming its field.",
			steps:  []v1.SagaStep{exprStep("order", from("sku", "inputs.(sku"), nil)},
			errs:   []string{"spec.steps[0].parametersFrom[0] (sku): ", "Syntax error"},
		},
		"UndeclaredReference": {
			reason: "Only inputs and steps exist.",
			steps:  []v1.SagaStep{exprStep("order", from("sku", "params.sku"), nil)},
			errs:   []string{"spec.steps[0].parametersFrom[0] (sku): ", "undeclared reference to 'params'"},
		},
		"HyphenWithoutBrackets": {
			reason: "steps.with-hyphen is a subtraction, not a step.",
			steps: []v1.SagaStep{
				exprStep("with-hyphen", nil, nil),
				exprStep("next", from("id", "steps.with-hyphen"), nil),
			},
			errs: []string{"spec.steps[1].parametersFrom[0] (id): "},
		},
		"EveryProblem": {
			reason: "Compile reports every problem at once, each with its field.",
			steps: []v1.SagaStep{
				exprStep("order", from("a", "steps.charge.result", "b", "inputs.("), from("c", "size(steps)")),
				exprStep("charge", nil, from("d", "steps.ship.result")),
				exprStep("ship", nil, nil),
			},
			errs: []string{
				"spec.steps[0].parametersFrom[0] (a): steps.charge: the first step has no earlier steps to use",
				"spec.steps[0].parametersFrom[1] (b): ",
				"spec.steps[0].compensation.parametersFrom[0] (c): steps must be used as steps.<name>",
				"spec.steps[1].compensation.parametersFrom[0] (d): steps.ship is not a step before this one",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			plan, err := Compile(&v1.SagaSpec{Steps: tc.steps})
			if len(tc.errs) > 0 {
				if err == nil {
					t.Fatalf("%s: Compile succeeded", tc.reason)
				}
				if plan != nil {
					t.Errorf("%s: a spec that does not compile must give no plan", tc.reason)
				}
				for _, want := range tc.errs {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: the error must say %q:\n%v", tc.reason, want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			var got refs
			for i := range tc.steps {
				got.Do = append(got.Do, plan.Refs(i, false))
				got.Undo = append(got.Undo, plan.Refs(i, true))
			}
			if diff := cmp.Diff(tc.refs, got); diff != "" {
				t.Errorf("%s: Refs: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// parametersSaga is a saga whose parameters are literal and computed from
// its inputs and an earlier step, the inputs, and the data of that step.
func parametersSaga() (steps []v1.SagaStep, inputs []byte, order StepData) {
	steps = []v1.SagaStep{
		{Name: "order", ToolRef: v1.StepToolReference{Name: "shop"}, Operation: "order.create",
			Parameters:     raw(`{"z": 1, "currency": "EUR", "nested": {"b": 2, "a": [3, {"y": 1, "x": 2}]}}`),
			ParametersFrom: from("sku", "inputs.sku", "amount", "inputs.amount"),
			Compensation: &v1.Compensation{Operation: "order.cancel", Parameters: raw(`{"why": "saga"}`),
				ParametersFrom: from("order", "steps.order.externalObjectID")}},
		{Name: "charge", ToolRef: v1.StepToolReference{Name: "pay"}, Operation: "charge.create",
			Parameters: raw(`{"currency": "EUR", "amount": 1}`),
			ParametersFrom: from(
				"amount", "steps.order.result.total",
				"order", "steps.order.externalObjectID",
				"line", "steps.order.result.lines[1].sku",
				"whole", "steps.order.result.count == 3 && steps.order.result.lines[0].qty + 1 == 3",
				"half", "steps.order.result.price == 9.5",
				"map", "{'z': inputs.sku, 'a': [2, 1]}",
			),
			Compensation: &v1.Compensation{Operation: "refund.create"}},
		{Name: "ship", ToolRef: v1.StepToolReference{Name: "post"}, Operation: "parcel.send", Irreversible: true,
			ParametersFrom: from("to", "inputs.customer.address", "note", "steps.order.result.note")},
	}
	inputs = []byte(`{"sku": "A-1", "amount": 1250, "customer": {"address": "1 Main St"}}`)
	order = StepData{ExternalObjectID: "ord_1",
		Result: []byte(`{"total": 1250, "count": 3, "price": 9.5, "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-2", "qty": 1}]}`)}
	return steps, inputs, order
}

func TestParameters(t *testing.T) {
	steps, inputs, order := parametersSaga()
	plan, err := Compile(&v1.SagaSpec{Steps: steps})
	if err != nil {
		t.Fatal(err)
	}
	type args struct {
		step   int
		undo   bool
		inputs []byte
		data   map[string]StepData
	}
	cases := map[string]struct {
		reason string
		args   args
		want   string
		// err must be in the error, if one is wanted.
		err []string
	}{
		"LiteralAndComputed": {
			reason: "Literal parameters with the computed ones beside them, in canonical JSON whatever the written order.",
			args:   args{step: 0, inputs: inputs},
			want:   `{"amount":1250,"currency":"EUR","nested":{"a":[3,{"x":2,"y":1}],"b":2},"sku":"A-1","z":1}`,
		},
		"ComputedOverridesLiteral": {
			reason: "A computed parameter replaces the literal one of its name; values come from the step's result " +
				"(whole numbers compare as ints, others as doubles), its externalObjectID, and maps come out canonical.",
			args: args{step: 1, inputs: inputs, data: map[string]StepData{"order": order}},
			want: `{"amount":1250,"currency":"EUR","half":true,"line":"B-2","map":{"a":[2,1],"z":"A-1"},` +
				`"order":"ord_1","whole":true}`,
		},
		"CompensationUsesItsStep": {
			reason: "A compensation uses its own step's externalObjectID.",
			args:   args{step: 0, undo: true, data: map[string]StepData{"order": order}},
			want:   `{"order":"ord_1","why":"saga"}`,
		},
		"ExtraDataIgnored": {
			reason: "Data of steps the parameters do not use changes nothing.",
			args: args{step: 0, undo: true, data: map[string]StepData{"order": order,
				"charge": {ExternalObjectID: "ch_1"}}},
			want: `{"order":"ord_1","why":"saga"}`,
		},
		"NoComputedNoInputs": {
			reason: "A compensation with literals only needs nothing.",
			args:   args{step: 1, undo: true},
			want:   `{}`,
		},
		"MissingStepData": {
			reason: "A step whose outcome is not recorded cannot be used: no guess.",
			args:   args{step: 1, inputs: inputs, data: map[string]StepData{"charge": {}}},
			err:    []string{"step order has no recorded outcome to use"},
		},
		"MissingField": {
			reason: "An evaluation error names the parameter and its expression.",
			args:   args{step: 2, inputs: inputs, data: map[string]StepData{"order": order}},
			err:    []string{"parameter note", `"steps.order.result.note"`, "no such key"},
		},
		"EmptyResult": {
			reason: "A step without a recorded result has a null one: a field of it is an error naming the parameter.",
			args:   args{step: 2, inputs: inputs, data: map[string]StepData{"order": {ExternalObjectID: "ord_1"}}},
			err:    []string{"parameter note"},
		},
		"MissingInput": {
			reason: "An input that is not there is an error naming the parameter.",
			args:   args{step: 0, inputs: []byte(`{"sku": "A-1"}`)},
			err:    []string{"parameter amount", `"inputs.amount"`, "no such key"},
		},
		"InputsNotJSON": {
			reason: "Inputs that are not a JSON object are an error.",
			args:   args{step: 0, inputs: []byte(`[1]`)},
			err:    []string{"spec.inputs"},
		},
		"ResultNotJSON": {
			reason: "A recorded result that is not JSON is an error naming the step.",
			args:   args{step: 1, inputs: inputs, data: map[string]StepData{"order": {Result: []byte(`{`)}}},
			err:    []string{"the result of step order"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := plan.Parameters(context.Background(), tc.args.step, tc.args.undo, tc.args.inputs, tc.args.data)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("%s: want an error, got %s", tc.reason, got)
				}
				for _, want := range tc.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: the error must say %q: %v", tc.reason, want, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, string(got)); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestParametersCanonical: the same parameters written in another order,
// or with other spacing, give the same bytes, hence the same request hash.
func TestParametersCanonical(t *testing.T) {
	specs := []string{
		`{"b": {"y": [1, 2], "x": 1.5}, "a": "é", "c": null}`,
		`{"c":null,"a":"\u00e9","b":{"x":1.50,"y":[1,2]}}`,
		`{ "a" : "é" , "c" : null , "b" : { "y" : [ 1 , 2 ] , "x" : 15e-1 } }`,
	}
	var first string
	for i, literal := range specs {
		plan, err := Compile(&v1.SagaSpec{Steps: []v1.SagaStep{{Name: "a", Operation: "x", Parameters: raw(literal),
			ParametersFrom: from("d", "{'q': 1, 'p': inputs.n}"), Irreversible: true}}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := plan.Parameters(context.Background(), 0, false, []byte(`{"n": 2}`), nil)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = string(got)
			if want := `{"a":"é","b":{"x":1.5,"y":[1,2]},"c":null,"d":{"p":2,"q":1}}`; first != want {
				t.Errorf("want %s, got %s", want, first)
			}
			continue
		}
		if string(got) != first {
			t.Errorf("%s gives %s, %s gives %s", specs[0], first, literal, got)
		}
	}
}
