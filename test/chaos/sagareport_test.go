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

package chaos

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

// The hand-built sagas below are sagas "s1" of three Native steps a, b, c
// on the charges collection, compensated by cancels.

func stepKey(step string) string { return "ns/Tool:payments/charge.create/s1/" + step }

func undoKey(step string, round int) string {
	k := "ns/Tool:payments/charge.refund/s1/" + step + "/compensate"
	if round > 1 {
		k += fmt.Sprintf("/%d", round)
	}
	return k
}

func createScope(step string) string {
	return sandbox.SummaryKey("native", "charges", sandbox.ActionCreate, stepKey(step))
}

func undoScope(step string, round int) string {
	return sandbox.SummaryKey("native", "charges", sandbox.ActionCancel, undoKey(step, round))
}

// created is the ledger's create of a step's object, ch_<step>.
func created(step string, seq int64) sandbox.Effect {
	return sandbox.Effect{Seq: seq, ID: "ch_" + step, Mode: "native", Collection: "charges",
		Action: sandbox.ActionCreate, Key: stepKey(step), BodySHA256: "P" + step, Time: t0.Add(time.Duration(seq) * time.Second)}
}

// cancelled is the ledger's cancel of a step's object, by its compensation
// in a round.
func cancelled(step string, round int, seq int64) sandbox.Effect {
	return sandbox.Effect{Seq: seq, ID: "ch_" + step, Mode: "native", Collection: "charges",
		Action: sandbox.ActionCancel, Key: undoKey(step, round), BodySHA256: "U" + step,
		Time: t0.Add(time.Duration(seq) * time.Second)}
}

// stepOp is the operation of a step, in state; a Committed one reports
// the step's object.
func stepOp(step string, state v1.OperationState) Object {
	o := Object{Name: "s1." + step, Logical: -1, Saga: "s1", Role: RoleStep, Mode: v1.IdempotencyNative,
		ScopeKey: createScope(step), BodySHA: "P" + step, Found: true,
		Status: v1.SideEffectOperationStatus{State: state, Attempts: 1, CompletionTime: at(time.Second)}}
	if state == v1.StateCommitted {
		o.Status.ExternalObjectID = "ch_" + step
	}
	return o
}

// undoOp is the operation of a step's compensation in a round.
func undoOp(step string, round int, state v1.OperationState) Object {
	name := "s1." + step + ".undo"
	if round > 1 {
		name += fmt.Sprintf(".%d", round)
	}
	o := Object{Name: name, Logical: -1, Saga: "s1", Role: RoleCompensation, Mode: v1.IdempotencyNative,
		ScopeKey: undoScope(step, round), BodySHA: "U" + step, Found: true,
		Status: v1.SideEffectOperationStatus{State: state, Attempts: 1}}
	if state == v1.StateCommitted {
		o.Status.ExternalObjectID = "ch_" + step
	}
	return o
}

// sagaS1 is saga s1 in state; steps holds each step's checkpoint state,
// and a compensation's, as "Committed" or "Compensated/Compensated".
func sagaS1(state v1.OperationState, failed string, steps ...string) Saga {
	s := Saga{Name: "s1", Role: RoleOriginal, Key: "s1", FailAt: failed, Found: true,
		Status: v1.SagaStatus{State: state, FailedStep: failed}}
	for i, name := range []string{"a", "b", "c"} {
		s.Steps = append(s.Steps, SagaStep{Name: name, Mode: v1.IdempotencyNative, Scope: createScope(name),
			CompensationScopes: []string{undoScope(name, 1)}})
		ss := v1.SagaStepStatus{Name: name, Round: 1}
		if i < len(steps) && steps[i] != "" {
			st, undo, _ := strings.Cut(steps[i], "/")
			ss.State, ss.Operation = v1.OperationState(st), "s1."+name
			if undo != "" {
				ss.Compensation = &v1.CompensationStatus{Operation: "s1." + name + ".undo", Round: 1,
					State: v1.OperationState(undo)}
			}
		}
		s.Status.Steps = append(s.Status.Steps, ss)
	}
	return s
}

// markCompensated records a person's MarkCompensated of step, in the spec
// if written and in the checkpoint if applied.
func markCompensated(s Saga, step string, written, applied bool) Saga {
	r := v1.SagaResolution{Step: step, Action: v1.SagaMarkCompensated, By: person}
	if written {
		s.Resolutions = append(s.Resolutions, r)
	}
	for i := range s.Status.Steps {
		if ss := &s.Status.Steps[i]; ss.Name == step && applied {
			ss.State = v1.StateCompensated
			ss.Compensation.State, ss.Compensation.Resolution = v1.StateCompensated, &r
		}
	}
	return s
}

