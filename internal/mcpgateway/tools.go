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

// Package mcpgateway offers the operations of Tools and ClusterTools as MCP
// tools (github.com/modelcontextprotocol/go-sdk), over streamable HTTP or
// stdio. A tools/call becomes a SideEffectOperation whose idempotency key
// comes from the caller, scoped to the caller's identity, and the call
// returns the operation's recorded outcome (pkg/once does the work). The
// caller's own Kubernetes credentials reach the API server, so RBAC decides
// which namespaces and tools an agent may use.
package mcpgateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// KeyArgument is the argument that carries the caller's idempotency key.
const KeyArgument = "idempotencyKey"

// KeyMeta is the _meta field that may carry the key instead.
const KeyMeta = "once.dev/idempotencyKey"

// MaxKeyLength bounds a caller's key, so that the scoped key fits the
// operation's spec.idempotencyKey (253).
const MaxKeyLength = 200

// toolSep separates a tool's name from its operation in an MCP tool name.
// Kubernetes names hold no "_", so the first "__" ends the tool's name.
const toolSep = "__"

// clusterPrefix starts the MCP name of a ClusterTool's operation.
const clusterPrefix = "cluster_"

// maxToolName is the SDK's limit on MCP tool names.
const maxToolName = 128

// ToolName is the MCP name of an operation of a Tool
// (`<tool>__<operation>`) or ClusterTool (`cluster_<tool>__<operation>`),
// and false when it is longer than MCP allows.
func ToolName(ref v1.ToolReference, operation string) (string, bool) {
	name := ref.Name + toolSep + operation
	if ref.EffectiveKind() == v1.ToolKindClusterTool {
		name = clusterPrefix + name
	}
	return name, len(name) <= maxToolName
}

// ParseToolName reverses ToolName.
func ParseToolName(name string) (ref v1.ToolReference, operation string, ok bool) {
	ref.Kind = v1.ToolKindTool
	// "cluster__op" is the Tool named cluster: a ClusterTool's name after
	// the prefix never begins with "_".
	if rest, found := strings.CutPrefix(name, clusterPrefix); found && !strings.HasPrefix(rest, "_") {
		ref.Kind, name = v1.ToolKindClusterTool, rest
	}
	tool, op, found := strings.Cut(name, toolSep)
	if !found || tool == "" || op == "" || strings.Contains(tool, "_") || strings.HasPrefix(op, "_") {
		return v1.ToolReference{}, "", false
	}
	ref.Name = tool
	return ref, op, true
}

// ScopedKey is the idempotency key of an operation made for caller with
// the caller's key: two callers' keys never meet.
func ScopedKey(user, key string) string {
	return "mcp/" + CallerID(user) + "/" + key
}

// CallerID is a short, stable, non-reversible id of a user name.
func CallerID(user string) string {
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:8])
}

// guarantees says, in one sentence, what Once promises for a tool's mode.
var guarantees = map[v1.IdempotencyMode]string{
	v1.IdempotencyNative: "Once sends the tool a key derived from yours, and the tool dedupes on it: " +
		"a retry with the same key gets the first result and makes no second effect.",
	v1.IdempotencyLookup: "If the tool's answer is lost, Once asks the tool by key whether the effect exists " +
		"before any retry, so a retry with the same key makes no second effect.",
	v1.IdempotencyNone: "The tool can neither dedupe nor be asked: if its answer is lost, Once never retries blindly " +
		"and a person decides (the call answers NeedsReview); a retry with the same key never makes a second effect.",
}

// keyRule is what every description tells the agent about keys.
const keyRule = "Send an idempotencyKey that names this request, and send the same key again when you retry it " +
	"(after a timeout or a lost answer); use a new key for a new request. The same key with other arguments is refused. " +
	"A key holds for this tool and operation, for the operation's retention (24 hours unless its spec says otherwise)."

// Description is the MCP description of an operation of a tool.
func Description(ref v1.ToolReference, spec *v1.ToolSpec, op *v1.ToolOperation) string {
	method := op.Method
	if method == "" {
		method = "POST"
	}
	rule := keyRule
	if op.DerivedKey != nil {
		rule = derivedRule(op.DerivedKey.Window.Duration)
	}
	return fmt.Sprintf("Operation %s of %s %s (%s %s), made effectively once by Once. %s %s",
		op.Name, ref.EffectiveKind(), ref.Name, method, op.Path, guarantees[spec.Idempotency.Mode], rule)
}

