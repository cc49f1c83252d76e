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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// MaxInputsBytes is the documented limit on a Saga's spec.inputs, measured
// as canonical (RFC 8785) JSON. Expressions are estimated against it before
// any runs.
const MaxInputsBytes = 64 * 1024

// SagaSpec is a business operation made of ordered steps, each one side
// effect, with the compensations that undo them if a later step fails for
// good.
//
// Everything but approvals, resolutions, ttlSecondsAfterFinished, suspend
// and cancel is immutable: the saga's key is bound to its steps and inputs.
// Suspend and cancel say whether the saga may go on, not what it does: a
// comparison of two sagas' requests leaves them out. The parametersFrom
// expressions, the compensations' included, take at most 32768 characters
// together (MaxExpressionChars).
// +kubebuilder:validation:XValidation:rule="has(self.subscribers) == has(oldSelf.subscribers)",message="spec.subscribers are immutable: the outcome is announced to the subscribers named at creation"
// +kubebuilder:validation:XValidation:rule="has(self.idempotencyKey) == has(oldSelf.idempotencyKey) && has(self.inputs) == has(oldSelf.inputs)",message="spec is immutable: create a new Saga with a new idempotency key (only spec.approvals, spec.resolutions, spec.ttlSecondsAfterFinished, spec.suspend and spec.cancel may change)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",message="spec.cancel cannot be taken back: a cancelled saga may have started compensating; create a new Saga with a new idempotency key"
// +kubebuilder:validation:XValidation:rule="self.steps.map(s, has(s.retryUntilDone) && s.retryUntilDone).lastIndexOf(false) <= self.steps.map(s, has(s.irreversible) && s.irreversible).indexOf(true) || !self.steps.exists(s, has(s.irreversible) && s.irreversible)",message="every step after the first irreversible step must be retryUntilDone: once an effect that cannot be undone has happened, the steps after it cannot be compensated, only finished (put validation, approvals and compensable steps before it)"
// +kubebuilder:validation:XValidation:rule="!has(self.approvals) || self.approvals.all(a, self.steps.exists(s, s.name == a.step && has(s.requiresApproval) && s.requiresApproval))",message="an approval must name a step that requires approval"
// +kubebuilder:validation:XValidation:rule="!has(self.resolutions) || self.resolutions.all(r, self.steps.exists(s, s.name == r.step && (has(s.compensation) || (r.action == 'MarkCompensated' && has(s.irreversible) && s.irreversible) || (r.action == 'Retry' && has(s.retryUntilDone) && s.retryUntilDone))))",message="a resolution must name a step with a compensation, an irreversible step (MarkCompensated only, after it ended on a person's decision), or (Retry only) a retryUntilDone step"
// +kubebuilder:validation:XValidation:rule="self.steps.map(s, (has(s.parametersFrom) ? s.parametersFrom.map(p, size(p.expression)).sum() : 0) + (has(s.compensation) && has(s.compensation.parametersFrom) ? s.compensation.parametersFrom.map(p, size(p.expression)).sum() : 0)).sum() <= 32768",message="the parametersFrom expressions of spec.steps, compensations' included, may take 32768 characters together: shorten them, or split the saga in two"
type SagaSpec struct {
	// idempotencyKey identifies the business operation the saga performs.
	// Defaults to the object's name. Each step's operation gets the key
	// "<key>/<step>", each compensation "<key>/<step>/compensate", so two
	// sagas with the same key make each step's effect at most once. It
	// holds no "/", so that no saga's derived keys can be another's.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=200
	// +kubebuilder:validation:Pattern=`^[^/]+$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.idempotencyKey is immutable: create a new Saga for a new key"
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// inputs are the saga's own data, any JSON object, which step
	// parameters can use as `inputs`. They are limited to 64 KiB of
	// canonical JSON: a saga with larger inputs fails before any step, with
	// reason InvalidSpec.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.inputs are immutable"
	Inputs *runtime.RawExtension `json:"inputs,omitempty"`

	// steps run in order, each once. A step failing for good starts the
	// compensations of the committed steps, in reverse order.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(s, s.name) == oldSelf.map(s, s.name)",message="spec.steps are immutable: create a new Saga with a new idempotency key"
	Steps []SagaStep `json:"steps"`

	// approvals are people's approvals of steps that require one. A step
	// that requires approval does not start until it is approved here.
	// Approvals can be added until the saga ends.
	// +optional
	// +listType=map
	// +listMapKey=step
	// +kubebuilder:validation:MaxItems=16
	Approvals []SagaApproval `json:"approvals,omitempty"`

	// resolutions are people's decisions on what the saga cannot decide: a
	// compensation that failed for good (Retry it, or MarkCompensated), or
	// a retryUntilDone step that failed for good (Retry it). They can be
	// written only while the saga is in NeedsReview, and each is applied
	// once: to apply Retry again, change the entry (its reason, say). An
	// operation of the saga in NeedsReview is resolved on that operation
	// itself (its spec.resolution), as every operation is.
	// +optional
	// +listType=map
	// +listMapKey=step
	// +kubebuilder:validation:MaxItems=16
	Resolutions []SagaResolution `json:"resolutions,omitempty"`

	// subscribers are told the saga's outcome when it ends (Committed,
	// Compensated or FailedFinal; not NeedsReview, which waits for a
	// person), as a CloudEvent delivered at least once with a stable id.
	// At most four; immutable.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.subscribers are immutable: the outcome is announced to the subscribers named at creation"
	Subscribers []Subscriber `json:"subscribers,omitempty"`

	// ttlSecondsAfterFinished is how long the saga is kept after it ends
	// (Committed, Compensated or FailedFinal; never while it runs or waits
	// in NeedsReview), counted from status.completionTime; then Once
	// deletes it, and the garbage collector its steps' operations. Their
	// IdempotencyRecords stay until each expires (the step's completion
	// plus its retention), so the same saga applied again within retention
	// makes no step's effect a second time. Unset, the saga is kept until
	// someone deletes it. The MCP gateway and the Go client set 3600 unless
	// told otherwise. It may be changed at any time.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="spec.ttlSecondsAfterFinished must be 0 or more: the seconds the saga is kept after it ends"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// suspend holds the saga where it stands: no step's validation, no new
	// operation for a step or a compensation. An operation already made
	// goes on; suspend it on its own to hold its calls. Set it back to
	// false, or remove it, to resume where the saga stopped.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// cancel stops the saga before its next step. A step in flight
	// finishes, and its operation's outcome stands; one that has not
	// claimed an attempt yet is cancelled too. Then the committed steps
	// are compensated, last first, and the saga ends Compensated, or
	// FailedFinal with reason Cancelled when none took effect. After an
	// irreversible step committed, the steps after it can only be
	// finished: the cancel does not stop them. Once set, it cannot be
	// taken back.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
}

