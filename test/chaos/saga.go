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
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/test/sandbox"
)

// Roles of a saga's operations.
const (
	// RoleStep is the operation of a saga's step.
	RoleStep Role = "step"
	// RoleCompensation is the operation of a step's compensation.
	RoleCompensation Role = "compensation"
)

// person is the name the run's resolutions are written under: the run
// plays the person a saga in NeedsReview waits for.
const person = "chaos-person"

// plannedSaga is one business operation of several steps, as the driver
// asks for it.
type plannedSaga struct {
	index int
	name  string
	key   string
	steps []plannedStep
	// failAt is the step that carries a business rejection, -1 for none.
	failAt int
	// dup adds another Saga, name + "-dup", with the same key and spec.
	dup bool
	// reapply re-applies the original, unchanged, reapplyAfter after it
	// was created.
	reapply      bool
	reapplyAfter time.Duration
}

// plannedStep is one step of a planned saga.
type plannedStep struct {
	name   string
	tool   toolDef
	amount int
	// from is the earlier step whose externalObjectID the step sends as
	// "ref", -1 for none.
	from         int
	irreversible bool
	reject       bool
	// fault is a rule of the step's compensation's own.
	fault compensationFault
}

// compensationFault fails the first count requests of one compensation
// with fault. A refusal for good (422) waits for a person, who decides
// person, or nothing when it is empty.
type compensationFault struct {
	fault  string
	count  int
	person v1.SagaResolutionAction
}

// refusal reports whether the fault refuses the compensation for good.
func (f compensationFault) refusal() bool { return f.fault == sandbox.Fault422 }

// makeSagaPlan draws the sagas from the seed, on a random stream of their
// own, so that the operations of a seed are the same with and without
// sagas.
func makeSagaPlan(c Config) []plannedSaga {
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0x5a6a5))
	plan := make([]plannedSaga, c.Sagas)
	for i := range plan {
		ps := plannedSaga{index: i, name: fmt.Sprintf("saga-%05d", i), key: fmt.Sprintf("order-s%05d", i), failAt: -1}
		n := 2 + rng.IntN(3)
		for j := range n {
			t := drawTool(rng, c)
			st := plannedStep{name: strings.TrimSuffix(t.collection, "s") + strconv.Itoa(j), tool: t,
				amount: 100 + rng.IntN(10000), from: -1}
			if j > 0 && rng.Float64() < 0.8 {
				st.from = rng.IntN(j)
			}
			ps.steps = append(ps.steps, st)
		}
		ps.steps[n-1].irreversible = rng.Float64() < c.IrreversibleShare
		if rng.Float64() < c.SagaFailShare {
			// Mostly a step with steps to undo before it.
			ps.failAt = 1 + rng.IntN(n-1)
			if rng.Float64() < 0.1 {
				ps.failAt = 0
			}
			ps.steps[ps.failAt].reject = true
			// The steps before the failing one are never the last, so
			// never irreversible: each has a compensation.
			for j := range ps.failAt {
				ps.steps[j].fault = drawCompensationFault(rng, c, ps.steps[j].tool)
			}
		}
		ps.dup = rng.Float64() < c.SagaDuplicateShare
		if rng.Float64() < c.SagaReapplyShare {
			ps.reapply = true
			ps.reapplyAfter = time.Duration(rng.Int64N(int64(5 * time.Second)))
		}
		plan[i] = ps
	}
	return plan
}

// drawTool draws a tool with the configured shares.
func drawTool(rng *rand.Rand, c Config) toolDef {
	switch x := rng.Float64(); {
	case x < c.NativeShare:
		return tools[0]
	case x < c.NativeShare+c.LookupShare:
		return tools[1]
	}
	return tools[2]
}

// drawCompensationFault draws the fault of one compensation: a refusal for
// good, a failure a few times, or none. A failure a few times stays within
// what the tool's mode can recover from: a 429 anywhere, a 503 only where
// it is not an unknown outcome that a person must resolve (Native), or
// where a lookup settles it (Lookup).
func drawCompensationFault(rng *rand.Rand, c Config, t toolDef) compensationFault {
	switch x := rng.Float64(); {
	case x < c.CompensationRefusalShare:
		people := []v1.SagaResolutionAction{v1.SagaRetry, v1.SagaMarkCompensated, ""}
		return compensationFault{fault: sandbox.Fault422, count: 1, person: people[rng.IntN(len(people))]}
	case x < c.CompensationRefusalShare+c.CompensationFaultShare:
		fault := sandbox.Fault429 + "=1"
		if t.mode != v1.IdempotencyNone && rng.IntN(2) == 0 {
			fault = sandbox.Fault503 + "=1"
		}
		return compensationFault{fault: fault, count: 1 + rng.IntN(3)}
	}
	return compensationFault{}
}

// names are the names of the saga's objects, the original first.
func (ps plannedSaga) names() []string {
	if ps.dup {
		return []string{ps.name, ps.name + "-dup"}
	}
	return []string{ps.name}
}

// stepRef is the expression of a step's externalObjectID.
func stepRef(step string) string { return "steps['" + step + "'].externalObjectID" }

