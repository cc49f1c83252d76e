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

package mcpgateway

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
)

func TestUnverifiedClaims(t *testing.T) {
	jwt := func(payload string) string {
		return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".c2ln"
	}
	cases := map[string]struct {
		reason string
		token  string
		want   claims
	}{
		"Opaque":    {reason: "a token that is no JWT says nothing", token: "abc123"},
		"NotBase64": {reason: "a payload that does not decode says nothing", token: "a.%%%.c"},
		"NotJSON":   {reason: "a payload that is not JSON says nothing", token: jwt("aud")},
		"OneAudience": {reason: "aud may be one string", token: jwt(`{"aud":"once-mcp","exp":1700000000}`),
			want: claims{Audiences: []string{"once-mcp"}, Expiry: time.Unix(1700000000, 0)}},
		"Audiences": {reason: "or a list", token: jwt(`{"aud":["a","once-mcp"]}`),
			want: claims{Audiences: []string{"a", "once-mcp"}}},
		"NoExpiry": {reason: "a zero or missing exp is no expiry", token: jwt(`{"aud":"a","exp":0}`),
			want: claims{Audiences: []string{"a"}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, unverifiedClaims(tc.token)); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestChallenge: a request without a token, or with one the gateway
// does not take, is answered 401 with a challenge naming the metadata; an
// HTTP/1 connection closes after it, so that net/http does not read the
// body first. A gateway that names no authorization server has no
// metadata to name: its challenge names none, and its answer says how to
// get a token (it once named metadata that sent OAuth hosts to the
// gateway's own /authorize, which does not exist).
func TestChallenge(t *testing.T) {
	const metadata = `resource_metadata="https://mcp.example/.well-known/oauth-protected-resource/agents/mcp"`
	cases := map[string]struct {
		issuers []string
		code    string
		want    http.Header
		body    []string
	}{
		"Missing": {issuers: []string{"https://issuer.example"}, want: http.Header{
			"Www-Authenticate": {`Bearer ` + metadata}, "Connection": {"close"}},
			body: []string{"no"}},
		"Invalid": {issuers: []string{"https://issuer.example"}, code: "invalid_token", want: http.Header{
			"Www-Authenticate": {`Bearer error="invalid_token", ` + metadata}, "Connection": {"close"}},
			body: []string{"no"}},
		"MissingNoIssuer": {want: http.Header{"Www-Authenticate": {`Bearer`}, "Connection": {"close"}},
			body: []string{"no", "names no authorization server", "--audience once-mcp"}},
		"InvalidNoIssuer": {code: "invalid_token", want: http.Header{
			"Www-Authenticate": {`Bearer error="invalid_token"`}, "Connection": {"close"}},
			body: []string{"no", "names no authorization server", "--audience once-mcp"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g, err := New(Config{REST: &rest.Config{Host: "https://127.0.0.1:1"},
				ResourceURL: "https://mcp.example/agents/mcp", AuthorizationServers: tc.issuers})
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			g.challenge(w, httptest.NewRequest(http.MethodPost, "/mcp", nil), tc.code, "no")
			if w.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", w.Code)
			}
			got := http.Header{"Www-Authenticate": w.Header().Values("WWW-Authenticate"),
				"Connection": w.Header().Values("Connection")}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want, +got:\n%s", diff)
			}
			for _, part := range tc.body {
				if !strings.Contains(w.Body.String(), part) {
					t.Errorf("the answer %q does not say %q", w.Body.String(), part)
				}
			}
		})
	}
}

// TestMetadata: the protected-resource metadata names the authorization
// servers, as the MCP specification requires at least one. A gateway
// without one serves no metadata: both paths answer 404 and say how to
// get a token. It once served metadata without an authorization server,
// and a host that follows OAuth took the gateway for its own.
func TestMetadata(t *testing.T) {
	cases := map[string]struct {
		issuers []string
		status  int
		body    []string
	}{
		"Issuer": {issuers: []string{"https://issuer.example"}, status: http.StatusOK,
			body: []string{`"resource":"https://mcp.example/agents/mcp"`,
				`"authorization_servers":["https://issuer.example"]`, `"bearer_methods_supported":["header"]`}},
		"NoIssuer": {status: http.StatusNotFound,
			body: []string{"names no authorization server", "kubectl create token", "--audience once-mcp"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g, err := New(Config{REST: &rest.Config{Host: "https://127.0.0.1:1"},
				ResourceURL: "https://mcp.example/agents/mcp", AuthorizationServers: tc.issuers})
			if err != nil {
				t.Fatal(err)
			}
			for _, path := range []string{MetadataPath, MetadataPath + "/agents/mcp"} {
				w := httptest.NewRecorder()
				g.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
				if w.Code != tc.status {
					t.Errorf("%s: status %d, want %d", path, w.Code, tc.status)
				}
				for _, part := range tc.body {
					if !strings.Contains(w.Body.String(), part) {
						t.Errorf("%s: the answer %q does not say %q", path, w.Body.String(), part)
					}
				}
			}
		})
	}
}

func TestClientOf(t *testing.T) {
	cases := map[string]struct {
		remote, want string
	}{
		"IPv4":       {remote: "192.0.2.7:40000", want: "192.0.2.7"},
		"IPv4InIPv6": {remote: "[::ffff:192.0.2.7]:40000", want: "192.0.2.7"},
		"IPv6":       {remote: "[2001:db8:1:2:3:4:5:6]:40000", want: "2001:db8:1:2::/64"},
		"IPv6Zone":   {remote: "[fe80::1%eth0]:40000", want: "fe80::/64"},
		"NoPort":     {remote: "192.0.2.7", want: "192.0.2.7"},
		"NotAnIP":    {remote: "pipe", want: "pipe"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := clientOf(&http.Request{RemoteAddr: tc.remote})
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("client of %q: -want, +got:\n%s", tc.remote, diff)
			}
		})
	}
}
