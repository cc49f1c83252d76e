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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/lru"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/internal/shard"
)

// undecidedRetry is how long a saga waits before asking again a tool
// whose answer to a validation decided nothing.
const undecidedRetry = 10 * time.Second

// conflictRetry is how soon a saga whose checkpoint met a newer object is
// decided again: time for the cache to catch up.
const conflictRetry = 200 * time.Millisecond

// retryUntilDoneAttempts is the retry policy of a retryUntilDone step that
// sets none: the most attempts an operation allows.
const retryUntilDoneAttempts = 100

// SagaReconciler runs Sagas. It decides nothing about effects. Each step
// and each compensation is a SideEffectOperation, which the protocol runs.
// The saga validates the steps, computes their parameters and creates
// their operations in order. After a step fails for good, it creates the
// compensations in reverse.
type SagaReconciler struct {
	client.Client
	// APIReader reads past the cache, where a read must see the latest.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Connector effects.Connector
	// Bulkhead is the operations' (Reconcilers.Operation). A step's dry
	// run takes a place among its tool's calls. Nil means no bound.
	Bulkhead *Bulkhead
	// NamespaceShare bounds, per namespace, the dry runs in flight. It is
	// the saga workers' own, as the operations' is theirs. Nil means no
	// bound.
	NamespaceShare *Bulkhead
	Validator      ToolValidator
	Clock          clock.Clock
	// MaxConcurrentReconciles bounds the sagas handled at once.
	MaxConcurrentReconciles int
	// WatchNamespaces are the only namespaces the manager watches. Empty
	// means all. A manager restricted to some reads no ClusterTools.
	WatchNamespaces []string
	// Shards says which sagas this manager handles. Nil means all.
	Shards *shard.Sharder
	// ErrorBackoff is how a pass that returned an error is retried.
	ErrorBackoff ErrorBackoff
	// EvalTimeout bounds the wall time of the expressions of one of a
	// saga's steps, together. Zero means saga.DefaultEvalTimeout.
	EvalTimeout time.Duration

	// plans keeps the compiled expressions of recent sagas: compiling
	// costs far more than a decision, and a saga's steps never change.
	plans *lru.Cache // planKey → compiled
	// undecided keeps, for a step whose validation decided nothing, when
	// it may be asked again. The message such a step writes wakes the next
	// pass at once. A message that changes with every answer (a request id
	// in a 503's body) would then have it ask the tool without end. A
	// restart forgets it, and asks once more at once.
	undecided *lru.Cache // stepKey → time.Time
}

// stepKey names one round of one step of a saga object.
type stepKey struct {
	uid   types.UID
	step  string
	round int32
}

// plansSize bounds the compiled sagas kept.
const plansSize = 1024

// planKey names a saga's spec: its object and generation.
type planKey struct {
	uid        types.UID
	generation int64
}

// compiled is a saga's plan, or why it does not compile.
type compiled struct {
	plan *saga.Plan
	err  error
}

// plan compiles s's expressions, once per generation.
func (r *SagaReconciler) plan(s *v1.Saga) (*saga.Plan, error) {
	key := planKey{uid: s.UID, generation: s.Generation}
	if c, ok := r.plans.Get(key); ok {
		return c.(compiled).plan, c.(compiled).err
	}
	plan, err := saga.Compile(&s.Spec)
	if plan != nil {
		plan.EvalTimeout = r.EvalTimeout
	}
	r.plans.Add(key, compiled{plan: plan, err: err})
	return plan, err
}

// +kubebuilder:rbac:groups=effects.once.dev,resources=sagas,verbs=get;list;watch
// +kubebuilder:rbac:groups=effects.once.dev,resources=sagas/status,verbs=update
// +kubebuilder:rbac:groups=effects.once.dev,resources=sideeffectoperations,verbs=get;list;watch;create;patch
// A step's operation carries a controller reference to its saga with
// blockOwnerDeletion, which the admission plugin
// OwnerReferencesPermissionEnforcement (on in OpenShift) admits only from
// whoever may update the saga's finalizers.
// +kubebuilder:rbac:groups=effects.once.dev,resources=sagas/finalizers,verbs=update

