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

package protocol

import (
	"slices"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// stateField is a field of the status that belongs to some states only.
type stateField struct {
	name string
	// in are the states the field may be set in.
	in []v1.OperationState
	// set reports whether the field is set; clear unsets it.
	set   func(*v1.SideEffectOperationStatus) bool
	clear func(*v1.SideEffectOperationStatus)
}

var (
	terminal   = []v1.OperationState{v1.StateCommitted, v1.StateFailedFinal, v1.StateCompensated}
	unfinished = []v1.OperationState{v1.StatePlanned, v1.StateStarted, v1.StateFailedRetryable, v1.StateUnknown,
		v1.StateReconciling, v1.StateNeedsReview, v1.StateCompensating}
	effectful = []v1.OperationState{v1.StateCommitted, v1.StateCompensating, v1.StateCompensated,
		v1.StateFailedFinal} // FailedFinal: a duplicate reports its original's outcome as it is
)

// stateFields declares, once, which fields are legal in which state.
// transition enforces it, so no decision clears fields by hand, and a
// field that outlives its state (a claim on a committed status, an expiry
// on a running one) cannot be written.
var stateFields = []stateField{
	{"duplicateOf", append([]v1.OperationState{v1.StatePlanned}, terminal...),
		func(s *v1.SideEffectOperationStatus) bool { return s.DuplicateOf != "" },
		func(s *v1.SideEffectOperationStatus) { s.DuplicateOf = "" }},
	{"claim", []v1.OperationState{v1.StateStarted, v1.StateReconciling},
		func(s *v1.SideEffectOperationStatus) bool { return s.Claim != nil },
		func(s *v1.SideEffectOperationStatus) { s.Claim = nil }},
	{"nextAttemptTime", []v1.OperationState{v1.StateFailedRetryable, v1.StateUnknown, v1.StateReconciling},
		func(s *v1.SideEffectOperationStatus) bool { return s.NextAttemptTime != nil },
		func(s *v1.SideEffectOperationStatus) { s.NextAttemptTime = nil }},
	{"externalObjectID", effectful,
		func(s *v1.SideEffectOperationStatus) bool { return s.ExternalObjectID != "" },
		func(s *v1.SideEffectOperationStatus) { s.ExternalObjectID = "" }},
	{"externalRequestID", effectful,
		func(s *v1.SideEffectOperationStatus) bool { return s.ExternalRequestID != "" },
		func(s *v1.SideEffectOperationStatus) { s.ExternalRequestID = "" }},
	{"result", effectful,
		func(s *v1.SideEffectOperationStatus) bool { return s.Result != nil || s.ResultDigest != "" },
		func(s *v1.SideEffectOperationStatus) { s.Result, s.ResultDigest = nil, "" }},
	{"committedTime", []v1.OperationState{v1.StateCommitted, v1.StateCompensating, v1.StateCompensated},
		func(s *v1.SideEffectOperationStatus) bool { return s.CommittedTime != nil },
		func(s *v1.SideEffectOperationStatus) { s.CommittedTime = nil }},
	{"completionTime", terminal,
		func(s *v1.SideEffectOperationStatus) bool { return s.CompletionTime != nil },
		func(s *v1.SideEffectOperationStatus) { s.CompletionTime = nil }},
	{"expiryTime", terminal,
		func(s *v1.SideEffectOperationStatus) bool { return s.ExpiryTime != nil },
		func(s *v1.SideEffectOperationStatus) { s.ExpiryTime = nil }},
	// The key sent to the tool and the scope record's name are derived from
	// the spec (Scope). They serve the calls and the record writes of a
	// pass that derives them again. A person looks for them at the tool
	// while an outcome is open. An ended operation keeps neither.
	{"toolIdempotencyKey and recordName", unfinished,
		func(s *v1.SideEffectOperationStatus) bool { return s.ToolIdempotencyKey != "" || s.RecordName != "" },
		func(s *v1.SideEffectOperationStatus) { s.ToolIdempotencyKey, s.RecordName = "", "" }},
	// What the attempt rested on matters while its outcome may still be
	// unknown; an ended operation is never reconciled again.
	{"attempt's mode and promise", unfinished,
		func(s *v1.SideEffectOperationStatus) bool { return s.IdempotencyMode != "" || s.Promise != "" },
		func(s *v1.SideEffectOperationStatus) { s.IdempotencyMode, s.Promise = "", "" }},
	// An ended operation is never resolved again.
	{"earlierResolutions", unfinished,
		func(s *v1.SideEffectOperationStatus) bool { return len(s.EarlierResolutions) > 0 },
		func(s *v1.SideEffectOperationStatus) { s.EarlierResolutions = nil }},
	{"error", []v1.OperationState{v1.StatePlanned, v1.StateStarted, v1.StateFailedRetryable, v1.StateFailedFinal,
		v1.StateUnknown, v1.StateReconciling, v1.StateNeedsReview},
		func(s *v1.SideEffectOperationStatus) bool { return s.ErrorClass != "" || s.ErrorMessage != "" },
		func(s *v1.SideEffectOperationStatus) { s.ErrorClass, s.ErrorMessage = "", "" }},
}

// enforceFields clears every field the status's state does not allow.
func enforceFields(st *v1.SideEffectOperationStatus) {
	state := st.State.OrPlanned()
	for _, f := range stateFields {
		if !slices.Contains(f.in, state) {
			f.clear(st)
		}
	}
}
