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

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// kubectlTimeout bounds one kubectl call, so that a hung call fails the
// test instead of the whole run.
const kubectlTimeout = 5 * time.Minute

// waitTimeout is how long an operation may take to reach a state. The
// machines this runs on are small and noisy; a takeover after a crash
// takes a few seconds.
const waitTimeout = "180s"

// runKubectl runs kubectl against the suite's control plane.
func runKubectl(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	return cp.Kubectl(ctx, stdin, args...)
}

// kubectl runs kubectl and expects it to succeed.
func kubectl(stdin string, args ...string) string {
	GinkgoHelper()
	out, err := runKubectl(stdin, args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// apply applies manifests to a namespace.
func apply(ns, yaml string) string {
	GinkgoHelper()
	return kubectl(yaml, "apply", "-n", ns, "-f", "-")
}

// jsonpath reads a field of an object with kubectl get -o jsonpath.
func jsonpath(ns, object, path string) string {
	GinkgoHelper()
	return kubectl("", "get", "-n", ns, object, "-o", "jsonpath="+path)
}

// waitFor runs kubectl wait for a condition (Ready, Stalled) or a
// jsonpath (`jsonpath={.status.state}=Committed`) on objects ("seo/x",
// "seo --all"), and on failure reports the namespace's operations.
func waitFor(ns, objects, forWhat string) {
	GinkgoHelper()
	if !strings.HasPrefix(forWhat, "jsonpath=") {
		forWhat = "condition=" + forWhat
	}
	args := append([]string{"wait", "-n", ns}, strings.Fields(objects)...)
	_, err := runKubectl("", append(args, "--for="+forWhat, "--timeout="+waitTimeout)...)
	Expect(err).NotTo(HaveOccurred(), func() string { return dumpOperations(ns) })
}

// waitState waits until an operation is in the protocol state.
func waitState(ns, name, state string) {
	GinkgoHelper()
	waitFor(ns, "seo/"+name, "jsonpath={.status.state}="+state)
}

// dumpOperations writes the namespace's operations to a file in the log
// folder and returns a short note with its path, for failure messages.
func dumpOperations(ns string) string {
	out, err := runKubectl("", "get", "seo,idempotencyrecords", "-n", ns, "-o", "yaml")
	if err != nil {
		return fmt.Sprintf("(could not read the operations of %s: %v)", ns, err)
	}
	path := logFile(ns + "-operations-" + time.Now().Format("150405.000"))
	_ = os.WriteFile(path, []byte(out), 0o644)
	states, _ := runKubectl("", "get", "seo", "-n", ns, "-o", "wide")
	return fmt.Sprintf("operations of %s (full YAML in %s):\n%s", ns, path, states)
}

var nsSeq int

// newNamespace creates a namespace for one test. The keys the tool
// receives start with it, so that each test counts its own effects. On
// failure, the test's operations and the paths of the logs are reported.
func newNamespace(slug string) string {
	GinkgoHelper()
	nsSeq++
	ns := fmt.Sprintf("e2e-%02d-%s", nsSeq, slug)
	kubectl("", "create", "namespace", ns)
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			_, _ = fmt.Fprintln(GinkgoWriter, dumpOperations(ns))
			_, _ = fmt.Fprintf(GinkgoWriter, "Logs (control plane: %s):\n", filepath.Join(cp.Dir, "controlplane.log"))
			entries, _ := os.ReadDir(logDir)
			for _, e := range entries {
				_, _ = fmt.Fprintf(GinkgoWriter, "  %s\n", filepath.Join(logDir, e.Name()))
			}
		}
	})
	return ns
}

// logFile is the path of a log in the suite's log folder.
func logFile(name string) string {
	return filepath.Join(logDir, regexp.MustCompile(`[^A-Za-z0-9._-]+`).ReplaceAllString(name, "_")+".log")
}

// manager describes a manager process to start.
type manager struct {
	// holder is its identity in claims.
	holder string
	// failpoints is GOFAIL_FAILPOINTS. With failpoints the manager is
	// bin/manager-failpoints, otherwise the production bin/manager.
	failpoints string
	// args are flags besides the short claims.
	args []string
}

