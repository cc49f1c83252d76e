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
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/protocol"
)

// CacheOptions are the manager's cache options, for cmd/main.go and the
// test suites alike: the cache keeps, of every object it holds, only what
// some controller reads. A manager keeps every SideEffectOperation and
// IdempotencyRecord of the cluster, committed ones included, for as long
// as they exist; what it keeps of each is multiplied by their number
// (docs/performance.md, "Memory per retained operation").
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: StripUnread}
}

// StripUnread removes from an object, before the cache stores it, what no
// controller reads from the cache and no write sends back:
//
//   - metadata.managedFields, of every object. No code reads them, and the
//     API server keeps an object's managed fields when an update carries
//     none (it takes them from the stored object; a status update ignores
//     the ones it is sent in any case).
//   - every annotation of the kinds whose main resource the manager never
//     updates whole (SideEffectOperation, Saga, Tool, ClusterTool), but
//     AnnotationParametersRefused, which the cache sets itself. No
//     controller reads another, and the API server takes up to 256 KiB of
//     them an object (kubectl's last-applied-configuration alone is as
//     large as the spec). The manager writes these kinds' status
//     subresource, which ignores every metadata change, and it adds and
//     removes an operation's finalizer with a merge patch, which sends the
//     finalizers alone. So a stripped annotation is never written back.
//     IdempotencyRecords keep theirs: the manager updates their spec, and
//     an update of the main resource would erase them. Only the manager
//     writes records (config/policy).
//   - of a saga whose spec is larger than maxCachedSagaSpec, all of its
//     spec but its TTL: see boundSaga.
//   - of a terminal operation, all of its spec and status but what
//     terminalKept names: see there.
//
// The status of an operation that is not terminal is never stripped:
// every status write sends the status of the object it read, and the
// decision core reads all of it.
func StripUnread(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		// Not an object (a tombstone): leave it as it is.
		return in, nil
	}
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	switch in.(type) {
	case *v1.SideEffectOperation, *v1.Saga, *v1.Tool, *v1.ClusterTool:
		keepAnnotations(obj)
	}
	if s, ok := in.(*v1.Saga); ok {
		boundSaga(s)
	}
	if op, ok := in.(*v1.SideEffectOperation); ok {
		if op.Status.State.IsTerminal() {
			terminalKept(op)
		} else {
			boundParameters(op)
		}
	}
	return in, nil
}

// keepAnnotations drops every annotation of obj but the cache's own mark
// (boundParameters drops a mark the cache did not set).
func keepAnnotations(obj metav1.Object) {
	a := obj.GetAnnotations()
	if a == nil {
		return
	}
	mark, ok := a[AnnotationParametersRefused]
	if !ok {
		obj.SetAnnotations(nil)
		return
	}
	if len(a) > 1 {
		obj.SetAnnotations(map[string]string{AnnotationParametersRefused: mark})
	}
}

// maxCachedSagaSpec bounds the spec the cache keeps of a saga, as JSON.
// The API server stores a saga up to its request limit (about 1.5 MiB in
// etcd): inputs, literal parameters and expressions make most of it.
const maxCachedSagaSpec = 32 << 10

// boundSaga keeps the cache from holding more than maxCachedSagaSpec of a
// saga's spec. A larger spec is cut to its TTL, which the TTL's delete
// reads of an ended saga. Its inputs become empty, which marks the cut
// (sagaSpecNotCached). No stored saga has empty inputs: absent inputs are
// nil, and written ones are at least {}. The saga controller reads such a
// saga past the cache when it decides. The status it writes goes to the
// status subresource, which takes nothing of the spec it is sent.
func boundSaga(s *v1.Saga) {
	if sagaSpecNotCached(s) {
		// Transformed already: the informer may pass an object twice.
		return
	}
	raw, err := json.Marshal(&s.Spec)
	if err == nil && len(raw) <= maxCachedSagaSpec {
		return
	}
	s.Spec = v1.SagaSpec{Inputs: &runtime.RawExtension{}, TTLSecondsAfterFinished: s.Spec.TTLSecondsAfterFinished}
}

