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
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
)

// initializeBody is an MCP initialize request, as a client's first POST.
const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"curl","version":"0"}}}`

// postMCP posts an initialize request with token (none if empty) and
// returns the status and the WWW-Authenticate header.
func postMCP(c *http.Client, endpoint, token string) (int, string) {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(initializeBody))
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// tokenReviews is how many TokenReviews the API server has answered, from
// its own metrics.
func tokenReviews() int {
	GinkgoHelper()
	n := 0
	for line := range strings.SplitSeq(kubectl("", "get", "--raw", "/metrics"), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="tokenreviews"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		Expect(err).NotTo(HaveOccurred())
		n += int(v)
	}
	return n
}

// startHTTPSGateway runs bin/once-mcp for ns over HTTPS with a certificate
// of the suite's CA, as the gateway's own ServiceAccount, naming the
// suite's OIDC issuer as its authorization server.
func startHTTPSGateway(ns string) string {
	GinkgoHelper()
	certFile, keyFile, err := ca.issue(workDir, ns+"-gateway")
	Expect(err).NotTo(HaveOccurred())
	addr, err := harness.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	p, endpoint, err := cp.StartGateway(addr, logFile(ns+"-gateway"), "--kubeconfig", gatewayKubeconfig(),
		"--namespace", ns, "--tls-cert-file", certFile, "--tls-key-file", keyFile,
		"--authorization-server", issuer.URL)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { p.Stop(10 * time.Second) })
	Expect(endpoint).To(HavePrefix("https://"))
	return endpoint
}

// connectHTTPS connects an agent of the Go SDK over HTTPS with token.
func connectHTTPS(endpoint, token string) *mcp.ClientSession {
	GinkgoHelper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "v0.0.1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := ca.client().Transport
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint,
		HTTPClient: &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+token)
			return base.RoundTrip(r)
		})}}, nil)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = s.Close() })
	return s
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

var _ = Describe("The MCP gateway's authorization", Ordered, func() {
	const tool = "payments__charge.create"
	var ns, endpoint, metadataURL string

	BeforeAll(func() {
		ns = newNamespace("mcp-auth")
		startManager(ns, manager{holder: "mcp-auth"})
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		endpoint = startHTTPSGateway(ns)
		u, err := url.Parse(endpoint)
		Expect(err).NotTo(HaveOccurred())
		metadataURL = u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource" + u.Path
	})

	It("serves its protected-resource metadata, naming the issuer the API server trusts", func() {
		effectsBefore := len(effectsFor(ns))
		for _, path := range []string{metadataURL, strings.TrimSuffix(metadataURL, "/mcp")} {
			resp, err := ca.client().Get(path)
			Expect(err).NotTo(HaveOccurred())
			var md map[string]any
			Expect(json.NewDecoder(resp.Body).Decode(&md)).To(Succeed())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusOK))
			_, _ = fmt.Fprintf(GinkgoWriter, "--- %s:\n%v\n", path, md)
			Expect(md).To(HaveKeyWithValue("resource", endpoint))
			Expect(md).To(HaveKeyWithValue("authorization_servers", ConsistOf(issuer.URL)))
			Expect(md).To(HaveKeyWithValue("bearer_methods_supported", ConsistOf("header")))
		}
		Expect(effectsFor(ns)).To(HaveLen(effectsBefore))
	})

	It("answers 401 naming the metadata to a missing, malformed, foreign, API-server or expired token, never 200", func() {
		c := ca.client()
		status, challenge := postMCP(c, endpoint, "")
		Expect(status).To(Equal(http.StatusUnauthorized))
		Expect(challenge).To(Equal(fmt.Sprintf(`Bearer resource_metadata=%q`, metadataURL)))

		kubectl("", "create", "serviceaccount", "agent", "-n", ns)
		invalid := map[string]string{
			"malformed":                    "not-a-token",
			"a JWT of no issuer":           "eyJhbGciOiJub25lIn0.eyJhdWQiOiJvbmNlLW1jcCJ9.",
			"for another audience":         strings.TrimSpace(kubectl("", "create", "token", "agent", "-n", ns, "--audience=other")),
			"for the API server":           strings.TrimSpace(kubectl("", "create", "token", "agent", "-n", ns)),
			"expired, of the trusted OIDC": issuer.mint("agent-app", gatewayAudience, -time.Minute),
			"of the trusted OIDC issuer, for another audience": issuer.mint("agent-app", "other", 10*time.Minute),
			// What an issuer that honours the resource parameter the
			// TypeScript SDK sends (RFC 8707) issues: aud is the
			// gateway's URL, not its --audience (docs/mcp.md).
			"of the trusted OIDC issuer, for the gateway's URL": issuer.mint("agent-app", endpoint, 10*time.Minute),
		}
		for what, token := range invalid {
			status, challenge := postMCP(c, endpoint, token)
			Expect(status).To(Equal(http.StatusUnauthorized), what)
			Expect(challenge).To(Equal(fmt.Sprintf(`Bearer error="invalid_token", resource_metadata=%q`, metadataURL)), what)
		}
		Expect(effectsFor(ns)).To(BeEmpty())
		Expect(mcpOperations(ns)).To(BeEmpty())
	})

	It("acts as the token's ServiceAccount: its calls commit once, and RBAC refuses what it may not do", func() {
		token := strings.TrimSpace(kubectl("", "create", "token", "agent", "-n", ns, "--audience="+gatewayAudience))
		s := connectHTTPS(endpoint, token)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		list, err := s.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Tools).To(HaveLen(1))
		args := map[string]any{"amount": 100, "currency": "eur", "idempotencyKey": "auth-1"}
		r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		Expect(err).NotTo(HaveOccurred())
		Expect(r.IsError).To(BeFalse(), text(r))
		Expect(structured(r)["state"]).To(Equal("Committed"))
		r, err = s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		Expect(err).NotTo(HaveOccurred())
		Expect(structured(r)["replayed"]).To(BeTrue())
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("a ServiceAccount without rights in the namespace: a tool error naming it, no effect")
		kubectl("", "create", "serviceaccount", "stranger", "-n", ns)
		stranger := strings.TrimSpace(kubectl("", "create", "token", "stranger", "-n", ns, "--audience="+gatewayAudience))
		r, err = connectHTTPS(endpoint, stranger).CallTool(ctx, &mcp.CallToolParams{Name: tool,
			Arguments: map[string]any{"amount": 100, "currency": "eur", "idempotencyKey": "auth-2"}})
		Expect(err).NotTo(HaveOccurred())
		show("a tools/call of a ServiceAccount RBAC refuses", r)
		Expect(r.IsError).To(BeTrue())
		Expect(text(r)).To(HavePrefix("Forbidden: "))
		Expect(text(r)).To(ContainSubstring(fmt.Sprintf(`"system:serviceaccount:%s:stranger" cannot`, ns)))
		Expect(effectsFor(ns)).To(HaveLen(1))
	})

	It("answers a bad token at once, without reading a body that never ends", func() {
		effectsBefore := len(effectsFor(ns))
		u, err := url.Parse(endpoint)
		Expect(err).NotTo(HaveOccurred())
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(ca.PEM)
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = conn.Close() }()
		// A client that streams a body it never finishes, as a slow or
		// hostile caller does: the gateway must not wait for it.
		_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer not-a-token\r\n"+
			"Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
			"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", u.Path, u.Host, len(`{"jsonrpc":"2.0",`), `{"jsonrpc":"2.0",`)
		Expect(err).NotTo(HaveOccurred())
		start := time.Now()
		Expect(conn.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		Expect(err).NotTo(HaveOccurred(), "no answer in 10 s: the gateway waits for the body")
		_, _ = fmt.Fprintf(GinkgoWriter, "answered %s after %s\n", resp.Status, time.Since(start))
		Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
		Expect(resp.Header.Get("WWW-Authenticate")).To(ContainSubstring(`error="invalid_token"`))
		Expect(effectsFor(ns)).To(HaveLen(effectsBefore))
	})

	It("makes one TokenReview for concurrent requests with one unknown token", func() {
		kubectl("", "create", "serviceaccount", "burst", "-n", ns)
		effectsBefore := len(effectsFor(ns))
		for what, tc := range map[string]struct {
			token string
			want  int
		}{
			"a valid token": {want: http.StatusOK,
				token: strings.TrimSpace(kubectl("", "create", "token", "burst", "-n", ns, "--audience="+gatewayAudience))},
			"an invalid one": {token: "never-seen-" + ns, want: http.StatusUnauthorized},
		} {
			before := tokenReviews()
			const n = 20
			var wg sync.WaitGroup
			statuses := make(chan int, n)
			for range n {
				wg.Go(func() {
					defer GinkgoRecover()
					status, _ := postMCP(ca.client(), endpoint, tc.token)
					statuses <- status
				})
			}
			wg.Wait()
			close(statuses)
			for s := range statuses {
				Expect(s).To(Equal(tc.want), what)
			}
			Expect(tokenReviews()-before).To(Equal(1), what)
		}
		Expect(effectsFor(ns)).To(HaveLen(effectsBefore))
	})

	It("finds that the API server's OIDC authenticator ignores a TokenReview's audiences, as docs/mcp.md says", func() {
		token := issuer.mint("agent-app", gatewayAudience, 10*time.Minute)
		review := func(audiences string) map[string]any {
			out := kubectl(fmt.Sprintf(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",`+
				`"spec":{"token":%q,"audiences":%s}}`, token, audiences), "create", "-o", "json", "-f", "-")
			var r map[string]any
			Expect(json.Unmarshal([]byte(out), &r)).To(Succeed())
			return r["status"].(map[string]any)
		}
		// The token's aud is the gateway's, and the JWT authenticator takes
		// that audience; the review for it is refused all the same, since
		// the authenticator answers only for the API server's audiences.
		Expect(review(`["` + gatewayAudience + `"]`)).NotTo(HaveKeyWithValue("authenticated", true))
		Expect(review(`[]`)).To(And(HaveKeyWithValue("authenticated", true),
			HaveKeyWithValue("user", HaveKeyWithValue("username", oidcUserPrefix+"agent-app"))))
	})

	It("lets a host of the official TypeScript SDK connect through OAuth: 401, discovery, a token, a call", func() {
		issuer.register("agent-app", "e2e-secret")
		kubectl("", "create", "rolebinding", "agent-app", "-n", ns, "--role=agent", "--user="+oidcUserPrefix+"agent-app")
		caFile := filepath.Join(workDir, "node-ca.pem")
		Expect(os.WriteFile(caFile, ca.PEM, 0o600)).To(Succeed())
		issuedBefore := issuer.Issued.Load()
		issuer.resourcesAsked()
		// An issuer's token is reviewed twice (for the gateway's audience,
		// refused by the audience-agnostic authenticator, then without
		// audiences, its aud claim deciding), then its verdict is kept.
		reviewsBefore := tokenReviews()
		effectsBefore := len(effectsFor(ns))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", filepath.Join(root, "test", "mcpts", "oauth-client-credentials.mjs"),
			endpoint, "agent-app", "e2e-secret", tool, `{"amount": 300, "currency": "usd", "idempotencyKey": "ts-oauth-1"}`)
		cmd.Env = append(os.Environ(), "NODE_EXTRA_CA_CERTS="+caFile)
		cmd.Stderr = GinkgoWriter
		out, err := cmd.Output()
		_, _ = fmt.Fprintf(GinkgoWriter, "--- the TypeScript SDK host printed:\n%s\n", out)
		Expect(err).NotTo(HaveOccurred())
		var got struct {
			Exchanges []struct {
				Method, URL     string
				Status          int
				WWWAuthenticate string
			}
			ProtocolVersion string
			Tools           []string
			Result          struct {
				IsError           bool
				StructuredContent map[string]any
			}
		}
		Expect(json.Unmarshal(out, &got)).To(Succeed())
		Expect(got.Exchanges).NotTo(BeEmpty())
		first := got.Exchanges[0]
		Expect(first.URL).To(Equal(endpoint))
		Expect(first.Status).To(Equal(http.StatusUnauthorized))
		Expect(first.WWWAuthenticate).To(ContainSubstring(fmt.Sprintf("resource_metadata=%q", metadataURL)))
		var urls []string
		for _, e := range got.Exchanges {
			urls = append(urls, fmt.Sprintf("%s %s %d", e.Method, e.URL, e.Status))
		}
		Expect(urls).To(ContainElement("GET " + metadataURL + " 200"))
		Expect(urls).To(ContainElement(HavePrefix("GET " + issuer.URL + "/.well-known/")))
		Expect(urls).To(ContainElement("POST " + issuer.URL + "/token 200"))
		Expect(issuer.Issued.Load() - issuedBefore).To(Equal(int64(1)))
		// RFC 8707: the SDK asks the issuer for a token for the resource
		// the gateway's metadata names, its public URL; this issuer
		// ignores it and issues its token for once-mcp (docs/mcp.md).
		Expect(issuer.resourcesAsked()).To(HaveExactElements(endpoint))
		Expect(tokenReviews() - reviewsBefore).To(Equal(2))
		_, _ = fmt.Fprintf(GinkgoWriter, "The TypeScript SDK negotiated protocol version %s\n", got.ProtocolVersion)
		Expect(got.ProtocolVersion).To(Equal(tsProtocolVersion))
		Expect(got.Tools).To(ContainElement(tool))
		Expect(got.Result.IsError).To(BeFalse())
		Expect(got.Result.StructuredContent).To(HaveKeyWithValue("state", "Committed"))
		Expect(effectsFor(ns)).To(HaveLen(effectsBefore + 1))
	})
})
