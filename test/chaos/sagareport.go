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
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

// Saga is one Saga object as the analysis sees it: what the driver asked
// for, where the tool's ledger keeps the effects of its steps and
// compensations, and the status the operator left on it.
type Saga struct {
	Name string
	// Role is RoleOriginal, or RoleDuplicate for another Saga with the
	// same key and spec.
	Role Role
	// Key is the saga's idempotency key.
	Key string
	// FailAt is the step the driver made the tool refuse for good, "" for
	// none.
	FailAt string
	Steps  []SagaStep
	// Found is false when the saga was not there at the end.
	Found  bool
	Status v1.SagaStatus
	// Resolutions are the decisions a person wrote in spec.resolutions.
	Resolutions []v1.SagaResolution
}

// SagaStep is one step of a saga as the analysis sees it.
type SagaStep struct {
	Name         string
	Mode         v1.IdempotencyMode
	Irreversible bool
	// Scope is the ledger key (sandbox.SummaryKey) of the step's create.
	Scope string
	// CompensationScopes are the ledger keys of its compensation's cancel,
	// round 1 first, one per round the saga's status reports.
	CompensationScopes []string
}

// SagaFigures are the figures of a run's sagas: their final states, their
// compensations (docs/design.md's figures: compensation success rate), and the checks
// of I8 (docs/design.md, Invariants) and F9 (docs/design.md, The fault matrix), all counted at the
// tool's ledger.
type SagaFigures struct {
	// Sagas counts the Saga objects, duplicates included;
	// SagaDuplicatesInjected the duplicates; SagaReapplies the GitOps
	// re-applies; SagasRejecting the sagas with a step the tool refuses
	// for good (a business rejection); SagaSteps the steps of the
	// original sagas.
	Sagas                  int `json:"sagas"`
	SagaDuplicatesInjected int `json:"saga_duplicates_injected"`
	SagaReapplies          int `json:"saga_reapplies"`
	SagasRejecting         int `json:"sagas_rejecting"`
	SagaSteps              int `json:"saga_steps"`
	// SagaStates counts the sagas by final status.state (WaitingForReview
	// for a saga whose operation waits for an original in NeedsReview,
	// Missing for one not found); SagaReviewReasons those in NeedsReview
	// by their Ready reason.
	SagaStates        map[string]int `json:"saga_states"`
	SagaReviewReasons map[string]int `json:"saga_review_reasons"`
	// SagaOperations counts the logical operations of sagas (the scopes of
	// their steps and compensations), SagaOperationObjects their objects,
	// SagaOperationStates those by final state.
	SagaOperations       int            `json:"saga_operations"`
	SagaOperationObjects int            `json:"saga_operation_objects"`
	SagaOperationStates  map[string]int `json:"saga_operation_states"`

	// CompensationsStarted counts the compensations' operations (every
	// round); CompensationsCommitted those that ended Committed without a
	// person, of which CompensationsRecovered after a failed or unknown
	// attempt (F9: recovery went on); CompensationsFailedFinal and
	// CompensationsNeedsReview those that did not.
	// CompensationSuccessRate is CompensationsCommitted /
	// CompensationsStarted.
	CompensationsStarted     int     `json:"compensations_started"`
	CompensationsCommitted   int     `json:"compensations_committed"`
	CompensationsRecovered   int     `json:"compensations_recovered"`
	CompensationsFailedFinal int     `json:"compensations_failed_final"`
	CompensationsNeedsReview int     `json:"compensations_needs_review"`
	CompensationSuccessRate  float64 `json:"compensation_success_rate"`
	// StepsCompensated counts the steps whose checkpoint says Compensated,
	// StepsMarkedCompensated those of them a person marked so.
	StepsCompensated       int `json:"steps_compensated"`
	StepsMarkedCompensated int `json:"steps_marked_compensated"`
	// The rules of F9: compensations failed a few times
	// (CompensationFaultsPlanned rules, CompensationFaultsFired requests
	// failed) and refused for good (CompensationRefusalsPlanned,
	// CompensationRefusalsFired); PersonDecisions counts the resolutions
	// the run wrote as the person a saga in review waits for.
	CompensationFaultsPlanned   int `json:"compensation_faults_planned"`
	CompensationFaultsFired     int `json:"compensation_faults_fired"`
	CompensationRefusalsPlanned int `json:"compensation_refusals_planned"`
	CompensationRefusalsFired   int `json:"compensation_refusals_fired"`
	PersonDecisions             int `json:"person_decisions"`

	// SagasCompensatedEarly counts sagas that report an effect undone
	// while it stands at the tool (I8): Compensated, or with a step marked
	// Compensated, while a step's create is in the ledger with no cancel
	// of that object under the compensation's key and no person's
	// MarkCompensated; or Compensated a second or more before one of its
	// cancels. Must be 0.
	SagasCompensatedEarly int `json:"sagas_compensated_early"`
	// SagaOrderViolations counts sagas whose cancels at the tool are out
	// of order: not in reverse step order (by ledger sequence), before a
	// create of the saga, or before the failing step's failure.
	SagaOrderViolations int `json:"saga_order_violations"`
	// MaskedCancels counts compensations answered 409 already_cancelled:
	// a second cancel of an object, which only the tool's state machine
	// kept from being a second effect. Must be 0.
	MaskedCancels int `json:"masked_cancels"`
	// LostSagas counts sagas that were neither terminal nor in NeedsReview
	// (nor waiting for an operation in review) at the settle bound.
	LostSagas int `json:"lost_sagas"`
}

