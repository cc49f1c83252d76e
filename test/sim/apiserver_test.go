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

package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/apiserver"
	"github.com/once-dev/once/test/harness"
)

// TestAPIServerModel holds the simulated API server to the real one. Each
// case makes the same calls, in the same order, against a real
// kube-apiserver (envtest, with Once's CRDs, in a namespace of its own) and
// against a fresh APIServer, and records what it saw at each step: the kind
// of error a call got, and facts about the objects read back. A step that
// the real server answers otherwise than the case expects is a mistake of
// the test; a step that the model answers otherwise than the real server is
// a mistake of the model.
//
// Only what the model claims to reproduce is compared. Where the real
// control plane needs kube-controller-manager (the garbage collector, the
// namespace controller), which envtest does not run, the case checks what
// the API server itself does, and checks the model's end result of the
// controller's work on the model alone.
func TestAPIServerModel(t *testing.T) {
	c := startModelAPIServer(t)
	for i, tc := range modelCases {
		t.Run(tc.name, func(t *testing.T) {
			ns := fmt.Sprintf("model-%02d", i+1)
			if err := c.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatalf("creating namespace %s on the real API server: %v", ns, err)
			}
			real := runModelCase(t, realModelServer{ctx: t.Context(), c: c}, nil, ns, tc.run)
			// The real server runs without the admission policy that adds
			// the record finalizer (envtest installs CRDs only), so the model
			// is compared without it too.
			sim := newModelSim(t, ns, true)
			model := runModelCase(t, simModelServer{sim}, sim, ns, tc.run)
			compareModelFacts(t, real, model)
		})
	}
}

// modelCases are the behaviours the model claims (see the APIServer doc
// comment), one case each.
var modelCases = []struct {
	name string
	run  func(r *modelRun)
}{
	{"create fills in the server's fields", modelCreate},
	{"generateName", modelGenerateName},
	{"create drops an operation's status", modelCreateDropsStatus},
	{"create drops a saga's status", modelCreateDropsSagaStatus},
	{"status write changes the status only", modelStatusWrite},
	{"spec write leaves the status and bumps the generation", modelSpecWrite},
	{"no-op write keeps the resourceVersion", modelNoOpWrite},
	{"stale resourceVersion or uid is a conflict", modelStale},
	{"update without resourceVersion is refused", modelUnconditional},
	{"delete without finalizers", modelDeleteNow},
	{"delete with finalizers", modelDeleteFinalizers},
	{"no new finalizer while being deleted", modelNoNewFinalizer},
	{"delete preconditions", modelPreconditions},
	{"immutable spec but spec.resolution", modelImmutable},
	{"spec.resolution only in NeedsReview", modelResolutionOutsideReview},
	{"spec.ttlSecondsAfterFinished may change", modelTTLEdit},
	{"spec.suspend may change, spec.cancel is never taken back", modelBrakes},
	{"parameters as the client wrote them", modelParametersAsWritten},
	{"finalizer at create", modelFinalizerAtCreate},
	{"terminating namespace", modelNamespaceTerminating},
	{"owner references", modelOwnerReferences},
}

// modelCreate: a create fills in what the server owns (uid,
// resourceVersion, generation 1, creation time), and refuses a name in
// use, a namespace that does not exist and a resourceVersion set by the
// client.
func modelCreate(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	r.is("uid is set", op.UID != "", true)
	r.is("resourceVersion is set", op.ResourceVersion != "", true)
	r.is("generation after create", op.Generation, 1)
	r.is("creationTimestamp is set", !op.CreationTimestamp.IsZero(), true)
	r.read(op)
	r.is("deletionTimestamp is unset", op.DeletionTimestamp == nil, true)
	r.call("create again with the same name", r.s.create(r.op("charge")), "AlreadyExists")
	r.call("create in a namespace that does not exist", r.s.create(modelOperation("no-such-namespace", "charge")), "NotFound")
	preset := r.op("preset")
	preset.ResourceVersion = "12345"
	// The real server refuses it from its storage layer, which has no API
	// reason for it: a bare 500, not a 400.
	r.call("create with a resourceVersion", r.s.create(preset), "status 500")
	r.call("get of a name never created", r.s.get(r.op("never")), "NotFound")
}

// modelGenerateName: a create with generateName and no name gets a name of
// that prefix and five more characters, a new one each time.
func modelGenerateName(r *modelRun) {
	a, b := r.op(""), r.op("")
	a.GenerateName, b.GenerateName = "charge-", "charge-"
	r.must("create a with generateName", r.s.create(a))
	r.must("create b with generateName", r.s.create(b))
	r.is("a's name has the prefix", strings.HasPrefix(a.Name, "charge-"), true)
	r.is("a's name adds five characters", len(a.Name)-len("charge-"), 5)
	r.is("a and b have different names", a.Name != b.Name, true)
	r.call("get a by its generated name", r.s.get(a), "ok")
}

// modelCreateDropsStatus: SideEffectOperation has the status subresource,
// so the status sent with a create is dropped; the record starts empty.
func modelCreateDropsStatus(r *modelRun) {
	op := r.op("charge")
	op.Status = v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 3, ExternalObjectID: "ch_1"}
	r.must("create an operation with a status", r.s.create(op))
	r.read(op)
	r.is("the stored operation has no status", reflect.DeepEqual(op.Status, v1.SideEffectOperationStatus{}), true)
}

// modelCreateDropsSagaStatus: the same holds for every kind with the status
// subresource (the model's Create says "no status (the status
// subresource)"); Saga is one.
func modelCreateDropsSagaStatus(r *modelRun) {
	saga := r.saga("order")
	saga.Status.State = v1.StateCommitted
	saga.Status.StepsDone = 1
	r.must("create a saga with a status", r.s.create(saga))
	r.read(saga)
	r.is("the stored saga has no status", reflect.DeepEqual(saga.Status, v1.SagaStatus{}), true)
}

