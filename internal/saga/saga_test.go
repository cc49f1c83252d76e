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
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var now = time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

// The saga under test is named order, with key k: its operations are
// order.<step>, keyed k/<step>.
const sagaName, sagaKey = "order", "k"

const (
	planned       = v1.StatePlanned
	started       = v1.StateStarted
	committed     = v1.StateCommitted
	retryable     = v1.StateFailedRetryable
	failedFinal   = v1.StateFailedFinal
	unknown       = v1.StateUnknown
	reconciling   = v1.StateReconciling
	needsReview   = v1.StateNeedsReview
	compensatingS = v1.StateCompensating
	compensatedS  = v1.StateCompensated
)

// compensable is a step undone by un<name>.
func compensable(name string) v1.SagaStep {
	return v1.SagaStep{Name: name, ToolRef: v1.StepToolReference{Kind: v1.ToolKindTool, Name: "shop"}, Operation: name,
		Compensation: &v1.Compensation{Operation: "un" + name}}
}

// made says what an operation of the saga was created for.
type made struct {
	step int
	undo bool
}

// sim plays the saga controller around Decide: a pass takes decisions
// until one asks for nothing, validating and creating as asked, as
// Reconcile does; the test moves the operations between passes. Every
// decision is checked against the saga's invariants.
type sim struct {
	t       *testing.T
	spec    v1.SagaSpec
	plan    *Plan
	planErr error
	status  v1.SagaStatus
	// children are the operations by name, made holds the saga's own.
	children map[string]Child
	made     map[string]made
	// validations are the tool's answers by step, Passed if not set.
	validations map[string]v1.ValidationOutcome
	// uncreatable are the operations whose parameters cannot be computed.
	uncreatable map[string]string
	// remembered is what the scope records of steps not started hold, by
	// step (ActionRecall reads it); recalls counts the reads.
	remembered map[string]string
	recalls    int
	// written are all the resolutions people wrote, even if replaced since.
	written []v1.SagaResolution
	// retried are the operations each Retry resolution made.
	retried map[v1.SagaResolution]string
	// duplicate makes the next operation created a duplicate.
	duplicate bool
	// loseCheckpoint makes the next checkpoint write conflict.
	loseCheckpoint bool
	// final is the first terminal checkpoint: later ones must equal it.
	final *v1.SagaStatus
	now   time.Time
	// decisions counts the decisions taken.
	decisions int
	// label names the run in failures.
	label string
	// brakes lets perturb suspend, resume and cancel the saga.
	brakes bool
}

func newSim(t *testing.T, steps []v1.SagaStep) *sim {
	s := &sim{t: t, spec: v1.SagaSpec{IdempotencyKey: sagaKey, Steps: steps},
		children: map[string]Child{}, made: map[string]made{}, retried: map[v1.SagaResolution]string{},
		validations: map[string]v1.ValidationOutcome{}, uncreatable: map[string]string{}, now: now}
	s.plan, s.planErr = Compile(&s.spec)
	return s
}

// pass is one reconcile; it returns the actions taken.
func (s *sim) pass() []string {
	s.t.Helper()
	view := View{Name: sagaName, Namespace: sagaNamespace, Generation: 1, Spec: &s.spec, Status: s.status, Children: s.children,
		Plan: s.plan, PlanErr: s.planErr, Now: s.now}
	var acts []string
	read := s.status
	for range 100 {
		before := view.Status.DeepCopy()
		d := Decide(view)
		if !equality.Semantic.DeepEqual(*before, view.Status) {
			s.t.Fatalf("Decide changed the checkpoint it was given")
		}
		s.check(d)
		s.checkBrakes(d.Action, read)
		if d.Action.Kind == ActionCreate && !namesOperation(view.Status, d.Action) {
			s.t.Fatalf("%screates %s, which the checkpoint it decided from does not name", s.label, d.Action.Name)
		}
		view.Status = d.Status
		switch d.Action.Kind {
		case ActionNone:
			s.status = d.Status
			return acts
		case ActionCheckpoint:
			// The write is conditional on the saga's resourceVersion: a
			// lost one ends the pass, and the next decides again from
			// the checkpoint before.
			if s.loseCheckpoint {
				s.loseCheckpoint = false
				return append(acts, "checkpoint lost")
			}
			s.status = d.Status
		case ActionCancel:
			acts = append(acts, "cancel "+d.Action.Name)
			c := s.children[d.Action.Name]
			c.Cancel = true
			s.children[d.Action.Name] = c
			view.Children = s.children
		case ActionRecall:
			if view.Remembered != nil {
				s.t.Fatalf("%sasks to recall what it has read", s.label)
			}
			s.recalls++
			view.Remembered = maps.Clone(s.remembered)
			if view.Remembered == nil {
				view.Remembered = map[string]string{}
			}
		case ActionValidate:
			ss := &view.Status.Steps[d.Action.Step]
			acts = append(acts, "validate "+ss.Name)
			outcome := cmp.Or(s.validations[ss.Name], v1.ValidationPassed)
			ss.Validation = &v1.StepValidation{Outcome: outcome, Message: "the tool says " + string(outcome),
				Time: metav1.NewTime(s.now)}
			ss.Message = ""
		case ActionCreate:
			a := d.Action
			acts = append(acts, "create "+a.Name+" "+a.Key)
			if why, bad := s.uncreatable[a.Name]; bad {
				view.Uncreatable = map[string]string{a.Name: why}
				continue
			}
			tool, operation := Target(s.spec.Steps[a.Step], a.Undo)
			c := Child{State: planned, Key: a.Key, Tool: tool, Operation: operation, Unclaimed: true,
				Cancel: a.Cancel}
			if s.duplicate {
				c.DuplicateOf, s.duplicate = "other."+a.Name, false
			}
			s.children[a.Name] = c
			s.made[a.Name] = made{step: a.Step, undo: a.Undo}
		}
	}
	s.t.Fatalf("a pass did not end: %v", acts)
	return nil
}

// effect reports whether step i took effect: an operation of the saga
// for it is Committed (a duplicate's is another's effect it relies on).
func (s *sim) effect(i int) bool {
	for name, m := range s.made {
		if m.step == i && !m.undo && s.children[name].State == committed {
			return true
		}
	}
	return false
}

// undone reports whether step i's effect was undone: by a committed
// compensation, or by a person's MarkCompensated that the saga applied
// (and recorded: the entry may have been changed since).
func (s *sim) undone(i int, st v1.SagaStatus) bool {
	for name, m := range s.made {
		if m.step == i && m.undo && s.children[name].State == committed {
			return true
		}
	}
	cs := st.Steps[i].Compensation
	return cs != nil && cs.Resolution != nil && cs.Resolution.Action == v1.SagaMarkCompensated &&
		cs.Resolution.Step == s.spec.Steps[i].Name && slices.Contains(s.written, *cs.Resolution)
}

func (s *sim) index(step string) int {
	return slices.IndexFunc(s.spec.Steps, func(st v1.SagaStep) bool { return st.Name == step })
}

// check asserts the invariants every decision keeps.
func (s *sim) check(d Decision) {
	t := s.t
	t.Helper()
	s.decisions++
	st := d.Status
	what := fmt.Sprintf("%sdecision %d (%s, %s)", s.label, s.decisions, st.State, reasonOf(st))
	checkKstatus(t, st)
	checkConditions(t, what, st)
	if s.final != nil {
		if diff := gocmp.Diff(*s.final, st); diff != "" || d.Action.Kind != ActionNone {
			t.Fatalf("%s: terminal means terminal, but the checkpoint moved (-was, +now):\n%s\naction %+v", what, diff, d.Action)
		}
		return
	}
	if st.State.IsTerminal() {
		s.final = st.DeepCopy()
		if d.Action.Kind != ActionNone {
			t.Fatalf("%s: a terminal decision asks for %+v", what, d.Action)
		}
	}
	if len(st.Steps) != len(s.spec.Steps) {
		t.Fatalf("%s: %d step checkpoints for %d steps", what, len(st.Steps), len(s.spec.Steps))
	}
	if (st.State == compensatingS || st.State == compensatedS) && st.FailedStep == "" {
		t.Fatalf("%s: no failed step", what)
	}
	if d.Action.Kind == ActionCreate {
		s.checkCreate(what, d.Action, st)
	}
	s.checkEnd(what, st)
}

