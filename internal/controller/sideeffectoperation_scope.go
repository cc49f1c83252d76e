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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/protocol"
)

// bindScope makes sure this operation is the one that executes for its
// scope. The scope's IdempotencyRecord is named after the scope and created
// with an atomic create: of two operations with the same scope, created
// at once or seen through a lagging cache, exactly one creates it. ok is
// true for that one; what the others become, protocol.Arbitrate decides.
func (r *SideEffectOperationReconciler) bindScope(p *pass) (bool, error) {
	self := v1.RecordOwner{Name: p.op.Name, UID: p.op.UID}
	var reader client.Reader = r.Client
	for range 3 {
		rec, created, err := r.getOrCreateRecord(p, reader)
		if err != nil {
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
		sd := protocol.Arbitrate(p.st, self, rec.Spec, created, owner, p.policy, p.env)
		if sd.Conflict != "" {
			metrics.Conflicts.WithLabelValues(sd.Conflict).Inc()
		}
		switch sd.Action {
		case protocol.ScopeProceed:
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
	return false, fmt.Errorf("scope record %s keeps changing", p.st.RecordName)
}

// getOrCreateRecord returns the scope's record, creating it with this
// operation as its owner if there is none.
func (r *SideEffectOperationReconciler) getOrCreateRecord(p *pass, reader client.Reader) (*v1.IdempotencyRecord, bool, error) {
	key := client.ObjectKey{Namespace: p.op.Namespace, Name: p.st.RecordName}
	rec := &v1.IdempotencyRecord{}
	err := reader.Get(p.ctx, key, rec)
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
// must not look deleted. Its outcome is there if it has ended.
func (r *SideEffectOperationReconciler) ownerOf(p *pass, rec *v1.IdempotencyRecord) (protocol.Owner, error) {
	owner := &v1.SideEffectOperation{}
	err := r.APIReader.Get(p.ctx, client.ObjectKey{Namespace: rec.Namespace, Name: rec.Spec.Owner.Name}, owner)
	switch {
	case apierrors.IsNotFound(err):
		return protocol.Owner{}, nil
	case err != nil:
		return protocol.Owner{}, err
	case owner.UID != rec.Spec.Owner.UID:
		return protocol.Owner{}, nil
	case owner.Status.State.IsTerminal():
		o := outcomeOf(owner, p.env.Now)
		return protocol.Owner{Alive: true, Outcome: &o}, nil
	default:
		return protocol.Owner{Alive: true}, nil
	}
}

// recordOutcome copies a terminal owner's outcome into its scope's record,
// so that it outlives the object for the retention. The record is read from
// the cache first; what the cache cannot prove is read again past it.
func (r *SideEffectOperationReconciler) recordOutcome(p *pass) error {
	name := p.op.Status.RecordName
	if name == "" || !p.op.Status.State.IsTerminal() || p.op.Status.DuplicateOf != "" {
		return nil
	}
	if _, done := r.recorded.Get(p.op.UID); done {
		return nil
	}
	self := v1.RecordOwner{Name: p.op.Name, UID: p.op.UID}
	key := client.ObjectKey{Namespace: p.op.Namespace, Name: name}
	var reader client.Reader = r.Client
	for range fencedRetries {
		rec := &v1.IdempotencyRecord{}
		err := reader.Get(p.ctx, key, rec)
		if apierrors.IsNotFound(err) && reader != r.APIReader {
			reader = r.APIReader
			continue
		}
		if err != nil {
			return client.IgnoreNotFound(err)
		}
		write, confirm, done := protocol.OutcomeToWrite(rec.Spec, self, reader != r.APIReader)
		switch {
		case done:
			r.recorded.Add(p.op.UID, struct{}{})
			return nil
		case confirm:
			reader = r.APIReader
			continue
		case write:
			o := outcomeOf(p.op, p.env.Now)
			rec.Spec.Outcome = &o
			err = r.Update(p.ctx, rec)
			if err == nil {
				r.recorded.Add(p.op.UID, struct{}{})
				return nil
			}
			if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
				return fmt.Errorf("writing the outcome to scope record %s: %w", name, err)
			}
			// The cache showed an older record: look past it.
			reader = r.APIReader
		}
	}
	// Not quiet: the outcome must reach the record.
	return fmt.Errorf("writing the outcome to scope record %s kept losing to newer versions", name)
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
	o.ExpiryTime = metav1.NewTime(o.CompletionTime.Add(protocol.Retention(&op.Spec)))
	if st.ExpiryTime != nil {
		o.ExpiryTime = *st.ExpiryTime
	}
	return o
}