// modelStatusWrite: a status write (update or merge patch of the status
// subresource) changes the status and nothing else: the spec and the
// labels sent with it are ignored, the generation stays; the
// resourceVersion moves.
func modelStatusWrite(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	rv := op.ResourceVersion
	op.Status.State = v1.StateStarted
	op.Status.Attempts = 1
	op.Spec.Operation = "refund"
	op.Labels = map[string]string{"touched": "yes"}
	r.call("status update", r.s.updateStatus(op), "ok")
	r.is("status update moves the resourceVersion", op.ResourceVersion != rv, true)
	r.read(op)
	r.is("state after status update", op.Status.State, v1.StateStarted)
	r.is("attempts after status update", op.Status.Attempts, 1)
	r.is("spec.operation after status update", op.Spec.Operation, "charge")
	r.is("labels after status update", len(op.Labels), 0)
	r.is("generation after status update", op.Generation, 1)

	base := op.DeepCopy()
	op.Status.Attempts = 2
	op.Spec.IdempotencyKey = "order-2"
	op.Annotations = map[string]string{"touched": "yes"}
	r.call("status merge patch", r.s.patchStatus(op, client.MergeFrom(base)), "ok")
	r.read(op)
	r.is("attempts after status patch", op.Status.Attempts, 2)
	r.is("spec.idempotencyKey after status patch", op.Spec.IdempotencyKey, "order-1")
	r.is("annotations after status patch", len(op.Annotations), 0)
	r.is("generation after status patch", op.Generation, 1)
}

// modelSpecWrite: a write of the main resource changes the spec and the
// metadata a client owns, ignores the status sent with it, and bumps the
// generation when the spec changed (not for metadata alone).
func modelSpecWrite(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	// spec.resolution is the one field of an operation's spec that may
	// change, and only in NeedsReview.
	op.Status.State = v1.StateNeedsReview
	r.must("status update to NeedsReview", r.s.updateStatus(op))
	rv := op.ResourceVersion
	op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	op.Status.State = v1.StateCommitted
	op.Labels = map[string]string{"reviewed": "yes"}
	r.call("update setting spec.resolution", r.s.update(op), "ok")
	r.is("spec update moves the resourceVersion", op.ResourceVersion != rv, true)
	r.read(op)
	r.is("generation after a spec update", op.Generation, 2)
	r.is("spec.resolution after update", modelAction(op), v1.ResolutionRetry)
	r.is("state after spec update", op.Status.State, v1.StateNeedsReview)
	r.is("label after spec update", op.Labels["reviewed"], "yes")

	rv = op.ResourceVersion
	op.Annotations = map[string]string{"note": "metadata only"}
	r.call("update of metadata only", r.s.update(op), "ok")
	r.is("metadata update moves the resourceVersion", op.ResourceVersion != rv, true)
	r.read(op)
	r.is("generation after a metadata update", op.Generation, 2)

	base := op.DeepCopy()
	op.Spec.Resolution.Action = v1.ResolutionFail
	op.Status.Attempts = 7
	r.call("merge patch of spec.resolution", r.s.patch(op, client.MergeFrom(base)), "ok")
	r.read(op)
	r.is("generation after a spec patch", op.Generation, 3)
	r.is("spec.resolution after patch", modelAction(op), v1.ResolutionFail)
	r.is("attempts after spec patch", op.Status.Attempts, 0)
}

// modelNoOpWrite: a write that changes nothing is no write: the
// resourceVersion (and the generation) stay, for updates and merge patches
// of the object and of its status.
func modelNoOpWrite(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	rv := op.ResourceVersion
	r.call("update with nothing changed", r.s.update(op), "ok")
	r.is("no-op update keeps the resourceVersion", op.ResourceVersion == rv, true)
	r.is("generation after no-op update", op.Generation, 1)

	op.Status.State = v1.StateStarted
	r.must("status update", r.s.updateStatus(op))
	rv = op.ResourceVersion
	r.call("status update with nothing changed", r.s.updateStatus(op), "ok")
	r.is("no-op status update keeps the resourceVersion", op.ResourceVersion == rv, true)
	r.call("merge patch with nothing changed", r.s.patch(op, client.MergeFrom(op.DeepCopy())), "ok")
	r.is("no-op merge patch keeps the resourceVersion", op.ResourceVersion == rv, true)
	r.call("status merge patch with nothing changed", r.s.patchStatus(op, client.MergeFrom(op.DeepCopy())), "ok")
	r.is("no-op status merge patch keeps the resourceVersion", op.ResourceVersion == rv, true)
	r.read(op)
	r.is("stored resourceVersion after the no-op writes", op.ResourceVersion == rv, true)
}