// failedIndex is the index of the failed step, or the number of steps.
func (s *sim) failedIndex(st v1.SagaStatus) int {
	if st.FailedStep == "" {
		return len(s.spec.Steps)
	}
	return s.index(st.FailedStep)
}

// settled reports whether every operation of the saga is done, or gone
// (a person deleted it; its release waited for any call in flight).
func (s *sim) settled() bool {
	for name := range s.made {
		if c, ok := s.children[name]; ok && c.State != committed && c.State != failedFinal {
			return false
		}
	}
	return true
}

// checkCreate: one operation at a time, each made once; a step after the
// ones before it committed; a compensation for a step that took effect,
// after the later ones are undone; a new round only by a person's Retry,
// applied once.
func (s *sim) checkCreate(what string, a Action, st v1.SagaStatus) {
	t := s.t
	t.Helper()
	if _, ok := s.children[a.Name]; ok {
		t.Fatalf("%s: creates %s, which exists", what, a.Name)
	}
	if !s.settled() {
		t.Fatalf("%s: creates %s while an operation of the saga is not done: %v", what, a.Name, s.children)
	}
	if a.Round > 1 {
		s.checkRetry(what, a)
	}
	if !a.Undo {
		if st.FailedStep != "" {
			t.Fatalf("%s: creates step %d's operation while compensating", what, a.Step)
		}
		for j := range a.Step {
			if !s.effect(j) {
				t.Fatalf("%s: creates step %d's operation before step %d's is Committed", what, a.Step, j)
			}
		}
		return
	}
	failed := s.failedIndex(st)
	if !s.effect(a.Step) || a.Step >= failed {
		t.Fatalf("%s: compensates step %d, which did not take effect before the failed step %q", what, a.Step, st.FailedStep)
	}
	for k := a.Step + 1; k < failed; k++ {
		if s.effect(k) && !s.undone(k, st) {
			t.Fatalf("%s: compensates step %d before the later step %d is undone", what, a.Step, k)
		}
	}
}

func (s *sim) checkRetry(what string, a Action) {
	t := s.t
	t.Helper()
	step := s.spec.Steps[a.Step].Name
	i := slices.IndexFunc(s.spec.Resolutions, func(r v1.SagaResolution) bool { return r.Step == step })
	if i < 0 || s.spec.Resolutions[i].Action != v1.SagaRetry {
		t.Fatalf("%s: creates round %d of %s without a Retry", what, a.Round, step)
	}
	r := s.spec.Resolutions[i]
	if prev, ok := s.retried[r]; ok && prev != a.Name {
		t.Fatalf("%s: the resolution %+v, applied to make %s, is applied again to make %s", what, r, prev, a.Name)
	}
	s.retried[r] = a.Name
	// The round before failed for good, or never ran: a retryUntilDone
	// step that did not validate, or whose parameters could not be
	// computed, had no operation.
	if c, ok := s.children[OperationName(sagaName, step, a.Undo, a.Round-1)]; ok && c.State != failedFinal {
		t.Fatalf("%s: creates %s, but the round before did not fail for good: %+v", what, a.Name, c)
	}
}

// checkEnd: Compensated only when every step that took effect is undone;
// Committed only when every step's own operation committed; FailedFinal
// only when nothing took effect; and nothing left running.
func (s *sim) checkEnd(what string, st v1.SagaStatus) {
	t := s.t
	t.Helper()
	if st.State.IsTerminal() && !s.settled() {
		t.Fatalf("%s: ended while an operation is not done", what)
	}
	switch st.State {
	case compensatedS:
		var total int32
		for j := range s.spec.Steps {
			if !s.effect(j) {
				continue
			}
			total++
			if !s.undone(j, st) {
				t.Fatalf("%s: Compensated, but step %d took effect and is not undone", what, j)
			}
		}
		if st.CompensationsDone != total || st.CompensationsTotal != total {
			t.Fatalf("%s: Compensated with %d of %d compensations, %d steps took effect", what,
				st.CompensationsDone, st.CompensationsTotal, total)
		}
	case committed:
		for i, ss := range st.Steps {
			if m, ok := s.made[ss.Operation]; !ok || m.step != i || m.undo || s.children[ss.Operation].State != committed {
				t.Fatalf("%s: Committed, but step %d's operation %q is not one of its own that committed", what, i, ss.Operation)
			}
		}
		if st.StepsDone != int32(len(s.spec.Steps)) || st.FailedStep != "" {
			t.Fatalf("%s: Committed with %d steps done, failed step %q", what, st.StepsDone, st.FailedStep)
		}
	case failedFinal:
		for i := range s.spec.Steps {
			if s.effect(i) {
				t.Fatalf("%s: FailedFinal means nothing took effect, but step %d did", what, i)
			}
		}
	}
}

