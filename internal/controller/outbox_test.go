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
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/test/sandbox"
)

// opDeliver is the operation of the tests' sink tools that takes events.
const opDeliver = "events.deliver"

// sinkTool declares a sink of the sandbox as a Tool named after it, whose
// operation opDeliver posts the event to the sink. The sandbox's sink
// answers an empty body (202 on the first delivery of an id, 200 after),
// so the operation's success has none.
func sinkTool(ns, sink string, mutate ...func(*v1.ToolSpec)) *v1.Tool {
	return newTool(ns, sink, v1.IdempotencyNative, append([]func(*v1.ToolSpec){func(s *v1.ToolSpec) {
		s.Operations = []v1.ToolOperation{{Name: opDeliver, Path: "/sink/" + sink, Sink: true,
			Response: v1.ResponseMapping{Format: v1.FormatNone}}}
	}}, mutate...)...)
}

// subscribe declares the sandbox's sink as a Tool in the operation's
// namespace and names it as the operation's subscriber.
func subscribe(op *v1.SideEffectOperation, sink string) *v1.SideEffectOperation {
	if err := k8sClient.Get(ctx, client.ObjectKey{Namespace: op.Namespace, Name: sink}, &v1.Tool{}); apierrors.IsNotFound(err) {
		sinkTool(op.Namespace, sink)
	}
	op.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: sink}, Operation: opDeliver}}
	return op
}

// sinkOf reads what a sandbox sink saw.
func sinkOf(name string) sandbox.SinkState {
	GinkgoHelper()
	st, err := ledger.Sink(ctx, name)
	Expect(err).NotTo(HaveOccurred())
	return st
}

// settledEntry waits until the operation's one outbox entry is no longer
// Pending and returns the operation.
func settledEntry(ns, name string) *v1.SideEffectOperation {
	GinkgoHelper()
	Eventually(func() v1.DeliveryState {
		op := get(ns, name)
		if len(op.Status.Outbox) != 1 {
			return ""
		}
		return op.Status.Outbox[0].State
	}, 30*time.Second, 100*time.Millisecond).ShouldNot(Or(BeEmpty(), Equal(v1.DeliveryPending)),
		func() string { return describe(get(ns, name)) })
	return get(ns, name)
}

