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
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// host is an MCP client that shows the gateway's forms to a user, as a
// host with the elicitation capability does; answer plays the user.
type host struct {
	session *mcp.ClientSession
	mu      sync.Mutex
	asked   []string
}

func connectHost(url, token string, answer func(*mcp.ElicitParams) *mcp.ElicitResult) *host {
	GinkgoHelper()
	h := &host{}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-host", Version: "v0.0.1"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			h.mu.Lock()
			h.asked = append(h.asked, req.Params.Message)
			h.mu.Unlock()
			return answer(req.Params), nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = s.Close() })
	h.session = s
	return h
}

func (h *host) call(tool string, args map[string]any) *mcp.CallToolResult {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := h.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	Expect(err).NotTo(HaveOccurred())
	return r
}

func (h *host) questions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.asked...)
}

// resolverRBAC lets a service account decide operations and approve sagas
// in the namespace, as kubectl once resolve and approve need.
func resolverRBAC(sa string) string {
	return roleFor(sa, sa+"-decides", `- apiGroups: [effects.once.dev]
  resources: [sideeffectoperations, sagas]
  verbs: [create, get, patch]`)
}

var _ = Describe("The host's user decides through the protocol", func() {
	const tool = "payments__charge.create"

	It("records an operation's resolution as the caller, asks no caller without the right, and says a decline", func() {
		ns := newNamespace("mcp-decide")
		startManager(ns, manager{holder: "mcp-decide"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		apply(ns, agentRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		agentToken, resolverToken := serviceAccountToken(ns, "agent"), serviceAccountToken(ns, "resolver")
		args := map[string]any{"amount": 700, "currency": "eur", "idempotencyKey": "payout-12"}

		By("a caller without the right to resolve: its user is not asked, nothing is recorded, the answer is as before")
		// The user looks the charge up at the tool: the newest is the one
		// asked about, as each request below runs alone.
		happened := func(*mcp.ElicitParams) *mcp.ElicitResult {
			effects := effectsFor(ns)
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "happened",
				"externalObjectID": effects[len(effects)-1].ID, "reason": "the charge is in the tool's dashboard"}}
		}
		a := connectHost(url, agentToken, happened)
		r := a.call(tool, args)
		show("a tools/call whose user may not decide", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("NeedsReview: "))
		Expect(a.questions()).To(BeEmpty(), "a user who could not record an answer is not asked")
		name := mcpOperations(ns)[0]
		Expect(jsonpath(ns, "seo/"+name, "{.status.state}")).To(Equal("NeedsReview"))
		Expect(jsonpath(ns, "seo/"+name, "{.spec.resolution}")).To(BeEmpty())

		By("a caller with the right whose user declines: nothing recorded, and the answer says so")
		d := connectHost(url, resolverToken, func(*mcp.ElicitParams) *mcp.ElicitResult {
			return &mcp.ElicitResult{Action: "decline"}
		})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		r = d.call(tool, map[string]any{"amount": 800, "currency": "eur", "idempotencyKey": "payout-13"})
		show("a tools/call whose user declined", r)
		Expect(text(r)).To(HavePrefix("NeedsReview: "))
		Expect(text(r)).To(ContainSubstring("The user declined to decide"))
		Expect(d.questions()).To(HaveLen(1))
		declined := structured(r)["operation"].(string)
		Expect(jsonpath(ns, "seo/"+declined, "{.spec.resolution}")).To(BeEmpty())
		Expect(effectsFor(ns)).To(HaveLen(2), "the declined call's own effect, undecided")

		By("a caller with the right whose user answers: the resolution recorded as the caller, the outcome answered")
		res := connectHost(url, resolverToken, happened)
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		r = res.call(tool, map[string]any{"amount": 900, "currency": "eur", "idempotencyKey": "payout-14"})
		show("a tools/call whose user decided", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(res.questions()).To(HaveLen(1))
		sc := structured(r)
		Expect(sc["state"]).To(Equal("Committed"))
		decided := sc["operation"].(string)
		Expect(jsonpath(ns, "seo/"+decided, "{.status.resolution.action}")).To(Equal("MarkCommitted"))
		Expect(jsonpath(ns, "seo/"+decided, "{.status.resolution.fromState}")).To(Equal("NeedsReview"))
		Expect(jsonpath(ns, "seo/"+decided, "{.status.resolution.user}")).To(Equal("system:serviceaccount:" + ns + ":resolver"))
		Expect(jsonpath(ns, "seo/"+decided, "{.status.resolution.by}")).To(Equal("mcp:system:serviceaccount:" + ns + ":resolver"))
		Expect(jsonpath(ns, "seo/"+decided, "{.status.resolution.reason}")).To(Equal("the charge is in the tool's dashboard"))
		Expect(sc["externalObjectID"]).To(Equal(effectsFor(ns)[2].ID), "the effect the user named")
		AddReportEntry("an operation decided through the protocol, as recorded", kubectl("", "get", "-n", ns, "seo", decided,
			"-o", "jsonpath={.status.requestHash}{\"\\n\"}{.status.resolution}"), ReportEntryVisibilityAlways)
		Expect(effectsFor(ns)).To(HaveLen(3), "one effect per request; the decision made none")
	})

	It("keeps today's answer for a host on an older protocol version, though it could ask its user", func() {
		ns := newNamespace("mcp-decide-old")
		startManager(ns, manager{holder: "mcp-decide-old"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")

		By("the TypeScript SDK's client (2025-11-25), with the elicitation capability, for a caller who may resolve")
		var out callOutcome
		Eventually(tsCall(url, serviceAccountToken(ns, "resolver"), tool,
			map[string]any{"amount": 700, "currency": "eur", "idempotencyKey": "payout-21"}, elicits),
			2*time.Minute).Should(Receive(&out))
		Expect(out.err).To(BeEmpty())
		Expect(out.asked).To(BeZero(), "input requests are of 2026-07-28; an older version is never asked")
		Expect(out.result["isError"]).To(BeTrue())
		content := out.result["content"].([]any)
		Expect(content[0].(map[string]any)["text"]).To(HavePrefix("NeedsReview: "))
		name := mcpOperations(ns)[0]
		Expect(jsonpath(ns, "seo/"+name, "{.status.state}")).To(Equal("NeedsReview"))
		Expect(jsonpath(ns, "seo/"+name, "{.spec.resolution}")).To(BeEmpty())
		Expect(effectsFor(ns)).To(HaveLen(1))
	})

	It("asks the host's user to approve a saga's step, and runs it once approved", func() {
		ns := newNamespace("mcp-approve")
		startManager(ns, manager{holder: "mcp-approve"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("approver"))
		apply(ns, resolverRBAC("approver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		h := connectHost(url, serviceAccountToken(ns, "approver"), func(p *mcp.ElicitParams) *mcp.ElicitResult {
			Expect(effectsFor(ns)).To(BeEmpty(), "nothing runs before the approval")
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "reason": "within budget"}}
		})
		args := map[string]any{"idempotencyKey": "payout-run-1", "steps": []any{
			map[string]any{"name": "pay", "toolRef": map[string]any{"name": "payments"}, "operation": "charge.create",
				"parameters": map[string]any{"amount": 100, "currency": "eur"}, "requiresApproval": true, "irreversible": true},
		}}
		r := h.call("once.saga.run", args)
		show("a saga's tools/call approved through the protocol", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(h.questions()).To(HaveLen(1))
		Expect(h.questions()[0]).To(ContainSubstring("waits for approval of step pay"))
		saga := structured(r)["saga"].(string)
		Expect(jsonpath(ns, "saga/"+saga, "{.spec.approvals[0].user}")).To(Equal("system:serviceaccount:" + ns + ":approver"))
		Expect(jsonpath(ns, "saga/"+saga, "{.spec.approvals[0].reason}")).To(Equal("within budget"))
		AddReportEntry("a saga step approved through the protocol, as recorded", kubectl("", "get", "-n", ns, "saga", saga,
			"-o", "jsonpath={.spec.approvals}"), ReportEntryVisibilityAlways)
		Expect(effectsFor(ns)).To(HaveLen(1))
	})
})

// drivingHost connects a host that shows forms and drives the rounds
// itself, as a host whose user answers later would, and returns its call:
// with an answer and the state it was asked with, or none.
func drivingHost(ctx context.Context, url, token, tool string) func(map[string]any, *mcp.ElicitResult,
	string) *mcp.CallToolResult {
	GinkgoHelper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-host", Version: "v0.0.1"}, &mcp.ClientOptions{
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return nil, fmt.Errorf("answered by the test")
		},
	})
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = s.Close() })
	return func(args map[string]any, answer *mcp.ElicitResult, state string) *mcp.CallToolResult {
		GinkgoHelper()
		p := &mcp.CallToolParams{Name: tool, Arguments: args}
		if answer != nil {
			p.InputResponses = mcp.InputResponseMap{"once.dev/decision": answer}
			p.RequestState = state
		}
		r, err := s.CallTool(ctx, p)
		Expect(err).NotTo(HaveOccurred())
		return r
	}
}