// sagaSpecNotCached reports whether s is a saga read from the manager's
// cache whose spec the cache cut (boundSaga): its spec must be read past
// the cache.
func sagaSpecNotCached(s *v1.Saga) bool {
	return s.Spec.Inputs != nil && len(s.Spec.Inputs.Raw) == 0
}

// AnnotationParametersRefused marks, in the manager's cache only, an
// operation whose parameters the cache did not keep: they are larger than
// v1.MaxParametersBytes. Its value is the refusal, as JSON. The cache
// transform removes the annotation from every operation it stores and then
// sets it itself, so no writer can set it; the manager never writes an
// operation's annotations back (see StripUnread).
const AnnotationParametersRefused = "effects.once.dev/parameters-refused"

// boundParameters keeps the cache from holding more than
// v1.MaxParametersBytes of an operation's parameters. The API server
// stores up to its request limit, about 1.5 MiB an object in etcd. Every
// replica's cache would hold that much of every such operation for as
// long as it exists. A few hundred of them would exhaust the manager.
//
// Parameters that are larger as written are measured as canonical JSON, as
// the limit is. Then one of two cases holds:
//   - Larger there too, or not JSON the hash accepts. The cache keeps none
//     of them (an empty RawExtension), and AnnotationParametersRefused says
//     why. The controller fails the operation from that alone
//     (ParametersTooLarge), before any call, without reading them.
//   - Within the limit. JSON as written can be longer, with escapes such
//     as \u003c or whitespace. The cache keeps the canonical form, which
//     has the same request hash. It does so once the numbers were checked
//     as written (protocol.CheckNumbers): the canonical form no longer
//     shows them.
func boundParameters(op *v1.SideEffectOperation) {
	if refusedByCache(op) != nil {
		// Transformed already: the informer may pass an object twice.
		return
	}
	if a := op.GetAnnotations(); a != nil {
		if _, ok := a[AnnotationParametersRefused]; ok {
			delete(a, AnnotationParametersRefused)
			if len(a) == 0 {
				op.SetAnnotations(nil)
			}
		}
	}
	if op.Spec.Parameters == nil || len(op.Spec.Parameters.Raw) <= v1.MaxParametersBytes {
		return
	}
	raw := op.Spec.Parameters.Raw
	canonical, err := protocol.Canonical(raw)
	no := protocol.CheckParameters(canonical)
	switch {
	case err != nil:
		no = &protocol.Refusal{Class: v1.ErrorInvalid, Reason: v1.ReasonInvalidSpec,
			Message: "spec.parameters cannot be hashed: " + err.Error()}
	case no == nil:
		no = protocol.CheckNumbers(raw)
	}
	if no == nil {
		op.Spec.Parameters = &runtime.RawExtension{Raw: canonical}
		return
	}
	mark, err := json.Marshal(no)
	if err != nil {
		mark = []byte(`{}`)
	}
	// Empty, which no stored object has (absent parameters are nil, and
	// written ones at least {}): the mark that the refusal is the cache's.
	op.Spec.Parameters = &runtime.RawExtension{}
	if op.Annotations == nil {
		op.Annotations = map[string]string{}
	}
	op.Annotations[AnnotationParametersRefused] = string(mark)
}

// refusedByCache is the refusal the cache noted for an operation whose
// parameters it did not keep (boundParameters), or nil.
func refusedByCache(op *v1.SideEffectOperation) *protocol.Refusal {
	mark, ok := op.GetAnnotations()[AnnotationParametersRefused]
	if !ok || op.Spec.Parameters == nil || len(op.Spec.Parameters.Raw) > 0 {
		return nil
	}
	no := &protocol.Refusal{}
	if err := json.Unmarshal([]byte(mark), no); err != nil || no.Reason == "" {
		return &protocol.Refusal{Class: v1.ErrorInvalid, Reason: v1.ReasonParametersTooLarge,
			Message: fmt.Sprintf("spec.parameters are larger than %d bytes of canonical JSON", v1.MaxParametersBytes)}
	}
	return no
}