var _ = Describe("Outbox", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{
			outbox: outbox.Budget{MaxAttempts: 3, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 200 * time.Millisecond}}))
		newTool(ns, "pay", v1.IdempotencyNative)
	})

	It("delivers the outcome once, as a CloudEvent with the recorded id, and records the delivery", func() {
		sink := ns + "-ok"
		create(subscribe(newOp(ns, "charge", "pay", map[string]any{"amount": 10}), sink))
		op := waitFor(ns, "charge", v1.StateCommitted)
		// The commit write itself carries the announcement.
		Expect(op.Status.Outbox).To(HaveLen(1))
		// Named by the scope and the effect, not by the object.
		Expect(op.Status.ExternalObjectID).NotTo(BeEmpty())
		id := recordNameOf(op) + "/Committed/" + outbox.EffectPart(op.Status.ExternalObjectID) + "/audit"
		Expect(op.Status.Outbox[0].EventID).To(Equal(id))

		op = settledEntry(ns, "charge")
		e := op.Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryDelivered))
		Expect(e.Attempts).To(BeEquivalentTo(1))
		Expect(e.HTTPStatus).To(BeEquivalentTo(202))
		Expect(e.DeliveredTime).NotTo(BeNil())

		st := sinkOf(sink)
		Expect(st.Events).To(HaveLen(1))
		ev := st.Events[0]
		Expect(ev.ID).To(Equal(id))
		Expect(ev.Type).To(Equal("dev.once.operation.committed"))
		Expect(ev.Source).To(Equal("/apis/effects.once.dev/v1alpha1/namespaces/" + ns + "/sideeffectoperations/charge"))
		Expect(ev.Deliveries).To(Equal(1))
		var data outbox.Data
		Expect(json.Unmarshal(ev.Data, &data)).To(Succeed())
		Expect(data.State).To(Equal(v1.StateCommitted))
		Expect(data.ExternalObjectID).To(Equal(op.Status.ExternalObjectID))
		Expect(data.IdempotencyKey).To(Equal("charge"))
	})

	It("announces one outcome under one id, from the original, its duplicate and its successor", func() {
		sink := ns + "-dup"
		create(subscribe(newOp(ns, "charge", "pay", map[string]any{"amount": 16}), sink))
		first := settledEntry(ns, "charge")
		Expect(first.Status.Outbox[0].State).To(Equal(v1.DeliveryDelivered))
		id := first.Status.Outbox[0].EventID

		By("a duplicate: another operation with the same key")
		dup := subscribe(newOp(ns, "charge-again", "pay", map[string]any{"amount": 16}), sink)
		dup.Spec.IdempotencyKey = "charge"
		create(dup)
		again := settledEntry(ns, "charge-again")
		Expect(again.Status.DuplicateOf).To(Equal("charge"))
		Expect(again.Status.Outbox[0].EventID).To(Equal(id))

		By("a successor: the operation deleted and made again, as a redelivered message would")
		remove(first)
		create(subscribe(newOp(ns, "charge", "pay", map[string]any{"amount": 16}), sink))
		successor := settledEntry(ns, "charge")
		Expect(successor.UID).NotTo(Equal(first.UID))
		Expect(successor.Status.DuplicateOf).To(Equal("charge"), describe(successor))
		Expect(successor.Status.Outbox[0].EventID).To(Equal(id))

		st := sinkOf(sink)
		Expect(st.Events).To(HaveLen(1), "one effect, one id")
		Expect(st.Events[0].ID).To(Equal(id))
		Expect(st.Events[0].Deliveries).To(Equal(3))
		Expect(st.Events[0].Consumed).To(Equal(1), "a subscriber that dedupes by id sees the effect once")
		Expect(effectsOf(v1.IdempotencyNative, ns, "charge")).To(Equal(1), "one effect")
	})

	It("redelivers the same event after a refusal and a lost answer", func() {
		sink := ns + "-flaky"
		Expect(ledger.SetSinkFaults(ctx, sink, sandbox.SinkFaults{Unavailable: 1, DropAnswer: 1})).To(Succeed())
		create(subscribe(newOp(ns, "charge", "pay", map[string]any{"amount": 11}), sink))
		op := settledEntry(ns, "charge")
		e := op.Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryDelivered), describe(op))
		Expect(e.Attempts).To(BeEquivalentTo(3))
		Expect(e.HTTPStatus).To(BeEquivalentTo(200), "the third delivery finds the event consumed")

		st := sinkOf(sink)
		Expect(st.Unavailable).To(Equal(1))
		Expect(st.Dropped).To(Equal(1))
		Expect(st.Events).To(HaveLen(1), "one id across every delivery")
		Expect(st.Events[0].ID).To(Equal(e.EventID))
		Expect(st.Events[0].Deliveries).To(Equal(2), "the dropped answer's delivery and the acknowledged one")
		Expect(st.Events[0].Consumed).To(Equal(1))
		Expect(st.Events[0].DataDigests).To(HaveLen(1), "every delivery carries the same event")
	})

	It("gives up when the budget is spent, with a Warning event", func() {
		sink := ns + "-down"
		Expect(ledger.SetSinkFaults(ctx, sink, sandbox.SinkFaults{Unavailable: 100})).To(Succeed())
		create(subscribe(newOp(ns, "charge", "pay", map[string]any{"amount": 12}), sink))
		op := settledEntry(ns, "charge")
		e := op.Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryFailed))
		Expect(e.Attempts).To(BeEquivalentTo(3))
		Expect(e.HTTPStatus).To(BeEquivalentTo(503))
		Expect(e.Message).To(HavePrefix("Not delivered yet: 503 Service Unavailable"))
		Expect(op.Status.State).To(Equal(v1.StateCommitted), "a delivery never changes the outcome")
		Expect(sinkOf(sink).Unavailable).To(Equal(3))
		Eventually(func() []string { return eventReasons(ns) }, 10*time.Second).Should(ContainElement(v1.EventDeliveryFailed))
	})

	It("never dials a sink whose address the egress policy refuses, and fails it when the budget is spent", func() {
		newTool(ns, "metadata", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.HTTP.URL = "http://169.254.169.254"
			s.Operations = []v1.ToolOperation{{Name: opDeliver, Path: "/latest", Sink: true}}
		})
		op := newOp(ns, "charge", "pay", map[string]any{"amount": 13})
		op.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "metadata"}, Operation: opDeliver}}
		create(op)
		e := settledEntry(ns, "charge").Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryFailed))
		Expect(e.Attempts).To(BeEquivalentTo(3), "a tool may be corrected: tried within the budget")
		Expect(e.HTTPStatus).To(BeZero())
		Expect(e.Message).To(ContainSubstring("The sink cannot be used: Tool metadata is not valid"))
	})

	It("delivers with the sink tool's credentials, and ends the delivery on the tool's permanent refusal", func() {
		// A sink that checks a bearer token and refuses an event it cannot
		// take for good (a 422), as a webhook receiver behind an API
		// gateway does.
		// Calls are counted per event: the port of a server an earlier spec
		// closed may be this one's, and that spec's relay may still be
		// retrying a delivery there.
		type call struct {
			auth, key string
			n         int
		}
		var seen struct {
			sync.Mutex
			byEvent map[string]call
		}
		seen.byEvent = map[string]call{}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Lock()
			defer seen.Unlock()
			id := r.Header.Get("Ce-Id")
			c := seen.byEvent[id]
			c.auth, c.key, c.n = r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), c.n+1
			seen.byEvent[id] = c
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error":"schema"}`))
		}))
		DeferCleanup(srv.Close)
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sink-token"},
			StringData: map[string]string{"token": "s3cret-sink-token"}})).To(Succeed())
		newTool(ns, "receiver", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.HTTP.URL = srv.URL
			s.HTTP.Auth = &v1.HTTPAuth{Bearer: &v1.SecretKeySelector{Name: "sink-token", Key: "token"}}
			s.Operations = []v1.ToolOperation{{Name: opDeliver, Path: "/hooks/once", Sink: true}}
		})
		op := newOp(ns, "charge", "pay", map[string]any{"amount": 17})
		op.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "receiver"}, Operation: opDeliver}}
		create(op)
		e := settledEntry(ns, "charge").Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryFailed))
		Expect(e.Attempts).To(BeEquivalentTo(1), "the tool's classification makes a 422 final")
		Expect(e.HTTPStatus).To(BeEquivalentTo(422))
		Expect(e.Message).To(HavePrefix("The sink refused the event for good"))
		seen.Lock()
		defer seen.Unlock()
		got := seen.byEvent[e.EventID]
		Expect(got.n).To(Equal(1), "the event, by its id (Ce-Id), reached the sink once")
		Expect(got.auth).To(Equal("Bearer s3cret-sink-token"), "the sink's credentials come from its tool")
		Expect(got.key).To(Equal(e.EventID), "the event id is the request's idempotency key")
		Expect(describe(get(ns, "charge"))).NotTo(ContainSubstring("s3cret-sink-token"))
	})

	It("calls no operation of a tool that is not marked a sink", func() {
		// The namespace's payments tool has an effect of its own: naming
		// it as a subscriber must not make the relay charge, outside the
		// protocol, with the event as parameters.
		all := func() int {
			effects, err := ledger.Effects(ctx)
			Expect(err).NotTo(HaveOccurred())
			return len(effects)
		}
		before := all()
		op := newOp(ns, "charge", "pay", map[string]any{"amount": 19})
		op.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "pay"},
			Operation: "charge.create"}}
		create(op)
		e := settledEntry(ns, "charge").Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryFailed))
		Expect(e.Attempts).To(BeEquivalentTo(1))
		Expect(e.Message).To(ContainSubstring("is not a sink"))
		// A relay's call is keyed by the event's id, not the namespace:
		// every effect counts.
		Expect(all()-before).To(Equal(1), "the operation's own charge, and no other")
	})

	It("delivers nothing to a ClusterTool that does not serve the namespace", func() {
		sink := ns + "-cluster"
		ct := &v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: sink}, Spec: v1.ClusterToolSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"once.dev/sink": "allowed"}},
			ToolSpec: v1.ToolSpec{
				HTTP:        v1.HTTPBackend{URL: toolURL},
				Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
				Operations: []v1.ToolOperation{{Name: opDeliver, Path: "/sink/" + sink, Sink: true,
					Response: v1.ResponseMapping{Format: v1.FormatNone}}},
			}}}
		Expect(k8sClient.Create(ctx, ct)).To(Succeed())
		DeferCleanup(func() { _ = k8sClient.Delete(ctx, ct) })
		op := newOp(ns, "charge", "pay", map[string]any{"amount": 18})
		op.Spec.Subscribers = []v1.Subscriber{{Name: "audit",
			ToolRef: v1.SinkToolReference{Kind: v1.ToolKindClusterTool, Name: sink}, Operation: opDeliver}}
		create(op)
		e := settledEntry(ns, "charge").Status.Outbox[0]
		Expect(e.State).To(Equal(v1.DeliveryFailed))
		Expect(e.Message).To(ContainSubstring("does not serve namespace " + ns))
		Expect(sinkOf(sink).Events).To(BeEmpty(), "nothing reached the sink")
	})

	It("costs an operation without subscribers no write, and one with a subscriber one write", func() {
		sink := ns + "-count"
		wc := newDirect()
		w, err := wc.Watch(ctx, &v1.SideEffectOperationList{}, client.InNamespace(ns))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		create(newOp(ns, "plain", "pay", map[string]any{"amount": 14}))
		create(subscribe(newOp(ns, "told", "pay", map[string]any{"amount": 15}), sink))
		waitFor(ns, "plain", v1.StateCommitted)
		settledEntry(ns, "told")
		// Every write, until none came for two seconds.
		writes := map[string]int{}
	drain:
		for {
			select {
			case ev := <-w.ResultChan():
				if op, ok := ev.Object.(*v1.SideEffectOperation); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
					writes[op.Name]++
				}
			case <-time.After(2 * time.Second):
				break drain
			}
		}
		AddReportEntry("writes per operation", writes)
		Expect(writes["plain"]).To(BeNumerically(">", 0))
		Expect(writes["told"]).To(Equal(writes["plain"]+1),
			"the relay's record is the only write an announcement adds: %v", writes)
		Expect(get(ns, "plain").Status.Outbox).To(BeNil())
	})

	It("delivers a saga's outcome", func() {
		newDesk(ns)
		sink := ns + "-saga"
		s := newSaga(ns, "scale", changeSteps())
		sinkTool(ns, sink)
		s.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: sink}, Operation: opDeliver}}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		waitSaga(ns, "scale", v1.StateCommitted)
		Eventually(func() v1.DeliveryState {
			s := getSaga(ns, "scale")
			if len(s.Status.Outbox) != 1 {
				return ""
			}
			return s.Status.Outbox[0].State
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(v1.DeliveryDelivered))
		s = getSaga(ns, "scale")
		st := sinkOf(sink)
		Expect(st.Events).To(HaveLen(1))
		Expect(st.Events[0].ID).To(Equal(s.Status.Outbox[0].EventID))
		Expect(st.Events[0].ID).To(HavePrefix(saga.ScopeName(ns, "scale") + "/Committed/"))
		Expect(st.Events[0].ID).To(HaveSuffix("/audit"))
		Expect(st.Events[0].Type).To(Equal("dev.once.saga.committed"))
		// The saga's steps named no subscriber: their operations announce nothing.
		for _, name := range operationsOf(ns, "scale") {
			Expect(get(ns, name).Status.Outbox).To(BeNil())
		}
	})
})

