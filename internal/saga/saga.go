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

// Package saga decides, with no I/O, what a Saga does next. From its spec,
// its checkpoint and the states of its operations, it computes the next
// checkpoint and the one action that moves it on. That action validates a
// step, creates a step's or a compensation's operation, or writes the
// checkpoint first. Every effect runs as a SideEffectOperation under the
// whole protocol. A saga only orders them.
//
// It creates an operation only when the operations it depends on are
// terminal, which never change again. It creates it only once a written
// checkpoint names it, with the validations, approvals and resolutions the
// decision rests on. The write is conditional on the saga's
// resourceVersion. So a pass that read a stale saga writes nothing and
// creates nothing.
package saga

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/protocol"
)

// Condition reasons of sagas, besides the operations' own.
const (
	ReasonValidating         = "Validating"
	ReasonValidationFailed   = "ValidationFailed"
	ReasonRunning            = "Running"
	ReasonWaitingForApproval = "WaitingForApproval"
	ReasonStepFailed         = "StepFailed"
	ReasonCompensating       = "Compensating"
	ReasonCompensated        = "Compensated"
	ReasonCompensationFailed = "CompensationFailed"
	ReasonCannotCompensate   = "CannotCompensate"
	ReasonForeignOperation   = "ForeignOperation"
)

// Child is what a saga reads of one of its operations.
type Child struct {
	State            v1.OperationState
	DuplicateOf      string
	ExternalObjectID string
	ResultDigest     string
	// Message is the operation's Ready message: why it waits or failed.
	Message string
	// Key, Tool and Operation are what the operation was made for; an
	// operation with the expected name made for something else is not the
	// saga's.
	Key       string
	Tool      v1.ToolReference
	Operation string
	// Foreign marks an operation with the expected name that this saga
	// does not control.
	Foreign bool
	// Decided marks a failed operation whose failure does not establish
	// that it had no effect (protocol.Unproven): a person's decision, or a
	// failure the tool contradicted with a late answer.
	Decided bool
	// Reason is a failed operation's Ready reason, which the step's
	// checkpoint keeps.
	Reason string
	// Cancel is the operation's spec.cancel.
	Cancel bool
	// Unclaimed marks an operation that has not claimed an attempt: no
	// request of it was sent.
	Unclaimed bool
}

// View is everything a decision reads.
type View struct {
	Name       string
	Generation int64
	// Namespace is the saga's; with its key it is the saga's scope, which
	// the ids of its outcome's announcements derive from (ScopeName).
	Namespace string
	Spec      *v1.SagaSpec
	Status    v1.SagaStatus
	// Children are the saga's operations by name; a missing one was not
	// created yet.
	Children map[string]Child
	// Plan is the compiled spec; PlanErr says why it does not compile.
	Plan    *Plan
	PlanErr error
	// Uncreatable holds, by name, operations the controller could not
	// make, and why (their parameters cannot be computed).
	Uncreatable map[string]string
	// Remembered holds, by step name, what the scope record of each step
	// that this saga has not started says its key already holds. It is
	// empty when nothing. Else it describes the effect that may stand: an
	// earlier saga of the same key made it, and its record still keeps it.
	// nil: not read yet (ActionRecall asks for it).
	Remembered map[string]string
	Now        time.Time
}

// ActionKind is what the controller must do for a decision.
type ActionKind int

const (
	// ActionNone: write the status, if it changed, and wait for the
	// operations (their changes wake the saga).
	ActionNone ActionKind = iota
	// ActionValidate: validate Step and write it in the step's status.
	ActionValidate
	// ActionCreate: compute the parameters and create the operation Name
	// with key Key for Step (Undo: its compensation). The checkpoint the
	// decision was taken from already names it.
	ActionCreate
	// ActionCheckpoint: write the status, conditional on the saga's
	// resourceVersion, and decide again from it. Asked before every
	// creation, so that an operation exists only once a written checkpoint
	// names it. The checkpoint holds the validations, approvals and
	// resolutions the decision to create it rests on. A pass that read a
	// stale saga cannot write, and so cannot create.
	ActionCheckpoint
	// ActionRecall: read the scope record of every step whose checkpoint
	// names no operation, put what each holds in View.Remembered, and
	// decide again. Asked when a compensation begins to matter: an earlier
	// saga of the same key may have left an effect under a step this saga
	// has not reached.
	ActionRecall
	// ActionCancel: set spec.cancel on the operation Name of Step, which
	// had not claimed an attempt when the saga read it, and decide again.
	// The write is conditional on the resourceVersion read, so an
	// operation that claimed meanwhile is left alone.
	ActionCancel
)

