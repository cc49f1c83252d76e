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
	"flag"
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestListenRefusesPlainHTTPOffLoopback: plain HTTP only when asked for,
// on a loopback address; otherwise a certificate is required.
func TestListenRefusesPlainHTTPOffLoopback(t *testing.T) {
	cases := map[string]struct {
		flags webFlags
		addr  string
		// hosts, when set, is what every name resolves to.
		hosts []string
		err   string
	}{
		"LoopbackV4": {flags: webFlags{insecureHTTP: true}, addr: "127.0.0.1:0"},
		"LoopbackV6": {flags: webFlags{insecureHTTP: true}, addr: "[::1]:0"},
		"Localhost":  {flags: webFlags{insecureHTTP: true}, addr: "localhost:0"},
		// A resolver (or /etc/hosts) that maps localhost off loopback, as a
		// misconfigured node or a hostile DNS search path does.
		"LocalhostElsewhere": {flags: webFlags{insecureHTTP: true}, addr: "localhost:0",
			hosts: []string{"127.0.0.1", "10.0.0.5"}, err: "only on a loopback address"},
		"NameOfLoopback": {flags: webFlags{insecureHTTP: true}, addr: "gateway.local:0", hosts: []string{"::1"}},
		"AllAddresses":   {flags: webFlags{insecureHTTP: true}, addr: ":0", err: "only on a loopback address"},
		"Unspecified":    {flags: webFlags{insecureHTTP: true}, addr: "0.0.0.0:0", err: "only on a loopback address"},
		"NoCertificate":  {addr: "127.0.0.1:0", err: "give --tls-cert-file and --tls-key-file"},
		"Both": {flags: webFlags{insecureHTTP: true, certFile: "c", keyFile: "k"}, addr: "127.0.0.1:0",
			err: "not both"},
		"UnreadableCertificate": {flags: webFlags{certFile: "/nonexistent.crt", keyFile: "/nonexistent.key"},
			addr: "127.0.0.1:0", err: "loading the TLS certificate"},
		// Hosts check that the metadata's resource is the URL they used:
		// "https://[::]:8443/mcp" is none.
		"EveryAddressWithoutPublicURL": {flags: webFlags{certFile: "c", keyFile: "k"}, addr: ":8443",
			err: "give --public-url"},
		"UnspecifiedWithoutPublicURL": {flags: webFlags{certFile: "c", keyFile: "k"}, addr: "[::]:8443",
			err: "give --public-url"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.hosts != nil {
				defer func(l func(string) ([]string, error)) { lookupHost = l }(lookupHost)
				lookupHost = func(string) ([]string, error) { return tc.hosts, nil }
			}
			l, err := tc.flags.listen(tc.addr)
			if l != nil {
				_ = l.Close()
			}
			if tc.err == "" && err != nil {
				t.Fatalf("want no error, got %v", err)
			}
			if l != nil && tc.flags.insecureHTTP && !l.Addr().(*net.TCPAddr).IP.IsLoopback() {
				t.Fatalf("plain HTTP listens on %s, off loopback", l.Addr())
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("want an error about %q, got %v", tc.err, err)
			}
		})
	}
}

// TestTokenAudience: the audience is --audience, or the public URL the
// metadata advertises as the resource, or once-mcp when neither is given.
// It was once-mcp whatever --public-url said, an audience no deployment
// has alone (RFC 8707 binds a token to one server).
func TestTokenAudience(t *testing.T) {
	cases := map[string]struct {
		args []string
		want string
	}{
		"Nothing":            {want: "once-mcp"},
		"PublicURL":          {args: []string{"--public-url", "https://mcp.example.com/mcp"}, want: "https://mcp.example.com/mcp"},
		"PublicURLWithSlash": {args: []string{"--public-url", "https://mcp.example.com/mcp/"}, want: "https://mcp.example.com/mcp"},
		"Audience":           {args: []string{"--audience", "shop-gateway"}, want: "shop-gateway"},
		"AudienceAndPublicURL": {args: []string{"--audience", "once-mcp", "--public-url", "https://mcp.example.com/mcp"},
			want: "once-mcp"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var w webFlags
			fs := flag.NewFlagSet("once-mcp", flag.ContinueOnError)
			w.register(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, w.tokenAudience()); diff != "" {
				t.Errorf("audience of %q: -want, +got:\n%s", tc.args, diff)
			}
		})
	}
}
