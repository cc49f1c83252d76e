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
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// jsonSeeds are documents that reach Canonical: parameters, results,
// bodies.
var jsonSeeds = []string{
	`{"amount": 100, "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`,
	`{"b":1,"a":[1.0,2e3,-0,1E-7,12345678901234567890],"c":null,"d":true}`,
	`{"\u00e9":"\ud83d\ude00","e\u0301":"<&>","\u20ac":"\/"}`,
	`[]`, `"text"`, `0.1`, `{}`, ` `, `{"a":1,"a":2}`, `{"a":"\xff"}`, `1e400`,
}

// reencoded is doc decoded and written again as encoding/json writes it:
// the same document with other whitespace, key order, escapes and number
// forms. ok is false when encoding/json does not read doc.
func reencoded(doc []byte) ([]byte, bool) {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return nil, false
	}
	out, err := json.MarshalIndent(v, " ", "\t")
	return out, err == nil
}

// FuzzCanonical: the canonical form of a document is canonical already
// (idempotent), valid JSON, and the same for every encoding of the same
// document; only valid JSON has one.
func FuzzCanonical(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c, err := Canonical(doc)
		if err != nil {
			return
		}
		if len(doc) > 0 && !json.Valid(doc) {
			t.Fatalf("%q is no JSON, yet canonical as %q", doc, c)
		}
		if !json.Valid(c) {
			t.Fatalf("canonical form %q of %q is no JSON", c, doc)
		}
		again, err := Canonical(c)
		if err != nil || !bytes.Equal(again, c) {
			t.Fatalf("canonical form %q of %q canonicalises to %q, %v", c, doc, again, err)
		}
		re, ok := reencoded(doc)
		if !ok {
			return
		}
		other, err := Canonical(re)
		if err != nil || !bytes.Equal(other, c) {
			t.Fatalf("%q and %q are the same document, canonical as %q and %q (%v)", doc, re, c, other, err)
		}
	})
}

// FuzzRequestHash: a request's hash does not change with its parameters'
// encoding, and changes with its tool and its operation; the canonical
// parameters it returns are Canonical's.
func FuzzRequestHash(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add("Tool", "payments", "charge.create", []byte(s))
	}
	f.Add("ClusterTool", "pay\"ments", "charge.create\",\"x", []byte(`{"tool":{}}`))
	f.Fuzz(func(t *testing.T, kind, name, operation string, params []byte) {
		tool := v1.ToolReference{Kind: v1.ToolKind(kind), Name: name}
		hash, canonical, err := RequestHash(tool, operation, params)
		if err != nil {
			return
		}
		if !strings.HasPrefix(hash, "sha256:") || len(hash) != len("sha256:")+64 {
			t.Fatalf("hash %q is no sha256 digest", hash)
		}
		if want, err := Canonical(params); err != nil || !bytes.Equal(canonical, want) {
			t.Fatalf("canonical parameters %q, Canonical says %q (%v)", canonical, want, err)
		}
		if re, ok := reencoded(params); ok {
			if other, _, err := RequestHash(tool, operation, re); err != nil || other != hash {
				t.Fatalf("%q and %q hash as %s and %s (%v)", params, re, hash, other, err)
			}
		}
		for what, other := range map[string]struct {
			tool      v1.ToolReference
			operation string
		}{
			"operation": {tool, operation + "x"},
			"tool":      {v1.ToolReference{Kind: tool.Kind, Name: name + "x"}, operation},
			"kind":      {v1.ToolReference{Kind: tool.Kind + "x", Name: name}, operation},
		} {
			if h, _, err := RequestHash(other.tool, other.operation, params); err != nil || h == hash {
				t.Fatalf("another %s hashes the same: %s (%v)", what, h, err)
			}
		}
	})
}