// Action is the one thing a decision asks the controller to do.
type Action struct {
	Kind      ActionKind
	Step      int
	Undo      bool
	Round     int32
	Name, Key string
	// Cancel creates the operation with spec.cancel set: a cancelled saga
	// makes a step's operation only where a written checkpoint named it,
	// and it may exist already. Made now, it fails Cancelled with no call.
	Cancel bool
}

// Decision is the next checkpoint and the action that moves it on.
type Decision struct {
	Status v1.SagaStatus
	Action Action
}

// Key is the saga's effective idempotency key.
func Key(name string, spec *v1.SagaSpec) string {
	if spec.IdempotencyKey != "" {
		return spec.IdempotencyKey
	}
	return name
}

// Decide returns the saga's next checkpoint and action.
func Decide(v View) Decision {
	d := &decider{View: v, st: *v.Status.DeepCopy()}
	d.st.IdempotencyKey = Key(v.Name, v.Spec)
	d.st.ObservedGeneration = v.Generation
	d.align()
	if d.st.State.IsTerminal() {
		return Decision{Status: d.st}
	}
	if v.PlanErr != nil {
		return d.invalid()
	}
	d.refresh()
	if d.st.FailedStep != "" {
		return d.compensate()
	}
	return d.forward()
}

type decider struct {
	View
	st v1.SagaStatus
}

// stepStatus is the checkpoint being decided of the named step.
func (d *decider) stepStatus(name string) *v1.SagaStepStatus {
	for i := range d.st.Steps {
		if d.st.Steps[i].Name == name {
			return &d.st.Steps[i]
		}
	}
	return nil
}

// read is the checkpoint the decision was asked about, as it was: d.st is
// the one being decided.
func (d *decider) read() v1.SagaStatus { return d.Status }

// align gives every step of the spec its checkpoint, in spec order.
func (d *decider) align() {
	old := map[string]v1.SagaStepStatus{}
	for _, s := range d.st.Steps {
		old[s.Name] = s
	}
	d.st.Steps = make([]v1.SagaStepStatus, len(d.Spec.Steps))
	for i, s := range d.Spec.Steps {
		ss, ok := old[s.Name]
		if !ok {
			ss = v1.SagaStepStatus{Name: s.Name}
		}
		if ss.Round == 0 {
			ss.Round = 1
		}
		d.st.Steps[i] = ss
	}
}

// refresh copies into each step's checkpoint the state of the operation
// the checkpoint names.
func (d *decider) refresh() {
	for i := range d.Spec.Steps {
		ss := &d.st.Steps[i]
		name := OperationName(d.Name, ss.Name, false, ss.Round)
		c, ok := d.child(name, i, false, ss.Round)
		if !ok || c.Foreign || ss.Operation != name {
			continue
		}
		ss.ExternalObjectID, ss.ResultDigest = c.ExternalObjectID, c.ResultDigest
		if ss.Compensation == nil {
			ss.State, ss.Message = c.State, messageUnless(c.State == v1.StateCommitted, c.Message)
			ss.Reason = ""
			if c.State == v1.StateFailedFinal {
				ss.Reason = c.Reason
			}
		}
	}
}

// child returns the operation of that name, Foreign unless this saga
// controls it and it was made for step i (undo: its compensation) in that
// round: its key, tool and operation.
func (d *decider) child(name string, i int, undo bool, round int32) (Child, bool) {
	c, ok := d.Children[name]
	if !ok || c.Foreign {
		return c, ok
	}
	tool, operation := Target(d.Spec.Steps[i], undo)
	if c.Key != OperationKey(d.st.IdempotencyKey, d.Spec.Steps[i].Name, undo, round) ||
		c.Operation != operation || c.Tool.EffectiveKind() != tool.EffectiveKind() || c.Tool.Name != tool.Name {
		c.Foreign = true
	}
	return c, true
}

