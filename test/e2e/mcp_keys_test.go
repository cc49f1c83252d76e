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

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// derivedToolYAML is mcpToolYAML's tool, whose calls time out after
// timeout, with keys derived from the arguments within window.
func derivedToolYAML(name, timeout, window string) string {
	return mcpToolYAML(name, timeout) + fmt.Sprintf(`    derivedKey:
      window: %s
`, window)
}

// derivedCallerRBAC lets a service account do what a call of a tool that
// derives its keys reads as the caller besides agentRBAC's: list its
// operations (to find the one a key still holds for, whatever its age) and
// read the scope records (to find one whose operation went).
func derivedCallerRBAC(sa string) string {
	return roleFor(sa, sa+"-derived", `- apiGroups: [effects.once.dev]
  resources: [sideeffectoperations]
  verbs: [list]
- apiGroups: [effects.once.dev]
  resources: [idempotencyrecords]
  verbs: [get]`)
}

// createdAt is when an operation was made, as the API server keeps it (to
// the second).
func createdAt(ns, name string) time.Time {
	GinkgoHelper()
	t, err := time.Parse(time.RFC3339, jsonpath(ns, "seo/"+name, "{.metadata.creationTimestamp}"))
	Expect(err).NotTo(HaveOccurred())
	return t
}

