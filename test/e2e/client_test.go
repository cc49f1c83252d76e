//go:build e2e

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

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	onceclient "github.com/once-dev/once/pkg/once"
	"github.com/once-dev/once/test/sandbox"
)

// kubeClient is a controller-runtime client of the suite's control plane,
// as the control plane's admin.
func kubeClient() client.Client {
	GinkgoHelper()
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	scheme := runtime.NewScheme()
	Expect(v1.AddToScheme(scheme)).To(Succeed())
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

var _ = Describe("The Go client (pkg/once)", func() {
	It("does an operation once per key, and answers retries, mismatches, refusals and a caller that gave up", func() {
		ns := newNamespace("client")
		startManager(ns, manager{holder: "client"})
		apply(ns, mcpToolYAML("payments", "20s"))
		c := onceclient.New(kubeClient())
		// The request of ExampleClient_Do, in the test's namespace.
		req := func(key, params string) onceclient.Request {
			return onceclient.Request{Namespace: ns, Tool: v1.ToolReference{Name: "payments"}, Operation: "charge.create",
				Key: key, Parameters: json.RawMessage(params)}
		}
		do := func(r onceclient.Request, timeout time.Duration) (onceclient.Result, error) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return c.Do(ctx, r)
		}

		By("doing it: committed, with the tool's answer")
		first, err := do(req("order-4711", `{"amount": 4200, "currency": "eur"}`), 2*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.State).To(Equal(v1.StateCommitted))
		Expect(first.Found).To(BeFalse())
		Expect(first.Name).To(Equal(onceclient.ObjectName(v1.ToolReference{Name: "payments"}, "charge.create", "order-4711")))
		Expect(first.ExternalObjectID).NotTo(BeEmpty())
		Expect(string(first.Result)).To(ContainSubstring(first.ExternalObjectID))

		By("doing it again: the same answer, found, no second effect")
		again, err := do(req("order-4711", `{"currency": "eur", "amount": 4200}`), 2*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Found).To(BeTrue())
		Expect(again.ExternalObjectID).To(Equal(first.ExternalObjectID))
		Expect(again.Result).To(Equal(first.Result))
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("the same key with other parameters: a mismatch the client sees itself, no object, no call")
		_, err = do(req("order-4711", `{"amount": 9900, "currency": "eur"}`), time.Minute)
		var mismatch *onceclient.MismatchError
		Expect(errors.As(err, &mismatch)).To(BeTrue(), "%v", err)
		Expect(mismatch.Name).To(Equal(first.Name))

		By("the same key under another name with other parameters: the operator's mismatch, no call")
		other := req("order-4711", `{"amount": 9900, "currency": "eur"}`)
		other.Name = "order-4711-by-hand"
		_, err = do(other, 2*time.Minute)
		Expect(errors.As(err, &mismatch)).To(BeTrue(), "%v", err)
		Expect(mismatch.Name).To(Equal("order-4711-by-hand"))
		Expect(mismatch.Message).To(ContainSubstring("bound to different parameters"))
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("a refusal for good: FailedError, no effect")
		faults(ns, sandbox.FaultRule{Method: "POST", KeyPrefix: "Tool:payments/charge.create/order-4712", Fault: sandbox.Fault422})
		_, err = do(req("order-4712", `{"amount": 100, "currency": "usd"}`), 2*time.Minute)
		var failed *onceclient.FailedError
		Expect(errors.As(err, &failed)).To(BeTrue(), "%v", err)
		Expect(failed.Class).To(Equal(v1.ErrorPermanent))
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("a caller that gives up before the tool answers: PendingError; asking again later gets the outcome")
		faults(ns, sandbox.FaultRule{Method: "POST", KeyPrefix: "Tool:payments/charge.create/order-4713",
			Fault: sandbox.FaultDelayBeforeCommit + "=4s", Count: 1})
		var progress []onceclient.Progress
		slow := req("order-4713", `{"amount": 300, "currency": "usd"}`)
		slow.Progress = func(p onceclient.Progress) { progress = append(progress, p) }
		_, err = do(slow, time.Second)
		var pending *onceclient.PendingError
		Expect(errors.As(err, &pending)).To(BeTrue(), "%v", err)
		Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue())
		Expect(progress).NotTo(BeEmpty())
		res, err := do(req("order-4713", `{"amount": 300, "currency": "usd"}`), 2*time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.Found).To(BeTrue())
		Expect(res.Name).To(Equal(pending.Name))
		Expect(effectsFor(ns)).To(HaveLen(2))
	})
})