// Target is the tool and operation of a step, or of its compensation. The
// tool's kind is explicit, Tool when the step leaves it empty, so that a
// saga stored with kind Tool and the same saga stored with none name one
// tool, and their operations are the same.
func Target(step v1.SagaStep, undo bool) (v1.ToolReference, string) {
	if !undo {
		return step.ToolRef.Tool(), step.Operation
	}
	ref := step.ToolRef
	if step.Compensation.ToolRef != nil {
		ref = *step.Compensation.ToolRef
	}
	return ref.Tool(), step.Compensation.Operation
}

// checkpoint is step i's checkpoint as the decision read it, before any
// change of its own.
func (d *decider) checkpoint(i int) v1.SagaStepStatus {
	for _, ss := range d.read().Steps {
		if ss.Name == d.Spec.Steps[i].Name {
			return ss
		}
	}
	return v1.SagaStepStatus{}
}

// orphan stops at an operation of the saga's that its checkpoint does not
// name: never created by this saga's decisions, so never adopted.
func (d *decider) orphan(step, name string) Decision {
	return d.review(step, ReasonForeignOperation, fmt.Sprintf(
		"step %s: SideEffectOperation %s exists, but this saga did not make it (for this step, with this key); "+
			"Once will not adopt it", step, name))
}

func messageUnless(cond bool, msg string) string {
	if cond {
		return ""
	}
	return msg
}

// invalid ends a saga whose expressions do not compile, before any effect.
func (d *decider) invalid() Decision {
	for _, c := range d.Children {
		if !c.Foreign {
			// Cannot happen while the spec is immutable; if it does, the
			// effects made must not be forgotten.
			return d.review("", v1.ReasonInvalidSpec, fmt.Sprintf("the spec no longer compiles, and steps have run: %v", d.PlanErr))
		}
	}
	return d.end(v1.StateFailedFinal, v1.ReasonInvalidSpec, fmt.Sprintf("nothing ran: %v", d.PlanErr))
}

// forward runs the steps in order.
func (d *decider) forward() Decision {
	if d.st.StartedTime == nil && !d.Spec.Cancel {
		// A cancelled saga that has not started validates nothing.
		if dec, ok := d.validateAll(); !ok {
			return dec
		}
	}
	done := int32(0)
	for i, step := range d.Spec.Steps {
		ss := &d.st.Steps[i]
		name := OperationName(d.Name, step.Name, false, ss.Round)
		c, exists := d.child(name, i, false, ss.Round)
		if exists && (c.Foreign || ss.Operation != name) {
			return d.orphan(step.Name, name)
		}
		if exists {
			switch c.State {
			case v1.StateCommitted:
				done++
				continue
			case v1.StateFailedFinal:
				if step.RetryUntilDone {
					return d.retryUntilDone(i, fmt.Sprintf("step %s failed for good: %s", step.Name, c.Message))
				}
				return d.startCompensation(i, fmt.Sprintf("step %s failed for good: %s", step.Name, c.Message))
			case v1.StateNeedsReview:
				d.st.StepsDone = done
				return d.review(step.Name, v1.ReasonNeedsReview, fmt.Sprintf(
					"step %s: operation %s needs review; resolve it with that operation's spec.resolution", step.Name, name))
			default:
				d.st.StepsDone = done
				return d.inFlight(i, name, c)
			}
		}
		if ss.State == v1.StateCommitted && ss.Operation == name {
			// Its operation is gone (a person deleted it), and this saga
			// saw it commit: the checkpoint is its outcome. Made again,
			// the operation would take its record's outcome, or, once the
			// record expired, make the effect a second time.
			done++
			continue
		}
		d.st.StepsDone = done
		if ss.State == v1.StateFailedFinal && step.RetryUntilDone {
			// It could not start (it did not validate, or its parameters
			// cannot be computed): a person decides, as after a failure.
			return d.retryUntilDone(i, fmt.Sprintf("step %s could not start: %s", step.Name, ss.Message))
		}
		return d.start(i)
	}
	d.st.StepsDone = done
	d.st.CurrentStep = ""
	return d.end(v1.StateCommitted, v1.ReasonCommitted, fmt.Sprintf("all %d steps committed", len(d.Spec.Steps)))
}

