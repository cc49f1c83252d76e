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

package argocd

import (
	"flag"
	"maps"
	"os"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const root = "../.."

var update = flag.Bool("update", false, "rewrite config/argocd/argocd-cm-patch.yaml from the .lua files")

// TestConfigMapPatchEmbedsTheScripts keeps config/argocd/argocd-cm-patch.yaml
// equal to the .lua files, so that what a reader installs is what the
// tests run.
func TestConfigMapPatchEmbedsTheScripts(t *testing.T) {
	rendered, err := RenderConfigMapPatch(root)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(ConfigMapPatchPath(root), []byte(rendered), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := LoadConfigMapData(root)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, kind := range Kinds {
		key := ConfigMapKey(kind)
		want = append(want, key)
		script, err := LoadScript(root, kind)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(script, data[key]); diff != "" {
			t.Errorf("argocd-cm-patch.yaml %s differs from %s (-file, +patch):\n%s", key, ScriptPath(root, kind), diff)
		}
	}
	got := slices.Sorted(maps.Keys(data))
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("argocd-cm-patch.yaml keys (-want, +got):\n%s", diff)
	}
	b, err := os.ReadFile(ConfigMapPatchPath(root))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(rendered, string(b)); diff != "" {
		t.Errorf("argocd-cm-patch.yaml is not as rendered; run go test ./test/argocd -update (-rendered, +file):\n%s", diff)
	}
}

// TestBeforeTheManager covers what the controller cannot be made to
// produce: an object it has not written a status for yet, and a status
// older than the spec. Every state the controller writes is covered
// against real objects in internal/controller (health_test.go).
func TestBeforeTheManager(t *testing.T) {
	ready := map[string]any{"type": "Ready", "status": "True", "reason": "Committed", "message": "Committed"}
	cases := map[string]struct {
		reason string
		obj    map[string]any
		want   string
	}{
		"NoStatus": {
			reason: "A new object has no status until the manager writes one",
			obj:    map[string]any{"metadata": map[string]any{"generation": int64(1)}},
			want:   Progressing,
		},
		"EmptyStatus": {
			reason: "A status without conditions says nothing yet",
			obj:    map[string]any{"metadata": map[string]any{"generation": int64(1)}, "status": map[string]any{}},
			want:   Progressing,
		},
		"Stale": {
			reason: "A Ready status of an older generation does not describe the spec",
			obj: map[string]any{"metadata": map[string]any{"generation": int64(2)},
				"status": map[string]any{"observedGeneration": int64(1), "state": "Committed",
					"conditions": []any{ready}}},
			want: Progressing,
		},
		"NoObservedGeneration": {
			reason: "A status that names no generation is not trusted",
			obj: map[string]any{"metadata": map[string]any{"generation": int64(1)},
				"status": map[string]any{"state": "Committed", "conditions": []any{ready}}},
			want: Progressing,
		},
	}
	for _, kind := range Kinds {
		script, err := LoadScript(root, kind)
		if err != nil {
			t.Fatal(err)
		}
		for name, tc := range cases {
			t.Run(kind+"/"+name, func(t *testing.T) {
				got, err := Run(script, tc.obj)
				if err != nil {
					t.Fatal(err)
				}
				if got.Status != tc.want {
					t.Errorf("%s: got %s (%q), want %s", tc.reason, got.Status, got.Message, tc.want)
				}
			})
		}
	}
}

// TestRunRefusesWhatArgoCDRefuses checks the runner itself: a script must
// return a table with a status Argo CD knows.
func TestRunRefusesWhatArgoCDRefuses(t *testing.T) {
	cases := map[string]struct {
		script  string
		wantErr bool
	}{
		"Known":       {script: `return {status = "Healthy", message = obj.metadata.name}`},
		"NotATable":   {script: `return "Healthy"`, wantErr: true},
		"UnknownWord": {script: `return {status = "Fine"}`, wantErr: true},
		"Loops":       {script: `while true do end`, wantErr: true},
		"NoOS":        {script: `os.exit(1)`, wantErr: true},
		// What Argo CD v3.5.1 opens for a health check from argocd-cm, and
		// what it does not.
		"NoString":     {script: `return {status = string.format("%s", "Healthy")}`, wantErr: true},
		"NoMath":       {script: `return {status = "Healthy", message = math.floor(1.5)}`, wantErr: true},
		"NoIO":         {script: `io.write("x")`, wantErr: true},
		"Table":        {script: `local t = {"b"}; table.insert(t, "a"); return {status = "Healthy", message = table.concat(t)}`},
		"NoOSInTable":  {script: `return {status = table.time() > 0 and "Healthy" or "Degraded"}`, wantErr: true},
		"RequireOS":    {script: `local os = require("os"); return {status = "Healthy", message = os.date("!%Y")}`},
		"ActionParams": {script: `return {status = type(actionParams) == "table" and "Healthy" or "Degraded"}`},
		"Base":         {script: `return {status = tostring("Healthy"), message = select("#", 1, 2) .. ""}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Run(tc.script, map[string]any{"metadata": map[string]any{"name": "x"}})
			if (err != nil) != tc.wantErr {
				t.Errorf("error %v, want an error: %v", err, tc.wantErr)
			}
		})
	}
}
