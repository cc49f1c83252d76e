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

// ClusterToolSpec is a ToolSpec, shared by every namespace the
// namespaceSelector admits. The selector is ClusterTool's own field rather
// than part of ToolSpec: a Tool is only ever used from its own namespace, so
// the field would mean nothing there. The selector is required, so that a
// ClusterTool serves every namespace only when its author says so.
// +kubebuilder:validation:XValidation:rule="has(self.namespaceSelector)",message="spec.namespaceSelector is required: select the namespaces whose operations may use this ClusterTool by their labels, or write namespaceSelector: {} to let every namespace use it"
type ClusterToolSpec struct {
	ToolSpec `json:",inline"`

	// namespaceSelector selects, by their labels, the namespaces whose
	// SideEffectOperations may use this tool; the empty selector ({})
	// selects every namespace. Required: a ClusterTool written before it
	// was, and not changed since, serves every namespace. An operation
	// from a namespace that is not selected makes no call and stalls with
	// reason NamespaceNotAllowed, and proceeds once its namespace or this
	// selector changes to admit it. The selector is checked before every
	// call, so relabelling a namespace also stops the reconciling calls of
	// its unfinished operations.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=once
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.idempotency.mode`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.http.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterTool is an external system that performs side effects, shared by
// all namespaces. Its Secrets live in the manager's cluster resource
// namespace.
type ClusterTool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is a standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec describes the tool, and which namespaces may use it.
	// +required
	Spec ClusterToolSpec `json:"spec"`

	// status is what Once observed about the definition.
	// +optional
	Status ToolStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ClusterToolList contains a list of ClusterTool.
type ClusterToolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []ClusterTool `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &ClusterTool{}, &ClusterToolList{})
		return nil
	})
}