// validateAll validates, before the first step, every step whose
// parameters are known before any step runs. ok is false while the saga
// must not start.
func (d *decider) validateAll() (Decision, bool) {
	for i := range d.Spec.Steps {
		ss := &d.st.Steps[i]
		if ss.Validation != nil {
			continue
		}
		if len(d.Plan.Refs(i, false)) > 0 {
			ss.Validation = &v1.StepValidation{Outcome: v1.ValidationDeferred, Time: metav1.NewTime(d.Now),
				Message: "the parameters use earlier steps: validated when the step starts"}
			continue
		}
		if d.Spec.Suspend {
			return d.held(v1.StatePlanned, ss.Name, "the validation of step "+ss.Name), false
		}
		dec := d.run(v1.StatePlanned, ss.Name, ReasonValidating, fmt.Sprintf("validating step %s", ss.Name))
		dec.Action = Action{Kind: ActionValidate, Step: i}
		return dec, false
	}
	for i := range d.Spec.Steps {
		if val := d.st.Steps[i].Validation; val.Outcome == v1.ValidationFailed {
			d.st.CurrentStep = "" // ended, as Committed and Compensated
			return d.end(v1.StateFailedFinal, ReasonValidationFailed,
				fmt.Sprintf("step %s did not validate, nothing ran: %s", d.Spec.Steps[i].Name, val.Message)), false
		}
	}
	return Decision{}, true
}

// start moves on to step i, whose operation does not exist yet: it stops
// at a cancel, waits for an approval or a resume, validates a deferred
// step, or creates the operation.
func (d *decider) start(i int) Decision {
	step, ss := d.Spec.Steps[i], &d.st.Steps[i]
	name := OperationName(d.Name, step.Name, false, ss.Round)
	if d.stopped(i) && d.checkpoint(i).Operation != name {
		return d.cancelled(i)
	}
	// A written checkpoint that names the operation may have made it: the
	// cache may not show it yet. It is created all the same, cancelled
	// (Reconcile), and a made one is found.
	state := v1.StateStarted
	if d.st.StartedTime == nil {
		state = v1.StatePlanned
	}
	if step.RequiresApproval && ss.Approval == nil && d.approval(step.Name) == nil {
		d.st.State, d.st.CurrentStep = state, step.Name
		setConditions(&d.st, ReasonWaitingForApproval, fmt.Sprintf(
			"step %s waits for approval: add {step: %s, by: <you>} to spec.approvals", step.Name, step.Name), true, d.Now)
		return Decision{Status: d.st}
	}
	if d.Spec.Suspend && !d.stopped(i) {
		return d.held(state, step.Name, fmt.Sprintf("step %s (%d of %d)", step.Name, i+1, len(d.Spec.Steps)))
	}
	if step.RequiresApproval && ss.Approval == nil {
		a := d.approval(step.Name)
		ss.Approval = &v1.AppliedApproval{By: a.By, User: a.User, Reason: a.Reason, Time: metav1.NewTime(d.Now)}
	}
	if val := ss.Validation; val != nil {
		switch val.Outcome {
		case v1.ValidationDeferred:
			dec := d.run(state, step.Name, ReasonValidating, fmt.Sprintf("validating step %s", step.Name))
			dec.Action = Action{Kind: ActionValidate, Step: i}
			return dec
		case v1.ValidationFailed:
			ss.State = v1.StateFailedFinal
			ss.Message = val.Message
			if step.RetryUntilDone {
				return d.retryUntilDone(i, fmt.Sprintf("step %s did not validate: %s", step.Name, val.Message))
			}
			return d.startCompensation(i, fmt.Sprintf("step %s did not validate: %s", step.Name, val.Message))
		}
	}
	if d.st.StartedTime == nil {
		t := metav1.NewTime(d.Now)
		d.st.StartedTime = &t
	}
	key := OperationKey(d.st.IdempotencyKey, step.Name, false, ss.Round)
	if why, bad := d.Uncreatable[name]; bad {
		ss.State, ss.Message = v1.StateFailedFinal, "it cannot start: "+why
		if step.RetryUntilDone {
			return d.retryUntilDone(i, fmt.Sprintf("step %s cannot start: %s", step.Name, why))
		}
		return d.startCompensation(i, ss.Message)
	}
	ss.Operation, ss.IdempotencyKey, ss.State = name, key, v1.StatePlanned
	dec := d.run(v1.StateStarted, step.Name, ReasonRunning,
		fmt.Sprintf("step %s (%d of %d) is starting", step.Name, i+1, len(d.Spec.Steps))+d.unstoppable(i))
	dec.Action = d.create(d.checkpoint(i).Operation == name,
		Action{Step: i, Round: ss.Round, Name: name, Key: key, Cancel: d.stopped(i)})
	return dec
}