func analyseSagas1(objects []Object, sagas []Saga, effects ...sandbox.Effect) Report {
	return Analyse(0, objects, sagas, effects)
}

func TestAnalyseSagas(t *testing.T) {
	// The failure of step c is recorded at t0+10s; the creates of a and b
	// come first (seq 1, 2), the cancels after the failure, b first.
	failedC := stepOp("c", v1.StateFailedFinal)
	failedC.Status.CompletionTime = at(10 * time.Second)
	compensated := func() ([]Object, Saga, []sandbox.Effect) {
		return []Object{stepOp("a", v1.StateCommitted), stepOp("b", v1.StateCommitted), failedC,
				undoOp("a", 1, v1.StateCommitted), undoOp("b", 1, v1.StateCommitted)},
			sagaS1(v1.StateCompensated, "c", "Compensated/Compensated", "Compensated/Compensated", "FailedFinal"),
			[]sandbox.Effect{created("a", 1), created("b", 2), cancelled("b", 1, 11), cancelled("a", 1, 12)}
	}
	// The saga ended within the second of the last cancel.
	ended := func() ([]Object, Saga, []sandbox.Effect) {
		objects, s, effects := compensated()
		s.Status.CompletionTime = at(12 * time.Second)
		return objects, s, effects
	}
	tests := map[string]struct {
		reason     string
		build      func() ([]Object, Saga, []sandbox.Effect)
		violations []string
		early      int
		disordered int
		lost       int
	}{
		"committed": {
			reason: "every step has its effect, and none is cancelled",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				return []Object{stepOp("a", v1.StateCommitted), stepOp("b", v1.StateCommitted), stepOp("c", v1.StateCommitted)},
					sagaS1(v1.StateCommitted, "", "Committed", "Committed", "Committed"),
					[]sandbox.Effect{created("a", 1), created("b", 2), created("c", 3)}
			},
		},
		"compensated": {
			reason: "the committed steps were cancelled last first, after the failure",
			build:  compensated,
		},
		"compensated in the second of the last cancel": {
			reason: "status times are kept to the second: a cancel in the second the saga ended came before",
			build:  ended,
		},
		"compensated early: the cancel of a step is missing": {
			reason: "the operator says the compensation of a committed, but the tool never cancelled ch_a",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, effects := compensated()
				return objects, s, effects[:3]
			},
			// Record: the compensation's operation reports an effect the
			// tool does not have.
			violations: []string{"I8", "Record"},
			early:      1,
		},
		"compensated early: a compensation failed for good": {
			reason: "the saga says Compensated though a's compensation failed and nobody decided",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, effects := compensated()
				objects[3] = undoOp("a", 1, v1.StateFailedFinal)
				return objects, s, effects[:3]
			},
			violations: []string{"I8", "SagaRecord"},
			early:      1,
		},
		"a step marked compensated while the saga compensates": {
			reason: "the saga is still Compensating, but step a is marked done before any cancel of it",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, _, effects := compensated()
				objects[3] = undoOp("a", 1, v1.StateStarted)
				s := sagaS1(v1.StateNeedsReview, "c", "Compensated/Compensated", "Compensated/Compensated", "FailedFinal")
				return objects, s, effects[:3]
			},
			violations: []string{"I8", "SagaRecord"},
			early:      1,
			lost:       1, // the compensation's operation never ended
		},
		"marked compensated by a person": {
			reason: "a's compensation failed for good and a person marked it compensated",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, _, effects := compensated()
				objects[3] = undoOp("a", 1, v1.StateFailedFinal)
				s := sagaS1(v1.StateCompensated, "c", "Compensating/FailedFinal", "Compensated/Compensated", "FailedFinal")
				return objects, markCompensated(s, "a", true, true), effects[:3]
			},
		},
		"a decision nobody wrote": {
			reason: "the checkpoint applies a MarkCompensated that spec.resolutions does not have",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, _, effects := compensated()
				objects[3] = undoOp("a", 1, v1.StateFailedFinal)
				s := sagaS1(v1.StateCompensated, "c", "Compensating/FailedFinal", "Compensated/Compensated", "FailedFinal")
				return objects, markCompensated(s, "a", false, true), effects[:3]
			},
			violations: []string{"I8", "SagaRecord"},
			early:      1,
		},
		"retried by a person": {
			reason: "a's first compensation was refused for good; the second round cancelled it",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, effects := compensated()
				objects[3] = undoOp("a", 1, v1.StateFailedFinal)
				objects = append(objects, undoOp("a", 2, v1.StateCommitted))
				s.Steps[0].CompensationScopes = append(s.Steps[0].CompensationScopes, undoScope("a", 2))
				s.Status.Steps[0].Compensation.Operation, s.Status.Steps[0].Compensation.Round = "s1.a.undo.2", 2
				return objects, s, append(effects[:3], cancelled("a", 2, 14))
			},
		},
		"committed without an effect": {
			reason: "the saga says Committed, but the tool has no effect for step c",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				return []Object{stepOp("a", v1.StateCommitted), stepOp("b", v1.StateCommitted)},
					sagaS1(v1.StateCommitted, "", "Committed", "Committed", "Committed"),
					[]sandbox.Effect{created("a", 1), created("b", 2)}
			},
			// SagaRecord: s1.c is named, and missing.
			violations: []string{"SagaRecord", "SagaRecord"},
		},
		"failed with an effect standing": {
			reason: "the saga says FailedFinal, nothing taken effect, but a's effect stands",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				failedB := stepOp("b", v1.StateFailedFinal)
				return []Object{stepOp("a", v1.StateCommitted), failedB},
					sagaS1(v1.StateFailedFinal, "b", "Committed", "FailedFinal"),
					[]sandbox.Effect{created("a", 1)}
			},
			violations: []string{"SagaRecord"},
		},
		"cancelled first first": {
			reason: "a, the first step, was cancelled before b",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, _ := compensated()
				return objects, s, []sandbox.Effect{created("a", 1), created("b", 2), cancelled("a", 1, 11),
					cancelled("b", 1, 12)}
			},
			violations: []string{"SagaOrder"},
			disordered: 1,
		},
		"a cancel before the failure": {
			reason: "b was cancelled at t0+5s, before c's failure was recorded at t0+10s",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, _ := compensated()
				return objects, s, []sandbox.Effect{created("a", 1), created("b", 2), cancelled("b", 1, 5),
					cancelled("a", 1, 12)}
			},
			violations: []string{"SagaOrder"},
			disordered: 1,
		},
		"a cancel before a create": {
			reason: "a was cancelled (seq 2) before b was created (seq 3)",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, _ := compensated()
				objects[2].Status.CompletionTime = nil
				return objects, s, []sandbox.Effect{created("a", 1), cancelled("a", 1, 2), created("b", 3),
					cancelled("b", 1, 4)}
			},
			// Both cancels are out of order: a's precedes b's create and
			// b's cancel.
			violations: []string{"SagaOrder", "SagaOrder"},
			disordered: 1,
		},
		"compensated before the cancels": {
			reason: "the saga ended Compensated at t0+11s, a second before b's cancel at t0+12s",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, _ := compensated()
				s.Status.CompletionTime = at(11 * time.Second)
				return objects, s, []sandbox.Effect{created("a", 1), created("b", 2), cancelled("b", 1, 12),
					cancelled("a", 1, 13)}
			},
			violations: []string{"I8", "SagaOrder", "SagaOrder"},
			early:      1,
			disordered: 1,
		},
		"the wrong object cancelled": {
			reason: "a's compensation cancelled b's object",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, s, _ := compensated()
				wrong := cancelled("a", 1, 12)
				wrong.ID = "ch_b"
				objects[3].Status.ExternalObjectID = "ch_b"
				return objects, s, []sandbox.Effect{created("a", 1), created("b", 2), cancelled("b", 1, 11), wrong}
			},
			violations: []string{"I8", "SagaRecord"},
			early:      1,
		},
		"lost": {
			reason: "the saga still compensates at the bound",
			build: func() ([]Object, Saga, []sandbox.Effect) {
				objects, _, effects := compensated()
				s := sagaS1(v1.StateCompensating, "c", "Compensating/Compensating", "Compensated/Compensated", "FailedFinal")
				objects[3] = undoOp("a", 1, v1.StateFailedRetryable)
				return objects, s, effects[:3]
			},
			lost: 2, // the saga, and a's compensation
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objects, s, effects := tc.build()
			r := analyseSagas1(objects, []Saga{s}, effects...)
			if diff := cmp.Diff(tc.violations, kinds(r.Violations)); diff != "" {
				t.Errorf("%s: violations (-want, +got):\n%s\n%s", tc.reason, diff, r.Table())
			}
			got := []int{r.SagasCompensatedEarly, r.SagaOrderViolations, r.LostSagas + r.LostObjects}
			if diff := cmp.Diff([]int{tc.early, tc.disordered, tc.lost}, got); diff != "" {
				t.Errorf("%s: early, disordered, lost (-want, +got):\n%s", tc.reason, diff)
			}
			wantPass := len(tc.violations) == 0 && tc.early == 0 && tc.lost == 0
			if r.Passed != wantPass {
				t.Errorf("%s: passed %v, want %v: %v", tc.reason, r.Passed, wantPass, r.Problems())
			}
			if _, err := r.JSON(); err != nil {
				t.Errorf("JSON: %v", err)
			}
		})
	}
}

