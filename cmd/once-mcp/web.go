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

package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/once-dev/once/internal/mcpgateway"
)

// webFlags are the flags of the gateway as an OAuth 2.1 protected resource
// over HTTPS (docs/mcp.md, "Identity and RBAC").
type webFlags struct {
	certFile, keyFile    string
	insecureHTTP         bool
	audience             string
	publicURL            string
	authorizationServers []string
}

func (w *webFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&w.certFile, "tls-cert-file", "", "the certificate (PEM, with its chain) the gateway serves HTTPS with")
	fs.StringVar(&w.keyFile, "tls-key-file", "", "the private key (PEM) of --tls-cert-file")
	fs.BoolVar(&w.insecureHTTP, "insecure-http", false, "serve plain HTTP instead of HTTPS; only on a loopback "+
		"address (the MCP authorization spec requires HTTPS except for localhost)")
	fs.StringVar(&w.audience, "audience", "", "the audience a caller's or ingress sender's token must be meant "+
		"for (checked by a TokenReview); by default --public-url, or "+mcpgateway.DefaultAudience+" without it")
	fs.StringVar(&w.publicURL, "public-url", "", "the gateway's MCP endpoint as clients reach it, the resource "+
		"of its protected-resource metadata; by default https://ADDR/mcp of --listen")
	fs.Func("authorization-server", "the URL of an OIDC issuer the API server trusts for --audience, named "+
		"in the protected-resource metadata (repeat for several); without one, the gateway serves no metadata "+
		"and hosts send Kubernetes tokens for --audience", func(s string) error {
		w.authorizationServers = append(w.authorizationServers, s)
		return nil
	})
}

// tokenAudience is the audience callers' and senders' tokens must be
// meant for: --audience; else --public-url, the resource the metadata
// names, which is this deployment's alone (RFC 8707); else once-mcp.
func (w *webFlags) tokenAudience() string {
	if w.audience != "" {
		return w.audience
	}
	if w.publicURL != "" {
		return strings.TrimSuffix(w.publicURL, "/")
	}
	return mcpgateway.DefaultAudience
}

func (w *webFlags) scheme() string {
	if w.insecureHTTP {
		return "http"
	}
	return "https"
}

// listen opens addr, after checking that the flags make a safe server: TLS,
// or plain HTTP on loopback when asked for.
func (w *webFlags) listen(addr string) (net.Listener, error) {
	// Plain HTTP listens where the check looked: on the loopback address a
	// name resolved to, looked up once.
	loop := loopbackAddr(addr)
	switch {
	case w.insecureHTTP && (w.certFile != "" || w.keyFile != ""):
		return nil, errors.New("give either --insecure-http or --tls-cert-file and --tls-key-file, not both")
	case w.insecureHTTP && loop == "":
		return nil, fmt.Errorf("--insecure-http serves only on a loopback address, not %s: the MCP authorization "+
			"spec requires HTTPS except for localhost, since bearer tokens cross the connection", addr)
	case !w.insecureHTTP && (w.certFile == "" || w.keyFile == ""):
		return nil, errors.New("--listen serves HTTPS: give --tls-cert-file and --tls-key-file " +
			"(or --insecure-http on a loopback address)")
	case w.publicURL == "" && unspecifiedHost(addr):
		return nil, fmt.Errorf("give --public-url, the MCP endpoint as hosts reach it: the protected-resource "+
			"metadata names it, hosts check that it is the URL they use, and %s is no address a host uses", addr)
	}
	if !w.insecureHTTP {
		// Fail now on a certificate that cannot be served, not on the first
		// connection.
		if _, err := tls.LoadX509KeyPair(w.certFile, w.keyFile); err != nil {
			return nil, fmt.Errorf("loading the TLS certificate: %w", err)
		}
	}
	if w.insecureHTTP {
		addr = loop
	}
	return net.Listen("tcp", addr)
}

// serve serves srv on l, over TLS unless plain HTTP was asked for.
func (w *webFlags) serve(srv *http.Server, l net.Listener) error {
	if w.insecureHTTP {
		return srv.Serve(l)
	}
	srv.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	return srv.ServeTLS(l, w.certFile, w.keyFile)
}

// resourceURL is --public-url, or the MCP endpoint at the address l
// listens on.
func (w *webFlags) resourceURL(l net.Listener) string {
	if w.publicURL != "" || l == nil {
		return strings.TrimSuffix(w.publicURL, "/")
	}
	return fmt.Sprintf("%s://%s/mcp", w.scheme(), l.Addr())
}

// unspecifiedHost reports whether addr listens on every address (":8443",
// "0.0.0.0:8443", "[::]:8443").
func unspecifiedHost(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// lookupHost resolves a host name; a test stands in for the system's.
var lookupHost = net.LookupHost

// loopbackAddr is addr with its host a loopback IP address: the host
// itself, or the first address of a name whose every address is loopback;
// "" when the host is not loopback. localhost is a name like any other,
// which /etc/hosts or a resolver may map anywhere.
func loopbackAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return ""
	}
	ips := []string{host}
	if net.ParseIP(host) == nil {
		if ips, err = lookupHost(host); err != nil || len(ips) == 0 {
			return ""
		}
	}
	for _, s := range ips {
		if ip := net.ParseIP(s); ip == nil || !ip.IsLoopback() {
			return ""
		}
	}
	return net.JoinHostPort(ips[0], port)
}
