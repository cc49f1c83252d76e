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

// Condition types. They follow kstatus, so that kubectl wait, Flux and
// Argo CD read an operation right: Ready=False alone means "in progress",
// Stalled=True means "failed for good or waiting for a person".
const (
	// ConditionReady is True when the operation is done as asked: the
	// effect is committed, or it was compensated (or, for a tool, when its
	// definition is valid).
	ConditionReady = "Ready"
	// ConditionSucceeded is True when the effect is committed, False when
	// the operation failed for good, Unknown while it is in progress.
	ConditionSucceeded = "Succeeded"
	// ConditionReconciling is True while Once works on the operation.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when Once cannot make progress alone: the
	// operation failed for good, needs a person's review, or waits for a
	// broken or missing tool to be fixed.
	ConditionStalled = "Stalled"
)

// Condition reasons, CamelCase, shared by the conditions above and events.
const (
	// ReasonPending: nothing has been attempted yet.
	ReasonPending = "Pending"
	// ReasonExecuting: an attempt is claimed and the tool is being called.
	ReasonExecuting = "Executing"
	// ReasonCommitted: the tool confirmed the effect.
	ReasonCommitted = "Committed"
	// ReasonDuplicate: another operation with the same scope and request
	// holds the key; this one reports its outcome and makes no call.
	ReasonDuplicate = "Duplicate"
	// ReasonWaitingForOriginal: a duplicate waits for the operation it
	// duplicates to end.
	ReasonWaitingForOriginal = "WaitingForOriginal"
	// ReasonBackingOff: the last attempt provably had no effect; the next
	// waits for its backoff.
	ReasonBackingOff = "BackingOff"
	// ReasonRetryBudgetExhausted: the tool's retry budget is spent; retries
	// wait for it to refill.
	ReasonRetryBudgetExhausted = "RetryBudgetExhausted"
	// ReasonOutcomeUnknown: an attempt may or may not have taken effect.
	ReasonOutcomeUnknown = "OutcomeUnknown"
	// ReasonReconciling: Once is asking the tool about an unknown attempt.
	ReasonReconciling = "Reconciling"
	// ReasonNeedsReview: Once cannot tell whether the effect happened and
	// waits for spec.resolution.
	ReasonNeedsReview = "NeedsReview"
	// ReasonRejected: the tool refused the request for good.
	ReasonRejected = "Rejected"
	// ReasonRetriesExhausted: spec.retryPolicy.maxAttempts attempts failed
	// without effect.
	ReasonRetriesExhausted = "RetriesExhausted"
	// ReasonIdempotencyParameterMismatch: the key is bound to a different
	// request by another operation.
	ReasonIdempotencyParameterMismatch = "IdempotencyParameterMismatch"
	// ReasonInvalidSpec: the spec cannot be executed as it is.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonParametersInvalid: spec.parameters do not match the
	// operation's parametersSchema.
	ReasonParametersInvalid = "ParametersInvalid"
	// ReasonParametersTooLarge: spec.parameters exceed 64 KiB.
	ReasonParametersTooLarge = "ParametersTooLarge"
	// ReasonRetentionTooShort: spec.retention is shorter than the tool's
	// replay window.
	ReasonRetentionTooShort = "RetentionTooShort"
	// ReasonToolNotFound: the referenced tool does not exist.
	ReasonToolNotFound = "ToolNotFound"
	// ReasonToolInvalid: the referenced tool's definition cannot be used.
	ReasonToolInvalid = "ToolInvalid"
	// ReasonNamespaceNotAllowed: the referenced ClusterTool's
	// spec.namespaceSelector does not select the operation's namespace.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonOperationNotDeclared: the tool does not offer spec.operation.
	ReasonOperationNotDeclared = "OperationNotDeclared"
	// ReasonSagaGone: the operation is a step or a compensation of a saga
	// that is gone; it does not run, and the garbage collector deletes it.
	ReasonSagaGone = "SagaGone"
	// ReasonNamespaceTerminating: the operation's namespace is being
	// deleted, its scope records with it; an operation that has made no
	// attempt makes none there, since no record would remember its effect.
	ReasonNamespaceTerminating = "NamespaceTerminating"
	// ReasonWaitingForNamespaceShare: the operation's namespace has as many
	// calls in flight as its share of the manager's workers; the call waits
	// for one of them to end, and has not claimed.
	ReasonWaitingForNamespaceShare = "WaitingForNamespaceShare"
	// ReasonSuspended: a person suspended the operation or its tool
	// (spec.suspend). Its next call waits until they resume it. It has not
	// claimed.
	ReasonSuspended = "Suspended"
	// ReasonCancelled: a person cancelled the operation (spec.cancel)
	// before it took effect. It made no call after the cancel.
	ReasonCancelled = "Cancelled"
	// ReasonResolvedCommitted: a person marked the effect committed.
	ReasonResolvedCommitted = "ResolvedCommitted"
	// ReasonResolvedFailed: a person failed the operation.
	ReasonResolvedFailed = "ResolvedFailed"
	// ReasonFailedAfterRetry: the operation failed for good after a person
	// allowed a retry, vouching that an earlier attempt had no effect:
	// "no effect" rests on their word, not on a proof.
	ReasonFailedAfterRetry = "FailedAfterRetry"
	// ReasonEffectReported: the operation had failed for good when a late
	// answer of the tool named an effect of it: its "no effect" does not
	// hold, and the effect may stand. A person should look.
	ReasonEffectReported = "EffectReported"
	// ReasonResolvedRetry: a person allowed another attempt.
	ReasonResolvedRetry = "ResolvedRetry"
	// ReasonValid: a tool's definition is valid.
	ReasonValid = "Valid"
	// ReasonInvalid: a tool's definition is not valid.
	ReasonInvalid = "Invalid"
)

// Event reasons that are not condition reasons: actions Once took, and
// what it must tell a person at once.
const (
	// EventClaimed: an attempt was claimed, just before the call.
	EventClaimed = "Claimed"
	// EventResolved: a person's spec.resolution was applied.
	EventResolved = "Resolved"
	// EventProvenAbsent: a lookup proved that an unknown attempt had no
	// effect; it will be retried.
	EventProvenAbsent = "ProvenAbsent"
	// EventSecondEffect: a tool's answer names an effect other than the one
	// the status names, or one made while a later attempt was claimed: there may be
	// two effects for one key. A warning a person must act on.
	EventSecondEffect = "SecondEffect"
)