func TestAnalyseSagaFigures(t *testing.T) {
	recovered := undoOp("b", 1, v1.StateCommitted)
	recovered.Status.Attempts = 3
	masked := undoOp("a", 1, v1.StateFailedFinal)
	masked.Status.Observations = []v1.Observation{{Kind: v1.ObservationCall, Attempt: 1, HTTPStatus: 409,
		Outcome: string(v1.OutcomeUnknown), Message: `409 Conflict: {"error":"already_cancelled"}`}}
	failedC := stepOp("c", v1.StateFailedFinal)
	s := sagaS1(v1.StateNeedsReview, "c", "Compensating/FailedFinal", "Compensated/Compensated", "FailedFinal")
	s.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: "CompensationFailed"}}
	r := analyseSagas1([]Object{stepOp("a", v1.StateCommitted), stepOp("b", v1.StateCommitted), failedC, masked, recovered},
		[]Saga{s}, created("a", 1), created("b", 2), cancelled("b", 1, 11))
	want := SagaFigures{
		Sagas: 1, SagasRejecting: 1, SagaSteps: 3,
		SagaStates: map[string]int{"NeedsReview": 1}, SagaReviewReasons: map[string]int{"CompensationFailed": 1},
		SagaOperations: 5, SagaOperationObjects: 5,
		SagaOperationStates:    map[string]int{"Committed": 3, "FailedFinal": 2},
		CompensationsStarted:   2,
		CompensationsCommitted: 1, CompensationsRecovered: 1, CompensationsFailedFinal: 1,
		CompensationSuccessRate: 0.5, StepsCompensated: 1, MaskedCancels: 1,
	}
	if diff := cmp.Diff(want, r.SagaFigures); diff != "" {
		t.Errorf("figures (-want, +got):\n%s", diff)
	}
	if r.Passed {
		t.Errorf("a masked second cancel passed")
	}
	if r.Cancels != 1 || r.Effects != 2 || r.DSR != 0 {
		t.Errorf("effects %d, cancels %d, DSR %v", r.Effects, r.Cancels, r.DSR)
	}
}

