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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// partitionProxy forwards TCP connections to a gateway until Partition,
// after which it forwards nothing and closes nothing: what a client sees
// when the network to the gateway's node is lost, or the node is gone
// without a word (no FIN, no RST; every byte in either direction is lost).
// Unlike a real loss, the proxy's own kernel still acknowledges what the
// client sends, so a TCP keep-alive could not tell either: only a timer of
// the client's own can.
type partitionProxy struct {
	l       net.Listener
	to      string
	cut     atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	stopped chan struct{}
}

func startPartitionProxy(to string) *partitionProxy {
	GinkgoHelper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	p := &partitionProxy{l: l, to: to, stopped: make(chan struct{})}
	go p.serve()
	DeferCleanup(p.close)
	return p
}

func (p *partitionProxy) addr() string { return p.l.Addr().String() }

// Partition stops all forwarding, on open connections and new ones.
func (p *partitionProxy) Partition() { p.cut.Store(true) }

func (p *partitionProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.track(c)
		if p.cut.Load() {
			continue // accepted and never answered
		}
		up, err := net.Dial("tcp", p.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.track(up)
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies from src to dst until the partition, then drops what
// arrives; it closes dst when src ends before the partition.
func (p *partitionProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !p.cut.Load() {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *partitionProxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *partitionProxy) close() {
	_ = p.l.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// callOutcome is how a client's call ended, and when.
type callOutcome struct {
	at     time.Time
	err    string
	result map[string]any
	// asked counts the questions the gateway put to the host's user.
	asked int
}

// hostIdleTimeout is what docs/mcp.md tells a host to set where the
// defaults do not suffice: give up on a call after this long without a word
// from the gateway (its keep-alives come every mcpgateway.KeepAliveInterval).
const hostIdleTimeout = 10 * time.Second

// How a host sets its client.
const (
	// defaults: the SDK's defaults, no progress asked.
	defaults = "defaults"
	// idleTimeout: progress asked, and the call given up after
	// hostIdleTimeout without a word, as docs/mcp.md tells a host.
	idleTimeout = "idle timeout"
	// elicits: the SDK's defaults, with the elicitation capability; its
	// user accepts every question with a decision that the effect happened.
	elicits = "elicitation"
)

// The protocol versions the official SDKs' clients negotiate with the
// gateway, with their defaults: the TypeScript SDK's v1 package (1.32.2,
// test/mcpts/package.json), and the Go SDK's (v1.8.0, go.mod), which the
// gateway speaks too. mcp_clients_test.go runs the TypeScript SDK's v2
// client as well.
const (
	tsProtocolVersion = "2025-11-25"
	goProtocolVersion = "2026-07-28"
)

// tsCall runs one tools/call through the official TypeScript SDK's client
// (test/mcpts/call-tool.mjs), set as settings says, and sends its outcome
// when the call ends. The script's lines go to the spec's output.
func tsCall(url, token, tool string, args map[string]any, settings string) <-chan callOutcome {
	GinkgoHelper()
	req := map[string]any{"url": url, "tool": tool, "arguments": args}
	if settings == idleTimeout {
		// The SDK's own reset of a request's timeout on progress.
		req["host"] = map[string]any{"progress": true, "timeoutMs": hostIdleTimeout.Milliseconds(),
			"resetTimeoutOnProgress": true}
	}
	if settings == elicits {
		req["host"] = map[string]any{"elicitation": true, "answer": map[string]any{"decision": "happened",
			"reason": "the user says so"}}
	}
	b, err := json.Marshal(req)
	Expect(err).NotTo(HaveOccurred())
	cmd := exec.Command("node", filepath.Join(root, "test", "mcpts", "call-tool.mjs"), string(b))
	cmd.Env = append(os.Environ(), "MCP_TOKEN="+token)
	cmd.Stderr = GinkgoWriter
	out, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed())
	DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	done := make(chan callOutcome, 1)
	connected := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		asked := 0
		for s.Scan() {
			_, _ = fmt.Fprintf(GinkgoWriter, "ts client: %s\n", s.Text())
			var line struct {
				Event           string         `json:"event"`
				Message         string         `json:"message"`
				ProtocolVersion string         `json:"protocolVersion"`
				Result          map[string]any `json:"result"`
			}
			if json.Unmarshal(s.Bytes(), &line) != nil {
				continue
			}
			switch line.Event {
			case "connected":
				connected <- line.ProtocolVersion
			case "asked":
				asked++
			case "result":
				done <- callOutcome{at: time.Now(), result: line.Result, asked: asked}
				return
			case "error":
				done <- callOutcome{at: time.Now(), err: line.Message, asked: asked}
				return
			}
		}
		_, _ = io.Copy(io.Discard, out)
		done <- callOutcome{at: time.Now(), err: "the TypeScript client ended without an outcome"}
	}()
	var version string
	Eventually(connected, time.Minute).Should(Receive(&version))
	AddReportEntry("protocol version the TypeScript SDK client negotiated", version)
	Expect(version).To(Equal(tsProtocolVersion))
	return done
}

// goCall runs one tools/call through the official Go SDK's client, set as
// settings says (its defaults set no deadline; the SDK has no timeout that
// progress resets, so the idle timeout is the host's few lines: a timer
// that each progress notification resets, and that cancels the call), and
// sends its outcome when the call ends.
func goCall(url, token, tool string, args map[string]any, settings string) <-chan callOutcome {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	heard := func() {}
	opts := &mcp.ClientOptions{}
	if settings == idleTimeout {
		watchdog := time.AfterFunc(hostIdleTimeout, cancel)
		heard = func() { watchdog.Reset(hostIdleTimeout) }
	}
	if settings != defaults {
		opts.ProgressNotificationHandler = func(context.Context, *mcp.ProgressNotificationClientRequest) { heard() }
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "once-e2e-go", Version: "v0.0.1"}, opts)
	connect, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	s, err := c.Connect(connect, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearerTransport{token: token}}}, nil)
	Expect(err).NotTo(HaveOccurred())
	// Close waits for a call in flight: end it first.
	DeferCleanup(func() { cancel(); _ = s.Close() })
	AddReportEntry("protocol version the Go SDK client negotiated", s.InitializeResult().ProtocolVersion)
	Expect(s.InitializeResult().ProtocolVersion).To(Equal(goProtocolVersion))
	p := &mcp.CallToolParams{Name: tool, Arguments: args}
	if settings != defaults {
		p.SetProgressToken("hang-1")
		heard()
	}
	done := make(chan callOutcome, 1)
	go func() {
		r, err := s.CallTool(ctx, p)
		o := callOutcome{at: time.Now()}
		switch {
		case settings == idleTimeout && errors.Is(ctx.Err(), context.Canceled) && err != nil:
			o.err = fmt.Sprintf("no word from the gateway for %s: %v", hostIdleTimeout, err)
		case err != nil:
			o.err = err.Error()
		default:
			b, _ := json.Marshal(r.StructuredContent)
			_ = json.Unmarshal(b, &o.result)
		}
		_, _ = fmt.Fprintf(GinkgoWriter, "go client: %+v\n", o)
		done <- o
	}()
	return done
}

