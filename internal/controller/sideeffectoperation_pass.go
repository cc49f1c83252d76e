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
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// secretRetry is how soon an operation blocked on a Secret looks again:
// Secrets are not watched.
const secretRetry = 10 * time.Second

// A pass of the operation reconciler reads in the order of an attempt's
// lifecycle, a file each:
//
//   - sideeffectoperation_pass.go: what the pass learns of the operation
//     and its tool, and the decision it carries out (drive, step);
//   - sideeffectoperation_scope.go: binding the operation to its scope's
//     record, before any claim;
//   - sideeffectoperation_claim.go: the claim, written first, renewed while
//     a long call runs, and asked as the call's fence;
//   - sideeffectoperation_call.go: the call to the tool, and its answer;
//   - sideeffectoperation_write.go: the answer written, fenced on the
//     claim, or kept as evidence once the claim moved on; the one status
//     writer.

// pass is one reconciliation of one operation: what it learned, and the
// working copy of its status.
type pass struct {
	// ctx is for the pass's calls and writes: it does not end when the
	// manager stops, so that a call in flight is finished and its answer
	// written within its claim (the manager's graceful shutdown waits).
	// A pass that writes what a stopping manager holds keeps its bound.
	ctx context.Context
	// stopping ends when the manager stops; only failpoints wait on it.
	stopping context.Context
	log      logr.Logger
	op       *v1.SideEffectOperation
	st       v1.SideEffectOperationStatus
	scope    protocol.Scope
	params   []byte
	env      protocol.Env
	policy   protocol.Policy
	// timeout bounds one call.
	timeout time.Duration
	tool    v1.GenericTool
	client  effects.Client
}

func (r *SideEffectOperationReconciler) newPass(ctx context.Context, op *v1.SideEffectOperation) *pass {
	own := context.WithoutCancel(ctx)
	if ctx.Value(answersOnly{}) != nil {
		// A stopping manager's writes of what it holds end with the
		// bound heldWriter gives them: nothing waits for them after.
		own = ctx
	}
	return &pass{
		ctx:      own,
		stopping: ctx,
		log:      logf.FromContext(ctx),
		op:       op,
		st:       *op.Status.DeepCopy(),
		env: protocol.Env{Now: r.Clock.Now(), Holder: r.Holder, Generation: op.Generation, Jitter: r.jitter(),
			RecordName: protocol.OperationScope(op).RecordName(), Subscribers: op.Spec.Subscribers,
			Resolution: op.Spec.Resolution},
		// Until the tool is loaded, the policy knows what the operation
		// alone says: enough to apply a person's resolution or to fail.
		policy: protocol.Policy{Retention: protocol.Retention(&op.Spec),
			MaxClaimDuration: r.limits().MaxClaimDuration()},
	}
}

// adopt makes op, read again, the object of the pass: its version, and
// what the decisions read of its metadata and spec.
func (p *pass) adopt(op *v1.SideEffectOperation) {
	p.op = op
	p.env.Generation, p.env.Resolution = op.Generation, op.Spec.Resolution
}

// identify computes the operation's scope and request hash, and puts them
// in the working status.
func (p *pass) identify() error {
	spec := p.op.Spec
	p.scope = protocol.OperationScope(p.op)
	var raw []byte
	if spec.Parameters != nil {
		raw = spec.Parameters.Raw
	}
	hash, canonical, err := protocol.RequestHash(p.scope.Tool, spec.Operation, raw)
	if err != nil {
		return fmt.Errorf("spec.parameters cannot be hashed: %w", err)
	}
	p.params = canonical
	p.st.IdempotencyKey = p.scope.Key
	p.st.ToolIdempotencyKey = p.scope.ToolKey()
	p.st.RequestHash = hash
	p.st.RecordName = p.scope.RecordName()
	return nil
}

// result turns a pass's outcome into what controller-runtime expects:
// conflicts are requeued quietly, never surfaced.
func (p *pass) result(res reconcile.Result, err error) (reconcile.Result, error) {
	if apierrors.IsConflict(err) {
		p.log.V(1).Info("Lost a write to a newer version; waiting for it")
		return reconcile.Result{}, nil
	}
	return res, err
}

