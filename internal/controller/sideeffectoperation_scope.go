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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/protocol"
)

// bindScope makes sure this operation is the one that executes for its
// scope. ok is true when it is; what the others become, protocol.Arbitrate
// decides.
//
// An operation whose key is its own name needs no record while it exists:
// no other object has its name. It reads the scope's record past the cache
// (one left by a deleted operation of the same scope, or bound by an
// operation that uses this name as its key) and proceeds if there is none.
//
// Any other operation binds the scope's record, named after the scope, with
// an atomic create: of two operations with the same scope, created at once
// or seen through a lagging cache, exactly one creates it. Then it defers to
// the operation whose name is its key, if that one may have claimed without
// seeing the record (see claimFromNameHolder).
func (r *SideEffectOperationReconciler) bindScope(p *pass) (bool, error) {
	self := v1.RecordOwner{Name: p.op.Name, UID: p.op.UID}
	nameKeyed := protocol.NameKeyed(p.op.Spec.IdempotencyKey, p.op.Name)
	var reader client.Reader = r.Client
	for range 3 {
		var rec *v1.IdempotencyRecord
		created := false
		var err error
		if nameKeyed {
			if rec, err = r.getRecord(p, r.APIReader); err != nil {
				return false, err
			}
			if rec == nil {
				return !failpoint.Hit(p.stopping, failpoint.BindAfterNoRecord), nil
			}
		} else if rec, created, err = r.getOrCreateRecord(p, reader); err != nil {
			return false, err
		}
		// A write below that loses to a newer record is decided again on
		// the record as the API server has it, not on the cache.
		reader = r.APIReader
		var owner protocol.Owner
		if !created && rec.Spec.Owner.UID != self.UID {
			if owner, err = r.ownerOf(p, rec); err != nil {
				return false, err
			}
		}
		env := p.env
		env.RecordCreated = rec.CreationTimestamp.Time
		sd := protocol.Arbitrate(p.st, self, rec.Spec, created, owner, p.policy, env)
		if sd.Conflict != "" {
			metrics.Conflicts.WithLabelValues(sd.Conflict).Inc()
		}
		switch sd.Action {
		case protocol.ScopeProceed:
			if nameKeyed {
				return true, nil
			}
			if err := r.claimFromNameHolder(p, rec); errors.Is(err, errDecideAgain) || apierrors.IsConflict(err) {
				continue
			} else if err != nil {
				return false, err
			}
			return true, nil
		case protocol.ScopeWait:
			return false, nil
		case protocol.ScopeWrite:
			return false, r.writeStatus(p, sd.Decision)
		case protocol.ScopeTakeOver:
			// One write names this operation the owner and the deleted one
			// the previous owner: if the next write never happens, the
			// next pass still starts from the unknown outcome.
			rec.Spec = sd.Record
			if err := r.Update(p.ctx, rec); apierrors.IsConflict(err) {
				continue
			} else if err != nil {
				return false, err
			}
			if failpoint.Hit(p.stopping, failpoint.TakeoverAfterRecord) {
				return false, nil
			}
			return false, r.writeStatus(p, sd.Decision)
		case protocol.ScopeCollect:
			uid, rv := rec.UID, rec.ResourceVersion
			err = r.Delete(p.ctx, rec, client.Preconditions{UID: &uid, ResourceVersion: &rv})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				return false, err
			}
		}
	}
	// Not a conflict, so that it is retried with backoff, not dropped.
	return false, fmt.Errorf("scope record %s keeps changing", p.env.RecordName)
}

// errDecideAgain: the scope's record changed; decide on it again.
var errDecideAgain = errors.New("the scope's record changed")

