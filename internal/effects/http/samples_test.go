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

package http

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestSamplesValidate: every Tool and ClusterTool of the samples and the
// examples passes the checks its manager makes, in seconds, where the
// end-to-end tests find a refusal after minutes (a schema pattern over
// the bound of matches() did).
func TestSamplesValidate(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, root := range []string{"../../../config/samples", "../../../examples"} {
		err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for doc := range bytes.SplitSeq(b, []byte("\n---")) {
			var obj struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
				Spec v1.ToolSpec `json:"spec"`
			}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if obj.Kind != "Tool" && obj.Kind != "ClusterTool" {
				continue
			}
			n++
			if err := c.Validate(&obj.Spec); err != nil {
				t.Errorf("%s: %s %s: %v", f, obj.Kind, obj.Metadata.Name, err)
			}
		}
	}
	if n < 5 {
		t.Fatalf("found %d tools in the samples and examples; want at least 5", n)
	}
}
