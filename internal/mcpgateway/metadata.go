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
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// MetadataPath is where the gateway serves its OAuth 2.0 protected-resource
// metadata (RFC 9728). The same document is also served at MetadataPath
// followed by the path of the resource (/.well-known/oauth-protected-resource/mcp).
// RFC 9728 and the MCP authorization spec look there for a resource with a
// path.
const MetadataPath = "/.well-known/oauth-protected-resource"

// metadataURL is the absolute URL of the gateway's protected-resource
// metadata, for its resource with a path; "" when it serves none.
func (g *Gateway) metadataURL() string {
	if len(g.cfg.AuthorizationServers) == 0 {
		return ""
	}
	u, err := url.Parse(g.cfg.ResourceURL)
	if err != nil {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: MetadataPath + strings.TrimSuffix(u.Path, "/")}).String()
}

// mountMetadata serves the protected-resource metadata: the resource is
// the gateway's public URL, the authorization servers the OIDC issuers the
// API server trusts for the gateway's audience, and a token goes in the
// Authorization header. The gateway is no authorization server of its own.
//
// The MCP specification requires the metadata to name at least one
// authorization server. A host that finds none takes the MCP server for
// its own authorization server, and asks the gateway's /authorize, which
// does not exist. So a gateway without --authorization-server serves no
// metadata: both paths answer 404 and say how to get a token.
func (g *Gateway) mountMetadata() error {
	u, err := url.Parse(g.cfg.ResourceURL)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return fmt.Errorf("mcpgateway: the resource URL %q is not an absolute http(s) URL", g.cfg.ResourceURL)
	}
	for _, as := range g.cfg.AuthorizationServers {
		if a, err := url.Parse(as); err != nil || a.Scheme != "https" || a.Host == "" {
			return fmt.Errorf("mcpgateway: the authorization server %q is not an https URL", as)
		}
	}
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, g.noIssuer(), http.StatusNotFound)
	})
	if len(g.cfg.AuthorizationServers) > 0 {
		h = auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               g.cfg.ResourceURL,
			AuthorizationServers:   g.cfg.AuthorizationServers,
			BearerMethodsSupported: []string{"header"},
			ResourceName:           "Once MCP gateway",
		})
	}
	g.mux.Handle(MetadataPath, h)
	if p := strings.TrimSuffix(u.Path, "/"); p != "" {
		g.mux.Handle(MetadataPath+p, h)
	}
	return nil
}

// noIssuer says that the gateway names no authorization server, and how a
// host gets a token all the same.
func (g *Gateway) noIssuer() string {
	return fmt.Sprintf("this gateway names no authorization server (once-mcp --authorization-server), so it has no "+
		"OAuth metadata and a host cannot get a token through OAuth here. Send a Kubernetes token meant for the "+
		"gateway: kubectl create token NAME -n NAMESPACE --audience %s", g.cfg.Audience)
}