// claimFromNameHolder settles the one way two operations can share a scope
// without both binding its record: one whose key is its own name (which
// binds no record while it exists) and one that uses that name as its key.
// The second has just bound rec. If the holder of the name has claimed, or
// may still claim having read "no record" a moment ago, the record is handed
// to it, and the caller decides again as a non-owner (errDecideAgain). If
// not, the record is read again: a holder deleted meanwhile took it over
// when it released (protocol.AtDeletion) before it disappeared, which the
// second read shows (errDecideAgain). nil means this operation owns the
// scope.
func (r *SideEffectOperationReconciler) claimFromNameHolder(p *pass, rec *v1.IdempotencyRecord) error {
	if len(validation.IsDNS1123Subdomain(p.scope.Key)) > 0 {
		// No object can have the key as its name.
		return nil
	}
	holder := &v1.SideEffectOperation{}
	err := r.APIReader.Get(p.ctx, client.ObjectKey{Namespace: p.op.Namespace, Name: p.scope.Key}, holder)
	if client.IgnoreNotFound(err) != nil {
		return err
	}
	// The holder shares the scope if its key is its name and its tool and
	// operation are this one's.
	if err == nil && holder.UID != p.op.UID && protocol.OperationScope(holder) == p.scope &&
		protocol.HolderMayExecute(holder.Status, !holder.DeletionTimestamp.IsZero()) {
		hash, _, herr := protocol.RequestHash(p.scope.Tool, holder.Spec.Operation, rawParameters(holder))
		if herr == nil {
			rec.Spec.Owner = v1.RecordOwner{Name: holder.Name, UID: holder.UID}
			rec.Spec.PreviousOwner = nil
			rec.Spec.RequestHash = hash
			rec.Spec.Retention = metav1.Duration{Duration: protocol.Retention(&holder.Spec)}
			if err := r.Update(p.ctx, rec); err != nil {
				return err
			}
			p.log.Info("Handed the scope's record to the operation whose name is the key",
				"record", rec.Name, "holder", holder.Name)
			return errDecideAgain
		}
		// A holder whose parameters cannot be hashed fails before any call.
	}
	again, err := r.getRecord(p, r.APIReader)
	if err != nil {
		return err
	}
	if again == nil || again.ResourceVersion != rec.ResourceVersion {
		return errDecideAgain
	}
	return nil
}

// rawParameters are an operation's parameters as written.
func rawParameters(op *v1.SideEffectOperation) []byte {
	if op.Spec.Parameters == nil {
		return nil
	}
	return op.Spec.Parameters.Raw
}

// getRecord reads the scope's record; nil if there is none.
func (r *SideEffectOperationReconciler) getRecord(p *pass, reader client.Reader) (*v1.IdempotencyRecord, error) {
	rec := &v1.IdempotencyRecord{}
	err := reader.Get(p.ctx, client.ObjectKey{Namespace: p.op.Namespace, Name: p.env.RecordName}, rec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// getOrCreateRecord returns the scope's record, creating it with this
// operation as its owner if there is none.
func (r *SideEffectOperationReconciler) getOrCreateRecord(p *pass, reader client.Reader) (*v1.IdempotencyRecord, bool, error) {
	rec, err := r.getRecord(p, reader)
	if err != nil || rec != nil {
		return rec, false, err
	}
	rec = &v1.IdempotencyRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.op.Namespace, Name: p.env.RecordName},
		Spec:       r.ownRecord(p),
	}
	err = r.Create(p.ctx, rec)
	if err == nil {
		return rec, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, err
	}
	// Another operation bound the scope first; the cache has not seen it.
	if err := r.APIReader.Get(p.ctx, client.ObjectKeyFromObject(rec), rec); err != nil {
		return nil, false, err
	}
	return rec, false, nil
}

// ownRecord is the record that binds the scope to this operation, with no
// outcome.
func (r *SideEffectOperationReconciler) ownRecord(p *pass) v1.IdempotencyRecordSpec {
	return v1.IdempotencyRecordSpec{
		ToolRef:        p.scope.Tool,
		Operation:      p.scope.Operation,
		IdempotencyKey: p.scope.Key,
		RequestHash:    p.st.RequestHash,
		Owner:          v1.RecordOwner{Name: p.op.Name, UID: p.op.UID},
		Retention:      metav1.Duration{Duration: p.policy.Retention},
	}
}