// Reconcile moves one saga on by as many decisions as it can take without
// waiting, and writes the checkpoint once.
func (r *SagaReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s v1.Saga
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	if s.Status.State.IsTerminal() && s.Status.ObservedGeneration == s.Generation {
		return r.expireSaga(ctx, &s)
	}
	if !r.Shards.OwnsObject(&s) {
		// Another manager holds the saga's shard; an event of one of its
		// operations woke it here.
		return ctrl.Result{}, nil
	}
	if sagaSpecNotCached(&s) {
		// The cache keeps no more than a bounded spec (boundSaga).
		uid := s.UID
		if err := r.APIReader.Get(ctx, req.NamespacedName, &s); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
		if s.UID != uid || !s.DeletionTimestamp.IsZero() {
			return ctrl.Result{}, nil
		}
	}
	ops, err := r.operations(ctx, &s)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan, planErr := r.plan(&s)
	view := saga.View{Name: s.Name, Generation: s.Generation, Namespace: s.Namespace, Spec: &s.Spec, Status: s.Status,
		Children: children(&s, ops), Plan: plan, PlanErr: planErr, Now: r.Clock.Now()}
	var requeue time.Duration
	// slow is an expression stopped by its time limit.
	var slow error
	// What this pass reads past the cache, it reads once.
	fresh := freshOps{}
	// Each decision validates a step, writes a checkpoint or creates one
	// operation, so a saga's whole pass is bounded by its steps; a pass cut
	// short writes its checkpoint, whose event brings the saga back.
	for range 4*len(s.Spec.Steps) + 4 {
		d := saga.Decide(view)
		before := view.Status
		view.Status = d.Status
		if d.Action.Kind == saga.ActionNone {
			break
		}
		if d.Action.Kind == saga.ActionCheckpoint {
			// The intent is written before the operation is made.
			if err := r.checkpoint(ctx, &s, view.Status); err != nil {
				return r.lost(err)
			}
			continue
		}
		if d.Action.Kind == saga.ActionRecall {
			if view.Remembered, err = r.recall(ctx, &s, view); err != nil {
				return ctrl.Result{}, err
			}
			continue
		}
		if d.Action.Kind == saga.ActionCancel {
			if err := r.cancelStep(ctx, &s, ops[d.Action.Name]); err != nil {
				return r.lost(err)
			}
			view.Children = children(&s, ops)
			continue
		}
		if d.Action.Kind == saga.ActionValidate {
			if requeue = r.validate(ctx, &s, plan, ops, fresh, &view, d.Action.Step); requeue > 0 {
				break
			}
			continue
		}
		if err := r.readResults(ctx, ops, fresh, view.Status); err != nil {
			return ctrl.Result{}, err
		}
		params, err := plan.Parameters(ctx, d.Action.Step, d.Action.Undo, inputs(&s), stepData(ops, view.Status))
		if errors.Is(err, saga.ErrTimeLimit) {
			// A starved CPU decides nothing: the pass ends, and the
			// error's backoff brings the saga back.
			view.Status.Steps[d.Action.Step].Message = "the parameters wait: " + err.Error()
			slow = fmt.Errorf("saga %s: step %s: %w", s.Name, d.Action.Name, err)
			break
		}
		if err != nil {
			// The operation cannot be made; the decision fails it before
			// any effect. Its move towards making it never happened: the
			// saga decides again from where it stood, so that a pass that
			// ends where the last one did writes nothing. (Written, the
			// move and its return carry this pass's time, and each write
			// wakes the next pass, without end.)
			view.Status = before
			if view.Uncreatable == nil {
				view.Uncreatable = map[string]string{}
			}
			view.Uncreatable[d.Action.Name] = fmt.Sprintf("the parameters cannot be computed: %v", err)
			continue
		}
		op, err := r.create(ctx, &s, params, d.Action)
		if err != nil {
			return ctrl.Result{}, err
		}
		ops[op.Name] = op
		view.Children = children(&s, ops)
	}
	if err := r.checkpoint(ctx, &s, view.Status); err != nil {
		return r.lost(err)
	}
	if slow != nil {
		return ctrl.Result{}, slow
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// recall reads, past the cache, the scope record of every step without an
// operation of this saga. It says what each holds (protocol.Holds). An
// earlier saga of the same key may have left an effect there that this one
// must not leave standing.
func (r *SagaReconciler) recall(ctx context.Context, s *v1.Saga, view saga.View) (map[string]string, error) {
	out := map[string]string{}
	now := r.Clock.Now()
	for i, step := range s.Spec.Steps {
		if saga.RanHere(view, i) {
			continue
		}
		tool, operation := saga.Target(step, false)
		scope := protocol.Scope{Namespace: s.Namespace, Tool: tool, Operation: operation,
			Key: saga.OperationKey(saga.Key(s.Name, &s.Spec), step.Name, false, 1)}
		rec := &v1.IdempotencyRecord{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: scope.RecordName()}, rec)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading the record of step %s: %w", step.Name, err)
		}
		if out[step.Name], err = r.holds(ctx, rec, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// holds is what a step's scope record stands for: its outcome, or, while
// the operation that owns it exists (another saga of the same key runs
// it), that operation's outcome or its attempt in flight.
func (r *SagaReconciler) holds(ctx context.Context, rec *v1.IdempotencyRecord, now time.Time) (string, error) {
	spec := rec.Spec
	if spec.Outcome == nil {
		owner, err := liveOwner(ctx, r.APIReader, rec)
		switch {
		case err != nil:
			return "", fmt.Errorf("reading operation %s, which owns record %s: %w", spec.Owner.Name, rec.Name, err)
		case owner == nil:
		case owner.Status.State.IsTerminal():
			o := outcomeOf(owner, now)
			spec.Outcome = &o
		case owner.Status.Attempts > 0:
			return fmt.Sprintf("operation %s is at attempt %d, its outcome not known yet", owner.Name,
				owner.Status.Attempts), nil
		}
	}
	return protocol.Holds(spec, now), nil
}

// lost ends a pass whose checkpoint could not be written, or whose cancel
// of a step's operation met a newer operation. A conflict means the pass
// read an object behind the API server's, or a person wrote it meanwhile.
// Nothing the pass decided since its last written checkpoint was acted on.
// The saga is decided again on the newer objects.
func (r *SagaReconciler) lost(err error) (ctrl.Result, error) {
	// An operation gone meanwhile (a person deleted it) is as much news.
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, err
}

// operations lists the saga's operations by name.
func (r *SagaReconciler) operations(ctx context.Context, s *v1.Saga) (map[string]*v1.SideEffectOperation, error) {
	var list v1.SideEffectOperationList
	if err := r.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{saga.LabelSaga: saga.LabelValue(s.Name)}); err != nil {
		return nil, fmt.Errorf("listing the operations of saga %s: %w", s.Name, err)
	}
	ops := make(map[string]*v1.SideEffectOperation, len(list.Items))
	for i := range list.Items {
		ops[list.Items[i].Name] = &list.Items[i]
	}
	return ops, nil
}

// children is what the decision reads of the operations.
func children(s *v1.Saga, ops map[string]*v1.SideEffectOperation) map[string]saga.Child {
	out := make(map[string]saga.Child, len(ops))
	for name, op := range ops {
		c := saga.Child{
			Key:              op.Spec.IdempotencyKey,
			Tool:             op.Spec.ToolRef,
			Operation:        op.Spec.Operation,
			State:            op.Status.State,
			DuplicateOf:      op.Status.DuplicateOf,
			ExternalObjectID: op.Status.ExternalObjectID,
			ResultDigest:     op.Status.ResultDigest,
			Foreign:          !metav1.IsControlledBy(op, s),
			Cancel:           op.Spec.Cancel,
			Unclaimed:        op.Status.Attempts == 0 && op.Status.Claim == nil,
		}
		if ready := meta.FindStatusCondition(op.Status.Conditions, v1.ConditionReady); ready != nil {
			c.Message = ready.Message
			c.Decided = op.Status.State == v1.StateFailedFinal && protocol.Unproven(ready.Reason)
			c.Reason = ready.Reason
		}
		out[name] = c
	}
	return out
}

// freshOps names the operations a pass has read past the cache. A pass
// reads each at most once, and a new pass starts with none: no pass
// computes parameters from what an earlier pass read.
type freshOps map[string]bool

// readResults reads past the cache the operations of the committed steps
// whose result the cache does not keep. The cache keeps a terminal
// operation without its result (terminalKept). readResults puts them in
// ops, so that the later steps' parameters are computed from the results
// as the API server has them. An operation read here (fresh) is not read
// again in the pass. That holds also when its result was too large to
// keep and it has none.
func (r *SagaReconciler) readResults(ctx context.Context, ops map[string]*v1.SideEffectOperation, fresh freshOps,
	status v1.SagaStatus) error {
	for _, ss := range status.Steps {
		op, ok := ops[ss.Operation]
		if !ok || fresh[ss.Operation] || op.Status.State != v1.StateCommitted || !resultNotCached(op) {
			continue
		}
		read := &v1.SideEffectOperation{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(op), read)
		if err == nil && read.UID != op.UID {
			// Another object under the name: not the step's result.
			err = fmt.Errorf("operation %s (uid %s) is gone; uid %s has its name now", op.Name, op.UID, read.UID)
		}
		if err != nil {
			// Gone meanwhile, too: the cache will show it, and the saga
			// decides again on what its checkpoint holds.
			return fmt.Errorf("reading the result of step %s from operation %s: %w", ss.Name, op.Name, err)
		}
		ops[ss.Operation], fresh[ss.Operation] = read, true
	}
	return nil
}

// stepData is what the steps' parameters may use of the steps before them:
// ops must hold their results (readResults).
func stepData(ops map[string]*v1.SideEffectOperation, status v1.SagaStatus) map[string]saga.StepData {
	data := map[string]saga.StepData{}
	for _, ss := range status.Steps {
		op, ok := ops[ss.Operation]
		if !ok && ss.Operation != "" && (ss.State == v1.StateCommitted || ss.State == v1.StateCompensating) {
			// The step's operation is gone, and its checkpoint kept the
			// effect's id; its result went with the operation.
			data[ss.Name] = saga.StepData{ExternalObjectID: ss.ExternalObjectID}
			continue
		}
		if !ok || op.Status.State != v1.StateCommitted {
			continue
		}
		d := saga.StepData{ExternalObjectID: op.Status.ExternalObjectID}
		if op.Status.Result != nil {
			d.Result = op.Status.Result.Raw
		}
		data[ss.Name] = d
	}
	return data
}

func inputs(s *v1.Saga) []byte {
	if s.Spec.Inputs == nil {
		return nil
	}
	return s.Spec.Inputs.Raw
}

// create makes the operation of an action, with the parameters computed
// now written in it, so that a restart computes nothing twice: the
// operation exists, under its deterministic name, or it does not.
func (r *SagaReconciler) create(ctx context.Context, s *v1.Saga, params []byte, a saga.Action) (*v1.SideEffectOperation, error) {
	step := s.Spec.Steps[a.Step]
	ref, operation := saga.Target(step, a.Undo)
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Name: a.Name, Namespace: s.Namespace, Labels: map[string]string{
			saga.LabelSaga: saga.LabelValue(s.Name), saga.LabelStep: step.Name, saga.LabelRole: saga.RoleStep,
		}, Finalizers: []string{v1.FinalizerRecord}},
		Spec: v1.SideEffectOperationSpec{
			ToolRef: ref, Operation: operation, IdempotencyKey: a.Key,
			Parameters: &runtime.RawExtension{Raw: params},
		},
	}
	if a.Undo {
		op.Labels[saga.LabelRole] = saga.RoleCompensation
		op.Spec.RetryPolicy = step.Compensation.RetryPolicy.DeepCopy()
	} else {
		op.Spec.Cancel = a.Cancel
		op.Spec.Timeout = step.Timeout.DeepCopy()
		op.Spec.RetryPolicy = step.RetryPolicy.DeepCopy()
		if step.RetryUntilDone && op.Spec.RetryPolicy == nil {
			op.Spec.RetryPolicy = &v1.RetryPolicy{MaxAttempts: retryUntilDoneAttempts}
		}
	}
	if err := controllerutil.SetControllerReference(s, op, r.Scheme()); err != nil {
		return nil, err
	}
	if err := r.Create(ctx, op); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("saga %s: creating operation %s: %w", s.Name, a.Name, err)
		}
		// Made by an earlier pass, or by someone else: the decision
		// tells the two apart by what it was made for. Read past the
		// cache, which may not have it yet.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(op), op); err != nil {
			return nil, err
		}
		return op, nil
	}
	r.Recorder.Eventf(s, op, corev1.EventTypeNormal, roleEvent(a.Undo), "Create",
		"created operation %s for step %s", op.Name, step.Name)
	return op, nil
}