// derivedRule is what the description of an operation that derives its
// keys tells the agent instead of keyRule.
func derivedRule(window time.Duration) string {
	return fmt.Sprintf("This operation needs no idempotencyKey: Once derives the key from your arguments, and ignores "+
		"one you send. Calls with the same arguments are one request while the first call's operation runs or waits "+
		"for a person, and within %s after it began or ended: a retry, at any time until then, gets the first call's "+
		"result and makes no second effect, and so would a second request with the same arguments in that time. For a "+
		"second request, change an argument that tells it apart (a reference, a date); send large numbers as strings.",
		window)
}

// JSON Schema keywords: an object's properties, a value's type.
const (
	properties = "properties"
	schemaType = "type"
)

// stringSchema is the JSON Schema of a string of minLength (none if 0) to
// maxLength characters.
func stringSchema(minLength, maxLength int) map[string]any {
	s := map[string]any{schemaType: "string", "maxLength": maxLength}
	if minLength > 0 {
		s["minLength"] = minLength
	}
	return s
}

// InputSchema is the operation's parametersSchema with the idempotencyKey
// property added and required. An operation without a schema takes any
// object.
func InputSchema(op *v1.ToolOperation) (map[string]any, error) {
	schema := map[string]any{}
	if op.ParametersSchema != nil && len(op.ParametersSchema.Raw) > 0 {
		if err := json.Unmarshal(op.ParametersSchema.Raw, &schema); err != nil {
			return nil, fmt.Errorf("the parametersSchema of %s is not a JSON object: %w", op.Name, err)
		}
	}
	schema[schemaType] = "object"
	props, _ := schema[properties].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	key := stringSchema(1, MaxKeyLength)
	key["description"] = "Names this request. Send the same key when you retry it; a new request needs a new key."
	props[KeyArgument] = key
	schema[properties] = props
	if op.DerivedKey != nil {
		// Optional and ignored: the arguments name the request.
		key := stringSchema(0, MaxKeyLength)
		key["description"] = "Not needed: this operation derives its key from the other arguments, and ignores this one."
		props[KeyArgument] = key
		return schema, nil
	}
	required, _ := schema["required"].([]any)
	has := false
	for _, r := range required {
		has = has || r == KeyArgument
	}
	if !has {
		required = append(required, KeyArgument)
	}
	schema["required"] = required
	return schema, nil
}

// SplitArguments takes the key out of a call's arguments (or its _meta)
// and returns it with the remaining arguments, the operation's parameters.
func SplitArguments(args json.RawMessage, meta map[string]any) (key string, params json.RawMessage, err error) {
	fields := map[string]json.RawMessage{}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &fields); err != nil {
			return "", nil, fmt.Errorf("the arguments must be a JSON object: %w", err)
		}
	}
	if raw, ok := fields[KeyArgument]; ok {
		if err := json.Unmarshal(raw, &key); err != nil {
			return "", nil, fmt.Errorf("the argument %s must be a string", KeyArgument)
		}
		delete(fields, KeyArgument)
	}
	if m, ok := meta[KeyMeta]; ok {
		s, isString := m.(string)
		if !isString {
			return "", nil, fmt.Errorf("_meta[%q] must be a string", KeyMeta)
		}
		if key != "" && key != s {
			return "", nil, fmt.Errorf("the argument %s and _meta[%q] name different keys", KeyArgument, KeyMeta)
		}
		key = s
	}
	if len(key) > MaxKeyLength {
		return "", nil, fmt.Errorf("the idempotency key is %d bytes long; at most %d are allowed", len(key), MaxKeyLength)
	}
	params, err = json.Marshal(fields)
	if err != nil {
		return "", nil, err
	}
	return key, params, nil
}

// boundSize refuses a document over limit bytes of canonical JSON. It is
// checked before the gateway reads a tool, checks a schema or makes
// anything: the manager would refuse the object for its size.
func boundSize(what string, doc json.RawMessage, limit int) error {
	if len(doc) == 0 {
		return nil
	}
	canonical, err := protocol.Canonical(doc)
	if err != nil {
		return fmt.Errorf("%s are not JSON: %w", what, err)
	}
	if len(canonical) > limit {
		return fmt.Errorf("%s take %d bytes of canonical JSON; at most %d are allowed; nothing was done, "+
			"and the key is still free", what, len(canonical), limit)
	}
	return nil
}

// missingKey tells an agent how to send a key.
func missingKey(tool string) string {
	return fmt.Sprintf("%s has a side effect, so it needs an idempotency key, and only you know whether this call "+
		"is a retry. Call it again with the argument %q (or _meta[%q]) set to a string that names this request, "+
		"for example \"refund-order-4711\"; send the same key whenever you retry this request, and a new key for a "+
		"new one", tool, KeyArgument, KeyMeta)
}