// startManager starts a manager that takes over abandoned claims within
// seconds, and stops it (if it still runs) when the test ends.
func startManager(ns string, m manager) *harness.Process {
	GinkgoHelper()
	bin := "manager"
	if m.failpoints != "" {
		bin = "manager-failpoints"
	}
	p, err := cp.StartManager(harness.ManagerOptions{
		Binary:     filepath.Join(root, "bin", bin),
		Holder:     m.holder,
		Failpoints: m.failpoints,
		Args:       append([]string{"--max-claim=2s", "--claim-grace=1s"}, m.args...),
		Log:        logFile(ns + "-" + m.holder),
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { p.Stop(15 * time.Second) })
	return p
}

// toolYAML is a Tool for the sandbox's charges in mode Native, Lookup or
// None: a short timeout, so that a claim lasts seconds, and in Lookup mode a
// lookup by key that may prove absence a second after an attempt.
func toolYAML(name, mode string) string {
	m := strings.ToLower(mode)
	lookup := ""
	if mode == "Lookup" {
		lookup = `
    lookup:
      path: /lookup/charges?key={idempotencyKey}
      found: response.status == 200 && type(response.body) == map && 'key' in response.body && response.body.key == key
      absent: response.status == 404 && type(response.body) == map && response.body.error == 'not_found'`
	}
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: Tool
metadata:
  name: %s
spec:
  http:
    url: %s
  idempotency:
    mode: %s
    lookupDelay: 1s
  timeout: 2s
  operations:
  - name: charge.create
    method: POST
    path: /%s/charges%s
    response:
      externalObjectID: response.body.id
`, name, sb.URL, mode, m, lookup)
}

// opYAML is a charge.create operation on a tool; key may be empty (the
// name is the key) and params is a JSON object.
func opYAML(name, tool, key, params string) string {
	keyLine := ""
	if key != "" {
		keyLine = "\n  idempotencyKey: " + key
	}
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: SideEffectOperation
metadata:
  name: %s
spec:
  toolRef:
    name: %s
  operation: charge.create%s
  parameters: %s
  retryPolicy:
    initialBackoff: 200ms
    maxBackoff: 2s
`, name, tool, keyLine, params)
}

// toolKey is the key the tool receives for an operation's scope; tool is
// "<Kind>:<name>", for example "Tool:payments".
func toolKey(ns, tool, operation, key string) string {
	return ns + "/" + tool + "/" + operation + "/" + key
}

// effectsFor returns the effects the tool performed for the namespace's
// keys, from its ledger.
func effectsFor(ns string) []sandbox.Effect {
	GinkgoHelper()
	all, err := ledger.Effects(context.Background())
	Expect(err).NotTo(HaveOccurred())
	var mine []sandbox.Effect
	for _, e := range all {
		if strings.HasPrefix(e.Key, ns+"/") {
			mine = append(mine, e)
		}
	}
	return mine
}

// effectsPerKey counts the namespace's effects per key the tool received.
func effectsPerKey(ns string) map[string]int {
	GinkgoHelper()
	n := map[string]int{}
	for _, e := range effectsFor(ns) {
		n[e.Key]++
	}
	return n
}

// faults makes the sandbox fail the namespace's requests as the rules say,
// until the test ends. A rule's KeyPrefix, if any, continues the
// namespace's: "Tool:desk/config.revert/".
func faults(ns string, rules ...sandbox.FaultRule) {
	GinkgoHelper()
	for i := range rules {
		rules[i].KeyPrefix = ns + "/" + rules[i].KeyPrefix
	}
	Expect(ledger.SetFaults(context.Background(), 1, rules)).To(Succeed())
	DeferCleanup(func() { Expect(ledger.ClearFaults(context.Background())).To(Succeed()) })
}

// expectKilled waits for a process to end on its own and expects it was
// killed by SIGKILL (a failpoint's kill -9), not an exit of any kind.
func expectKilled(p *harness.Process) {
	GinkgoHelper()
	code, err := p.Wait(3 * time.Minute)
	Expect(err).NotTo(HaveOccurred(), "the process was expected to kill itself; log: %s", p.Log)
	sig, signaled := p.Signaled()
	Expect(signaled).To(BeTrue(), "the process exited with code %d instead of being killed; log: %s", code, p.Log)
	Expect(sig).To(Equal(syscall.SIGKILL), "log: %s", p.Log)
}
