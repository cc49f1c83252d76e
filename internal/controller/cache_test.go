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
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

const lastApplied = corev1.LastAppliedConfigAnnotation

func TestStripUnread(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
	meta := func(annotations map[string]string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "x", Namespace: "ns", ManagedFields: managed, Annotations: annotations}
	}
	result := &runtime.RawExtension{Raw: []byte(`{"id":"ch_1"}`)}
	cases := map[string]struct {
		reason string
		in     any
		want   any
	}{
		"OperationApplied": {
			reason: "An applied operation loses its managed fields and its annotations, kubectl's and the others, and keeps its spec and status.",
			in: &v1.SideEffectOperation{ObjectMeta: meta(map[string]string{lastApplied: `{"spec":{}}`, "team": "payments"}),
				Spec:   v1.SideEffectOperationSpec{Operation: "charge.create"},
				Status: v1.SideEffectOperationStatus{State: v1.StateStarted, Result: result}},
			want: &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"},
				Spec:   v1.SideEffectOperationSpec{Operation: "charge.create"},
				Status: v1.SideEffectOperationStatus{State: v1.StateStarted, Result: result}},
		},
		"OperationForgedMark": {
			reason: "An operation that carries the cache's mark as written loses it: only the cache sets it.",
			in: &v1.SideEffectOperation{ObjectMeta: meta(map[string]string{AnnotationParametersRefused: `{}`, "team": "payments"}),
				Spec: v1.SideEffectOperationSpec{Operation: "charge.create", Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}}},
			want: &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"},
				Spec: v1.SideEffectOperationSpec{Operation: "charge.create", Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}}},
		},
		"OperationOnlyAnnotation": {
			reason: "An operation whose only annotation was kubectl's has none left.",
			in:     &v1.SideEffectOperation{ObjectMeta: meta(map[string]string{lastApplied: `{}`})},
			want:   &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		},
		"OperationCreatedByAProgram": {
			reason: "An operation without annotations only loses its managed fields.",
			in:     &v1.SideEffectOperation{ObjectMeta: meta(nil)},
			want:   &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		},
		"Saga": {
			reason: "Sagas are written through their status only: kubectl's annotation goes.",
			in:     &v1.Saga{ObjectMeta: meta(map[string]string{lastApplied: `{}`})},
			want:   &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		},
		"Tool": {
			reason: "Tools are written through their status only: kubectl's annotation goes.",
			in:     &v1.Tool{ObjectMeta: meta(map[string]string{lastApplied: `{}`})},
			want:   &v1.Tool{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		},
		"ClusterTool": {
			reason: "ClusterTools are written through their status only: kubectl's annotation goes.",
			in:     &v1.ClusterTool{ObjectMeta: meta(map[string]string{lastApplied: `{}`})},
			want:   &v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns"}},
		},
		"RecordKeepsAnnotation": {
			reason: "The manager updates a record's spec: an update would erase an annotation the cache dropped, so it stays.",
			in: &v1.IdempotencyRecord{ObjectMeta: meta(map[string]string{lastApplied: `{}`}),
				Spec: v1.IdempotencyRecordSpec{Outcome: &v1.RecordOutcome{Result: result}}},
			want: &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns",
				Annotations: map[string]string{lastApplied: `{}`}},
				Spec: v1.IdempotencyRecordSpec{Outcome: &v1.RecordOutcome{Result: result}}},
		},
		"NamespaceKeepsAnnotation": {
			reason: "Other kinds only lose their managed fields.",
			in:     &corev1.Namespace{ObjectMeta: meta(map[string]string{lastApplied: `{}`})},
			want: &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns",
				Annotations: map[string]string{lastApplied: `{}`}}},
		},
		"Tombstone": {
			reason: "What is not an object passes unchanged.",
			in:     toolscache.DeletedFinalStateUnknown{Key: "ns/x"},
			want:   toolscache.DeletedFinalStateUnknown{Key: "ns/x"},
		},
	}
	maps.Copy(cases, terminalCases())
	maps.Copy(cases, parameterCases())
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := StripUnread(tc.in)
			if err != nil {
				t.Fatalf("%s\nStripUnread(...): unexpected error: %v", tc.reason, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nStripUnread(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// parameterCases are StripUnread's cases for operations whose parameters
// are larger than v1.MaxParametersBytes as written: the cache never holds
// more than that of them.
func parameterCases() map[string]struct {
	reason string
	in     any
	want   any
} {
	op := func(params string, annotations map[string]string) *v1.SideEffectOperation {
		o := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", Annotations: annotations},
			Spec: v1.SideEffectOperationSpec{Operation: "charge.create"}}
		switch params {
		case "":
		case "dropped":
			o.Spec.Parameters = &runtime.RawExtension{}
		default:
			o.Spec.Parameters = &runtime.RawExtension{Raw: []byte(params)}
		}
		return o
	}
	fill := func(n int) string { return strings.Repeat("a", n) }
	big := `{"note":"` + fill(v1.MaxParametersBytes) + `"}`
	tooLarge := `{"Class":"Invalid","Reason":"ParametersTooLarge","Message":"spec.parameters take 65547 bytes of canonical JSON; the limit is 65536"}`
	// 3000 escaped characters take 18000 bytes as written and 3000 as
	// canonical JSON.
	escaped := `{ "b": "` + strings.Repeat(`\u003c`, 3000) + fill(v1.MaxParametersBytes-10000) + `", "a": 1 }`
	canonical := `{"a":1,"b":"` + strings.Repeat("<", 3000) + fill(v1.MaxParametersBytes-10000) + `"}`
	imprecise := `{"n": 12345678901234567, "pad": "` + fill(v1.MaxParametersBytes-200) + `", "ws": "` + strings.Repeat(`\u003e`, 100) + `"}`
	type tc = struct {
		reason string
		in     any
		want   any
	}
	return map[string]tc{
		"ParametersWithinTheLimit": {
			reason: "Parameters within the limit as written stay as written.",
			in:     op(`{"amount": 1}`, nil), want: op(`{"amount": 1}`, nil),
		},
		"ParametersTooLarge": {
			reason: "Parameters above the limit as canonical JSON are not kept, nor are other annotations; the refusal is.",
			in:     op(big, map[string]string{"team": "payments"}),
			want:   op("dropped", map[string]string{AnnotationParametersRefused: tooLarge}),
		},
		"ParametersTooLargeAsWrittenOnly": {
			reason: "Parameters above the limit as written and within it as canonical JSON are kept in canonical form.",
			in:     op(escaped, nil), want: op(canonical, nil),
		},
		"ImpreciseNumberInLargeParameters": {
			reason: "The canonical form would hide a number that a double cannot hold: the refusal is kept instead.",
			in:     op(imprecise, nil),
			want: op("dropped", map[string]string{AnnotationParametersRefused: `{"Class":"Invalid","Reason":"ParametersInvalid",` +
				`"Message":"spec.parameters hold the number 12345678901234567, which has more precision than a double: ` +
				`the request hash could not tell it from a nearby number; send it as a string"}`}),
		},
		"TransformedTwice": {
			reason: "An operation passed twice keeps the cache's refusal.",
			in:     op("dropped", map[string]string{AnnotationParametersRefused: tooLarge}),
			want:   op("dropped", map[string]string{AnnotationParametersRefused: tooLarge}),
		},
		"ForgedRefusalWithoutParameters": {
			reason: "A writer's annotation on an operation without parameters goes too.",
			in:     op("", map[string]string{AnnotationParametersRefused: tooLarge}),
			want:   op("", nil),
		},
		"ForgedRefusal": {
			reason: "The refusal is the cache's own: a writer's annotation of that name goes.",
			in:     op(`{"amount": 1}`, map[string]string{AnnotationParametersRefused: `{}`}),
			want:   op(`{"amount": 1}`, nil),
		},
		"TerminalDropsParametersAnyway": {
			reason: "A terminal operation keeps no parameters, large or not.",
			in: &v1.SideEffectOperation{Spec: v1.SideEffectOperationSpec{Parameters: &runtime.RawExtension{Raw: []byte(big)}},
				Status: v1.SideEffectOperationStatus{State: v1.StateFailedFinal}},
			want: &v1.SideEffectOperation{Status: v1.SideEffectOperationStatus{State: v1.StateFailedFinal}},
		},
	}
}

// terminalCases are StripUnread's cases for operations in each state: a
// terminal one keeps what terminalKept names, any other all it has.
func terminalCases() map[string]struct {
	reason string
	in     any
	want   any
} {
	ttl := int32(60)
	done := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	ready := metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1.ReasonCommitted,
		Message: "Committed as ch_1", LastTransitionTime: done, ObservedGeneration: 1}
	delivered := v1.OutboxEntry{EventID: "e-1", Subscriber: "audit", State: v1.DeliveryDelivered}
	pending := v1.OutboxEntry{EventID: "e-2", Subscriber: "billing", State: v1.DeliveryPending}
	objectMeta := metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "u-1", ResourceVersion: "7", Generation: 1,
		Labels: map[string]string{"once.dev/saga": "change"}, Finalizers: []string{v1.FinalizerRecord},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: v1.GroupVersion.String(), Kind: "Saga", Name: "change", UID: "s-1"}}}
	full := func(state v1.OperationState, outbox ...v1.OutboxEntry) *v1.SideEffectOperation {
		return &v1.SideEffectOperation{ObjectMeta: *objectMeta.DeepCopy(),
			Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
				Operation: "charge.create", IdempotencyKey: "order-1",
				Parameters:              &runtime.RawExtension{Raw: []byte(`{"amount":100}`)},
				Timeout:                 &metav1.Duration{Duration: time.Second},
				Retention:               &metav1.Duration{Duration: time.Hour},
				TTLSecondsAfterFinished: &ttl,
				RetryPolicy:             &v1.RetryPolicy{MaxAttempts: 3},
				Subscribers:             []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "hooks"}, Operation: "events.deliver"}}},
			Status: v1.SideEffectOperationStatus{State: state, IdempotencyKey: "order-1", ToolIdempotencyKey: "ns/Tool:payments/charge.create/order-1",
				RequestHash: "sha256:aa", RecordName: "scope-1", DuplicateOf: "y", Attempts: 2,
				ExternalObjectID: "ch_1", ExternalRequestID: "req_1",
				Result: &runtime.RawExtension{Raw: []byte(`{"id":"ch_1"}`)}, ResultDigest: "sha256:bb",
				ErrorClass: v1.ErrorRetryable, ErrorMessage: "attempt 1 refused", IdempotencyMode: v1.IdempotencyNative,
				Promise:      "sha256:cc",
				Observations: []v1.Observation{{Time: done, Kind: v1.ObservationCall, Attempt: 2, Outcome: "Succeeded"}},
				History:      []v1.Transition{{Time: done, State: state, Reason: v1.ReasonCommitted}},
				StartedTime:  &done, CommittedTime: &done, CompletionTime: &done, ExpiryTime: &done,
				Outbox: outbox, ObservedGeneration: 1,
				Conditions: []metav1.Condition{ready,
					{Type: v1.ConditionSucceeded, Status: metav1.ConditionTrue, Reason: v1.ReasonCommitted, Message: "Committed as ch_1"}}},
		}
	}
	kept := func(state v1.OperationState, outbox ...v1.OutboxEntry) *v1.SideEffectOperation {
		return &v1.SideEffectOperation{ObjectMeta: *objectMeta.DeepCopy(),
			Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
				Operation: "charge.create", IdempotencyKey: "order-1", TTLSecondsAfterFinished: &ttl},
			Status: v1.SideEffectOperationStatus{State: state, RecordName: "scope-1", DuplicateOf: "y", Attempts: 2,
				ExternalObjectID: "ch_1", ResultDigest: "sha256:bb", CompletionTime: &done, Outbox: outbox,
				Conditions: []metav1.Condition{ready}},
		}
	}
	type tc = struct {
		reason string
		in     any
		want   any
	}
	cases := map[string]tc{
		"CommittedKeepsWhatIsRead": {
			reason: "A committed operation keeps its metadata, its scope and TTL, and the status fields the manager reads from its cache.",
			in:     full(v1.StateCommitted, delivered), want: kept(v1.StateCommitted),
		},
		"FailedFinal": {
			reason: "FailedFinal is terminal: the same fields stay.",
			in:     full(v1.StateFailedFinal), want: kept(v1.StateFailedFinal),
		},
		"Compensated": {
			reason: "Compensated is terminal: the same fields stay.",
			in:     full(v1.StateCompensated), want: kept(v1.StateCompensated),
		},
		"PendingOutbox": {
			reason: "A terminal operation whose announcement is still Pending keeps its outbox for the relay's watch.",
			in:     full(v1.StateCommitted, delivered, pending), want: kept(v1.StateCommitted, delivered, pending),
		},
	}
	for _, s := range []v1.OperationState{"", v1.StatePlanned, v1.StateStarted, v1.StateFailedRetryable, v1.StateUnknown,
		v1.StateReconciling, v1.StateNeedsReview, v1.StateCompensating} {
		cases["Keeps"+string(s.OrPlanned())+"Whole"] = tc{
			reason: "An operation that is not terminal keeps all it has: its status is written from the cache.",
			in:     full(s, pending), want: full(s, pending),
		}
	}
	return cases
}

