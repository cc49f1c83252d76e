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
	"errors"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// HeaderResolver resolves a tool's headers, reading the Secrets they name.
type HeaderResolver interface {
	Headers(ctx context.Context, tool v1.GenericTool) (http.Header, error)
}

// ToolReconciler reports whether a Tool's or a ClusterTool's definition
// can be used: its expressions compile and the Secret keys it names exist.
// One reconciler serves both kinds through v1.GenericTool.
type ToolReconciler struct {
	client.Client
	Validator ToolValidator
	// Headers resolves header values the way calls do, so that the verdict
	// is the one a call would meet.
	Headers HeaderResolver
	Clock   clock.Clock
	// ErrorBackoff is how a check that returned an error is retried.
	ErrorBackoff ErrorBackoff
	// MaxConcurrentReconciles bounds the tools checked at once: a tool
	// whose token endpoint does not answer holds one worker, until
	// maxToolCheck.
	MaxConcurrentReconciles int
	// name names the controller; newTool makes an empty object of the
	// kind this reconciler serves.
	name    string
	newTool func() v1.GenericTool
}

// +kubebuilder:rbac:groups=effects.once.dev,resources=tools;clustertools,verbs=get;list;watch
// +kubebuilder:rbac:groups=effects.once.dev,resources=tools/status;clustertools/status,verbs=update

// Reconcile validates one tool and writes the verdict in its conditions.
func (r *ToolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	tool := r.newTool()
	if err := r.Get(ctx, req.NamespacedName, tool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	problem := r.check(ctx, tool)
	st := tool.GetStatus()
	before := st.DeepCopy()
	st.ObservedGeneration = tool.GetGeneration()
	ready := metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonValid,
		Message: "Definition is valid", ObservedGeneration: tool.GetGeneration(),
		LastTransitionTime: metav1.NewTime(r.Clock.Now())}
	stalled := ready
	stalled.Type, stalled.Status = v1.ConditionStalled, metav1.ConditionFalse
	if warnings := r.Validator.Warnings(tool.GetSpec()); len(warnings) > 0 {
		ready.Message += "; warning: " + strings.Join(warnings, "; warning: ")
	}
	if problem != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, v1.ReasonInvalid, problem.Error()
		stalled.Status, stalled.Reason, stalled.Message = metav1.ConditionTrue, v1.ReasonInvalid, problem.Error()
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	meta.SetStatusCondition(&st.Conditions, stalled)
	var res ctrl.Result
	if problem != nil {
		// Secrets are not watched: look again for the one that is missing.
		res.RequeueAfter = secretRetry
	}
	if equality.Semantic.DeepEqual(before, st) {
		return res, nil
	}
	if err := r.Status().Update(ctx, tool); err != nil && !apierrors.IsConflict(err) {
		return res, client.IgnoreNotFound(err)
	}
	// A conflict is requeued by the newer version's own event.
	return res, nil
}

// maxToolCheck bounds the check of a tool's credentials (its OAuth2 token
// request included), within the tool's own timeout.
const maxToolCheck = 10 * time.Second

// check returns what makes the tool unusable, or nil. It resolves the
// headers to see that their Secret keys exist, never to report values.
func (r *ToolReconciler) check(ctx context.Context, tool v1.GenericTool) error {
	ctx, cancel := context.WithTimeout(ctx, min(maxToolCheck,
		protocol.Timeout(tool.GetSpec(), &v1.SideEffectOperationSpec{})))
	defer cancel()
	_, err := r.Headers.Headers(ctx, tool)
	return errors.Join(r.Validator.Validate(tool.GetSpec()), err)
}

// newToolReconcilers are the reconcilers of Tools and, if clusterTools, of
// ClusterTools, sharing everything but their kind.
func newToolReconcilers(base ToolReconciler, clusterTools bool) []*ToolReconciler {
	tool := base
	tool.name, tool.newTool = "tool", func() v1.GenericTool { return &v1.Tool{} }
	rs := []*ToolReconciler{&tool}
	if clusterTools {
		ct := base
		ct.name, ct.newTool = "clustertool", func() v1.GenericTool { return &v1.ClusterTool{} }
		rs = append(rs, &ct)
	}
	return rs
}

// SetupWithManager runs the reconciler on the tools of its kind.
func (r *ToolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(r.newTool()).Named(r.name).
		WithOptions(controller.Options{RateLimiter: r.ErrorBackoff.rateLimiter(),
			MaxConcurrentReconciles: r.MaxConcurrentReconciles}).Complete(r)
}
