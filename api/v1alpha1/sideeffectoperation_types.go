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
	"k8s.io/apimachinery/pkg/types"
)

// MaxParametersBytes is the documented limit on spec.parameters, measured as
// canonical (RFC 8785) JSON. Larger parameters fail the operation before any
// call, with reason ParametersTooLarge.
const MaxParametersBytes = 64 * 1024

// MaxResultBytes caps status.result, measured as canonical JSON. A larger
// result is not stored; status.resultDigest still identifies it.
const MaxResultBytes = 16 * 1024

// SideEffectOperationSpec is one side effect, bound to an idempotency key.
//
// Everything but resolution, ttlSecondsAfterFinished, suspend and cancel is
// immutable: an idempotency key means one request, so a change would bind
// the key to a different request. Suspend and cancel say whether the
// request may be sent, not what it is: the request hash leaves them out.
// +kubebuilder:validation:XValidation:rule="has(self.subscribers) == has(oldSelf.subscribers)",message="spec.subscribers are immutable: the outcome is announced to the subscribers named at creation"
// +kubebuilder:validation:XValidation:rule="has(self.idempotencyKey) == has(oldSelf.idempotencyKey) && has(self.parameters) == has(oldSelf.parameters) && has(self.timeout) == has(oldSelf.timeout) && has(self.retryPolicy) == has(oldSelf.retryPolicy)",message="spec is immutable: an idempotency key cannot be bound to different parameters; create a new SideEffectOperation with a new idempotency key (only spec.resolution, spec.ttlSecondsAfterFinished, spec.suspend and spec.cancel may change)"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.cancel) || !oldSelf.cancel || (has(self.cancel) && self.cancel)",message="spec.cancel cannot be taken back: a cancelled operation may have failed already; create a new SideEffectOperation with a new idempotency key"
type SideEffectOperationSpec struct {
	// toolRef names the Tool or ClusterTool that performs the effect.
	// +required
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.toolRef is immutable: an idempotency key cannot be bound to a different tool"
	ToolRef ToolReference `json:"toolRef"`

	// operation is the name of one of the tool's spec.operations, for example
	// charge.create.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.operation is immutable: an idempotency key cannot be bound to a different operation"
	Operation string `json:"operation"`

	// idempotencyKey identifies the business operation. Every retry, re-apply
	// and redelivery of the same business operation must carry the same key.
	// Defaults to the object's name. The scope of a key is (namespace, tool,
	// operation, idempotencyKey): two objects with the same scope produce at
	// most one effect.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.idempotencyKey is immutable: create a new SideEffectOperation for a new key"
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// parameters is the request sent to the tool, any JSON object. It is
	// limited to 64 KiB of canonical JSON. Together with the tool and the
	// operation it makes up the request hash that the key is bound to.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.parameters are immutable: an idempotency key cannot be bound to different parameters; create a new SideEffectOperation with a new idempotency key"
	Parameters *runtime.RawExtension `json:"parameters,omitempty"`

	// timeout bounds one call to the tool. Defaults to the tool's timeout,
	// and may only shorten it: a longer one is the tool's. At most 1h. A
	// call that runs out of time has an unknown outcome: it is reconciled,
	// never retried blindly.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="spec.timeout must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1h')",message="spec.timeout is at most 1h, and a call never waits longer than its tool's timeout"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="spec.timeout is immutable"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// retention is how long the idempotency record is kept after the
	// operation ends, also after the object is deleted: within it, a new
	// operation with the same scope reports this one's outcome instead of
	// executing again. It must be at least the tool's replay window.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="spec.retention must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="spec.retention is immutable"
	Retention *metav1.Duration `json:"retention,omitempty"`

	// ttlSecondsAfterFinished is how long the object is kept after the
	// operation ends (Committed, FailedFinal or Compensated; never while it
	// runs or waits in NeedsReview), counted from status.completionTime;
	// then Once deletes it. Its scope's IdempotencyRecord is not deleted
	// with it: it keeps the outcome until status.expiryTime (the completion
	// plus spec.retention), so the same operation applied again within
	// retention reports that outcome and makes no second effect; applied
	// after it, it executes again. Unset, the object is kept until someone
	// deletes it. An operation that a Saga controls (a step or a
	// compensation) is deleted with its saga, never by its own
	// ttlSecondsAfterFinished. The MCP gateway, the ingress and the Go
	// client set 3600 unless told otherwise. It may be changed at any time.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="spec.ttlSecondsAfterFinished must be 0 or more: the seconds the object is kept after it ends"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// retryPolicy bounds retries of attempts that provably had no effect.
	// +optional
	// +kubebuilder:default={}
	RetryPolicy *RetryPolicy `json:"retryPolicy,omitempty"`

	// resolution is a person's decision on an operation in NeedsReview. It is
	// the only way out of NeedsReview, and with ttlSecondsAfterFinished the
	// only mutable field of the spec. It is applied once, only if written
	// while the operation is in NeedsReview, and never if it is a decision
	// already applied or one that stood when the review began
	// (status.earlierResolutions).
	// +optional
	Resolution *Resolution `json:"resolution,omitempty"`

	// subscribers are told the outcome when it is reached (Committed,
	// FailedFinal or Compensated; not NeedsReview, which waits for a
	// person), as a CloudEvent delivered at least once with a stable id.
	// At most four; immutable.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.subscribers are immutable: the outcome is announced to the subscribers named at creation"
	Subscribers []Subscriber `json:"subscribers,omitempty"`

	// suspend holds the operation's next call: no first attempt, no retry,
	// no re-send. A call in flight finishes. An unknown outcome is still
	// reconciled by lookup, which makes no effect. Set it back to false,
	// or remove it, to resume. A person's resolution is applied all the
	// same.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// cancel asks that the operation not take effect. It is honoured only
	// where that is safe, once the operation holds its key's scope: a
	// duplicate of another object's key reports that object's outcome.
	// Before any attempt, or after attempts that provably had no effect,
	// the operation ends FailedFinal with reason Cancelled and makes no
	// call. A call in flight finishes, and its
	// answer stands. An unknown outcome is still reconciled by lookup; one
	// that only a re-send could settle goes to a person (NeedsReview). A
	// person's resolution is applied all the same. Once set, it cannot be
	// taken back.
	// +optional
	Cancel bool `json:"cancel,omitempty"`
}