// analyseSagas computes the saga figures and checks every saga against
// the ledger.
func analyseSagas(r *Report, sagas []Saga, byName map[string]*Object, effects []sandbox.Effect) {
	ledger := map[string][]sandbox.Effect{}
	for _, e := range effects {
		if e.Key != "" {
			ledger[effectScope(e)] = append(ledger[effectScope(e)], e)
		}
	}
	byScope := map[string][]*Object{}
	for _, o := range byName {
		byScope[o.ScopeKey] = append(byScope[o.ScopeKey], o)
		if o.Role == RoleCompensation {
			countCompensation(r, o)
		}
	}
	r.CompensationSuccessRate = ratio(r.CompensationsCommitted, r.CompensationsStarted, 1)
	for i := range sagas {
		c := &sagaCheck{r: r, s: &sagas[i], byName: byName, byScope: byScope, ledger: ledger}
		c.check()
	}
}

// countCompensation counts one compensation's operation.
func countCompensation(r *Report, o *Object) {
	st := o.Status
	r.CompensationsStarted++
	switch st.State {
	case v1.StateCommitted:
		if st.Resolution == nil {
			r.CompensationsCommitted++
			if st.Attempts > 1 || st.UnknownTime != nil || failedBefore(st) {
				r.CompensationsRecovered++
			}
		}
	case v1.StateFailedFinal:
		r.CompensationsFailedFinal++
	case v1.StateNeedsReview:
		r.CompensationsNeedsReview++
	}
	for _, ob := range st.Observations {
		if strings.Contains(ob.Message, sandbox.CodeAlreadyCancelled) {
			r.MaskedCancels++
			break
		}
	}
}

// failedBefore reports whether an observation saw a failure or an unknown
// outcome.
func failedBefore(st v1.SideEffectOperationStatus) bool {
	return slices.ContainsFunc(st.Observations, func(ob v1.Observation) bool {
		return ob.Outcome == string(v1.OutcomeRetryable) || ob.Outcome == string(v1.OutcomeUnknown)
	})
}

// sagaCheck is the check of one saga.
type sagaCheck struct {
	r       *Report
	s       *Saga
	byName  map[string]*Object
	byScope map[string][]*Object
	ledger  map[string][]sandbox.Effect
	// early says, step by step, why a step marked undone was not undone
	// then.
	early []string
	// disordered is set once an ordering violation is found.
	disordered bool
}

func (c *sagaCheck) issue(kind, detail string, effects ...sandbox.Effect) Issue {
	return Issue{Kind: kind, Saga: c.s.Name, Detail: detail, Effects: effects}
}

func (c *sagaCheck) violate(kind, detail string, effects ...sandbox.Effect) {
	c.r.Violations = append(c.r.Violations, c.issue(kind, detail, effects...))
}

