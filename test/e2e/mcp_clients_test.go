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
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/mcpwire"
	"github.com/once-dev/once/test/sandbox"
)

// mcpClient is an official MCP client as a host runs it, and the protocol
// version it negotiates with the gateway.
type mcpClient struct {
	name    string
	version string
	// sdk is the TypeScript package test/mcpts/session.mjs runs ("v1",
	// "v2"); "" for the Go SDK, asked for version.
	sdk string
}

// The official clients: the TypeScript SDK's v1 package (1.32.2) and its
// v2 client (2.4.0, with versionNegotiation 'auto'), both pinned in
// test/mcpts/package.json, and the Go SDK of go.mod at each version it
// speaks with the gateway.
var (
	tsV1         = mcpClient{name: "TypeScript v1", version: "2025-11-25", sdk: "v1"}
	tsV2         = mcpClient{name: "TypeScript v2", version: "2026-07-28", sdk: "v2"}
	goSDK2025    = mcpClient{name: "Go SDK", version: "2025-11-25"}
	goSDK2026    = mcpClient{name: "Go SDK", version: "2026-07-28"}
	everyClient  = []mcpClient{tsV1, tsV2, goSDK2025, goSDK2026}
	askingClient = []mcpClient{tsV2, goSDK2026}
)

// step is one step of a client's session: a tools/list, or a tools/call.
type step struct {
	list bool
	tool string
	args map[string]any
}

// stepOutcome is what the client's host saw of a step.
type stepOutcome struct {
	tools   []string
	isError bool
	text    string
	sc      map[string]any
	err     string
}

// session runs steps in one session of client c, as the caller of token;
// answer plays the host's user when the gateway asks. It fails the spec
// unless c negotiates its version. The Go SDK's results are checked as
// the gateway wrote them (checkWire): that client takes results the
// spec does not allow.
func session(c mcpClient, url, token string, steps []step,
	answer func(*mcp.ElicitParams) *mcp.ElicitResult) (outcomes []stepOutcome, asked int) {
	GinkgoHelper()
	if c.sdk != "" {
		return tsSession(c, url, token, steps, answer)
	}
	var mu sync.Mutex
	opts := &mcp.ClientOptions{}
	if answer != nil {
		opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			mu.Lock()
			asked++
			mu.Unlock()
			return answer(req.Params), nil
		}
	}
	w := &mcpwire.Wire{Token: token}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s, err := mcp.NewClient(&mcp.Implementation{Name: "once-e2e-go", Version: "v0.0.1"}, opts).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: w}},
		&mcp.ClientSessionOptions{ProtocolVersion: c.version})
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = s.Close() }()
	Expect(s.InitializeResult().ProtocolVersion).To(Equal(c.version))
	for _, st := range steps {
		var o stepOutcome
		if st.list {
			l, err := s.ListTools(ctx, nil)
			Expect(err).NotTo(HaveOccurred())
			for _, t := range l.Tools {
				o.tools = append(o.tools, t.Name)
			}
		} else {
			r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: st.tool, Arguments: st.args})
			Expect(err).NotTo(HaveOccurred())
			o.isError, o.text, o.sc = r.IsError, text(r), structured(r)
		}
		outcomes = append(outcomes, o)
	}
	checkResults(w, c.version)
	return outcomes, asked
}