// cancelStep sets spec.cancel on a step's operation that had not claimed
// an attempt when the pass read it. The patch is conditional on that
// read's resourceVersion: an operation that claimed since is left alone,
// and its outcome decides. Either way no request is sent after the cancel
// that was not claimed before it.
func (r *SagaReconciler) cancelStep(ctx context.Context, s *v1.Saga, op *v1.SideEffectOperation) error {
	patch := client.MergeFromWithOptions(op.DeepCopy(), client.MergeFromWithOptimisticLock{})
	op.Spec.Cancel = true
	if err := r.Patch(ctx, op, patch); err != nil {
		return fmt.Errorf("saga %s: cancelling operation %s: %w", s.Name, op.Name, err)
	}
	r.Recorder.Eventf(s, op, corev1.EventTypeNormal, v1.ReasonCancelled, "Cancel",
		"cancelled operation %s of step %s, which had not claimed an attempt", op.Name, op.Labels[saga.LabelStep])
	return nil
}

func roleEvent(undo bool) string {
	if undo {
		return "CompensationStarted"
	}
	return "StepStarted"
}

// validate validates step i and writes the outcome in view.Status. It
// returns how long to wait when the tool's answer decided nothing.
func (r *SagaReconciler) validate(ctx context.Context, s *v1.Saga, plan *saga.Plan,
	ops map[string]*v1.SideEffectOperation, fresh freshOps, view *saga.View, i int) time.Duration {
	ss := &view.Status.Steps[i]
	key, now := stepKey{uid: s.UID, step: ss.Name, round: ss.Round}, r.Clock.Now()
	if due, ok := r.undecided.Get(key); ok && now.Before(due.(time.Time)) {
		return due.(time.Time).Sub(now)
	}
	val, wait := r.validation(ctx, s, plan, ops, fresh, view.Status, i)
	if wait {
		ss.Message = "validation waits: " + val.Message
		r.undecided.Add(key, now.Add(undecidedRetry))
		return undecidedRetry
	}
	r.undecided.Remove(key)
	val.Time = metav1.NewTime(r.Clock.Now())
	ss.Validation, ss.Message = &val, ""
	return 0
}

