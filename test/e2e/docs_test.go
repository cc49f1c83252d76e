//go:build e2e

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

package e2e

// The docs test runs every ```sh block of README.md and docs/*.md, so that
// the docs cannot drift from the code. The convention (also in
// docs/README.md):
//
//   - Each file's ```sh blocks run in order, as one script, in one bash
//     process with `set -euo pipefail`, from the repository root. A command
//     that fails fails the test with the file, the line and the output.
//   - The script sees a control plane whose kubeconfig context's namespace
//     is a fresh namespace of its own (KUBECONFIG), a manager and the
//     sandbox tool running, PATH with the repository's bin/ and the control
//     plane's kubectl first, SANDBOX_URL, where the sandbox listens, and
//     PLUGIN_DIR, a temporary folder, so that `make install-plugin` leaves
//     the tester's home alone.
//     `make demo` prints the same variables for its own control plane.
//   - Sample output is never in a ```sh block: it goes in a ```text block
//     after it. Alternatives are separate, complete blocks, each of which
//     runs. ```yaml, ```text and other blocks are not run.
//   - A block whose state the prose describes (an operation in
//     NeedsReview) is prepared by an earlier block of the same file. A
//     setup step that readers need not see is a hidden block: a ```sh
//     fence inside an HTML comment that starts with `<!-- docs-test`. It
//     runs in its place like any other block. Keep them rare.
//   - Attributes in braces after the language change how a block runs:
//     {check=make-n}: the block holds only make commands that cannot run
//     here (make test runs this test; make demo starts a control plane of
//     its own and runs until Ctrl-C; make chaos and make bench run for
//     long). Each is checked with `make -n`, which proves that the target
//     exists and its prerequisites resolve, and nothing more. The test
//     lists these blocks in its report, so nobody takes them for run.
//     {needs=PROGRAM}: the block needs PROGRAM on PATH. Without it the
//     test fails, unless ONCE_DOCS_MISSING names the program (a comma
//     separated list), in which case the block is skipped and listed as
//     skipped. Any other attribute fails the test, so that a typo cannot
//     silently turn a block off.
//   - Background processes a script starts are killed when it ends, and
//     the sandbox's faults are cleared.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
)

// docTimeout bounds one file's script.
const docTimeout = 15 * time.Minute

// docBlock is one ```sh block of a markdown file.
type docBlock struct {
	// line is the line of the opening fence, counted from 1.
	line int
	// lines are the block's lines, without the fences.
	lines []string
	// hidden marks a block inside a <!-- docs-test ... --> comment.
	hidden bool
	// check is the value of the check attribute ("make-n"), if any.
	check string
	// needs is the value of the needs attribute, if any.
	needs string
}

// fence matches an opening or closing code fence and captures the
// language and the attributes in braces.
var fence = regexp.MustCompile("^```([A-Za-z0-9_-]*)\\s*(?:\\{([^}]*)\\})?\\s*$")

