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

package bench

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/chaos"
	"github.com/once-dev/once/test/sandbox"
)

// minimalStatuses are the ceiling's claim and commit: what a status needs
// to say that much, and nothing more.
func minimalStatuses(op *v1.SideEffectOperation) (claim, commit v1.SideEffectOperationStatus) {
	now := metav1.Now()
	claim = v1.SideEffectOperationStatus{State: v1.StateStarted, Attempts: 1, StartedTime: &now,
		Claim: &v1.Claim{Holder: "bench-ceiling", Attempt: 1, AcquireTime: now, RenewTime: now,
			ExpiryTime: metav1.NewTime(now.Add(time.Minute))}}
	done := metav1.Now()
	commit = *claim.DeepCopy()
	commit.State = v1.StateCommitted
	commit.Claim = nil
	commit.CommittedTime = &done
	commit.ExternalObjectID = "ch_" + op.Name
	return claim, commit
}

// protocolStatuses are the claim and the commit that Once's decision core
// writes for op, created in namespace ns, against the benchmark's Native
// tool answering as the sandbox does: the same fields, conditions,
// observation and result as the manager's writes, computed by the same
// functions, without a manager or a call. The ceiling-status phase writes
// them, so that its ratio to Once leaves out the cost of what Once writes
// and keeps the cost of how it works (its watch, cache, queue and reads).
func protocolStatuses(ns string, op *v1.SideEffectOperation) (claim, commit v1.SideEffectOperationStatus, err error) {
	tool := chaos.NativeTool(ns, "http://127.0.0.1:1")
	scope := protocol.OperationScope(op)
	hash, _, err := protocol.RequestHash(scope.Tool, op.Spec.Operation, op.Spec.Parameters.Raw)
	if err != nil {
		return claim, commit, err
	}
	st := v1.SideEffectOperationStatus{IdempotencyKey: scope.Key, ToolIdempotencyKey: scope.ToolKey(),
		RequestHash: hash, RecordName: scope.RecordName()}
	pol := protocol.NewPolicy(&tool.Spec, &op.Spec, protocol.Limits{MaxClaim: time.Minute, ClaimGrace: 10 * time.Second})
	env := protocol.Env{Now: time.Now(), Holder: "bench-ceiling", Generation: 1,
		Jitter: func(d time.Duration) time.Duration { return d }}
	claimed := protocol.Next(st, nil, pol, env)
	if claimed.Action != protocol.ActionExecute {
		return claim, commit, fmt.Errorf("the decision core does not claim a new operation: %s", claimed.Action)
	}
	id := "ch_" + op.Name
	body, err := json.Marshal(sandbox.Object{ID: id, Collection: "charges", Mode: "native", Key: scope.ToolKey(),
		Parameters: op.Spec.Parameters.Raw, Status: "succeeded", CreatedAt: env.Now.UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return claim, commit, err
	}
	env.Now = time.Now()
	committed := protocol.AfterCall(claimed.Status, pol, env, protocol.CallResult{
		Outcome: v1.OutcomeSucceeded, HTTPStatus: 201, ExternalObjectID: id,
		Result: &runtime.RawExtension{Raw: body}, ResultDigest: protocol.Digest(body),
		Request: "POST " + tool.Spec.Operations[0].Path})
	return claimed.Status, committed.Status, nil
}