// validation asks what a step's operation would do with its parameters:
// they must compute, fit, match the operation's schema and, if the tool
// offers a dry run, pass it. wait is true when nothing was decided.
func (r *SagaReconciler) validation(ctx context.Context, s *v1.Saga, plan *saga.Plan,
	ops map[string]*v1.SideEffectOperation, fresh freshOps, status v1.SagaStatus, i int) (val v1.StepValidation,
	wait bool) {
	step := s.Spec.Steps[i]
	failed := func(format string, args ...any) (v1.StepValidation, bool) {
		return v1.StepValidation{Outcome: v1.ValidationFailed, Message: fmt.Sprintf(format, args...)}, false
	}
	undecided := func(format string, args ...any) (v1.StepValidation, bool) {
		return v1.StepValidation{Message: fmt.Sprintf(format, args...)}, true
	}
	// Numbers are checked as written: the plan computes parameters through
	// doubles, which would round them silently.
	written := []*runtime.RawExtension{s.Spec.Inputs, step.Parameters}
	if step.Compensation != nil {
		written = append(written, step.Compensation.Parameters)
	}
	for _, w := range written {
		if w == nil {
			continue
		}
		if no := protocol.CheckNumbers(w.Raw); no != nil {
			return failed("%s", no.Message)
		}
	}
	if err := r.readResults(ctx, ops, fresh, status); err != nil {
		return undecided("%v", err)
	}
	params, err := plan.Parameters(ctx, i, false, inputs(s), stepData(ops, status))
	if errors.Is(err, saga.ErrTimeLimit) {
		// A starved CPU decides nothing: validated again later.
		return undecided("%v", err)
	}
	if err != nil {
		return failed("the parameters cannot be computed: %v", err)
	}
	if no := protocol.CheckParameters(params); no != nil {
		return failed("%s", no.Message)
	}
	ref, _ := saga.Target(step, false)
	tool, reason, msg, err := usableTool(ctx, r.Client, r.Validator, r.WatchNamespaces, ref, s.Namespace, step.Operation)
	switch {
	case err != nil:
		return undecided("%v", err)
	case reason == v1.ReasonOperationNotDeclared:
		return failed("%s", msg)
	case reason != "":
		// A missing, broken or forbidden tool may be fixed: wait for it.
		return undecided("%s", msg)
	}
	spec := tool.GetSpec()
	if err := r.Validator.CheckParameters(spec, step.Operation, params); err != nil {
		return failed("%v", err)
	}
	// A dry run is a call: it takes a place in its namespace's share and
	// in the tool's bulkhead, and the step's timeout bounds it, its token
	// request included. Without one, nothing is sent.
	if op := spec.Operation(step.Operation); op != nil && op.Validate != nil {
		leaveShare, ok := r.NamespaceShare.Enter(s.Namespace)
		if !ok {
			namespaceShareFull(s.Namespace, "Saga")
			return undecided("namespace %s's dry runs take its share of the workers", s.Namespace)
		}
		defer leaveShare()
		leave, ok := r.Bulkhead.Enter(toolIDOf(tool))
		if !ok {
			bulkheadFull(tool)
			return undecided("the calls to %s take their share of the workers", step.ToolRef.Name)
		}
		defer leave()
	}
	timeout := protocol.Timeout(spec, &v1.SideEffectOperationSpec{Timeout: step.Timeout})
	cctx, cancel := context.WithTimeout(ctx, timeout)
	cl, err := r.Connector.Connect(cctx, tool)
	cancel()
	if err != nil {
		return undecided("connecting to %s: %v", step.ToolRef.Name, err)
	}
	// The dry run carries a key of its own: a tool that remembers keys
	// must not take the step's real request for a repeat of its dry run.
	scope := protocol.Scope{Namespace: s.Namespace, Tool: ref, Operation: step.Operation,
		Key: saga.OperationKey(saga.Key(s.Name, &s.Spec), step.Name, false, status.Steps[i].Round) + "/validate"}
	res := cl.Validate(ctx, effects.Request{Operation: step.Operation, Key: scope.ToolKey(), Parameters: params,
		Timeout: timeout, Clock: r.Clock.Now})
	val = v1.StepValidation{HTTPStatus: res.HTTPStatus, Message: res.Message}
	switch res.Verdict {
	case effects.ValidateValid:
		val.Outcome = v1.ValidationPassed
	case effects.ValidateInvalid:
		val.Outcome = v1.ValidationFailed
	case effects.ValidateNotOffered:
		val.Outcome = v1.ValidationNotOffered
	default:
		return val, true
	}
	return val, false
}