// retryPolicy is the retry policy of every operation of the run.
func retryPolicy() *v1.RetryPolicy {
	return &v1.RetryPolicy{MaxAttempts: 8,
		InitialBackoff: &metav1.Duration{Duration: 500 * time.Millisecond},
		MaxBackoff:     &metav1.Duration{Duration: 10 * time.Second}}
}

// object is the Saga named name in namespace ns; every object of a planned
// saga has the same key and spec.
func (ps plannedSaga) object(ns, name string) *v1.Saga {
	role := RoleOriginal
	if name != ps.name {
		role = RoleDuplicate
	}
	steps := make([]v1.SagaStep, len(ps.steps))
	for j, st := range ps.steps {
		params := map[string]any{"order": ps.key, "amount": st.amount, "currency": "eur", "step": st.name}
		if st.reject {
			params["reject"] = "chaos: step " + st.name + " is refused for good"
		}
		raw, _ := json.Marshal(params)
		s := v1.SagaStep{Name: st.name, ToolRef: v1.StepToolReference(toolRef(st.tool)), Operation: st.tool.operation,
			Parameters: &runtime.RawExtension{Raw: raw}, RetryPolicy: retryPolicy()}
		if st.from >= 0 {
			s.ParametersFrom = []v1.ParameterExpression{{Name: "ref", Expression: stepRef(ps.steps[st.from].name)}}
		}
		if st.irreversible {
			s.Irreversible = true
		} else {
			s.Compensation = &v1.Compensation{Operation: st.tool.cancel,
				ParametersFrom: []v1.ParameterExpression{{Name: "id", Expression: stepRef(st.name)}},
				RetryPolicy:    retryPolicy()}
		}
		steps[j] = s
	}
	return &v1.Saga{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			labelRole: string(role), labelLogical: "s" + strconv.Itoa(ps.index)}},
		Spec: v1.SagaSpec{IdempotencyKey: ps.key, Steps: steps},
	}
}

func toolRef(t toolDef) v1.ToolReference {
	return v1.ToolReference{Kind: v1.ToolKindTool, Name: t.name}
}

// stepToolKey is the key Once sends to the tool for a step's operation
// (undo: its compensation's) in a round.
func (ps plannedSaga) stepToolKey(ns string, st plannedStep, undo bool, round int32) string {
	op := st.tool.operation
	if undo {
		op = st.tool.cancel
	}
	return protocol.Scope{Namespace: ns, Tool: toolRef(st.tool), Operation: op,
		Key: saga.OperationKey(ps.key, st.name, undo, round)}.ToolKey()
}

// analysed is the saga object name as the analysis sees it, with s its
// final state (nil if it was not found).
func (ps plannedSaga) analysed(ns, name string, s *v1.Saga) Saga {
	a := Saga{Name: name, Role: RoleOriginal, Key: ps.key}
	if name != ps.name {
		a.Role = RoleDuplicate
	}
	if ps.failAt >= 0 {
		a.FailAt = ps.steps[ps.failAt].name
	}
	rounds := map[string]int32{}
	if s != nil {
		a.Found, a.Status, a.Resolutions = true, s.Status, s.Spec.Resolutions
		for _, ss := range s.Status.Steps {
			if ss.Compensation != nil {
				rounds[ss.Name] = ss.Compensation.Round
			}
		}
	}
	for _, st := range ps.steps {
		as := SagaStep{Name: st.name, Mode: st.tool.mode, Irreversible: st.irreversible,
			Scope: sandbox.SummaryKey(st.tool.sandboxMode(), st.tool.collection, sandbox.ActionCreate,
				ps.stepToolKey(ns, st, false, 1))}
		if !st.irreversible {
			for round := range max(rounds[st.name], 1) {
				as.CompensationScopes = append(as.CompensationScopes, sandbox.SummaryKey(st.tool.sandboxMode(),
					st.tool.collection, sandbox.ActionCancel, ps.stepToolKey(ns, st, true, round+1)))
			}
		}
		a.Steps = append(a.Steps, as)
	}
	return a
}

// compensationRules are the rules of F9 of docs/design.md, The fault matrix: each fails
// the first requests of one compensation, the cancel sent with its key.
// They come before the random rules, so that they fire first.
func compensationRules(ns string, sagas []plannedSaga) []sandbox.FaultRule {
	var rules []sandbox.FaultRule
	for _, ps := range sagas {
		for _, st := range ps.steps {
			if st.fault.fault == "" {
				continue
			}
			// The prefix also matches the keys of later rounds, which a
			// person's Retry starts; the rule is spent by then.
			rules = append(rules, sandbox.FaultRule{Mode: st.tool.sandboxMode(), Collection: st.tool.collection,
				Method: http.MethodPost, Action: sandbox.ActionCancel, KeyPrefix: ps.stepToolKey(ns, st, true, 1),
				Fault: st.fault.fault, Count: st.fault.count})
		}
	}
	return rules
}