var _ = Describe("Keys derived from the arguments", func() {
	const tool = "payments__charge.create"

	It("make a model's retry with a fresh key one effect, and the same arguments after the window another", func() {
		ns := newNamespace("mcp-derived")
		startManager(ns, manager{holder: "mcp-derived"})
		// A window long enough for the retries below on a loaded machine,
		// short enough to wait out.
		const window = 20 * time.Second
		apply(ns, derivedToolYAML("payments", "10s", window.String()))
		apply(ns, agentRBAC("agent"))
		apply(ns, derivedCallerRBAC("agent"))
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
		Expect(list.Tools[0].Description).To(ContainSubstring("within " + window.String() + " after it began or ended"))
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

// A derived key holds while its operation has not ended, whatever its age,
// and for the window after the later of its first use and its end. The
// gateway's own answers (NeedsReview, Pending) tell the model to call again
// later with the same arguments, and a person's decision or a slow tool
// comes when it comes: such a call, after the window from the first use,
// must reach the same operation. Each spec counts the effects at the tool.
var _ = Describe("Keys derived from the arguments, after the window", func() {
	const (
		tool   = "payments__charge.create"
		window = 10 * time.Second
	)

	It("hold for an operation in NeedsReview that the host's user decides after the window", func() {
		ns := newNamespace("mcp-derived-ask")
		startManager(ns, manager{holder: "mcp-derived-ask"})
		// The tool's answer is lost: a None tool's operation goes to
		// NeedsReview, and the gateway asks the host's user.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, derivedToolYAML("payments", "10s", window.String()))
		apply(ns, agentRBAC("resolver"))
		apply(ns, derivedCallerRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		var answeredAt time.Time
		h := connectHost(url, serviceAccountToken(ns, "resolver"), func(*mcp.ElicitParams) *mcp.ElicitResult {
			// The user looks at the tool's dashboard for longer than the
			// window from the operation's making; the host calls again, with
			// the same arguments, when the user answers.
			made := time.Now()
			if ops := mcpOperations(ns); len(ops) > 0 {
				made = createdAt(ns, ops[0])
			}
			time.Sleep(time.Until(made.Add(window + 5*time.Second)))
			answeredAt = time.Now()
			effects := effectsFor(ns)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "happened",
				"externalObjectID": effects[0].ID, "reason": "seen at the tool"}}
		})
		r := h.call(tool, map[string]any{"amount": 500, "currency": "eur"})
		show("the answer once the user decided after the window", r)
		Expect(h.questions()).To(HaveLen(1))
		ops := mcpOperations(ns)
		Expect(ops).To(HaveLen(1), "the answer's call reached the first operation and made none")
		Expect(answeredAt.Sub(createdAt(ns, ops[0]))).To(BeNumerically(">", window+3*time.Second),
			"the answer came after the window (and its margin) from the first use")
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(jsonpath(ns, "seo/"+ops[0], "{.spec.resolution.action}")).To(Equal("MarkCommitted"))
		Expect(effectsFor(ns)).To(HaveLen(1), "one request, one effect")
		AddReportEntry("derived key, NeedsReview decided after the window: effects at the tool",
			len(effectsFor(ns)), ReportEntryVisibilityAlways)
	})

	It("hold for a slow tool's operation that a model calls again after the window, as Pending tells it", func() {
		ns := newNamespace("mcp-derived-slow")
		startManager(ns, manager{holder: "mcp-derived-slow"})
		// A slow tool: the charge takes 22 s (a card network), longer than
		// the call waits (14 s) and than the window.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDelayBeforeCommit + "=22s", Count: 1})
		apply(ns, derivedToolYAML("payments", "40s", window.String()))
		apply(ns, agentRBAC("agent"))
		apply(ns, derivedCallerRBAC("agent"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		p, url, err := cp.StartGateway(addr, logFile(ns+"-gateway"), "--namespace", ns, "--call-timeout=14s",
			"--kubeconfig", gatewayKubeconfig())
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { p.Stop(10 * time.Second) })
		a := connectAgent(url, serviceAccountToken(ns, "agent"))
		args := map[string]any{"amount": 600, "currency": "eur"}
		r, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the first call", r)
		Expect(text(r)).To(HavePrefix("Pending: "))
		ops := mcpOperations(ns)
		Expect(ops).To(HaveLen(1))
		first := ops[0]

		By("calling again with the same arguments (and a fresh key), as the answer says, after the window")
		args["idempotencyKey"] = "charge-retry-1"
		Expect(time.Since(createdAt(ns, first))).To(BeNumerically(">", window+2*time.Second))
		for range 3 {
			r, err = a.call(tool, args)
			Expect(err).NotTo(HaveOccurred())
			show("the call again", r)
			Expect(mcpOperations(ns)).To(ConsistOf(first), "the call again made another operation")
			if !r.IsError {
				break
			}
			Expect(text(r)).To(HavePrefix("Pending: "))
		}
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(structured(r)["replayed"]).To(BeTrue())
		Expect(structured(r)["operation"]).To(Equal(first))
		Expect(effectsFor(ns)).To(HaveLen(1), "one request, one effect")
		AddReportEntry("derived key, slow tool called again after the window: effects at the tool",
			len(effectsFor(ns)), ReportEntryVisibilityAlways)
	})

	It("refuse a caller that may not list its operations, naming the right, and do nothing", func() {
		ns := newNamespace("mcp-derived-nolist")
		startManager(ns, manager{holder: "mcp-derived-nolist"})
		apply(ns, derivedToolYAML("payments", "10s", window.String()))
		apply(ns, agentRBAC("agent"))
		apply(ns, recordReaderRBAC("agent"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, serviceAccountToken(ns, "agent"))
		r, err := a.call(tool, map[string]any{"amount": 800, "currency": "eur"})
		Expect(err).NotTo(HaveOccurred())
		show("a call by a caller without list", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("Forbidden: "))
		Expect(text(r)).To(ContainSubstring("needs list on sideeffectoperations"))
		Expect(mcpOperations(ns)).To(BeEmpty(), "nothing was done")
		Expect(effectsFor(ns)).To(BeEmpty())
	})

	It("hold for the window after the operation ended, and not after it", func() {
		ns := newNamespace("mcp-derived-end")
		startManager(ns, manager{holder: "mcp-derived-end"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, derivedToolYAML("payments", "10s", window.String()))
		apply(ns, agentRBAC("agent"))
		apply(ns, derivedCallerRBAC("agent"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, serviceAccountToken(ns, "agent"))
		args := map[string]any{"amount": 700, "currency": "eur"}
		r, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the first call", r)
		Expect(text(r)).To(HavePrefix("NeedsReview: "))
		ops := mcpOperations(ns)
		Expect(ops).To(HaveLen(1))
		first := ops[0]

		By("a person resolves it after the window, with kubectl")
		time.Sleep(time.Until(createdAt(ns, first).Add(window + 5*time.Second)))
		kubectl("", "patch", "-n", ns, "seo", first, "--type=merge", "-p", fmt.Sprintf(
			`{"spec":{"resolution":{"action":"MarkCommitted","externalObjectID":%q,"by":"oncall","reason":"seen at the tool"}}}`,
			effectsFor(ns)[0].ID))
		waitState(ns, first, "Committed")
		end, err := time.Parse(time.RFC3339, jsonpath(ns, "seo/"+first, "{.status.completionTime}"))
		Expect(err).NotTo(HaveOccurred())

		By("the model fetches the outcome with the same arguments and a fresh key: the decided outcome, no effect")
		args["idempotencyKey"] = "charge-fetch"
		r, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the outcome fetched after the window, once the operation ended", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["replayed"]).To(BeTrue())
		Expect(structured(r)["operation"]).To(Equal(first))
		Expect(structured(r)["externalObjectID"]).To(Equal(effectsFor(ns)[0].ID))
		Expect(mcpOperations(ns)).To(ConsistOf(first))
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("the same arguments once the window after the end is over: a new request")
		// The window, its two seconds' margin, and a second of the
		// completion time kept to the second.
		time.Sleep(time.Until(end.Add(window + 4*time.Second)))
		delete(args, "idempotencyKey")
		r, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the same arguments after the window from the end", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["replayed"]).To(BeFalse())
		Expect(mcpOperations(ns)).To(HaveLen(2))
		Expect(effectsFor(ns)).To(HaveLen(2), "two requests, two effects")
		AddReportEntry("derived key, outcome fetched after the window: effects at the tool",
			"1 effect for the request and its fetch, 1 more for the same arguments after the window from its end",
			ReportEntryVisibilityAlways)
	})
	It("take a host's answer to the operation it was asked about, even after that operation's key stopped holding", func() {
		ns := newNamespace("mcp-derived-late")
		startManager(ns, manager{holder: "mcp-derived-late"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, derivedToolYAML("payments", "10s", window.String()))
		apply(ns, agentRBAC("resolver"))
		apply(ns, derivedCallerRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		call := drivingHost(ctx, url, serviceAccountToken(ns, "resolver"), tool)
		args := map[string]any{"amount": 800, "currency": "eur"}

		By("the question; a person decides with kubectl meanwhile, and the window after the end passes")
		r := call(args, nil, "")
		Expect(r.NeedsInput()).To(BeTrue())
		state := r.RequestState
		first := mcpOperations(ns)[0]
		once("resolve", first, "--committed", "--external-id", effectsFor(ns)[0].ID, "--reason", "found it", "-n", ns)
		waitState(ns, first, "Committed")
		end, err := time.Parse(time.RFC3339, jsonpath(ns, "seo/"+first, "{.status.completionTime}"))
		Expect(err).NotTo(HaveOccurred())
		time.Sleep(time.Until(end.Add(window + 4*time.Second)))

		By("the host's user answers, late, as a host whose gateway died mid-wait re-sends: the decided outcome")
		r = call(args, &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "did not happen: retry",
			"reason": "nothing at the tool"}}, state)
		show("a late answer after the key stopped holding", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["operation"]).To(Equal(first))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(mcpOperations(ns)).To(ConsistOf(first))
		Expect(effectsFor(ns)).To(HaveLen(1), "the answer's call made no new operation")
	})
})
