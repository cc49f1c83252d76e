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
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHackImportsNoTest: no Go file under hack/ imports a package under
// test/. A command that drives a test harness lives beside it, as
// test/<harness>/cmd/<name> (test/README.md, Where the commands live).
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

// target is a rule's name at the start of a Makefile line: "name:" or
// "a b: …", but not a variable's "name := …".
var target = regexp.MustCompile(`^([A-Za-z0-9_.-]+(?:[ \t]+[A-Za-z0-9_.-]+)*)[ \t]*:([^=]|$)`)

// makeTargets are the rules the Makefile defines.
func makeTargets(makefile string) map[string]bool {
	targets := map[string]bool{}
	for line := range strings.Lines(makefile) {
		if m := target.FindStringSubmatch(line); m != nil {
			for name := range strings.FieldsSeq(m[1]) {
				targets[name] = true
			}
		}
	}
	return targets
}

var (
	codeSpan = regexp.MustCompile("`[^`\n]+`")
	quoted   = regexp.MustCompile(`"[^"]*"|'[^']*'`)
)

// namedTargets are the targets of every `make …` in the code spans of a
// Markdown text: the words after make, less its flags (-n) and its
// variables (N=300), up to the end of the command.
func namedTargets(markdown string) []string {
	var named []string
	for _, span := range codeSpan.FindAllString(markdown, -1) {
		words := strings.Fields(quoted.ReplaceAllString(strings.Trim(span, "`"), `""`))
		for i := 0; i < len(words); i++ {
			if words[i] != "make" {
				continue
			}
			for i++; i < len(words); i++ {
				w := words[i]
				if w == "&&" || w == "||" || w == ";" || w == "|" {
					break
				}
				if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
					continue
				}
				named = append(named, strings.TrimRight(w, ";"))
			}
		}
	}
	return named
}

// TestTestMapTargets: every `make <target>` that test/README.md names is
// a rule of the Makefile, so that the map of the test tiers runs as read.
func TestTestMapTargets(t *testing.T) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := makeTargets(string(makefile))
	if !targets["test"] || !targets["test-unit"] {
		t.Fatalf("found neither test nor test-unit among the Makefile's rules: %v", targets)
	}
	readme, err := os.ReadFile(filepath.Join(root, "test", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	named := namedTargets(string(readme))
	if len(named) == 0 {
		t.Fatal("test/README.md names no make target")
	}
	for _, name := range named {
		if !targets[name] {
			t.Errorf("test/README.md names make %s, which the Makefile does not define", name)
		}
	}
}

func TestNamedTargets(t *testing.T) {
	cases := map[string]struct {
		reason   string
		markdown string
		want     []string
	}{
		"One": {
			reason:   "a code span with make and a target names it",
			markdown: "Run `make test-unit` first.",
			want:     []string{"test-unit"},
		},
		"FlagsAndVariables": {
			reason:   "make's flags and variables are not targets",
			markdown: "| `make -n chaos N=300` | `make soak SOAK_FLAGS=\"-duration 10m -ttl 2m\"` |",
			want:     []string{"chaos", "soak"},
		},
		"Several": {
			reason:   "make runs each target it is given, and a command ends at &&",
			markdown: "`make controlplane-up controlplane-down && make demo`",
			want:     []string{"controlplane-up", "controlplane-down", "demo"},
		},
		"Prose": {
			reason:   "make outside a code span is a word",
			markdown: "Tests make sure of it.",
		},
		"GoRun": {
			reason:   "a code span without make names no target",
			markdown: "`go run ./test/chaos/cmd/chaos -h`",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := namedTargets(tc.markdown); !slices.Equal(got, tc.want) {
				t.Errorf("%s: got %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestMakeTargets(t *testing.T) {
	got := makeTargets("VERSION ?= 1\nLDFLAGS := -X v\n.PHONY: demo\ndemo: build ## Run.\n" +
		"$(LOCALBIN):\n\tmkdir -p x\na b: c\nfoo:\n")
	for _, want := range []string{"demo", "a", "b", "foo", ".PHONY"} {
		if !got[want] {
			t.Errorf("rule %s not found in %v", want, got)
		}
	}
	for _, not := range []string{"VERSION", "LDFLAGS", "build"} {
		if got[not] {
			t.Errorf("%s found as a rule in %v", not, got)
		}
	}
}