// drive runs the phases of an unfinished operation.
func (r *SideEffectOperationReconciler) drive(p *pass) (reconcile.Result, error) {
	// An operation this manager holds an answer for has claimed, whatever
	// a lagging cache shows: the answer is written first (I12), not held
	// back by checks that only a planned operation needs.
	_, answered := r.pending.Load(p.op.UID)
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
			res, _, err := r.block(p, v1.ReasonNamespaceTerminating, fmt.Sprintf(
				"Namespace %s is being deleted, and its records with it: no attempt starts here", p.op.Namespace), 0)
			return res, err
		}
		if msg, err := r.sagaGone(p); err != nil || msg != "" {
			if err != nil {
				return reconcile.Result{}, err
			}
			res, _, err := r.block(p, v1.ReasonSagaGone, msg, 0)
			return res, err
		}
	}
	if !protocol.NeedsTool(p.st, p.op.Spec.Resolution, p.env) {
		// A person's MarkCommitted or Fail is applied even while the tool
		// is missing or broken.
		return r.step(p, protocol.Next(p.st, p.op.Spec.Resolution, p.policy, p.env))
	}
	if reason, msg, err := r.readTool(p); err != nil || reason != "" {
		if a := r.takePending(p); a != nil {
			// The answer first: a status that says the tool is missing,
			// written from a lagging cache, would lose to the claim's
			// newer version and end the pass with the answer unwritten.
			return reconcile.Result{}, r.writeAnswerWithoutTool(p, a, err)
		}
		if err != nil {
			return reconcile.Result{}, err
		}
		res, _, err := r.block(p, reason, msg, 0)
		return res, err
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
	if a := r.takePending(p); a != nil {
		return r.resume(p, a)
	}
	return r.step(p, protocol.Next(p.st, p.op.Spec.Resolution, p.policy, p.env))
}

// sagaGone says why a step or a compensation that has not claimed yet must
// not: the saga that controls it is gone, is another object of its name, or
// is being deleted (no one drives a saga then). A saga's pass that read its
// saga before a person deleted it creates the next step after; the garbage
// collector deletes such a step, but only some time later, and a manager
// could run it meanwhile: an effect nobody asks for any more, after the
// steps before it may have been forgotten. Empty when the step may run. The
// cache may not have seen a saga created a moment ago: its absence there is
// confirmed past it. (A deletion between this check and the claim, or of a
// saga whose step already claimed, does not stop the step.)
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

// settledElsewhere reports whether an operation no longer waits for a call
// of any manager: it is terminal, or a person must decide.
func settledElsewhere(op *v1.SideEffectOperation) bool {
	return op.Status.State.IsTerminal() || op.Status.State == v1.StateNeedsReview
}

// readTool reads the operation's tool and derives the policy. reason and
// msg say why the operation must wait for the tool to exist or be fixed;
// nothing is written.
func (r *SideEffectOperationReconciler) readTool(p *pass) (reason, msg string, err error) {
	tool, reason, msg, err := usableTool(p.ctx, r.Client, r.Validator, r.WatchNamespaces, p.scope.Tool, p.op.Namespace, p.op.Spec.Operation)
	if err != nil || reason != "" {
		return reason, msg, err
	}
	spec := tool.GetSpec()
	p.tool = tool
	p.timeout = protocol.Timeout(spec, &p.op.Spec)
	p.policy = protocol.NewPolicy(spec, &p.op.Spec, r.limits())
	return "", "", nil
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

// limits are this manager's bounds on claims.
func (r *SideEffectOperationReconciler) limits() protocol.Limits {
	return protocol.Limits{MaxClaim: r.MaxClaim, ClaimGrace: r.ClaimGrace}
}

// block writes that the operation waits for something outside it, if its
// status does not say so already.
func (r *SideEffectOperationReconciler) block(p *pass, reason, msg string, retry time.Duration) (reconcile.Result, bool, error) {
	st := protocol.Blocked(p.st, p.env, reason, msg)
	if !equality.Semantic.DeepEqual(st, p.op.Status) {
		if err := r.writeStatus(p, protocol.Decision{Action: protocol.ActionWrite, Status: st,
			Event: &protocol.Event{Warning: true, Reason: reason, Message: msg}}); err != nil {
			return reconcile.Result{}, false, err
		}
	}
	return reconcile.Result{RequeueAfter: retry}, false, nil
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

// step carries out a decision: a write; or, for a decision that calls the
// tool, claim → call → write. The claim is written first; the answer's
// decision is written fenced on that claim. A decision that follows an
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
	if res, ok, err := r.prepareCall(p, d); !ok {
		return res, err
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
