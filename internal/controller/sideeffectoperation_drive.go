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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// The driver decides what the pass of an unfinished operation does next.
// Reconcile hands it such an operation. It checks what a planned operation
// needs, binds the scope, writes a held answer first, and carries out the
// protocol's decision (step). The connection, the claim, the call and the
// writes it asks for do one thing each and return to it.

// secretRetry is how soon an operation blocked on a Secret looks again:
// Secrets are not watched.
const secretRetry = 10 * time.Second

// drive runs the phases of an unfinished operation.
func (r *SideEffectOperationReconciler) drive(p *pass) (reconcile.Result, error) {
	// An operation this manager holds an answer for has claimed, whatever
	// a lagging cache shows: the answer is written first (I12), not held
	// back by checks that only a planned operation needs.
	_, answered := r.held.Load(p.op.UID)
	planned := p.st.State.IsPlanned() && !answered
	if planned {
		if no := protocol.CheckParameters(p.params); no != nil {
			return r.refuse(p, no)
		}
		if no := protocol.CheckNumbers(rawParameters(p.op)); no != nil {
			return r.refuse(p, no)
		}
		if going, err := r.namespaceGoing(p); err != nil || going {
			if err != nil {
				return reconcile.Result{}, err
			}
			return r.block(p, v1.ReasonNamespaceTerminating, fmt.Sprintf(
				"Namespace %s is being deleted, and its records with it: no attempt starts here", p.op.Namespace), 0)
		}
		if msg, err := r.sagaGone(p); err != nil || msg != "" {
			if err != nil {
				return reconcile.Result{}, err
			}
			return r.block(p, v1.ReasonSagaGone, msg, 0)
		}
	}
	if !protocol.NeedsTool(p.st, p.op.Spec.Resolution, p.env) {
		// A person's MarkCommitted or Fail is applied even while the tool
		// is missing or broken.
		return r.step(p, p.decide())
	}
	if reason, msg, err := r.readTool(p); err != nil || reason != "" {
		if a := r.takeHeld(p); a != nil {
			// The answer first: a status that says the tool is missing,
			// written from a lagging cache, would lose to the claim's
			// newer version and end the pass with the answer unwritten.
			return reconcile.Result{}, r.writeAnswerWithoutTool(p, a, err)
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		return r.block(p, reason, msg, 0)
	}
	if planned {
		if no := protocol.CheckRetention(p.policy, p.tool.GetSpec(), string(p.tool.Kind())+" "+p.tool.GetName()); no != nil {
			return r.refuse(p, no)
		}
		if err := r.Validator.CheckParameters(p.tool.GetSpec(), p.op.Spec.Operation, p.params); err != nil {
			return r.fail(p, v1.ErrorInvalid, v1.ReasonParametersInvalid, err.Error())
		}
		if ok, err := r.bindScope(p); !ok {
			return reconcile.Result{}, err
		}
	}
	if a := r.takeHeld(p); a != nil {
		if res, done, err := r.resume(p, a); done {
			return res, err
		}
	}
	return r.step(p, p.decide())
}

// step carries out a decision. A write is written. A decision that calls
// the tool goes claim → call → write: the claim is written first, and the
// answer's decision is written fenced on that claim. A decision that follows an
// answer never calls the tool, so a pass makes one call at most.
func (r *SideEffectOperationReconciler) step(p *pass, d protocol.Decision) (reconcile.Result, error) {
	switch {
	case d.Action == protocol.ActionWait:
		return reconcile.Result{RequeueAfter: d.RequeueAfter}, nil
	case d.Action == protocol.ActionDone:
		return reconcile.Result{}, nil
	case !d.Action.IsCall():
		return reconcile.Result{RequeueAfter: d.RequeueAfter}, r.writeStatus(p, d)
	case p.makesNoCall():
		// The manager is stopping: the next manager makes this call.
		return reconcile.Result{}, nil
	}
	// One namespace's calls, and one tool's, take at most their share of
	// the workers, from the claim to the answer's write: a pass that finds
	// either share taken looks again soon, and claims nothing.
	leaveShare, ok := r.NamespaceShare.Enter(p.op.Namespace)
	if !ok {
		return r.waitForShare(p)
	}
	defer leaveShare()
	leave, ok := r.Bulkhead.Enter(toolIDOf(p.tool))
	if !ok {
		return r.deferCall(p)
	}
	defer leave()
	if err := r.connect(p); err != nil {
		return r.block(p, v1.ReasonToolInvalid, fmt.Sprintf("%s %s cannot be called: %v",
			p.tool.Kind(), p.tool.GetName(), err), secretRetry)
	}
	if wait, ok := r.takeRetry(p, d); !ok {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	if err := r.ensureFinalizer(p); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.writeStatus(p, d); err != nil {
		return reconcile.Result{}, err
	}
	a, abandoned := r.call(p, d.Action)
	if abandoned {
		return reconcile.Result{}, nil
	}
	p.env.Now = r.Clock.Now()
	return r.writeAnswer(p, a)
}

// sagaGone says why a step or a compensation that has not claimed yet
// must not claim. Empty means it may run. It must not when the saga that
// controls it is gone, is another object of its name, or is being deleted:
// no one drives that saga any more.
//
// A saga's pass that read its saga before a person deleted it may create
// the next step after the deletion. The garbage collector deletes such a
// step, but only some time later, and a manager could run it meanwhile: an
// effect nobody asks for, after the steps before it may have been
// forgotten. The cache may not have seen a saga created a moment ago, so
// its absence there is confirmed past the cache. A deletion between this
// check and the claim, or of a saga whose step already claimed, does not
// stop the step.
func (r *SideEffectOperationReconciler) sagaGone(p *pass) (string, error) {
	if !controlledBySaga(p.op) {
		return "", nil
	}
	ref := metav1.GetControllerOfNoCopy(p.op)
	key := client.ObjectKey{Namespace: p.op.Namespace, Name: ref.Name}
	saga := &v1.Saga{}
	err := r.Get(p.ctx, key, saga)
	if err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}
	if err != nil || saga.UID != ref.UID {
		saga = &v1.Saga{}
		if err := r.APIReader.Get(p.ctx, key, saga); apierrors.IsNotFound(err) {
			saga = nil
		} else if err != nil {
			return "", err
		}
	}
	var why string
	switch {
	case saga == nil:
		why = "is gone"
	case saga.UID != ref.UID:
		why = "is gone (the saga of that name now is another)"
	case !saga.DeletionTimestamp.IsZero():
		why = "is being deleted"
	default:
		return "", nil
	}
	return fmt.Sprintf("Saga %s, which made this operation, %s: it does not run, and the garbage collector deletes it",
		ref.Name, why), nil
}

// namespaceGoing reports whether the operation's namespace is being
// deleted, as the manager's cache shows it. Its records go with it, in
// whatever order the namespace controller deletes them, so an effect made
// now would be remembered by no one: a create that admission let in as
// the deletion began makes no attempt. A manager that does not watch
// Namespaces (a namespaced install) cannot tell, and goes on.
func (r *SideEffectOperationReconciler) namespaceGoing(p *pass) (bool, error) {
	if len(r.WatchNamespaces) > 0 {
		return false, nil
	}
	ns := &corev1.Namespace{}
	err := r.Get(p.ctx, client.ObjectKey{Name: p.op.Namespace}, ns)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return false, nil
	}
	return err == nil && !ns.DeletionTimestamp.IsZero(), err
}

