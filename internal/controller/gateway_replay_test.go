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
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/mcpgateway"
)

// recordReads counts the requests that read IdempotencyRecords (get or
// list) through the configs it wraps.
type recordReads struct{ n atomic.Int32 }

// config is base, with every record read counted.
func (c *recordReads) config(base *rest.Config) *rest.Config {
	cfg := rest.CopyConfig(base)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/idempotencyrecords") {
				c.n.Add(1)
			}
			return next.RoundTrip(r)
		})
	})
	return cfg
}

// take returns the reads counted since the last take.
func (c *recordReads) take() int32 { return c.n.Swap(0) }

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The gateway reads a call's scope record once: Do reads it before it
// creates anything, and the gateway asks it itself only when the tool
// cannot take the call (gone, or refusing the arguments), so a call whose
// operation went is answered from the record all the same.
var _ = Describe("The MCP gateway's reads of a call's record", func() {
	const tool = "payments__charge.create"
	var (
		ns    string
		reads *recordReads
		agent *mcp.ClientSession
	)
	BeforeEach(func() {
		ns = newNamespace()
		DeferCleanup(startManager(managerOptions{}))
		reads = &recordReads{}
		g, err := mcpgateway.New(mcpgateway.Config{REST: reads.config(cfg), Namespace: ns,
			CallTimeout: 30 * time.Second, TTLSecondsAfterFinished: new(int32(3))})
		Expect(err).NotTo(HaveOccurred())
		clientEnd, serverEnd := mcp.NewInMemoryTransports()
		gctx, stop := context.WithCancel(ctx)
		DeferCleanup(stop)
		go func() { _ = g.Run(gctx, serverEnd) }()
		agent, err = mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "v0"}, nil).
			Connect(ctx, clientEnd, nil)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agent.Close)
	})
	call := func(args map[string]any) *mcp.CallToolResult {
		GinkgoHelper()
		res, err := agent.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		Expect(err).NotTo(HaveOccurred())
		return res
	}
	answer := func(res *mcp.CallToolResult) map[string]any {
		GinkgoHelper()
		Expect(res.IsError).To(BeFalse(), "%v", res.Content)
		sc, ok := res.StructuredContent.(map[string]any)
		Expect(ok).To(BeTrue(), "%v", res.StructuredContent)
		return sc
	}

	It("reads it once on a first call, and once on each replay after the operation went, tool or no tool", func() {
		newTool(ns, "payments", v1.IdempotencyNone)
		args := map[string]any{"amount": 5, "idempotencyKey": "order-1"}

		By("a first call: committed, one read of the record, before the operation was made")
		first := answer(call(args))
		Expect(first["state"]).To(Equal(string(v1.StateCommitted)))
		Expect(first["replayed"]).To(BeFalse())
		Expect(reads.take()).To(BeEquivalentTo(1), "a first call read its record more than once")

		By("the TTL deleting the operation; its record keeps the outcome")
		op := &v1.SideEffectOperation{}
		op.Namespace, op.Name = ns, first["operation"].(string)
		Eventually(gone(op), 20*time.Second, 100*time.Millisecond).Should(BeTrue())
		reads.take()

		By("the same call: the recorded outcome, one read, no object made")
		again := answer(call(args))
		Expect(again["replayed"]).To(BeTrue())
		Expect(again["operation"]).To(Equal(first["operation"]))
		Expect(again["externalObjectID"]).To(Equal(first["externalObjectID"]))
		Expect(reads.take()).To(BeEquivalentTo(1))
		Expect(gone(op)()).To(BeTrue(), "the replay made the operation again")

		By("the same call with the tool gone: still the recorded outcome, one read")
		Expect(k8sClient.Delete(ctx, &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"}})).To(Succeed())
		again = answer(call(args))
		Expect(again["replayed"]).To(BeTrue())
		Expect(again["externalObjectID"]).To(Equal(first["externalObjectID"]))
		Expect(reads.take()).To(BeEquivalentTo(1))

		By("the same key with other arguments, the tool gone: a mismatch from the record, one read")
		r := call(map[string]any{"amount": 6, "idempotencyKey": "order-1"})
		Expect(r.IsError).To(BeTrue())
		Expect(r.Content).To(HaveLen(1))
		Expect(r.Content[0].(*mcp.TextContent).Text).To(HavePrefix("IdempotencyParameterMismatch: "))
		Expect(reads.take()).To(BeEquivalentTo(1))
		Expect(gone(op)()).To(BeTrue())
		Expect(effectsIn(ns)).To(Equal(1))
	})
})