// strippedCache is a cache with the manager's options, started for the
// current test.
func strippedCache() cache.Cache {
	GinkgoHelper()
	opts := CacheOptions()
	opts.Scheme = scheme
	c, err := cache.New(cfg, opts)
	Expect(err).NotTo(HaveOccurred())
	cctx, stop := context.WithCancel(ctx)
	DeferCleanup(stop)
	go func() {
		defer GinkgoRecover()
		Expect(c.Start(cctx)).To(Succeed())
	}()
	Expect(c.WaitForCacheSync(cctx)).To(BeTrue())
	return c
}

// applied is an operation as kubectl apply creates it: with the
// annotation that holds what was applied, and managed fields under
// kubectl's name.
func applied(op *v1.SideEffectOperation) *v1.SideEffectOperation {
	GinkgoHelper()
	op.TypeMeta = metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "SideEffectOperation"}
	data, err := json.Marshal(op)
	Expect(err).NotTo(HaveOccurred())
	op.Annotations = map[string]string{lastApplied: string(data) + "\n", "team": "payments"}
	Expect(k8sClient.Create(ctx, op, client.FieldOwner("kubectl-client-side-apply"))).To(Succeed())
	return op
}

// entryOf is the managed fields entry of a manager for the main resource.
func entryOf(obj client.Object, manager string) *metav1.ManagedFieldsEntry {
	for _, e := range obj.GetManagedFields() {
		if e.Manager == manager && e.Subresource == "" {
			return &e
		}
	}
	return nil
}