// parseDoc returns the ```sh blocks of a markdown text, visible and
// hidden, in order.
func parseDoc(text string) ([]docBlock, error) {
	var (
		blocks []docBlock
		cur    *docBlock
		inCode bool
		hidden bool
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !inCode {
			trimmed := strings.TrimSpace(line)
			switch {
			case strings.HasPrefix(trimmed, "<!-- docs-test"):
				hidden = true
				continue
			case hidden && trimmed == "-->":
				hidden = false
				continue
			}
			m := fence.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			inCode = true
			if m[1] != "sh" {
				if m[2] != "" {
					return nil, fmt.Errorf("line %d: attributes on a %q block, which is never run", n, m[1])
				}
				continue
			}
			cur = &docBlock{line: n, hidden: hidden}
			for attr := range strings.FieldsSeq(m[2]) {
				name, value, _ := strings.Cut(attr, "=")
				switch {
				case name == "check" && value == "make-n":
					cur.check = value
				case name == "needs" && value != "":
					cur.needs = value
				default:
					return nil, fmt.Errorf("line %d: unknown attribute %q (known: check=make-n, needs=PROGRAM)", n, attr)
				}
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			inCode = false
			if cur != nil {
				blocks = append(blocks, *cur)
				cur = nil
			}
			continue
		}
		if cur != nil {
			cur.lines = append(cur.lines, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inCode {
		return nil, fmt.Errorf("a code block is not closed")
	}
	if hidden {
		return nil, fmt.Errorf("a <!-- docs-test comment is not closed")
	}
	return blocks, nil
}

// makeCommand matches a make command of a check=make-n block:
// `make target... [VAR=value...] [# comment]`.
var makeCommand = regexp.MustCompile(`^\s*make((?:\s+[A-Za-z0-9_.=/-]+)+)\s*(#.*)?$`)

// makeChecks turns a check=make-n block into `make -n` commands.
func makeChecks(b docBlock) ([]string, error) {
	var cmds []string
	for i, l := range b.lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		m := makeCommand.FindStringSubmatch(l)
		if m == nil {
			return nil, fmt.Errorf("line %d: a check=make-n block holds only make commands, not %q", b.line+1+i, t)
		}
		cmds = append(cmds, "make -n"+m[1])
	}
	if len(cmds) == 0 {
		return nil, fmt.Errorf("line %d: a check=make-n block without a make command", b.line)
	}
	return cmds, nil
}

// docScript is a file's script and what it will not run.
type docScript struct {
	text string
	// lineOf maps a line of the script to the line of the markdown file.
	lineOf map[int]int
	// notRun lists the blocks that are checked but not run, or skipped.
	notRun []string
}

// failMarker is what the script's ERR trap writes, with the script's line
// and the exit status.
const failMarker = "docs-test-failed-at"

// buildScript makes one bash script of a file's blocks. missing lists
// programs that may be absent (ONCE_DOCS_MISSING); found reports whether a
// program is on PATH.
func buildScript(file string, blocks []docBlock, missing []string, found func(string) bool) (docScript, error) {
	var b strings.Builder
	s := docScript{lineOf: map[int]int{}}
	n := 0
	emit := func(line string, docLine int) {
		b.WriteString(line)
		b.WriteByte('\n')
		n++
		if docLine > 0 {
			s.lineOf[n] = docLine
		}
	}
	emit("set -euo pipefail", 0)
	emit(fmt.Sprintf(`trap 'echo "%s $LINENO $?" >&2' ERR`, failMarker), 0)
	for _, blk := range blocks {
		where := fmt.Sprintf("%s:%d", file, blk.line)
		if blk.needs != "" && !found(blk.needs) {
			if !slices.Contains(missing, blk.needs) {
				return s, fmt.Errorf("%s needs %s, which is not on PATH (build it, or set ONCE_DOCS_MISSING=%s to skip such blocks)",
					where, blk.needs, blk.needs)
			}
			s.notRun = append(s.notRun, fmt.Sprintf("%s skipped: needs %s, not built (ONCE_DOCS_MISSING)", where, blk.needs))
			continue
		}
		emit(fmt.Sprintf("echo %s >&2", strconv.Quote("### "+where)), 0)
		if blk.check == "make-n" {
			cmds, err := makeChecks(blk)
			if err != nil {
				return s, fmt.Errorf("%s: %w", file, err)
			}
			for _, c := range cmds {
				emit(c+" >/dev/null", blk.line)
			}
			s.notRun = append(s.notRun, fmt.Sprintf("%s not run, checked with: %s", where, strings.Join(cmds, "; ")))
			continue
		}
		for i, l := range blk.lines {
			emit(l, blk.line+1+i)
		}
	}
	s.text = b.String()
	return s, nil
}

// docFiles are README.md and docs/*.md, relative to the root.
func docFiles(root string) []string {
	files := []string{"README.md"}
	more, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	for _, f := range more {
		rel, _ := filepath.Rel(root, f)
		files = append(files, rel)
	}
	return files
}

// docsMissing is ONCE_DOCS_MISSING as a list.
func docsMissing() []string {
	var out []string
	for p := range strings.SplitSeq(os.Getenv("ONCE_DOCS_MISSING"), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

var _ = Describe("The docs", func() {
	docRoot, err := harness.Root()
	if err != nil {
		panic(err)
	}
	var withoutBlocks []string
	for _, file := range docFiles(docRoot) {
		text, err := os.ReadFile(filepath.Join(docRoot, file))
		if err != nil {
			panic(err)
		}
		blocks, parseErr := parseDoc(string(text))
		if parseErr == nil && len(blocks) == 0 {
			withoutBlocks = append(withoutBlocks, file)
			continue
		}
		It("run every sh block of "+file, func() {
			Expect(parseErr).NotTo(HaveOccurred(), file)
			runDoc(file, blocks)
		})
	}
	It("list the docs that have no sh block", func() {
		AddReportEntry("docs without sh blocks", strings.Join(withoutBlocks, ", "), ReportEntryVisibilityAlways)
		Expect(withoutBlocks).NotTo(ContainElement("README.md"))
	})
})

// runDoc runs a file's blocks as one script against the suite's control
// plane, in a fresh namespace with a manager of its own.
func runDoc(file string, blocks []docBlock) {
	slug := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(strings.TrimSuffix(filepath.Base(file), ".md"), "-"))
	ns := newNamespace("docs-" + slug)
	startManager(ns, manager{holder: "docs-" + slug})
	DeferCleanup(func() { _ = ledger.ClearFaults(context.Background()) })

	By("making a kubeconfig whose context's namespace is " + ns)
	kubeconfig := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	data, err := os.ReadFile(cp.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	Expect(os.WriteFile(kubeconfig, data, 0o600)).To(Succeed())
	_, err = runKubectl("", "config", "set-context", "--current", "--namespace="+ns, "--kubeconfig="+kubeconfig)
	Expect(err).NotTo(HaveOccurred())

	path := filepath.Join(root, "bin") + string(os.PathListSeparator) + cp.Assets +
		string(os.PathListSeparator) + os.Getenv("PATH")
	found := func(program string) bool {
		for dir := range strings.SplitSeq(path, string(os.PathListSeparator)) {
			if st, err := os.Stat(filepath.Join(dir, program)); err == nil && st.Mode()&0o111 != 0 {
				return true
			}
		}
		return false
	}
	script, err := buildScript(file, blocks, docsMissing(), found)
	Expect(err).NotTo(HaveOccurred())
	ran := 0
	for _, b := range blocks {
		if b.check == "" && (b.needs == "" || found(b.needs)) {
			ran++
		}
	}
	AddReportEntry(file, fmt.Sprintf("%d sh blocks: %d run, %d not run\n%s", len(blocks), ran, len(script.notRun),
		strings.Join(script.notRun, "\n")), ReportEntryVisibilityAlways)

	By(fmt.Sprintf("running %d blocks of %s as one bash script", len(blocks), file))
	scriptPath := filepath.Join(GinkgoT().TempDir(), "doc.sh")
	Expect(os.WriteFile(scriptPath, []byte(script.text), 0o600)).To(Succeed())
	logPath := logFile("docs-" + slug)
	out, runErr := runScript(scriptPath, logPath, []string{
		"KUBECONFIG=" + kubeconfig,
		"PATH=" + path,
		"SANDBOX_URL=" + sb.URL,
		"PLUGIN_DIR=" + GinkgoT().TempDir(),
	})
	if runErr != nil {
		at := "(line unknown)"
		if all := regexp.MustCompile(failMarker+` (\d+) (\d+)`).FindAllStringSubmatch(out, -1); all != nil {
			m := all[len(all)-1]
			n, _ := strconv.Atoi(m[1])
			if docLine, ok := script.lineOf[n]; ok {
				at = fmt.Sprintf("%s:%d (exit status %s)", file, docLine, m[2])
			}
		}
		Fail(fmt.Sprintf("a command of %s failed at %s: %v\nlast output (all of it in %s):\n%s\n%s",
			file, at, runErr, logPath, tail(out, 60), dumpOperations(ns)))
	}
}

// runScript runs a script with bash from the root, in a process group of
// its own that is killed when the script ends (its background jobs with
// it), and returns its output (stdout and stderr), also written to logPath.
func runScript(scriptPath, logPath string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var buf bytes.Buffer
	log, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer func() { _ = log.Close() }()
	w := io.MultiWriter(&buf, log, GinkgoWriter)
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Start()
	if err != nil {
		return "", err
	}
	pgid := cmd.Process.Pid
	err = cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	return buf.String(), err
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestParseDoc checks the convention's parser without a control plane:
// go test -tags e2e ./test/e2e/ -run TestParseDoc.
func TestParseDoc(t *testing.T) {
	doc := strings.Join([]string{
		"# Title",                         // 1
		"```sh",                           // 2
		"kubectl get seo",                 // 3
		"```",                             // 4
		"```text",                         // 5
		"NAME STATE",                      // 6
		"```",                             // 7
		"<!-- docs-test: setup",           // 8
		"```sh",                           // 9
		"curl -X PUT x",                   // 10
		"```",                             // 11
		"-->",                             // 12
		"```sh {check=make-n}",            // 13
		"make demo   # runs until Ctrl-C", // 14
		"```",                             // 15
		"```sh {needs=kubectl-once}",      // 16
		"kubectl once review -A",          // 17
		"```",                             // 18
	}, "\n")
	blocks, err := parseDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{line: 2, lines: []string{"kubectl get seo"}},
		{line: 9, lines: []string{"curl -X PUT x"}, hidden: true},
		{line: 13, lines: []string{"make demo   # runs until Ctrl-C"}, check: "make-n"},
		{line: 16, lines: []string{"kubectl once review -A"}, needs: "kubectl-once"},
	}
	if diff := cmp.Diff(want, blocks, cmp.AllowUnexported(docBlock{})); diff != "" {
		t.Errorf("parseDoc (-want, +got):\n%s", diff)
	}

	s, err := buildScript("x.md", blocks, []string{"kubectl-once"}, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"kubectl get seo", "curl -X PUT x", "make -n demo >/dev/null"} {
		if !strings.Contains(s.text, line+"\n") {
			t.Errorf("the script lacks %q:\n%s", line, s.text)
		}
	}
	if strings.Contains(s.text, "kubectl once") {
		t.Errorf("a block that needs a missing program was run:\n%s", s.text)
	}
	if len(s.notRun) != 2 {
		t.Errorf("not run: %q, want the make-n block and the skipped one", s.notRun)
	}
	for n, docLine := range s.lineOf {
		if got := strings.Split(s.text, "\n")[n-1]; docLine == 3 && got != "kubectl get seo" {
			t.Errorf("script line %d maps to doc line 3 but is %q", n, got)
		}
	}
	if _, err := buildScript("x.md", blocks, nil, func(string) bool { return false }); err == nil {
		t.Error("a block that needs a missing program passed without ONCE_DOCS_MISSING")
	}

	for name, bad := range map[string]string{
		"unknown attribute":     "```sh {check=skip}\nls\n```",
		"attribute on text":     "```text {check=make-n}\nx\n```",
		"unclosed block":        "```sh\nls",
		"unclosed hidden block": "<!-- docs-test\n```sh\nls\n```",
	} {
		if _, err := parseDoc(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := makeChecks(docBlock{line: 1, lines: []string{"make demo && rm -rf /"}, check: "make-n"}); err == nil {
		t.Error("a check=make-n block with a command that is not make passed")
	}
}