// createSagas creates the objects of one planned saga, and schedules its
// re-apply on the driver's group.
func (d *driver) createSagas(ctx context.Context, ps plannedSaga) {
	for _, name := range ps.names() {
		d.create(ctx, ps.object(d.ns, name))
	}
	if !ps.reapply || !d.isCreated(ps.name) {
		return
	}
	d.later.Go(func() {
		select {
		case <-time.After(ps.reapplyAfter):
		case <-ctx.Done():
			return
		}
		d.reapply(ctx, ps.object(d.ns, ps.name), &d.sagaReapplies)
	})
}

// decide plays the person that sagas in NeedsReview wait for, where the
// plan says one decides: a compensation refused for good is retried, or
// marked compensated (the person undid the effect by other means). It
// returns how many decisions it wrote.
func (r *run) decide(ctx context.Context, sagas []plannedSaga, found map[string]*v1.Saga) int {
	n := 0
	for _, ps := range sagas {
		for _, name := range ps.names() {
			s := found[name]
			if s == nil {
				continue
			}
			step, action := awaitsPerson(ps, s)
			if action == "" {
				continue
			}
			s = s.DeepCopy()
			s.Spec.Resolutions = append(s.Spec.Resolutions, v1.SagaResolution{Step: step, Action: action, By: person,
				Reason: "the chaos run's person: the compensation was refused for good"})
			if err := r.c.Update(ctx, s); err != nil {
				if !apierrors.IsConflict(err) {
					r.log("resolving saga %s: %v", name, err)
				}
				continue
			}
			r.personDecisions.Add(1)
			n++
		}
	}
	return n
}

// awaitsPerson returns the step and the decision a person owes saga s
// now: s is in NeedsReview because the compensation of a step that the
// plan has refused for good failed, the plan says the person decides,
// and spec.resolutions has no decision for the step yet.
func awaitsPerson(ps plannedSaga, s *v1.Saga) (string, v1.SagaResolutionAction) {
	if s.Status.State != v1.StateNeedsReview {
		return "", ""
	}
	for _, st := range ps.steps {
		if !st.fault.refusal() || st.fault.person == "" {
			continue
		}
		ss := stepStatusOf(s.Status, st.name)
		if ss.Compensation == nil || ss.Compensation.State != v1.StateFailedFinal {
			continue
		}
		if slices.ContainsFunc(s.Spec.Resolutions, func(r v1.SagaResolution) bool { return r.Step == st.name }) {
			continue
		}
		return st.name, st.fault.person
	}
	return "", ""
}

// decisionPending reports whether a person's decision on s is written but
// not applied yet: the saga is not settled until it is.
func decisionPending(s *v1.Saga) bool {
	for _, r := range s.Spec.Resolutions {
		ss := stepStatusOf(s.Status, r.Step)
		if ss.Compensation != nil && (ss.Compensation.Resolution == nil || *ss.Compensation.Resolution != r) {
			return true
		}
	}
	return false
}

func stepStatusOf(st v1.SagaStatus, step string) v1.SagaStepStatus {
	for _, ss := range st.Steps {
		if ss.Name == step {
			return ss
		}
	}
	return v1.SagaStepStatus{}
}

// sagaObject is one of a saga's operations as the analysis sees it.
func sagaObject(ns string, op *v1.SideEffectOperation) Object {
	t := toolByName(op.Spec.ToolRef.Name)
	role, action := RoleStep, sandbox.ActionCreate
	if op.Labels[saga.LabelRole] == saga.RoleCompensation {
		role, action = RoleCompensation, sandbox.ActionCancel
	}
	key := op.Status.ToolIdempotencyKey
	if key == "" {
		key = protocol.Scope{Namespace: ns, Tool: op.Spec.ToolRef, Operation: op.Spec.Operation,
			Key: op.Spec.IdempotencyKey}.ToolKey()
	}
	o := Object{Name: op.Name, Logical: -1, Saga: op.Labels[saga.LabelSaga], Role: role, Mode: t.mode,
		ScopeKey: sandbox.SummaryKey(t.sandboxMode(), t.collection, action, key), Found: true, Status: op.Status}
	if op.Spec.Parameters != nil {
		o.BodySHA = bodySHA(op.Spec.Parameters.Raw)
	}
	return o
}

func toolByName(name string) toolDef {
	for _, t := range tools {
		if t.name == name {
			return t
		}
	}
	return toolDef{name: name}
}

// sagaSettled reports whether saga s has settled: it ended, or it waits
// for a person the run does not play, or for an operation that waits for
// one (a duplicate whose original needs review).
func sagaSettled(ps plannedSaga, s *v1.Saga, waiting map[string]bool) bool {
	switch {
	case s == nil:
		return false
	case s.Status.State.IsTerminal():
		return true
	case s.Status.State == v1.StateNeedsReview:
		step, _ := awaitsPerson(ps, s)
		return step == "" && !decisionPending(s)
	}
	for _, ss := range s.Status.Steps {
		if waiting[ss.Operation] || ss.Compensation != nil && waiting[ss.Compensation.Operation] {
			return true
		}
	}
	return false
}

// readyReasonOf is a saga's Ready reason.
func readyReasonOf(st v1.SagaStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}