// ownerOf reads the record's owner past the cache: a just-created owner
// must not look deleted. Its outcome is there if it has ended.
func (r *SideEffectOperationReconciler) ownerOf(p *pass, rec *v1.IdempotencyRecord) (protocol.Owner, error) {
	owner, err := liveOwner(p.ctx, r.APIReader, rec)
	switch {
	case err != nil:
		return protocol.Owner{}, err
	case owner == nil:
		return protocol.Owner{}, nil
	case owner.Status.State.IsTerminal():
		o := outcomeOf(owner, p.env.Now)
		return protocol.Owner{Alive: true, Outcome: &o}, nil
	case owner.Status.State == v1.StateNeedsReview:
		return protocol.Owner{Alive: true, InReview: true}, nil
	default:
		return protocol.Owner{Alive: true}, nil
	}
}

// liveOwner reads the operation a record names as its owner, past the
// cache; nil when it is gone, or another object holds its name now.
func liveOwner(ctx context.Context, reader client.Reader, rec *v1.IdempotencyRecord) (*v1.SideEffectOperation, error) {
	owner := &v1.SideEffectOperation{}
	err := reader.Get(ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Spec.Owner.Name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case owner.UID != rec.Spec.Owner.UID:
		return nil, nil
	}
	return owner, nil
}

// ensureFinalizer adds FinalizerRecord before the first claim, if the
// admission policy that adds it at create is not installed: no effect may
// exist whose outcome could be deleted with its object before it reaches
// the record.
func (r *SideEffectOperationReconciler) ensureFinalizer(p *pass) error {
	if controllerutil.ContainsFinalizer(p.op, v1.FinalizerRecord) {
		return nil
	}
	return r.setFinalizer(p, true)
}

// setFinalizer adds (keep) or removes FinalizerRecord with a merge patch
// that sends the finalizers alone, conditional on the version the pass
// read. On success the pass carries the new version.
func (r *SideEffectOperationReconciler) setFinalizer(p *pass, keep bool) error {
	base := p.op.DeepCopy()
	if keep {
		controllerutil.AddFinalizer(p.op, v1.FinalizerRecord)
	} else {
		controllerutil.RemoveFinalizer(p.op, v1.FinalizerRecord)
	}
	if err := r.Patch(p.ctx, p.op, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		p.op = base
		return err
	}
	return nil
}

// release runs when an operation is deleted: its outcome, or the fact that
// it made an attempt, goes into its scope's record (protocol.AtDeletion),
// then the finalizer goes and the object with it. A live claim is waited
// for, so that its answer is written first.
func (r *SideEffectOperationReconciler) release(ctx context.Context, op *v1.SideEffectOperation) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(op, v1.FinalizerRecord) {
		return ctrl.Result{}, nil
	}
	// The cache may not have the last status write yet. The release acts
	// on the object it was decided for, never on another of its name: a
	// cache that still shows a deleted operation would otherwise release
	// the live one made again under the name (delete the record it bound,
	// remove its finalizer).
	fresh, err := r.readOp(ctx, op)
	if apierrors.IsNotFound(err) {
		// Released already: an answer held for it goes to its record.
		return ctrl.Result{}, r.answerHeldGone(ctx, op.UID)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if fresh.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(fresh, v1.FinalizerRecord) {
		return ctrl.Result{}, nil
	}
	p := r.newPass(ctx, fresh)
	if err := p.identify(); err == nil {
		if err := r.recordPendingAnswer(p); err != nil {
			return p.result(ctrl.Result{}, err)
		}
		done := false
		for i := 0; !done; i++ {
			if i == fencedRetries {
				// Not a conflict, so that it is retried with backoff.
				return ctrl.Result{}, fmt.Errorf("scope record %s keeps changing", p.env.RecordName)
			}
			var wait time.Duration
			done, wait, err = r.keepOutcome(p)
			if errors.Is(err, errReleased) {
				return ctrl.Result{}, nil
			}
			if err != nil || wait > 0 {
				return p.result(ctrl.Result{RequeueAfter: wait}, err)
			}
		}
	}
	if wait, err := r.announcing(p); err != nil || wait > 0 {
		return p.result(ctrl.Result{RequeueAfter: wait}, err)
	}
	// An operation whose parameters cannot be hashed never made a call.
	return p.result(ctrl.Result{}, client.IgnoreNotFound(r.setFinalizer(p, false)))
}

