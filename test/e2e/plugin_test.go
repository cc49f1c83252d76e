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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	"sigs.k8s.io/yaml"

	"github.com/once-dev/once/internal/kubectlonce"
	"github.com/once-dev/once/internal/presence"
	"github.com/once-dev/once/test/sandbox"
)

// runOnce runs `kubectl once ARGS` with the suite's kubectl, bin/ on its
// PATH so that kubectl finds the plugin bin/kubectl-once (make build), and
// the suite's admin kubeconfig. It returns stdout, and an error with
// stderr.
func runOnce(args ...string) (string, error) {
	GinkgoHelper()
	stdout, _, err := runOnceStreams(args...)
	return stdout, err
}

// runOnceStreams runs `kubectl once ARGS` as runOnce does, and returns its
// stderr too.
func runOnceStreams(args ...string) (string, string, error) {
	GinkgoHelper()
	return runPlugin(filepath.Join(cp.Assets, "kubectl"), append([]string{"once"}, args...)...)
}

// runPlugin runs program ARGS (kubectl, or the plugin itself) with bin/ on
// its PATH and the suite's admin kubeconfig, and returns stdout and stderr,
// and an error with stderr.
func runPlugin(program string, args ...string) (string, string, error) {
	GinkgoHelper()
	plugin := filepath.Join(root, "bin", "kubectl-once")
	_, err := os.Stat(plugin)
	Expect(err).NotTo(HaveOccurred(), "the plugin is missing: run make build")
	ctx, cancel := context.WithTimeout(context.Background(), kubectlTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, program, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "KUBECONFIG="+cp.Kubeconfig,
		"PATH="+filepath.Join(root, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " \"'") {
			shown[i] = fmt.Sprintf("%q", a)
		}
	}
	name := filepath.Base(program)
	_, _ = fmt.Fprintf(GinkgoWriter, "$ %s %s\n%s%s\n", name, strings.Join(shown, " "), stdout.String(), stderr.String())
	if err != nil {
		return stdout.String(), stderr.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), stderr.String(), nil
}

// completions runs a completion, `program ARGS` (kubectl __complete once
// ... or kubectl-once __complete ...), and returns the choices, without
// their descriptions and without cobra's closing directive.
func completions(program string, args ...string) []string {
	GinkgoHelper()
	out, _, err := runPlugin(program, args...)
	Expect(err).NotTo(HaveOccurred())
	var choices []string
	for line := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(line, ":") {
			break
		}
		choice, _, _ := strings.Cut(line, "\t")
		choices = append(choices, choice)
	}
	return choices
}

// once runs `kubectl once` and expects it to succeed.
func once(args ...string) string {
	GinkgoHelper()
	out, err := runOnce(args...)
	Expect(err).NotTo(HaveOccurred())
	return out
}

// onceFails runs `kubectl once` and expects it to fail with a message.
func onceFails(message string, args ...string) {
	GinkgoHelper()
	_, err := runOnce(args...)
	Expect(err).To(MatchError(ContainSubstring("error: " + message)))
}

// withoutAges drops the relative times ("(2s ago)") of a story, which
// change from one call to the next.
func withoutAges(story string) string {
	return regexp.MustCompile(`\((in )?[0-9a-z]+( ago)?\)`).ReplaceAllString(story, "")
}

// readerRBAC lets the user reader get and list operations and sagas in a
// namespace, and nothing else.
const readerRBAC = `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: once-reader
rules:
- apiGroups: [effects.once.dev]
  resources: [sideeffectoperations, sagas]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: once-reader
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: once-reader
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: reader
`

