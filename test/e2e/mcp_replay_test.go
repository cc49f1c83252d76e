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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
)

// recordReaderRBAC lets a service account read its namespace's scope
// records, as the view role does: what the gateway needs to answer a call
// whose operation went from its record.
func recordReaderRBAC(sa string) string {
	return roleFor(sa, sa+"-records", `- apiGroups: [effects.once.dev]
  resources: [idempotencyrecords]
  verbs: [get]`)
}

var _ = Describe("The MCP gateway after a call's operation went", func() {
	const tool = "payments__charge.create"

	It("answers the same call from the record, with one effect, even with the tool gone, and refuses other arguments", func() {
		ns := newNamespace("mcp-ttl")
		startManager(ns, manager{holder: "mcp-ttl"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		apply(ns, recordReaderRBAC("agent"))
		token := serviceAccountToken(ns, "agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		p, url, err := cp.StartGateway(addr, logFile(ns+"-gateway"), "--namespace", ns, "--call-timeout=150s",
			"--ttl-seconds-after-finished=2")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { p.Stop(10 * time.Second) })
		a := connectAgent(url, token)

		By("calling with a key: committed, one effect")
		args := map[string]any{"amount": 100, "currency": "eur", "idempotencyKey": "order-ttl"}
		first, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		Expect(first.IsError).To(BeFalse(), text(first))
		sc := structured(first)
		Expect(sc["state"]).To(Equal("Committed"))
		Expect(sc["replayed"]).To(BeFalse())
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("the TTL deleting the operation two seconds after it ended; its record keeps the outcome")
		Eventually(func() []string { return mcpOperations(ns) }).WithTimeout(collectTimeout).
			WithPolling(200 * time.Millisecond).Should(BeEmpty())
		Expect(strings.Fields(kubectl("", "get", "idempotencyrecords", "-n", ns,
			"-o", "jsonpath={.items[*].spec.outcome.state}"))).To(Equal([]string{"Committed"}))

		By("deleting the tool too: a replay needs neither")
		kubectl("", "delete", "tool", "payments", "-n", ns)

		By("the same call again: the recorded outcome, replayed, no object made, no second effect")
		again, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the tools/call replayed after its operation went", again)
		Expect(again.IsError).To(BeFalse(), text(again))
		sc2 := structured(again)
		Expect(sc2["replayed"]).To(BeTrue())
		Expect(sc2["state"]).To(Equal("Committed"))
		Expect(sc2["operation"]).To(Equal(sc["operation"]))
		Expect(sc2["externalObjectID"]).To(Equal(sc["externalObjectID"]))
		Expect(sc2["result"]).To(Equal(sc["result"]))
		Expect(mcpOperations(ns)).To(BeEmpty())
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("the same key with other arguments: a mismatch, nothing made")
		r, err := a.call(tool, map[string]any{"amount": 200, "currency": "eur", "idempotencyKey": "order-ttl"})
		Expect(err).NotTo(HaveOccurred())
		show("a tools/call with the same key and other arguments after the operation went", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("IdempotencyParameterMismatch: "))
		Expect(mcpOperations(ns)).To(BeEmpty())
		Expect(effectsFor(ns)).To(HaveLen(1))
	})
})