var _ = Describe("An answer to the gateway's question", func() {
	const tool = "payments__charge.create"

	It("records nothing for a forged state, other arguments or a cancel, and once when sent twice", func() {
		ns := newNamespace("mcp-answer")
		startManager(ns, manager{holder: "mcp-answer"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		call := drivingHost(ctx, url, serviceAccountToken(ns, "resolver"), tool)
		args := map[string]any{"amount": 300, "currency": "eur", "idempotencyKey": "payout-21"}
		happened := func() *mcp.ElicitResult {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "happened",
				"externalObjectID": effectsFor(ns)[0].ID, "reason": "seen at the tool"}}
		}

		By("the question, with the state it binds the answer to")
		r := call(args, nil, "")
		Expect(r.NeedsInput()).To(BeTrue())
		Expect(r.InputRequests).To(HaveKey("once.dev/decision"))
		state := r.RequestState
		name := mcpOperations(ns)[0]
		resolution := func() string { return jsonpath(ns, "seo/"+name, "{.spec.resolution}") }

		By("a forged state, naming another incarnation of the operation: nothing recorded")
		forged, err := json.Marshal(map[string]string{"k": "operation", "n": name, "u": "another-uid",
			"h": jsonpath(ns, "seo/"+name, "{.status.requestHash}")})
		Expect(err).NotTo(HaveOccurred())
		r = call(args, happened(), base64.RawURLEncoding.EncodeToString(forged))
		show("an answer with a forged state", r)
		Expect(text(r)).To(ContainSubstring("asked about another request"))
		Expect(resolution()).To(BeEmpty())

		By("the genuine state on a call with the same key and other arguments: nothing recorded")
		r = call(map[string]any{"amount": 301, "currency": "eur", "idempotencyKey": "payout-21"}, happened(), state)
		Expect(text(r)).To(ContainSubstring("asked about another request"))
		Expect(resolution()).To(BeEmpty())

		By("a cancel: nothing recorded, today's answer")
		r = call(args, &mcp.ElicitResult{Action: "cancel"}, state)
		Expect(text(r)).To(HavePrefix("NeedsReview: "))
		Expect(resolution()).To(BeEmpty())

		By("the answer, sent twice: recorded once, the outcome both times")
		r = call(args, happened(), state)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		generation := jsonpath(ns, "seo/"+name, "{.metadata.generation}")
		r = call(args, happened(), state)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(jsonpath(ns, "seo/"+name, "{.metadata.generation}")).To(Equal(generation), "no second write")
		Expect(effectsFor(ns)).To(HaveLen(1))
	})
	It("records nothing for an answer about an earlier review, nor over a person's decision made meanwhile", func() {
		ns := newNamespace("mcp-answer-late")
		m := startManager(ns, manager{holder: "mcp-answer-late"})
		// The first two attempts' answers are lost: each charges, and each
		// leaves the operation in NeedsReview.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 2})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		call := drivingHost(ctx, url, serviceAccountToken(ns, "resolver"), tool)
		args := map[string]any{"amount": 400, "currency": "eur", "idempotencyKey": "payout-31"}
		retry := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "did not happen: retry",
			"reason": "nothing at the tool"}}

		By("the question about the first attempt; a person answers it first, with kubectl once")
		r := call(args, nil, "")
		Expect(r.NeedsInput()).To(BeTrue())
		first := r.RequestState
		name := mcpOperations(ns)[0]
		once("resolve", name, "--retry", "--reason", "not at the tool", "-n", ns)
		Eventually(func() string {
			return jsonpath(ns, "seo/"+name, "{.status.attempts}/{.status.state}")
		}, time.Minute).Should(Equal("2/NeedsReview"), "the second attempt's answer is lost too")
		Expect(effectsFor(ns)).To(HaveLen(2))

		By("the host's answer to the first question, sent now: it says nothing of the second attempt")
		generation := jsonpath(ns, "seo/"+name, "{.metadata.generation}")
		r = call(args, retry, first)
		show("an answer about an earlier attempt", r)
		Expect(text(r)).To(ContainSubstring("asked about an earlier attempt"))
		Expect(jsonpath(ns, "seo/"+name, "{.metadata.generation}")).To(Equal(generation), "nothing written")

		By("the question about the second attempt; a person decides while Once is stopped, then the host answers")
		r = call(args, nil, "")
		Expect(r.NeedsInput()).To(BeTrue())
		second := r.RequestState
		m.Stop(30 * time.Second)
		once("resolve", name, "--committed", "--external-id", effectsFor(ns)[1].ID, "--reason", "found it", "-n", ns)
		r = call(args, retry, second)
		show("an answer after a person decided", r)
		Expect(text(r)).To(ContainSubstring("meanwhile; nothing was recorded"))
		Expect(jsonpath(ns, "seo/"+name, "{.spec.resolution.action}")).To(Equal("MarkCommitted"), "the person's stands")

		By("Once again: the person's decision applied, no third attempt")
		startManager(ns, manager{holder: "mcp-answer-late-2"})
		Eventually(func() string { return jsonpath(ns, "seo/"+name, "{.status.state}") }, time.Minute).Should(Equal("Committed"))
		Expect(jsonpath(ns, "seo/"+name, "{.status.attempts}")).To(Equal("2"))
		Expect(effectsFor(ns)).To(HaveLen(2), "one per attempt a person licensed; the host's stale answers made none")
	})

	It("records a saga's approval only for this call's saga, and nothing for a decline", func() {
		ns := newNamespace("mcp-answer-saga")
		startManager(ns, manager{holder: "mcp-answer-saga"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("approver"))
		apply(ns, resolverRBAC("approver"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		call := drivingHost(ctx, url, serviceAccountToken(ns, "approver"), "once.saga.run")
		saga := func(amount int) map[string]any {
			return map[string]any{"idempotencyKey": "payout-run-7", "steps": []any{
				map[string]any{"name": "pay", "toolRef": map[string]any{"name": "payments"}, "operation": "charge.create",
					"parameters": map[string]any{"amount": amount, "currency": "eur"}, "requiresApproval": true,
					"irreversible": true},
			}}
		}
		approve := &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "reason": "within budget"}}

		By("the question names the step's tool, operation and parameters")
		r := call(saga(100), nil, "")
		Expect(r.NeedsInput()).To(BeTrue())
		asked := r.InputRequests["once.dev/decision"].(*mcp.ElicitParams).Message
		Expect(asked).To(ContainSubstring(`charge.create of Tool payments, with {"amount":100,"currency":"eur"}`))
		state := r.RequestState
		sagas := strings.Fields(kubectl("", "get", "saga", "-n", ns, "-o", "jsonpath={.items[*].metadata.name}"))
		Expect(sagas).To(HaveLen(1))
		name := sagas[0]
		approvals := func() string { return jsonpath(ns, "saga/"+name, "{.spec.approvals}") }

		By("the approval on a call with the same key and another amount: nothing recorded")
		r = call(saga(99999), approve, state)
		show("an approval on a call with other arguments", r)
		Expect(text(r)).To(ContainSubstring("asked about another request"))
		Expect(approvals()).To(BeEmpty())

		By("a decline: nothing recorded, and the answer says so")
		r = call(saga(100), &mcp.ElicitResult{Action: "decline"}, state)
		Expect(text(r)).To(ContainSubstring("The user declined to decide"))
		Expect(approvals()).To(BeEmpty())
		Expect(effectsFor(ns)).To(BeEmpty(), "nothing runs before an approval")

		By("the approval on this call's own saga: recorded, and the step runs once")
		r = call(saga(100), approve, state)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(effectsFor(ns)).To(HaveLen(1))
	})
})