func (c *sagaCheck) check() {
	r, s := c.r, c.s
	r.Sagas++
	if s.Role == RoleDuplicate {
		r.SagaDuplicatesInjected++
	} else {
		r.SagaSteps += len(s.Steps)
		if s.FailAt != "" {
			r.SagasRejecting++
		}
	}
	state, settled := c.settled()
	r.SagaStates[state]++
	if s.Status.State == v1.StateNeedsReview {
		r.SagaReviewReasons[readyReasonOf(s.Status)]++
	}
	if !settled {
		r.LostSagas++
		r.Lost = append(r.Lost, c.issue("Lost", fmt.Sprintf("saga is %s at the bound", state)))
	}
	if !s.Found {
		return
	}
	for i := range s.Steps {
		c.checkStep(i)
	}
	c.checkEnd()
	if len(c.early) > 0 {
		r.SagasCompensatedEarly++
		c.violate("I8", fmt.Sprintf("%s, yet %s", describeSaga(s.Status), strings.Join(c.early, "; ")))
	}
	c.checkOrder()
	if c.disordered {
		r.SagaOrderViolations++
	}
}

// settled names the saga's final state and says whether it settled.
func (c *sagaCheck) settled() (string, bool) {
	st := c.s.Status
	switch {
	case !c.s.Found:
		return stateMissing, false
	case st.State.IsTerminal() || st.State == v1.StateNeedsReview:
		return string(st.State), true
	}
	for _, ss := range st.Steps {
		names := []string{ss.Operation}
		if ss.Compensation != nil {
			names = append(names, ss.Compensation.Operation)
		}
		for _, n := range names {
			if o := c.byName[n]; o != nil && waitsForReview(o, c.byName) {
				return stateWaitingForReview, true
			}
		}
	}
	return string(st.State.OrPlanned()), false
}

func describeSaga(st v1.SagaStatus) string {
	return fmt.Sprintf("saga is %s (failed step %q, %d of %d compensations done)", st.State, st.FailedStep,
		st.CompensationsDone, st.CompensationsTotal)
}

// stepEffects is what the ledger holds of one step: its create, if any,
// and the cancels under its compensation's keys.
type stepEffects struct {
	create  *sandbox.Effect
	cancels []sandbox.Effect
	// undone is true when a cancel cancelled the create's object.
	undone bool
}

func (c *sagaCheck) effects(step SagaStep) stepEffects {
	var se stepEffects
	if creates := c.ledger[step.Scope]; len(creates) > 0 {
		se.create = &creates[0]
	}
	for _, scope := range step.CompensationScopes {
		se.cancels = append(se.cancels, c.ledger[scope]...)
	}
	for _, e := range se.cancels {
		if se.create != nil && e.ID == se.create.ID {
			se.undone = true
		}
	}
	return se
}

// markedCompensated reports whether a person marked the step compensated,
// and the saga applied it: the decision is in the spec, where only a
// person writes, and in the step's checkpoint.
func (c *sagaCheck) markedCompensated(step string, ss v1.SagaStepStatus) bool {
	applied := ss.Compensation != nil && ss.Compensation.Resolution != nil &&
		ss.Compensation.Resolution.Action == v1.SagaMarkCompensated
	written := slices.ContainsFunc(c.s.Resolutions, func(r v1.SagaResolution) bool {
		return r.Step == step && r.Action == v1.SagaMarkCompensated
	})
	return applied && written
}

