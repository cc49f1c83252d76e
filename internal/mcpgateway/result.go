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

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Result types (protocol 2026-07-28). From that version on, every result
// says in resultType whether it is complete or asks for input, and a
// client rejects a result without it. The SDK writes resultType for the
// results of its own tool handlers. The gateway answers tools/call in a
// middleware, so it writes its own. Older versions have no resultType.

// typed is a tools/call result as the protocol version of its request
// writes it: marked complete from 2026-07-28 on.
func typed(version string, res mcp.Result) mcp.Result {
	r, ok := res.(*mcp.CallToolResult)
	if !ok || version < minInputProtocol {
		return res
	}
	return complete{r}
}

// complete is a final answer to a call.
type complete struct{ *mcp.CallToolResult }

func (r complete) MarshalJSON() ([]byte, error) {
	return withResultType(r.CallToolResult, "complete")
}

// inputRequired is a result that asks the host's user a question. It has
// no content: the answer comes when the host calls again.
type inputRequired struct{ *mcp.CallToolResult }

func (r inputRequired) MarshalJSON() ([]byte, error) {
	return withResultType(r.CallToolResult, "input_required")
}

// withResultType is r as JSON, with its resultType. An input_required
// result keeps only its requests, its state and its _meta.
func withResultType(r *mcp.CallToolResult, kind string) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if kind == "input_required" {
		for k := range m {
			if k != "inputRequests" && k != "requestState" && k != "_meta" {
				delete(m, k)
			}
		}
	}
	m["resultType"], _ = json.Marshal(kind)
	return json.Marshal(m)
}