// tsSession is session for the TypeScript clients
// (test/mcpts/session.mjs). The script asks the user's answer of a
// loopback server that answer plays.
func tsSession(c mcpClient, url, token string, steps []step,
	answer func(*mcp.ElicitParams) *mcp.ElicitResult) (outcomes []stepOutcome, asked int) {
	GinkgoHelper()
	var tsSteps []map[string]any
	for _, st := range steps {
		if st.list {
			tsSteps = append(tsSteps, map[string]any{"list": true})
		} else {
			tsSteps = append(tsSteps, map[string]any{"tool": st.tool, "arguments": st.args})
		}
	}
	req := map[string]any{"url": url, "sdk": c.sdk, "steps": tsSteps}
	if answer != nil {
		user := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer GinkgoRecover()
			var p mcp.ElicitParams
			Expect(json.NewDecoder(r.Body).Decode(&p)).To(Succeed())
			Expect(json.NewEncoder(w).Encode(answer(&p))).To(Succeed())
		}))
		defer user.Close()
		req["answerURL"] = user.URL
	}
	b, err := json.Marshal(req)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "test", "mcpts", "session.mjs"), string(b))
	cmd.Env = append(os.Environ(), "MCP_TOKEN="+token)
	cmd.Stderr = GinkgoWriter
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred())
	s := bufio.NewScanner(bytes.NewReader(out))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	version := ""
	for s.Scan() {
		_, _ = fmt.Fprintf(GinkgoWriter, "%s client: %s\n", c.name, s.Text())
		var line struct {
			Event           string   `json:"event"`
			Message         string   `json:"message"`
			ProtocolVersion string   `json:"protocolVersion"`
			Tools           []string `json:"tools"`
			Result          struct {
				IsError           bool             `json:"isError"`
				Content           []map[string]any `json:"content"`
				StructuredContent map[string]any   `json:"structuredContent"`
			} `json:"result"`
		}
		Expect(json.Unmarshal(s.Bytes(), &line)).To(Succeed())
		switch line.Event {
		case "connected":
			version = line.ProtocolVersion
		case "asked":
			asked++
		case "listed":
			outcomes = append(outcomes, stepOutcome{tools: line.Tools})
		case "result":
			o := stepOutcome{isError: line.Result.IsError, sc: line.Result.StructuredContent}
			if len(line.Result.Content) > 0 {
				o.text, _ = line.Result.Content[0]["text"].(string)
			}
			outcomes = append(outcomes, o)
		case "error":
			outcomes = append(outcomes, stepOutcome{err: line.Message})
		}
	}
	AddReportEntry(c.name+" negotiated", version)
	Expect(version).To(Equal(c.version))
	for _, o := range outcomes {
		Expect(o.err).To(BeEmpty(), "the %s client refused an answer of the gateway", c.name)
	}
	Expect(outcomes).To(HaveLen(len(steps)))
	return outcomes, asked
}

// checkResults says whether every result recorded is of protocol version: from
// 2026-07-28 on, each carries a resultType, an input_required one no
// content, and a tools/list one its cacheScope and ttlMs; before, none
// carries a resultType.
func checkResults(w *mcpwire.Wire, version string) {
	GinkgoHelper()
	results := w.Results()
	Expect(results).NotTo(BeEmpty())
	for _, r := range results {
		kind := string(r.Fields["resultType"])
		what := fmt.Sprintf("the %s result at %s: %s", r.Method, version, r.Fields)
		if version < "2026-07-28" {
			Expect(kind).To(BeEmpty(), what)
		} else {
			Expect(kind).To(BeElementOf(`"complete"`, `"input_required"`), what)
		}
		if kind == `"input_required"` {
			Expect(r.Fields).NotTo(HaveKey("content"), what)
			Expect(r.Fields).To(HaveKey("inputRequests"), what)
		}
		if r.Method == "tools/list" {
			Expect(string(r.Fields["cacheScope"])).To(Equal(`"private"`), what)
			Expect(string(r.Fields["ttlMs"])).To(Equal("0"), what)
		}
	}
}

