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
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// bindScope makes sure this operation is the one that executes for its
// scope. The scope's IdempotencyRecord is named after the scope and created
// with an atomic create: of two operations with the same scope, created
// at once or seen through a lagging cache, exactly one creates it. ok is
// true for that one; the other becomes a duplicate reporting the first
// one's outcome, or fails with IdempotencyParameterMismatch.
func (r *SideEffectOperationReconciler) bindScope(p *pass) (reconcile.Result, bool, error) {
	for range 2 {
		rec, created, err := r.getOrCreateRecord(p)
		if err != nil {
			return reconcile.Result{}, false, err
		}
		if created || rec.Spec.Owner.UID == p.op.UID {
			return reconcile.Result{}, true, nil
		}
		owner, alive, err := r.ownerOf(p, rec)
		if err != nil {
			return reconcile.Result{}, false, err
		}
		if alive || !recordExpired(rec, p.env.Now) {
			res, err := r.judge(p, rec, owner, alive)
			return res, false, err
		}
		// The record expired and its owner is gone: collect it, then bind
		// the scope anew.
		uid, rv := rec.UID, rec.ResourceVersion
		err = r.Delete(p.ctx, rec, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, false, err
		}
	}
	return reconcile.Result{}, false, fmt.Errorf("scope record %s keeps changing", p.st.RecordName)
}

// getOrCreateRecord returns the scope's record, creating it with this
// operation as its owner if there is none.
func (r *SideEffectOperationReconciler) getOrCreateRecord(p *pass) (*v1.IdempotencyRecord, bool, error) {
	key := client.ObjectKey{Namespace: p.op.Namespace, Name: p.st.RecordName}
	rec := &v1.IdempotencyRecord{}
	err := r.Get(p.ctx, key, rec)
	if err == nil {
		return rec, false, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, false, err
	}
	rec = &v1.IdempotencyRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.op.Namespace, Name: p.st.RecordName},
		Spec: v1.IdempotencyRecordSpec{
			ToolRef:        p.scope.Tool,
			Operation:      p.scope.Operation,
			IdempotencyKey: p.scope.Key,
			RequestHash:    p.st.RequestHash,
			Owner:          v1.RecordOwner{Name: p.op.Name, UID: p.op.UID},
			Retention:      metav1.Duration{Duration: p.policy.Retention},
		},
	}
	err = r.Create(p.ctx, rec)
	if err == nil {
		return rec, true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return nil, false, err
	}
	// Another operation bound the scope first; the cache has not seen it.
	if err := r.APIReader.Get(p.ctx, key, rec); err != nil {
		return nil, false, err
	}
	return rec, false, nil
}

// ownerOf reads the record's owner past the cache: a just-created owner
// must not look deleted.
func (r *SideEffectOperationReconciler) ownerOf(p *pass, rec *v1.IdempotencyRecord) (*v1.SideEffectOperation, bool, error) {
	owner := &v1.SideEffectOperation{}
	err := r.APIReader.Get(p.ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Spec.Owner.Name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	default:
		return owner, owner.UID == rec.Spec.Owner.UID, nil
	}
}