// SagaStep is one side effect of a saga. It is immutable: each field
// compares with its old value by what it means (a duration by its length),
// so that clients that write "5m" and clients that write "5m0s" agree.
// +kubebuilder:validation:XValidation:rule="has(self.compensation) != (has(self.irreversible) && self.irreversible)",message="a step needs exactly one of compensation and irreversible: true"
// +kubebuilder:validation:XValidation:rule="has(self.parameters) == has(oldSelf.parameters) && (has(self.parametersFrom) ? self.parametersFrom : []) == (has(oldSelf.parametersFrom) ? oldSelf.parametersFrom : []) && has(self.timeout) == has(oldSelf.timeout) && has(self.retryPolicy) == has(oldSelf.retryPolicy) && has(self.compensation) == has(oldSelf.compensation) && (has(self.irreversible) && self.irreversible) == (has(oldSelf.irreversible) && oldSelf.irreversible) && (has(self.retryUntilDone) && self.retryUntilDone) == (has(oldSelf.retryUntilDone) && oldSelf.retryUntilDone) && (has(self.requiresApproval) && self.requiresApproval) == (has(oldSelf.requiresApproval) && oldSelf.requiresApproval)",message="spec.steps are immutable: create a new Saga with a new idempotency key"
type SagaStep struct {
	// name of the step, unique in the saga, a DNS label; expressions refer
	// to it as `steps.<name>`, or `steps['<name>']` when it has a hyphen.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[a-z]([a-z0-9-]*[a-z0-9])?$`
	Name string `json:"name"`

	// toolRef names the Tool or ClusterTool that performs the step.
	// +required
	ToolRef StepToolReference `json:"toolRef"`

	// operation is the name of one of the tool's spec.operations.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.steps are immutable: create a new Saga with a new idempotency key"
	Operation string `json:"operation"`

	// parameters are the literal part of the request, any JSON object.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.steps are immutable: create a new Saga with a new idempotency key"
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// parametersFrom computes parameters from the saga's inputs and from
	// earlier steps: each is a top-level parameter and a CEL expression over
	// `inputs` and `steps.<name>.result` and `steps.<name>.externalObjectID`
	// of steps before this one. It overrides a literal parameter of the same
	// name. Values are computed once, when the step starts, and written in
	// the step's operation, so the request hash binds what was sent.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ParametersFrom []ParameterExpression `json:"parametersFrom,omitempty"`

	// timeout bounds one call; defaults to the tool's, and may only shorten
	// it. At most 1h.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="timeout must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1h')",message="timeout is at most 1h, and a call never waits longer than its tool's timeout"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="spec.steps are immutable: create a new Saga with a new idempotency key"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// retryPolicy of the step's operation; defaults to the operation's.
	// +optional
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`

	// compensation undoes the step's effect, as a business action of its
	// own (a refund, a closed ticket), if a later step fails for good.
	// +optional
	Compensation *Compensation `json:"compensation,omitempty"`

	// irreversible marks a step whose effect cannot be undone (an e-mail
	// sent, a secret disclosed). Only retryUntilDone steps may follow it.
	// +optional
	Irreversible bool `json:"irreversible,omitempty"`

	// retryUntilDone marks a step that must not fail for good: it is
	// retried up to the largest retry policy, and if it fails all the same
	// the saga goes to NeedsReview for a person to finish it, instead of
	// compensating. Steps after an irreversible step must be retryUntilDone.
	// +optional
	RetryUntilDone bool `json:"retryUntilDone,omitempty"`

	// requiresApproval holds the step until spec.approvals approves it.
	// +optional
	RequiresApproval bool `json:"requiresApproval,omitempty"`
}

// StepToolReference names the Tool or ClusterTool of a step or of its
// compensation, as ToolReference does, with no default written into the
// list of steps: the API server's default inside a list item made every
// re-apply of an unchanged manifest a change. An empty kind is Tool, read
// so by Once (EffectiveKind); a saga stored with the default filled in
// (kind: Tool, by an earlier release) is the same saga, and its steps make the same
// operations. It compares with its old value by what it means, so that the
// manifest applied again over such a saga is no change of its steps.
// +kubebuilder:validation:XValidation:rule="(has(self.kind) ? self.kind : 'Tool') == (has(oldSelf.kind) ? oldSelf.kind : 'Tool') && self.name == oldSelf.name",message="spec.steps are immutable: create a new Saga with a new idempotency key"
type StepToolReference struct {
	// kind is Tool (when empty) or ClusterTool.
	// +optional
	Kind ToolKind `json:"kind,omitempty"`

	// name of the Tool or ClusterTool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EffectiveKind is the kind the reference names: Tool when kind is empty.
func (r StepToolReference) EffectiveKind() ToolKind {
	return ToolReference(r).EffectiveKind()
}

// Tool is the reference as a ToolReference, its kind made explicit, as the
// step's operations name their tool: the same whether the saga was stored
// with kind Tool or with none.
func (r StepToolReference) Tool() ToolReference {
	ref := ToolReference(r)
	ref.Kind = ref.EffectiveKind()
	return ref
}

// ParameterExpression computes one parameter.
type ParameterExpression struct {
	// name of the top-level parameter.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`

	// expression is CEL over `inputs` and `steps`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Expression string `json:"expression"`
}