// create asks to create an operation once a written checkpoint names it,
// and to write the checkpoint that names it before.
func (d *decider) create(written bool, a Action) Action {
	if !written {
		return Action{Kind: ActionCheckpoint}
	}
	a.Kind = ActionCreate
	return a
}

func (d *decider) approval(step string) *v1.SagaApproval {
	for i := range d.Spec.Approvals {
		if d.Spec.Approvals[i].Step == step {
			return &d.Spec.Approvals[i]
		}
	}
	return nil
}

// resolution is a person's decision on step, if the checkpoint the
// decision read waits for one on that step: a resolution decides what the
// person reviewed, never a failure that came later.
func (d *decider) resolution(step string) *v1.SagaResolution {
	if read := d.read(); read.State != v1.StateNeedsReview || read.CurrentStep != step {
		return nil
	}
	r := d.entry(step)
	if ss := d.stepStatus(step); r == nil || ss != nil && SameResolution(r, ss.Disregarded) {
		return nil
	}
	return r
}

// entry is step's entry of spec.resolutions, applicable or not.
func (d *decider) entry(step string) *v1.SagaResolution {
	for i := range d.Spec.Resolutions {
		if d.Spec.Resolutions[i].Step == step {
			return &d.Spec.Resolutions[i]
		}
	}
	return nil
}

// retryUntilDone handles a retryUntilDone step that failed for good, why.
// It cannot be compensated past, so a person decides. A Retry runs it
// again. A cancel that stops it compensates past it instead.
func (d *decider) retryUntilDone(i int, why string) Decision {
	step, ss := d.Spec.Steps[i], &d.st.Steps[i]
	if d.stopped(i) {
		return d.startCompensation(i, why)
	}
	if r := d.resolution(step.Name); r != nil && r.Action == v1.SagaRetry && !SameResolution(r, ss.Resolution) {
		applied := *r
		ss.Resolution = &applied
		ss.Round++
		ss.State, ss.Message, ss.ExternalObjectID, ss.ResultDigest = "", "", "", ""
		if ss.Validation != nil && ss.Validation.Outcome == v1.ValidationFailed {
			ss.Validation = &v1.StepValidation{Outcome: v1.ValidationDeferred, Time: metav1.NewTime(d.Now),
				Message: "validated again after a person's Retry"}
		}
		return d.start(i)
	}
	return d.review(step.Name, ReasonStepFailed, fmt.Sprintf(
		"step %s must not fail, but failed for good (%s); finish it by hand, or set spec.resolutions {step: %s, action: Retry}",
		step.Name, ss.Message, step.Name))
}

// SameResolution reports whether b is the decision a: the same step,
// action, person and reason. The user is left out: admission writes it,
// and a GitOps controller re-applying the entry changes it.
func SameResolution(a, b *v1.SagaResolution) bool {
	return b != nil && a.Step == b.Step && a.Action == b.Action && a.By == b.By && a.Reason == b.Reason
}

// startCompensation is the decision that step i failed for good and the
// compensations begin.
func (d *decider) startCompensation(i int, why string) Decision {
	if d.unread(i) {
		// Read first, then decide the failure again, whole.
		return Decision{Status: d.st, Action: Action{Kind: ActionRecall}}
	}
	d.st.FailedStep = d.Spec.Steps[i].Name
	d.st.CompensationsTotal = 0
	for j := range i {
		if d.st.Steps[j].State == v1.StateCommitted {
			d.st.CompensationsTotal++
		}
	}
	d.st.Steps[i].Message = why
	return d.compensate()
}