// judge decides what an operation whose scope another one holds becomes.
func (r *SideEffectOperationReconciler) judge(p *pass, rec *v1.IdempotencyRecord,
	owner *v1.SideEffectOperation, alive bool) (reconcile.Result, error) {
	ownerName := rec.Spec.Owner.Name
	if rec.Spec.RequestHash != p.st.RequestHash {
		metrics.Conflicts.WithLabelValues("parameter_mismatch").Inc()
		return r.fail(p, v1.ErrorConflict, v1.ReasonIdempotencyParameterMismatch, fmt.Sprintf(
			"Idempotency key %q is bound to different parameters by %s (%s, this request is %s); use a new key for a new request",
			p.scope.Key, ownerName, shortHash(rec.Spec.RequestHash), shortHash(p.st.RequestHash)))
	}
	var outcome *v1.RecordOutcome
	switch {
	case alive && owner.Status.State.IsTerminal():
		o := outcomeOf(owner, p.env.Now)
		outcome = &o
	case alive:
		st := protocol.WaitForOriginal(p.st, p.env, ownerName)
		if equality.Semantic.DeepEqual(st, p.op.Status) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, r.writeStatus(p, protocol.Decision{Action: protocol.ActionWrite, Status: st})
	default:
		outcome = rec.Spec.Outcome
	}
	if outcome != nil {
		metrics.Conflicts.WithLabelValues("duplicate").Inc()
		return reconcile.Result{}, r.writeStatus(p, protocol.Adopt(p.st, p.policy, p.env, ownerName, *outcome))
	}
	// The owner was deleted before it ended: whether it took effect is
	// unknown. Take the scope over and reconcile before anything else.
	rec.Spec.Owner = v1.RecordOwner{Name: p.op.Name, UID: p.op.UID}
	if err := r.Update(p.ctx, rec); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.writeStatus(p, protocol.Inherit(p.st, p.policy, p.env, ownerName))
}

// recordOutcome copies a terminal owner's outcome into its scope's record,
// so that it outlives the object for the retention.
func (r *SideEffectOperationReconciler) recordOutcome(p *pass) error {
	name := p.op.Status.RecordName
	if name == "" || !p.op.Status.State.IsTerminal() || p.op.Status.DuplicateOf != "" {
		return nil
	}
	if _, done := r.recorded.Get(p.op.UID); done {
		return nil
	}
	key := client.ObjectKey{Namespace: p.op.Namespace, Name: name}
	rec := &v1.IdempotencyRecord{}
	err := r.Get(p.ctx, key, rec)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(p.ctx, key, rec)
	}
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if rec.Spec.Owner.UID != p.op.UID || rec.Spec.Outcome != nil {
		r.recorded.Add(p.op.UID, struct{}{})
		return nil
	}
	o := outcomeOf(p.op, p.env.Now)
	rec.Spec.Outcome = &o
	err = r.Update(p.ctx, rec)
	if err == nil {
		r.recorded.Add(p.op.UID, struct{}{})
	}
	if !apierrors.IsConflict(err) {
		return err
	}
	// The cache showed an older record: look past it.
	if err := r.APIReader.Get(p.ctx, key, rec); err != nil {
		return client.IgnoreNotFound(err)
	}
	if rec.Spec.Owner.UID == p.op.UID && rec.Spec.Outcome == nil {
		rec.Spec.Outcome = &o
		if err := r.Update(p.ctx, rec); err != nil {
			// Not quiet: the outcome must reach the record.
			return fmt.Errorf("writing the outcome to scope record %s: %v", name, err)
		}
	}
	r.recorded.Add(p.op.UID, struct{}{})
	return nil
}

// outcomeOf is a terminal operation's outcome, as its record keeps it.
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
		CompletionTime:    metav1.NewTime(now),
	}
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		o.Reason = c.Reason
	}
	if st.CompletionTime != nil {
		o.CompletionTime = *st.CompletionTime
	}
	o.ExpiryTime = metav1.NewTime(o.CompletionTime.Add(durationOr(op.Spec.Retention, defaultRetention)))
	if st.ExpiryTime != nil {
		o.ExpiryTime = *st.ExpiryTime
	}
	return o
}

// recordExpired reports whether a record's retention has passed: counted
// from its owner's end, or from its creation if the owner never ended.
func recordExpired(rec *v1.IdempotencyRecord, now time.Time) bool {
	return !now.Before(recordExpiry(rec))
}

func recordExpiry(rec *v1.IdempotencyRecord) time.Time {
	if o := rec.Spec.Outcome; o != nil {
		return o.ExpiryTime.Time
	}
	return rec.CreationTimestamp.Add(rec.Spec.Retention.Duration)
}

// shortHash abbreviates a request hash for messages.
func shortHash(h string) string {
	h = strings.TrimPrefix(h, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return "sha256:" + h
}