// Compensation is the operation that undoes a step's effect.
// +kubebuilder:validation:XValidation:rule="has(self.toolRef) == has(oldSelf.toolRef) && has(self.parameters) == has(oldSelf.parameters) && (has(self.parametersFrom) ? self.parametersFrom : []) == (has(oldSelf.parametersFrom) ? oldSelf.parametersFrom : []) && has(self.retryPolicy) == has(oldSelf.retryPolicy)",message="spec.steps are immutable: create a new Saga with a new idempotency key"
type Compensation struct {
	// toolRef names the tool of the compensation; defaults to the step's.
	// +optional
	ToolRef *StepToolReference `json:"toolRef,omitempty"`

	// operation is the name of one of the tool's spec.operations, for
	// example ticket.close.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.steps are immutable: create a new Saga with a new idempotency key"
	Operation string `json:"operation"`

	// parameters are the literal part of the request.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.steps are immutable: create a new Saga with a new idempotency key"
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// parametersFrom computes parameters as a step's do; they may use the
	// step itself (`steps.<this step>.externalObjectID`) and every step
	// before it.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	ParametersFrom []ParameterExpression `json:"parametersFrom,omitempty"`

	// retryPolicy of the compensation's operation; a compensation that
	// fails for good puts the saga in NeedsReview.
	// +optional
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`
}

// SagaApproval is a person's approval of one step.
type SagaApproval struct {
	// step approved.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Step string `json:"step"`

	// by names the person who approves, for the record.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	By string `json:"by"`

	// user is the authenticated user who wrote the approval, as the API
	// server saw the request; set by Once's admission policy
	// (config/policy), a value sent by the writer is overwritten.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	User string `json:"user,omitempty"`

	// reason says why, for the record.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// SagaResolutionAction is a person's decision on a compensation, or a
// retryUntilDone step, that failed for good.
// +kubebuilder:validation:Enum=Retry;MarkCompensated
type SagaResolutionAction string

const (
	// SagaRetry runs the failed compensation or retryUntilDone step again,
	// as a new operation with a new key (the failed one had no effect).
	SagaRetry SagaResolutionAction = "Retry"
	// SagaMarkCompensated says that the step's effect was undone by
	// other means.
	SagaMarkCompensated SagaResolutionAction = "MarkCompensated"
)

// SagaResolution is a person's decision on one step's compensation.
type SagaResolution struct {
	// step whose compensation is resolved.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	Step string `json:"step"`

	// action is Retry or MarkCompensated.
	// +required
	Action SagaResolutionAction `json:"action"`

	// by names the person who decided, for the record.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	By string `json:"by"`

	// user is the authenticated user who wrote the resolution, set by
	// Once's admission policy.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	User string `json:"user,omitempty"`

	// reason says why, for the record.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// ValidationOutcome is what a step's validation found.
// +kubebuilder:validation:Enum=Passed;Failed;NotOffered;Deferred
type ValidationOutcome string

const (
	// ValidationPassed: the tool's dry run accepted the request.
	ValidationPassed ValidationOutcome = "Passed"
	// ValidationFailed: the tool's dry run, or the operation's parameter
	// schema, refused the request; no step runs.
	ValidationFailed ValidationOutcome = "Failed"
	// ValidationNotOffered: the tool's operation has no validate request;
	// the parameters were checked against its schema only.
	ValidationNotOffered ValidationOutcome = "NotOffered"
	// ValidationDeferred: the parameters use earlier steps' results, so the
	// step is validated just before it starts.
	ValidationDeferred ValidationOutcome = "Deferred"
)

// StepValidation is a step's validation.
type StepValidation struct {
	// outcome of the validation.
	Outcome ValidationOutcome `json:"outcome"`
	// httpStatus of the tool's answer, if it was asked.
	// +optional
	HTTPStatus int32 `json:"httpStatus,omitempty"`
	// message is the tool's answer or the schema's refusal, capped.
	// +optional
	Message string `json:"message,omitempty"`
	// time of the validation.
	Time metav1.Time `json:"time"`
}

// AppliedApproval is the approval a step started under.
type AppliedApproval struct {
	// by is the person the approval names.
	By string `json:"by"`
	// user is the authenticated user who wrote it.
	// +optional
	User string `json:"user,omitempty"`
	// reason of the approval.
	// +optional
	Reason string `json:"reason,omitempty"`
	// time Once applied it.
	Time metav1.Time `json:"time"`
}

// CompensationStatus is the progress of one step's compensation.
type CompensationStatus struct {
	// operation is the SideEffectOperation that performs the compensation.
	Operation string `json:"operation"`
	// idempotencyKey of that operation.
	IdempotencyKey string `json:"idempotencyKey"`
	// state of that operation; Compensated once the step's effect is
	// undone (by the operation, or by a person's MarkCompensated).
	// +optional
	State OperationState `json:"state,omitempty"`
	// round counts the compensation operations made for the step: a
	// person's Retry starts a new one.
	Round int32 `json:"round"`
	// externalObjectID of the compensation's effect.
	// +optional
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	// message says why the compensation waits or failed.
	// +optional
	Message string `json:"message,omitempty"`
	// resolution is the person's decision that was applied, if any.
	// +optional
	Resolution *SagaResolution `json:"resolution,omitempty"`
}

// SagaStepStatus is the checkpoint of one step.
type SagaStepStatus struct {
	// name of the step.
	Name string `json:"name"`
	// state of the step: empty until its operation exists, then the
	// operation's state; Compensating and Compensated while and after its
	// effect is undone.
	// +optional
	State OperationState `json:"state,omitempty"`
	// operation is the SideEffectOperation that performs the step.
	// +optional
	Operation string `json:"operation,omitempty"`
	// idempotencyKey of that operation.
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// externalObjectID of the step's effect.
	// +optional
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	// resultDigest identifies the step's result, which the operation holds
	// in its status.result.
	// +optional
	ResultDigest string `json:"resultDigest,omitempty"`
	// message says why the step waits or failed.
	// +optional
	Message string `json:"message,omitempty"`
	// reason is the Ready reason its operation failed with, or Cancelled
	// for a step a cancel stopped before it started. A failure that rests
	// on a person's decision, or that the tool contradicted later, stays
	// one after the operation is gone.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Reason string `json:"reason,omitempty"`
	// validation of the step, before it ran.
	// +optional
	Validation *StepValidation `json:"validation,omitempty"`
	// approval the step started under.
	// +optional
	Approval *AppliedApproval `json:"approval,omitempty"`
	// compensation of the step, once it started.
	// +optional
	Compensation *CompensationStatus `json:"compensation,omitempty"`
	// round counts the operations made for the step: a person's Retry of a
	// retryUntilDone step that failed for good starts a new one.
	// +optional
	Round int32 `json:"round,omitempty"`
	// resolution is the person's decision on the step that was applied.
	// +optional
	Resolution *SagaResolution `json:"resolution,omitempty"`
	// disregarded is the step's entry of spec.resolutions as it was when
	// the saga's last review of the step began. It is not applied: a
	// resolution decides the failure a person reviewed, so only an entry
	// written or changed during the review counts.
	// +optional
	Disregarded *SagaResolution `json:"disregarded,omitempty"`
}

// SagaStatus is the saga's checkpoint.
type SagaStatus struct {
	// state of the saga: Planned, Started (steps running), Committed (every
	// step committed), Compensating, Compensated (every committed step
	// undone), FailedFinal (stopped before any effect), or NeedsReview (a
	// person must decide).
	// +optional
	State OperationState `json:"state,omitempty"`
	// idempotencyKey is the effective key.
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// currentStep is the step being run or compensated, or waited for.
	// +optional
	CurrentStep string `json:"currentStep,omitempty"`
	// stepsDone counts the steps committed.
	// +optional
	StepsDone int32 `json:"stepsDone,omitempty"`
	// compensationsDone counts the steps compensated, of compensationsTotal
	// committed steps that must be.
	// +optional
	CompensationsDone int32 `json:"compensationsDone,omitempty"`
	// +optional
	CompensationsTotal int32 `json:"compensationsTotal,omitempty"`
	// failedStep is the step whose failure started compensation, or the
	// step a cancel stopped the saga at.
	// +optional
	FailedStep string `json:"failedStep,omitempty"`
	// steps are the checkpoints, in spec order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Steps []SagaStepStatus `json:"steps,omitempty"`
	// startedTime is when the first step's operation was created.
	// +optional
	StartedTime *metav1.Time `json:"startedTime,omitempty"`
	// completionTime is when the saga ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// outbox holds the announcements of the outcome to spec.subscribers,
	// written in the same write as the outcome, and their delivery.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Outbox []OutboxEntry `json:"outbox,omitempty"`
	// history is the saga's story: its transitions, oldest first, at most
	// sixteen. When it is full, the first is kept and the oldest after it
	// is dropped.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	History []Transition `json:"history,omitempty"`
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready (every step committed), Succeeded, Reconciling and
	// Stalled (failed, compensated, waiting for an approval or a person),
	// after kstatus.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sg,categories=once
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Step",type=string,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Done",type=integer,JSONPath=`.status.stepsDone`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.idempotencyKey`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// +kubebuilder:validation:XValidation:rule="oldSelf.hasValue() || !has(self.spec.resolutions) || size(self.spec.resolutions) == 0",message="a Saga cannot be created with spec.resolutions: a person decides after seeing what went wrong, while the saga is in NeedsReview",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="(has(self.spec.resolutions) ? self.spec.resolutions : []) == (has(oldSelf.spec.resolutions) ? oldSelf.spec.resolutions : []) || (has(self.status) && has(self.status.state) && self.status.state == 'NeedsReview')",message="spec.resolutions can be changed only while the saga is in NeedsReview"
// +kubebuilder:validation:XValidation:rule="!has(self.spec.resolutions) || self.spec.resolutions.all(r, (has(oldSelf.spec.resolutions) && oldSelf.spec.resolutions.exists(o, o.step == r.step && o.action == r.action && o.by == r.by && (has(o.reason) ? (has(r.reason) && o.reason == r.reason) : !has(r.reason)))) || (has(self.status) && has(self.status.currentStep) && r.step == self.status.currentStep))",message="a resolution can be written only for the step the saga waits on in NeedsReview (status.currentStep): it decides what a person reviewed"
// +kubebuilder:validation:XValidation:rule="(has(self.spec.approvals) ? self.spec.approvals : []) == (has(oldSelf.spec.approvals) ? oldSelf.spec.approvals : []) || !has(self.status) || !has(self.status.state) || !(self.status.state in ['Committed', 'Compensated', 'FailedFinal'])",message="spec.approvals cannot change after the saga ended"
// Saga is a business operation of several side effects in order, each run
// once as a SideEffectOperation, with compensations that undo the committed
// ones, in reverse, if a step fails for good.
type Saga struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is a standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the saga's steps.
	// +required
	Spec SagaSpec `json:"spec"`

	// status is the saga's checkpoint.
	// +optional
	Status SagaStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SagaList contains a list of Saga.
type SagaList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []Saga `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &Saga{}, &SagaList{})
		return nil
	})
}