func reasonOf(st v1.SagaStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// kstatusOf computes, with the library Flux and kubectl wait use, how a
// saga with this status reads.
func kstatusOf(t *testing.T, st v1.SagaStatus) *kstatus.Result {
	t.Helper()
	obj := v1.Saga{Status: st}
	obj.APIVersion, obj.Kind = v1.GroupVersion.String(), "Saga"
	obj.Name, obj.Namespace, obj.Generation = sagaName, "ns", 1
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&obj)
	if err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(&unstructured.Unstructured{Object: raw})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// checkKstatus: work in progress reads InProgress; a committed saga
// Current; a failure, a compensation that undid the work, or a wait for a
// person, Failed.
func checkKstatus(t *testing.T, st v1.SagaStatus) {
	t.Helper()
	want := kstatus.InProgressStatus
	switch {
	case st.State == committed:
		want = kstatus.CurrentStatus
	case st.State == failedFinal || st.State == compensatedS || st.State == needsReview ||
		reasonOf(st) == ReasonWaitingForApproval:
		want = kstatus.FailedStatus
	}
	if got := kstatusOf(t, st); got.Status != want {
		t.Fatalf("%s (%s) reads %s to kstatus, want %s: %s", st.State, reasonOf(st), got.Status, want, got.Message)
	}
}

// checkConditions: the kstatus conditions, in order (Ready and Succeeded,
// then Reconciling and Stalled while True), stamped with the generation,
// their messages stable sentences of the house style: capitalised, no
// trailing period, capped, valid UTF-8; Succeeded, whose message would be
// Ready's, has none.
func checkConditions(t *testing.T, what string, st v1.SagaStatus) {
	t.Helper()
	var types []string
	for _, c := range st.Conditions {
		types = append(types, c.Type)
		if c.ObservedGeneration != 1 || c.Reason == "" {
			t.Fatalf("%s: condition %s: %+v", what, c.Type, c)
		}
		if (c.Type == v1.ConditionReconciling || c.Type == v1.ConditionStalled) && c.Status != metav1.ConditionTrue {
			t.Fatalf("%s: condition %s is there while %s", what, c.Type, c.Status)
		}
		if c.Type == v1.ConditionSucceeded {
			if c.Message != "" {
				t.Fatalf("%s: Succeeded repeats a message: %q", what, c.Message)
			}
			continue
		}
		first, _ := utf8.DecodeRuneInString(c.Message)
		if !unicode.IsUpper(first) || strings.HasSuffix(c.Message, ".") && !strings.HasSuffix(c.Message, "...") ||
			len(c.Message) > 1024 || !utf8.ValidString(c.Message) {
			t.Fatalf("%s: condition %s: the message is not a stable capitalised sentence without trailing period: %q",
				what, c.Type, c.Message)
		}
	}
	if len(types) < 2 || len(types) > 3 || types[0] != v1.ConditionReady || types[1] != v1.ConditionSucceeded ||
		len(types) == 3 && types[2] != v1.ConditionReconciling && types[2] != v1.ConditionStalled {
		t.Fatalf("%s: conditions %v, want Ready, Succeeded, then Reconciling or Stalled", what, types)
	}
}

// outcome is the part of a checkpoint the sequences assert on.
type outcome struct {
	State          v1.OperationState
	Step           string
	Done           int32
	Undone, ToUndo int32
	Failed         string
	Reason         string
	Stalled        bool
}

func outcomeOf(st v1.SagaStatus) outcome {
	return outcome{State: st.State, Step: st.CurrentStep, Done: st.StepsDone, Undone: st.CompensationsDone,
		ToUndo: st.CompensationsTotal, Failed: st.FailedStep, Reason: reasonOf(st),
		Stalled: meta.IsStatusConditionTrue(st.Conditions, v1.ConditionStalled)}
}

// stage is one step of a sequence: the world changes (do), a pass runs,
// and takes acts, and leaves the checkpoint want.
type stage struct {
	reason string
	do     func(*sim)
	acts   []string
	want   outcome
	check  func(*testing.T, v1.SagaStatus)
}

// set moves existing operations to state. One that moved on from
// Planned claimed an attempt.
func set(state v1.OperationState, names ...string) func(*sim) {
	return func(s *sim) {
		for _, name := range names {
			c, ok := s.children[name]
			if !ok {
				s.t.Fatalf("the test moves %s, which does not exist", name)
			}
			c.State = state
			c.Unclaimed = c.Unclaimed && state == planned
			s.children[name] = c
		}
	}
}

// cancelledOp fails existing operations as their cancel does before any
// attempt: FailedFinal, reason Cancelled.
func cancelledOp(names ...string) func(*sim) {
	return func(s *sim) {
		set(failedFinal, names...)(s)
		for _, name := range names {
			c := s.children[name]
			c.Reason, c.Message = v1.ReasonCancelled, "Cancelled before any attempt: no request was sent"
			c.Unclaimed = true
			s.children[name] = c
		}
	}
}

// checkBrakes: a suspended saga validates nothing and makes no operation.
// A cancelled one validates no step and makes no step's operation that the
// checkpoint the pass read did not name, unless an irreversible step
// before it committed. An operation it cancels had not claimed.
func (s *sim) checkBrakes(a Action, read v1.SagaStatus) {
	t := s.t
	t.Helper()
	what := fmt.Sprintf("%sdecision %d", s.label, s.decisions)
	switch a.Kind {
	case ActionValidate:
		if s.spec.Suspend || s.spec.Cancel && !s.pivoted(a.Step) {
			t.Fatalf("%s: validates step %d while suspended (%t) or cancelled (%t)", what, a.Step, s.spec.Suspend, s.spec.Cancel)
		}
	case ActionCreate:
		named := namesOperation(read, a)
		// Only a cancelled step's operation that a written checkpoint
		// named is made while suspended: it makes no call.
		remade := s.spec.Cancel && !a.Undo && named
		if s.spec.Suspend && !remade {
			t.Fatalf("%s: creates %s while suspended", what, a.Name)
		}
		if s.spec.Cancel && !a.Undo && !named && !s.pivoted(a.Step) {
			t.Fatalf("%s: creates %s after the cancel", what, a.Name)
		}
	case ActionCancel:
		if c := s.children[a.Name]; !s.spec.Cancel || !c.Unclaimed || c.Cancel || s.made[a.Name].undo {
			t.Fatalf("%s: cancels %s: %+v", what, a.Name, c)
		}
	}
}

// pivoted reports whether an irreversible step before step i took effect.
func (s *sim) pivoted(i int) bool {
	for j := range i {
		if s.spec.Steps[j].Irreversible && s.effect(j) {
			return true
		}
	}
	return false
}

// decided fails existing operations on a person's decision (their Fail,
// or a failure after their Retry).
func decided(names ...string) func(*sim) {
	return func(s *sim) {
		set(failedFinal, names...)(s)
		for _, name := range names {
			c := s.children[name]
			c.Decided, c.Reason = true, v1.ReasonResolvedFailed
			s.children[name] = c
		}
	}
}

// resolve writes a person's resolution for step, replacing the step's.
func resolve(step string, action v1.SagaResolutionAction, reason string) func(*sim) {
	return func(s *sim) {
		r := v1.SagaResolution{Step: step, Action: action, By: "alice", User: "alice@example.com", Reason: reason}
		s.spec.Resolutions = slices.DeleteFunc(s.spec.Resolutions, func(r v1.SagaResolution) bool { return r.Step == step })
		s.spec.Resolutions = append(s.spec.Resolutions, r)
		s.written = append(s.written, r)
	}
}

// approve writes bob's approval of step, an hour later.
func approve(step string) func(*sim) {
	return func(s *sim) {
		s.now = s.now.Add(time.Hour)
		s.spec.Approvals = append(s.spec.Approvals, v1.SagaApproval{Step: step, By: "bob", User: "bob@example.com",
			Reason: "looked fine"})
	}
}

func run(t *testing.T, s *sim, stages []stage) {
	t.Helper()
	for i, sg := range stages {
		if sg.do != nil {
			sg.do(s)
		}
		acts := s.pass()
		if diff := gocmp.Diff(sg.acts, acts, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("stage %d: %s: actions -want, +got:\n%s", i+1, sg.reason, diff)
		}
		if diff := gocmp.Diff(sg.want, outcomeOf(s.status)); diff != "" {
			t.Fatalf("stage %d: %s: checkpoint -want, +got:\n%s", i+1, sg.reason, diff)
		}
		if sg.check != nil {
			sg.check(t, s.status)
		}
	}
}

func threeSteps() []v1.SagaStep {
	return []v1.SagaStep{compensable("reserve"), compensable("charge"), compensable("ship")}
}

// Stages most sequences begin with.
var (
	start = stage{reason: "Every step is validated before the first one starts.",
		acts: []string{"validate reserve", "validate charge", "validate ship", "create order.reserve k/reserve"},
		want: outcome{State: started, Step: "reserve", Reason: ReasonRunning}}
	toCharge = stage{reason: "Step 2 starts once step 1 is Committed.", do: set(committed, "order.reserve"),
		acts: []string{"create order.charge k/charge"},
		want: outcome{State: started, Step: "charge", Done: 1, Reason: ReasonRunning}}
	toShip = stage{reason: "Step 3 starts once step 2 is Committed.", do: set(committed, "order.charge"),
		acts: []string{"create order.ship k/ship"},
		want: outcome{State: started, Step: "ship", Done: 2, Reason: ReasonRunning}}
	shipFails = stage{reason: "The last step fails for good: the compensations start with the step before it.",
		do: set(failedFinal, "order.ship"), acts: []string{"create order.charge.undo k/charge/compensate"},
		want: outcome{State: compensatingS, Step: "charge", Done: 2, ToUndo: 2, Failed: "ship", Reason: ReasonCompensating}}
	compensated2 = outcome{State: compensatedS, Done: 2, Undone: 2, ToUndo: 2, Failed: "ship", Reason: ReasonCompensated, Stalled: true}
)

func same(reason string, do func(*sim), want outcome) stage {
	return stage{reason: reason, do: do, want: want}
}

func review(o outcome, reason string) outcome {
	o.State, o.Reason, o.Stalled = needsReview, reason, true
	return o
}

// sequence is a saga and what happens to it, stage by stage.
type sequence struct {
	reason string
	steps  []v1.SagaStep // reserve, charge and ship if nil
	setup  func(*sim)
	stages []stage
}

func runSequences(t *testing.T, cases map[string]sequence) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSim(t, stepsOr(tc.steps))
			if tc.setup != nil {
				tc.setup(s)
			}
			run(t, s, tc.stages)
		})
	}
}

// comp is the checkpoint while step's compensation runs.
func comp(step string, done, undone, total int32, failed string) outcome {
	return outcome{State: compensatingS, Step: step, Done: done, Undone: undone, ToUndo: total, Failed: failed,
		Reason: ReasonCompensating}
}

