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
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The samples", func() {
	It("commit once per key, survive a re-apply, and refuse to rebind a key to other parameters", func() {
		ns := newNamespace("samples")
		startManager(ns, manager{holder: "samples"})

		By("rendering config/samples and pointing it at the sandbox")
		rendered := kubectl("", "kustomize", filepath.Join(root, "config", "samples"))
		Expect(rendered).To(ContainSubstring("http://127.0.0.1:8090"))
		rendered = strings.ReplaceAll(rendered, "http://127.0.0.1:8090", sb.URL)

		By("applying them and waiting for every operation")
		apply(ns, rendered)
		waitFor(ns, "seo --all", "Ready")

		chargeKey := toolKey(ns, "Tool:payments", "charge.create", "order-1001")
		ticketKey := toolKey(ns, "ClusterTool:tickets", "ticket.create", "ticket-disk-full")
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{chargeKey: 1, ticketKey: 1}))

		By("reading them with kubectl get seo")
		table := strings.Split(strings.TrimSpace(kubectl("", "get", "seo", "-n", ns)), "\n")
		Expect(table).To(HaveLen(3), "a header and two operations")
		Expect(strings.Fields(table[0])).To(Equal(
			[]string{"NAME", "STATE", "TOOL", "OPERATION", "KEY", "EXTERNAL", "ID", "AGE"}))
		ids := map[string]string{}
		for _, row := range table[1:] {
			f := strings.Fields(row)
			Expect(f).To(HaveLen(7), row)
			Expect(f[1]).To(Equal("Committed"), row)
			ids[f[0]] = f[5]
		}
		Expect(strings.Fields(table[1])[2:5]).To(Equal([]string{"payments", "charge.create", "order-1001"}))
		Expect(strings.Fields(table[2])[2:5]).To(Equal([]string{"tickets", "ticket.create", "ticket-disk-full"}))
		for _, e := range effectsFor(ns) {
			switch e.Key {
			case chargeKey:
				Expect(ids["charge-order-1001"]).To(Equal(e.ID))
			case ticketKey:
				Expect(ids["ticket-disk-full"]).To(Equal(e.ID))
			}
		}

		By("re-applying them, the GitOps way: every object unchanged, and no new effect")
		expectUnchanged(apply(ns, rendered))
		Consistently(func() map[string]int { return effectsPerKey(ns) }).
			Should(Equal(map[string]int{chargeKey: 1, ticketKey: 1}))
		Expect(jsonpath(ns, "seo", `{.items[*].status.state}`)).To(Equal("Committed Committed"))

		By("applying the charge with a changed amount: the API server refuses")
		Expect(rendered).To(ContainSubstring("amount: 4200"))
		changed := strings.Replace(rendered, "amount: 4200", "amount: 9900", 1)
		_, err := runKubectl(changed, "apply", "-n", ns, "-f", "-")
		Expect(err).To(MatchError(ContainSubstring("an idempotency key cannot be bound to different parameters")))
		Expect(jsonpath(ns, "seo/charge-order-1001", "{.spec.parameters.amount}")).To(Equal("4200"))
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{chargeKey: 1, ticketKey: 1}))
	})

	It("run the saga sample: a ticket, an approved change under it, a message, each once", func() {
		ns := newNamespace("saga-sample")
		startManager(ns, manager{holder: "saga-sample"})

		rendered := kubectl("", "kustomize", filepath.Join(root, "config", "samples", "sagas"))
		rendered = strings.ReplaceAll(rendered, "http://127.0.0.1:8090", sb.URL)
		apply(ns, rendered)

		By("opening the ticket, then waiting for a person's approval of the change")
		waitFor(ns, "saga/scale-checkout", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}=WaitingForApproval`)
		Expect(jsonpath(ns, "saga/scale-checkout", "{.status.currentStep} {.status.stepsDone}")).To(Equal("config 1"))
		ticketKey := toolKey(ns, "Tool:servicedesk", "ticket.open", "change-2041/ticket")
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{ticketKey: 1}))

		By("approving it with kubectl, the same field a GitOps repository sets")
		kubectl("", "patch", "-n", ns, "saga/scale-checkout", "--type=merge",
			"-p", `{"spec":{"approvals":[{"step":"config","by":"alice"}]}}`)
		waitFor(ns, "saga/scale-checkout", "Ready")

		table := strings.Split(strings.TrimSpace(kubectl("", "get", "saga", "-n", ns)), "\n")
		Expect(table).To(HaveLen(2))
		Expect(strings.Fields(table[0])).To(Equal([]string{"NAME", "STATE", "STEP", "DONE", "AGE"}))
		Expect(strings.Fields(table[1])[:3]).To(Equal([]string{"scale-checkout", "Committed", "3"}))
		want := map[string]int{
			ticketKey: 1,
			toolKey(ns, "Tool:configstore", "config.set", "change-2041/config"): 1,
			toolKey(ns, "Tool:chat", "message.post", "change-2041/notify"):      1,
		}
		Expect(effectsPerKey(ns)).To(Equal(want))
		ticket := jsonpath(ns, "saga/scale-checkout", "{.status.steps[0].externalObjectID}")
		Expect(jsonpath(ns, "seo/scale-checkout.config", "{.spec.parameters.ticket}")).To(Equal(ticket))

		By("re-applying it, the GitOps way: every object unchanged, approved and all, and nothing runs again")
		expectUnchanged(apply(ns, rendered))
		Consistently(func() map[string]int { return effectsPerKey(ns) }).Should(Equal(want))
		Expect(jsonpath(ns, "saga/scale-checkout", "{.status.state}")).To(Equal("Committed"))
	})
})

// expectUnchanged checks that kubectl apply changed none of the objects it
// applied: a default the API server writes inside a list item (a step's
// toolRef.kind, an operation's method) makes every re-apply a change, and a
// GitOps tool shows the object out of sync forever.
func expectUnchanged(applied string) {
	GinkgoHelper()
	for line := range strings.SplitSeq(strings.TrimSpace(applied), "\n") {
		Expect(line).To(HaveSuffix(" unchanged"), "a server default inside a list item shows as a change")
	}
}