// compensate undoes the committed steps before the failed one, last first,
// one at a time; the saga is Compensated only when every one is.
func (d *decider) compensate() Decision {
	failed := d.failedIndex()
	if dec, stop := d.unstartedEffects(failed); stop {
		// Last first: an effect under a later step's key comes before
		// the failed step's.
		return dec
	}
	if dec, stop := d.undecidedFailure(failed); stop {
		// Last first: the failed step's effect, if any, is undone before
		// the steps before it.
		return dec
	}
	done := int32(0)
	for j := failed - 1; j >= 0; j-- {
		step, ss := d.Spec.Steps[j], &d.st.Steps[j]
		if ss.State != v1.StateCommitted && ss.State != v1.StateCompensating && ss.State != v1.StateCompensated {
			continue
		}
		if ss.State == v1.StateCompensated {
			done++
			continue
		}
		d.st.CompensationsDone = done
		if ss.Compensation == nil {
			ss.Compensation = &v1.CompensationStatus{Round: 1}
		}
		cs := ss.Compensation
		if reason, msg, blocked := d.cannotCompensate(j); blocked {
			if d.markedCompensated(j) {
				done++
				continue
			}
			ss.State, cs.State, cs.Message = v1.StateCompensating, v1.StateNeedsReview, msg
			return d.review(step.Name, reason, msg)
		}
		ss.State = v1.StateCompensating
		name := OperationName(d.Name, step.Name, true, cs.Round)
		c, exists := d.child(name, j, true, cs.Round)
		switch {
		case exists && (c.Foreign || cs.Operation != name):
			return d.orphan(step.Name, name)
		case !exists:
			// A person who undid the effect by other means, and said so,
			// must not see it undone twice.
			if d.markedCompensated(j) {
				done++
				continue
			}
			if why, bad := d.Uncreatable[name]; bad {
				cs.Message = why
				return d.review(step.Name, ReasonCompensationFailed, fmt.Sprintf(
					"the compensation of step %s cannot start: %s; undo it by hand and set spec.resolutions "+
						"{step: %s, action: MarkCompensated}", step.Name, why, step.Name))
			}
			if d.Spec.Suspend {
				return d.held(v1.StateCompensating, step.Name, "the compensation of step "+step.Name)
			}
			cs.Operation, cs.State = name, v1.StatePlanned
			cs.IdempotencyKey = OperationKey(d.st.IdempotencyKey, step.Name, true, cs.Round)
			dec := d.run(v1.StateCompensating, step.Name, ReasonCompensating, d.compensatingMessage(j))
			was := d.checkpoint(j).Compensation
			dec.Action = d.create(was != nil && was.Operation == name,
				Action{Step: j, Undo: true, Round: cs.Round, Name: name, Key: cs.IdempotencyKey})
			return dec
		}
		cs.State, cs.ExternalObjectID = c.State, c.ExternalObjectID
		cs.Message = messageUnless(c.State == v1.StateCommitted, c.Message)
		switch c.State {
		case v1.StateCommitted:
			cs.State, ss.State = v1.StateCompensated, v1.StateCompensated
			done++
			continue
		case v1.StateFailedFinal:
			// A resolution already applied, to this compensation or to
			// the step itself (a retryUntilDone step's Retry), is not a
			// decision on this failure.
			if d.markedCompensated(j) {
				done++
				continue
			}
			if r := d.resolution(step.Name); r != nil && !SameResolution(r, cs.Resolution) && !SameResolution(r, ss.Resolution) {
				applied := *r
				cs.Resolution = &applied
				cs.Round++
				j++ // the next round, at once
				continue
			}
			return d.review(step.Name, ReasonCompensationFailed, fmt.Sprintf(
				"the compensation of step %s failed for good (%s); undo it by hand and set spec.resolutions "+
					"{step: %s, action: MarkCompensated}, or {action: Retry} to run it again", step.Name, c.Message, step.Name))
		case v1.StateNeedsReview:
			return d.review(step.Name, ReasonCompensationFailed, fmt.Sprintf(
				"the compensation of step %s: operation %s needs review; resolve it with that operation's spec.resolution",
				step.Name, name))
		default:
			return d.run(v1.StateCompensating, step.Name, ReasonCompensating, d.compensatingMessage(j))
		}
	}
	d.st.CompensationsDone = done
	d.st.CurrentStep = ""
	failedReason, compensatedReason := ReasonStepFailed, ReasonCompensated
	if d.byCancel() {
		failedReason, compensatedReason = v1.ReasonCancelled, v1.ReasonCancelled
	}
	if d.st.CompensationsTotal == 0 {
		return d.end(v1.StateFailedFinal, failedReason, fmt.Sprintf(
			"%s; no step before it had taken effect, so there is nothing to compensate", d.st.Steps[failed].Message))
	}
	undone := "the step before it was compensated"
	if d.st.CompensationsTotal > 1 {
		undone = fmt.Sprintf("the %d steps before it were compensated, last first", d.st.CompensationsTotal)
	}
	return d.end(v1.StateCompensated, compensatedReason, fmt.Sprintf("%s; %s", d.cause(), undone))
}