// terminalKept reduces a terminal operation (Committed, FailedFinal,
// Compensated: none of them is ever left) to what the manager reads of it
// from its cache. Terminal operations are nearly all the operations a
// cluster retains, and their parameters (up to 64 KiB), result (up to
// 16 KiB), observations, history and conditions are most of what a manager
// would hold of each.
//
// The metadata stays whole, less managedFields and kubectl's annotation.
// Each part serves a reader:
//   - the name, UID and resourceVersion: the preconditions of the TTL's
//     delete.
//   - the finalizers and the deletion time: the finalizer and its release.
//   - the labels and the owner references: the saga's list of its
//     operations, and its controller reference. A TTL leaves a saga's
//     operations to it.
//
// Of the spec:
//   - toolRef, operation and idempotencyKey: the scope. An operation falls
//     in its shard by it, and the saga checks a step's operation against
//     it.
//   - ttlSecondsAfterFinished: the TTL.
//
// Of the status:
//   - state: everything asks it first. Nothing of the rest is read unless
//     it is terminal. The NeedsReview metric counts by it.
//   - attempts, duplicateOf: whether the operation needs the finalizer
//     that keeps its outcome (keepFinalizer, expireOperation).
//   - recordName, which an operation ended under the previous release
//     still has. The record controller's delete watch derives the name
//     from the scope, kept above.
//   - completionTime, and the Ready condition: when it ended, for the
//     TTL. The Ready condition's reason and message are also what a saga
//     reports of its step.
//   - externalObjectID, resultDigest: what a saga keeps of its step.
//   - outbox, while an announcement is Pending: the relay's watch and its
//     first look. The relay then reads the object past the cache.
//
// Whoever needs more reads the operation past the cache, from the API
// server, at the moment it needs it:
//   - The saga reads a committed step's result for a later step's
//     parameters (SagaReconciler.readResults).
//   - The finalizer reads the outcome it copies into the scope's record
//     (release).
//   - An operation with the same scope reads its owner's outcome
//     (ownerOf).
//   - The relay reads the announcement it delivers.
//
// No write starts from a cached terminal operation:
//   - Status writes start only from an operation that is not terminal, or
//     from one read past the cache.
//   - The finalizer is added and removed by a merge patch of the
//     finalizers.
//   - The TTL's delete sends preconditions only.
//
// cache_test.go checks that the stored object keeps its spec and status.
// A field added to the status is dropped here until it is named.
func terminalKept(op *v1.SideEffectOperation) {
	spec, st := &op.Spec, &op.Status
	op.Spec = v1.SideEffectOperationSpec{
		ToolRef:                 spec.ToolRef,
		Operation:               spec.Operation,
		IdempotencyKey:          spec.IdempotencyKey,
		TTLSecondsAfterFinished: spec.TTLSecondsAfterFinished,
	}
	kept := v1.SideEffectOperationStatus{
		State:            st.State,
		Attempts:         st.Attempts,
		DuplicateOf:      st.DuplicateOf,
		RecordName:       st.RecordName,
		CompletionTime:   st.CompletionTime,
		ExternalObjectID: st.ExternalObjectID,
		ResultDigest:     st.ResultDigest,
	}
	if ready := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); ready != nil {
		kept.Conditions = []metav1.Condition{*ready}
	}
	if outbox.Pending(st.Outbox) {
		kept.Outbox = st.Outbox
	}
	op.Status = kept
}

// resultNotCached reports whether op's result is in the API server but not
// in op: a terminal operation read from the manager's cache has a digest
// of its result and not the result itself. (So has an operation whose
// result was above MaxResultBytes; reading it past the cache finds none.)
func resultNotCached(op *v1.SideEffectOperation) bool {
	return op.Status.Result == nil && op.Status.ResultDigest != ""
}

// WatchOnly restricts the cache of o to namespaces, when there are any:
// the manager then lists and watches operations, sagas, Tools and scope
// records there alone, and needs rights there alone. Config.WatchNamespaces
// must name the same namespaces, so that no controller asks the cache for a
// cluster-scoped kind.
func WatchOnly(o cache.Options, namespaces []string) cache.Options {
	if len(namespaces) == 0 {
		return o
	}
	o.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	return o
}