var _ = Describe("The kubectl once plugin", func() {
	It("lists an operation in NeedsReview, tells its story, and resolves it", func() {
		ns := newNamespace("plugin")
		startManager(ns, manager{holder: "plugin"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, toolYAML("mailer", "None"))
		apply(ns, readerRBAC)
		Expect(once("review", "-n", ns)).To(Equal("Nothing needs a person in namespace " + ns + ".\n"))
		Expect(once("review", "-n", ns, "--exit-code", "-o", "json")).To(MatchJSON(`{"items": []}`),
			"nothing waits: exit 0, and an empty list")

		apply(ns, opYAML("x", "mailer", "", `{"to": "a@example.com"}`))
		waitFor(ns, "seo/x", "Stalled")
		Expect(jsonpath(ns, "seo/x", "{.status.state}")).To(Equal("NeedsReview"))

		By("applying a duplicate of it, which waits behind it")
		apply(ns, opYAML("x-again", "mailer", "x", `{"to": "a@example.com"}`))
		waitFor(ns, "seo/x-again", "jsonpath={.status.duplicateOf}=x")

		By("listing both with review")
		review := strings.Split(strings.TrimSpace(once("review", "-n", ns)), "\n")
		Expect(review).To(HaveLen(3), "a header, the operation and its duplicate")
		Expect(strings.Fields(review[0])).To(Equal([]string{"KIND", "NAME", "STATE", "AGE", "WHY"}))
		Expect(strings.Fields(review[1])[:3]).To(Equal([]string{"SideEffectOperation", "x", "NeedsReview"}))
		stalled := jsonpath(ns, "seo/x", `{.status.conditions[?(@.type=="Stalled")].message}`)
		Expect(stalled).NotTo(BeEmpty())
		Expect(review[1]).To(ContainSubstring(stalled[:40]))
		Expect(strings.Fields(review[2])[:3]).To(Equal([]string{"SideEffectOperation", "x-again", "WaitingForOriginal"}))
		Expect(review[2]).To(HaveSuffix("Duplicate of x, which needs review: resolve x"))
		onceFails("x-again is a duplicate of x and makes no call of its own: resolve x if it needs review",
			"resolve", "x-again", "--retry", "-n", ns)
		Expect(once("review", "-A")).To(MatchRegexp(`(?m)^` + ns + `\s+SideEffectOperation\s+x\s+NeedsReview\s`))

		By("reading the same as JSON, and --exit-code failing while anything waits")
		var list struct {
			Items []struct{ Namespace, Kind, Name, State, Why string } `json:"items"`
		}
		Expect(json.Unmarshal([]byte(once("review", "-n", ns, "-o", "json")), &list)).To(Succeed())
		Expect(list.Items).To(HaveLen(2))
		Expect([]string{list.Items[0].Name, list.Items[0].State, list.Items[1].Name, list.Items[1].State}).To(
			Equal([]string{"x", "NeedsReview", "x-again", "WaitingForOriginal"}))
		Expect(once("review", "-n", ns, "-o", "yaml")).To(ContainSubstring("state: NeedsReview"))
		table, err := runOnce("review", "-n", ns, "--exit-code")
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "want exit status 1, got %v", err)
		Expect(exit.ExitCode()).To(Equal(1))
		Expect(table).To(ContainSubstring("x-again"), "the table is printed as without --exit-code")

		By("telling its story with why")
		story := once("why", "x", "-n", ns)
		request := jsonpath(ns, "seo/x", "{.status.observations[0].request}")
		outcome := jsonpath(ns, "seo/x", "{.status.observations[0].outcome}")
		Expect(story).To(ContainSubstring("SideEffectOperation " + ns + "/x\n"))
		Expect(story).To(ContainSubstring("Tool mailer, operation charge.create"))
		Expect(story).To(MatchRegexp(`(?m)^  \S+Z\s+call\s+1\s+` + outcome + `, ` + request))
		Expect(story).To(MatchRegexp(`(?m)^  \S+Z\s+-> NeedsReview\s+1\s+NeedsReview: `))
		Expect(strings.Index(story, "-> Started")).To(BeNumerically("<", strings.Index(story, " call ")))
		Expect(strings.Index(story, " call ")).To(BeNumerically("<", strings.Index(story, "-> NeedsReview")))
		Expect(story).To(ContainSubstring("1 field, request hash sha256:"))
		Expect(story).NotTo(ContainSubstring("a@example.com"), "parameter values stay out of the story")
		Expect(withoutAges(once("why", "seo/x", "-n", ns))).To(Equal(withoutAges(story)))

		By("telling the same story as JSON and YAML, with the fields apart")
		var doc kubectlonce.Story
		Expect(json.Unmarshal([]byte(once("why", "x", "-n", ns, "-o", "json")), &doc)).To(Succeed())
		Expect([]string{doc.Kind, doc.Namespace, doc.Name, doc.State}).To(Equal([]string{"SideEffectOperation", ns, "x", "NeedsReview"}))
		Expect(doc.Why).To(Equal(jsonpath(ns, "seo/x", `{.status.conditions[?(@.type=="Ready")].message}`)))
		Expect(doc.Operation).NotTo(BeNil())
		Expect([]string{doc.Operation.ToolKind, doc.Operation.Tool, doc.Operation.Operation}).To(
			Equal([]string{"Tool", "mailer", "charge.create"}))
		Expect(doc.Operation.ParameterFields).To(Equal(1))
		Expect(doc.Saga).To(BeNil())
		var kinds []string
		for _, e := range doc.Entries {
			kinds = append(kinds, e.Type+" "+e.State)
		}
		Expect(kinds).To(Equal([]string{"Transition Started", "Call ", "Transition Unknown", "Transition NeedsReview"}),
			"the entries of the table, in its order")
		Expect([]any{doc.Entries[1].Attempt, doc.Entries[1].Outcome, doc.Entries[1].Request, doc.Entries[1].Holder}).To(
			Equal([]any{int32(1), outcome, request, "plugin"}), "the call: what the tool answered, and to which manager")
		Expect(once("why", "x", "-n", ns, "-o", "json")).NotTo(ContainSubstring("a@example.com"))
		Expect(once("why", "x", "-n", ns, "-o", "yaml")).To(MatchRegexp(`(?m)^state: NeedsReview$`))
		onceFails(`--output "wide": use json or yaml`, "why", "x", "-n", ns, "-o", "wide")

		By("completing names from the cluster, with the plugin's __complete and through kubectl")
		plugin := filepath.Join(root, "bin", "kubectl-once")
		Expect(completions(plugin, "__complete", "")).To(ContainElements(
			"approve", "completion", "resolve", "review", "version", "why"))
		Expect(completions(plugin, "__complete", "why", "-n", ns, "")).To(Equal([]string{"x", "x-again"}))
		Expect(completions(plugin, "__complete", "why", "-n", ns, "seo/x-")).To(Equal([]string{"seo/x-again"}))
		Expect(completions(plugin, "__complete", "resolve", "-n", ns, "")).To(Equal([]string{"x"}),
			"only what is in NeedsReview: the duplicate waits behind it")
		Expect(completions(plugin, "__complete", "resolve", "x", "--dry-run", "")).To(Equal([]string{"none", "client", "server"}))
		Expect(completions(plugin, "__complete", "why", "x", "-o", "")).To(Equal([]string{"json", "yaml"}))
		Expect(completions(plugin, "__complete", "review", "-n", "e2e-")).To(ContainElement(ns))
		kubectlBin := filepath.Join(cp.Assets, "kubectl")
		Expect(completions(kubectlBin, "__complete", "once", "")).To(ContainElements("review", "version", "why"),
			"kubectl runs kubectl_complete-once, from bin/ on the PATH")
		Expect(completions(kubectlBin, "__complete", "once", "resolve", "-n", ns, "")).To(Equal([]string{"x"}))
		// bash runs the script as it would on a <TAB>: the function
		// _get_comp_words_by_ref of the bash-completion package, which the
		// script needs and this machine lacks, is stood in for.
		comp, _, err := runPlugin("bash", "-c", `_get_comp_words_by_ref() { cur=${COMP_WORDS[COMP_CWORD]}; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
source <(kubectl-once completion bash)
COMP_WORDS=(kubectl-once ver); COMP_CWORD=1; __start_kubectl-once 2>/dev/null; echo "${COMPREPLY[@]}"
COMP_WORDS=(kubectl-once why -n `+ns+` x-); COMP_CWORD=4; __start_kubectl-once 2>/dev/null; echo "${COMPREPLY[@]}"`)
		Expect(err).NotTo(HaveOccurred())
		Expect(comp).To(Equal("version\nx-again\n"), "bash completes a subcommand, and a name from the cluster")
		zsh, _, err := runPlugin(plugin, "completion", "zsh")
		Expect(err).NotTo(HaveOccurred())
		Expect(zsh).To(HavePrefix("#compdef kubectl-once\ncompdef _kubectl-once kubectl-once\n"))
		Expect(zsh).To(ContainSubstring("__complete"), "the zsh script asks the plugin, as the bash one does")

		By("refusing what cannot be done, with errors that say why")
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1))
		id := effects[0].ID
		onceFails("no SideEffectOperation or Saga nope in namespace "+ns,
			"resolve", "nope", "--committed", "--external-id", id, "-n", ns)
		onceFails("no SideEffectOperation or Saga nope in namespace "+ns, "why", "nope", "-n", ns)
		onceFails("--committed needs --external-id", "resolve", "x", "--committed", "-n", ns)
		onceFails("choose one of --committed, --retry, --fail and --compensated",
			"resolve", "x", "--retry", "--fail", "-n", ns)
		onceFails("you may not patch sideeffectoperations.effects.once.dev in namespace "+ns,
			"resolve", "x", "--retry", "--as=reader", "-n", ns)
		onceFails("you may not list sideeffectoperations.effects.once.dev in namespace "+ns,
			"review", "--as=nobody", "-n", ns)
		_, err = runOnce("review", "--as=nobody", "-n", ns, "--exit-code")
		Expect(errors.As(err, &exit)).To(BeTrue(), "want exit status 2, got %v", err)
		Expect(exit.ExitCode()).To(Equal(2), "with --exit-code an error is 2, apart from the 1 of something waiting")
		Expect(jsonpath(ns, "seo/x", "{.spec.resolution}")).To(BeEmpty())

		By("resolving it in dry runs, which change nothing")
		version := jsonpath(ns, "seo/x", "{.metadata.resourceVersion}")
		admin := kubectl("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		Expect(admin).NotTo(BeEmpty())
		onceFails(`--dry-run "true": use none, client or server`, "resolve", "x", "--retry", "--dry-run=true", "-n", ns)
		Expect(once("resolve", "x", "--committed", "--external-id", id, "--by", "alice", "--dry-run=server", "-n", ns)).To(Equal(
			"sideeffectoperation/x: would write spec.resolution MarkCommitted (external id " + id + ") by alice " +
				"(authenticated as " + admin + "); nothing changed (server dry run)\n"))
		var dry struct {
			APIVersion, Kind string
			Spec             struct{ Resolution map[string]string }
		}
		Expect(json.Unmarshal([]byte(once("resolve", "x", "--retry", "--by", "alice", "--dry-run=server", "-o", "json", "-n", ns)),
			&dry)).To(Succeed())
		Expect([]string{dry.APIVersion, dry.Kind}).To(Equal([]string{"effects.once.dev/v1alpha1", "SideEffectOperation"}))
		Expect(dry.Spec.Resolution).To(Equal(map[string]string{"action": "Retry", "by": "alice", "user": admin}),
			"the object as the API server would store it: its admission policy added the user")
		Expect(once("resolve", "x", "--retry", "--by", "alice", "--dry-run=client", "-n", ns)).To(Equal(
			"sideeffectoperation/x: would write spec.resolution Retry by alice; nothing changed (client dry run)\n"))
		Expect(once("resolve", "x", "--retry", "--by", "alice", "--dry-run=client", "-o", "yaml", "-n", ns)).To(
			ContainSubstring("resolution:\n    action: Retry\n    by: alice\n"), "sent nowhere: no user added")
		Expect(jsonpath(ns, "seo/x", "{.spec.resolution}")).To(BeEmpty())
		Expect(jsonpath(ns, "seo/x", "{.metadata.resourceVersion}")).To(Equal(version), "nothing was written")

		By("resolving it with the id found in the tool's ledger")
		out := once("resolve", "x", "--committed", "--external-id", id, "--by", "alice",
			"--reason", "found in the ledger", "-n", ns)
		user := jsonpath(ns, "seo/x", "{.spec.resolution.user}")
		Expect(user).NotTo(BeEmpty(), "the admission policy records the authenticated writer")
		Expect(out).To(ContainSubstring("MarkCommitted (external id " + id + ") by alice (authenticated as " + user + ")"))
		waitFor(ns, "seo/x", "Ready")
		Expect(jsonpath(ns, "seo/x", "{.status.state}")).To(Equal("Committed"))
		Expect(jsonpath(ns, "seo/x", "{.status.externalObjectID}")).To(Equal(id))
		Expect(jsonpath(ns, "seo/x", "{.spec.resolution.action} {.spec.resolution.by} {.spec.resolution.reason}")).
			To(Equal("MarkCommitted alice found in the ledger"))
		Expect(effectsFor(ns)).To(HaveLen(1))
		waitState(ns, "x-again", "Committed")
		Expect(jsonpath(ns, "seo/x-again", "{.status.externalObjectID}")).To(Equal(id))

		By("telling who resolved it")
		story = once("why", "x", "-n", ns)
		Expect(story).To(ContainSubstring("Resolved:"))
		Expect(story).To(MatchRegexp(`Resolved:\s+MarkCommitted \(external id ` + id + `\) by alice \(authenticated as ` +
			user + `\) \("found in the ledger"\), applied \S+Z \(.* ago\), out of NeedsReview`))
		Expect(story).To(MatchRegexp(`(?m)^  \S+Z\s+resolution\s+1\s+MarkCommitted, external id ` + id +
			`: Resolved by alice \(authenticated as ` + user + `\): found in the ledger$`))
		Expect(story).To(MatchRegexp(`(?m)^  \S+Z\s+-> Committed\s+1\s+ResolvedCommitted: `))
		Expect(strings.Index(story, "-> NeedsReview")).To(BeNumerically("<", strings.Index(story, " resolution ")))
		Expect(strings.Index(story, " resolution ")).To(BeNumerically("<", strings.Index(story, "-> Committed")))

		By("refusing to resolve it again, and listing nothing")
		onceFails("x is Committed: there is nothing to resolve", "resolve", "x", "--retry", "-n", ns)
		Expect(once("review", "-n", ns)).To(Equal("Nothing needs a person in namespace " + ns + ".\n"))
	})

	It("lists a saga waiting for an approval, and approves it", func() {
		ns := newNamespace("plugin-saga")
		startManager(ns, manager{holder: "plugin-saga"})
		rendered := kubectl("", "kustomize", filepath.Join(root, "config", "samples", "sagas"))
		apply(ns, strings.ReplaceAll(rendered, "http://127.0.0.1:8090", sb.URL))
		apply(ns, readerRBAC)
		waitFor(ns, "saga/scale-checkout", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}=WaitingForApproval`)

		By("listing it with review")
		review := strings.Split(strings.TrimSpace(once("review", "-n", ns)), "\n")
		Expect(review).To(HaveLen(2), "a header and the saga")
		Expect(strings.Fields(review[1])[:3]).To(Equal([]string{"Saga", "scale-checkout", "WaitingForApproval"}))
		Expect(review[1]).To(ContainSubstring("Step config waits for approval"))

		By("telling its story with why")
		story := once("why", "saga/scale-checkout", "-n", ns)
		Expect(story).To(ContainSubstring("Saga " + ns + "/scale-checkout\n"))
		Expect(story).To(MatchRegexp(`(?m)^  ticket: Committed, operation scale-checkout.ticket, external id \S+$`))
		Expect(story).To(ContainSubstring("config: waits for approval (kubectl once approve scale-checkout --step config)"))
		Expect(story).To(ContainSubstring("notify: not started"))
		Expect(story).To(MatchRegexp(`(?m)^  \S+Z\s+-> \w+\s+config\s+WaitingForApproval: Step config waits for approval`))
		Expect(withoutAges(once("why", "scale-checkout", "-n", ns))).To(Equal(withoutAges(story)), "a bare name finds the saga")

		By("refusing approvals that cannot be")
		onceFails("no Saga nope in namespace "+ns, "approve", "nope", "--step", "config", "-n", ns)
		onceFails("saga scale-checkout has no step nope (its steps: ticket, config, notify)",
			"approve", "scale-checkout", "--step", "nope", "-n", ns)
		onceFails("step ticket of saga scale-checkout does not require approval",
			"approve", "scale-checkout", "--step", "ticket", "-n", ns)
		onceFails("you may not patch sagas.effects.once.dev in namespace "+ns,
			"approve", "scale-checkout", "--step", "config", "--as=reader", "-n", ns)
		onceFails("saga scale-checkout is Started: only a saga in NeedsReview can be resolved",
			"resolve", "saga/scale-checkout", "--compensated", "-n", ns)

		By("completing its name and the step to approve")
		plugin := filepath.Join(root, "bin", "kubectl-once")
		Expect(completions(plugin, "__complete", "approve", "-n", ns, "")).To(Equal([]string{"scale-checkout"}))
		Expect(completions(plugin, "__complete", "approve", "scale-checkout", "-n", ns, "--step", "")).To(Equal([]string{"config"}))
		Expect(completions(filepath.Join(cp.Assets, "kubectl"), "__complete", "once", "approve", "-n", ns, "")).To(
			Equal([]string{"scale-checkout"}))

		By("approving it in a server dry run, which changes nothing")
		version := jsonpath(ns, "saga/scale-checkout", "{.metadata.resourceVersion}")
		Expect(once("approve", "scale-checkout", "--step", "config", "--by", "alice", "--dry-run=server", "-n", ns)).To(
			MatchRegexp(`^saga/scale-checkout: step config would be approved by alice \(authenticated as \S+\); ` +
				`nothing changed \(server dry run\)\n$`))
		Expect(once("approve", "scale-checkout", "--step", "config", "--by", "alice", "--dry-run=server", "-o", "yaml", "-n", ns)).To(
			MatchRegexp(`(?m)^  approvals:\n  - by: alice\n    step: config\n    user: \S+$`))
		Expect(jsonpath(ns, "saga/scale-checkout", "{.spec.approvals}")).To(BeEmpty())
		Expect(jsonpath(ns, "saga/scale-checkout", "{.metadata.resourceVersion}")).To(Equal(version))

		By("approving it")
		out := once("approve", "scale-checkout", "--step", "config", "--by", "alice", "--reason", "change window open",
			"--dry-run=none", "-n", ns)
		user := jsonpath(ns, "saga/scale-checkout", "{.spec.approvals[0].user}")
		Expect(user).NotTo(BeEmpty())
		Expect(out).To(ContainSubstring("step config approved by alice (authenticated as " + user + `) ("change window open")`))
		_, err := runOnce("approve", "scale-checkout", "--step", "config", "-n", ns)
		Expect(err).To(MatchError(MatchRegexp(
			`error: step config of saga scale-checkout (is already approved in spec.approvals|was approved) by alice`)))
		waitFor(ns, "saga/scale-checkout", "Ready")
		Expect(jsonpath(ns, "saga/scale-checkout", "{.status.state}")).To(Equal("Committed"))

		By("telling who approved it")
		story = once("why", "saga/scale-checkout", "-n", ns)
		Expect(story).To(MatchRegexp(`(?m)^      approved by alice \(authenticated as ` + user +
			`\) \("change window open"\), applied \S+Z$`))
		Expect(story).To(MatchRegexp(`(?m)^  notify: Committed, operation scale-checkout.notify`))
		var doc kubectlonce.Story
		Expect(json.Unmarshal([]byte(once("why", "saga/scale-checkout", "-n", ns, "-o", "json")), &doc)).To(Succeed())
		Expect([]string{doc.Kind, doc.Name, doc.State}).To(Equal([]string{"Saga", "scale-checkout", "Committed"}))
		Expect(doc.Saga).NotTo(BeNil())
		Expect(doc.Saga.Steps).To(HaveLen(3))
		config := doc.Saga.Steps[1]
		Expect([]string{config.Name, config.State, config.Operation}).To(Equal([]string{"config", "Committed", "scale-checkout.config"}))
		Expect(config.Approval).NotTo(BeNil())
		Expect(*config.Approval).To(MatchFields(IgnoreExtras, Fields{"By": Equal("alice"), "User": Equal(user),
			"Reason": Equal("change window open"), "Applied": BeTrue(), "Time": Not(BeNil())}))
		Expect(doc.Entries[len(doc.Entries)-1]).To(MatchFields(IgnoreExtras, Fields{"Type": Equal("Transition"),
			"State": Equal("Committed"), "Reason": Equal("Committed")}))
		Expect(once("why", "scale-checkout.config", "-n", ns)).To(MatchRegexp(`(?m)^  Saga:\s+scale-checkout, step config$`))
		onceFails("saga scale-checkout is Committed: there is nothing to resolve",
			"resolve", "saga/scale-checkout", "--retry", "-n", ns)
		Expect(once("review", "-n", ns)).To(Equal("Nothing needs a person in namespace " + ns + ".\n"))
	})

	It("prints its version and the running managers', and warns when they differ", func() {
		ns := newNamespace("plugin-version")
		stamped, err := exec.Command(filepath.Join(root, "bin", "manager"), "--version").Output()
		Expect(err).NotTo(HaveOccurred())
		version := strings.TrimSpace(string(stamped))
		Expect(version).NotTo(BeEmpty())
		p := startManager(ns, manager{holder: "plugin-version"})

		By("finding the manager's version on its Lease, the same as the plugin's (make build stamps both)")
		var v kubectlonce.Version
		Eventually(func() []presence.Manager {
			Expect(json.Unmarshal([]byte(once("version", "-o", "json")), &v)).To(Succeed())
			return v.Managers
		}).Should(ContainElement(MatchFields(IgnoreExtras, Fields{"Namespace": Equal("once-system"),
			"Holder": Equal("plugin-version"), "Version": Equal(version)})))
		Expect(v.Plugin).To(Equal(version))
		out, stderr, err := runOnceStreams("version")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(HavePrefix("Plugin version: " + version + "\nManagers:\n"))
		Expect(out).To(MatchRegexp(`(?m)^  once-system\s+plugin-version\s+` + regexp.QuoteMeta(version) + `\s+\d+s ago$`))
		Expect(stderr).NotTo(ContainSubstring("plugin-version"), "no warning for a manager of the plugin's version")

		By("warning about a manager of another version")
		// A manager of an older build, as its Lease shows it; the
		// manager's own writing of the Lease is what the steps above saw.
		apply(ns, `apiVersion: coordination.k8s.io/v1
kind: Lease
metadata:
  name: once-manager-old
  labels:
    once.dev/manager: "true"
  annotations:
    once.dev/version: v0.0.1-old
spec:
  holderIdentity: old
  leaseDurationSeconds: 300
  renewTime: `+time.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00")+"\n")
		out, stderr, err = runOnceStreams("version", "--manager-namespace", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(MatchRegexp(`(?m)^  ` + ns + `\s+old\s+v0.0.1-old\s+`))
		Expect(stderr).To(Equal("warning: manager old in namespace " + ns + " runs version v0.0.1-old, and this plugin is version " +
			version + "\n"))

		By("saying so when no manager runs, and exiting 0")
		empty := newNamespace("plugin-version-none")
		Expect(once("version", "--manager-namespace", empty)).To(Equal("Plugin version: " + version + "\n" +
			"Manager version: unknown: no running manager found in namespace " + empty +
			" (none renewed a Lease labelled once.dev/manager=true within its duration)\n"))
		out, stderr, err = runOnceStreams("version", "--manager-namespace", empty, "-o", "yaml")
		Expect(err).NotTo(HaveOccurred())
		// Parsed, not compared as text: a version that reads as a number in
		// YAML (a commit such as 5106e96, 5106 times ten to the 96th) is
		// quoted.
		Expect(out).To(HavePrefix("managers: []\n"))
		var printed struct {
			PluginVersion string `json:"pluginVersion"`
		}
		Expect(yaml.Unmarshal([]byte(out), &printed)).To(Succeed())
		Expect(printed.PluginVersion).To(Equal(version))
		Expect(stderr).To(ContainSubstring("no running manager found in namespace " + empty))
		onceFails(`--output "table": use json or yaml`, "version", "-o", "table")

		By("no longer listing a manager that stopped: it deletes its Lease")
		p.Stop(15 * time.Second)
		Expect(json.Unmarshal([]byte(once("version", "-o", "json", "--manager-namespace", "once-system")), &v)).To(Succeed())
		Expect(v.Managers).NotTo(ContainElement(MatchFields(IgnoreExtras, Fields{"Holder": Equal("plugin-version")})))
	})

	It("lists a saga whose compensation failed for good, and resolves it", func() {
		ns := newNamespace("plugin-undo")
		startManager(ns, manager{holder: "plugin-undo"})
		apply(ns, deskYAML("Native"))
		// The desk refuses the notice for good, and then the revert of the
		// config: the saga cannot undo step config and asks a person.
		saga := sagaYAML("change", true)
		revert := "      operation: " + revertConfig + "\n"
		Expect(saga).To(ContainSubstring(revert))
		apply(ns, strings.Replace(saga, revert, revert+"      parameters: {reject: config locked}\n", 1))
		waitSaga(ns, "change", "NeedsReview")
		Expect(jsonpath(ns, "saga/change", "{.status.currentStep}")).To(Equal("config"))

		By("listing it with review and telling its story")
		review := strings.Split(strings.TrimSpace(once("review", "-n", ns)), "\n")
		Expect(review).To(HaveLen(2), "a header and the saga")
		Expect(strings.Fields(review[1])[:3]).To(Equal([]string{"Saga", "change", "NeedsReview"}))
		Expect(review[1]).To(ContainSubstring("The compensation of step config failed for good"))
		story := once("why", "saga/change", "-n", ns)
		Expect(story).To(MatchRegexp(`(?m)^\s+compensation: operation change\.config\.undo, \w+`))
		Expect(story).To(MatchRegexp(`(?m)^  \S+Z\s+-> NeedsReview\s+config\s+CompensationFailed: `))
		Expect(story).To(ContainSubstring("Failed step:"))

		By("refusing what does not fit a saga")
		onceFails("a saga takes --retry or --compensated", "resolve", "saga/change", "--committed", "--external-id", "x", "-n", ns)
		onceFails("saga change waits on step config, not ticket", "resolve", "saga/change", "--step", "ticket",
			"--compensated", "-n", ns)

		By("resolving it: the config was reverted by hand")
		out := once("resolve", "saga/change", "--compensated", "--by", "alice", "--reason", "reverted by hand", "-n", ns)
		user := jsonpath(ns, "saga/change", "{.spec.resolutions[0].user}")
		Expect(user).NotTo(BeEmpty())
		Expect(out).To(ContainSubstring("wrote spec.resolutions for step config: MarkCompensated by alice (authenticated as " +
			user + `) ("reverted by hand")`))
		waitSaga(ns, "change", "Compensated")
		story = once("why", "saga/change", "-n", ns)
		Expect(story).To(MatchRegexp(`compensation resolved: MarkCompensated by alice \(authenticated as ` + user +
			`\) \("reverted by hand"\)`))
		Expect(once("review", "-n", ns)).To(Equal("Nothing needs a person in namespace " + ns + ".\n"))
	})
})
