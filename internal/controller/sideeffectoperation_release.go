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
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/protocol"
)

// An operation's finalizer, and its release when it is deleted. The
// finalizer holds the object until its outcome, or the fact that it made
// an attempt, is in its scope's record: the record outlives the object,
// and answers for the key once the object is gone.

// release runs when an operation is deleted: its outcome, or the fact that
// it made an attempt, goes into its scope's record (protocol.AtDeletion),
// then the finalizer goes and the object with it. A live claim is waited
// for, so that its answer is written first.
func (r *SideEffectOperationReconciler) release(ctx context.Context, op *v1.SideEffectOperation) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(op, v1.FinalizerRecord) {
		return ctrl.Result{}, nil
	}
	// The cache may not have the last status write yet. The release acts
	// on the object it was decided for, never on another of its name. A
	// cache that still shows a deleted operation would otherwise release
	// the live one made again under the name: delete the record it bound,
	// and remove its finalizer.
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
		if err := r.writeHeldAtRelease(p); err != nil {
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

// errReleased says that another pass released the operation meanwhile.
// Nothing is left to do.
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

// keepFinalizer gives a terminal operation that made an attempt and has no
// finalizer its finalizer, so that its outcome reaches the record when it
// is deleted: an operation that ended before Once kept outcomes at
// deletion (an upgrade) has none. New operations get it before their first
// claim.
func (r *SideEffectOperationReconciler) keepFinalizer(ctx context.Context, op *v1.SideEffectOperation) error {
	if !lacksFinalizer(op) || !r.Shards.OwnsObject(op) {
		return nil
	}
	err := r.ensureFinalizer(r.newPass(ctx, op))
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// A newer version brings the operation back here.
		return nil
	}
	return err
}

// lacksFinalizer reports whether a terminal operation made an attempt whose
// outcome its deletion must copy into its scope's record, and has no
// finalizer for it yet.
func lacksFinalizer(op *v1.SideEffectOperation) bool {
	return op.Status.Attempts > 0 && op.Status.DuplicateOf == "" &&
		!controllerutil.ContainsFinalizer(op, v1.FinalizerRecord)
}