func TestAnalyseDuplicateCancel(t *testing.T) {
	objects := []Object{stepOp("a", v1.StateCommitted), stepOp("b", v1.StateFailedFinal), undoOp("a", 1, v1.StateCommitted)}
	s := sagaS1(v1.StateCompensated, "b", "Compensated/Compensated", "FailedFinal")
	r := analyseSagas1(objects, []Saga{s}, created("a", 1), cancelled("a", 1, 2), cancelled("a", 1, 3))
	if r.DuplicateEffects != 1 || !slices.Contains(kinds(r.Violations), "I1") || r.Passed {
		t.Errorf("two cancels for one compensation key: duplicates %d, violations %v, passed %v",
			r.DuplicateEffects, kinds(r.Violations), r.Passed)
	}
}

func TestMakeSagaPlan(t *testing.T) {
	c := Config{Operations: 2000, Seed: 7}.Defaults()
	a, b := makeSagaPlan(c), makeSagaPlan(c)
	if len(a) != 250 || fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatalf("%d sagas, or the plan is not determined by the seed", len(a))
	}
	n := map[string]int{}
	for _, ps := range a {
		if k := len(ps.steps); k < 2 || k > 4 {
			t.Errorf("%s has %d steps", ps.name, k)
		}
		if ps.failAt >= 0 {
			n["failing"]++
		}
		if ps.dup {
			n["duplicates"]++
		}
		s := ps.object("ns", ps.name)
		for j := range ps.steps {
			checkPlannedStep(t, ps, s.Spec.Steps[j], j, n)
		}
	}
	t.Logf("%v", n)
	for what, least := range map[string]int{"failing": 70, "refusals": 1, "faults": 30, "irreversible": 50,
		"duplicates": 1, "flows": 200} {
		if n[what] < least {
			t.Errorf("the plan is not mixed enough: %d %s, want at least %d", n[what], what, least)
		}
	}
	if rules := compensationRules("ns", a); len(rules) != n["refusals"]+n["faults"] {
		t.Errorf("%d compensation rules for %d faults and %d refusals", len(rules), n["faults"], n["refusals"])
	}
}

