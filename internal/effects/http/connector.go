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

package http

import (
	"context"
	"errors"
	"fmt"
	nethttp "net/http"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
)

// Connector makes Clients for HTTP tools.
type Connector struct {
	// Secrets reads the Secrets that header values come from. An uncached
	// reader, so that the manager neither watches nor caches Secrets.
	Secrets client.Reader
	// ClusterResourceNamespace holds the Secrets of ClusterTools.
	ClusterResourceNamespace string
	// Compiler compiles the tools' expressions.
	Compiler *Compiler
	// Transport carries the requests; see NewTransport.
	Transport nethttp.RoundTripper
	// Egress is the policy Transport dials under, for reporting a tool
	// whose URL it refuses before any call; nil means the built-in
	// refusals only.
	Egress *Egress

	// tokens keeps OAuth2 tokens between calls.
	tokens tokens
}

var _ effects.Connector = &Connector{}

// Connect reads the tool's header values and returns its Client, which
// scrubs the values read from Secrets from all it returns. It sends no
// request: a Client fetches an OAuth2 token within its call's deadline.
func (c *Connector) Connect(ctx context.Context, tool v1.GenericTool) (effects.Client, error) {
	cr, err := c.credentials(ctx, tool, false)
	if err != nil {
		return nil, err
	}
	cl := NewClient(tool.GetSpec(), cr.headers, cr.transport, c.Compiler)
	cl.scrub = newScrubber(cr.secrets)
	cl.secrets, cl.token = cr.secrets, cr.token
	cl.secretValues = cr.values
	return cl, nil
}

// CheckParameters checks an operation's parameters against its schema.
func (c *Connector) CheckParameters(spec *v1.ToolSpec, operation string, params []byte) error {
	return c.Compiler.CheckParameters(spec, operation, params)
}

// Validate checks a tool's definition: its expressions and paths (the
// Compiler's Validate), and its URL under the egress policy.
func (c *Connector) Validate(spec *v1.ToolSpec) error {
	var badURL error
	if err := c.Egress.CheckURL(spec.HTTP.URL); err != nil {
		badURL = fmt.Errorf("spec.http.url: %w", err)
	}
	return errors.Join(c.Compiler.Validate(spec), badURL)
}

// Warnings are the tool's definition's warnings (Warnings).
func (c *Connector) Warnings(spec *v1.ToolSpec) []string { return Warnings(spec) }

// Headers resolves the tool's credentials, reading the Secrets they name:
// in the tool's namespace, or for a ClusterTool in the cluster resource
// namespace. It reports every Secret or key that is missing, never a value.
// An OAuth2 token is fetched within ctx.
func (c *Connector) Headers(ctx context.Context, tool v1.GenericTool) (nethttp.Header, error) {
	cr, err := c.credentials(ctx, tool, true)
	return cr.headers, err
}