// undecidedFailure stops a saga whose failed step a person failed from
// compensating as if that step had had no effect (I8, I14): the person
// decided to stop it, and did not establish that its effect does not
// stand. The saga waits in review, before any compensation (last first),
// until a person says the step's effect, if any, is undone
// (MarkCompensated).
func (d *decider) undecidedFailure(failed int) (Decision, bool) {
	step, ss := d.Spec.Steps[failed], &d.st.Steps[failed]
	c, ok := d.child(OperationName(d.Name, step.Name, false, ss.Round), failed, false, ss.Round)
	// The checkpoint keeps the failure's reason: a person who deletes the
	// step's operation after failing it does not turn the decision into
	// a proof.
	decided := (ok && !c.Foreign && c.Decided) || protocol.Unproven(ss.Reason)
	if !decided || (ss.Resolution != nil && ss.Resolution.Action == v1.SagaMarkCompensated) {
		// Not a decision, or a person already said its effect is undone.
		return Decision{}, false
	}
	if r := d.resolution(step.Name); r != nil && r.Action == v1.SagaMarkCompensated && !SameResolution(r, ss.Resolution) {
		applied := *r
		ss.Resolution = &applied
		return Decision{}, false
	}
	return d.review(step.Name, ReasonStepFailed, fmt.Sprintf(
		"step %s ended without proof that it had no effect (a person's decision, or a failure the tool contradicted "+
			"later); if it took effect, "+
			"undo it by hand, then set spec.resolutions {step: %s, action: MarkCompensated} and the steps before it "+
			"are compensated, last first", step.Name, step.Name)), true
}

// unstartedEffects stops a compensation at a step, the failed one or one
// after it, that has no operation of this saga while its key holds an
// effect. Such a step never started, failed before its operation was made,
// or had its operation deleted. The effect was made by an earlier saga of
// the same key (a saga deleted and applied again), or a person's decision
// left it open. The scope's record keeps it. This saga undoes only what it
// made. Ending Compensated would leave that effect standing (I8). A person
// decides, last first, and says so with MarkCompensated.
func (d *decider) unstartedEffects(failed int) (Decision, bool) {
	for j := len(d.Spec.Steps) - 1; j >= failed; j-- {
		step, ss := d.Spec.Steps[j], &d.st.Steps[j]
		if !d.unrun(j) {
			continue
		}
		name := OperationName(d.Name, step.Name, false, ss.Round)
		if _, exists := d.Children[name]; exists {
			// An operation this saga did not make holds the name: its
			// outcome reaches the record when it goes.
			return d.orphan(step.Name, name), true
		}
		if d.Remembered == nil {
			return Decision{Status: d.st, Action: Action{Kind: ActionRecall}}, true
		}
		held := d.Remembered[step.Name]
		if held == "" {
			continue
		}
		if ss.Compensation == nil {
			ss.Compensation = &v1.CompensationStatus{Round: 1}
		}
		if d.markedCompensated(j) {
			continue
		}
		msg := fmt.Sprintf("step %s has no operation of this saga, but its key holds an effect: %s; "+
			"this saga undoes only what it made; "+
			"undo it by hand if it must be, then set spec.resolutions {step: %s, action: MarkCompensated}",
			step.Name, held, step.Name)
		ss.Compensation.State, ss.Compensation.Message = v1.StateNeedsReview, msg
		return d.review(step.Name, ReasonCannotCompensate, msg), true
	}
	return Decision{}, false
}

// unread reports whether a compensation after step failed needs the
// scope records of steps this saga never started, from the failed one on,
// and has not read them yet.
func (d *decider) unread(failed int) bool {
	if d.Remembered != nil {
		return false
	}
	for j := failed; j < len(d.Spec.Steps); j++ {
		if d.unrun(j) {
			return true
		}
	}
	return false
}

// unrun reports whether step j has no operation of this saga and is not
// compensated yet: its key may hold an effect only its record knows of.
func (d *decider) unrun(j int) bool {
	return d.st.Steps[j].State != v1.StateCompensated && !d.ranHere(j)
}

// ranHere reports whether step j's operation, as its checkpoint names it,
// exists and is this saga's.
func (d *decider) ranHere(j int) bool {
	ss := d.st.Steps[j]
	if ss.Operation == "" {
		return false
	}
	c, ok := d.child(ss.Operation, j, false, ss.Round)
	return ok && !c.Foreign
}