var _ = Describe("The manager's cache", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	It("keeps neither managed fields nor annotations of an operation, and the API server keeps both through status writes", func() {
		op := applied(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100}))
		stored := get(ns, "charge-1")
		kubectl := entryOf(stored, "kubectl-client-side-apply")
		Expect(kubectl).NotTo(BeNil())

		By("reading the operation from a cache with the manager's options")
		c := strippedCache()
		cached := &v1.SideEffectOperation{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(op), cached) }).Should(Succeed())
		Expect(cached.ManagedFields).To(BeNil())
		Expect(cached.Annotations).To(BeNil())
		Expect(cached.Spec).To(Equal(stored.Spec))

		By("writing the status of the cached object")
		cached.Status.State = v1.StateFailedFinal
		cached.Status.ErrorMessage = "written from the cache"
		Expect(k8sClient.Status().Update(ctx, cached, client.FieldOwner("once"))).To(Succeed())
		after := get(ns, "charge-1")
		Expect(after.Status.ErrorMessage).To(Equal("written from the cache"))
		Expect(after.Annotations).To(Equal(stored.Annotations))
		Expect(entryOf(after, "kubectl-client-side-apply")).To(Equal(kubectl))
	})

	It("holds none of an operation's parameters above the limit, and the manager fails it from the size alone", func() {
		// An author who creates operations of 1 MiB each, as many as the API
		// server takes: every replica's cache would hold all of each.
		newTool(ns, "payments", v1.IdempotencyNative)
		op := create(newOp(ns, "charge-1", "payments", map[string]any{"note": strings.Repeat("a", 1<<20)}))
		stored := get(ns, "charge-1")
		Expect(len(stored.Spec.Parameters.Raw)).To(BeNumerically(">", 1<<20))

		By("reading it from a cache with the manager's options")
		c := strippedCache()
		cached := &v1.SideEffectOperation{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(op), cached) }).Should(Succeed())
		Expect(cached.Spec.Parameters).To(Equal(&runtime.RawExtension{}))
		Expect(cached.Annotations).To(HaveKeyWithValue(AnnotationParametersRefused, ContainSubstring(v1.ReasonParametersTooLarge)))

		By("failing it before any call, with the size in its condition")
		DeferCleanup(startManager(managerOptions{}))
		failed := waitFor(ns, "charge-1", v1.StateFailedFinal)
		ready := condition(failed, v1.ConditionReady)
		Expect(ready.Reason).To(Equal(v1.ReasonParametersTooLarge))
		Expect(ready.Message).To(Equal(fmt.Sprintf(
			"spec.parameters take %d bytes of canonical JSON; the limit is %d", len(stored.Spec.Parameters.Raw), v1.MaxParametersBytes)))
		Expect(failed.Status.Attempts).To(BeZero())
		Expect(effectsIn(ns)).To(BeZero())

		By("keeping the stored parameters, which nothing wrote back")
		Expect(get(ns, "charge-1").Spec.Parameters.Raw).To(Equal(stored.Spec.Parameters.Raw))
		Expect(get(ns, "charge-1").Annotations).NotTo(HaveKey(AnnotationParametersRefused))
	})

	It("does not erase what it strips when the manager commits an applied operation", func() {
		DeferCleanup(startManager(managerOptions{}))
		newTool(ns, "payments", v1.IdempotencyNative)
		applied(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100}))
		stored := get(ns, "charge-1")
		kubectl := entryOf(stored, "kubectl-client-side-apply")
		Expect(kubectl).NotTo(BeNil())

		op := waitFor(ns, "charge-1", v1.StateCommitted)
		Expect(op.Annotations).To(Equal(stored.Annotations))
		Expect(entryOf(op, "kubectl-client-side-apply")).To(Equal(kubectl))
		Expect(op.ManagedFields).To(ContainElement(HaveField("Subresource", "status")))
	})

	It("keeps a record's annotation, and the API server keeps its managed fields through an update without them", func() {
		rec := &v1.IdempotencyRecord{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "scope-1", Annotations: map[string]string{lastApplied: "{}\n"}},
			Spec: v1.IdempotencyRecordSpec{ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge.create",
				IdempotencyKey: "k", RequestHash: "sha256:0", Owner: v1.RecordOwner{Name: "charge-1", UID: "u-1"},
				Retention: metav1.Duration{Duration: time.Hour}},
		}
		Expect(k8sClient.Create(ctx, rec, client.FieldOwner("creator"))).To(Succeed())
		stored := &v1.IdempotencyRecord{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rec), stored)).To(Succeed())
		creator := entryOf(stored, "creator")
		Expect(creator).NotTo(BeNil())

		c := strippedCache()
		cached := &v1.IdempotencyRecord{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(rec), cached) }).Should(Succeed())
		Expect(cached.ManagedFields).To(BeNil())
		Expect(cached.Annotations).To(HaveKey(lastApplied))

		By("updating the cached record's spec as the manager does when it writes an outcome")
		now := metav1.Now()
		cached.Spec.Outcome = &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1",
			CompletionTime: now, ExpiryTime: metav1.NewTime(now.Add(time.Hour))}
		Expect(k8sClient.Update(ctx, cached, client.FieldOwner("once"))).To(Succeed())
		after := &v1.IdempotencyRecord{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rec), after)).To(Succeed())
		Expect(after.Spec.Outcome).NotTo(BeNil())
		Expect(after.Annotations).To(Equal(stored.Annotations))
		Expect(entryOf(after, "creator")).To(Equal(creator))
		Expect(entryOf(after, "once")).NotTo(BeNil())
	})

	It("keeps of a terminal operation only what the manager reads, erases nothing stored, and gives the record the full outcome", func() {
		DeferCleanup(startManager(managerOptions{}))
		newTool(ns, "payments", v1.IdempotencyNative)
		applied(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100}))
		stored := waitFor(ns, "charge-1", v1.StateCommitted)
		Expect(stored.Status.Result).NotTo(BeNil())
		Expect(stored.Status.History).NotTo(BeEmpty())

		By("reading it from a cache with the manager's options")
		c := strippedCache()
		cached := &v1.SideEffectOperation{}
		Eventually(func() v1.OperationState {
			_ = c.Get(ctx, client.ObjectKeyFromObject(stored), cached)
			return cached.Status.State
		}).Should(Equal(v1.StateCommitted))
		Expect(cached.Spec).To(Equal(v1.SideEffectOperationSpec{ToolRef: stored.Spec.ToolRef, Operation: stored.Spec.Operation}))
		Expect(cached.Status).To(Equal(v1.SideEffectOperationStatus{State: v1.StateCommitted,
			Attempts: stored.Status.Attempts, RecordName: stored.Status.RecordName,
			ExternalObjectID: stored.Status.ExternalObjectID, ResultDigest: stored.Status.ResultDigest,
			CompletionTime: stored.Status.CompletionTime,
			Conditions:     []metav1.Condition{conditionIn(stored.Status.Conditions, v1.ConditionReady)}}))
		Expect(cached.Finalizers).To(Equal(stored.Finalizers))

		By("taking its finalizer away: the manager gives it back, patching from its cache")
		patch := client.MergeFrom(stored.DeepCopy())
		stored.Finalizers = nil
		Expect(k8sClient.Patch(ctx, stored, patch)).To(Succeed())
		Eventually(func() []string { return get(ns, "charge-1").Finalizers }, 10*time.Second).
			Should(ContainElement(v1.FinalizerRecord))
		after := get(ns, "charge-1")
		Expect(after.Spec).To(Equal(stored.Spec))
		Expect(after.Status).To(Equal(stored.Status))
		Expect(after.Annotations).To(Equal(stored.Annotations))

		By("deleting it by a TTL: the record gets the outcome as the API server has it")
		patch = client.MergeFrom(after.DeepCopy())
		after.Spec.TTLSecondsAfterFinished = new(int32(0))
		Expect(k8sClient.Patch(ctx, after, patch)).To(Succeed())
		Eventually(gone(after), 15*time.Second, 100*time.Millisecond).Should(BeTrue())
		rec := record(ns, recordNameOf(stored))
		Expect(rec).NotTo(BeNil())
		Expect(rec.Spec.Outcome).NotTo(BeNil())
		o := rec.Spec.Outcome
		Expect(o.Result).NotTo(BeNil())
		Expect(o.Result.Raw).To(MatchJSON(stored.Status.Result.Raw))
		Expect(o.ResultDigest).To(Equal(stored.Status.ResultDigest))
		Expect(o.ExternalObjectID).To(Equal(stored.Status.ExternalObjectID))
		Expect(o.ExternalRequestID).To(Equal(stored.Status.ExternalRequestID))
		Expect(o.Attempts).To(Equal(stored.Status.Attempts))
		Expect(o.Reason).To(Equal(v1.ReasonCommitted))
		Expect(o.CompletionTime).To(Equal(*stored.Status.CompletionTime))
		Expect(rec.Spec.RequestHash).To(Equal(stored.Status.RequestHash))
	})

	It("gives a saga's later step its parameters from an earlier step's result, which the cache does not keep", func() {
		DeferCleanup(startManager(managerOptions{}))
		newDesk(ns)
		steps := changeSteps()[:2]
		steps[1].ParametersFrom = append(steps[1].ParametersFrom,
			v1.ParameterExpression{Name: "title", Expression: "steps.ticket.result.parameters.title"})
		Expect(k8sClient.Create(ctx, newSaga(ns, "scale", steps))).To(Succeed())
		waitSaga(ns, "scale", v1.StateCommitted)

		ticket := get(ns, "scale.ticket")
		Expect(ticket.Status.Result).NotTo(BeNil())
		var params map[string]any
		Expect(json.Unmarshal(get(ns, "scale.config").Spec.Parameters.Raw, &params)).To(Succeed())
		Expect(params).To(HaveKeyWithValue("title", "scale checkout"))
		Expect(params).To(HaveKeyWithValue("ticket", ticket.Status.ExternalObjectID))

		By("reading the step from a cache with the manager's options: no result there")
		c := strippedCache()
		cached := &v1.SideEffectOperation{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(ticket), cached) }).Should(Succeed())
		Expect(cached.Status.State).To(Equal(v1.StateCommitted))
		Expect(cached.Status.Result).To(BeNil())
		Expect(cached.Status.ResultDigest).To(Equal(ticket.Status.ResultDigest))
	})

	It("loses a stripped annotation on an update of an operation's main resource, and keeps it on a merge patch", func() {
		// Why the manager writes operations only through their status,
		// and a finalizer must be added with a patch.
		op := applied(newOp(ns, "charge-1", "payments", map[string]any{"amount": 100}))
		c := strippedCache()
		cached := &v1.SideEffectOperation{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(op), cached) }).Should(Succeed())

		By("patching a finalizer in, from the cached object")
		patch := client.MergeFrom(cached.DeepCopy())
		cached.Finalizers = append(cached.Finalizers, "once.dev/test")
		Expect(k8sClient.Patch(ctx, cached, patch)).To(Succeed())
		Expect(get(ns, "charge-1").Annotations).To(HaveKey(lastApplied))

		By("updating the main resource from the cached object")
		Eventually(func() []string {
			Expect(c.Get(ctx, client.ObjectKeyFromObject(op), cached)).To(Succeed())
			return cached.Finalizers
		}).Should(ContainElement("once.dev/test"))
		cached.Finalizers = nil
		Expect(k8sClient.Update(ctx, cached)).To(Succeed())
		Expect(get(ns, "charge-1").Annotations).NotTo(HaveKey(lastApplied))
	})

	It("holds a bounded part of a large saga, and the manager runs it from the saga read past the cache", func() {
		// 60 KiB of inputs: within their limit, and past what the cache
		// keeps of a spec.
		newDesk(ns)
		s := newSaga(ns, "big", changeSteps())
		s.Spec.Inputs = raw(map[string]any{"service": "checkout", "notes": strings.Repeat("n", 60<<10)})
		s.Annotations = map[string]string{"notes": strings.Repeat("a", 200<<10)}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())

		By("reading it from a cache with the manager's options")
		c := strippedCache()
		cached := &v1.Saga{}
		Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(s), cached) }).Should(Succeed())
		Expect(cached.Annotations).To(BeNil())
		Expect(sagaSpecNotCached(cached)).To(BeTrue())
		Expect(cached.Spec.Steps).To(BeEmpty())

		By("running its steps with the inputs the cache did not keep")
		DeferCleanup(startManager(managerOptions{}))
		done := waitSaga(ns, "big", v1.StateCommitted)
		Expect(done.Status.StepsDone).To(BeEquivalentTo(3))
		var params map[string]any
		Expect(json.Unmarshal(get(ns, "big.config").Spec.Parameters.Raw, &params)).To(Succeed())
		Expect(params).To(HaveKeyWithValue("service", "checkout"))

		By("keeping the stored spec and annotations, which nothing wrote back")
		stored := getSaga(ns, "big")
		Expect(stored.Spec.Inputs.Raw).To(MatchJSON(s.Spec.Inputs.Raw))
		Expect(stored.Annotations).To(Equal(s.Annotations))
	})
})