// ToolKind is the kind of object a ToolReference names.
// +kubebuilder:validation:Enum=Tool;ClusterTool
type ToolKind string

const (
	// ToolKindTool names a namespaced Tool in the operation's namespace.
	ToolKindTool ToolKind = "Tool"
	// ToolKindClusterTool names a cluster-scoped ClusterTool.
	ToolKindClusterTool ToolKind = "ClusterTool"
)

// ToolReference names a Tool in the same namespace or a ClusterTool.
type ToolReference struct {
	// kind is Tool (the default) or ClusterTool.
	// +optional
	// +kubebuilder:default=Tool
	Kind ToolKind `json:"kind,omitempty"`

	// name of the Tool or ClusterTool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// EffectiveKind is the kind the reference names: Tool when kind is empty,
// as the API server defaults it, for references built in code.
func (r ToolReference) EffectiveKind() ToolKind {
	if r.Kind == "" {
		return ToolKindTool
	}
	return r.Kind
}

// Object is an empty object of the kind the reference names and the key it
// is read by, for a reference made in namespace: a Tool there, or a
// ClusterTool.
func (r ToolReference) Object(namespace string) (GenericTool, types.NamespacedName) {
	if r.EffectiveKind() == ToolKindClusterTool {
		return &ClusterTool{}, types.NamespacedName{Name: r.Name}
	}
	return &Tool{}, types.NamespacedName{Namespace: namespace, Name: r.Name}
}

// RetryPolicy bounds the retries of attempts that provably had no effect
// (never sent, refused with 429, or, for a Native tool, answered 408, 502,
// 503 or 504, after which a retry is a same-key re-send). Backoff is exponential
// with full jitter, honours Retry-After, and is capped.
type RetryPolicy struct {
	// maxAttempts is the largest number of attempts, the first included.
	// When it is spent the operation fails with reason RetriesExhausted.
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.retryPolicy.maxAttempts is immutable"
	MaxAttempts int32 `json:"maxAttempts,omitempty"`

	// initialBackoff is the backoff ceiling after the first failed attempt.
	// +optional
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="initialBackoff must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="spec.retryPolicy.initialBackoff is immutable"
	InitialBackoff *metav1.Duration `json:"initialBackoff,omitempty"`

	// maxBackoff caps the backoff between attempts.
	// +optional
	// +kubebuilder:default="5m"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxBackoff must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) == duration(oldSelf)",message="spec.retryPolicy.maxBackoff is immutable"
	MaxBackoff *metav1.Duration `json:"maxBackoff,omitempty"`
}

// ResolutionAction is what a person decided about an operation in
// NeedsReview.
// +kubebuilder:validation:Enum=MarkCommitted;Retry;Fail
type ResolutionAction string

const (
	// ResolutionMarkCommitted says that the effect happened, with the
	// external object id the person found.
	ResolutionMarkCommitted ResolutionAction = "MarkCommitted"
	// ResolutionRetry says that the effect provably did not happen, and
	// allows one more attempt.
	ResolutionRetry ResolutionAction = "Retry"
	// ResolutionFail says that the operation must not be executed.
	ResolutionFail ResolutionAction = "Fail"
)

// Resolution is a person's decision on an operation in NeedsReview.
// +kubebuilder:validation:XValidation:rule="self.action != 'MarkCommitted' || has(self.externalObjectID)",message="a MarkCommitted resolution needs the externalObjectID of the effect that was found"
type Resolution struct {
	// action is MarkCommitted, Retry or Fail.
	// +required
	Action ResolutionAction `json:"action"`

	// externalObjectID identifies the effect at the tool; required for
	// MarkCommitted.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	ExternalObjectID string `json:"externalObjectID,omitempty"`

	// by names the person who decided, for the record.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	By string `json:"by"`

	// user is the authenticated user who wrote this resolution, as the API
	// server saw the request; by is only what the writer claims. It is set
	// by Once's admission policy (config/policy) whenever spec.resolution is
	// created or changed; a value sent by the writer is overwritten.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	User string `json:"user,omitempty"`

	// reason says why, for the record.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
}

// OperationState is a state of the idempotency protocol.
// +kubebuilder:validation:Enum=Planned;Started;Committed;FailedRetryable;FailedFinal;Unknown;Reconciling;NeedsReview;Compensating;Compensated
type OperationState string

const (
	// StatePlanned: the intent is written, no attempt has been made.
	StatePlanned OperationState = "Planned"
	// StateStarted: an attempt is claimed; the call may be in progress.
	StateStarted OperationState = "Started"
	// StateCommitted: the effect is confirmed. Terminal.
	StateCommitted OperationState = "Committed"
	// StateFailedRetryable: the last attempt provably had no effect and may
	// be retried after status.nextAttemptTime.
	StateFailedRetryable OperationState = "FailedRetryable"
	// StateFailedFinal: the operation failed for good and had no effect.
	// Terminal.
	StateFailedFinal OperationState = "FailedFinal"
	// StateUnknown: an attempt's outcome is not known; it must be
	// reconciled against the tool before anything else is tried.
	StateUnknown OperationState = "Unknown"
	// StateReconciling: asking the tool whether the unknown attempt took
	// effect.
	StateReconciling OperationState = "Reconciling"
	// StateNeedsReview: Once cannot tell whether the effect happened and
	// waits for a person's spec.resolution.
	StateNeedsReview OperationState = "NeedsReview"
	// StateCompensating: a saga is undoing this committed effect.
	StateCompensating OperationState = "Compensating"
	// StateCompensated: the effect was undone by its compensation. Terminal.
	StateCompensated OperationState = "Compensated"
)

// IsPlanned reports whether nothing has been attempted in state s yet.
func (s OperationState) IsPlanned() bool {
	return s == "" || s == StatePlanned
}

// OrPlanned is s, or Planned when s is empty: a status no one has
// written yet reads as Planned.
func (s OperationState) OrPlanned() OperationState {
	if s == "" {
		return StatePlanned
	}
	return s
}

// IsTerminal reports whether no further transition can leave s.
func (s OperationState) IsTerminal() bool {
	return s == StateCommitted || s == StateFailedFinal || s == StateCompensated
}

// ErrorClass classifies an attempt's failure, after DESIGN's error table.
// +kubebuilder:validation:Enum=Retryable;Permanent;OutcomeUnknown;Invalid;Conflict;Cancelled
type ErrorClass string

const (
	// ErrorRetryable: the request provably had no effect and may be retried.
	ErrorRetryable ErrorClass = "Retryable"
	// ErrorPermanent: the tool refused the request for good.
	ErrorPermanent ErrorClass = "Permanent"
	// ErrorOutcomeUnknown: the request may or may not have taken effect.
	ErrorOutcomeUnknown ErrorClass = "OutcomeUnknown"
	// ErrorInvalid: the operation's own spec cannot be executed.
	ErrorInvalid ErrorClass = "Invalid"
	// ErrorConflict: the idempotency key is bound to another request.
	ErrorConflict ErrorClass = "Conflict"
	// ErrorCancelled: a person cancelled the operation (spec.cancel)
	// before any attempt, or after attempts that provably had no effect.
	ErrorCancelled ErrorClass = "Cancelled"
)

// Claim is the right to run one attempt, written before the call.
type Claim struct {
	// holder identifies the worker (manager process) that holds the claim.
	Holder string `json:"holder"`

	// attempt is the attempt the claim is for.
	Attempt int32 `json:"attempt"`

	// acquireTime is when the claim was taken, just before the call.
	AcquireTime metav1.Time `json:"acquireTime"`

	// renewTime is when the holder last confirmed the claim.
	RenewTime metav1.Time `json:"renewTime"`

	// expiryTime is when another worker may take over; the abandoned
	// attempt's outcome is then unknown.
	ExpiryTime metav1.Time `json:"expiryTime"`
}

// ObservationKind says what Once did to learn something.
// +kubebuilder:validation:Enum=Call;Resend;Lookup;StaleCall;ClaimExpired;Resolution
type ObservationKind string

const (
	// ObservationCall is an attempt's call to the tool.
	ObservationCall ObservationKind = "Call"
	// ObservationResend is a reconciling re-send with the same key to a
	// tool that dedupes natively.
	ObservationResend ObservationKind = "Resend"
	// ObservationLookup is a reconciling query of the tool by key.
	ObservationLookup ObservationKind = "Lookup"
	// ObservationStaleCall is what a worker that had lost its claim learned
	// from its call; evidence only, it never overwrites the status.
	ObservationStaleCall ObservationKind = "StaleCall"
	// ObservationClaimExpired notes a claim whose holder went silent.
	ObservationClaimExpired ObservationKind = "ClaimExpired"
	// ObservationResolution notes a person's resolution.
	ObservationResolution ObservationKind = "Resolution"
)

// Observation is one thing Once learned about the outside world: the
// evidence a person needs to resolve an operation in NeedsReview.
type Observation struct {
	// time of the observation.
	Time metav1.Time `json:"time"`

	// kind of observation.
	Kind ObservationKind `json:"kind"`

	// attempt the observation is about.
	Attempt int32 `json:"attempt"`

	// holder is the worker that observed it.
	// +optional
	Holder string `json:"holder,omitempty"`

	// outcome as classified, for example Succeeded, Rejected, Retryable,
	// Unknown, Found, Absent or Undecidable.
	Outcome string `json:"outcome"`

	// request summarises what was sent, for example "POST /v1/charges".
	// +optional
	Request string `json:"request,omitempty"`

	// httpStatus of the response, if one arrived.
	// +optional
	HTTPStatus int32 `json:"httpStatus,omitempty"`

	// externalObjectID the response named, if any.
	// +optional
	ExternalObjectID string `json:"externalObjectID,omitempty"`

	// message describes the response or the error, capped in length.
	// +optional
	Message string `json:"message,omitempty"`
}

// MaxHistory bounds status.history: the first transition and the newest
// ones are kept, so the story keeps its beginning and its end.
const MaxHistory = 16

// Transition is one step of a status's story: a change of state, or of the
// reason it stays in one, as `kubectl once why` tells it.
type Transition struct {
	// time of the transition.
	Time metav1.Time `json:"time"`

	// state entered.
	State OperationState `json:"state"`

	// reason, as the conditions gave it.
	Reason string `json:"reason"`

	// message, as the conditions gave it, capped at 256 bytes. An
	// operation's newest transition has none: its message is the Ready
	// condition's.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Message string `json:"message,omitempty"`

	// attempt the operation was at (operations only).
	// +optional
	Attempt int32 `json:"attempt,omitempty"`

	// step the saga was at (sagas only).
	// +optional
	Step string `json:"step,omitempty"`
}

// AppliedResolution is the resolution that was applied, and when.
type AppliedResolution struct {
	Resolution `json:",inline"`

	// generation of the object whose spec.resolution was applied; a
	// resolution is applied once per change of the spec.
	Generation int64 `json:"generation"`

	// time the resolution was applied.
	Time metav1.Time `json:"time"`

	// fromState is the state the resolution moved the operation out of.
	FromState OperationState `json:"fromState"`
}

// SideEffectOperationStatus is the operation's state in the idempotency
// protocol: its claims, its evidence and its outcome. The scope's
// IdempotencyRecord keeps the outcome after the object is deleted.
type SideEffectOperationStatus struct {
	// state of the idempotency protocol. Empty means Planned and not yet
	// observed.
	// +optional
	State OperationState `json:"state,omitempty"`

	// idempotencyKey is the effective key (spec.idempotencyKey or the
	// object's name).
	// +optional
	IdempotencyKey string `json:"idempotencyKey,omitempty"`

	// toolIdempotencyKey is the key sent to the tool: the whole scope,
	// "<namespace>/<Kind>:<tool>/<operation>/<key>", or "once:" and its hex
	// SHA-256 when longer than 255 bytes, so that tenants sharing a
	// ClusterTool, operations sharing a tool and tools sharing one API never
	// collide there. Derived from the spec; kept until the operation ends.
	// +optional
	ToolIdempotencyKey string `json:"toolIdempotencyKey,omitempty"`

	// requestHash is "sha256:" and the hex SHA-256 of the RFC 8785
	// canonical JSON of the tool, the operation and the parameters. The key
	// is bound to it.
	// +optional
	RequestHash string `json:"requestHash,omitempty"`

	// recordName is the IdempotencyRecord that binds the scope to this
	// operation (or to the one it duplicates): "scope-" and the hex SHA-256
	// of the scope. Derived from the spec; kept until the operation ends.
	// +optional
	RecordName string `json:"recordName,omitempty"`

	// duplicateOf names the operation that holds this one's scope, when this
	// one is a duplicate of it: no call is made, and its outcome is reported
	// here.
	// +optional
	DuplicateOf string `json:"duplicateOf,omitempty"`

	// attempts is the number of attempts claimed so far.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// reconcileAttempts counts the questions asked of the tool about the
	// current unknown attempt.
	// +optional
	ReconcileAttempts int32 `json:"reconcileAttempts,omitempty"`

	// claim is the current right to execute or reconcile, if any.
	// +optional
	Claim *Claim `json:"claim,omitempty"`

	// nextAttemptTime is the earliest time of the next attempt or question
	// after a retryable failure.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`

	// externalObjectID identifies the effect at the tool.
	// +optional
	ExternalObjectID string `json:"externalObjectID,omitempty"`

	// externalRequestID is the tool's id for the request, if it gave one.
	// +optional
	ExternalRequestID string `json:"externalRequestID,omitempty"`

	// result is what the tool answered, as mapped by the tool's
	// response.result expression; omitted above 16 KiB.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Result *runtime.RawExtension `json:"result,omitempty"`

	// resultDigest is "sha256:" and the hex SHA-256 of the result's
	// canonical JSON; kept also when the result itself is too large.
	// +optional
	ResultDigest string `json:"resultDigest,omitempty"`

	// errorClass classifies the last failure.
	// +optional
	ErrorClass ErrorClass `json:"errorClass,omitempty"`

	// errorMessage describes the last failure.
	// +optional
	ErrorMessage string `json:"errorMessage,omitempty"`

	// idempotencyMode is the tool's mode when the current attempt was made.
	// An unknown outcome is reconciled the way that mode allows while the
	// tool still promises the same; if the tool's mode changed since (a tool
	// switched to Native after an attempt it did not dedupe must not be sent
	// the request again), a person decides. Cleared when the operation
	// ends, as promise is.
	// +optional
	IdempotencyMode IdempotencyMode `json:"idempotencyMode,omitempty"`
	// promise is a digest of what the current attempt's reconciliation
	// rests on, as the tool described it when the attempt was made: where
	// the request goes and how it carries the key, how a lookup asks and
	// reads its answer, the declared delays and windows. If the tool's
	// description changes while the outcome is unknown, a re-send or a
	// lookup would ask something else: a person decides, as for a change
	// of mode. Cleared when the operation ends.
	// +optional
	Promise string `json:"promise,omitempty"`
	// reviewGeneration is the object's generation when it last entered
	// NeedsReview. Only a spec.resolution written after that is applied.
	// +optional
	ReviewGeneration int64 `json:"reviewGeneration,omitempty"`
	// earlierResolutions are decisions that never decide a review of this
	// operation again, besides the one applied (resolution): those applied
	// before it, and those that stood in spec.resolution when a review
	// began, written before it (at the object's creation, say, by a
	// manifest that kept the decision about an earlier object of its
	// name). A spec.resolution that is one of them in action, external id,
	// by and reason is not applied, whatever else of the spec changes: a
	// GitOps tool that writes an old decision back from its repository
	// decides nothing. The eight most recent are kept, until the operation
	// ends.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	EarlierResolutions []Resolution `json:"earlierResolutions,omitempty"`
	// observations are the most recent things Once learned from the tool,
	// newest last, at most sixteen. When the list is full, repeated
	// questions (lookups and re-sends) are dropped first, so the calls that
	// made each attempt stay for the person who reviews it. A first attempt
	// that committed keeps none: the state, the external ids and the result
	// say what its call answered.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Observations []Observation `json:"observations,omitempty"`

	// resolution is the person's resolution that was applied, if any. A
	// duplicate carries its original's, the one the outcome it reports
	// rests on, with generation 0: nothing of its own spec was applied.
	// +optional
	Resolution *AppliedResolution `json:"resolution,omitempty"`

	// history is the operation's story: its transitions, oldest first, at
	// most sixteen. When it is full, the first is kept and the oldest after
	// it is dropped. The newest transition's message is the Ready
	// condition's, kept there only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	History []Transition `json:"history,omitempty"`

	// startedTime is when the first attempt of this lifetime of the key
	// was claimed, carried over when the operation takes over a deleted
	// one's attempt (the scope's record pins it; a record that does not
	// say gives its own creation, no later than the attempt). Lookups see
	// it as `since`.
	// +optional
	StartedTime *metav1.Time `json:"startedTime,omitempty"`

	// unknownTime is when the outcome first became unknown; recovery time
	// is measured from it.
	// +optional
	UnknownTime *metav1.Time `json:"unknownTime,omitempty"`

	// committedTime is when the effect was confirmed.
	// +optional
	CommittedTime *metav1.Time `json:"committedTime,omitempty"`

	// completionTime is when the operation reached a terminal state.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// expiryTime is when the idempotency record may be collected: the
	// completion time plus spec.retention. Until then the scope stays bound,
	// even if this object is deleted.
	// +optional
	ExpiryTime *metav1.Time `json:"expiryTime,omitempty"`

	// outbox holds the announcements of the outcome to spec.subscribers,
	// written in the same write as the outcome, and their delivery.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=4
	Outbox []OutboxEntry `json:"outbox,omitempty"`

	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready (the effect is committed), Succeeded (True when
	// committed, False when failed for good), Reconciling (work in progress)
	// and Stalled (failed for good, or waiting for a person or for a
	// broken tool to be fixed). Reconciling and Stalled are there only while
	// True, as kstatus reads them; Succeeded carries no message (Ready's
	// says it).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=seo;seos,categories=once
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.toolRef.name`
// +kubebuilder:printcolumn:name="Operation",type=string,JSONPath=`.spec.operation`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.status.idempotencyKey`
// +kubebuilder:printcolumn:name="External ID",type=string,JSONPath=`.status.externalObjectID`
// +kubebuilder:printcolumn:name="Attempts",type=integer,JSONPath=`.status.attempts`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// +kubebuilder:validation:XValidation:rule="!has(self.spec.resolution) || (has(oldSelf.spec.resolution) && self.spec.resolution == oldSelf.spec.resolution) || (has(self.status) && has(self.status.state) && self.status.state == 'NeedsReview')",message="spec.resolution can be set or changed only while the operation is in NeedsReview"
// SideEffectOperation is one side effect (a payment, an email, a ticket, a
// tool call) that happens at most once per idempotency key, however often it
// is retried, re-applied or replayed.
type SideEffectOperation struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is a standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the requested effect.
	// +required
	Spec SideEffectOperationSpec `json:"spec"`

	// status is the operation's state in the idempotency protocol: its
	// claims, its evidence and its outcome.
	// +optional
	Status SideEffectOperationStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// SideEffectOperationList contains a list of SideEffectOperation.
type SideEffectOperationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []SideEffectOperation `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &SideEffectOperation{}, &SideEffectOperationList{})
		return nil
	})
}