// modelStale: every write is a compare-and-swap on the resourceVersion. A
// write from a stale copy is a Conflict, for update and status update and
// for a merge patch that carries the resourceVersion
// (MergeFromWithOptimisticLock); a plain merge patch carries none and
// applies to the current object. An update naming another uid is a
// Conflict too (the uid precondition every update carries).
func modelStale(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	stale := op.DeepCopy()
	op.Labels = map[string]string{"v": "2"}
	r.must("update a label", r.s.update(op))
	r.is("update moves the resourceVersion", op.ResourceVersion != stale.ResourceVersion, true)

	o := stale.DeepCopy()
	o.Annotations = map[string]string{"a": "1"}
	r.call("update from a stale copy", r.s.update(o), "Conflict")
	o = stale.DeepCopy()
	o.Status.State = v1.StateStarted
	r.call("status update from a stale copy", r.s.updateStatus(o), "Conflict")
	lock := client.MergeFromWithOptimisticLock{}
	o = stale.DeepCopy()
	o.Annotations = map[string]string{"a": "1"}
	r.call("optimistic merge patch from a stale base", r.s.patch(o, client.MergeFromWithOptions(stale.DeepCopy(), lock)), "Conflict")
	o = stale.DeepCopy()
	o.Status.State = v1.StateStarted
	r.call("optimistic status merge patch from a stale base", r.s.patchStatus(o, client.MergeFromWithOptions(stale.DeepCopy(), lock)), "Conflict")

	o = stale.DeepCopy()
	o.Annotations = map[string]string{"b": "1"}
	r.call("plain merge patch from a stale base", r.s.patch(o, client.MergeFrom(stale.DeepCopy())), "ok")
	r.read(op)
	r.is("the plain patch kept the label written since", op.Labels["v"], "2")
	r.is("the plain patch added its annotation", op.Annotations["b"], "1")

	base := op.DeepCopy()
	op.Annotations = map[string]string{"b": "1", "c": "1"}
	r.call("optimistic merge patch from a fresh base", r.s.patch(op, client.MergeFromWithOptions(base, lock)), "ok")

	o = op.DeepCopy()
	o.UID = types.UID("00000000-0000-0000-0000-000000000000")
	o.Annotations = map[string]string{"d": "1"}
	r.call("update with another uid", r.s.update(o), "Conflict")
	r.read(op)
	r.is("annotations after the refused writes", len(op.Annotations), 2)
	r.is("generation after metadata writes only", op.Generation, 1)
}

// modelUnconditional: an update without a resourceVersion is not an
// unconditional overwrite: the API server allows none for custom
// resources, and refuses it as Invalid (metadata.resourceVersion must be
// specified for an update).
func modelUnconditional(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	o := op.DeepCopy()
	o.ResourceVersion = ""
	o.Labels = map[string]string{"x": "y"}
	r.call("update without a resourceVersion", r.s.update(o), "Invalid")
	o = op.DeepCopy()
	o.ResourceVersion = ""
	o.Status.State = v1.StateStarted
	r.call("status update without a resourceVersion", r.s.updateStatus(o), "Invalid")
	r.read(op)
	r.is("labels after the refused writes", len(op.Labels), 0)
	r.is("state after the refused writes", op.Status.State, "")
}

// modelDeleteNow: an object without finalizers goes at once; after that
// every call on it is NotFound.
func modelDeleteNow(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	r.call("delete", r.s.delete(op, nil), "ok")
	r.gone("get after delete", op)
	r.call("delete again", r.s.delete(op, nil), "NotFound")
	o := op.DeepCopy()
	o.Labels = map[string]string{"x": "y"}
	r.call("update after delete", r.s.update(o), "NotFound")
	o = op.DeepCopy()
	o.Status.State = v1.StateStarted
	r.call("status update after delete", r.s.updateStatus(o), "NotFound")
	o = op.DeepCopy()
	o.Labels = map[string]string{"x": "y"}
	r.call("merge patch after delete", r.s.patch(o, client.MergeFrom(op.DeepCopy())), "NotFound")
}

// modelDeleteFinalizers: deleting an object with finalizers sets its
// deletionTimestamp (a write: the resourceVersion moves) and keeps it; a
// second delete changes nothing; the object can still be written, and it
// goes when its last finalizer is removed, by update or by merge patch.
func modelDeleteFinalizers(r *modelRun) {
	op := r.op("charge")
	op.Finalizers = []string{"example.com/first", "example.com/second"}
	r.must("create with two finalizers", r.s.create(op))
	rv := op.ResourceVersion
	r.call("delete", r.s.delete(op, nil), "ok")
	r.read(op)
	r.is("deletionTimestamp is set", op.DeletionTimestamp != nil, true)
	r.is("delete moves the resourceVersion", op.ResourceVersion != rv, true)
	r.is("finalizers after delete", op.Finalizers, []string{"example.com/first", "example.com/second"})

	marked, rv := op.DeletionTimestamp, op.ResourceVersion
	r.call("delete again", r.s.delete(op, nil), "ok")
	r.read(op)
	r.is("a second delete keeps the deletionTimestamp", op.DeletionTimestamp.Equal(marked), true)
	r.is("a second delete keeps the resourceVersion", op.ResourceVersion == rv, true)

	op.Status.State = v1.StateCommitted
	r.call("status update while being deleted", r.s.updateStatus(op), "ok")
	op.Finalizers = []string{"example.com/second"}
	r.call("update removing one finalizer", r.s.update(op), "ok")
	r.read(op)
	r.is("finalizers after removing one", op.Finalizers, []string{"example.com/second"})
	r.is("state while being deleted", op.Status.State, v1.StateCommitted)

	base := op.DeepCopy()
	op.Finalizers = nil
	r.call("merge patch removing the last finalizer", r.s.patch(op, client.MergeFrom(base)), "ok")
	r.gone("get after the last finalizer went", op)
}

// modelNoNewFinalizer: no finalizer may be added to an object being
// deleted, neither on top of the ones it has nor in place of one of them;
// the API server refuses it as Invalid (a field.Forbidden error of
// metadata.finalizers, inside a 422).
func modelNoNewFinalizer(r *modelRun) {
	op := r.op("charge")
	op.Finalizers = []string{"example.com/first"}
	r.must("create with a finalizer", r.s.create(op))
	r.must("delete", r.s.delete(op, nil))
	r.read(op)
	o := op.DeepCopy()
	o.Finalizers = append(o.Finalizers, "example.com/late")
	r.call("update adding a finalizer while being deleted", r.s.update(o), "Invalid")
	o = op.DeepCopy()
	o.Finalizers = []string{"example.com/late"}
	r.call("update swapping a finalizer while being deleted", r.s.update(o), "Invalid")
	r.read(op)
	r.is("finalizers after the refused writes", op.Finalizers, []string{"example.com/first"})
}

