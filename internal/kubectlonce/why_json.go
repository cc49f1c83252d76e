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

package kubectlonce

import (
	"cmp"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/saga"
)

// Story is what why -o json|yaml prints: the story why tells, as one
// document, with Operation or Saga set by the kind.
type Story struct {
	// Kind is SideEffectOperation or Saga.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// IdempotencyKey is the object's key (its name when the spec has
	// none).
	IdempotencyKey string `json:"idempotencyKey"`
	// State is where it stands (Planned before the manager's first
	// pass), Since when it came there, Why the Ready condition's
	// message.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Why   string    `json:"why,omitempty"`

	Operation *OperationStory `json:"operation,omitempty"`
	Saga      *SagaStory      `json:"saga,omitempty"`

	// Entries are the transitions and, for an operation, what the tool
	// answered, oldest first, in why's order.
	Entries []StoryEntry `json:"story"`
}

// OperationStory is what a Story tells of an operation.
type OperationStory struct {
	// ToolKind and Tool name the tool; Operation the tool's operation.
	ToolKind  string `json:"toolKind"`
	Tool      string `json:"tool"`
	Operation string `json:"operation"`
	// ToolIdempotencyKey is the key sent to the tool.
	ToolIdempotencyKey string `json:"toolIdempotencyKey"`
	// ParameterFields is how many fields the parameters have, never their
	// values; RequestHash binds them.
	ParameterFields int    `json:"parameterFields"`
	RequestHash     string `json:"requestHash,omitempty"`
	// Saga and Step name the saga and step it belongs to, if any;
	// Compensation says it is the step's compensation.
	Saga             string `json:"saga,omitempty"`
	Step             string `json:"step,omitempty"`
	Compensation     bool   `json:"compensation,omitempty"`
	Attempts         int32  `json:"attempts"`
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	DuplicateOf      string `json:"duplicateOf,omitempty"`
	ErrorClass       string `json:"errorClass,omitempty"`
	ErrorMessage     string `json:"errorMessage,omitempty"`
	// Claim is the claim held now, if any.
	Claim *v1.Claim `json:"claim,omitempty"`
	// Resolution is the resolution applied, if any. Written is the one in
	// spec.resolution while it waits to be applied. Disregarded is the one
	// in spec.resolution when it was decided or written before this review
	// began (status.earlierResolutions). That one does not decide it.
	Resolution  *Decision `json:"resolution,omitempty"`
	Written     *Decision `json:"written,omitempty"`
	Disregarded *Decision `json:"disregarded,omitempty"`
}

// SagaStory is what a Story tells of a saga.
type SagaStory struct {
	CurrentStep        string      `json:"currentStep,omitempty"`
	StepsDone          int32       `json:"stepsDone"`
	FailedStep         string      `json:"failedStep,omitempty"`
	CompensationsDone  int32       `json:"compensationsDone,omitempty"`
	CompensationsTotal int32       `json:"compensationsTotal,omitempty"`
	Steps              []StepStory `json:"steps"`
}

// StepStory is one step of a saga.
type StepStory struct {
	Name string `json:"name"`
	// State is the step's operation's state; empty before it starts.
	State            string `json:"state,omitempty"`
	Operation        string `json:"operation,omitempty"`
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	Message          string `json:"message,omitempty"`
	// WaitsForApproval says the saga waits for this step's approval.
	WaitsForApproval bool `json:"waitsForApproval,omitempty"`
	// Approval is the approval applied or, Applied false, the one in
	// spec.approvals not applied yet.
	Approval     *Decision          `json:"approval,omitempty"`
	Compensation *CompensationStory `json:"compensation,omitempty"`
	// Resolution is the resolution of the step applied, if any.
	Resolution *Decision `json:"resolution,omitempty"`
}

// CompensationStory is a step's compensation.
type CompensationStory struct {
	Operation        string    `json:"operation"`
	State            string    `json:"state,omitempty"`
	ExternalObjectID string    `json:"externalObjectID,omitempty"`
	Message          string    `json:"message,omitempty"`
	Resolution       *Decision `json:"resolution,omitempty"`
}