// TestDecideForward: steps run in order, each once, after validation and
// approval; a person decides what the saga cannot.
func TestDecideForward(t *testing.T) {
	runSequences(t, map[string]sequence{
		"HappyPath": {
			reason: "Three steps run in order, each when the one before is Committed.",
			stages: []stage{start,
				same("A step in progress is waited for.", set(started, "order.reserve"), start.want),
				toCharge,
				same("A retryable failure is the operation's business.", set(retryable, "order.charge"), toCharge.want),
				toShip,
				{reason: "Every step Committed: the saga is.", do: set(committed, "order.ship"),
					want: outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted},
					check: func(t *testing.T, st v1.SagaStatus) {
						for i, step := range []string{"reserve", "charge", "ship"} {
							ss := st.Steps[i]
							if ss.Operation != "order."+step || ss.IdempotencyKey != "k/"+step || ss.State != committed ||
								ss.Validation.Outcome != v1.ValidationPassed {
								t.Errorf("step %s: %+v", step, ss)
							}
						}
						if st.IdempotencyKey != sagaKey || st.StartedTime == nil || st.CompletionTime == nil ||
							st.ObservedGeneration != 1 {
							t.Errorf("checkpoint: %+v", st)
						}
					}},
				same("Terminal means terminal.", set(failedFinal, "order.ship"),
					outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted}),
			},
		},
		"ValidationNotOffered": {
			reason: "A tool without a dry run is checked against its schema only, and the saga goes on.",
			setup:  func(s *sim) { s.validations["charge"] = v1.ValidationNotOffered },
			stages: []stage{{reason: start.reason, acts: start.acts, want: start.want,
				check: func(t *testing.T, st v1.SagaStatus) {
					if got := st.Steps[1].Validation.Outcome; got != v1.ValidationNotOffered {
						t.Errorf("charge's validation: %s", got)
					}
				}}, toCharge},
		},
		"ValidationFailed": {
			reason: "A step refused by validation stops the saga before anything runs.",
			setup:  func(s *sim) { s.validations["charge"] = v1.ValidationFailed },
			stages: []stage{
				{reason: "Nothing is created.", acts: []string{"validate reserve", "validate charge", "validate ship"},
					want: outcome{State: failedFinal, Reason: ReasonValidationFailed, Stalled: true},
					check: func(t *testing.T, st v1.SagaStatus) {
						if st.StartedTime != nil || st.CompletionTime == nil || st.Steps[0].Operation != "" {
							t.Errorf("nothing ran, the saga ended: %+v", st)
						}
					}},
				same("It stays so.", nil, outcome{State: failedFinal, Reason: ReasonValidationFailed, Stalled: true}),
			},
		},
		"DeferredValidationPasses": {
			reason: "A step whose parameters use an earlier step is validated when it starts.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[2].ParametersFrom = from("charge", "steps.charge.externalObjectID")
				return steps
			}(),
			stages: []stage{
				{reason: "Ship is deferred.", acts: []string{"validate reserve", "validate charge", "create order.reserve k/reserve"},
					want: start.want, check: func(t *testing.T, st v1.SagaStatus) {
						if got := st.Steps[2].Validation.Outcome; got != v1.ValidationDeferred {
							t.Errorf("ship's validation: %s", got)
						}
					}},
				toCharge,
				{reason: "Ship is validated, then created.", do: set(committed, "order.charge"),
					acts: []string{"validate ship", "create order.ship k/ship"}, want: toShip.want},
			},
		},
		"StepNeedsReview": {
			reason: "A step whose outcome nobody can tell stops the saga until its operation is resolved.",
			stages: []stage{start, toCharge,
				same("The saga waits.", set(needsReview, "order.charge"), review(toCharge.want, v1.ReasonNeedsReview)),
				same("It stays so.", nil, review(toCharge.want, v1.ReasonNeedsReview)),
				{reason: "Resolved Committed: ship starts.", do: set(committed, "order.charge"),
					acts: []string{"create order.ship k/ship"}, want: toShip.want},
			},
		},
		"Approval": {
			reason: "A step that requires approval waits, Stalled, until it has one; the approval is recorded.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[1].RequiresApproval = true
				return steps
			}(),
			stages: []stage{start,
				same("Charge waits for approval.", set(committed, "order.reserve"),
					outcome{State: started, Step: "charge", Done: 1, Reason: ReasonWaitingForApproval, Stalled: true}),
				same("Still.", nil, outcome{State: started, Step: "charge", Done: 1, Reason: ReasonWaitingForApproval, Stalled: true}),
				{reason: "Approved: charge starts.", do: approve("charge"), acts: []string{"create order.charge k/charge"},
					want: toCharge.want, check: func(t *testing.T, st v1.SagaStatus) {
						want := &v1.AppliedApproval{By: "bob", User: "bob@example.com", Reason: "looked fine",
							Time: metav1.NewTime(now.Add(time.Hour))}
						if diff := gocmp.Diff(want, st.Steps[1].Approval); diff != "" {
							t.Errorf("the approval: -want, +got:\n%s", diff)
						}
					}},
			},
		},
		"ApprovalFirstStep": {
			reason: "The first step waits for approval after validation, before anything runs.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[0].RequiresApproval = true
				return steps
			}(),
			stages: []stage{
				{reason: "Validated, waits.", acts: []string{"validate reserve", "validate charge", "validate ship"},
					want: outcome{State: planned, Step: "reserve", Reason: ReasonWaitingForApproval, Stalled: true}},
				{reason: "Approved.", do: approve("reserve"), acts: []string{"create order.reserve k/reserve"}, want: start.want},
			},
		},
		"RetryUntilDone": {
			reason: "A retryUntilDone step failing for good waits for a person, who can run it again; each Retry once.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[2].Compensation, steps[2].Irreversible, steps[2].RetryUntilDone = nil, true, true
				return steps
			}(),
			stages: []stage{start, toCharge, toShip,
				same("Ship failed for good: no compensation.", set(failedFinal, "order.ship"), review(toShip.want, ReasonStepFailed)),
				same("It stays so.", nil, review(toShip.want, ReasonStepFailed)),
				{reason: "Retry: round 2, a new name and key.", do: resolve("ship", v1.SagaRetry, "r1"),
					acts: []string{"create order.ship.2 k/ship/2"}, want: toShip.want},
				same("Round 2 fails: the same resolution is not applied again.", set(failedFinal, "order.ship.2"),
					review(toShip.want, ReasonStepFailed)),
				{reason: "A new Retry: round 3.", do: resolve("ship", v1.SagaRetry, "r2"),
					acts: []string{"create order.ship.3 k/ship/3"}, want: toShip.want},
				{reason: "Committed.", do: set(committed, "order.ship.3"),
					want: outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted},
					check: func(t *testing.T, st v1.SagaStatus) {
						if ss := st.Steps[2]; ss.Round != 3 || ss.Operation != "order.ship.3" || ss.IdempotencyKey != "k/ship/3" {
							t.Errorf("ship: %+v", ss)
						}
					}},
			},
		},
		"RoundsAreNotSteps": {
			reason: "Step a's second round is not step a-2, however the names are chosen.",
			steps: func() []v1.SagaStep {
				steps := []v1.SagaStep{compensable("a-2"), compensable("a")}
				steps[1].RetryUntilDone = true
				return steps
			}(),
			stages: []stage{
				{reason: "Start.", acts: []string{"validate a-2", "validate a", "create order.a-2 k/a-2"},
					want: outcome{State: started, Step: "a-2", Reason: ReasonRunning}},
				{reason: "a-2 commits.", do: set(committed, "order.a-2"), acts: []string{"create order.a k/a"},
					want: outcome{State: started, Step: "a", Done: 1, Reason: ReasonRunning}},
				same("a fails for good.", set(failedFinal, "order.a"),
					review(outcome{State: started, Step: "a", Done: 1}, ReasonStepFailed)),
				{reason: "Retry: a's round 2 is an operation of its own.", do: resolve("a", v1.SagaRetry, "r1"),
					acts: []string{"create order.a.2 k/a/2"}, want: outcome{State: started, Step: "a", Done: 1, Reason: ReasonRunning}},
			},
		},
		"ForeignStep": {
			reason: "An operation with a step's name that the saga does not control is never adopted.",
			setup:  func(s *sim) { s.children["order.reserve"] = Child{State: committed, Foreign: true} },
			stages: []stage{
				{reason: "Validated, then stopped.", acts: []string{"validate reserve", "validate charge", "validate ship"},
					want: review(outcome{State: planned, Step: "reserve"}, ReasonForeignOperation),
					check: func(t *testing.T, st v1.SagaStatus) {
						if st.Steps[0].Operation != "" || st.Steps[0].State != "" {
							t.Errorf("the foreign operation was adopted: %+v", st.Steps[0])
						}
					}},
				same("It stays so.", nil, review(outcome{State: planned, Step: "reserve"}, ReasonForeignOperation)),
			},
		},
		"InvalidSpec": {
			reason: "A spec whose expressions do not compile ends before anything runs.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[1].ParametersFrom = from("id", "steps.ship.result")
				return steps
			}(),
			stages: []stage{
				same("FailedFinal.", nil, outcome{State: failedFinal, Reason: v1.ReasonInvalidSpec, Stalled: true}),
			},
		},
	})
}

