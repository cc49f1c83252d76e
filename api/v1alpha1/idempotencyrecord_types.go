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

// FinalizerRecord holds a SideEffectOperation until its outcome is in its
// scope's IdempotencyRecord. An admission policy adds it at create (no
// write of its own); the controller adds it before the first claim if it is
// missing, and removes it when the object is deleted, after writing the
// record.
const FinalizerRecord = "effects.once.dev/record"

// IdempotencyRecordSpec binds one idempotency scope (namespace, tool,
// operation, key) to one request and one owning operation, and keeps that
// operation's outcome after the operation is deleted, until it expires.
//
// The record is named after the SHA-256 of its scope. An operation whose key
// is not its own name creates it with an atomic create before its first
// claim, so it is the unique index over a scope: two operations with
// different names and the same scope cannot both own it. An operation whose
// key is its own name needs no index while it exists (its name is unique);
// its record is written when it is deleted. Once writes it; people read it.
type IdempotencyRecordSpec struct {
	// toolRef, operation and idempotencyKey are the scope, with the record's
	// namespace.
	// +required
	ToolRef ToolReference `json:"toolRef"`

	// operation of the scope.
	// +required
	Operation string `json:"operation"`

	// idempotencyKey of the scope.
	// +required
	IdempotencyKey string `json:"idempotencyKey"`

	// requestHash is the request the key is bound to.
	// +required
	RequestHash string `json:"requestHash"`

	// owner is the SideEffectOperation that executes for the scope.
	// +required
	Owner RecordOwner `json:"owner"`

	// previousOwner is the operation that owned the scope before owner took
	// it over, having been deleted before it ended: whether its attempt took
	// effect is unknown, so owner must reconcile before it may execute. It
	// is written in the same write that changes the owner, so a takeover
	// interrupted before the new owner wrote the unknown outcome in its
	// status is still known for one.
	// +optional
	PreviousOwner *RecordOwner `json:"previousOwner,omitempty"`

	// retention is the owner's spec.retention.
	// +required
	Retention metav1.Duration `json:"retention"`

	// outcome is the owner's outcome, written when the owner is deleted
	// after reaching a terminal state; until then the owner itself holds
	// it.
	// +optional
	Outcome *RecordOutcome `json:"outcome,omitempty"`

	// attempt is what the owner's attempts rested on, kept when the owner
	// is deleted after it made one: an operation that takes the scope over
	// reconciles that attempt as it was made (the mode, where the request
	// went, how long the tool remembers its key), not as the tool is
	// described now.
	// +optional
	Attempt *RecordAttempt `json:"attempt,omitempty"`
}

// RecordAttempt is what a deleted owner's unsettled attempt rested on.
type RecordAttempt struct {
	// mode is the tool's idempotency mode when the attempt was made.
	// +optional
	Mode IdempotencyMode `json:"mode,omitempty"`

	// promise is the digest of what the attempt's re-send or lookup rests
	// on (the operation's status.promise).
	// +optional
	Promise string `json:"promise,omitempty"`

	// startedTime is when the owner's first attempt was claimed: a Native
	// tool's dedupe window runs from the key's first request.
	// +optional
	StartedTime *metav1.Time `json:"startedTime,omitempty"`

	// attempts the owner had made when it was deleted: the unsettled
	// attempt is the last of them. A late answer to that attempt settles
	// it in the record; one to an earlier attempt may name a second
	// effect. Zero in a record kept before it was written: unknown.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// resolution is a person's Retry that the owner's attempts rest on:
	// the person vouched that an earlier attempt had no effect. The next
	// owner of the scope carries it, so that a failure it reports says it
	// rests on that person's word, as the owner's would have.
	// +optional
	Resolution *RecordResolution `json:"resolution,omitempty"`
}

// RecordOwner names the operation that owns a scope.
type RecordOwner struct {
	// name of the SideEffectOperation.
	// +required
	Name string `json:"name"`

	// uid of the SideEffectOperation, so that a re-created object of the
	// same name is told apart.
	// +required
	UID types.UID `json:"uid"`
}

// RecordOutcome is the terminal outcome of a scope's owner.
type RecordOutcome struct {
	// state is Committed, FailedFinal or Compensated.
	// +required
	State OperationState `json:"state"`

	// attempts the owner made.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// externalObjectID of the effect.
	// +optional
	ExternalObjectID string `json:"externalObjectID,omitempty"`

	// externalRequestID of the effect.
	// +optional
	ExternalRequestID string `json:"externalRequestID,omitempty"`

	// result of the effect, capped like status.result.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	Result *runtime.RawExtension `json:"result,omitempty"`

	// resultDigest identifies the result.
	// +optional
	ResultDigest string `json:"resultDigest,omitempty"`

	// errorClass of a failed owner.
	// +optional
	ErrorClass ErrorClass `json:"errorClass,omitempty"`

	// reason of a failed owner: its Ready condition's reason.
	// +optional
	Reason string `json:"reason,omitempty"`

	// errorMessage of a failed owner.
	// +optional
	ErrorMessage string `json:"errorMessage,omitempty"`

	// resolution is the person's decision the owner's outcome rests on,
	// when a person resolved it (its status.resolution): a replay answered
	// from the record after the owner is gone says a person decided, as
	// the owner did. It is bound to the record's requestHash.
	// +optional
	Resolution *RecordResolution `json:"resolution,omitempty"`

	// completionTime is when the owner reached its terminal state.
	// +required
	CompletionTime metav1.Time `json:"completionTime"`

	// expiryTime is completionTime plus retention: the record is collected
	// after it, once its owner is gone.
	// +required
	ExpiryTime metav1.Time `json:"expiryTime"`
}

// RecordResolution is the person's decision a deleted owner's outcome
// rests on: who decided, what, why and when, as the owner's
// status.resolution held it. Nothing more is kept; a resolution holds no
// secret.
type RecordResolution struct {
	// action is MarkCommitted, Retry or Fail.
	// +required
	Action ResolutionAction `json:"action"`

	// by names the person who decided, as the resolution claimed.
	// +required
	By string `json:"by"`

	// user is the authenticated user who wrote the resolution, as Once's
	// admission policy set it.
	// +optional
	User string `json:"user,omitempty"`

	// reason the person gave.
	// +optional
	Reason string `json:"reason,omitempty"`

	// time the resolution was applied.
	// +required
	Time metav1.Time `json:"time"`
}

// Attribution names who made the resolution, as Resolution.Attribution
// does.
func (r *RecordResolution) Attribution() string {
	return (&Resolution{By: r.By, User: r.User}).Attribution()
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=idr,categories=once
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.toolRef.name`
// +kubebuilder:printcolumn:name="Operation",type=string,JSONPath=`.spec.operation`
// +kubebuilder:printcolumn:name="Key",type=string,JSONPath=`.spec.idempotencyKey`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.spec.owner.name`
// +kubebuilder:printcolumn:name="Outcome",type=string,JSONPath=`.spec.outcome.state`
// +kubebuilder:printcolumn:name="Expires",type=date,JSONPath=`.spec.outcome.expiryTime`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// IdempotencyRecord is the unique index over an idempotency scope and the
// memory of its outcome, which outlives the operation that owned it for the
// operation's retention.
type IdempotencyRecord struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is a standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec is the record.
	// +required
	Spec IdempotencyRecordSpec `json:"spec"`
}

// +kubebuilder:object:root=true

// IdempotencyRecordList contains a list of IdempotencyRecord.
type IdempotencyRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []IdempotencyRecord `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &IdempotencyRecord{}, &IdempotencyRecordList{})
		return nil
	})
}
