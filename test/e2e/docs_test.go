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

// The docs test runs every ```sh block of README.md and docs/*.md where a
// reader runs them: on a running `make demo`, in a second terminal, after
// the exports the demo prints. The convention (also in docs/README.md):
//
//   - The test starts hack/demo.sh (what `make demo` runs after building)
//     with a state folder of its own (ONCE_DEMO_DIR) and free ports
//     (ONCE_SANDBOX_ADDR, ONCE_METRICS_ADDR), waits until it says it is
//     running, and takes the `export` lines it printed.
//   - Each file's ```sh blocks run in order, as one script, in one bash
//     process with `set -euo pipefail`, from the repository root, after
//     those export lines, over a minimal environment: HOME a temporary
//     folder, PATH the system's (without the repository's bin/ and the
//     control plane's kubectl, which only the printed PATH brings), and what
//     a user's home provides to make: Go's settings (go env) and
//     ONCE_CACHE_DIR, where make demo built the control plane's binaries.
//     A command that fails fails the test with the file, the line and the
//     output.
//   - Every file runs on the same demo, in an order drawn from the suite's
//     random seed (-ginkgo.seed=N repeats it), so a file may not rely on
//     another having run:
//     a block runs on the demo as it stands (its namespace is `default`),
//     adding objects of names of its own, or in a namespace it creates
//     visibly. After each file the test checks that it left the demo as it
//     found it for the next: the kubeconfig's namespace is still the
//     demo's, and no sandbox fault it set is pending.
//   - There are no hidden blocks: a setup step is a visible block that the
//     prose introduces. The parser refuses `<!-- docs-test` comments,
//     which once held hidden setup.
//   - Sample output is never in a ```sh block: it goes in a ```text block
//     after it. Alternatives are separate, complete blocks, each of which
//     runs. ```yaml, ```text and other blocks are not run.
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
//   - Background processes a script starts are killed when it ends.
//   - At the end the test stops the demo with SIGINT to its process group,
//     as Ctrl-C does, and checks that it stopped everything it started: its
//     processes, its control plane, its ports.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/url"
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
	"github.com/once-dev/once/test/sandbox"
)

const (
	// docTimeout bounds one file's script.
	docTimeout = 15 * time.Minute
	// demoStartTimeout bounds the demo's start, up to "Press Ctrl-C".
	demoStartTimeout = 10 * time.Minute
	// demoStopTimeout bounds the demo's stop after Ctrl-C.
	demoStopTimeout = 2 * time.Minute
	// demoReady is the line the demo prints once everything runs.
	demoReady = "Press Ctrl-C to stop everything."
)

// docBlock is one ```sh block of a markdown file.
type docBlock struct {
	// line is the line of the opening fence, counted from 1.
	line int
	// lines are the block's lines, without the fences.
	lines []string
	// check is the value of the check attribute ("make-n"), if any.
	check string
	// needs is the value of the needs attribute, if any.
	needs string
}

// fence matches an opening or closing code fence and captures the
// language and the attributes in braces.
var fence = regexp.MustCompile("^```([A-Za-z0-9_-]*)\\s*(?:\\{([^}]*)\\})?\\s*$")

// hiddenBlock starts the HTML comment that once held a hidden block.
const hiddenBlock = "<!-- docs-test"