var _ = Describe("Subscribers admission", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
	})

	refused := func(op *v1.SideEffectOperation, msg string) {
		GinkgoHelper()
		err := k8sClient.Create(ctx, op)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(msg))
	}

	It("refuses a URL: an operation's author names a declared sink, never an address", func() {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1.GroupVersion.String(), "kind": "SideEffectOperation",
			"metadata": map[string]any{"namespace": ns, "name": "probe"},
			"spec": map[string]any{
				"toolRef": map[string]any{"name": "pay"}, "operation": "charge.create",
				"subscribers": []any{map[string]any{"name": "scan", "url": "http://10.0.0.1:6379/"}},
			},
		}}
		// As kubectl sends it (strict field validation), and as a client
		// that sends no validation directive: the unknown field is dropped,
		// and the subscriber then names no sink.
		err := k8sClient.Create(ctx, u.DeepCopy(), client.FieldValidation("Strict"))
		Expect(apierrors.IsBadRequest(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`unknown field "spec.subscribers[0].url"`))
		err = k8sClient.Create(ctx, u.DeepCopy())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.subscribers[0].toolRef: Required value"))
	})

	It("refuses a sink without an operation", func() {
		op := newOp(ns, "b", "pay", nil)
		op.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: "hooks"}}}
		refused(op, "spec.subscribers[0].operation")
	})

	It("refuses more than four subscribers, and two of one name", func() {
		op := newOp(ns, "c", "pay", nil)
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			op.Spec.Subscribers = append(op.Spec.Subscribers, v1.Subscriber{Name: n, ToolRef: v1.SinkToolReference{Name: "hooks"}, Operation: opDeliver})
		}
		refused(op, "spec.subscribers: Too many")
		op.Spec.Subscribers = []v1.Subscriber{{Name: "a", ToolRef: v1.SinkToolReference{Name: "x"}, Operation: opDeliver},
			{Name: "a", ToolRef: v1.SinkToolReference{Name: "y"}, Operation: opDeliver}}
		refused(op, "Duplicate value")
	})

	It("keeps subscribers immutable", func() {
		op := create(subscribe(newOp(ns, "d", "pay", nil), "x"))
		op.Spec.Subscribers[0].ToolRef.Name = "elsewhere"
		err := k8sClient.Update(ctx, op)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.subscribers are immutable"))

		plain := create(newOp(ns, "e", "pay", nil))
		plain.Spec.Subscribers = []v1.Subscriber{{Name: "late", ToolRef: v1.SinkToolReference{Name: "hooks"}, Operation: opDeliver}}
		err = k8sClient.Update(ctx, plain)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.subscribers are immutable"))
	})
})
