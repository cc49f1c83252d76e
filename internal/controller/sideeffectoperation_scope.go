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
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/metrics"
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

// errDecideAgain says that the scope's record changed. Decide on it again.
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