// parseDoc returns the ```sh blocks of a markdown text, in order.
func parseDoc(text string) ([]docBlock, error) {
	var (
		blocks []docBlock
		cur    *docBlock
		inCode bool
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if !inCode {
			if strings.HasPrefix(strings.TrimSpace(line), hiddenBlock) {
				return nil, fmt.Errorf("line %d: a hidden block (%s): show the setup in a visible block the prose introduces",
					n, hiddenBlock)
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
			cur = &docBlock{line: n}
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

// buildScript makes one bash script of a file's blocks, after the lines of
// prelude (the exports the demo printed). missing lists programs that may be
// absent (ONCE_DOCS_MISSING); found reports whether a program is on PATH.
func buildScript(file string, prelude, blocks []docBlock, missing []string, found func(string) bool) (docScript, error) {
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
	for _, p := range prelude {
		for _, l := range p.lines {
			emit(l, 0)
		}
	}
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
	slices.Sort(more)
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

// exportLine matches an export the demo prints: `  export NAME=value`.
var exportLine = regexp.MustCompile(`^\s*export ([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)

// demoExports returns the export lines of the demo's output, as printed,
// and the names they set.
func demoExports(out string) (lines, names []string) {
	for l := range strings.SplitSeq(out, "\n") {
		if m := exportLine.FindStringSubmatch(l); m != nil {
			lines = append(lines, strings.TrimSpace(l))
			names = append(names, m[1])
		}
	}
	return lines, names
}

// demo is a running hack/demo.sh and what a reader takes from it.
type demo struct {
	cmd  *exec.Cmd
	done chan struct{}
	// dir is its state folder (ONCE_DEMO_DIR); log holds what it printed.
	dir, log string
	// sandboxAddr and metricsAddr are the addresses it was given.
	sandboxAddr, metricsAddr string
	// exports are the export lines it printed, as printed.
	exports []string
	// env is the minimal environment the docs' scripts start from.
	env []string
	// kubeconfig, path and sandboxURL are KUBECONFIG, PATH and SANDBOX_URL
	// after the exports, as a reader's shell has them.
	kubeconfig, path, sandboxURL string
	// namespace is the kubeconfig context's namespace the demo left.
	namespace string
}

// output is what the demo printed so far.
func (d *demo) output() string {
	b, _ := os.ReadFile(d.log)
	return string(b)
}

// exited reports whether the demo's script has ended.
func (d *demo) exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// interrupt sends SIGINT to the demo's process group, as Ctrl-C in its
// terminal does, and waits for the script to end.
func (d *demo) interrupt(timeout time.Duration) error {
	if d.exited() {
		return nil
	}
	if err := syscall.Kill(-d.cmd.Process.Pid, syscall.SIGINT); err != nil {
		return err
	}
	select {
	case <-d.done:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("the demo did not stop within %s of Ctrl-C", timeout)
	}
}

// kill stops whatever a failed run left: the demo's process group and
// its control plane.
func (d *demo) kill() {
	if !d.exited() {
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-d.done
	}
	cmd := exec.Command(filepath.Join(root, "hack", "controlplane.sh"), "stop")
	cmd.Env = append(os.Environ(), "ONCE_CONTROLPLANE_DIR="+filepath.Join(d.dir, "controlplane"))
	_ = cmd.Run()
}

// kubectl runs the demo's kubectl with its kubeconfig, in the scripts'
// environment.
func (d *demo) kubectl(args ...string) (string, error) {
	kubectl, err := lookPath("kubectl", d.path)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, args...)
	cmd.Env = append(slices.Clone(d.env), "KUBECONFIG="+d.kubeconfig, "PATH="+d.path)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// lookPath finds a program on a PATH list.
func lookPath(program, path string) (string, error) {
	for dir := range strings.SplitSeq(path, string(os.PathListSeparator)) {
		p := filepath.Join(dir, program)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on %s", program, path)
}

// startDemo runs hack/demo.sh as a reader would (make demo builds first;
// the suite's binaries are built), with its own state folder and free
// ports, and waits until it says it is running.
func startDemo() *demo {
	GinkgoHelper()
	d := &demo{dir: filepath.Join(workDir, "demo"), log: logFile("demo"), done: make(chan struct{})}
	Expect(os.MkdirAll(d.dir, 0o755)).To(Succeed())
	var err error
	d.sandboxAddr, err = harness.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	d.metricsAddr, err = harness.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	log, err := os.Create(d.log)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = log.Close() }()

	d.cmd = exec.Command(filepath.Join(root, "hack", "demo.sh"))
	d.cmd.Dir = root
	d.cmd.Env = append(withoutEnv(os.Environ(), "KUBECONFIG"),
		"ONCE_DEMO_DIR="+d.dir, "ONCE_SANDBOX_ADDR="+d.sandboxAddr, "ONCE_METRICS_ADDR="+d.metricsAddr)
	// A process group of its own, as a terminal's foreground job has, so
	// that SIGINT reaches every process of it, as Ctrl-C does.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	Expect(d.cmd.Start()).To(Succeed())
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	DeferCleanup(d.kill)

	By("waiting for the demo to print " + strconv.Quote(demoReady) + " (its output: " + d.log + ")")
	deadline := time.Now().Add(demoStartTimeout)
	for !strings.Contains(d.output(), demoReady) {
		if d.exited() {
			Fail(fmt.Sprintf("the demo ended before it was ready (%s):\n%s", d.cmd.ProcessState, tail(d.output(), 40)))
		}
		if time.Now().After(deadline) {
			Fail(fmt.Sprintf("the demo was not ready after %s:\n%s", demoStartTimeout, tail(d.output(), 40)))
		}
		time.Sleep(time.Second)
	}
	return d
}

// withoutEnv drops the variables named from an environment.
func withoutEnv(env []string, names ...string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return slices.Contains(names, name)
	})
}

// goSettings are the Go settings a user's home holds (go env -w writes
// them there) that the docs' make commands need: caches, proxy, toolchain.
var goSettings = []string{"GOCACHE", "GOMODCACHE", "GOPATH", "GOFLAGS", "GOPROXY", "GOSUMDB", "GONOSUMDB",
	"GOPRIVATE", "GONOPROXY", "GOINSECURE", "GOTOOLCHAIN"}

// readerEnv is the environment a reader's second terminal starts from:
// HOME a fresh folder, the system's PATH without the repository's bin/ and
// the control plane's kubectl (only the demo's exports bring them), and what
// a user's home provides the docs' make commands: Go's settings and
// ONCE_CACHE_DIR, where make demo built the control plane's binaries.
func readerEnv(home string) []string {
	assets := filepath.Clean(cp.Assets)
	var path []string
	for dir := range strings.SplitSeq(os.Getenv("PATH"), string(os.PathListSeparator)) {
		clean := filepath.Clean(dir)
		if dir == "" || clean == assets || clean == root || strings.HasPrefix(clean, root+string(os.PathSeparator)) {
			continue
		}
		path = append(path, dir)
	}
	// A temporary folder of its own, which runDoc checks for credentials
	// a doc left behind.
	tmp := filepath.Join(home, "tmp")
	Expect(os.MkdirAll(tmp, 0o700)).To(Succeed())
	env := []string{
		"HOME=" + home,
		"TMPDIR=" + tmp,
		"PATH=" + strings.Join(path, string(os.PathListSeparator)),
		"LANG=C.UTF-8",
		// assets is <cache>/controlplane/kube-<version>-etcd-<version>.
		"ONCE_CACHE_DIR=" + filepath.Dir(filepath.Dir(assets)),
	}
	out, err := exec.Command("go", append([]string{"env"}, goSettings...)...).Output()
	Expect(err).NotTo(HaveOccurred())
	for i, v := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if i < len(goSettings) && v != "" {
			env = append(env, goSettings[i]+"="+v)
		}
	}
	return env
}

// readExports evaluates the demo's export lines in bash over the reader's
// environment, as a reader's shell does when they are pasted, and keeps
// the values the checks need.
func (d *demo) readExports() {
	GinkgoHelper()
	cmd := exec.Command("bash", "-c", strings.Join(d.exports, "\n")+"\n"+
		`printf '%s\n' "$KUBECONFIG" "$PATH" "$SANDBOX_URL"`)
	cmd.Env = d.env
	out, err := cmd.Output()
	Expect(err).NotTo(HaveOccurred())
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	Expect(vals).To(HaveLen(3))
	d.kubeconfig, d.path, d.sandboxURL = vals[0], vals[1], vals[2]
	Expect(d.sandboxURL).To(Equal("http://" + d.sandboxAddr))
	kubectlPath, err := lookPath("kubectl", d.path)
	Expect(err).NotTo(HaveOccurred())
	Expect(kubectlPath).To(Equal(filepath.Join(cp.Assets, "kubectl")), "the printed PATH puts the control plane's kubectl first")
	for _, program := range []string{"kubectl-once", "once-mcp", "mcp-call", "manager-failpoints"} {
		p, err := lookPath(program, d.path)
		Expect(err).NotTo(HaveOccurred())
		Expect(p).To(Equal(filepath.Join(root, "bin", program)))
	}
	d.namespace, err = d.kubectl("config", "view", "--minify", "-o", "jsonpath={..namespace}")
	Expect(err).NotTo(HaveOccurred(), d.namespace)
	if d.namespace == "" {
		d.namespace = "default"
	}
}

var _ = Describe("The docs, on a running demo", Ordered, ContinueOnFailure, func() {
	docRoot, err := harness.Root()
	if err != nil {
		panic(err)
	}
	var (
		d             *demo
		withoutBlocks []string
		order         []string
	)
	// Files run in an order of the seed's, so that none comes to rely on
	// another.
	files := docFiles(docRoot)
	seed := uint64(GinkgoRandomSeed())
	rand.New(rand.NewPCG(seed, seed)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })

	BeforeAll(func() {
		By("starting hack/demo.sh, as make demo does after building")
		d = startDemo()
		var names []string
		d.exports, names = demoExports(d.output())
		Expect(names).To(ConsistOf("KUBECONFIG", "PATH", "SANDBOX_URL"), "the exports the demo printed")
		d.env = readerEnv(GinkgoT().TempDir())
		d.readExports()
		AddReportEntry("the demo's exports", strings.Join(d.exports, "\n"), ReportEntryVisibilityAlways)
		AddReportEntry("the files' order (from -ginkgo.seed)", strings.Join(order, ", "), ReportEntryVisibilityAlways)
	})

	for _, file := range files {
		text, err := os.ReadFile(filepath.Join(docRoot, file))
		if err != nil {
			panic(err)
		}
		blocks, parseErr := parseDoc(string(text))
		if parseErr == nil && len(blocks) == 0 {
			withoutBlocks = append(withoutBlocks, file)
			continue
		}
		order = append(order, file)
		It("run every sh block of "+file, func() {
			Expect(parseErr).NotTo(HaveOccurred(), file)
			runDoc(d, file, blocks)
		})
	}

	It("list the docs that have no sh block", func() {
		slices.Sort(withoutBlocks)
		AddReportEntry("docs without sh blocks", strings.Join(withoutBlocks, ", "), ReportEntryVisibilityAlways)
		Expect(withoutBlocks).NotTo(ContainElement("README.md"))
	})

	It("stop with the demo on Ctrl-C, which leaves nothing running", func() {
		apiserver := kubeconfigServer(d.kubeconfig)
		By("sending SIGINT to the demo's process group")
		Expect(d.interrupt(demoStopTimeout)).To(Succeed(), tail(d.output(), 40))
		Expect(d.cmd.ProcessState.ExitCode()).To(Equal(130), "a demo stopped by Ctrl-C exits 130:\n%s", tail(d.output(), 40))
		Expect(d.output()).To(ContainSubstring("== Stopping"))
		By("checking that no process of its group is left")
		Eventually(func() error { return syscall.Kill(-d.cmd.Process.Pid, 0) }).WithTimeout(30 * time.Second).
			Should(MatchError(syscall.ESRCH))
		By("checking that its control plane stopped and its state is gone")
		status := exec.Command(filepath.Join(root, "hack", "controlplane.sh"), "status")
		status.Env = append(os.Environ(), "ONCE_CONTROLPLANE_DIR="+filepath.Join(d.dir, "controlplane"))
		out, err := status.CombinedOutput()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "hack/controlplane.sh status: %v\n%s", err, out)
		Expect(exit.ExitCode()).To(Equal(3), "hack/controlplane.sh status says stopped (3):\n%s", out)
		Expect(filepath.Join(d.dir, "controlplane", "etcd")).NotTo(BeADirectory())
		By("checking that its ports are closed: sandbox, metrics, API server")
		for _, addr := range []string{d.sandboxAddr, d.metricsAddr, apiserver} {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				_ = c.Close()
			}
			Expect(err).To(HaveOccurred(), "%s still accepts connections", addr)
		}
	})
})

// kubeconfigServer is the host:port of a kubeconfig's first server.
func kubeconfigServer(path string) string {
	GinkgoHelper()
	data, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	m := regexp.MustCompile(`(?m)^\s*server:\s*(\S+)`).FindSubmatch(data)
	Expect(m).NotTo(BeNil(), "no server in %s", path)
	u, err := url.Parse(string(m[1]))
	Expect(err).NotTo(HaveOccurred())
	return u.Host
}

// runDoc runs a file's blocks as one script on the running demo, after the
// exports it printed, then checks that the file left the demo as it found
// it for the next file.
func runDoc(d *demo, file string, blocks []docBlock) {
	Expect(d).NotTo(BeNil(), "the demo did not start")
	Expect(d.exited()).To(BeFalse(), "the demo is no longer running:\n%s", tail(d.output(), 40))
	slug := strings.ToLower(regexp.MustCompile(`[^A-Za-z0-9]+`).ReplaceAllString(strings.TrimSuffix(filepath.Base(file), ".md"), "-"))
	found := func(program string) bool { _, err := lookPath(program, d.path); return err == nil }
	prelude := []docBlock{{lines: d.exports}}
	script, err := buildScript(file, prelude, blocks, docsMissing(), found)
	Expect(err).NotTo(HaveOccurred())
	ran := 0
	for _, b := range blocks {
		if b.check == "" && (b.needs == "" || found(b.needs)) {
			ran++
		}
	}
	AddReportEntry(file, fmt.Sprintf("%d sh blocks: %d run, %d not run\n%s", len(blocks), ran, len(script.notRun),
		strings.Join(script.notRun, "\n")), ReportEntryVisibilityAlways)

	By(fmt.Sprintf("running %d blocks of %s as one bash script, after the demo's exports", len(blocks), file))
	scriptPath := filepath.Join(GinkgoT().TempDir(), "doc.sh")
	Expect(os.WriteFile(scriptPath, []byte(script.text), 0o600)).To(Succeed())
	logPath := logFile("docs-" + slug)
	out, runErr := runScript(scriptPath, logPath, d.env)
	if runErr != nil {
		at := "(line unknown)"
		if all := regexp.MustCompile(failMarker+` (\d+) (\d+)`).FindAllStringSubmatch(out, -1); all != nil {
			m := all[len(all)-1]
			n, _ := strconv.Atoi(m[1])
			if docLine, ok := script.lineOf[n]; ok {
				at = fmt.Sprintf("%s:%d (exit status %s)", file, docLine, m[2])
			}
		}
		states, _ := d.kubectl("get", "seo,sagas", "-A", "-o", "wide")
		Fail(fmt.Sprintf("a command of %s failed at %s: %v\nlast output (all of it in %s):\n%s\noperations and sagas of the demo:\n%s",
			file, at, runErr, logPath, tail(out, 60), states))
	}

	By("checking that " + file + " left the demo as it found it")
	ns, err := d.kubectl("config", "view", "--minify", "-o", "jsonpath={..namespace}")
	Expect(err).NotTo(HaveOccurred(), ns)
	if ns == "" {
		ns = "default"
	}
	if ns != d.namespace {
		// Put it back, so that the next files run where they should.
		_, _ = d.kubectl("config", "set-context", "--current", "--namespace="+d.namespace)
	}
	Expect(ns).To(Equal(d.namespace), "%s left the kubeconfig's namespace changed", file)
	faults, err := (&sandbox.Client{BaseURL: d.sandboxURL}).Faults(context.Background())
	Expect(err).NotTo(HaveOccurred())
	for _, r := range faults.Rules {
		Expect(r.Remaining).To(BeZero(), "%s left a sandbox fault pending: %+v", file, r)
	}
	for _, kv := range d.env {
		if tmp, ok := strings.CutPrefix(kv, "TMPDIR="); ok {
			Expect(filesWithTokens(tmp)).To(BeEmpty(), "%s left files that hold a token in $TMPDIR", file)
		}
	}
}

// kubeconfigToken is a kubeconfig user's bearer token.
var kubeconfigToken = regexp.MustCompile(`(?m)^\s*token:\s*\S`)

// filesWithTokens are the files under dir that hold a kubeconfig's token,
// by name: never what they hold.
func filesWithTokens(dir string) []string {
	GinkgoHelper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		if info, err := e.Info(); err != nil || info.Size() > 1<<20 {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if kubeconfigToken.Match(data) {
			found = append(found, path)
		}
		return nil
	})
	Expect(err).NotTo(HaveOccurred())
	return found
}

// runScript runs a script with bash from the root, in a process group of
// its own that is killed when the script ends (its background jobs with
// it), with exactly the environment env, and returns its output (stdout and
// stderr), written to logPath.
func runScript(scriptPath, logPath string, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), docTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", scriptPath)
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A file, not a pipe: a background job that keeps it open cannot hold
	// up the wait.
	log, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer func() { _ = log.Close() }()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return "", err
	}
	pgid := cmd.Process.Pid
	err = cmd.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	out, readErr := os.ReadFile(logPath)
	if readErr != nil {
		return "", readErr
	}
	return string(out), err
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
		"```sh {check=make-n}",            // 8
		"make demo   # runs until Ctrl-C", // 9
		"```",                             // 10
		"```sh {needs=kubectl-once}",      // 11
		"kubectl once review -A",          // 12
		"```",                             // 13
	}, "\n")
	blocks, err := parseDoc(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []docBlock{
		{line: 2, lines: []string{"kubectl get seo"}},
		{line: 8, lines: []string{"make demo   # runs until Ctrl-C"}, check: "make-n"},
		{line: 11, lines: []string{"kubectl once review -A"}, needs: "kubectl-once"},
	}
	if diff := cmp.Diff(want, blocks, cmp.AllowUnexported(docBlock{})); diff != "" {
		t.Errorf("parseDoc (-want, +got):\n%s", diff)
	}

	prelude := []docBlock{{lines: []string{"export SANDBOX_URL=http://127.0.0.1:8090"}}}
	s, err := buildScript("x.md", prelude, blocks, []string{"kubectl-once"}, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"export SANDBOX_URL=http://127.0.0.1:8090", "kubectl get seo", "make -n demo >/dev/null"} {
		if !strings.Contains(s.text, line+"\n") {
			t.Errorf("the script lacks %q:\n%s", line, s.text)
		}
	}
	if strings.Index(s.text, "export SANDBOX_URL") > strings.Index(s.text, "kubectl get seo") {
		t.Errorf("the exports come after the blocks:\n%s", s.text)
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
	if _, err := buildScript("x.md", nil, blocks, nil, func(string) bool { return false }); err == nil {
		t.Error("a block that needs a missing program passed without ONCE_DOCS_MISSING")
	}

	for name, bad := range map[string]string{
		"unknown attribute": "```sh {check=skip}\nls\n```",
		"attribute on text": "```text {check=make-n}\nx\n```",
		"unclosed block":    "```sh\nls",
		"hidden block":      "<!-- docs-test: setup\n```sh\nls\n```\n-->",
		"hidden, indented":  "  <!-- docs-test\n```sh\nls\n```\n-->",
	} {
		if _, err := parseDoc(bad); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := makeChecks(docBlock{line: 1, lines: []string{"make demo && rm -rf /"}, check: "make-n"}); err == nil {
		t.Error("a check=make-n block with a command that is not make passed")
	}
}

func TestDemoExports(t *testing.T) {
	out := strings.Join([]string{
		"== Running. Try it yourself, in another terminal:",
		"  export KUBECONFIG=/tmp/demo/controlplane/kubeconfig",
		"  export PATH=/src/once/bin:/cache/kube:$PATH",
		"  export SANDBOX_URL=http://127.0.0.1:8090",
		"  kubectl get seo",
		"Press Ctrl-C to stop everything.",
	}, "\n")
	lines, names := demoExports(out)
	if diff := cmp.Diff([]string{"KUBECONFIG", "PATH", "SANDBOX_URL"}, names); diff != "" {
		t.Errorf("names (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff("export PATH=/src/once/bin:/cache/kube:$PATH", lines[1]); diff != "" {
		t.Errorf("the PATH line, as printed (-want, +got):\n%s", diff)
	}
}
