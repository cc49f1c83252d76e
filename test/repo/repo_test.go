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

// Package repo checks that the repository explains itself: what a build
// leaves in its root stays out of git, every number the code and the docs
// cite from docs/design.md is there, and the log reads at a glance.
package repo

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, from this package's folder.
var root = filepath.Join("..", "..")

// run runs a command in the repository's root and returns its output.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		if exit, ok := errors.AsType[*exec.ExitError](err); ok {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, exit.Stderr)
		}
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// TestBuildOutputsIgnored: `go build ./X` of any command of the module
// writes the binary into the repository's root under X's last element;
// .gitignore must keep every such binary out of git (a 53 MB binary was
// once committed so).
func TestBuildOutputsIgnored(t *testing.T) {
	mains := run(t, "go", "list", "-find", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	module := strings.TrimSpace(run(t, "go", "list", "-m"))
	n := 0
	for ip := range strings.FieldsSeq(mains) {
		name := path.Base(ip)
		if fi, err := os.Stat(filepath.Join(root, name)); err == nil && fi.IsDir() {
			// go build refuses to write over a folder (./cmd).
			continue
		}
		n++
		cmd := exec.Command("git", "check-ignore", "-q", "--", name)
		cmd.Dir = root
		err := cmd.Run()
		exit, _ := errors.AsType[*exec.ExitError](err)
		switch {
		case err == nil:
		case exit != nil && exit.ExitCode() == 1:
			t.Errorf("go build .%s leaves %s in the repository's root, and .gitignore does not ignore /%s",
				strings.TrimPrefix(ip, module), name, name)
		default:
			t.Fatalf("git check-ignore %s: %v", name, err)
		}
	}
	if n == 0 {
		t.Fatal("go list found no command to check")
	}
}

// citation is a number of docs/design.md: an invariant (I), a fault of the
// fault matrix (F), a sequence (S) or a write of the write budget (W).
var citation = regexp.MustCompile(`\b[FSIW][0-9]{1,2}[a-z]?\b`)

// TestDesignNumbersCited: every such number cited in the code, the
// Makefile or the docs is one that docs/design.md has.
func TestDesignNumbersCited(t *testing.T) {
	design, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	defined := map[string]bool{}
	for _, c := range citation.FindAllString(string(design), -1) {
		defined[c] = true
	}
	if !defined["I1"] || !defined["F1"] || !defined["S1"] || !defined["W1"] {
		t.Fatalf("docs/design.md numbers none of I1, F1, S1, W1: found %v", defined)
	}
	for f := range strings.FieldsSeq(run(t, "git", "ls-files", "--", "*.go", "*.md", "Makefile")) {
		file, err := os.Open(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			for _, c := range citation.FindAllString(sc.Text(), -1) {
				if !defined[c] {
					t.Errorf("%s:%d cites %s, which docs/design.md does not have", f, line, c)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		_ = file.Close()
	}
}
