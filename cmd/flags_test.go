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
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/kustomize/kyaml/resid"
	"sigs.k8s.io/yaml"
)

// managerFlags is the manager's flag set as main builds it: its own flags
// and the logger's, and what controller-runtime adds to flag.CommandLine
// (--kubeconfig).
func managerFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("manager", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bindFlags(fs, &options{})
	flag.CommandLine.VisitAll(func(f *flag.Flag) {
		if fs.Lookup(f.Name) == nil && !strings.HasPrefix(f.Name, "test.") {
			fs.Var(f.Value, f.Name, f.Usage)
		}
	})
	return fs
}

// TestConfigArgs renders every overlay of config/ that runs the manager,
// and the optional patches of config/default applied to it, and parses the
// manager container's arguments with the manager's own flag set: a flag it
// does not define would stop it at start (a CrashLoopBackOff).
func TestConfigArgs(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "config"))
	if err != nil {
		t.Fatal(err)
	}
	// The patches config/default lists, commented out, for an admin to
	// enable. Each is applied over config/default in an overlay of its own.
	optional := map[string]string{
		"MetricsCertificates": filepath.Join(root, "default", "cert_metrics_manager_patch.yaml"),
	}
	overlays := map[string]string{
		"Default":    filepath.Join(root, "default"),
		"Namespaced": filepath.Join(root, "namespaced"),
	}
	for name, patch := range optional {
		// kustomize takes relative paths only.
		dir := t.TempDir()
		base, err := filepath.Rel(dir, overlays["Default"])
		if err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(dir, patch)
		if err != nil {
			t.Fatal(err)
		}
		k := types.Kustomization{Resources: []string{base},
			Patches: []types.Patch{{Path: rel, Target: &types.Selector{ResId: resIDOf("Deployment")}}}}
		b, err := yaml.Marshal(k)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), b, 0o600); err != nil {
			t.Fatal(err)
		}
		overlays["Default"+name] = dir
	}
	for name, dir := range overlays {
		t.Run(name, func(t *testing.T) {
			opts := krusty.MakeDefaultOptions()
			opts.LoadRestrictions = types.LoadRestrictionsNone
			res, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), dir)
			if err != nil {
				t.Fatalf("kustomize build %s: %v", dir, err)
			}
			managers := 0
			for _, r := range res.Resources() {
				if r.GetKind() != "Deployment" {
					continue
				}
				b, err := r.AsYAML()
				if err != nil {
					t.Fatal(err)
				}
				d := &appsv1.Deployment{}
				if err := yaml.Unmarshal(b, d); err != nil {
					t.Fatal(err)
				}
				for _, c := range d.Spec.Template.Spec.Containers {
					if c.Name != "manager" {
						continue
					}
					managers++
					if err := managerFlags().Parse(c.Args); err != nil {
						t.Errorf("the manager of %s would not start with the args %q: %v", d.Name, c.Args, err)
					}
				}
			}
			if managers == 0 {
				t.Errorf("%s renders no manager container", dir)
			}
		})
	}
}

// resIDOf selects resources of a kind.
func resIDOf(kind string) resid.ResId {
	return resid.ResId{Gvk: resid.Gvk{Kind: kind}}
}