// checkStep checks step i's checkpoint against the ledger.
func (c *sagaCheck) checkStep(i int) {
	step, st := c.s.Steps[i], c.s.Status
	ss := stepStatusOf(st, step.Name)
	se := c.effects(step)
	marked := c.markedCompensated(step.Name, ss)
	standing := se.create != nil && !se.undone && !marked

	for _, e := range se.cancels {
		if se.create == nil || e.ID != se.create.ID {
			c.violate("SagaRecord", fmt.Sprintf("the compensation of step %s cancelled %s, which is not the step's effect",
				step.Name, e.ID), e)
		}
	}
	if ss.Operation != "" && c.byName[ss.Operation] == nil {
		c.violate("SagaRecord", fmt.Sprintf("step %s names operation %s, which does not exist", step.Name, ss.Operation))
	}
	if cs := ss.Compensation; cs != nil && cs.Operation != "" && c.byName[cs.Operation] == nil {
		c.violate("SagaRecord", fmt.Sprintf("the compensation of step %s names operation %s, which does not exist",
			step.Name, cs.Operation))
	}
	if ss.State == v1.StateCompensated {
		c.r.StepsCompensated++
		if marked {
			c.r.StepsMarkedCompensated++
		} else if !c.compensationCommitted(ss) {
			c.violate("SagaRecord", fmt.Sprintf("step %s is marked Compensated without a committed compensation "+
				"operation or a person's MarkCompensated", step.Name))
		}
	}
	switch {
	case standing && (st.State == v1.StateCompensated || ss.State == v1.StateCompensated):
		c.early = append(c.early, fmt.Sprintf("the effect %s of step %s stands at the tool: no cancel of it under "+
			"its compensation's key, and no person marked it compensated", se.create.ID, step.Name))
	case standing && st.State == v1.StateFailedFinal:
		c.violate("SagaRecord", fmt.Sprintf("saga ended FailedFinal, as if nothing had taken effect, but the effect %s "+
			"of step %s stands at the tool", se.create.ID, step.Name), *se.create)
	case st.State == v1.StateCommitted && se.create == nil:
		c.violate("SagaRecord", fmt.Sprintf("saga is Committed, but step %s has no effect at the tool", step.Name))
	case st.State == v1.StateCommitted && len(se.cancels) > 0:
		c.violate("SagaRecord", fmt.Sprintf("saga is Committed, but step %s was cancelled", step.Name), se.cancels...)
	}
}

// checkEnd: a Compensated saga ended after its last cancel. Status times
// are kept to the second, rounded down, so a cancel a second or more
// after the recorded end certainly came after the saga said it was done.
func (c *sagaCheck) checkEnd() {
	st := c.s.Status
	if st.State != v1.StateCompensated || st.CompletionTime == nil {
		return
	}
	end := st.CompletionTime.Add(time.Second)
	for _, step := range c.s.Steps {
		for _, e := range c.effects(step).cancels {
			if !e.Time.Before(end) {
				c.early = append(c.early, fmt.Sprintf("step %s was cancelled only at %s, after the saga ended",
					step.Name, e.Time.Format(time.RFC3339Nano)))
				c.violate("SagaOrder", fmt.Sprintf("the cancel of step %s at %s came after the saga ended Compensated at %s",
					step.Name, e.Time.Format(time.RFC3339Nano), st.CompletionTime.Format(time.RFC3339)), e)
				c.disordered = true
			}
		}
	}
}

// compensationCommitted reports whether the compensation operation the
// step's checkpoint names ended Committed.
func (c *sagaCheck) compensationCommitted(ss v1.SagaStepStatus) bool {
	if ss.Compensation == nil {
		return false
	}
	o := c.byName[ss.Compensation.Operation]
	return o != nil && o.Status.State == v1.StateCommitted
}

// checkOrder: the cancels at the tool come after the saga's creates and
// after the failing step's failure, and undo the steps last first.
func (c *sagaCheck) checkOrder() {
	s := c.s
	all := make([]stepEffects, 0, len(s.Steps))
	maxCreate := int64(-1)
	var lastCreate sandbox.Effect
	anyCancel := false
	for _, step := range s.Steps {
		se := c.effects(step)
		all = append(all, se)
		if se.create != nil && se.create.Seq > maxCreate {
			maxCreate, lastCreate = se.create.Seq, *se.create
		}
		anyCancel = anyCancel || len(se.cancels) > 0
	}
	if !anyCancel {
		return
	}
	disorder := func(detail string, effects ...sandbox.Effect) {
		c.disordered = true
		c.violate("SagaOrder", detail, effects...)
	}
	if s.Status.FailedStep == "" {
		disorder("compensations ran, but no step failed")
	}
	failedAt := c.failureTime()
	for i, se := range all {
		for _, e := range se.cancels {
			if e.Seq < maxCreate {
				disorder(fmt.Sprintf("the cancel of step %s (seq %d) precedes a create of the saga (seq %d)",
					s.Steps[i].Name, e.Seq, maxCreate), e, lastCreate)
			}
			if !failedAt.IsZero() && e.Time.Before(failedAt) {
				disorder(fmt.Sprintf("the cancel of step %s at %s precedes the failure of step %s, recorded at %s",
					s.Steps[i].Name, e.Time.Format(time.RFC3339Nano), s.Status.FailedStep, failedAt.Format(time.RFC3339)), e)
			}
		}
		// Every cancel of a later step comes before every cancel of this
		// one.
		for j := i + 1; j < len(all); j++ {
			for _, early := range se.cancels {
				for _, late := range all[j].cancels {
					if early.Seq < late.Seq {
						disorder(fmt.Sprintf("step %s was cancelled (seq %d) before step %s (seq %d), which comes after it",
							s.Steps[i].Name, early.Seq, s.Steps[j].Name, late.Seq), early, late)
					}
				}
			}
		}
	}
}

