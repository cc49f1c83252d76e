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
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/worstcase"
)

// TestArgumentsBounded: a call's arguments over an operation's limit, and
// a saga's inputs over a saga's, are refused before the gateway asks the
// API server anything. The gateway read the tool, checked its schema and
// made the operation, which the manager then failed ParametersTooLarge,
// its key spent. Each worst case, a body of 1 MiB, is measured.
func TestArgumentsBounded(t *testing.T) {
	var asked atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		asked.Add(1)
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer api.Close()
	cfg := &rest.Config{Host: api.URL}
	g, err := New(Config{REST: cfg})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := client.New(cfg, client.Options{Scheme: Scheme, Mapper: mapper})
	if err != nil {
		t.Fatal(err)
	}
	c := &caller{user: "alice", kube: kube}
	// The largest body the gateway reads, in small values: the most work
	// per byte to parse.
	many := "[" + strings.Repeat(`"a",`, (MaxRequestBodyBytes-64)/4) + `"a"]`
	cases := map[string]struct {
		reason string
		tool   string
		args   string
		want   string
	}{
		"Arguments": {reason: "a tool's arguments just over the limit", tool: "payments__charge.create",
			args: `{"idempotencyKey":"k","x":"` + strings.Repeat("a", v1.MaxParametersBytes) + `"}`,
			want: "the arguments take 65544 bytes of canonical JSON; at most 65536 are allowed"},
		"ArgumentsWorst": {reason: "a body of 1 MiB of small values", tool: "payments__charge.create",
			args: `{"idempotencyKey":"k","x":` + many + `}`, want: "the arguments take 1048"},
		"Inputs": {reason: "a saga's inputs just over the limit", tool: SagaToolName,
			args: `{"idempotencyKey":"k","inputs":{"x":"` + strings.Repeat("a", v1.MaxInputsBytes) + `"},"steps":[{"name":"a","toolRef":{"name":"t"},"operation":"o","irreversible":true}]}`,
			want: "the saga's inputs take 65544 bytes of canonical JSON; at most 65536 are allowed"},
		"InputsWorst": {reason: "a body of 1 MiB of small values", tool: SagaToolName,
			args: `{"idempotencyKey":"k","inputs":{"x":` + many + `},"steps":[{"name":"a","toolRef":{"name":"t"},"operation":"o","irreversible":true}]}`, want: "the saga's inputs take 1048"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			asked.Store(0)
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tc.tool, Arguments: json.RawMessage(tc.args)}}
			var res mcp.Result
			// 1 MiB of arguments, parsed as the SDK hands them on, split
			// and measured: about 50 times the body.
			worstcase.Within(t, name, 80<<20, func() {
				res, err = g.callTool(t.Context(), req, c, "ns")
			})
			if err != nil {
				t.Fatal(err)
			}
			r, _ := res.(*mcp.CallToolResult)
			if r == nil || !r.IsError || !strings.Contains(r.Content[0].(*mcp.TextContent).Text, tc.want) {
				t.Errorf("%s: want a refusal saying %q, got %+v", tc.reason, tc.want, res)
			}
			if n := asked.Load(); n != 0 {
				t.Errorf("%s: the gateway asked the API server %d times before refusing", tc.reason, n)
			}
		})
	}
}
