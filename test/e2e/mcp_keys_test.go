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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
)

// derivedToolYAML is mcpToolYAML's tool with keys derived from the
// arguments within window.
func derivedToolYAML(name, window string) string {
	return mcpToolYAML(name, "10s") + fmt.Sprintf(`    derivedKey:
      window: %s
`, window)
}

var _ = Describe("Keys derived from the arguments", func() {
	const tool = "payments__charge.create"

	It("make a model's retry with a fresh key one effect, and the same arguments after the window another", func() {
		ns := newNamespace("mcp-derived")
		startManager(ns, manager{holder: "mcp-derived"})
		// A window long enough for the retries below on a loaded machine,
		// short enough to wait out.
		const window = 20 * time.Second
		apply(ns, derivedToolYAML("payments", window.String()))
		apply(ns, agentRBAC("agent"))
		// A tool that derives its keys needs the scope records read too, to
		// find a retry whose operation went.
		apply(ns, recordReaderRBAC("agent"))
		token := serviceAccountToken(ns, "agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, token)

		By("listing the tool: the key is optional, and the description says the rule")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := a.session.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Tools).To(HaveLen(1))
		Expect(list.Tools[0].Description).To(ContainSubstring("Once derives the key from your arguments"))
		Expect(list.Tools[0].Description).To(ContainSubstring("within " + window.String() + " of the first"))
		schema, _ := json.Marshal(list.Tools[0].InputSchema)
		Expect(string(schema)).To(ContainSubstring(`"required":["amount","currency"]`))

		By("a first call, with the key the model made up")
		args := map[string]any{"amount": 4200, "currency": "eur", "idempotencyKey": "charge-7f3a"}
		// The window runs from the operation's making, between these two.
		before := time.Now()
		first, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the first tools/call", first)
		Expect(first.IsError).To(BeFalse(), text(first))
		sc := structured(first)
		Expect(sc["state"]).To(Equal("Committed"))
		Expect(sc["replayed"]).To(BeFalse())
		after := time.Now()
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("the model's retry with a fresh key and the same arguments: the first call's answer, no second effect")
		args["idempotencyKey"] = "charge-91bc"
		again, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the retry with a fresh key", again)
		Expect(again.IsError).To(BeFalse(), text(again))
		Expect(structured(again)["replayed"]).To(BeTrue())
		Expect(structured(again)["externalObjectID"]).To(Equal(sc["externalObjectID"]))
		Expect(time.Since(before)).To(BeNumerically("<", window), "the retry came within the window")

		By("and with no key at all")
		delete(args, "idempotencyKey")
		again, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.IsError).To(BeFalse(), text(again))
		Expect(structured(again)["externalObjectID"]).To(Equal(sc["externalObjectID"]))
		Expect(effectsFor(ns)).To(HaveLen(1))
		Expect(mcpOperations(ns)).To(HaveLen(1))

		By("its operation gone (as its TTL would take it), a retry with a fresh key: the record answers")
		kubectl("", "delete", "-n", ns, "seo", sc["operation"].(string), "--wait=true")
		args["idempotencyKey"] = "charge-d04e"
		again, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("a retry with a fresh key after the operation went", again)
		Expect(again.IsError).To(BeFalse(), text(again))
		Expect(structured(again)["replayed"]).To(BeTrue())
		Expect(structured(again)["externalObjectID"]).To(Equal(sc["externalObjectID"]))
		Expect(mcpOperations(ns)).To(BeEmpty(), "answered from the record, nothing made")
		Expect(effectsFor(ns)).To(HaveLen(1))
		delete(args, "idempotencyKey")

		By("other arguments: another request, another effect")
		other, err := a.call(tool, map[string]any{"amount": 4300, "currency": "eur"})
		Expect(err).NotTo(HaveOccurred())
		Expect(other.IsError).To(BeFalse(), text(other))
		Expect(structured(other)["replayed"]).To(BeFalse())
		Expect(effectsFor(ns)).To(HaveLen(2))

		By("the same arguments once the window from the first call is over: a new request")
		// The window and its two seconds' margin for clocks.
		time.Sleep(time.Until(after.Add(window + 3*time.Second)))
		later, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the same arguments after the window", later)
		Expect(later.IsError).To(BeFalse(), text(later))
		Expect(structured(later)["replayed"]).To(BeFalse())
		Expect(structured(later)["externalObjectID"]).NotTo(Equal(sc["externalObjectID"]))
		Expect(effectsFor(ns)).To(HaveLen(3))
		AddReportEntry("derived keys: effects at the tool", fmt.Sprintf(
			"%d effects for 6 calls (a first call, its retry with a fresh key, its retry without a key, a retry "+
				"with a fresh key after its operation went, other arguments, the same arguments after the %s window)",
			len(effectsFor(ns)), window),
			ReportEntryVisibilityAlways)
	})
})
