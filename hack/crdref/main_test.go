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

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReferenceIsCurrent fails when docs/reference.md is not what the
// generator makes of the committed CRDs: after a change of the Go types
// and make manifests, run make docs.
func TestReferenceIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := Generate(filepath.Join(root, "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("docs/reference.md is out of date; run make docs (-want, +got):\n%s", diff)
	}
}

// TestGenerateCoversEveryField checks the generator against the CRDs: every
// kind, a CEL rule's message, a default and an enum of the Tool show up.
func TestGenerateCoversEveryField(t *testing.T) {
	doc, err := Generate(filepath.Join("..", "..", "config", "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for name, want := range map[string]string{
		"every kind":   "## ClusterTool\n",
		"a saga":       "## Saga\n",
		"an operation": "## SideEffectOperation\n",
		"a record":     "## IdempotencyRecord\n",
		"a tool":       "## Tool\n",
		"a CEL message": `"a tool in Lookup mode must state its lookupDelay: how long after a request is sent ` +
			`its effect may still be missing from lookups"`,
		"a default":   "- **`spec.idempotency.header`** `string`, default `\"Idempotency-Key\"`",
		"an enum":     "one of `\"Native\"`, `\"Lookup\"`, `\"None\"`",
		"a list item": "- **`spec.operations[].name`** `string`, required",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("%s: the reference lacks %q", name, want)
		}
	}
}

// TestGenerateRefusesWhatIsNotACRD makes sure a stray manifest fails the
// generator instead of being skipped.
func TestGenerateRefusesWhatIsNotACRD(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Generate(dir); err == nil {
		t.Error("a ConfigMap was taken for a CRD")
	}
}