var _ = Describe("An MCP client whose gateway dies mid-call", func() {
	const tool = "payments__charge.create"

	// The tool works for 45 s before it commits: long enough for the call
	// to outlive the host's idle timeout while the gateway lives, for the
	// gateway to die, and for the call re-issued elsewhere to find the
	// operation still running.
	const toolWork = 45 * time.Second
	// liveFor is how long the call waits, its gateway alive, before the
	// gateway dies: longer than hostIdleTimeout, so that a host that gives
	// up on a silent gateway does not give up on a working one.
	const liveFor = hostIdleTimeout + 5*time.Second
	// learnWithin bounds how long after the death the client must know: a
	// bound that holds on a loaded 2-core machine. Without keep-alives a
	// host could set no idle timeout (it gave up on a live call after
	// 10 s), and the SDKs' defaults learned of a silent gateway after 60 s
	// (TypeScript) or never (Go).
	const learnWithin = 15 * time.Second

	DescribeTable("learns within seconds, and the call re-issued to another replica answers from the operation, one effect",
		func(client, settings, death string) {
			ns := newNamespace("mcp-hang-" + client + "-" + death)
			startManager(ns, manager{holder: "mcp-hang"})
			faults(ns, sandbox.FaultRule{Method: "POST", Fault: fmt.Sprintf("%s=%s", sandbox.FaultDelayBeforeCommit, toolWork),
				Count: 1})
			apply(ns, mcpToolYAML("payments", "90s"))
			apply(ns, agentRBAC("agent"))
			token := serviceAccountToken(ns, "agent")
			addr1, err := harness.FreeAddr()
			Expect(err).NotTo(HaveOccurred())
			gw1, url1 := startGateway(ns, addr1, "gateway-1")
			// The second replica answers at once that the operation still
			// runs, rather than waiting with the caller.
			addr2, err := harness.FreeAddr()
			Expect(err).NotTo(HaveOccurred())
			gw2, url2, err := cp.StartGateway(addr2, logFile(ns+"-gateway-2"), "--namespace", ns, "--call-timeout=3s")
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { gw2.Stop(10 * time.Second) })

			url := url1
			var proxy *partitionProxy
			if death == "partition" {
				proxy = startPartitionProxy(addr1)
				url = "http://" + proxy.addr() + "/mcp"
			}
			args := map[string]any{"amount": 700, "currency": "eur", "idempotencyKey": "order-hang"}
			var outcome <-chan callOutcome
			if client == "ts" {
				outcome = tsCall(url, token, tool, args, settings)
			} else {
				outcome = goCall(url, token, tool, args, settings)
			}
			start := time.Now()

			By("the call waiting on the working tool, its gateway alive")
			var op string
			Eventually(func() string {
				names := mcpOperations(ns)
				if len(names) != 1 {
					return ""
				}
				op = names[0]
				return jsonpath(ns, "seo/"+op, "{.status.state}")
			}).Should(Equal("Started"))
			Consistently(outcome, time.Until(start.Add(liveFor))).ShouldNot(Receive())

			By("the gateway dying: " + death)
			died := time.Now()
			switch death {
			case "kill":
				gw1.Kill()
			case "freeze":
				Expect(syscall.Kill(gw1.Pid(), syscall.SIGSTOP)).To(Succeed())
				DeferCleanup(func() { _ = syscall.Kill(gw1.Pid(), syscall.SIGCONT) })
			default:
				proxy.Partition()
			}
			var o callOutcome
			Eventually(outcome, 90*time.Second).Should(Receive(&o), "no end of the call 90 s after the death")
			learned := o.at.Sub(died)
			AddReportEntry(fmt.Sprintf("%s client (%s), %s: the call's end", client, settings, death),
				fmt.Sprintf("%.1f s after the death, %.1f s into the call: %s", learned.Seconds(),
					o.at.Sub(start).Seconds(), o.err))
			Expect(o.err).NotTo(BeEmpty(), "the call answered although its gateway died")
			Expect(learned).To(BeNumerically("<", learnWithin))
			Expect(jsonpath(ns, "seo/"+op, "{.status.state}")).To(Equal("Started"))

			By("re-issuing the call with the same key to the second replica: the operation still runs")
			b := connectAgent(url2, token)
			r, err := b.call(tool, args)
			Expect(err).NotTo(HaveOccurred())
			show("the call re-issued to another replica while its operation runs", r)
			Expect(r.IsError).To(BeTrue())
			Expect(text(r)).To(HavePrefix("Pending: "))
			Expect(text(r)).To(ContainSubstring("same idempotency key"))
			Expect(structured(r)["operation"]).To(Equal(op))
			AddReportEntry(fmt.Sprintf("%s client (%s), %s: the re-issued call while the operation runs", client, settings, death), text(r))
			Expect(mcpOperations(ns)).To(Equal([]string{op}))

			By("re-issuing it after the tool committed: the outcome, replayed")
			waitFor(ns, "seo/"+op, "jsonpath={.status.state}=Committed")
			r, err = b.call(tool, args)
			Expect(err).NotTo(HaveOccurred())
			show("the call re-issued to another replica after its operation ended", r)
			Expect(r.IsError).To(BeFalse(), text(r))
			sc := structured(r)
			Expect(sc["state"]).To(Equal("Committed"))
			Expect(sc["replayed"]).To(BeTrue())
			Expect(sc["operation"]).To(Equal(op))
			AddReportEntry(fmt.Sprintf("%s client (%s), %s: the re-issued call after the operation ended", client, settings, death), text(r))

			By("counting the tool's effects: exactly one")
			effects := effectsFor(ns)
			AddReportEntry(fmt.Sprintf("%s client (%s), %s: the tool's effects", client, settings, death), len(effects))
			Expect(effects).To(HaveLen(1))
			Expect(sc["externalObjectID"]).To(Equal(effects[0].ID))
			Expect(mcpOperations(ns)).To(Equal([]string{op}))
		},
		Entry("the TypeScript SDK's client with its defaults; the gateway killed (SIGKILL: a crash, an OOM kill)",
			"ts", defaults, "kill"),
		Entry("the TypeScript SDK's client with an idle timeout; the gateway killed", "ts", idleTimeout, "kill"),
		Entry("the TypeScript SDK's client with an idle timeout; the network to the gateway lost "+
			"(no FIN: a node or network loss)", "ts", idleTimeout, "partition"),
		Entry("the Go SDK's client with its defaults; the gateway killed", "go", defaults, "kill"),
		Entry("the Go SDK's client with an idle timeout; the gateway killed", "go", idleTimeout, "kill"),
		Entry("the Go SDK's client with an idle timeout; the network to the gateway lost", "go", idleTimeout, "partition"),
		// SIGSTOP: the process frozen (a paused container or VM, a node
		// that stopped scheduling it) while its kernel keeps the
		// connections open.
		Entry("the TypeScript SDK's client with an idle timeout; the gateway frozen (SIGSTOP)", "ts", idleTimeout, "freeze"),
		Entry("the Go SDK's client with an idle timeout; the gateway frozen (SIGSTOP)", "go", idleTimeout, "freeze"),
	)
})
