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
	"bytes"
	"cmp"
	"context"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/once-dev/once/api/v1alpha1"
	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/test/sandbox"
)

// gateway stands between Once and the sandbox the way a real API gateway,
// proxy or ingress does, and lies the way they lie. answer is asked about
// every request, numbered from 1 per kind (effect requests and lookups
// apart); it returns nil to pass the request through, or what the gateway
// does instead.
type gateway struct {
	srv              *httptest.Server
	effects, lookups atomic.Int32
}

// gatewayAnswer is what the gateway does with one request.
type gatewayAnswer struct {
	// forward sends the request upstream first (the effect happens), in
	// the background when async is set, as a gateway that gave up waiting
	// on its upstream does.
	forward, async bool
	status         int
	contentType    string
	body           string
}

var gatewayClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func newGateway(answer func(lookup bool, n int32) *gatewayAnswer) *gateway {
	g := &gateway{}
	upstream := toolURL
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lookup := r.Method == http.MethodGet
		n := g.effects.Add(1)
		if lookup {
			g.effects.Add(-1)
			n = g.lookups.Add(1)
		}
		body, _ := io.ReadAll(r.Body)
		a := answer(lookup, n)
		if a == nil {
			a = &gatewayAnswer{forward: true}
		}
		var resp *http.Response
		if a.forward {
			send := func() *http.Response {
				req, _ := http.NewRequest(r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
				req.Header = r.Header.Clone()
				// No hidden replay of a request whose connection dropped:
				// this gateway passes the loss on.
				req.GetBody = nil
				res, err := gatewayClient.Do(req)
				if err != nil {
					return nil
				}
				return res
			}
			if a.async {
				go func() {
					if res := send(); res != nil {
						_ = res.Body.Close()
					}
				}()
			} else if resp = send(); resp == nil {
				// The upstream dropped the connection: so does the gateway.
				panic(http.ErrAbortHandler)
			}
		}
		if a.status == 0 && resp != nil {
			defer func() { _ = resp.Body.Close() }()
			maps.Copy(w.Header(), resp.Header)
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
			return
		}
		if resp != nil {
			_ = resp.Body.Close()
		}
		w.Header().Set("Content-Type", cmp.Or(a.contentType, "text/plain"))
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	DeferCleanup(g.srv.Close)
	return g
}

// behind points a tool at the gateway.
func behind(g *gateway) func(*v1.ToolSpec) {
	return func(s *v1.ToolSpec) { s.HTTP.URL = g.srv.URL }
}

// eventReasons lists the reasons of a namespace's events.
func eventReasons(ns string) []string {
	var list corev1.EventList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, e := range list.Items {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// Each sequence of docs/design.md, The sequences (S1 to S11), that led to a
// second effect, to a record that lied or to a lost decision, against a real
// API server, effects counted at the tool.
var _ = Describe("Sequences to a second effect", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })
	lost := sandbox.FaultRule{Method: "POST", Fault: "drop-after-commit", Count: 1}

	It("S1. keeps a scope record whose owner never ended past its retention", func() {
		DeferCleanup(startManager(managerOptions{}))
		faults(ns, lost)
		newTool(ns, "mailer", v1.IdempotencyNone)
		op := newOp(ns, "op", "mailer", map[string]any{"to": "a@example.com"})
		op.Spec.Retention = &metav1.Duration{Duration: time.Second}
		create(op)
		first := waitFor(ns, "op", v1.StateNeedsReview)
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))

		By("deleting the operation long after its retention")
		time.Sleep(2 * time.Second)
		remove(first)
		Consistently(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: recordNameOf(first)}, &v1.IdempotencyRecord{})
		}, 2*time.Second).Should(Succeed(), "a record without an outcome is never collected on time alone")

		By("re-creating it: it inherits the unknown outcome and asks a person, never executes blindly")
		op = newOp(ns, "op", "mailer", map[string]any{"to": "a@example.com"})
		op.Spec.Retention = &metav1.Duration{Duration: time.Second}
		create(op)
		again := waitFor(ns, "op", v1.StateNeedsReview)
		Expect(again.Status.Attempts).To(BeEquivalentTo(1))
		Consistently(func() int { return effectsOf(v1.IdempotencyNone, ns, "op") }, 2*time.Second).Should(Equal(1))
	})

	It("S2. starts from an unknown outcome after a takeover interrupted between its two writes", func() {
		stop := startManager(managerOptions{})
		faults(ns, lost)
		newTool(ns, "mailer", v1.IdempotencyNone)
		create(newOp(ns, "a", "mailer", map[string]any{"to": "a@example.com"}))
		a := waitFor(ns, "a", v1.StateNeedsReview)
		By("deleting the owner, whose record then names it without an outcome")
		remove(a)
		stop()

		By("leaving the state a crash after the takeover's first write leaves")
		b := newOp(ns, "b", "mailer", map[string]any{"to": "a@example.com"})
		b.Spec.IdempotencyKey = "a"
		create(b)
		rec := &v1.IdempotencyRecord{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: recordNameOf(a)}, rec)).To(Succeed())
		prev := rec.Spec.Owner
		rec.Spec.Owner = v1.RecordOwner{Name: "b", UID: get(ns, "b").UID}
		rec.Spec.PreviousOwner = &prev
		Expect(k8sClient.Update(ctx, rec)).To(Succeed())

		By("restarting: the new owner must not execute blindly")
		DeferCleanup(startManager(managerOptions{}))
		waitFor(ns, "b", v1.StateNeedsReview)
		Consistently(func() int { return effectsOf(v1.IdempotencyNone, ns, "a") }, 2*time.Second).Should(Equal(1))
	})

	DescribeTable("S3. a gateway's 502, 503 or 504 after its upstream committed is an unknown outcome",
		func(mode v1.IdempotencyMode, status int, want v1.OperationState) {
			DeferCleanup(startManager(managerOptions{}))
			g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
				if !lookup && n == 1 {
					return &gatewayAnswer{forward: true, status: status, body: "upstream request timeout"}
				}
				return nil
			})
			newTool(ns, "payments", mode, behind(g))
			create(newOp(ns, "op", "payments", map[string]any{"amount": 1}))
			waitFor(ns, "op", want)
			Consistently(func() int { return effectsOf(mode, ns, "op") }, 2*time.Second).Should(Equal(1))
		},
		Entry("Lookup, 504: looked up and found", v1.IdempotencyLookup, http.StatusGatewayTimeout, v1.StateCommitted),
		Entry("Lookup, 502", v1.IdempotencyLookup, http.StatusBadGateway, v1.StateCommitted),
		Entry("None, 503: a person decides", v1.IdempotencyNone, http.StatusServiceUnavailable, v1.StateNeedsReview),
		Entry("None, 504", v1.IdempotencyNone, http.StatusGatewayTimeout, v1.StateNeedsReview),
	)

	It("S4. does not count a Native 409 in flight as a failed attempt", func() {
		DeferCleanup(startManager(managerOptions{}))
		// A proxy answers 503 at once while its upstream, slow, goes on
		// processing the first request; the retries meet 409 in flight.
		g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
			if n == 1 {
				return &gatewayAnswer{forward: true, async: true, status: http.StatusServiceUnavailable,
					body: "upstream connect error or disconnect/reset before headers. reset reason: connection termination"}
			}
			return nil
		})
		newTool(ns, "payments", v1.IdempotencyNative, behind(g), func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: 5 * time.Second}
		})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "delay-before-commit=4s", Count: 1})
		op := newOp(ns, "op", "payments", map[string]any{"amount": 4})
		op.Spec.RetryPolicy.MaxAttempts = 3
		create(op)
		got := waitFor(ns, "op", v1.StateCommitted, 40*time.Second)
		Expect(got.Status.Attempts).To(BeEquivalentTo(2), "503, then the retry met 409 in flight and was reconciled")
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
	})

	It("S5. asks a person when a Native re-send is refused with an answer that is not the replay", func() {
		DeferCleanup(startManager(managerOptions{}))
		// The credential was rotated between the attempt and the re-send.
		g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
			if n == 2 {
				return &gatewayAnswer{status: http.StatusUnauthorized, contentType: "application/json",
					body: `{"error":"invalid_api_key"}`}
			}
			return nil
		})
		faults(ns, lost)
		newTool(ns, "payments", v1.IdempotencyNative, behind(g))
		create(newOp(ns, "op", "payments", map[string]any{"amount": 5}))
		op := waitFor(ns, "op", v1.StateNeedsReview)
		Expect(op.Status.Observations[len(op.Status.Observations)-1].HTTPStatus).To(BeEquivalentTo(401))
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
	})

	It("S6. does not take an ingress 404 for a lookup route as proof of absence", func() {
		By("refusing a Lookup tool that does not say what proves absence, or how long its lookups lag")
		bare := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bare"}, Spec: v1.ToolSpec{
			HTTP:        v1.HTTPBackend{URL: toolURL},
			Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyLookup},
			Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/lookup/charges",
				Lookup: &v1.LookupRequest{Path: "/lookup/charges?key={idempotencyKey}"}}},
		}}
		err := k8sClient.Create(ctx, bare)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(And(ContainSubstring("found"), ContainSubstring("absent"), ContainSubstring("lookupDelay")))

		DeferCleanup(startManager(managerOptions{}))
		g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
			if lookup {
				return &gatewayAnswer{status: http.StatusNotFound, contentType: "text/html",
					body: "<html><body><h1>404 Not Found</h1></body></html>"}
			}
			return nil
		})
		faults(ns, lost)
		newTool(ns, "tickets", v1.IdempotencyLookup, behind(g), func(s *v1.ToolSpec) {
			s.Idempotency.ReconcileLimit = 2
		})
		create(newOp(ns, "op", "tickets", map[string]any{"title": "disk full"}))
		waitFor(ns, "op", v1.StateNeedsReview)
		Expect(effectsOf(v1.IdempotencyLookup, ns, "op")).To(Equal(1))
	})

	It("S7. raises at once a late success that names a second effect", func() {
		Expect(failpoint.Enabled).To(BeTrue(), "run with -tags failpoints")
		// The first worker freezes after the tool answered; its claim
		// expires; the successor's lookup meets an index that lags beyond
		// what the tool declared, retries, and makes a second effect. The
		// frozen worker's success arrives after that: it must be raised.
		g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
			switch {
			case lookup && n == 1:
				return &gatewayAnswer{status: http.StatusNotFound, contentType: "application/json",
					body: `{"error":"not_found","message":"no charge with that key"}`}
			case !lookup && n == 2:
				// The second attempt is slow: it is still in flight when
				// the frozen worker wakes up.
				time.Sleep(8 * time.Second)
			}
			return nil
		})
		newTool(ns, "tickets", v1.IdempotencyLookup, behind(g), func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: 15 * time.Second}
		})
		Expect(failpoint.Enable(failpoint.ExecuteAfterAnswer, `1*sleep(5000)`)).To(Succeed())
		DeferCleanup(func() { _ = failpoint.Disable(failpoint.ExecuteAfterAnswer) })
		DeferCleanup(startManager(managerOptions{watch: []string{ns}, maxClaim: time.Second}))
		DeferCleanup(startManager(managerOptions{watch: []string{ns}, maxClaim: time.Second}))
		create(newOp(ns, "op", "tickets", map[string]any{"title": "late"}))
		Eventually(func() []string { return eventReasons(ns) }, 20*time.Second).Should(ContainElement(v1.EventSecondEffect))
		waitFor(ns, "op", v1.StateCommitted, 30*time.Second)
	})

	It("S8. writes the outcome to the scope record at deletion when the cache shows another owner", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := create(newOp(ns, "op", "payments", map[string]any{"amount": 8}))
		Expect(op.Finalizers).To(ContainElement(v1.FinalizerRecord), "the admission policy adds the finalizer at create")
		op.Status = v1.SideEffectOperationStatus{State: v1.StateCommitted, Attempts: 1, ExternalObjectID: "ch_8",
			CompletionTime: &metav1.Time{Time: time.Now()}}
		Expect(k8sClient.Status().Update(ctx, op)).To(Succeed())
		rs, err := Config{Holder: "test"}.Build(Deps{Client: k8sClient, APIReader: k8sClient,
			Recorder: events.NewFakeRecorder(100), Clock: clock.RealClock{}, Transport: httpeffects.NewTransport(nil)})
		Expect(err).NotTo(HaveOccurred())
		r := rs.Operation
		p := r.newPass(ctx, op)
		Expect(p.identify()).To(Succeed())
		rec := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: p.st.RecordName},
			Spec: v1.IdempotencyRecordSpec{ToolRef: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
				Operation: "charge.create", IdempotencyKey: "op", RequestHash: p.st.RequestHash,
				Owner: v1.RecordOwner{Name: "op", UID: op.UID}, Retention: metav1.Duration{Duration: time.Hour}}}
		Expect(k8sClient.Create(ctx, rec)).To(Succeed())
		Expect(k8sClient.Delete(ctx, op)).To(Succeed())

		By("releasing through a cache that still shows the record's previous incarnation")
		stale := rec.DeepCopy()
		stale.Spec.Owner = v1.RecordOwner{Name: "gone", UID: "uid-gone"}
		stale.Spec.Outcome = &v1.RecordOutcome{State: v1.StateCommitted}
		r.Client = &staleRecords{Client: k8sClient, rec: stale}
		_, err = r.Reconcile(logf.IntoContext(ctx, logf.Log), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(op)})
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(rec), rec)).To(Succeed())
		Expect(rec.Spec.Outcome).NotTo(BeNil(), "the outcome never reached the record")
		Expect(rec.Spec.Outcome.ExternalObjectID).To(Equal("ch_8"))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(op), op))).To(BeTrue(),
			"the finalizer goes once the outcome is kept")
	})

	It("S9. finishes a call in flight and records its answer when the manager stops", func() {
		stop := startManager(managerOptions{maxClaim: 5 * time.Second})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: "delay-after-commit=2s", Count: 1})
		newTool(ns, "mailer", v1.IdempotencyNone, func(s *v1.ToolSpec) {
			s.Timeout = &metav1.Duration{Duration: 5 * time.Second}
		})
		create(newOp(ns, "op", "mailer", map[string]any{"to": "a@example.com"}))
		waitFor(ns, "op", v1.StateStarted)
		time.Sleep(200 * time.Millisecond)
		stop()
		Expect(get(ns, "op").Status.State).To(Equal(v1.StateCommitted),
			"a rolling update sent a committed call to review")
		Expect(effectsOf(v1.IdempotencyNone, ns, "op")).To(Equal(1))
	})

	It("S10. applies a resolution while the tool is missing, and refuses one on a finished operation", func() {
		DeferCleanup(startManager(managerOptions{}))
		faults(ns, lost)
		tool := newTool(ns, "mailer", v1.IdempotencyNone)
		create(newOp(ns, "op", "mailer", map[string]any{"to": "a@example.com"}))
		waitFor(ns, "op", v1.StateNeedsReview)
		Expect(k8sClient.Delete(ctx, tool)).To(Succeed())
		time.Sleep(time.Second)

		resolve(ns, "op", v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_10",
			By: "alice", Reason: "found in the mail log"})
		op := waitFor(ns, "op", v1.StateCommitted)
		Expect(op.Status.ExternalObjectID).To(Equal("ch_10"))

		By("refusing a new resolution on the committed operation")
		patch := client.MergeFrom(op.DeepCopy())
		op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionFail, By: "mallory"}
		err := k8sClient.Patch(ctx, op, patch)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		Expect(err.Error()).To(ContainSubstring("only while the operation is in NeedsReview"))
	})

	It("S11. keeps the attempt's call in the evidence after many lookups", func() {
		DeferCleanup(startManager(managerOptions{}))
		g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
			if lookup {
				return &gatewayAnswer{status: http.StatusInternalServerError}
			}
			return nil
		})
		faults(ns, lost)
		newTool(ns, "tickets", v1.IdempotencyLookup, behind(g), func(s *v1.ToolSpec) {
			s.Idempotency.ReconcileLimit = 12
		})
		op := newOp(ns, "op", "tickets", map[string]any{"title": "evidence"})
		op.Spec.RetryPolicy.MaxBackoff = &metav1.Duration{Duration: 200 * time.Millisecond}
		create(op)
		op = waitFor(ns, "op", v1.StateNeedsReview, time.Minute)
		Expect(observationKinds(op)).To(ContainElement(v1.ObservationCall), "the attempt's own call was evicted")
	})

	Context("12. the key, the 409 and the mode", func() {
		BeforeEach(func() { DeferCleanup(startManager(managerOptions{})) })

		It("sends different keys for two tools of one namespace on one API", func() {
			newTool(ns, "payments", v1.IdempotencyNative)
			newTool(ns, "refunds", v1.IdempotencyNative)
			create(newOp(ns, "a", "payments", map[string]any{"amount": 12}))
			b := newOp(ns, "b", "refunds", map[string]any{"amount": 12})
			b.Spec.IdempotencyKey = "a"
			create(b)
			a := waitFor(ns, "a", v1.StateCommitted)
			Expect(waitFor(ns, "b", v1.StateCommitted).Status.ExternalObjectID).NotTo(Equal(a.Status.ExternalObjectID),
				"two tools' operations were merged into one effect at the API")
			Expect(effectsOf(v1.IdempotencyNative, ns, "a")).To(Equal(2))
		})

		It("takes a 409 'already exists' from a Lookup tool as an effect to look up", func() {
			g := newGateway(func(lookup bool, n int32) *gatewayAnswer {
				if !lookup && n == 1 {
					return &gatewayAnswer{forward: true, status: http.StatusConflict, contentType: "application/json",
						body: `{"error":"already_exists"}`}
				}
				return nil
			})
			newTool(ns, "tickets", v1.IdempotencyLookup, behind(g))
			create(newOp(ns, "op", "tickets", map[string]any{"title": "exists"}))
			waitFor(ns, "op", v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyLookup, ns, "op")).To(Equal(1))
		})

		It("reconciles with the mode the attempt was made under", func() {
			faults(ns, lost)
			// The lookup waits long enough for the mode's change to reach
			// the manager's cache first, on a loaded machine too (4 s did
			// not always suffice in CI).
			tool := newTool(ns, "tickets", v1.IdempotencyLookup, func(s *v1.ToolSpec) {
				s.Idempotency.LookupDelay = &metav1.Duration{Duration: 10 * time.Second}
			})
			create(newOp(ns, "op", "tickets", map[string]any{"title": "switch"}))
			waitFor(ns, "op", v1.StateUnknown)
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tool), tool)).To(Succeed())
			tool.Spec.Idempotency.Mode = v1.IdempotencyNative
			Expect(k8sClient.Update(ctx, tool)).To(Succeed())
			// The first request was never deduped: no re-send; the
			// promise changed under an unknown outcome, a person decides.
			waitFor(ns, "op", v1.StateNeedsReview)
			Consistently(func() int { return effectsOf(v1.IdempotencyLookup, ns, "op") }, 2*time.Second).Should(Equal(1))
		})
	})
})

// staleRecords is a client whose reads of one scope record return an older
// version of it, as a lagging informer cache does.
type staleRecords struct {
	client.Client
	rec *v1.IdempotencyRecord
	mu  sync.Mutex
}

func (s *staleRecords) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if rec, ok := obj.(*v1.IdempotencyRecord); ok && key.Name == s.rec.Name {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.rec.DeepCopyInto(rec)
		return nil
	}
	return s.Client.Get(ctx, key, obj, opts...)
}