// errReleased: the operation a release pass works on was released by
// another pass meanwhile; nothing is left to do.
var errReleased = errors.New("the operation was released meanwhile")

// stillReleasing reads the pass's operation again, past the cache: it is
// errReleased once the operation is gone, or no longer holds the
// finalizer its release removes.
func (r *SideEffectOperationReconciler) stillReleasing(p *pass) error {
	fresh, err := r.readOp(p.ctx, p.op)
	switch {
	case apierrors.IsNotFound(err):
		return errReleased
	case err != nil:
		return err
	case !controllerutil.ContainsFinalizer(fresh, v1.FinalizerRecord):
		return errReleased
	}
	return nil
}

// announcing keeps a deleted operation, its outcome already in its scope's
// record, until the relay has delivered its announcements or given up on
// them: the object is the only place they are kept (I15). The relay's
// write wakes the operation; wait is a fallback, at the relay's next
// attempt. The relay's budget bounds the wait (about half an hour by
// default). In a terminating namespace nothing waits: its subscribers'
// sinks go with it, a ClusterTool's announcements too.
func (r *SideEffectOperationReconciler) announcing(p *pass) (time.Duration, error) {
	if !outbox.Pending(p.op.Status.Outbox) {
		return 0, nil
	}
	_, at := outbox.Due(p.op.Status.Outbox, r.Clock.Now())
	ns := &corev1.Namespace{}
	err := r.APIReader.Get(p.ctx, client.ObjectKey{Name: p.op.Namespace}, ns)
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || (err == nil && !ns.DeletionTimestamp.IsZero()) {
		// A namespaced install reads no Namespaces: it cannot tell a
		// terminating one, and does not wait.
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if at <= 0 {
		at = announceRecheck
	}
	return at, nil
}

// announceRecheck is when a deleted operation looks again at an
// announcement that is due now, if no write of the relay wakes it first.
const announceRecheck = 30 * time.Second

// recordPendingAnswer writes an answer this manager holds in memory (its
// write failed for a reason other than a conflict) before the operation's
// outcome is kept: otherwise the record would say unknown for an answer in
// hand. The claim it ran under must still be the record's; once the claim
// has expired the answer is evidence only. An answer whose tool is not
// usable is written all the same (writeAnswerWithoutTool): the tool of an
// operation in a terminating namespace never comes back.
func (r *SideEffectOperationReconciler) recordPendingAnswer(p *pass) error {
	a := r.takePending(p)
	if a == nil {
		return nil
	}
	if !a.claimHeld(p.st, r.Holder) {
		return r.keepEvidence(p, a)
	}
	if reason, _, err := r.readTool(p); err != nil || reason != "" {
		return r.writeAnswerWithoutTool(p, a, err)
	}
	_, err := r.writeAnswer(p, a)
	return err
}

// keepOutcome makes one attempt at the record write protocol.AtDeletion
// asks for. done is false when the write lost to a newer record and must
// be decided again.
func (r *SideEffectOperationReconciler) keepOutcome(p *pass) (done bool, wait time.Duration, err error) {
	self := v1.RecordOwner{Name: p.op.Name, UID: p.op.UID}
	rec, err := r.getRecord(p, r.APIReader)
	if err != nil {
		return false, 0, err
	}
	// The time is read after the record: a pass that stalled before the
	// read must not judge a record of the key's next lifetime by the time
	// it started, when its own outcome had not yet expired.
	p.env.Now = r.Clock.Now()
	own := r.ownRecord(p)
	if st := p.op.Status; st.State.IsTerminal() {
		o := outcomeOf(p.op, p.env.Now)
		own.Outcome = &o
	} else if st.Attempts > 0 {
		own.Attempt = &v1.RecordAttempt{Mode: st.IdempotencyMode, Promise: st.Promise, StartedTime: st.StartedTime,
			Attempts: st.Attempts}
		if r := st.Resolution; r != nil && r.Action == v1.ResolutionRetry {
			own.Attempt.Resolution = r.Record()
		}
	}
	var cur *v1.IdempotencyRecordSpec
	if rec != nil {
		cur = &rec.Spec
	}
	d := protocol.AtDeletion(p.op.Status, self, cur, own, p.env.Now)
	if d.Action == protocol.ReleaseCreate || (d.Action == protocol.ReleaseUpdate && rec.Spec.Owner.UID != self.UID) {
		// A record that is not this operation's may be a later lifetime's:
		// another manager released this operation while this pass
		// stalled, and its namespace was deleted and made again. Write it
		// only while the operation still waits for its release, read
		// after the record, so that the record read is of its time.
		if err := r.stillReleasing(p); err != nil {
			return false, 0, err
		}
	}
	switch d.Action {
	case protocol.ReleaseWait:
		return false, d.Wait + time.Second, nil
	case protocol.ReleaseCreate:
		rec = &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: p.op.Namespace, Name: p.env.RecordName},
			Spec: d.Record}
		err = r.Create(p.ctx, rec)
		if apierrors.IsAlreadyExists(err) {
			return false, 0, nil
		}
		if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
			// The namespace is going, its records with it: there is no
			// one left to re-create the operation in it.
			return true, 0, nil
		}
	case protocol.ReleaseUpdate:
		rec.Spec = d.Record
		err = r.Update(p.ctx, rec)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return false, 0, nil
		}
	case protocol.ReleaseDelete:
		uid, rv := rec.UID, rec.ResourceVersion
		err = r.Delete(p.ctx, rec, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if apierrors.IsConflict(err) {
			return false, 0, nil
		}
		err = client.IgnoreNotFound(err)
	}
	if err != nil {
		return false, 0, fmt.Errorf("keeping the outcome in scope record %s: %w", p.env.RecordName, err)
	}
	switch d.Action {
	case protocol.ReleaseCreate, protocol.ReleaseUpdate:
		p.log.Info("Kept the outcome of a deleted operation in its scope's record", "record", p.env.RecordName,
			"state", stateLabel(p.op.Status.State), "attempts", p.op.Status.Attempts)
	case protocol.ReleaseDelete:
		p.log.Info("Dropped the scope's record of a deleted operation that made no attempt", "record", p.env.RecordName)
	}
	return true, 0, nil
}

// outcomeOf is a terminal operation's outcome, as its record keeps it:
// with the person's decision it rests on, if a person resolved it.
func outcomeOf(op *v1.SideEffectOperation, now time.Time) v1.RecordOutcome {
	st := op.Status
	o := v1.RecordOutcome{
		State:             st.State,
		Attempts:          st.Attempts,
		ExternalObjectID:  st.ExternalObjectID,
		ExternalRequestID: st.ExternalRequestID,
		Result:            st.Result,
		ResultDigest:      st.ResultDigest,
		ErrorClass:        st.ErrorClass,
		ErrorMessage:      st.ErrorMessage,
		Resolution:        st.Resolution.Record(),
		CompletionTime:    metav1.NewTime(now),
		Reason:            protocol.ReadyReason(st),
	}
	if st.CompletionTime != nil {
		o.CompletionTime = *st.CompletionTime
	}
	o.ExpiryTime = metav1.NewTime(o.CompletionTime.Add(protocol.Retention(&op.Spec)))
	if st.ExpiryTime != nil {
		o.ExpiryTime = *st.ExpiryTime
	}
	return o
}
