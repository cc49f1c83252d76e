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

package repo

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHackImportsNoTest: no Go file under hack/ imports a package under
// test/. A command that drives a test harness lives beside it, as
// test/<harness>/cmd/<name> (the Layout paragraph of README.md).
func TestHackImportsNoTest(t *testing.T) {
	module := strings.TrimSpace(run(t, "go", "list", "-m"))
	testTree := module + "/test"
	fset := token.NewFileSet()
	n := 0
	err := filepath.WalkDir(filepath.Join(root, "hack"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		n++
		// Every file, whatever its build constraints say.
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			ip, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if ip == testTree || strings.HasPrefix(ip, testTree+"/") {
				rel, _ := filepath.Rel(root, p)
				t.Errorf("%s imports %s: move the command to test/<harness>/cmd/<name>", rel, ip)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("found no Go file under hack/ to check")
	}
}
