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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/test/sandbox"
)

var _ = Describe("A namespace whose calls never end", func() {
	It("holds no more than its share of the workers, and another namespace's operation commits", func() {
		// The default share of 4 workers: two per namespace.
		DeferCleanup(startManager(managerOptions{workersPerNamespace: DefaultWorkersPerNamespace(4)}))
		tarpit, other := newNamespace(), newNamespace()
		silent, err := sandbox.NewSilent()
		Expect(err).NotTo(HaveOccurred())
		// Closed before the manager stops: the calls held end at once.
		DeferCleanup(silent.Close)
		newTool(tarpit, "slow", v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.HTTP.URL = silent.URL("")
			s.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
		})
		newTool(other, "fine", v1.IdempotencyNative)
		// As many operations as the manager has workers (4): each call
		// holds its worker for the tool's timeout.
		const stuck = 4
		waits := func() float64 {
			return testutil.ToFloat64(metrics.NamespaceShareFull.WithLabelValues(tarpit, "SideEffectOperation"))
		}
		for i := range stuck {
			create(newOp(tarpit, fmt.Sprintf("stuck-%d", i), "slow", map[string]any{"amount": i + 1}))
		}

		count := func() (started, waiting int) {
			ops := &v1.SideEffectOperationList{}
			Expect(k8sClient.List(ctx, ops, client.InNamespace(tarpit))).To(Succeed())
			for _, op := range ops.Items {
				switch {
				case op.Status.State == v1.StateStarted:
					started++
				case condition(&op, v1.ConditionReady).Reason == v1.ReasonWaitingForNamespaceShare:
					waiting++
				}
			}
			return started, waiting
		}
		started := func() int {
			n, _ := count()
			return n
		}
		By("waiting until each of the tarpit's operations is in a call or waits for its share")
		Eventually(func() int {
			n, w := count()
			return n + w
		}, 30*time.Second, 50*time.Millisecond).Should(Equal(stuck))

		By("committing the other namespace's operation meanwhile")
		create(newOp(other, "fine", "fine", map[string]any{"amount": 1}))
		waitFor(other, "fine", v1.StateCommitted)

		By("claiming for no more of the tarpit's operations than its share (2 of 4 workers)")
		Consistently(started, 3*time.Second, 50*time.Millisecond).Should(Equal(2))

		By("saying why the others wait, counting their waits, and keeping their requests")
		Expect(waits()).To(BeNumerically(">", 0))
		ops := &v1.SideEffectOperationList{}
		Expect(k8sClient.List(ctx, ops, client.InNamespace(tarpit))).To(Succeed())
		waiting := 0
		for i := range ops.Items {
			op := &ops.Items[i]
			if op.Status.State == v1.StateStarted {
				continue
			}
			waiting++
			Expect(op.Status.State).To(Equal(v1.StatePlanned), describe(op))
			Expect(op.Status.Attempts).To(BeZero(), describe(op))
			Expect(op.Status.Claim).To(BeNil(), describe(op))
			ready := condition(op, v1.ConditionReady)
			Expect(ready.Reason).To(Equal(v1.ReasonWaitingForNamespaceShare), describe(op))
			Expect(ready.Message).To(ContainSubstring("share of the workers"))
			// Waiting is progress to come, not a failure: not stalled.
			Expect(condition(op, v1.ConditionStalled).Status).NotTo(Equal(metav1.ConditionTrue), describe(op))
		}
		Expect(waiting).To(Equal(stuck - 2))

		By("writing the wait once, while the passes that find the share taken go on")
		var last *v1.SideEffectOperation
		for i := range ops.Items {
			if ops.Items[i].Status.State != v1.StateStarted {
				last = &ops.Items[i]
			}
		}
		before := waits()
		Consistently(func() string {
			return get(tarpit, last.Name).ResourceVersion
		}, 3*time.Second, 100*time.Millisecond).Should(Equal(last.ResourceVersion))
		Expect(waits()).To(BeNumerically(">", before))

		By("making every call once the tarpit's calls end")
		silent.Close()
		for i := range stuck {
			Eventually(func() int32 {
				return get(tarpit, fmt.Sprintf("stuck-%d", i)).Status.Attempts
			}, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">=", 1))
		}
	})

	It("holds no more than its share of the saga workers with dry runs, and another namespace's saga commits", func() {
		DeferCleanup(startManager(managerOptions{workersPerNamespace: DefaultWorkersPerNamespace(4)}))
		tarpit, other := newNamespace(), newNamespace()
		silent, err := sandbox.NewSilent()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(silent.Close)
		newDesk(tarpit, func(s *v1.ToolSpec) {
			s.HTTP.URL = silent.URL("")
			s.Timeout = &metav1.Duration{Duration: 10 * time.Minute}
			s.Operations[0].Validate = &v1.ValidateRequest{Path: "/native/tickets/validate"}
		})
		newDesk(other)
		// As many sagas as the manager has saga workers (4): each dry run
		// holds its worker for the tool's timeout.
		const stuck = 4
		for i := range stuck {
			Expect(k8sClient.Create(ctx, newSaga(tarpit, fmt.Sprintf("stuck-%d", i), changeSteps()))).To(Succeed())
		}
		By("waiting until two of the tarpit's sagas wait for its share")
		waiting := func() int {
			n := 0
			for i := range stuck {
				if m := stepStatus(getSaga(tarpit, fmt.Sprintf("stuck-%d", i)), "ticket").Message; strings.Contains(m,
					"take its share of the workers") {
					n++
				}
			}
			return n
		}
		Eventually(waiting, 30*time.Second, 100*time.Millisecond).Should(Equal(stuck - 2))
		Expect(testutil.ToFloat64(metrics.NamespaceShareFull.WithLabelValues(tarpit, "Saga"))).To(BeNumerically(">", 0))

		By("committing the other namespace's saga meanwhile")
		Expect(k8sClient.Create(ctx, newSaga(other, "scale", changeSteps()))).To(Succeed())
		waitSaga(other, "scale", v1.StateCommitted)
		Expect(waiting()).To(Equal(stuck - 2))
	})
})
