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
	"strings"
	"testing"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestRequestHash(t *testing.T) {
	tool := v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"}
	base := `{"amount": 100, "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`
	hash := func(t *testing.T, tool v1.ToolReference, op, params string) string {
		t.Helper()
		h, _, err := RequestHash(tool, op, []byte(params))
		if err != nil {
			t.Fatalf("RequestHash(%s): %v", params, err)
		}
		return h
	}
	want := hash(t, tool, "charge.create", base)

	same := map[string]struct {
		reason string
		params string
	}{
		"KeyOrder":   {"key order does not matter", `{"meta": {"tags": ["a", "b"], "order": "o-1"}, "currency": "eur", "amount": 100}`},
		"Whitespace": {"whitespace does not matter", `{"amount":100,"currency":"eur","meta":{"order":"o-1","tags":["a","b"]}}`},
		"NumberForm": {"one number has one canonical form", `{"amount": 1e2, "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`},
		"Escapes":    {"a string has one canonical form", `{"amount": 100, "currency": "\u0065ur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`},
	}
	for name, tc := range same {
		t.Run("Same"+name, func(t *testing.T) {
			if got := hash(t, tool, "charge.create", tc.params); got != want {
				t.Errorf("%s: want %s, got %s", tc.reason, want, got)
			}
		})
	}

	different := map[string]struct {
		reason string
		tool   v1.ToolReference
		op     string
		params string
	}{
		"Amount":      {"a value change", tool, "charge.create", `{"amount": 1000, "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`},
		"Type":        {"a number is not a string", tool, "charge.create", `{"amount": "100", "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`},
		"Nested":      {"a nested value change", tool, "charge.create", `{"amount": 100, "currency": "eur", "meta": {"order": "o-2", "tags": ["a", "b"]}}`},
		"ArrayOrder":  {"array order matters", tool, "charge.create", `{"amount": 100, "currency": "eur", "meta": {"order": "o-1", "tags": ["b", "a"]}}`},
		"ExtraField":  {"an added field", tool, "charge.create", `{"amount": 100, "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}, "x": null}`},
		"Operation":   {"another operation", tool, "refund.create", base},
		"ToolName":    {"another tool", v1.ToolReference{Kind: v1.ToolKindTool, Name: "billing"}, "charge.create", base},
		"ClusterTool": {"a ClusterTool of the same name", v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "payments"}, "charge.create", base},
	}
	for name, tc := range different {
		t.Run("Different"+name, func(t *testing.T) {
			if got := hash(t, tc.tool, tc.op, tc.params); got == want {
				t.Errorf("%s must change the hash, got the same %s", tc.reason, got)
			}
		})
	}

	t.Run("InvalidJSON", func(t *testing.T) {
		if _, _, err := RequestHash(tool, "charge.create", []byte(`{"amount":`)); err == nil {
			t.Error("invalid JSON must be an error")
		}
	})
	t.Run("NoParameters", func(t *testing.T) {
		if a, b := hash(t, tool, "ping", ""), hash(t, tool, "ping", "null"); a != b {
			t.Errorf("absent parameters hash as null: %s != %s", a, b)
		}
	})
}

func TestScope(t *testing.T) {
	base := Scope{Namespace: "shop", Tool: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
		Operation: "charge.create", Key: "order-1"}
	cases := map[string]Scope{
		"Namespace": {Namespace: "other", Tool: base.Tool, Operation: base.Operation, Key: base.Key},
		"ToolKind":  {Namespace: base.Namespace, Tool: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "payments"}, Operation: base.Operation, Key: base.Key},
		"Operation": {Namespace: base.Namespace, Tool: base.Tool, Operation: "refund.create", Key: base.Key},
		"Key":       {Namespace: base.Namespace, Tool: base.Tool, Operation: base.Operation, Key: "order-2"},
		// Parts that would run together if they were joined unescaped.
		"Separator": {Namespace: base.Namespace, Tool: base.Tool, Operation: "charge.create/order-1", Key: ""},
	}
	for name, other := range cases {
		t.Run(name, func(t *testing.T) {
			if base.RecordName() == other.RecordName() {
				t.Errorf("scopes %+v and %+v share a record name", base, other)
			}
		})
	}
	if n := base.RecordName(); len(n) > 253 || n != base.RecordName() {
		t.Errorf("record name %q must be stable and fit an object name", n)
	}
	if got, want := base.ToolKey(), "shop/Tool:payments/charge.create/order-1"; got != want {
		t.Errorf("ToolKey: want %q, got %q", want, got)
	}
	other := base
	other.Tool.Name = "refunds"
	if base.ToolKey() == other.ToolKey() {
		t.Errorf("two tools of one namespace send the same key %q", base.ToolKey())
	}
	long := base
	long.Key = strings.Repeat("k", 300)
	if got := long.ToolKey(); len(got) > 255 || !strings.HasPrefix(got, "once:") {
		t.Errorf("a long scope must be sent as its digest, got %q", got)
	}
}