var _ = Describe("The official MCP clients", func() {
	const tool = "payments__charge.create"

	It("list, call and replay through the gateway at each protocol version they negotiate", func() {
		ns := newNamespace("mcp-clients")
		startManager(ns, manager{holder: "mcp-clients"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		token := serviceAccountToken(ns, "agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")

		for i, c := range everyClient {
			By(fmt.Sprintf("the %s client at %s: a list, a call and its retry", c.name, c.version))
			args := map[string]any{"amount": 100 + i, "currency": "eur", "idempotencyKey": fmt.Sprintf("order-%d", i)}
			out, _ := session(c, url, token, []step{{list: true}, {tool: tool, args: args}, {tool: tool, args: args}}, nil)
			Expect(out[0].tools).To(ConsistOf(tool))
			first, again := out[1], out[2]
			Expect(first.isError).To(BeFalse(), first.text)
			Expect(first.sc).To(HaveKeyWithValue("state", "Committed"))
			Expect(first.sc).To(HaveKeyWithValue("replayed", false))
			Expect(again.isError).To(BeFalse(), again.text)
			Expect(again.sc).To(HaveKeyWithValue("replayed", true))
			Expect(again.sc["operation"]).To(Equal(first.sc["operation"]))
			Expect(again.sc["externalObjectID"]).To(Equal(first.sc["externalObjectID"]))
			Expect(effectsFor(ns)).To(HaveLen(i+1), "one effect per key, whatever the client")
		}
		Expect(mcpOperations(ns)).To(HaveLen(len(everyClient)))
	})

	It("carry a decision and a saga's approval of the host's user at 2026-07-28", func() {
		ns := newNamespace("mcp-clients-ask")
		startManager(ns, manager{holder: "mcp-clients-ask"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("resolver"))
		apply(ns, resolverRBAC("resolver"))
		token := serviceAccountToken(ns, "resolver")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		_, url := startGateway(ns, addr, "gateway")

		for i, c := range askingClient {
			By(fmt.Sprintf("the %s client at %s: a call in NeedsReview that the user decides", c.name, c.version))
			faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
			// The user looks the charge up at the tool: the newest.
			happened := func(p *mcp.ElicitParams) *mcp.ElicitResult {
				Expect(p.Message).To(ContainSubstring("Once cannot tell whether"))
				effects := effectsFor(ns)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "happened",
					"externalObjectID": effects[len(effects)-1].ID, "reason": "the charge is in the dashboard"}}
			}
			args := map[string]any{"amount": 700 + i, "currency": "eur", "idempotencyKey": fmt.Sprintf("payout-%d", i)}
			out, asked := session(c, url, token, []step{{tool: tool, args: args}}, happened)
			r := out[0]
			Expect(asked).To(Equal(1))
			Expect(r.isError).To(BeFalse(), r.text)
			Expect(r.sc).To(HaveKeyWithValue("state", "Committed"))
			effects := effectsFor(ns)
			Expect(effects).To(HaveLen(2*i+1), "the call's one effect; the decision made none")
			Expect(r.sc["externalObjectID"]).To(Equal(effects[len(effects)-1].ID))
			op := r.sc["operation"].(string)
			Expect(jsonpath(ns, "seo/"+op, "{.status.resolution.action}")).To(Equal("MarkCommitted"))
			Expect(jsonpath(ns, "seo/"+op, "{.status.resolution.user}")).To(Equal("system:serviceaccount:" + ns + ":resolver"))

			By(fmt.Sprintf("the %s client at %s: a saga whose step the user approves", c.name, c.version))
			approve := func(p *mcp.ElicitParams) *mcp.ElicitResult {
				Expect(p.Message).To(ContainSubstring("waits for approval of step pay"))
				Expect(effectsFor(ns)).To(HaveLen(2*i+1), "nothing runs before the approval")
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": true, "reason": "within budget"}}
			}
			saga := map[string]any{"idempotencyKey": fmt.Sprintf("payout-run-%d", i), "steps": []any{
				map[string]any{"name": "pay", "toolRef": map[string]any{"name": "payments"}, "operation": "charge.create",
					"parameters": map[string]any{"amount": 100 + i, "currency": "eur"}, "requiresApproval": true,
					"irreversible": true},
			}}
			out, asked = session(c, url, token, []step{{tool: "once.saga.run", args: saga}}, approve)
			r = out[0]
			Expect(asked).To(Equal(1))
			Expect(r.isError).To(BeFalse(), r.text)
			Expect(r.sc).To(HaveKeyWithValue("state", "Committed"))
			name := r.sc["saga"].(string)
			Expect(jsonpath(ns, "saga/"+name, "{.spec.approvals[0].user}")).To(Equal("system:serviceaccount:" + ns + ":resolver"))
			Expect(effectsFor(ns)).To(HaveLen(2*i + 2))
		}
	})
})