// deferCall requeues a pass whose tool's calls take their share of the
// workers (Bulkhead), before it claims anything.
func (r *SideEffectOperationReconciler) deferCall(p *pass) (reconcile.Result, error) {
	bulkheadFull(p.tool)
	p.log.V(1).Info("The tool's calls take their share of the workers; call deferred", "tool", p.tool.GetName())
	return reconcile.Result{RequeueAfter: bulkheadRetry/2 + r.jitter()(bulkheadRetry/2)}, nil
}

// waitForShare requeues a pass whose namespace's calls take its share of
// the workers (NamespaceShare), before it claims anything. The status says
// so when the wait begins; the passes that find the share still taken
// write nothing.
func (r *SideEffectOperationReconciler) waitForShare(p *pass) (reconcile.Result, error) {
	namespaceShareFull(p.op.Namespace, "SideEffectOperation")
	retry := reconcile.Result{RequeueAfter: bulkheadRetry/2 + r.jitter()(bulkheadRetry/2)}
	msg := fmt.Sprintf("Namespace %s has %d calls in flight, its share of the workers: this call waits for one to end",
		p.op.Namespace, r.NamespaceShare.Max)
	st := protocol.Waiting(p.st, p.env, v1.ReasonWaitingForNamespaceShare, msg)
	if equality.Semantic.DeepEqual(st, p.op.Status) {
		return retry, nil
	}
	// Routine: an event per waiting operation would flood the namespace.
	if err := r.writeStatus(p, protocol.Decision{Action: protocol.ActionWrite, Status: st,
		Event: &protocol.Event{Routine: true, Reason: v1.ReasonWaitingForNamespaceShare, Message: msg}}); err != nil {
		return reconcile.Result{}, err
	}
	return retry, nil
}

// block writes that the operation waits for something outside it, if its
// status does not say so already.
func (r *SideEffectOperationReconciler) block(p *pass, reason, msg string, retry time.Duration) (reconcile.Result, error) {
	st := protocol.Blocked(p.st, p.env, reason, msg)
	if !equality.Semantic.DeepEqual(st, p.op.Status) {
		if err := r.writeStatus(p, protocol.Decision{Action: protocol.ActionWrite, Status: st,
			Event: &protocol.Event{Warning: true, Reason: reason, Message: msg}}); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: retry}, nil
}

// refuse ends an operation that must not execute, for a reason found
// before any call.
func (r *SideEffectOperationReconciler) refuse(p *pass, no *protocol.Refusal) (reconcile.Result, error) {
	return r.fail(p, no.Class, no.Reason, no.Message)
}

// fail ends an operation that must not execute.
func (r *SideEffectOperationReconciler) fail(p *pass, class v1.ErrorClass, reason, msg string) (reconcile.Result, error) {
	return reconcile.Result{}, r.writeStatus(p, protocol.Fail(p.st, p.policy, p.env, class, reason, msg))
}
