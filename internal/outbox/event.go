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

package outbox

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Event is one announcement as it is delivered: a CloudEvent's attributes
// and its JSON data. Every field is derived from the outcome in the status, so
// every delivery of an entry carries the same event.
type Event struct {
	// ID is the entry's eventID.
	ID string
	// Type is the entry's type.
	Type string
	// Source is the object's API path, for example
	// /apis/effects.once.dev/v1alpha1/namespaces/shop/sideeffectoperations/charge-1.
	Source string
	// Subject is the object's name.
	Subject string
	// Time is when the outcome was reached.
	Time time.Time
	// Data is the outcome.
	Data Data
}

// Data is the body of an announcement: the outcome, as the object's status
// holds it. It holds what status holds, so no secrets.
type Data struct {
	// Kind is SideEffectOperation or Saga; Namespace and Name the object.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// UID is the object's metadata.uid.
	UID string `json:"uid"`
	// State is the outcome: Committed, FailedFinal or Compensated.
	State v1.OperationState `json:"state"`
	// IdempotencyKey is the object's effective key.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// ExternalObjectID, Result and ResultDigest are an operation's effect.
	ExternalObjectID string          `json:"externalObjectID,omitempty"`
	Result           json.RawMessage `json:"result,omitempty"`
	ResultDigest     string          `json:"resultDigest,omitempty"`
	// ErrorClass and ErrorMessage say why an operation failed.
	ErrorClass   v1.ErrorClass `json:"errorClass,omitempty"`
	ErrorMessage string        `json:"errorMessage,omitempty"`
	// StepsDone, FailedStep and CompensationsDone sum up a saga.
	StepsDone         int32  `json:"stepsDone,omitempty"`
	FailedStep        string `json:"failedStep,omitempty"`
	CompensationsDone int32  `json:"compensationsDone,omitempty"`
}

var apiPath = "/apis/" + v1.GroupVersion.String()

// OperationEvent is the event of entry e of op.
func OperationEvent(op *v1.SideEffectOperation, e v1.OutboxEntry) Event {
	st := &op.Status
	d := Data{Kind: "SideEffectOperation", Namespace: op.Namespace, Name: op.Name, UID: string(op.UID),
		State: st.State, IdempotencyKey: st.IdempotencyKey, ExternalObjectID: st.ExternalObjectID,
		ResultDigest: st.ResultDigest, ErrorClass: st.ErrorClass, ErrorMessage: st.ErrorMessage}
	if st.Result != nil {
		d.Result = json.RawMessage(st.Result.Raw)
	}
	return Event{ID: e.EventID, Type: e.Type, Subject: op.Name, Time: timeOf(st.CompletionTime),
		Source: fmt.Sprintf("%s/namespaces/%s/sideeffectoperations/%s", apiPath, op.Namespace, op.Name), Data: d}
}

// SagaEvent is the event of entry e of s.
func SagaEvent(s *v1.Saga, e v1.OutboxEntry) Event {
	st := &s.Status
	d := Data{Kind: "Saga", Namespace: s.Namespace, Name: s.Name, UID: string(s.UID), State: st.State,
		IdempotencyKey: st.IdempotencyKey, StepsDone: st.StepsDone, FailedStep: st.FailedStep,
		CompensationsDone: st.CompensationsDone}
	return Event{ID: e.EventID, Type: e.Type, Subject: s.Name, Time: timeOf(st.CompletionTime),
		Source: fmt.Sprintf("%s/namespaces/%s/sagas/%s", apiPath, s.Namespace, s.Name), Data: d}
}

// timeOf is t in UTC, or the zero time (an event without a time) if t is
// nil.
func timeOf(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
