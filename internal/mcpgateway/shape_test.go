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
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/once-dev/once/test/mcpwire"
)

// field is a result's field as JSON text; "" when absent.
func field(res map[string]json.RawMessage, name string) string {
	return string(res[name])
}

// TestResultShapes: every result the gateway writes is one the official
// clients take at the protocol version they negotiated. At 2026-07-28 a
// tools/call result carries resultType and a tools/list result a
// cacheScope of public or private (the TypeScript SDK's v2 client rejects
// either missing); the gateway once wrote neither, as its own handlers
// answer those methods, not the SDK's. Older versions get no resultType.
func TestResultShapes(t *testing.T) {
	type shape struct {
		ListResultType, CacheScope, TTLMs string
		CallResultType, Content           string
	}
	cases := map[string]struct {
		version string
		want    shape
	}{
		"2025-11-25": {version: "2025-11-25", want: shape{CacheScope: `"private"`, TTLMs: "0", Content: "array"}},
		"2026-07-28": {version: "2026-07-28", want: shape{ListResultType: `"complete"`, CacheScope: `"private"`,
			TTLMs: "0", CallResultType: `"complete"`, Content: "array"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv, _ := stubbedGateway(t)
			w := &mcpwire.Wire{Token: "good"}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := mcp.NewClient(&mcp.Implementation{Name: "shape", Version: "v0"}, nil)
			s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
				HTTPClient: &http.Client{Transport: w}}, &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s.Close() }()
			if got := s.InitializeResult().ProtocolVersion; got != tc.version {
				t.Fatalf("negotiated %s, want %s", got, tc.version)
			}
			if _, err := s.ListTools(ctx, nil); err != nil {
				t.Fatal(err)
			}
			// A call without a key: a tool error, answered by the gateway
			// before it asks the API server anything.
			if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: SagaToolName, Arguments: map[string]any{}}); err != nil {
				t.Fatal(err)
			}
			list, call := w.Last("tools/list"), w.Last("tools/call")
			got := shape{ListResultType: field(list, "resultType"), CacheScope: field(list, "cacheScope"),
				TTLMs: field(list, "ttlMs"), CallResultType: field(call, "resultType")}
			if strings.HasPrefix(field(call, "content"), "[") {
				got.Content = "array"
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("-want, +got:\n%s\ntools/list: %s\ntools/call: %s", diff, list, call)
			}
		})
	}
}

// TestInputRequiredShape: a question to the host's user is an
// input_required result with its requests and state, and no content (the
// gateway once wrote "content": null beside them).
func TestInputRequiredShape(t *testing.T) {
	st := decisionState{Kind: fieldSaga, Name: "s", UID: "u", Step: "pay"}
	res := inputRequired{&mcp.CallToolResult{RequestState: st.encode(), InputRequests: mcp.InputRequestMap{
		decisionInput: &mcp.ElicitParams{Message: "approve?", RequestedSchema: form(map[string]any{})}}}}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	keys := slices.Sorted(maps.Keys(got))
	want := []string{"inputRequests", "requestState", "resultType"}
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("fields: -want, +got:\n%s\n%s", diff, b)
	}
	if string(got["resultType"]) != `"input_required"` {
		t.Errorf("resultType %s, want \"input_required\"", got["resultType"])
	}
	var requests map[string]struct {
		Method string `json:"method"`
	}
	if err := json.Unmarshal(got["inputRequests"], &requests); err != nil || requests[decisionInput].Method != "elicitation/create" {
		t.Errorf("inputRequests %s, want %s as an elicitation/create", got["inputRequests"], decisionInput)
	}
}