// failureTime is when the failing step's failure was first recorded: the
// earliest completion of a FailedFinal operation of its scope (a duplicate
// saga's copy of the step records it later). Status times are kept to the
// second, rounded down, so a cancel before it certainly came before the
// failure. Zero when unknown (a step that failed its validation has no
// operation).
func (c *sagaCheck) failureTime() time.Time {
	ss := stepStatusOf(c.s.Status, c.s.Status.FailedStep)
	o := c.byName[ss.Operation]
	if o == nil {
		return time.Time{}
	}
	var t time.Time
	for _, p := range c.byScope[o.ScopeKey] {
		if ct := p.Status.CompletionTime; p.Status.State == v1.StateFailedFinal && ct != nil &&
			(t.IsZero() || ct.Time.Before(t)) {
			t = ct.Time
		}
	}
	return t
}

// sagaRows writes the sagas' section of the table.
func (r Report) sagaRows(row func(string, any, string), section func(string), rate func(float64) string,
	of func(int, int) string) {
	section("sagas: docs/design.md, Figures to report compensation success, I8, F9")
	row("sagas", r.Sagas, fmt.Sprintf("incl. %d duplicates (same key and spec) and %d re-applies; %d steps; "+
		"%d with a step the tool refuses for good", r.SagaDuplicatesInjected, r.SagaReapplies, r.SagaSteps, r.SagasRejecting))
	row("saga_final_states", formatCounts(r.SagaStates), "sagas by status.state")
	row("saga_review_reasons", formatCounts(r.SagaReviewReasons), "sagas in NeedsReview by Ready reason")
	row("saga_operations", r.SagaOperations, fmt.Sprintf("logical steps and compensations; %d objects: %s",
		r.SagaOperationObjects, formatCounts(r.SagaOperationStates)))
	row("compensation_success_rate", rate(r.CompensationSuccessRate), of(r.CompensationsCommitted, r.CompensationsStarted)+
		fmt.Sprintf(" compensations that ended Committed without a person; %d FailedFinal, %d NeedsReview",
			r.CompensationsFailedFinal, r.CompensationsNeedsReview))
	row("compensations_recovered", r.CompensationsRecovered, "committed after a failed or unknown attempt: recovery went on")
	row("compensation_faults", fmt.Sprintf("%d/%d", r.CompensationFaultsFired, r.CompensationFaultsPlanned),
		"requests failed / compensations given a rule failing their first 1-3 requests (429, 503)")
	row("compensation_refusals", fmt.Sprintf("%d/%d", r.CompensationRefusalsFired, r.CompensationRefusalsPlanned),
		fmt.Sprintf("refused for good (422) / planned; then %d decisions by a person (Retry, MarkCompensated), "+
			"the rest left in review", r.PersonDecisions))
	row("steps_compensated", r.StepsCompensated, fmt.Sprintf("steps whose checkpoint says Compensated; %d marked by a person",
		r.StepsMarkedCompensated))
	row("sagas_compensated_early", r.SagasCompensatedEarly,
		"a step marked undone whose effect stands at the tool, with no person's MarkCompensated, "+
			"or cancelled after the saga ended; must be 0")
	row("saga_order_violations", r.SagaOrderViolations,
		"cancels not in reverse step order, before a create, before the failure or after the end; must be 0")
	row("masked_cancels", r.MaskedCancels, "compensations answered 409 already_cancelled: a second cancel; must be 0")
	row("lost_sagas", r.LostSagas, "neither terminal nor NeedsReview at the bound")
}