// checkpoint writes the saga's status if it changed, and tells people what
// changed.
func (r *SagaReconciler) checkpoint(ctx context.Context, s *v1.Saga, st v1.SagaStatus) error {
	if equality.Semantic.DeepEqual(s.Status, st) {
		return nil
	}
	old := s.Status
	s.Status = st
	if err := r.Status().Update(ctx, s); err != nil {
		return fmt.Errorf("writing the checkpoint of saga %s: %w", s.Name, err)
	}
	ready := meta.FindStatusCondition(st.Conditions, v1.ConditionReady)
	oldReady := meta.FindStatusCondition(old.Conditions, v1.ConditionReady)
	if ready == nil || oldReady != nil && oldReady.Reason == ready.Reason && old.State == st.State {
		return nil
	}
	typ := corev1.EventTypeNormal
	if stalled := meta.FindStatusCondition(st.Conditions, v1.ConditionStalled); stalled != nil && stalled.Status == metav1.ConditionTrue {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(s, nil, typ, ready.Reason, string(st.State), "%s", ready.Message)
	return nil
}

// SetupWithManager runs the controller on sagas and their operations.
func (r *SagaReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.plans == nil {
		r.plans = lru.New(plansSize)
	}
	if r.undecided == nil {
		r.undecided = lru.New(plansSize)
	}
	// The operations' events are not filtered by shard: they wake their
	// saga, whose shard is checked in Reconcile.
	b := ctrl.NewControllerManagedBy(mgr).
		For(&v1.Saga{}, builder.WithPredicates(r.Shards.Predicate())).
		Owns(&v1.SideEffectOperation{}).
		Named("saga").
		WithOptions(fairOptions(r.MaxConcurrentReconciles, r.ErrorBackoff))
	if r.Shards != nil {
		b = b.WatchesRawSource(r.Shards.Resync(mgr.GetClient(), &v1.SagaList{}, nil))
	}
	return b.Complete(r)
}