// modelPreconditions: a delete with preconditions on the uid or the
// resourceVersion that the object no longer matches is a Conflict, and
// leaves the object alone; with matching ones it deletes.
func modelPreconditions(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	stale := op.ResourceVersion
	op.Labels = map[string]string{"v": "2"}
	r.must("update a label", r.s.update(op))
	other := types.UID("00000000-0000-0000-0000-000000000000")
	r.call("delete with another uid", r.s.delete(op, &metav1.Preconditions{UID: &other}), "Conflict")
	r.call("delete with a stale resourceVersion", r.s.delete(op, &metav1.Preconditions{ResourceVersion: &stale}), "Conflict")
	r.read(op)
	r.is("the refused deletes left it alone", op.DeletionTimestamp == nil, true)
	uid, rv := op.UID, op.ResourceVersion
	r.call("delete with the current uid and resourceVersion",
		r.s.delete(op, &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}), "ok")
	r.gone("get after delete", op)
}

// modelImmutableFields are the fields of an operation's spec that the
// CRD's CEL rules keep as created (an idempotency key is bound to one
// request), each with a change.
var modelImmutableFields = []struct {
	field  string
	change func(*v1.SideEffectOperation)
}{
	{"spec.operation", func(o *v1.SideEffectOperation) { o.Spec.Operation = "refund" }},
	{"spec.toolRef.name", func(o *v1.SideEffectOperation) { o.Spec.ToolRef.Name = "desk" }},
	{"spec.toolRef.kind", func(o *v1.SideEffectOperation) { o.Spec.ToolRef.Kind = v1.ToolKindClusterTool }},
	{"spec.idempotencyKey", func(o *v1.SideEffectOperation) { o.Spec.IdempotencyKey = "order-2" }},
	{"spec.idempotencyKey (removed)", func(o *v1.SideEffectOperation) { o.Spec.IdempotencyKey = "" }},
	{"spec.parameters", func(o *v1.SideEffectOperation) {
		o.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"amount":200,"currency":"EUR"}`)}
	}},
	{"spec.parameters (removed)", func(o *v1.SideEffectOperation) { o.Spec.Parameters = nil }},
	{"spec.timeout", func(o *v1.SideEffectOperation) { o.Spec.Timeout = &metav1.Duration{Duration: 20 * time.Second} }},
	{"spec.retention", func(o *v1.SideEffectOperation) { o.Spec.Retention = &metav1.Duration{Duration: 48 * time.Hour} }},
	{"spec.retryPolicy.maxAttempts", func(o *v1.SideEffectOperation) { o.Spec.RetryPolicy.MaxAttempts = 7 }},
	{"spec.retryPolicy.maxBackoff", func(o *v1.SideEffectOperation) {
		o.Spec.RetryPolicy.MaxBackoff = &metav1.Duration{Duration: 10 * time.Minute}
	}},
	{"spec.subscribers", func(o *v1.SideEffectOperation) {
		o.Spec.Subscribers = append(o.Spec.Subscribers, v1.Subscriber{Name: "billing", ToolRef: v1.SinkToolReference{Name: "billing"}, Operation: "events.deliver"})
	}},
	{"spec.subscribers (removed)", func(o *v1.SideEffectOperation) { o.Spec.Subscribers = nil }},
}

// modelImmutable: a change of any immutable field of an operation's spec
// is refused as Invalid, by update and by merge patch alike, and changes
// nothing; spec.resolution may be set, changed and removed (in
// NeedsReview), each time a new generation.
func modelImmutable(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	for _, m := range modelImmutableFields {
		o := op.DeepCopy()
		m.change(o)
		r.call("update changing "+m.field, r.s.update(o), "Invalid")
		o = op.DeepCopy()
		m.change(o)
		r.call("merge patch changing "+m.field, r.s.patch(o, client.MergeFrom(op.DeepCopy())), "Invalid")
	}
	r.read(op)
	r.is("generation after the refused writes", op.Generation, 1)

	op.Status.State = v1.StateNeedsReview
	r.must("status update to NeedsReview", r.s.updateStatus(op))
	op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	r.call("update setting spec.resolution", r.s.update(op), "ok")
	base := op.DeepCopy()
	op.Spec.Resolution.Action = v1.ResolutionFail
	r.call("merge patch changing spec.resolution", r.s.patch(op, client.MergeFrom(base)), "ok")
	base = op.DeepCopy()
	op.Spec.Resolution = nil
	r.call("merge patch removing spec.resolution", r.s.patch(op, client.MergeFrom(base)), "ok")
	r.read(op)
	r.is("generation after three resolution writes", op.Generation, 4)
}

// modelResolutionOutsideReview: the CRD lets spec.resolution be set or
// changed only while the operation is in NeedsReview (a CEL rule on the
// whole object, as it reads the status); outside it the write is Invalid.
func modelResolutionOutsideReview(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	o := op.DeepCopy()
	o.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	r.call("update setting spec.resolution before NeedsReview", r.s.update(o), "Invalid")
	o = op.DeepCopy()
	o.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	r.call("merge patch setting spec.resolution before NeedsReview", r.s.patch(o, client.MergeFrom(op.DeepCopy())), "Invalid")
	r.read(op)
	r.is("spec.resolution after the refused writes", modelAction(op), "")

	op.Status.State = v1.StateNeedsReview
	r.must("status update to NeedsReview", r.s.updateStatus(op))
	op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	r.must("update setting spec.resolution in NeedsReview", r.s.update(op))
	op.Status.State = v1.StateStarted
	r.call("status update leaving NeedsReview, resolution kept", r.s.updateStatus(op), "ok")
	o = op.DeepCopy()
	o.Spec.Resolution.Action = v1.ResolutionFail
	r.call("update changing spec.resolution after NeedsReview", r.s.update(o), "Invalid")
	r.read(op)
	r.is("generation after the refused writes", op.Generation, 2)
}

// modelTTLEdit: spec.ttlSecondsAfterFinished may be set, changed and
// removed at any time, a resolution written in NeedsReview kept: each
// edit is a new generation that decides nothing.
func modelTTLEdit(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	op.Spec.TTLSecondsAfterFinished = new(int32(60))
	r.call("update setting spec.ttlSecondsAfterFinished", r.s.update(op), "ok")
	op.Status.State = v1.StateNeedsReview
	r.must("status update to NeedsReview", r.s.updateStatus(op))
	op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionRetry, By: "alice"}
	r.must("update setting spec.resolution in NeedsReview", r.s.update(op))
	base := op.DeepCopy()
	op.Spec.TTLSecondsAfterFinished = new(int32(0))
	r.call("merge patch changing spec.ttlSecondsAfterFinished in NeedsReview", r.s.patch(op, client.MergeFrom(base)), "ok")
	op.Status.State = v1.StateStarted
	r.must("status update leaving NeedsReview, resolution kept", r.s.updateStatus(op))
	op.Spec.TTLSecondsAfterFinished = nil
	r.call("update removing spec.ttlSecondsAfterFinished, resolution kept", r.s.update(op), "ok")
	r.read(op)
	r.is("spec.resolution after the edits", modelAction(op), v1.ResolutionRetry)
	r.is("generation after two resolution-less edits and a resolution", op.Generation, 5)
}

// modelBrakes: spec.suspend may be set and removed at any time, and
// spec.cancel set at any time: each is a new generation. spec.cancel is
// never taken back (the CRD's CEL rule): an update that clears it and a
// merge patch that removes it are both Invalid, and change nothing.
func modelBrakes(r *modelRun) {
	op := r.op("charge")
	r.must("create", r.s.create(op))
	op.Spec.Suspend = true
	r.call("update setting spec.suspend", r.s.update(op), "ok")
	base := op.DeepCopy()
	op.Spec.Suspend = false
	r.call("merge patch removing spec.suspend", r.s.patch(op, client.MergeFrom(base)), "ok")
	op.Status.State = v1.StateStarted
	r.must("status update to Started", r.s.updateStatus(op))
	op.Spec.Cancel = true
	r.call("update setting spec.cancel while Started", r.s.update(op), "ok")
	o := op.DeepCopy()
	o.Spec.Cancel = false
	r.call("update taking spec.cancel back", r.s.update(o), "Invalid")
	o = op.DeepCopy()
	o.Spec.Cancel = false
	r.call("merge patch removing spec.cancel", r.s.patch(o, client.MergeFrom(op.DeepCopy())), "Invalid")
	op.Spec.Suspend = true
	r.call("update suspending a cancelled operation", r.s.update(op), "ok")
	r.read(op)
	r.is("spec.cancel after the refused writes", op.Spec.Cancel, true)
	r.is("generation after four brake writes", op.Generation, 5)
}

// modelParametersAsWritten: the API server keeps parameters as structured
// JSON, so how the client spelled them (spaces, key order) is not part of
// the object: later writes that leave them alone are not changes of them.
func modelParametersAsWritten(r *modelRun) {
	op := r.op("charge")
	op.Spec.Parameters = &runtime.RawExtension{Raw: []byte(`{"currency": "EUR", "amount": 100}`)}
	r.must("create with parameters as a client wrote them", r.s.create(op))
	base := op.DeepCopy()
	op.Labels = map[string]string{"x": "y"}
	r.call("merge patch of a label", r.s.patch(op, client.MergeFrom(base)), "ok")
	r.read(op)
	op.Annotations = map[string]string{"a": "b"}
	r.call("update of an annotation", r.s.update(op), "ok")
	base = op.DeepCopy()
	op.Status.State = v1.StateStarted
	r.call("status merge patch", r.s.patchStatus(op, client.MergeFrom(base)), "ok")
	r.read(op)
	r.is("generation after metadata and status writes", op.Generation, 1)
}

// modelFinalizerAtCreate: the admission policy of config/policy
// (operation_finalizer.yaml) adds the record finalizer to an operation at
// create. envtest installs no policy, so the real server keeps the
// finalizers the client sent, as the model does with NoFinalizerPolicy;
// that is compared. With the policy modelled, the model must add the
// finalizer, once, to operations only; that is checked on the model alone.
func modelFinalizerAtCreate(r *modelRun) {
	op := r.op("plain")
	r.must("create an operation without finalizers", r.s.create(op))
	r.read(op)
	r.is("finalizers of an operation created without", op.Finalizers, []string(nil))
	held := r.op("held")
	held.Finalizers = []string{"example.com/hold"}
	r.must("create an operation with a finalizer", r.s.create(held))
	r.read(held)
	r.is("finalizers of an operation created with one", held.Finalizers, []string{"example.com/hold"})
	if r.sim == nil {
		return
	}

	s := newModelSim(r.t, r.ns, false)
	for _, tc := range []struct {
		name      string
		sent, got []string
	}{
		{"none", nil, []string{v1.FinalizerRecord}},
		{"another", []string{"example.com/hold"}, []string{"example.com/hold", v1.FinalizerRecord}},
		{"the record finalizer", []string{v1.FinalizerRecord}, []string{v1.FinalizerRecord}},
	} {
		op := modelOperation(r.ns, "with-"+strings.ReplaceAll(tc.name, " ", "-"))
		op.Finalizers = tc.sent
		if err := s.Create(op); err != nil {
			r.simIs("with the policy, create with "+tc.name, modelOutcome(err), "ok")
			continue
		}
		stored := &v1.SideEffectOperation{}
		_ = s.Get(keyOf(op), stored)
		r.simIs("with the policy, finalizers of an operation created with "+tc.name, stored.Finalizers, tc.got)
	}
	saga := modelSaga(r.ns, "order")
	if err := s.Create(saga); err != nil {
		r.simIs("with the policy, create a saga", modelOutcome(err), "ok")
		return
	}
	r.simIs("with the policy, finalizers of a saga", saga.Finalizers, []string(nil))
}

// modelNamespaceTerminating: deleting a namespace marks it (its
// deletionTimestamp; the namespace's own finalizer keeps it), and from then
// on the API server's NamespaceLifecycle admission refuses every create in
// it, before looking for a name in use: Forbidden, with the cause
// NamespaceTerminating. Objects in it can still be written.
//
// Deleting the objects in the namespace, and the namespace when it is
// empty, is the namespace controller's work (kube-controller-manager),
// which envtest does not run: on the real server the namespace stays
// Terminating and its objects stay as they are. The model does the
// controller's work at once, and its end result (the objects deleted,
// finalizers honoured, the empty namespace gone) is checked on the model
// alone.
func modelNamespaceTerminating(r *modelRun) {
	op := r.op("held")
	op.Finalizers = []string{"example.com/hold"}
	r.must("create an operation with a finalizer", r.s.create(op))
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}}
	r.call("delete the namespace", r.s.delete(ns, nil), "ok")
	r.read(ns)
	r.is("the namespace has a deletionTimestamp", ns.DeletionTimestamp != nil, true)

	terminating := "Forbidden (namespace terminating)"
	r.call("create in the terminating namespace", r.s.create(r.op("late")), terminating)
	late := r.op("")
	late.GenerateName = "late-"
	r.call("create with generateName in the terminating namespace", r.s.create(late), terminating)
	r.call("create of a name in use in the terminating namespace", r.s.create(r.op("held")), terminating)

	r.read(op)
	r.simIs("the model marked the operation in it deleted", op.DeletionTimestamp != nil, true)
	op.Labels = map[string]string{"x": "y"}
	r.call("update in the terminating namespace", r.s.update(op), "ok")
	op.Finalizers = nil
	r.call("update removing the finalizer in the terminating namespace", r.s.update(op), "ok")
	if r.sim != nil {
		r.simIs("the model removed the operation", modelOutcome(r.s.get(op.DeepCopy())), "NotFound")
		r.simIs("the model removed the empty namespace", modelOutcome(r.s.get(ns.DeepCopy())), "NotFound")
	}
}

// modelOwnerReferences: deleting an owner (background propagation, the
// default for custom resources) removes it at once if it has no
// finalizers, and marks it if it has; owner references hold nothing back.
//
// Collecting the objects an owner owned is the garbage collector's work
// (kube-controller-manager), which envtest does not run: on the real
// server they stay, as they do on a cluster until its collector looks. The
// model keeps them as the real server does until its collector looks
// (CollectOrphans, a step of a schedule), then deletes them (an owned
// object with finalizers is marked deleted), which is the collector's end
// result; that is checked on the model alone.
func modelOwnerReferences(r *modelRun) {
	saga := r.saga("order")
	r.must("create a saga", r.s.create(saga))
	op := r.op("order-charge")
	op.OwnerReferences = []metav1.OwnerReference{modelOwnerRef(saga)}
	r.must("create an operation the saga owns", r.s.create(op))
	held := r.op("order-held")
	held.OwnerReferences = []metav1.OwnerReference{modelOwnerRef(saga)}
	held.Finalizers = []string{"example.com/hold"}
	r.must("create an operation with a finalizer the saga owns", r.s.create(held))
	r.call("delete the saga", r.s.delete(saga, nil), "ok")
	r.gone("get the saga after delete", saga)
	r.is("what the saga owned stays until the collector looks", modelOutcome(r.s.get(op.DeepCopy())), "ok")
	collect := func() {
		if r.sim != nil {
			r.sim.CollectOrphans()
		}
	}
	collect()
	r.simIs("the model collected the owned operation", modelOutcome(r.s.get(op.DeepCopy())), "NotFound")
	r.read(held)
	r.simIs("the model marked the owned operation with a finalizer deleted", held.DeletionTimestamp != nil, true)

	owner := r.saga("held-order")
	owner.Finalizers = []string{"example.com/hold"}
	r.must("create a saga with a finalizer", r.s.create(owner))
	dep := r.op("held-order-charge")
	dep.OwnerReferences = []metav1.OwnerReference{modelOwnerRef(owner)}
	r.must("create an operation the saga with a finalizer owns", r.s.create(dep))
	r.call("delete the saga with a finalizer", r.s.delete(owner, nil), "ok")
	r.read(owner)
	r.is("the saga with a finalizer is marked deleted", owner.DeletionTimestamp != nil, true)
	r.simIs("the model keeps what a marked owner owns", modelOutcome(r.s.get(dep.DeepCopy())), "ok")
	owner.Finalizers = nil
	r.call("update removing the saga's finalizer", r.s.update(owner), "ok")
	r.gone("get the saga after its finalizer went", owner)
	collect()
	r.simIs("the model collected what the saga owned", modelOutcome(r.s.get(dep.DeepCopy())), "NotFound")

	late := r.op("order-late")
	late.OwnerReferences = []metav1.OwnerReference{modelOwnerRef(saga)}
	r.must("create an operation owned by the saga that is gone", r.s.create(late))
	r.read(late)
	r.is("an operation created after its owner went is kept until the collector looks", late.DeletionTimestamp == nil, true)
	collect()
	r.simIs("the model's collector deleted the operation created after its owner went",
		modelOutcome(r.s.get(late.DeepCopy())), "NotFound")
}

// modelOperation is an operation with every field the CRD defaults set
// explicitly, so that the real server (which defaults) and the model
// (which does not) store the same spec.
func modelOperation(ns, name string) *v1.SideEffectOperation {
	return &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:        v1.ToolReference{Kind: v1.ToolKindTool, Name: "pay"},
			Operation:      "charge",
			IdempotencyKey: "order-1",
			Parameters:     &runtime.RawExtension{Raw: []byte(`{"amount":100,"currency":"EUR"}`)},
			Timeout:        &metav1.Duration{Duration: 10 * time.Second},
			Retention:      &metav1.Duration{Duration: 24 * time.Hour},
			RetryPolicy: &v1.RetryPolicy{
				MaxAttempts:    5,
				InitialBackoff: &metav1.Duration{Duration: time.Second},
				MaxBackoff:     &metav1.Duration{Duration: 5 * time.Minute},
			},
			Subscribers: []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "audit"}, Operation: "events.deliver"}},
		},
	}
}

// modelSaga is a saga of one irreversible step.
func modelSaga(ns, name string) *v1.Saga {
	return &v1.Saga{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SagaSpec{Steps: []v1.SagaStep{{
			Name:         "charge",
			ToolRef:      v1.StepToolReference{Kind: v1.ToolKindTool, Name: "pay"},
			Operation:    "charge",
			Irreversible: true,
		}}},
	}
}

// modelOwnerRef is the controller reference a saga puts on its operations.
func modelOwnerRef(saga *v1.Saga) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: v1.GroupVersion.String(), Kind: "Saga", Name: saga.Name, UID: saga.UID,
		Controller: &yes, BlockOwnerDeletion: &yes}
}

func modelAction(op *v1.SideEffectOperation) v1.ResolutionAction {
	if op.Spec.Resolution == nil {
		return ""
	}
	return op.Spec.Resolution.Action
}

// modelServer is the API as a case calls it, the same for both servers.
type modelServer interface {
	create(obj client.Object) error
	update(obj client.Object) error
	updateStatus(obj client.Object) error
	patch(obj client.Object, p client.Patch) error
	patchStatus(obj client.Object, p client.Patch) error
	delete(obj client.Object, pre *metav1.Preconditions) error
	// get reads obj again by its kind, namespace and name into an empty
	// object, so that nothing of the old copy survives a field the server
	// left out; obj is left alone if the read fails.
	get(obj client.Object) error
}

// realModelServer calls a real API server with a controller-runtime
// client (no cache).
type realModelServer struct {
	ctx context.Context
	c   client.Client
}

func (s realModelServer) create(obj client.Object) error { return s.c.Create(s.ctx, obj) }
func (s realModelServer) update(obj client.Object) error { return s.c.Update(s.ctx, obj) }
func (s realModelServer) updateStatus(obj client.Object) error {
	return s.c.Status().Update(s.ctx, obj)
}
func (s realModelServer) patch(obj client.Object, p client.Patch) error {
	return s.c.Patch(s.ctx, obj, p)
}
func (s realModelServer) patchStatus(obj client.Object, p client.Patch) error {
	return s.c.Status().Patch(s.ctx, obj, p)
}

func (s realModelServer) delete(obj client.Object, pre *metav1.Preconditions) error {
	var opts []client.DeleteOption
	if pre != nil {
		opts = append(opts, client.Preconditions(*pre))
	}
	return s.c.Delete(s.ctx, obj, opts...)
}

func (s realModelServer) get(obj client.Object) error {
	fresh := modelEmpty(obj)
	if err := s.c.Get(s.ctx, client.ObjectKeyFromObject(obj), fresh); err != nil {
		return err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// simModelServer calls the model.
type simModelServer struct{ s *APIServer }

func (s simModelServer) create(obj client.Object) error       { return s.s.Create(obj) }
func (s simModelServer) update(obj client.Object) error       { return s.s.Update(obj, false) }
func (s simModelServer) updateStatus(obj client.Object) error { return s.s.Update(obj, true) }
func (s simModelServer) patch(obj client.Object, p client.Patch) error {
	return s.s.Patch(obj, p, false)
}
func (s simModelServer) patchStatus(obj client.Object, p client.Patch) error {
	return s.s.Patch(obj, p, true)
}
func (s simModelServer) delete(obj client.Object, pre *metav1.Preconditions) error {
	return s.s.Delete(obj, pre)
}

func (s simModelServer) get(obj client.Object) error {
	fresh := modelEmpty(obj)
	if err := s.s.Get(keyOf(obj), fresh); err != nil {
		return err
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(fresh).Elem())
	return nil
}

// modelEmpty is an empty object of obj's type, with obj's namespace and
// name.
func modelEmpty(obj client.Object) client.Object {
	fresh := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(client.Object)
	fresh.SetNamespace(obj.GetNamespace())
	fresh.SetName(obj.GetName())
	return fresh
}

// modelFact is what one step of a case saw on one server.
type modelFact struct {
	step      string
	got, want string
	// detail is the error's message, for the report.
	detail string
	// simOnly marks a fact about the model's end result of a controller's
	// work, which the real server (without controllers) cannot show.
	simOnly bool
}

// modelRun is one case on one server.
type modelRun struct {
	t     *testing.T
	s     modelServer
	ns    string
	sim   *APIServer // nil on the real server
	facts []modelFact
	steps map[string]bool
	reads int
}

// modelStop stops a case whose setup failed; the failed step is recorded.
type modelStop struct{}

func (r *modelRun) add(f modelFact) {
	if r.steps[f.step] {
		r.t.Fatalf("the case records step %q twice", f.step)
	}
	r.steps[f.step] = true
	r.facts = append(r.facts, f)
}

// call records the outcome of a call, which the case expects to be want.
func (r *modelRun) call(step string, err error, want string) bool {
	f := modelFact{step: step, got: modelOutcome(err), want: want}
	if err != nil {
		f.detail = err.Error()
	}
	r.add(f)
	return err == nil
}

// must is a call that the rest of the case builds on: if it fails, the case
// stops there.
func (r *modelRun) must(step string, err error) {
	if !r.call(step, err, "ok") {
		panic(modelStop{})
	}
}

// read reads obj again; a failed read stops the case.
func (r *modelRun) read(obj client.Object) {
	r.reads++
	if err := r.s.get(obj); err != nil {
		r.must(fmt.Sprintf("read %s (read %d)", obj.GetName(), r.reads), err)
	}
}

// gone records that obj is not there any more.
func (r *modelRun) gone(step string, obj client.Object) {
	r.call(step, r.s.get(obj.DeepCopyObject().(client.Object)), "NotFound")
}

// is records a fact about the objects.
func (r *modelRun) is(step string, got, want any) {
	r.add(modelFact{step: step, got: fmt.Sprint(got), want: fmt.Sprint(want)})
}

// simIs records a fact that only the model shows.
func (r *modelRun) simIs(step string, got, want any) {
	if r.sim != nil {
		r.add(modelFact{step: step, got: fmt.Sprint(got), want: fmt.Sprint(want), simOnly: true})
	}
}

func (r *modelRun) op(name string) *v1.SideEffectOperation { return modelOperation(r.ns, name) }
func (r *modelRun) saga(name string) *v1.Saga              { return modelSaga(r.ns, name) }

// runModelCase runs a case on one server and returns what it saw.
func runModelCase(t *testing.T, s modelServer, sim *APIServer, ns string, run func(*modelRun)) []modelFact {
	r := &modelRun{t: t, s: s, ns: ns, sim: sim, steps: map[string]bool{}}
	func() {
		defer func() {
			if p := recover(); p != nil {
				if _, ok := p.(modelStop); !ok {
					panic(p)
				}
			}
		}()
		run(r)
	}()
	return r.facts
}

// modelOutcome names the kind of an API error, as a client tells them
// apart.
func modelOutcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case apierrors.IsForbidden(err) && apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return "Forbidden (namespace terminating)"
	case apierrors.IsConflict(err):
		return "Conflict"
	case apierrors.IsNotFound(err):
		return "NotFound"
	case apierrors.IsAlreadyExists(err):
		return "AlreadyExists"
	case apierrors.IsInvalid(err):
		return "Invalid"
	case apierrors.IsForbidden(err):
		return "Forbidden"
	case apierrors.IsBadRequest(err):
		return "BadRequest"
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return "error (not an API status)"
	}
	if reason := status.Status().Reason; reason != metav1.StatusReasonUnknown {
		return string(reason)
	}
	return fmt.Sprintf("status %d", status.Status().Code)
}

// compareModelFacts reports the steps where the real server did not do
// what the case expects (the test is wrong), and those where the model did
// not do what the real server did (the model is wrong).
func compareModelFacts(t *testing.T, real, model []modelFact) {
	t.Helper()
	byStep := map[string]modelFact{}
	for _, f := range model {
		byStep[f.step] = f
	}
	detail := func(f modelFact) string {
		if f.detail == "" {
			return ""
		}
		return " (" + f.detail + ")"
	}
	for _, rf := range real {
		mf, ok := byStep[rf.step]
		switch {
		case !ok:
			t.Logf("%-70s real %-34s model -", rf.step, rf.got)
		default:
			t.Logf("%-70s real %-34s model %s", rf.step, rf.got, mf.got)
		}
		if rf.got != rf.want {
			t.Errorf("%s: the real API server gives %s%s, the test expects %s", rf.step, rf.got, detail(rf), rf.want)
		}
		if !ok {
			t.Errorf("%s: the model stopped before this step (the real API server gives %s)", rf.step, rf.got)
			return
		}
		if mf.got != rf.got {
			t.Errorf("%s: the model gives %s%s, the real API server %s%s", rf.step, mf.got, detail(mf), rf.got, detail(rf))
		}
		delete(byStep, rf.step)
	}
	for _, mf := range model {
		if _, left := byStep[mf.step]; !left {
			continue
		}
		t.Logf("%-70s real %-34s model %s", mf.step, "-", mf.got)
		switch {
		case mf.simOnly && mf.got != mf.want:
			t.Errorf("%s (model only): the model gives %s%s, want %s", mf.step, mf.got, detail(mf), mf.want)
		case !mf.simOnly:
			t.Errorf("%s: the real API server stopped before this step (the model gives %s)", mf.step, mf.got)
		}
	}
}

// newModelSim is a model with the namespace ns; noPolicy leaves out the
// admission policy that adds the record finalizer.
func newModelSim(t *testing.T, ns string, noPolicy bool) *APIServer {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := NewAPIServer(func() metav1.Time {
		now = now.Add(time.Second)
		return metav1.NewTime(now)
	})
	s.NoFinalizerPolicy = noPolicy
	if err := s.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatalf("creating namespace %s in the model: %v", ns, err)
	}
	return s
}

// startModelAPIServer starts a real API server for the test, or skips the
// test if the control plane's binaries cannot be found (or built).
func startModelAPIServer(t *testing.T) client.Client {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		root, err := harness.Root()
		if err != nil {
			t.Fatal(err)
		}
		if assets, err = harness.Assets(root); err != nil {
			t.Skipf("no control plane binaries (set KUBEBUILDER_ASSETS or run hack/controlplane-binaries.sh): %v", err)
		}
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Skipf("no control plane binaries: %s is not in %s (run hack/controlplane-binaries.sh)", bin, assets)
		}
	}
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	srv, err := apiserver.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("stopping the API server: %v", err)
		}
	})
	return srv.Client
}