// Decision is a person's decision: a resolution or an approval, who wrote
// it and, once the manager applied it, when.
type Decision struct {
	// Action is the resolution's action; empty for an approval.
	Action           string `json:"action,omitempty"`
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	// By is who the writer named; User whom the API server
	// authenticated, as Once's admission policy recorded it.
	By     string `json:"by"`
	User   string `json:"user,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Applied says the manager applied it, at Time, out of FromState
	// (an operation's resolution).
	Applied   bool       `json:"applied"`
	Time      *time.Time `json:"time,omitempty"`
	FromState string     `json:"fromState,omitempty"`
}

// StoryEntry is one entry of a story: a transition, or an observation of
// what the tool answered.
type StoryEntry struct {
	Time time.Time `json:"time"`
	// Type is Transition, or the observation's kind: Call, Resend,
	// Lookup, StaleCall, ClaimExpired or Resolution.
	Type string `json:"type"`
	// Attempt is the operation's attempt; Step the saga's step.
	Attempt int32  `json:"attempt,omitempty"`
	Step    string `json:"step,omitempty"`
	// State and Reason are a transition's.
	State  string `json:"state,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Outcome, Request, HTTPStatus, ExternalObjectID and Holder are an
	// observation's: what the tool answered to which request, and which
	// manager asked.
	Outcome          string `json:"outcome,omitempty"`
	Request          string `json:"request,omitempty"`
	HTTPStatus       int32  `json:"httpStatus,omitempty"`
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	Holder           string `json:"holder,omitempty"`
	Message          string `json:"message,omitempty"`
}

// typeTransition is a StoryEntry's Type for a transition.
const typeTransition = "Transition"

func transitionStoryEntry(t v1.Transition) StoryEntry {
	return StoryEntry{Time: t.Time.UTC(), Type: typeTransition, Attempt: t.Attempt, Step: t.Step,
		State: string(t.State.OrPlanned()), Reason: t.Reason, Message: t.Message}
}

func observationStoryEntry(o v1.Observation) StoryEntry {
	return StoryEntry{Time: o.Time.UTC(), Type: string(o.Kind), Attempt: o.Attempt, Outcome: o.Outcome,
		Request: o.Request, HTTPStatus: o.HTTPStatus, ExternalObjectID: o.ExternalObjectID, Holder: o.Holder,
		Message: o.Message}
}

// operationDoc is the Story of an operation.
func operationDoc(op *v1.SideEffectOperation) Story {
	st := &op.Status
	d := &OperationStory{
		ToolKind: string(op.Spec.ToolRef.EffectiveKind()), Tool: op.Spec.ToolRef.Name, Operation: op.Spec.Operation,
		ToolIdempotencyKey: cmp.Or(st.ToolIdempotencyKey, protocol.OperationScope(op).ToolKey()),
		ParameterFields:    parameterFields(op.Spec.Parameters), RequestHash: st.RequestHash,
		Attempts: st.Attempts, ExternalObjectID: st.ExternalObjectID, DuplicateOf: st.DuplicateOf,
		ErrorClass: string(st.ErrorClass), ErrorMessage: st.ErrorMessage, Claim: st.Claim,
	}
	if s := sagaOwner(op); s != "" {
		d.Saga, d.Step = s, op.Labels[saga.LabelStep]
		d.Compensation = op.Labels[saga.LabelRole] == saga.RoleCompensation
	}
	if r := st.Resolution; r != nil {
		d.Resolution = resolutionDecision(r.Resolution)
		d.Resolution.Applied, d.Resolution.Time, d.Resolution.FromState = true, new(r.Time.UTC()), string(r.FromState)
	}
	state := st.State.OrPlanned()
	if written, disregarded := specResolution(op); written != nil {
		d.Written = resolutionDecision(*written)
	} else if disregarded != nil {
		d.Disregarded = resolutionDecision(*disregarded)
	}
	entries := []StoryEntry{}
	for _, e := range operationEvents(st) {
		if e.t != nil {
			entries = append(entries, transitionStoryEntry(*e.t))
		} else {
			entries = append(entries, observationStoryEntry(*e.o))
		}
	}
	return Story{Kind: operationKind.Name, Namespace: op.Namespace, Name: op.Name,
		IdempotencyKey: cmp.Or(st.IdempotencyKey, op.Spec.IdempotencyKey, op.Name), State: string(state),
		Since: since(op.CreationTimestamp, st.Conditions, st.History).UTC(), Why: readyMessage(st.Conditions),
		Operation: d, Entries: entries}
}