// RanHere reports whether step i of the view's checkpoint has its operation
// among the children, made by this saga: the controller reads the scope
// records of the others (ActionRecall).
func RanHere(v View, i int) bool {
	d := &decider{View: v, st: v.Status}
	d.st.IdempotencyKey = Key(v.Name, v.Spec)
	return i < len(v.Status.Steps) && d.ranHere(i)
}

func (d *decider) failedIndex() int {
	for i, s := range d.Spec.Steps {
		if s.Name == d.st.FailedStep {
			return i
		}
	}
	return len(d.Spec.Steps)
}

func (d *decider) compensatingMessage(j int) string {
	return fmt.Sprintf("%s; compensating step %s (%d of %d done)",
		d.cause(), d.Spec.Steps[j].Name, d.st.CompensationsDone, d.st.CompensationsTotal)
}

// cannotCompensate stops at a committed step the saga must not undo: one
// without a compensation, or one whose effect another operation made.
func (d *decider) cannotCompensate(j int) (reason, msg string, blocked bool) {
	step, ss := d.Spec.Steps[j], d.st.Steps[j]
	if step.Compensation == nil {
		return ReasonCannotCompensate, fmt.Sprintf(
			"step %s is irreversible and committed; it cannot be compensated", step.Name), true
	}
	// A step's operation that reports an operation of its own name made the
	// effect itself, in an earlier object that went (a TTL, a person) and
	// left its outcome in the scope's record: the effect is this step's.
	if c := d.Children[ss.Operation]; c.DuplicateOf != "" && c.DuplicateOf != ss.Operation {
		return ReasonCannotCompensate, fmt.Sprintf(
			"step %s's effect was made by operation %s, not by this saga, which therefore does not undo it; "+
				"decide with spec.resolutions {step: %s, action: MarkCompensated}", step.Name, c.DuplicateOf, step.Name), true
	}
	return "", "", false
}

// markedCompensated applies a person's MarkCompensated of step j that was
// not applied yet, and reports whether the step is now compensated. It is
// asked only where no compensation of the step is in flight.
func (d *decider) markedCompensated(j int) bool {
	ss := &d.st.Steps[j]
	r := d.resolution(ss.Name)
	if r == nil || r.Action != v1.SagaMarkCompensated || SameResolution(r, ss.Compensation.Resolution) {
		return false
	}
	applied := *r
	cs := ss.Compensation
	cs.Resolution, cs.Message = &applied, ""
	cs.State, ss.State = v1.StateCompensated, v1.StateCompensated
	return true
}

// run is a checkpoint while work goes on.
func (d *decider) run(state v1.OperationState, step, reason, msg string) Decision {
	d.st.State, d.st.CurrentStep = state, step
	setConditions(&d.st, reason, msg, false, d.Now)
	return Decision{Status: d.st}
}

// review stops for a person, at step (none: the whole saga). When the
// review begins, the step's entry of spec.resolutions, if any, is
// disregarded: written before, it cannot decide what is reviewed now.
func (d *decider) review(step, reason, msg string) Decision {
	if read := d.read(); step != "" && (read.State != v1.StateNeedsReview || read.CurrentStep != step) {
		if ss := d.stepStatus(step); ss != nil {
			ss.Disregarded = d.entry(step).DeepCopy()
		}
	}
	d.st.State, d.st.CurrentStep = v1.StateNeedsReview, step
	setConditions(&d.st, reason, msg, false, d.Now)
	return Decision{Status: d.st}
}

// end is a terminal checkpoint.
func (d *decider) end(state v1.OperationState, reason, msg string) Decision {
	d.st.State = state
	// The outcome and its announcements are one write: the transactional
	// outbox, named by the saga's scope and its steps' effects, so that
	// every saga of one key that reaches this outcome announces it under
	// one id.
	id := outbox.Identity{Scope: ScopeName(d.Namespace, Key(d.Name, d.Spec)), Effect: Effect(d.st)}
	d.st.Outbox = outbox.Announce(d.st.Outbox, outbox.KindSaga, id, state, d.Spec.Subscribers)
	if d.st.CompletionTime == nil {
		t := metav1.NewTime(d.Now)
		d.st.CompletionTime = &t
	}
	setConditions(&d.st, reason, msg, false, d.Now)
	return Decision{Status: d.st}
}
