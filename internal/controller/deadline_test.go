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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

// silentTokenEndpoint is a token endpoint whose server hangs
// (sandbox.Silent), closed when the spec ends. It returns its token URL.
func silentTokenEndpoint() string {
	GinkgoHelper()
	s, err := sandbox.NewSilent()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(s.Close)
	return s.URL("/token")
}

var _ = Describe("A tool whose token endpoint never answers", func() {
	var ns string
	BeforeEach(func() {
		ns = newNamespace()
		// The default bulkhead of 4 workers: one per tool.
		DeferCleanup(startManager(managerOptions{workersPerTool: DefaultWorkersPerTool(4)}))
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "oauth"},
			StringData: map[string]string{"clientID": "once", "clientSecret": "s3cr3t-client"}})).To(Succeed())
	})

	hangingTool := func(name string) {
		GinkgoHelper()
		url := silentTokenEndpoint()
		newTool(ns, name, v1.IdempotencyNative, func(s *v1.ToolSpec) {
			s.HTTP.Auth = &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{TokenURL: url, SecretName: "oauth"}}
			s.Timeout = &metav1.Duration{Duration: 2 * time.Second}
		})
	}
	toolReady := func(name string) func() metav1.Condition {
		return func() metav1.Condition {
			t := &v1.Tool{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, t)).To(Succeed())
			if c := meta.FindStatusCondition(t.Status.Conditions, v1.ConditionReady); c != nil {
				return *c
			}
			return metav1.Condition{}
		}
	}

	It("is reported not ready at its deadline, and the other tools are still checked", func() {
		hangingTool("hanging")
		Eventually(toolReady("hanging"), 30*time.Second, 200*time.Millisecond).Should(And(
			HaveField("Status", metav1.ConditionFalse),
			HaveField("Message", And(ContainSubstring("auth.oauth2: getting a token"),
				ContainSubstring("deadline exceeded")))))
		newTool(ns, "fine", v1.IdempotencyNative)
		Eventually(toolReady("fine"), 30*time.Second, 200*time.Millisecond).Should(
			HaveField("Status", metav1.ConditionTrue))
	})

	It("holds no more than its share of the workers, and its operations end retryable at the deadline", func() {
		hangingTool("hanging")
		newTool(ns, "fine", v1.IdempotencyNative)
		// More operations than the manager has workers (4): on a manager
		// without deadlines or a bulkhead they would hold them all.
		const hanging = 8
		for i := range hanging {
			op := newOp(ns, fmt.Sprintf("stuck-%d", i), "hanging", map[string]any{"amount": i + 1})
			// Attempts enough not to spend them all during the test.
			op.Spec.RetryPolicy.MaxAttempts = 100
			create(op)
		}
		By("committing another tool's operations meanwhile")
		for i := range 3 {
			create(newOp(ns, fmt.Sprintf("fine-%d", i), "fine", map[string]any{"amount": i + 1}))
		}
		for i := range 3 {
			waitFor(ns, fmt.Sprintf("fine-%d", i), v1.StateCommitted, 30*time.Second)
		}

		By("claiming for no more of the hanging tool's operations than its bulkhead holds (1 of 4 workers)")
		Consistently(func() int {
			ops := &v1.SideEffectOperationList{}
			Expect(k8sClient.List(ctx, ops, client.InNamespace(ns))).To(Succeed())
			started := 0
			for _, op := range ops.Items {
				if op.Spec.ToolRef.Name == "hanging" && op.Status.State == v1.StateStarted {
					started++
				}
			}
			return started
		}, 5*time.Second, 50*time.Millisecond).Should(BeNumerically("<=", 1))

		By("ending each call at the tool's 2s timeout as one that never left: retryable, never final")
		Eventually(func() []v1.OperationState {
			var states []v1.OperationState
			for i := range hanging {
				states = append(states, get(ns, fmt.Sprintf("stuck-%d", i)).Status.State)
			}
			return states
		}, 60*time.Second, 200*time.Millisecond).Should(ContainElement(v1.StateFailedRetryable))
		for i := range hanging {
			op := get(ns, fmt.Sprintf("stuck-%d", i))
			Expect(op.Status.State).To(BeElementOf(v1.OperationState(""), v1.StatePlanned, v1.StateStarted, v1.StateFailedRetryable),
				describe(op))
			if op.Status.State == v1.StateFailedRetryable {
				Expect(op.Status.ErrorMessage).To(And(ContainSubstring("request never left"),
					ContainSubstring("auth.oauth2: getting a token")), describe(op))
				Expect(op.Status.ErrorMessage).NotTo(ContainSubstring("s3cr3t-client"))
			}
		}
	})
})