func resolutionDecision(r v1.Resolution) *Decision {
	return &Decision{Action: string(r.Action), ExternalObjectID: r.ExternalObjectID, By: r.By, User: r.User,
		Reason: r.Reason}
}

func sagaResolutionDecision(r v1.SagaResolution) *Decision {
	return &Decision{Action: string(r.Action), By: r.By, User: r.User, Reason: r.Reason, Applied: true}
}

// sagaDoc is the Story of a saga.
func sagaDoc(s *v1.Saga) Story {
	st := &s.Status
	d := &SagaStory{CurrentStep: st.CurrentStep, StepsDone: st.StepsDone, FailedStep: st.FailedStep,
		CompensationsDone: st.CompensationsDone, CompensationsTotal: st.CompensationsTotal, Steps: []StepStory{}}
	status := map[string]*v1.SagaStepStatus{}
	for i := range st.Steps {
		status[st.Steps[i].Name] = &st.Steps[i]
	}
	approvals := map[string]v1.SagaApproval{}
	for _, a := range s.Spec.Approvals {
		approvals[a.Step] = a
	}
	for _, step := range s.Spec.Steps {
		ss := status[step.Name]
		out := StepStory{Name: step.Name}
		if ss != nil {
			out.Operation, out.ExternalObjectID, out.Message = ss.Operation, ss.ExternalObjectID, ss.Message
			if ss.Operation != "" {
				out.State = string(ss.State.OrPlanned())
			}
		}
		out.WaitsForApproval = waitsForApproval(s, step, ss)
		switch a, written := approvals[step.Name]; {
		case ss != nil && ss.Approval != nil:
			out.Approval = &Decision{By: ss.Approval.By, User: ss.Approval.User, Reason: ss.Approval.Reason,
				Applied: true, Time: new(ss.Approval.Time.UTC())}
		case written:
			out.Approval = &Decision{By: a.By, User: a.User, Reason: a.Reason}
		}
		if ss != nil && ss.Compensation != nil {
			c := ss.Compensation
			out.Compensation = &CompensationStory{Operation: c.Operation, State: string(c.State),
				ExternalObjectID: c.ExternalObjectID, Message: c.Message}
			if c.Resolution != nil {
				out.Compensation.Resolution = sagaResolutionDecision(*c.Resolution)
			}
		}
		if ss != nil && ss.Resolution != nil {
			out.Resolution = sagaResolutionDecision(*ss.Resolution)
		}
		d.Steps = append(d.Steps, out)
	}
	entries := make([]StoryEntry, 0, len(st.History))
	for _, t := range st.History {
		entries = append(entries, transitionStoryEntry(t))
	}
	return Story{Kind: sagaKind.Name, Namespace: s.Namespace, Name: s.Name,
		IdempotencyKey: cmp.Or(st.IdempotencyKey, s.Spec.IdempotencyKey, s.Name), State: string(st.State.OrPlanned()),
		Since: since(s.CreationTimestamp, st.Conditions, st.History).UTC(), Why: readyMessage(st.Conditions),
		Saga: d, Entries: entries}
}

// waitsForApproval reports whether a saga waits for the approval of step,
// whose status is ss (nil before it starts).
func waitsForApproval(s *v1.Saga, step v1.SagaStep, ss *v1.SagaStepStatus) bool {
	return step.RequiresApproval && (ss == nil || ss.Approval == nil && ss.Operation == "") &&
		s.Status.CurrentStep == step.Name
}

// parameterFields is how many fields an operation's parameters have.
func parameterFields(p *runtime.RawExtension) int {
	if p == nil || len(p.Raw) == 0 {
		return 0
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(p.Raw, &m) != nil {
		return 0
	}
	return len(m)
}