// worstAnnotations are 256 KiB of annotations, all the API server takes of
// an object, kubectl's included.
func worstAnnotations() map[string]string {
	return map[string]string{lastApplied: strings.Repeat("a", 128<<10), "notes": strings.Repeat("b", 128<<10-64)}
}

// worstSaga is a saga as large as the API server stores one: inputs,
// sixteen steps of literal parameters and expressions, each with a
// compensation that has its own.
func worstSaga() *v1.Saga {
	raw := func(n int) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"note":"` + strings.Repeat("x", n) + `"}`)}
	}
	exprs := func(n int) []v1.ParameterExpression {
		var out []v1.ParameterExpression
		for i := range n {
			out = append(out, v1.ParameterExpression{Name: fmt.Sprintf("p%d", i), Expression: "'" + strings.Repeat("e", 4000) + "'"})
		}
		return out
	}
	s := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "ns", Annotations: worstAnnotations()},
		Spec: v1.SagaSpec{Inputs: raw(64 << 10), TTLSecondsAfterFinished: new(int32(60))}}
	for i := range 16 {
		s.Spec.Steps = append(s.Spec.Steps, v1.SagaStep{Name: fmt.Sprintf("step-%d", i),
			ToolRef: v1.StepToolReference{Name: "payments"}, Operation: "charge.create",
			Parameters: raw(32 << 10), ParametersFrom: exprs(4),
			Compensation: &v1.Compensation{Operation: "charge.refund", Parameters: raw(16 << 10), ParametersFrom: exprs(2)}})
	}
	s.Status.State = v1.StateStarted
	return s
}

// sizeOf is the size of an object as JSON, as the cache holds it decoded.
func sizeOf(t *testing.T, obj any) int {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestCacheBounds builds the largest objects a tenant can write and
// measures what the cache keeps of each.
func TestCacheBounds(t *testing.T) {
	op := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", Annotations: worstAnnotations()},
		Spec: v1.SideEffectOperationSpec{Operation: "charge.create", Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}}}
	cases := map[string]struct {
		in any
		// most is what the cache may keep of it, as JSON.
		most int
	}{
		"OperationAnnotations": {in: op, most: 1 << 10},
		"ToolAnnotations":      {in: &v1.Tool{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: worstAnnotations()}}, most: 1 << 10},
		"Saga":                 {in: worstSaga(), most: 2 << 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := sizeOf(t, tc.in)
			got, err := StripUnread(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			after := sizeOf(t, got)
			t.Logf("%s: %d bytes as stored, %d kept", name, before, after)
			if after > tc.most {
				t.Errorf("the cache keeps %d bytes of %d; at most %d", after, before, tc.most)
			}
		})
	}
}

// TestSagaCutOnce checks that a saga the cache cut stays cut when the
// informer passes it again, and that a saga within the bound stays whole.
func TestSagaCutOnce(t *testing.T) {
	s := worstSaga()
	for range 2 {
		if _, err := StripUnread(s); err != nil {
			t.Fatal(err)
		}
		if !sagaSpecNotCached(s) || s.Spec.TTLSecondsAfterFinished == nil || *s.Spec.TTLSecondsAfterFinished != 60 {
			t.Fatalf("the cut saga is not marked, or lost its TTL: %+v", s.Spec)
		}
	}
	small := &v1.Saga{Spec: v1.SagaSpec{Inputs: &runtime.RawExtension{Raw: []byte(`{"a":1}`)},
		Steps: []v1.SagaStep{{Name: "a", Operation: "charge.create"}}}}
	want := small.DeepCopy()
	if _, err := StripUnread(small); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, small); diff != "" {
		t.Errorf("a saga within the bound changed: -want, +got:\n%s", diff)
	}
}
