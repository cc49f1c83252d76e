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

package kubectlonce

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Shell completion: cobra's, as `kubectl-once completion bash|zsh` prints
// it for kubectl-once, and as kubectl (1.26 and later) asks for it through
// the script kubectl_complete-once, which runs `kubectl-once __complete`.
// Subcommands and flags complete from the command tree; the NAME argument
// and some flags' values from the cluster, with one or two lists, bounded
// by completionTimeout.

// completionTimeout bounds what a completion asks the cluster: a slow
// cluster completes nothing rather than hang the shell.
const completionTimeout = 5 * time.Second

// nameFilter says which names complete the NAME argument of a command.
type nameFilter int

const (
	// anyName: every operation and saga (why).
	anyName nameFilter = iota
	// reviewName: operations and sagas in NeedsReview (resolve).
	reviewName
	// approvalName: sagas waiting for an approval (approve).
	approvalName
)

// completeNames completes the first argument with the names f picks, in
// the namespace of the flags given so far.
func (o *Options) completeNames(f nameFilter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		names, err := o.names(ctx, f, toComplete)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// names lists the names f picks that start with prefix, each with a
// description: the state it waits in, or its state.
func (o *Options) names(ctx context.Context, f nameFilter, prefix string) ([]cobra.Completion, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, err
	}
	var ops v1.SideEffectOperationList
	if f != approvalName {
		if err := c.List(ctx, &ops, client.InNamespace(ns)); err != nil {
			return nil, err
		}
	}
	var sagas v1.SagaList
	if err := c.List(ctx, &sagas, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	return nameCompletions(f, ops.Items, sagas.Items, prefix), nil
}

// nameCompletions are the names f picks among ops and sagas that start
// with prefix, sorted, each with a description after a tab. A prefix with
// a kind (seo/, saga/) completes names of that kind, with the kind.
func nameCompletions(f nameFilter, ops []v1.SideEffectOperation, sagas []v1.Saga, prefix string) []cobra.Completion {
	kindPrefix := ""
	var only *kind
	if p, _, found := strings.Cut(prefix, "/"); found {
		k, _, err := parseName(p+"/x", false)
		if err != nil {
			return nil
		}
		kindPrefix, only = p+"/", k
	}
	var out []cobra.Completion
	add := func(k *kind, name, what string) {
		if only != nil && only != k {
			return
		}
		if name = kindPrefix + name; strings.HasPrefix(name, prefix) {
			out = append(out, cobra.CompletionWithDesc(name, k.Name+" "+what))
		}
	}
	if f == anyName {
		for i := range ops {
			add(&operationKind, ops[i].Name, string(ops[i].Status.State.OrPlanned()))
		}
		for i := range sagas {
			add(&sagaKind, sagas[i].Name, string(sagas[i].Status.State.OrPlanned()))
		}
	} else {
		for _, r := range reviewRows(ops, sagas) {
			if f == reviewName && r.Wait == waitReview || f == approvalName && r.Wait == waitApproval {
				k := &operationKind
				if r.Kind == sagaKind.Name {
					k = &sagaKind
				}
				add(k, r.Name, r.Wait)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// completeApprovalSteps completes approve's --step with the steps of the
// saga named that require approval and have none yet.
func (o *Options) completeApprovalSteps(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion,
	cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	_, name, err := parseName(args[0], true)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	c, err := o.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	ns, err := o.namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	s := &v1.Saga{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		cobra.CompDebugln(err.Error(), true)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, step := range s.Spec.Steps {
		if step.RequiresApproval && strings.HasPrefix(step.Name, toComplete) && !approved(s, step.Name) {
			out = append(out, step.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// approved reports whether a saga's step is approved, applied or written.
func approved(s *v1.Saga, step string) bool {
	for _, a := range s.Spec.Approvals {
		if a.Step == step {
			return true
		}
	}
	for _, ss := range s.Status.Steps {
		if ss.Name == step && ss.Approval != nil {
			return true
		}
	}
	return false
}

// completeNamespaces completes -n with the cluster's namespaces.
func (o *Options) completeNamespaces(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion,
	cobra.ShellCompDirective) {
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	c, err := o.client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var list corev1.NamespaceList
	if err := c.List(ctx, &list); err != nil {
		cobra.CompDebugln(err.Error(), true)
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, ns := range list.Items {
		if strings.HasPrefix(ns.Name, toComplete) {
			out = append(out, ns.Name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeBrakeTargets completes the arguments of suspend, resume and
// cancel. Before a slash it offers the kinds that have the action's field
// (tool/, seo/). After TYPE/, or after a TYPE, it offers the names the
// action would change: those whose field it would write, and that have
// not ended.
func (o *Options) completeBrakeTargets(a brakeAction) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		word, _, slash := strings.Cut(toComplete, "/")
		typed := ""
		if len(args) > 0 && !strings.Contains(args[0], "/") {
			typed, slash = args[0], true
		}
		if !slash {
			var out []cobra.Completion
			for _, k := range brakeKinds {
				if k.has(a.Field) && strings.HasPrefix(k.Words[0]+"/", toComplete) {
					out = append(out, k.Words[0]+"/")
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
		}
		prefix := word + "/"
		if typed != "" {
			word, prefix = typed, ""
		}
		k := lookupBrakeKind(word)
		if k == nil || !k.has(a.Field) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		names, err := o.brakeNames(ctx, k, a)
		if err != nil {
			cobra.CompDebugln(err.Error(), true)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range names {
			if strings.HasPrefix(prefix+n, toComplete) {
				out = append(out, prefix+n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// brakeNames lists the names of kind k that action a would change, in
// the namespace of the flags given so far.
func (o *Options) brakeNames(ctx context.Context, k *brakeKind, a brakeAction) ([]string, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	targets, _, err := o.readTargets(ctx, c, nil, k, selectFlags{all: true})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range targets {
		if skipReason(t, a) == "" {
			out = append(out, t.obj.GetName())
		}
	}
	slices.Sort(out)
	return out, nil
}
