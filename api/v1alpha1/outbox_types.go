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
)

// MaxSubscribers bounds spec.subscribers, and so status.outbox.
const MaxSubscribers = 4

// Subscriber is a sink that is told the outcome of an operation or a saga,
// as a CloudEvent, at least once. The sink is an operation of a Tool or a
// ClusterTool, which whoever may write Tools declared: it brings the
// address, the credentials, the TLS settings and the classification of the
// answers, and the manager's egress policy applies to it as to every tool.
// An operation's author only names it, and so never chooses where the
// manager posts, nor pairs an address with a Secret.
type Subscriber struct {
	// name identifies the subscriber within the object. It is part of the
	// event's id, so it must not change.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`
	Name string `json:"name"`

	// toolRef names the Tool (in the object's namespace) or the ClusterTool
	// whose operation receives the event. A ClusterTool serves only the
	// namespaces its namespaceSelector selects, as for a call.
	// +required
	ToolRef SinkToolReference `json:"toolRef"`

	// operation is the tool's operation that receives the event: its
	// method (POST by default) and path, and its request shape applied to
	// the event's data as parameters. The event's id is the request's
	// idempotency key, and its CloudEvents attributes are ce-* headers
	// (binary content mode). The tool's classification of the answer says
	// what came of a delivery: a success is delivered, a permanent failure
	// ends the delivery, anything else is tried again.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	Operation string `json:"operation"`
}

// SinkToolReference names a Tool in the same namespace or a ClusterTool, as
// ToolReference does, with no default written into the list it sits in: a
// default inside a list item would make every re-apply of an unchanged
// manifest a change.
type SinkToolReference struct {
	// kind is Tool (when empty) or ClusterTool.
	// +optional
	Kind ToolKind `json:"kind,omitempty"`

	// name of the Tool or ClusterTool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Tool is the reference as a ToolReference, its kind made explicit.
func (r SinkToolReference) Tool() ToolReference {
	ref := ToolReference(r)
	ref.Kind = ref.EffectiveKind()
	return ref
}

// DeliveryState is where the delivery of one outbox entry stands.
// +kubebuilder:validation:Enum=Pending;Delivered;Failed
type DeliveryState string

const (
	// DeliveryPending: not delivered yet; the relay keeps trying.
	DeliveryPending DeliveryState = "Pending"
	// DeliveryDelivered: the subscriber answered 2xx to one delivery.
	DeliveryDelivered DeliveryState = "Delivered"
	// DeliveryFailed: the delivery budget is spent; no more attempts.
	DeliveryFailed DeliveryState = "Failed"
)

// OutboxEntry is the announcement of an outcome to one subscriber, written
// in the same status write as the outcome itself, and its delivery.
type OutboxEntry struct {
	// subscriber is the name of the spec.subscribers entry.
	// +required
	Subscriber string `json:"subscriber"`

	// eventID is the CloudEvent id, the same on every delivery of this
	// entry and for every object that announces the same outcome (a
	// duplicate, an operation made again by a redelivered message):
	// "<scope>/<state>/<effect>/<subscriber>". An operation's scope is its
	// status.recordName and its effect its status.externalObjectID; a
	// saga's scope is "saga-" and a digest of its namespace and key, and its
	// effect a digest of its steps' external ids. The effect is "-" when
	// there is none, and a digest when it is long or unusual. Entries
	// written by earlier versions read "<object UID>/<state>/<subscriber>".
	// Consumers dedupe on it.
	// +required
	// +kubebuilder:validation:MaxLength=256
	EventID string `json:"eventID"`

	// type is the CloudEvent type, for example
	// dev.once.operation.committed.
	// +required
	Type string `json:"type"`

	// state of the delivery.
	// +required
	State DeliveryState `json:"state"`

	// attempts counts deliveries tried.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`

	// lastAttemptTime is when the last delivery was tried.
	// +optional
	LastAttemptTime *metav1.Time `json:"lastAttemptTime,omitempty"`

	// nextAttemptTime is when the next delivery may be tried.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`

	// deliveredTime is when a delivery was acknowledged.
	// +optional
	DeliveredTime *metav1.Time `json:"deliveredTime,omitempty"`

	// httpStatus is the subscriber's last answer, zero if none arrived.
	// +optional
	HTTPStatus int32 `json:"httpStatus,omitempty"`

	// message says what the last delivery came to.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// Event reasons of the relay. A delivery is routine and says so in status
// only; a spent budget is an Event.
const (
	// EventDeliveryFailed: the delivery budget to a subscriber is spent.
	EventDeliveryFailed = "DeliveryFailed"
)