// TestDecideCompensation: a step failing for good undoes the committed
// steps before it, last first, one at a time, each by its own operation;
// the saga is Compensated only when every one is undone.
func TestDecideCompensation(t *testing.T) {
	runSequences(t, map[string]sequence{
		"DecidedFailure": {
			reason: "A step that ended on a person's decision may have taken effect: the saga waits for a person " +
				"before it compensates anything (I8, I14), then compensates last first once they mark it compensated.",
			stages: []stage{start, toCharge, toShip,
				same("Ship failed by a person: review, no compensation yet.", decided("order.ship"),
					review(outcome{Step: "ship", Done: 2, ToUndo: 2, Failed: "ship"}, ReasonStepFailed)),
				{reason: "Marked compensated: charge is compensated, then reserve.",
					do:   resolve("ship", v1.SagaMarkCompensated, "refunded by hand"),
					acts: []string{"create order.charge.undo k/charge/compensate"}, want: shipFails.want},
				{reason: "Then reserve.", do: set(committed, "order.charge.undo"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship")},
				same("Compensated.", set(committed, "order.reserve.undo"), compensated2),
			},
		},
		"DecidedFailureOperationGone": {
			reason: "A person who fails a step and then deletes its operation leaves a decision, not a proof: the " +
				"checkpoint keeps the failure's reason, and the saga still waits for MarkCompensated (I8).",
			stages: []stage{start, toCharge, toShip,
				same("Ship failed by a person: review.", decided("order.ship"),
					review(outcome{Step: "ship", Done: 2, ToUndo: 2, Failed: "ship"}, ReasonStepFailed)),
				same("Its operation is deleted: still review, nothing compensated.",
					func(s *sim) { delete(s.children, "order.ship") },
					review(outcome{Step: "ship", Done: 2, ToUndo: 2, Failed: "ship"}, ReasonStepFailed)),
				{reason: "Marked compensated: charge is compensated.",
					do:   resolve("ship", v1.SagaMarkCompensated, "refunded by hand"),
					acts: []string{"create order.charge.undo k/charge/compensate"}, want: shipFails.want},
			},
		},
		"FailFirst": {
			reason: "The first step fails for good: nothing took effect, nothing to compensate.",
			stages: []stage{start,
				same("FailedFinal.", set(failedFinal, "order.reserve"),
					outcome{State: failedFinal, Failed: "reserve", Reason: ReasonStepFailed, Stalled: true}),
				same("Terminal means terminal.", all(resolve("reserve", v1.SagaRetry, "late"), approve("charge")),
					outcome{State: failedFinal, Failed: "reserve", Reason: ReasonStepFailed, Stalled: true}),
			},
		},
		"FailMiddle": {
			reason: "The middle step fails for good: only the first, committed, is compensated.",
			stages: []stage{start, toCharge,
				{reason: "Reserve is compensated.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
				same("A compensation in progress is waited for.", set(started, "order.reserve.undo"), comp("reserve", 1, 0, 1, "charge")),
				same("Retrying.", set(retryable, "order.reserve.undo"), comp("reserve", 1, 0, 1, "charge")),
				same("Compensated.", set(committed, "order.reserve.undo"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true}),
			},
		},
		"FailLast": {
			reason: "The last step fails for good: the others are compensated in reverse order, one at a time.",
			stages: []stage{start, toCharge, toShip, shipFails,
				same("Reserve waits while charge's compensation is unknown.", set(unknown, "order.charge.undo"), shipFails.want),
				same("Or reconciled.", set(reconciling, "order.charge.undo"), shipFails.want),
				same("Or retried.", set(retryable, "order.charge.undo"), shipFails.want),
				same("Or planned.", set(planned, "order.charge.undo"), shipFails.want),
				{reason: "Then reserve.", do: set(committed, "order.charge.undo"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship")},
				same("Waits.", set(started, "order.reserve.undo"), comp("reserve", 2, 1, 2, "ship")),
				same("Compensated.", set(committed, "order.reserve.undo"), compensated2),
				same("Terminal means terminal.", all(set(failedFinal, "order.reserve.undo"),
					resolve("reserve", v1.SagaRetry, "late")), compensated2),
			},
		},
		"DeferredValidationFails": {
			reason: "A deferred step refused by validation fails, and the steps before it are compensated.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[2].ParametersFrom = from("charge", "steps.charge.externalObjectID")
				return steps
			}(),
			setup: func(s *sim) { s.validations["ship"] = v1.ValidationFailed },
			stages: []stage{
				{reason: "Ship is deferred.", acts: []string{"validate reserve", "validate charge", "create order.reserve k/reserve"},
					want: start.want},
				toCharge,
				{reason: "Ship does not validate: charge is compensated first.", do: set(committed, "order.charge"),
					acts: []string{"validate ship", "create order.charge.undo k/charge/compensate"},
					want: comp("charge", 2, 0, 2, "ship"),
					check: func(t *testing.T, st v1.SagaStatus) {
						if ss := st.Steps[2]; ss.State != failedFinal || ss.Operation != "" {
							t.Errorf("ship failed without an operation: %+v", ss)
						}
					}},
				{reason: "Then reserve.", do: set(committed, "order.charge.undo"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship")},
				{reason: "All undone.", do: set(committed, "order.reserve.undo"), want: compensated2},
			},
		},
		"Uncreatable": {
			reason: "A step whose parameters cannot be computed fails before any effect, and the steps before are compensated.",
			setup:  func(s *sim) { s.uncreatable["order.charge"] = "no such key: id" },
			stages: []stage{start,
				{reason: "Charge cannot be made.", do: set(committed, "order.reserve"),
					acts: []string{"create order.charge k/charge", "create order.reserve.undo k/reserve/compensate"},
					want: comp("reserve", 1, 0, 1, "charge"), check: func(t *testing.T, st v1.SagaStatus) {
						if ss := st.Steps[1]; ss.State != failedFinal || !strings.Contains(ss.Message, "no such key: id") {
							t.Errorf("charge: %+v", ss)
						}
					}},
				same("Compensated.", set(committed, "order.reserve.undo"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true}),
			},
		},
		"CompensationFailsRetry": {
			reason: "A compensation failing for good waits for a person; each Retry runs a new round, once.",
			stages: []stage{start, toCharge, toShip, shipFails,
				same("Charge's compensation failed for good.", set(failedFinal, "order.charge.undo"),
					review(shipFails.want, ReasonCompensationFailed)),
				same("It stays so.", nil, review(shipFails.want, ReasonCompensationFailed)),
				{reason: "Retry: round 2, a new name and key.", do: resolve("charge", v1.SagaRetry, "r1"),
					acts: []string{"create order.charge.undo.2 k/charge/compensate/2"}, want: shipFails.want},
				same("Round 2 fails too: the same resolution is not applied again.", set(failedFinal, "order.charge.undo.2"),
					review(shipFails.want, ReasonCompensationFailed)),
				same("Still not.", nil, review(shipFails.want, ReasonCompensationFailed)),
				{reason: "A changed resolution is a new one: round 3.", do: resolve("charge", v1.SagaRetry, "r2"),
					acts: []string{"create order.charge.undo.3 k/charge/compensate/3"}, want: shipFails.want},
				{reason: "Round 3 commits: reserve is next.", do: set(committed, "order.charge.undo.3"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship"),
					check: func(t *testing.T, st v1.SagaStatus) {
						cs := st.Steps[1].Compensation
						if cs.Round != 3 || cs.Operation != "order.charge.undo.3" || cs.IdempotencyKey != "k/charge/compensate/3" ||
							cs.State != compensatedS || cs.Resolution.Reason != "r2" {
							t.Errorf("charge's compensation: %+v", cs)
						}
					}},
				same("Compensated.", set(committed, "order.reserve.undo"), compensated2),
			},
		},
		"CompensationFailsMarkCompensated": {
			reason: "A person who undid the effect by hand says so, and the saga goes on.",
			stages: []stage{start, toCharge, toShip, shipFails,
				same("Charge's compensation failed for good.", set(failedFinal, "order.charge.undo"),
					review(shipFails.want, ReasonCompensationFailed)),
				{reason: "MarkCompensated: reserve is next.", do: resolve("charge", v1.SagaMarkCompensated, "refunded by hand"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship"),
					check: func(t *testing.T, st v1.SagaStatus) {
						cs := st.Steps[1].Compensation
						if cs.State != compensatedS || cs.Resolution == nil || cs.Resolution.By != "alice" ||
							cs.Resolution.Action != v1.SagaMarkCompensated || st.Steps[1].State != compensatedS {
							t.Errorf("charge's compensation: %+v", cs)
						}
					}},
				same("Compensated.", set(committed, "order.reserve.undo"), compensated2),
			},
		},
		"CompensationNeedsReview": {
			reason: "A compensation whose outcome nobody can tell waits for its own resolution, then the saga goes on.",
			stages: []stage{start, toCharge, toShip, shipFails,
				same("The saga waits.", set(needsReview, "order.charge.undo"), review(shipFails.want, ReasonCompensationFailed)),
				same("A saga resolution does not resolve an operation's review.", resolve("charge", v1.SagaMarkCompensated, "no"),
					review(shipFails.want, ReasonCompensationFailed)),
				{reason: "The operation was resolved Committed.", do: set(committed, "order.charge.undo"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship")},
			},
		},
		"StepNeedsReviewThenFailed": {
			reason: "A step resolved as failed is compensated like any failure.",
			stages: []stage{start, toCharge,
				same("The saga waits.", set(needsReview, "order.charge"), review(toCharge.want, v1.ReasonNeedsReview)),
				{reason: "Resolved FailedFinal.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
			},
		},
		"RetryUntilDoneThenCompensated": {
			reason: "A Retry applied to a step is not applied again to its compensation: a person decides that one.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()[:2]
				steps[0].RetryUntilDone = true
				return steps
			}(),
			stages: []stage{
				{reason: "Start.", acts: []string{"validate reserve", "validate charge", "create order.reserve k/reserve"},
					want: start.want},
				same("Reserve failed for good.", set(failedFinal, "order.reserve"), review(start.want, ReasonStepFailed)),
				{reason: "Retry.", do: resolve("reserve", v1.SagaRetry, "r1"), acts: []string{"create order.reserve.2 k/reserve/2"},
					want: start.want},
				{reason: "Round 2 commits.", do: set(committed, "order.reserve.2"), acts: []string{"create order.charge k/charge"},
					want: toCharge.want},
				{reason: "Charge fails: reserve's round 2 is compensated.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
				same("The compensation fails for good: a person decides.", set(failedFinal, "order.reserve.undo"),
					review(comp("reserve", 1, 0, 1, "charge"), ReasonCompensationFailed)),
				same("MarkCompensated.", resolve("reserve", v1.SagaMarkCompensated, "by hand"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true}),
			},
		},
		"DuplicateNotCompensated": {
			reason: "A step whose effect another operation made is not undone by this saga: a person decides.",
			setup:  func(s *sim) { s.duplicate = true },
			stages: []stage{start, toCharge, toShip, shipFails,
				same("Reserve's effect is another's.", set(committed, "order.charge.undo"),
					review(outcome{State: compensatingS, Step: "reserve", Done: 2, Undone: 1, ToUndo: 2, Failed: "ship"},
						ReasonCannotCompensate)),
				same("MarkCompensated, without an operation.", resolve("reserve", v1.SagaMarkCompensated, "theirs"), compensated2),
			},
		},
		"UncreatableCompensation": {
			reason: "A compensation whose parameters cannot be computed waits for a person, whose MarkCompensated ends it.",
			setup:  func(s *sim) { s.uncreatable["order.reserve.undo"] = "no such key: id" },
			stages: []stage{start, toCharge,
				{reason: "Reserve's compensation cannot be made.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"},
					want: review(comp("reserve", 1, 0, 1, "charge"), ReasonCompensationFailed)},
				{reason: "Each pass tries again, in vain.", acts: []string{"create order.reserve.undo k/reserve/compensate"},
					want: review(comp("reserve", 1, 0, 1, "charge"), ReasonCompensationFailed)},
				{reason: "MarkCompensated, applied before any other try.", do: resolve("reserve", v1.SagaMarkCompensated, "by hand"),
					want: outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true}},
			},
		},
		"LongMessage": {
			reason: "A tool's long answer is capped in the saga's conditions, never cutting a character in two.",
			stages: []stage{start,
				same("The step fails with a long answer.", func(s *sim) {
					c := s.children["order.reserve"]
					c.State, c.Message = failedFinal, "x"+strings.Repeat("é", 600)
					s.children["order.reserve"] = c
				}, outcome{State: failedFinal, Failed: "reserve", Reason: ReasonStepFailed, Stalled: true}),
			},
		},
		"EarlierSagaEffect": {
			reason: "A later step this saga never started holds an effect under its key, left by an earlier saga of " +
				"the same key: a person decides on it first (I8), last first, then the saga compensates its own.",
			setup: func(s *sim) { s.remembered = map[string]string{"ship": "committed, effect ship_1"} },
			stages: []stage{start, toCharge,
				same("Charge fails: ship's effect stands, the saga stops before undoing reserve.", set(failedFinal, "order.charge"),
					review(outcome{State: compensatingS, Step: "ship", Done: 1, ToUndo: 1, Failed: "charge"},
						ReasonCannotCompensate)),
				{reason: "MarkCompensated: reserve is compensated.", do: resolve("ship", v1.SagaMarkCompensated, "undone by hand"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
				same("Compensated.", set(committed, "order.reserve.undo"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true}),
			},
		},
		"EarlierSagaEffectOnAFailedStep": {
			reason: "A step that fails before its operation is made (its parameters cannot be computed) may hold an " +
				"earlier saga's effect under its key: a person decides on it before the steps before it are undone.",
			setup: func(s *sim) {
				s.uncreatable["order.charge"] = "no such key: id"
				s.remembered = map[string]string{"charge": "committed, effect ch_1"}
			},
			stages: []stage{start,
				{reason: "Charge cannot be made: its key's effect stands, the saga stops before undoing reserve.",
					do: set(committed, "order.reserve"), acts: []string{"create order.charge k/charge"},
					want: review(outcome{State: compensatingS, Step: "charge", Done: 1, ToUndo: 1, Failed: "charge"},
						ReasonCannotCompensate)},
			},
		},
		"EarlierSagaOperation": {
			reason: "An operation of an earlier saga still holds a later step's name: the saga waits for it to go.",
			stages: []stage{start, toCharge,
				same("Charge fails while ship's name is another saga's.", all(set(failedFinal, "order.charge"),
					func(s *sim) { s.children["order.ship"] = Child{State: committed, Foreign: true} }),
					review(outcome{State: compensatingS, Step: "ship", Done: 1, ToUndo: 1, Failed: "charge"},
						ReasonForeignOperation)),
				{reason: "It went, and its record holds nothing: reserve is compensated.",
					do: func(s *sim) { delete(s.children, "order.ship") }, acts: []string{"create order.reserve.undo k/reserve/compensate"},
					want: comp("reserve", 1, 0, 1, "charge")},
			},
		},
		"ForeignCompensation": {
			reason: "An operation with a compensation's name that the saga does not control is never adopted.",
			setup:  func(s *sim) { s.children["order.reserve.undo"] = Child{State: committed, Foreign: true} },
			stages: []stage{start, toCharge,
				same("Stopped.", set(failedFinal, "order.charge"),
					review(comp("reserve", 1, 0, 1, "charge"), ReasonForeignOperation)),
			},
		},
	})
}

func stepsOr(steps []v1.SagaStep) []v1.SagaStep {
	if steps == nil {
		return threeSteps()
	}
	return steps
}

func all(fs ...func(*sim)) func(*sim) {
	return func(s *sim) {
		for _, f := range fs {
			f(s)
		}
	}
}

// TestInvalidSpecAfterEffects: were the spec to stop compiling after
// steps ran, the saga would not forget them.
func TestInvalidSpecAfterEffects(t *testing.T) {
	s := newSim(t, threeSteps())
	s.pass()
	s.planErr = errors.New("spec.steps[1]: broken")
	s.pass()
	if got := outcomeOf(s.status); got.State != needsReview || got.Reason != v1.ReasonInvalidSpec {
		t.Errorf("want NeedsReview (InvalidSpec), got %+v", got)
	}
}

// TestKstatus: how each kind of checkpoint reads to kstatus, from
// decisions (every decision of every test is checked the same way).
func TestKstatus(t *testing.T) {
	cases := map[string]struct {
		reason string
		steps  []v1.SagaStep
		stages []stage
		want   kstatus.Status
	}{
		"Running":      {reason: "A step runs.", stages: []stage{start}, want: kstatus.InProgressStatus},
		"Compensating": {reason: "A compensation runs.", stages: []stage{start, toCharge, toShip, shipFails}, want: kstatus.InProgressStatus},
		"Committed": {reason: "Done.", want: kstatus.CurrentStatus, stages: []stage{start, toCharge, toShip,
			same("", set(committed, "order.ship"), outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted})}},
		"Compensated": {reason: "Undone: what it was applied for did not happen.", want: kstatus.FailedStatus, stages: []stage{start, toCharge,
			{do: set(failedFinal, "order.charge"), acts: []string{"create order.reserve.undo k/reserve/compensate"},
				want: outcome{State: compensatingS, Step: "reserve", Done: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensating}},
			same("", set(committed, "order.reserve.undo"),
				outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true})}},
		"FailedFinal": {reason: "Failed before any effect.", want: kstatus.FailedStatus, stages: []stage{start,
			same("", set(failedFinal, "order.reserve"), outcome{State: failedFinal, Failed: "reserve", Reason: ReasonStepFailed, Stalled: true})}},
		"NeedsReview": {reason: "A person must decide.", want: kstatus.FailedStatus, stages: []stage{start,
			same("", set(needsReview, "order.reserve"), review(start.want, v1.ReasonNeedsReview))}},
		"WaitingForApproval": {reason: "A person must approve.", want: kstatus.FailedStatus,
			steps: func() []v1.SagaStep { s := threeSteps(); s[0].RequiresApproval = true; return s }(),
			stages: []stage{{acts: []string{"validate reserve", "validate charge", "validate ship"},
				want: outcome{State: planned, Step: "reserve", Reason: ReasonWaitingForApproval, Stalled: true}}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSim(t, stepsOr(tc.steps))
			run(t, s, tc.stages)
			if got := kstatusOf(t, s.status); got.Status != tc.want {
				t.Errorf("%s: reads %s, want %s: %s", tc.reason, got.Status, tc.want, got.Message)
			}
		})
	}
}

// randomSim is a saga of one to five steps that the API server would
// accept, with random approvals, deferred validations, validation
// outcomes, parameters that cannot be computed and foreign operations.
func randomSim(t *testing.T, r *rand.Rand) *sim {
	n := 1 + r.IntN(5)
	names := []string{"a", "a-2", "b", "a-3", "c"}
	steps := make([]v1.SagaStep, n)
	irreversible := false
	for i := range steps {
		steps[i] = compensable(names[i])
		if r.IntN(6) == 0 {
			steps[i].Compensation, steps[i].Irreversible = nil, true
		}
		steps[i].RetryUntilDone = irreversible || r.IntN(5) == 0
		irreversible = irreversible || steps[i].Irreversible
		steps[i].RequiresApproval = r.IntN(5) == 0
		if i > 0 && r.IntN(3) == 0 {
			steps[i].ParametersFrom = from("prev", fmt.Sprintf("steps[%q].externalObjectID", names[i-1]))
		}
	}
	s := newSim(t, steps)
	if s.planErr != nil {
		t.Fatal(s.planErr)
	}
	for _, step := range steps {
		switch r.IntN(20) {
		case 0:
			s.validations[step.Name] = v1.ValidationFailed
		case 1, 2:
			s.validations[step.Name] = v1.ValidationNotOffered
		}
		if r.IntN(20) == 0 {
			s.uncreatable[OperationName(sagaName, step.Name, false, 1)] = "cannot compute"
		}
		if r.IntN(20) == 0 {
			s.uncreatable[OperationName(sagaName, step.Name, true, 1)] = "cannot compute"
		}
		if r.IntN(40) == 0 {
			s.children[OperationName(sagaName, step.Name, r.IntN(2) == 0, 1)] = Child{State: committed, Foreign: true}
		}
	}
	return s
}

func describe(steps []v1.SagaStep) string {
	out := make([]string, len(steps))
	for i, st := range steps {
		out[i] = st.Name
		for _, f := range []struct {
			flag string
			set  bool
		}{{"irreversible", st.Irreversible}, {"retryUntilDone", st.RetryUntilDone},
			{"approval", st.RequiresApproval}, {"deferred", len(st.ParametersFrom) > 0}} {
			if f.set {
				out[i] += "+" + f.flag
			}
		}
	}
	return strings.Join(out, ",")
}

// perturb changes the world as operations and people may.
func (s *sim) perturb(r *rand.Rand, tick int) {
	states := []v1.OperationState{started, retryable, unknown, reconciling, committed, committed, failedFinal, needsReview}
	var moving []string
	for name := range s.made {
		if c := s.children[name]; !c.State.IsTerminal() {
			moving = append(moving, name)
		}
	}
	slices.Sort(moving)
	if len(moving) > 0 && r.IntN(4) > 0 {
		name := moving[r.IntN(len(moving))]
		c := s.children[name]
		switch {
		case c.Cancel && c.Unclaimed:
			cancelledOp(name)(s) // its own brake, before any claim
		case c.State == needsReview:
			set([]v1.OperationState{committed, failedFinal}[r.IntN(2)], name)(s) // the operation's own resolution
		default:
			set(states[r.IntN(len(states))], name)(s)
		}
	}
	if s.brakes {
		// A person suspends and resumes the saga, and may cancel it.
		if r.IntN(8) == 0 {
			s.spec.Suspend = !s.spec.Suspend
		}
		if r.IntN(40) == 0 {
			s.spec.Cancel = true
		}
	}
	if s.status.State == needsReview && r.IntN(2) == 0 {
		step := s.spec.Steps[r.IntN(len(s.spec.Steps))]
		action := []v1.SagaResolutionAction{v1.SagaRetry, v1.SagaMarkCompensated}[r.IntN(2)]
		if step.Compensation != nil || action == v1.SagaRetry && step.RetryUntilDone {
			resolve(step.Name, action, fmt.Sprintf("tick %d", tick))(s)
		}
	}
	if reasonOf(s.status) == ReasonWaitingForApproval && r.IntN(2) == 0 {
		approve(s.status.CurrentStep)(s)
	}
	s.duplicate = r.IntN(15) == 0
}

// settle lets the operations end well and people do what the saga asks
// of them: approve, Retry a retryUntilDone step, MarkCompensated a step
// that cannot be undone. It reports why the saga did not end, if it did
// not.
func (s *sim) settle() string {
	s.spec.Suspend = false
	for i := 0; i < 40 && s.final == nil; i++ {
		for name := range s.made {
			switch c := s.children[name]; {
			case c.State.IsTerminal():
			case c.Cancel && c.Unclaimed:
				cancelledOp(name)(s)
			default:
				set(committed, name)(s)
			}
		}
		reason := reasonOf(s.status)
		at := s.index(s.status.CurrentStep)
		switch {
		case reason == ReasonWaitingForApproval:
			approve(s.status.CurrentStep)(s)
		case s.status.State != needsReview:
		case at < 0:
			return fmt.Sprintf("waits in NeedsReview (%s) on no step", reason)
		case reason == ReasonStepFailed && s.spec.Steps[at].RetryUntilDone:
			// The person has the tool fixed, so that its dry run accepts
			// the step, and runs it again.
			delete(s.validations, s.spec.Steps[at].Name)
			resolve(s.spec.Steps[at].Name, v1.SagaRetry, fmt.Sprintf("settle %d", i))(s)
		case s.spec.Steps[at].Compensation != nil:
			resolve(s.spec.Steps[at].Name, v1.SagaMarkCompensated, fmt.Sprintf("settle %d", i))(s)
		}
		s.pass()
	}
	if s.final == nil {
		return fmt.Sprintf("%s (%s) at step %q", s.status.State, reasonOf(s.status), s.status.CurrentStep)
	}
	return ""
}

// TestDecideInvariants plays many random sagas against random operations
// and people, and checks every decision: no Compensated while a step that
// took effect is not undone (by its committed compensation, or a person's
// MarkCompensated), no step started before the one before it committed,
// no compensation before the later ones are undone, one operation at a
// time, terminal means terminal, and kstatus reads the truth.
func TestDecideInvariants(t *testing.T) {
	ends := map[v1.OperationState]int{}
	deadEnds := map[string]int{}
	undone := 0
	for seed := range uint64(2000) {
		r := rand.New(rand.NewPCG(seed, 0x5a9a))
		s := randomSim(t, r)
		s.brakes = seed%2 == 1
		s.label = fmt.Sprintf("seed %d, steps %s, brakes %t: ", seed, describe(s.spec.Steps), s.brakes)
		s.pass()
		for tick := 0; tick < 80 && s.final == nil; tick++ {
			s.perturb(r, tick)
			s.pass()
		}
		if why := s.settle(); why != "" {
			// The dead ends by design: an operation the saga must not
			// adopt, and an irreversible step a compensation reached.
			stuck := s.status.CurrentStep
			at := s.index(stuck)
			foreign := reasonOf(s.status) == ReasonForeignOperation
			_ = at
			if !foreign {
				t.Fatalf("%sthe saga does not end when everyone does as asked: %s", s.label, why)
			}
			deadEnds[reasonOf(s.status)]++
		}
		ends[s.status.State]++
		if s.status.State == compensatedS && s.status.CompensationsTotal >= 2 {
			undone++
		}
	}
	t.Logf("ends: %v; dead ends: %v; compensated with two or more compensations: %d", ends, deadEnds, undone)
	for _, state := range []v1.OperationState{committed, compensatedS, failedFinal} {
		if ends[state] < 20 {
			t.Errorf("only %d sagas ended %s: the test explores too little", ends[state], state)
		}
	}
	if undone < 20 {
		t.Errorf("only %d sagas compensated two steps or more", undone)
	}
}

// namesOperation reports whether a checkpoint names the operation a creates: a
// creation follows a written intent.
func namesOperation(st v1.SagaStatus, a Action) bool {
	for _, ss := range st.Steps {
		if a.Undo && ss.Compensation != nil && ss.Compensation.Operation == a.Name {
			return true
		}
		if !a.Undo && ss.Operation == a.Name {
			return true
		}
	}
	return false
}

// A person's resolution decides the failure they reviewed. One written for
// a step while the saga waited on another (the API server refuses it; a
// stale one may linger) is never applied to that step's later failure:
// the step's effect is undone.
func TestResolutionOnlyForTheReviewedStep(t *testing.T) {
	s := newSim(t, append(threeSteps(), compensable("bill")))
	s.pass()
	set(committed, "order.reserve")(s)
	s.pass()
	set(needsReview, "order.charge")(s)
	s.pass()
	resolve("ship", v1.SagaMarkCompensated, "meant for another saga")(s)
	set(committed, "order.charge")(s)
	s.pass()
	set(committed, "order.ship")(s)
	s.pass()
	set(failedFinal, "order.bill")(s)
	s.pass()
	if _, ok := s.children["order.ship.undo"]; !ok {
		t.Fatalf("ship took effect after a MarkCompensated for it was written, and its compensation was not created: %+v",
			s.status.Steps[2])
	}
}

// A decision that the checkpoint could not record makes nothing: when the
// write of a person's Retry conflicts (they changed their mind to
// MarkCompensated meanwhile), no second round exists, and the changed
// decision is applied on its own.
func TestLostCheckpointMakesNothing(t *testing.T) {
	s := refundFailed(t)
	resolve("charge", v1.SagaRetry, "once more")(s)
	s.loseCheckpoint = true
	if acts := s.pass(); !slices.Equal(acts, []string{"checkpoint lost"}) {
		t.Fatalf("a pass whose checkpoint was lost acted: %v", acts)
	}
	if _, ok := s.children["order.charge.undo.2"]; ok {
		t.Fatal("a second round was created before a checkpoint named it")
	}
	resolve("charge", v1.SagaMarkCompensated, "refunded by hand")(s)
	s.pass()
	if _, ok := s.children["order.charge.undo.2"]; ok {
		t.Fatal("a second round was created after the person marked the step compensated")
	}
	if cs := s.status.Steps[1].Compensation; cs.State != v1.StateCompensated || cs.Resolution.Action != v1.SagaMarkCompensated {
		t.Fatalf("charge's compensation is %+v, want marked compensated", cs)
	}
}

// The user of a resolution is admission's record of its writer: the same
// decision re-stamped by another writer (a GitOps controller re-applying
// the list) is not a new decision.
func TestRestampedResolutionIsNotNew(t *testing.T) {
	s := refundFailed(t)
	resolve("charge", v1.SagaRetry, "r1")(s)
	s.pass()
	set(failedFinal, "order.charge.undo.2")(s)
	s.pass()
	s.spec.Resolutions[0].User = "system:serviceaccount:argocd:argocd-application-controller"
	if acts := s.pass(); len(acts) > 0 {
		t.Errorf("only the user of the applied Retry changed, yet: %v", acts)
	}
}

// A resolution written during one review of a step (its operation in
// NeedsReview) is not the decision on a later failure of that step (its
// compensation failing for good), which nobody had seen yet.
func TestResolutionFromAnEarlierReviewIsDisregarded(t *testing.T) {
	s := refundFailsAfterAReview(t, v1.SagaMarkCompensated, "not sure the charge happened")
	if cs := s.status.Steps[1].Compensation; cs.State == v1.StateCompensated {
		t.Errorf("charge's failed refund was marked compensated by a resolution written before it failed "+
			"(during the forward review); saga now %s/%s, %v", s.status.State, reasonOf(s.status), s.made)
	}
}

func TestRetryFromAnEarlierReviewIsDisregarded(t *testing.T) {
	s := refundFailsAfterAReview(t, v1.SagaRetry, "retry it")
	if _, ok := s.children["order.charge.undo.2"]; ok {
		t.Errorf("a Retry written during the forward review started compensation round 2 without review")
	}
}

// A decision written during the review is applied.
func TestResolutionWrittenDuringTheReviewIsApplied(t *testing.T) {
	s := refundFailsAfterAReview(t, v1.SagaMarkCompensated, "early")
	resolve("charge", v1.SagaMarkCompensated, "refunded by hand")(s)
	s.pass()
	if cs := s.status.Steps[1].Compensation; cs.State != v1.StateCompensated || cs.Resolution.Reason != "refunded by hand" {
		t.Fatalf("charge: %+v", cs)
	}
}

// refundFailed is a saga whose last step failed for good and whose
// compensation of charge, the refund, then failed for good too.
func refundFailed(t *testing.T) *sim {
	t.Helper()
	s := newSim(t, threeSteps())
	run(t, s, []stage{start, toCharge, toShip, shipFails})
	set(failedFinal, "order.charge.undo")(s)
	s.pass()
	return s
}

// refundFailsAfterAReview is a saga whose charge operation went to
// NeedsReview, where a person wrote a resolution (action, reason) for
// charge before that operation was resolved Committed; then ship failed
// for good, and the refund of charge failed for good too, and the saga has
// taken the pass its own status write brings.
func refundFailsAfterAReview(t *testing.T, action v1.SagaResolutionAction, reason string) *sim {
	t.Helper()
	s := newSim(t, threeSteps())
	s.pass() // reserve
	set(committed, "order.reserve")(s)
	s.pass() // charge
	set(needsReview, "order.charge")(s)
	s.pass()
	if s.status.State != needsReview || s.status.CurrentStep != "charge" {
		t.Fatalf("want NeedsReview on charge, got %s %s", s.status.State, s.status.CurrentStep)
	}
	// The API server admits it: the saga waits on charge.
	resolve("charge", action, reason)(s)
	s.pass()
	set(committed, "order.charge")(s) // the operation's own resolution
	s.pass()
	set(failedFinal, "order.ship")(s)
	s.pass() // charge.undo created
	if _, ok := s.children["order.charge.undo"]; !ok {
		t.Fatalf("no compensation of charge")
	}
	set(failedFinal, "order.charge.undo")(s) // the refund fails for good
	s.pass()
	if reasonOf(s.status) != ReasonCompensationFailed {
		t.Fatalf("want CompensationFailed, got %s", reasonOf(s.status))
	}
	s.pass() // the event of its own status write: nobody reviewed anything
	return s
}
