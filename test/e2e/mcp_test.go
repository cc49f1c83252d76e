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
	"io"
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

// mcpToolYAML is a Tool whose charge.create has a parameter schema, as
// agents see it; mode None, so that no second effect is ever prevented by
// the tool itself, only by Once and the gateway.
func mcpToolYAML(name, timeout string) string {
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: Tool
metadata:
  name: %s
spec:
  http:
    url: %s
  idempotency:
    mode: None
  timeout: %s
  operations:
  - name: charge.create
    method: POST
    path: /none/charges
    parametersSchema:
      type: object
      additionalProperties: false
      required: [amount, currency]
      properties:
        amount: {type: integer, minimum: 1, description: "Amount in cents"}
        currency: {type: string, enum: [eur, usd]}
    response:
      externalObjectID: response.body.id
`, name, sb.URL, timeout)
}

// agentRBAC lets a service account list tools and create and read
// operations in a namespace: what an agent needs, and all the gateway uses
// on its behalf.
func agentRBAC(sa string) string {
	return roleFor(sa, sa, `- apiGroups: [effects.once.dev]
  resources: [sideeffectoperations]
  verbs: [create, get]
- apiGroups: [effects.once.dev]
  resources: [tools]
  verbs: [get, list]`)
}

// roleFor is a Role named name with rules (YAML list items), bound to the
// service account sa.
func roleFor(sa, name, rules string) string {
	return fmt.Sprintf(`apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: %[2]s
rules:
%[3]s
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: %[2]s
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: %[2]s
subjects:
- kind: ServiceAccount
  name: %[1]s
`, sa, name, rules)
}

// serviceAccountToken creates a service account and returns a token of
// it meant for the MCP gateway (TokenRequest with the gateway's audience),
// as a person would hand to an agent or to an ingress sender.
func serviceAccountToken(ns, sa string) string {
	GinkgoHelper()
	kubectl("", "create", "serviceaccount", sa, "-n", ns)
	return strings.TrimSpace(kubectl("", "create", "token", sa, "-n", ns, "--duration=1h", "--audience="+gatewayAudience))
}

// startGateway runs bin/once-mcp on addr for namespace ns, as its own
// ServiceAccount with the rights of config/mcp-gateway, and stops it when
// the test ends if it still runs.
func startGateway(ns, addr, logName string) (*harness.Process, string) {
	GinkgoHelper()
	p, url, err := cp.StartGateway(addr, logFile(ns+"-"+logName), "--namespace", ns, "--call-timeout=150s",
		"--kubeconfig", gatewayKubeconfig())
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { p.Stop(10 * time.Second) })
	return p, url
}

// bearerTransport sends a caller's token with every request, and the
// namespace it asks for, if any.
type bearerTransport struct{ token, namespace string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	if b.namespace != "" {
		r.Header.Set("Once-Namespace", b.namespace)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// agent is an MCP client of the official SDK, as an AI agent's host runs
// it, that records the progress notifications it receives.
type agent struct {
	session  *mcp.ClientSession
	mu       sync.Mutex
	progress []string
}

func connectAgent(url, token string) *agent {
	GinkgoHelper()
	return connectAgentIn(url, token, "")
}

// connectAgentIn connects an agent that asks for namespace ns.
func connectAgentIn(url, token, ns string) *agent {
	GinkgoHelper()
	a := &agent{}
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "v0.0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.progress = append(a.progress, req.Params.Message)
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token, namespace: ns}}}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = s.Close() })
	a.session = s
	return a
}

// call makes a tools/call with a progress token and returns its result.
func (a *agent) call(tool string, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	p.SetProgressToken(fmt.Sprintf("p-%d", time.Now().UnixNano()))
	return a.session.CallTool(ctx, p)
}

func (a *agent) progressSeen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.progress...)
}

// show prints what the client saw, as JSON, for the record.
func show(what string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	Expect(err).NotTo(HaveOccurred())
	_, _ = fmt.Fprintf(GinkgoWriter, "--- %s, as the MCP client saw it:\n%s\n", what, b)
}

// structured is a result's structured content as a map.
func structured(r *mcp.CallToolResult) map[string]any {
	GinkgoHelper()
	b, err := json.Marshal(r.StructuredContent)
	Expect(err).NotTo(HaveOccurred())
	var m map[string]any
	Expect(json.Unmarshal(b, &m)).To(Succeed())
	return m
}

func text(r *mcp.CallToolResult) string {
	GinkgoHelper()
	Expect(r.Content).NotTo(BeEmpty())
	t, ok := r.Content[0].(*mcp.TextContent)
	Expect(ok).To(BeTrue())
	return t.Text
}

// mcpOperations counts the operations the gateway made in a namespace.
func mcpOperations(ns string) []string {
	GinkgoHelper()
	return strings.Fields(kubectl("", "get", "seo", "-n", ns, "-l", "once.dev/via=mcp", "-o", "jsonpath={.items[*].metadata.name}"))
}

var _ = Describe("The MCP gateway", func() {
	const tool = "payments__charge.create"

	It("lists the caller's tools, commits a call once, replays a retry and refuses a mismatch", func() {
		ns := newNamespace("mcp-call")
		startManager(ns, manager{holder: "mcp-call"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		token := serviceAccountToken(ns, "agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, token)

		By("listing the tools: the operation, its schema with the key, and what Once guarantees")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := a.session.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		show("tools/list", list)
		Expect(list.Tools).To(HaveLen(1))
		t := list.Tools[0]
		Expect(t.Name).To(Equal(tool))
		Expect(t.Description).To(ContainSubstring("a person decides"))
		schema, _ := json.Marshal(t.InputSchema)
		Expect(string(schema)).To(ContainSubstring(`"required":["amount","currency","idempotencyKey"]`))
		Expect(string(schema)).To(ContainSubstring(`"amount":{"description":"Amount in cents","minimum":1,"type":"integer"}`))

		By("refusing a call without a key, with instructions, and making nothing")
		r, err := a.call(tool, map[string]any{"amount": 100, "currency": "eur"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("IdempotencyKeyRequired: "))
		Expect(text(r)).To(ContainSubstring(`"idempotencyKey"`))
		Expect(mcpOperations(ns)).To(BeEmpty())

		By("refusing arguments that break the schema before any operation exists")
		r, err = a.call(tool, map[string]any{"amount": 0, "currency": "eur", "idempotencyKey": "order-4711"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("InvalidArguments: "))
		Expect(text(r)).To(ContainSubstring("amount"))
		Expect(mcpOperations(ns)).To(BeEmpty())

		By("calling with a key: one operation, committed, with progress while it ran")
		args := map[string]any{"amount": 100, "currency": "eur", "idempotencyKey": "order-4711"}
		first, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("tools/call", first)
		Expect(first.IsError).To(BeFalse(), text(first))
		sc := structured(first)
		Expect(sc["state"]).To(Equal("Committed"))
		Expect(sc["replayed"]).To(BeFalse())
		Expect(sc["externalObjectID"]).NotTo(BeEmpty())
		Expect(a.progressSeen()).NotTo(BeEmpty())
		Expect(a.progressSeen()[0]).To(ContainSubstring("operation " + sc["operation"].(string) + " is "))
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("retrying the call with the same key: the same result, no second effect")
		again, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the retried tools/call", again)
		Expect(again.IsError).To(BeFalse(), text(again))
		sc2 := structured(again)
		Expect(sc2["replayed"]).To(BeTrue())
		Expect(sc2["operation"]).To(Equal(sc["operation"]))
		Expect(sc2["externalObjectID"]).To(Equal(sc["externalObjectID"]))
		Expect(sc2["result"]).To(Equal(sc["result"]))
		Expect(effectsFor(ns)).To(HaveLen(1))
		Expect(mcpOperations(ns)).To(HaveLen(1))

		By("the same key with other arguments: refused as a mismatch, no call made")
		r, err = a.call(tool, map[string]any{"amount": 200, "currency": "eur", "idempotencyKey": "order-4711"})
		Expect(err).NotTo(HaveOccurred())
		show("a tools/call with the same key and other arguments", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("IdempotencyParameterMismatch: "))
		Expect(effectsFor(ns)).To(HaveLen(1))
		Expect(mcpOperations(ns)).To(HaveLen(1))

		By("a retry is answered from the record even when the tool changed since")
		kubectl("", "patch", "-n", ns, "tool", "payments", "--type=json", "-p",
			`[{"op":"add","path":"/spec/operations/0/parametersSchema/properties/amount/maximum","value":50}]`)
		r, err = a.call(tool, map[string]any{"amount": 100, "currency": "eur", "idempotencyKey": "order-4712"})
		Expect(err).NotTo(HaveOccurred())
		Expect(text(r)).To(HavePrefix("InvalidArguments: "))
		again, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		Expect(again.IsError).To(BeFalse(), text(again))
		Expect(structured(again)["externalObjectID"]).To(Equal(sc["externalObjectID"]))
		kubectl("", "patch", "-n", ns, "tool", "payments", "--type=json", "-p",
			`[{"op":"remove","path":"/spec/operations/0/parametersSchema/properties/amount/maximum"}]`)

		By("scoping keys to the caller: another agent's same key is another request")
		kubectl("", "create", "rolebinding", "agent-2", "-n", ns, "--role=agent", "--serviceaccount="+ns+":agent-2")
		b := connectAgent(url, serviceAccountToken(ns, "agent-2"))
		r, err = b.call(tool, map[string]any{"amount": 200, "currency": "eur", "idempotencyKey": "order-4711"})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["replayed"]).To(BeFalse())
		Expect(effectsFor(ns)).To(HaveLen(2))
	})

	It("answers a call retried after the gateway was killed mid-call with the first call's outcome, one effect", func() {
		ns := newNamespace("mcp-kill")
		startManager(ns, manager{holder: "mcp-kill"})
		// The tool takes four seconds to commit: the gateway dies while
		// the first call waits for it.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDelayBeforeCommit + "=4s", Count: 1})
		apply(ns, mcpToolYAML("payments", "20s"))
		apply(ns, agentRBAC("agent"))
		token := serviceAccountToken(ns, "agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		gw, url := startGateway(ns, addr, "gateway-1")
		a := connectAgent(url, token)
		args := map[string]any{"amount": 300, "currency": "usd", "idempotencyKey": "invoice-17"}

		By("calling, and killing the gateway with kill -9 while the tool works")
		lost := make(chan error, 1)
		go func() {
			defer GinkgoRecover()
			_, err := a.call(tool, args)
			lost <- err
		}()
		Eventually(func() string {
			names := mcpOperations(ns)
			if len(names) != 1 {
				return ""
			}
			return jsonpath(ns, "seo/"+names[0], "{.status.state}")
		}).Should(Equal("Started"))
		gw.Kill()
		Eventually(lost, time.Minute).Should(Receive(HaveOccurred()))

		By("restarting the gateway and retrying the call with the same key")
		_, url = startGateway(ns, addr, "gateway-2")
		b := connectAgent(url, token)
		r, err := b.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("a tools/call retried after the gateway was killed", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		sc := structured(r)
		Expect(sc["state"]).To(Equal("Committed"))
		Expect(sc["replayed"]).To(BeTrue())
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1))
		Expect(sc["externalObjectID"]).To(Equal(effects[0].ID))
		Expect(mcpOperations(ns)).To(HaveLen(1))
	})

	It("answers NeedsReview when Once cannot tell, and the decided outcome after a person resolved it", func() {
		ns := newNamespace("mcp-review")
		startManager(ns, manager{holder: "mcp-review"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, serviceAccountToken(ns, "agent"))
		args := map[string]any{"amount": 500, "currency": "eur", "idempotencyKey": "payout-9"}

		By("calling a tool that commits and drops the answer: a person must decide")
		r, err := a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("a tools/call that needs a person's review", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("NeedsReview: "))
		Expect(text(r)).To(ContainSubstring("same idempotency key"))
		name := structured(r)["operation"].(string)
		Expect(jsonpath(ns, "seo/"+name, "{.status.state}")).To(Equal("NeedsReview"))

		By("asking again before anyone decided: the same answer, no second effect")
		r, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		Expect(text(r)).To(HavePrefix("NeedsReview: "))
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1))

		By("a person marks it committed; the same call returns the decided outcome")
		patch := fmt.Sprintf(`{"spec":{"resolution":{"action":"MarkCommitted","externalObjectID":%q,"by":"e2e"}}}`, effects[0].ID)
		kubectl("", "patch", "-n", ns, "seo", name, "--type", "merge", "-p", patch)
		waitFor(ns, "seo/"+name, "Ready")
		r, err = a.call(tool, args)
		Expect(err).NotTo(HaveOccurred())
		show("the same tools/call after the resolution", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		Expect(structured(r)["externalObjectID"]).To(Equal(effects[0].ID))
		Expect(effectsFor(ns)).To(HaveLen(1))
	})

	It("runs a saga as one tool call, with its steps' progress, and answers its retry from the record", func() {
		ns := newNamespace("mcp-saga")
		startManager(ns, manager{holder: "mcp-saga"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		apply(ns, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: saga-runner
rules:
- apiGroups: [effects.once.dev]
  resources: [sagas]
  verbs: [create, get]
`)
		kubectl("", "create", "rolebinding", "saga-runner", "-n", ns, "--role=saga-runner", "--serviceaccount="+ns+":agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, serviceAccountToken(ns, "agent"))

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := a.session.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		var names []string
		for _, t := range list.Tools {
			names = append(names, t.Name)
		}
		Expect(names).To(ConsistOf("once.saga.run", tool))

		args := map[string]any{"idempotencyKey": "checkout-1", "steps": []any{
			map[string]any{"name": "deposit", "toolRef": map[string]any{"name": "payments"}, "operation": "charge.create",
				"parameters": map[string]any{"amount": 100, "currency": "eur"}, "irreversible": true},
			map[string]any{"name": "balance", "toolRef": map[string]any{"name": "payments"}, "operation": "charge.create",
				"parameters": map[string]any{"amount": 900, "currency": "eur"}, "irreversible": true, "retryUntilDone": true},
		}}
		r, err := a.call("once.saga.run", args)
		Expect(err).NotTo(HaveOccurred())
		show("a saga's tools/call", r)
		Expect(r.IsError).To(BeFalse(), text(r))
		sc := structured(r)
		Expect(sc["state"]).To(Equal("Committed"))
		Expect(sc["replayed"]).To(BeFalse())
		Expect(sc["steps"]).To(HaveLen(2))
		Expect(a.progressSeen()).To(ContainElement(ContainSubstring("steps done")))
		Expect(effectsFor(ns)).To(HaveLen(2))

		r, err = a.call("once.saga.run", args)
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		again := structured(r)
		Expect(again["replayed"]).To(BeTrue())
		Expect(again["steps"]).To(Equal(sc["steps"]))
		Expect(effectsFor(ns)).To(HaveLen(2))
	})

	It("lets RBAC refuse a caller: no tools listed, and a call refused naming the verb and the resource", func() {
		ns := newNamespace("mcp-rbac")
		apply(ns, mcpToolYAML("payments", "10s"))
		// The stranger may read tools and operations, but not create
		// operations. (Without get, the gateway answers Forbidden naming
		// get: TestOperationExists.)
		apply(ns, `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: tool-reader
rules:
- apiGroups: [effects.once.dev]
  resources: [tools]
  verbs: [get, list]
- apiGroups: [effects.once.dev]
  resources: [sideeffectoperations]
  verbs: [get]
`)
		kubectl("", "create", "rolebinding", "stranger", "-n", ns, "--role=tool-reader", "--serviceaccount="+ns+":stranger")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")
		a := connectAgent(url, serviceAccountToken(ns, "stranger"))

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := a.session.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Tools).To(BeEmpty())

		By("the Once-Namespace header chooses the namespace, and RBAC decides there too")
		other := newNamespace("mcp-rbac-other")
		apply(other, mcpToolYAML("payments", "10s"))
		apply(other, agentRBAC("agent"))
		kubectl("", "create", "rolebinding", "visitor", "-n", other, "--role=agent", "--serviceaccount="+ns+":visitor")
		visitor := serviceAccountToken(ns, "visitor")
		Eventually(func() []string {
			l, err := connectAgentIn(url, visitor, other).session.ListTools(ctx, nil)
			if err != nil {
				return nil
			}
			var names []string
			for _, t := range l.Tools {
				names = append(names, t.Name)
			}
			return names
		}).Should(ConsistOf(tool))
		list, err = connectAgent(url, visitor).session.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Tools).To(BeEmpty())

		r, err := a.call(tool, map[string]any{"amount": 100, "currency": "eur", "idempotencyKey": "k"})
		Expect(err).NotTo(HaveOccurred())
		show("a tools/call RBAC refuses", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("Forbidden: "))
		Expect(text(r)).To(ContainSubstring(`cannot create resource "sideeffectoperations"`))
		Expect(kubectl("", "get", "seo", "-n", ns, "-o", "name")).To(BeEmpty())

		By("a request without a token never reaches MCP; a gateway without an issuer names no metadata, and says so")
		resp, err := http.Post(url, "application/json", strings.NewReader(`{}`))
		Expect(err).NotTo(HaveOccurred())
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
		Expect(resp.Header.Values("WWW-Authenticate")).To(Equal([]string{"Bearer"}))
		Expect(string(body)).To(ContainSubstring("names no authorization server"))
		Expect(string(body)).To(ContainSubstring("--audience once-mcp"))
		metadata := strings.Replace(url, "/mcp", "/.well-known/oauth-protected-resource/mcp", 1)
		resp, err = http.Get(metadata)
		Expect(err).NotTo(HaveOccurred())
		body, err = io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		_, _ = fmt.Fprintf(GinkgoWriter, "--- GET %s: %d\n%s", metadata, resp.StatusCode, body)
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
		Expect(string(body)).To(ContainSubstring("names no authorization server"))
	})
})
