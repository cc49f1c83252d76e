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
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var _ = Describe("A stopping manager", func() {
	var (
		ns     string
		direct client.WithWatch
	)
	BeforeEach(func() {
		ns, direct = newNamespace(), newDirect()
	})

	It("writes the answer it holds before it goes, and asks the tool nothing more", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := create(newOp(ns, "op", "payments", map[string]any{"amount": 4}))
		// The claim is written, then the answer's write meets an API
		// server that is away: the manager holds the answer.
		down, writes := true, 0
		c := interceptor.NewClient(direct, interceptor.Funcs{
			SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object,
				opts ...client.SubResourceUpdateOption) error {
				if obj.GetUID() == op.UID {
					if writes++; writes == 2 && down {
						return apierrors.NewServiceUnavailable("the API server is away")
					}
				}
				return cl.SubResource(sub).Update(ctx, obj, opts...)
			}})
		r := uidReconciler(c, c, events.NewFakeRecorder(100))
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(op))
		Expect(err).To(HaveOccurred(), "the answer's write failed")
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
		Expect(get(ns, "op").Status.State).To(Equal(v1.StateStarted))

		By("the manager stops, with the API server back")
		down = false
		stopped, stop := context.WithCancel(logf.IntoContext(ctx, logf.Log))
		stop()
		Expect(heldWriter{r: r, grace: 10 * time.Second}.Start(stopped)).To(Succeed())
		done := get(ns, "op")
		Expect(done.Status.State).To(Equal(v1.StateCommitted), "the held answer was lost with the manager")
		Expect(done.Status.Attempts).To(BeEquivalentTo(1))
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
		Expect(r.WriteHeld(ctx)).To(BeZero())
	})

	It("goes within its bounds when the API server hangs its last writes", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := create(newOp(ns, "op", "payments", map[string]any{"amount": 6}))
		// The answer's write fails, as above. Then the API server takes
		// writes and never answers them (a partition that drops packets,
		// while reads still come from the cache): only the writer's own
		// bounds end its calls.
		var hang atomic.Bool
		writes := 0
		wait := func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}
		c := interceptor.NewClient(direct, interceptor.Funcs{
			Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if hang.Load() {
					return wait(ctx)
				}
				return cl.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				if hang.Load() {
					return wait(ctx)
				}
				return cl.Update(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object,
				opts ...client.SubResourceUpdateOption) error {
				if hang.Load() {
					return wait(ctx)
				}
				if obj.GetUID() == op.UID {
					if writes++; writes == 2 {
						return apierrors.NewServiceUnavailable("the API server is away")
					}
				}
				return cl.SubResource(sub).Update(ctx, obj, opts...)
			}})
		r := uidReconciler(c, c, events.NewFakeRecorder(100))
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(op))
		Expect(err).To(HaveOccurred(), "the answer's write failed")

		By("the manager stops, and every write it makes hangs")
		hang.Store(true)
		stopped, stop := context.WithCancel(logf.IntoContext(ctx, logf.Log))
		stop()
		gone := make(chan error, 1)
		go func() { gone <- heldWriter{r: r, grace: time.Second}.Start(stopped) }()
		// The grace and the last round bound the writer; a generous margin
		// keeps a loaded machine from failing the test.
		Eventually(gone).WithTimeout(time.Minute).Should(Receive(Succeed()), "the writer outlived its bounds")
		hang.Store(false)
		Expect(get(ns, "op").Status.State).To(Equal(v1.StateStarted), "unknown until reconciled, never decided")
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(Equal(1))
	})
})

var _ = Describe("A namespace being deleted", func() {
	var (
		ns     string
		direct client.WithWatch
	)
	BeforeEach(func() {
		ns, direct = newNamespace(), newDirect()
	})

	It("has an operation that got in make no first attempt", func() {
		newTool(ns, "payments", v1.IdempotencyNative)
		op := create(newOp(ns, "op", "payments", map[string]any{"amount": 5}))
		// The operation got in as the deletion began: admission decides
		// from an informer's view of the namespace, which lags. Here no
		// namespace controller runs, so the namespace stays terminating.
		Expect(k8sClient.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Eventually(func() bool {
			n := &corev1.Namespace{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, n)).To(Succeed())
			return n.DeletionTimestamp.IsZero()
		}).Should(BeFalse())

		r := uidReconciler(direct, direct, events.NewFakeRecorder(100))
		_, err := r.Reconcile(logf.IntoContext(ctx, logf.Log), requestFor(op))
		Expect(err).NotTo(HaveOccurred())
		Expect(effectsOf(v1.IdempotencyNative, ns, "op")).To(BeZero(), "an effect no record would remember")
		st := get(ns, "op").Status
		Expect(st.Attempts).To(BeZero())
		Expect(conditionIn(st.Conditions, v1.ConditionStalled).Reason).To(Equal(v1.ReasonNamespaceTerminating))
	})
})
