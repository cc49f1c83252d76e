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
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// Scope records as the operation reconciler reads them: the record of the
// pass's scope, the spec that binds it to the operation, the owner a
// record names, and an outcome as a record keeps it.

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
