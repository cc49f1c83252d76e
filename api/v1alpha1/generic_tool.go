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
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// GenericTool is a Tool or a ClusterTool: one spec and one status behind
// two scopes.
// +kubebuilder:object:generate=false
type GenericTool interface {
	client.Object
	GetSpec() *ToolSpec
	GetStatus() *ToolStatus
	// Kind is Tool or ClusterTool, also when TypeMeta is empty.
	Kind() ToolKind
}

var (
	_ GenericTool = &Tool{}
	_ GenericTool = &ClusterTool{}
)

// GetSpec returns the tool's spec.
func (t *Tool) GetSpec() *ToolSpec { return &t.Spec }

// GetStatus returns the tool's status.
func (t *Tool) GetStatus() *ToolStatus { return &t.Status }

// Kind returns ToolKindTool.
func (t *Tool) Kind() ToolKind { return ToolKindTool }

// GetSpec returns the tool's spec.
func (t *ClusterTool) GetSpec() *ToolSpec { return &t.Spec.ToolSpec }

// GetStatus returns the tool's status.
func (t *ClusterTool) GetStatus() *ToolStatus { return &t.Status }

// Kind returns ToolKindClusterTool.
func (t *ClusterTool) Kind() ToolKind { return ToolKindClusterTool }

// Operation returns the operation called name, or nil.
func (s *ToolSpec) Operation(name string) *ToolOperation {
	for i := range s.Operations {
		if s.Operations[i].Name == name {
			return &s.Operations[i]
		}
	}
	return nil
}
