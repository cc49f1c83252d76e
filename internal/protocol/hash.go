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

package protocol

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/gowebpki/jcs"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Canonical returns the RFC 8785 canonical form of a JSON document: keys
// sorted, no insignificant whitespace, numbers and strings in one form.
// Empty input is JSON null.
func Canonical(doc []byte) ([]byte, error) {
	if len(doc) == 0 {
		return []byte("null"), nil
	}
	out, err := jcs.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("canonicalising JSON: %w", err)
	}
	return out, nil
}

// Digest is "sha256:" and the hex SHA-256 of b.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// RequestHash binds an idempotency key to one request: the digest of the
// canonical JSON of the tool, the operation and the parameters. Key order
// and whitespace in the parameters do not change it; any value does.
// It also returns the canonical parameters, whose size is what
// MaxParametersBytes limits.
func RequestHash(tool v1.ToolReference, operation string, parameters []byte) (hash string, canonical []byte, err error) {
	canonical, err = Canonical(parameters)
	if err != nil {
		return "", nil, fmt.Errorf("parameters: %w", err)
	}
	doc, err := json.Marshal(struct {
		Tool       v1.ToolReference `json:"tool"`
		Operation  string           `json:"operation"`
		Parameters json.RawMessage  `json:"parameters"`
	}{tool, operation, canonical})
	if err != nil {
		return "", nil, fmt.Errorf("encoding request: %w", err)
	}
	full, err := Canonical(doc)
	if err != nil {
		return "", nil, err
	}
	return Digest(full), canonical, nil
}

// Scope is the unit of idempotency: at most one effect per scope within
// its retention.
type Scope struct {
	Namespace string
	Tool      v1.ToolReference
	Operation string
	Key       string
}

// OperationScope is an operation's scope: its namespace, its tool (the
// kind defaulted), its operation and its effective key, spec.idempotencyKey
// or, when that is empty, the operation's name.
func OperationScope(op *v1.SideEffectOperation) Scope {
	ref := op.Spec.ToolRef
	ref.Kind = cmp.Or(ref.Kind, v1.ToolKindTool)
	return Scope{Namespace: op.Namespace, Tool: ref, Operation: op.Spec.Operation,
		Key: cmp.Or(op.Spec.IdempotencyKey, op.Name)}
}

// RecordName is the name of the IdempotencyRecord of the scope: a digest,
// so that any key fits in an object name and no two scopes share one.
func (s Scope) RecordName() string {
	// Each part is escaped so that no choice of parts can forge another
	// scope's string.
	raw := url.PathEscape(s.Namespace) + "/" + url.PathEscape(string(s.Tool.Kind)) + "/" +
		url.PathEscape(s.Tool.Name) + "/" + url.PathEscape(s.Operation) + "/" + url.PathEscape(s.Key)
	sum := sha256.Sum256([]byte(raw))
	return "scope-" + hex.EncodeToString(sum[:])
}

// maxToolKey is the longest key sent to a tool as it is; longer keys are
// sent as their digest. Many APIs cap keys at 255 characters.
const maxToolKey = 255

// ToolKey is the idempotency key sent to the tool: the whole scope, so that
// tenants sharing a ClusterTool, operations sharing a tool, and tools
// sharing one API never collide there. It reads
// "<namespace>/<kind>:<tool>/<operation>/<key>", or "once:" and the hex
// SHA-256 of that when it is longer than 255 bytes.
func (s Scope) ToolKey() string {
	k := s.Namespace + "/" + string(s.Tool.EffectiveKind()) + ":" + s.Tool.Name + "/" + s.Operation + "/" + s.Key
	if len(k) <= maxToolKey {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "once:" + hex.EncodeToString(sum[:])
}