// checkPlannedStep checks step j of planned saga ps against its spec, and
// counts what it is in n.
func checkPlannedStep(t *testing.T, ps plannedSaga, step v1.SagaStep, j int, n map[string]int) {
	t.Helper()
	st := ps.steps[j]
	if st.irreversible {
		n["irreversible"]++
		if j != len(ps.steps)-1 || step.Compensation != nil || !step.Irreversible {
			t.Errorf("%s: step %s is irreversible but not the last, or has a compensation", ps.name, st.name)
		}
	} else if step.Compensation == nil || step.Compensation.Operation != st.tool.cancel {
		t.Errorf("%s: step %s has no compensation by %s", ps.name, st.name, st.tool.cancel)
	}
	if st.from >= 0 {
		n["flows"]++
		if st.from >= j || step.ParametersFrom[0].Expression != stepRef(ps.steps[st.from].name) {
			t.Errorf("%s: step %s uses step %d", ps.name, st.name, st.from)
		}
	}
	var params map[string]any
	if err := json.Unmarshal(step.Parameters.Raw, &params); err != nil {
		t.Fatal(err)
	}
	if _, rejects := params["reject"]; rejects != (j == ps.failAt) {
		t.Errorf("%s: step %s rejects: %v, fails at %d", ps.name, st.name, rejects, ps.failAt)
	}
	switch {
	case st.fault.refusal():
		n["refusals"]++
	case st.fault.fault != "":
		n["faults"]++
		if st.tool.mode == v1.IdempotencyNone && !strings.HasPrefix(st.fault.fault, sandbox.Fault429) {
			t.Errorf("%s: %s on a None tool's compensation needs a person", ps.name, st.fault.fault)
		}
	}
	if st.fault.fault != "" && j >= ps.failAt {
		t.Errorf("%s: step %s has a compensation fault but is never compensated", ps.name, st.name)
	}
}

func TestAwaitsPerson(t *testing.T) {
	ps := plannedSaga{steps: []plannedStep{
		{name: "a", fault: compensationFault{fault: sandbox.Fault422, count: 1, person: v1.SagaRetry}},
		{name: "b", fault: compensationFault{fault: sandbox.Fault422, count: 1}},
		{name: "c", reject: true}}}
	refused := func(state v1.OperationState, steps ...string) *v1.Saga {
		s := &v1.Saga{Status: v1.SagaStatus{State: state}}
		for _, name := range []string{"a", "b"} {
			ss := v1.SagaStepStatus{Name: name}
			if slices.Contains(steps, name) {
				ss.Compensation = &v1.CompensationStatus{Round: 1, State: v1.StateFailedFinal}
			}
			s.Status.Steps = append(s.Status.Steps, ss)
		}
		return s
	}
	tests := map[string]struct {
		s          *v1.Saga
		wantStep   string
		wantAction v1.SagaResolutionAction
		settled    bool
	}{
		"a refused, a person retries": {s: refused(v1.StateNeedsReview, "a"), wantStep: "a", wantAction: v1.SagaRetry},
		"b refused, nobody decides":   {s: refused(v1.StateNeedsReview, "b"), settled: true},
		"not in review":               {s: refused(v1.StateCompensating, "a")},
		"compensated in the end":      {s: refused(v1.StateCompensated), settled: true},
		"decided, not applied yet": {s: func() *v1.Saga {
			s := refused(v1.StateNeedsReview, "a")
			s.Spec.Resolutions = []v1.SagaResolution{{Step: "a", Action: v1.SagaRetry, By: person}}
			return s
		}()},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			step, action := awaitsPerson(ps, tc.s)
			if diff := cmp.Diff([]any{tc.wantStep, tc.wantAction}, []any{step, action}); diff != "" {
				t.Errorf("awaitsPerson (-want, +got):\n%s", diff)
			}
			if got := sagaSettled(ps, tc.s, nil); got != tc.settled {
				t.Errorf("settled %v, want %v", got, tc.settled)
			}
		})
	}
}
