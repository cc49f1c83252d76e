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

package controller

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// usableTool reads the tool that ref names for an operation of namespace
// and checks that it may serve it operation. When it may not, reason and
// msg say why: ToolNotFound, NamespaceNotAllowed, ToolInvalid or
// OperationNotDeclared. A manager that watches only the namespaces in
// watched (none: all) serves no ClusterTool: it has no rights to read them,
// and its cache would wait for them forever.
func usableTool(ctx context.Context, c client.Reader, validator ToolValidator, watched []string, ref v1.ToolReference,
	namespace, operation string) (tool v1.GenericTool, reason, msg string, err error) {
	if ref.Kind == v1.ToolKindClusterTool && len(watched) > 0 {
		return nil, v1.ReasonToolNotFound, fmt.Sprintf(
			"ClusterTool %s is not served by a manager that watches only namespaces %s (--watch-namespaces)",
			ref.Name, strings.Join(watched, ",")), nil
	}
	tool, key := ref.Object(namespace)
	if err := c.Get(ctx, key, tool); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, "", "", err
		}
		return nil, v1.ReasonToolNotFound, fmt.Sprintf("%s %s does not exist", ref.Kind, ref.Name), nil
	}
	if reason, msg, err := toolAccess(ctx, c, tool, namespace); err != nil || reason != "" {
		return nil, reason, msg, err
	}
	spec := tool.GetSpec()
	if err := validator.Validate(spec); err != nil {
		return nil, v1.ReasonToolInvalid, fmt.Sprintf("%s %s is not valid: %v", ref.Kind, ref.Name, err), nil
	}
	if spec.Operation(operation) == nil {
		return nil, v1.ReasonOperationNotDeclared, fmt.Sprintf("%s %s offers no operation %q",
			ref.Kind, ref.Name, operation), nil
	}
	return tool, "", "", nil
}

// toolAccess says why the operation's namespace may not use tool, as a
// reason and a message; an empty reason means it may. A Tool serves its own
// namespace only (the reference cannot name another); a ClusterTool serves
// the namespaces its spec.namespaceSelector selects, all when it has none.
func toolAccess(ctx context.Context, r client.Reader, tool v1.GenericTool, namespace string) (reason, msg string, err error) {
	ct, ok := tool.(*v1.ClusterTool)
	if !ok || ct.Spec.NamespaceSelector == nil {
		return "", "", nil
	}
	sel, err := metav1.LabelSelectorAsSelector(ct.Spec.NamespaceSelector)
	if err != nil {
		return v1.ReasonToolInvalid, fmt.Sprintf("ClusterTool %s has an invalid spec.namespaceSelector: %v",
			ct.Name, err), nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return "", "", fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if !sel.Matches(labels.Set(ns.Labels)) {
		return v1.ReasonNamespaceNotAllowed, fmt.Sprintf(
			"ClusterTool %s does not serve namespace %s: its spec.namespaceSelector (%s) does not select the namespace's labels",
			ct.Name, namespace, sel), nil
	}
	return "", "", nil
}

// namespaceLabelsChanged lets through only the namespace events that can
// change a ClusterTool's verdict on the namespace.
var namespaceLabelsChanged = builder.WithPredicates(predicate.LabelChangedPredicate{})

// operationsInNamespace wakes the unfinished operations of a namespace
// whose labels changed that use a ClusterTool, so that a namespace admitted
// by a namespaceSelector proceeds, and one no longer admitted stops.
func (r *SideEffectOperationReconciler) operationsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1.SideEffectOperationList
	// Read only: a namespace's every operation is not copied on each of
	// its events (every namespace has one when the manager starts).
	if err := r.List(ctx, &list, client.InNamespace(o.GetName()), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	var cluster []v1.SideEffectOperation
	for _, op := range list.Items {
		if op.Spec.ToolRef.Kind == v1.ToolKindClusterTool {
			cluster = append(cluster, op)
		}
	}
	return unfinished(cluster)
}

// toolIDOf is toolID of a tool.
func toolIDOf(t v1.GenericTool) string {
	return toolID(v1.ToolReference{Kind: t.Kind(), Name: t.GetName()}, t.GetNamespace())
}

// toolID names, within the manager, the tool an operation in namespace
// refers to (ClusterTools have no namespace): the value of the operations'
// tool index and the key of the tool's retry budget. It is not the key
// sent to the tool, which is protocol.Scope.ToolKey.
func toolID(ref v1.ToolReference, namespace string) string {
	kind := ref.EffectiveKind()
	if kind == v1.ToolKindClusterTool {
		namespace = ""
	}
	return string(kind) + "/" + namespace + "/" + ref.Name
}
