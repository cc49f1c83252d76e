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
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// The three steps of the change every saga here makes, and the tool
// operation each step and compensation runs.
const (
	openTicket   = "ticket.open"
	closeTicket  = "ticket.close"
	setConfig    = "config.set"
	revertConfig = "config.revert"
	sendNotice   = "notice.send"
)

var _ = Describe("A Saga whose manager is killed with kill -9", func() {
	DescribeTable("while step 2's outcome is unknown, then replaced, runs only the uncommitted steps, each once",
		func(mode, reconciledBy string) {
			ns := newNamespace("saga-kill-" + strings.ToLower(mode))
			apply(ns, deskYAML(mode))
			expectOthersAtRest(ns)

			// The kill stands for a node that crashes, or a manager the
			// kernel OOM-kills, at the worst moment of step 2: the desk
			// has made the config and answered, and the answer is not
			// recorded. The ticket's call is the first to pass the
			// failpoint and goes on; the config's is the second and dies.
			By("running a manager that kills itself after the desk answered step 2")
			crashing := startManager(ns, manager{holder: "crashing",
				failpoints: failpoint.ExecuteAfterAnswer + `=1*off->return("kill")`})
			apply(ns, sagaYAML("change", false))
			expectKilled(crashing)
			expectKilledAt(crashing, failpoint.ExecuteAfterAnswer)

			By("reading what the dead manager left: step 1 recorded, step 2 claimed and made, its outcome not recorded")
			Expect(jsonpath(ns, "saga/change", "{.status.state}")).To(Equal("Started"))
			Expect(sagaOperations(ns, "change")).To(Equal([]string{"change.config", "change.ticket"}))
			Expect(jsonpath(ns, "seo/change.ticket", "{.status.state}")).To(Equal("Committed"))
			Expect(jsonpath(ns, "seo/change.config", "{.status.state}")).To(Equal("Started"))
			Expect(jsonpath(ns, "seo/change.config", "{.status.claim.holder}")).To(Equal("crashing"))
			Expect(jsonpath(ns, "seo/change.config", "{.status.externalObjectID}")).To(BeEmpty())
			Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs"}))
			ticketUID := jsonpath(ns, "seo/change.ticket", "{.metadata.uid}")
			configUID := jsonpath(ns, "seo/change.config", "{.metadata.uid}")

			By("starting a fresh manager without failpoints")
			successor := startManager(ns, manager{holder: "successor"})
			waitSaga(ns, "change", "Committed")

			By("finding each step's effect once at the desk, in order, under the step's key")
			Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
			Expect(effectsPerKey(ns)).To(Equal(map[string]int{
				toolKey(ns, "Tool:desk", openTicket, "change/ticket"): 1,
				toolKey(ns, "Tool:desk", setConfig, "change/config"):  1,
				toolKey(ns, "Tool:desk", sendNotice, "change/notify"): 1,
			}))
			ids := effectIDs(ns)
			Expect(jsonpath(ns, "saga/change", "{.status.steps[*].state}")).To(Equal("Committed Committed Committed"))
			Expect(jsonpath(ns, "saga/change", "{.status.steps[*].externalObjectID}")).To(Equal(strings.Join(ids, " ")))
			Expect(jsonpath(ns, "seo/change.config", "{.spec.parameters.ticket}")).To(Equal(ids[0]),
				"step 2 names the ticket step 1 made")

			By("finding step 1 untouched: the same operation, one call, made by the dead manager")
			Expect(jsonpath(ns, "seo/change.ticket", "{.metadata.uid}")).To(Equal(ticketUID))
			Expect(jsonpath(ns, "seo/change.ticket", "{.status.attempts}")).To(Equal("1"))
			// A first attempt that committed keeps no observation: one
			// claim and its commit, both before the fresh manager started.
			Expect(jsonpath(ns, "seo/change.ticket", "{.status.history[*].state}")).To(Equal("Started Committed"))

			By("finding step 2 reconciled, not executed again: Unknown, then asked, in its one attempt")
			Expect(jsonpath(ns, "seo/change.config", "{.metadata.uid}")).To(Equal(configUID))
			Expect(jsonpath(ns, "seo/change.config", "{.status.attempts}")).To(Equal("1"))
			Expect(jsonpath(ns, "seo/change.config", "{.status.unknownTime}")).NotTo(BeEmpty())
			Expect(jsonpath(ns, "seo/change.config", "{.status.reconcileAttempts}")).To(Equal("1"))
			Expect(jsonpath(ns, "seo/change.config", "{.status.observations[*].kind}")).To(Equal("ClaimExpired " + reconciledBy))
			Expect(jsonpath(ns, "seo/change.config", "{.status.observations[-1:].holder}")).To(Equal("successor"))
			Expect(jsonpath(ns, "seo/change.config", "{.status.externalObjectID}")).To(Equal(ids[1]))

			By("finding step 3 run once, by the successor")
			Expect(jsonpath(ns, "seo/change.notify", "{.status.attempts}")).To(Equal("1"))
			Expect(claimsIn(successor, ns)).To(HaveKeyWithValue("change.notify", 1))
			Expect(sagaOperations(ns, "change")).To(Equal([]string{"change.config", "change.notify", "change.ticket"}))
		},
		Entry("Native: a re-send with the same key finds the config", "Native", "Resend"),
		Entry("Lookup: a lookup by key finds the config", "Lookup", "Lookup"),
	)

	It("while a compensation's outcome is unknown, then replaced, undoes each step once, last first", func() {
		ns := newNamespace("saga-kill-undo")
		apply(ns, deskYAML("Native"))
		expectOthersAtRest(ns)
		// The desk commits the config's revert and the answer never comes
		// back: the revert's outcome is unknown, and it is reconciled.
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1,
			KeyPrefix: "Tool:desk/" + revertConfig + "/"})

		// The kill stands for a node that crashes, or a pod evicted without
		// grace, in the middle of a rollback: the revert is made at the
		// desk, its answer was lost, and the reconciliation is claimed but
		// not asked. It is the only reconciliation this manager makes.
		By("running a manager that kills itself once it claimed the reconciliation of the revert")
		crashing := startManager(ns, manager{holder: "crashing",
			failpoints: failpoint.ReconcileAfterClaim + `=return("kill")`})
		apply(ns, sagaYAML("change", true))
		expectKilled(crashing)
		expectKilledAt(crashing, failpoint.ReconcileAfterClaim)

		By("reading what the dead manager left: every step ended, the revert made and being reconciled")
		Expect(jsonpath(ns, "seo/change.notify", "{.status.state}")).To(Equal("FailedFinal"))
		Expect(jsonpath(ns, "seo/change.config.undo", "{.status.state}")).To(Equal("Reconciling"))
		Expect(jsonpath(ns, "seo/change.config.undo", "{.status.claim.holder}")).To(Equal("crashing"))
		Expect(sagaOperations(ns, "change")).To(Equal(
			[]string{"change.config", "change.config.undo", "change.notify", "change.ticket"}))
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "cancel configs"}))
		uids := map[string]string{}
		for _, op := range sagaOperations(ns, "change") {
			uids[op] = jsonpath(ns, "seo/"+op, "{.metadata.uid}")
		}

		By("starting a fresh manager without failpoints")
		successor := startManager(ns, manager{holder: "successor"})
		waitSaga(ns, "change", "Compensated")

		By("finding every effect once at the desk, the undos in reverse order")
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "cancel configs", "cancel tickets"}))
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{
			toolKey(ns, "Tool:desk", openTicket, "change/ticket"):              1,
			toolKey(ns, "Tool:desk", setConfig, "change/config"):               1,
			toolKey(ns, "Tool:desk", revertConfig, "change/config/compensate"): 1,
			toolKey(ns, "Tool:desk", closeTicket, "change/ticket/compensate"):  1,
		}))
		ids := effectIDs(ns)
		Expect(ids[2]).To(Equal(ids[1]), "the revert cancelled the config step 2 made")
		Expect(ids[3]).To(Equal(ids[0]), "the close cancelled the ticket step 1 made")
		Expect(jsonpath(ns, "saga/change", "{.status.failedStep}")).To(Equal("notify"))
		Expect(jsonpath(ns, "saga/change", "{.status.compensationsDone}/{.status.compensationsTotal}")).To(Equal("2/2"))
		Expect(jsonpath(ns, "saga/change", "{.status.steps[*].state}")).To(Equal("Compensated Compensated FailedFinal"))

		By("finding no step executed again and the revert reconciled, not executed again")
		for op, uid := range uids {
			Expect(jsonpath(ns, "seo/"+op, "{.metadata.uid}")).To(Equal(uid), op)
		}
		for _, op := range []string{"change.ticket", "change.config", "change.notify"} {
			Expect(jsonpath(ns, "seo/"+op, "{.status.attempts}")).To(Equal("1"), op)
		}
		// The steps that committed at their first attempt keep no
		// observation (one claim, one commit); the refused one keeps its
		// call, made by the dead manager.
		for _, op := range []string{"change.ticket", "change.config"} {
			Expect(jsonpath(ns, "seo/"+op, "{.status.history[*].state}")).To(Equal("Started Committed"), op)
		}
		Expect(jsonpath(ns, "seo/change.notify", "{.status.observations[*].holder}")).To(Equal("crashing"))
		Expect(jsonpath(ns, "seo/change.config.undo", "{.status.state}")).To(Equal("Committed"))
		Expect(jsonpath(ns, "seo/change.config.undo", "{.status.attempts}")).To(Equal("1"))
		Expect(jsonpath(ns, "seo/change.config.undo", "{.status.reconcileAttempts}")).To(Equal("2"),
			"the dead manager's question and the successor's")
		Expect(jsonpath(ns, "seo/change.config.undo", "{.status.observations[*].kind}")).To(Equal("Call ClaimExpired Resend"))
		Expect(claimsIn(successor, ns)).To(HaveKeyWithValue("change.ticket.undo", 1))
		Expect(sagaOperations(ns, "change")).To(Equal(
			[]string{"change.config", "change.config.undo", "change.notify", "change.ticket", "change.ticket.undo"}))
	})
})

var _ = Describe("A finished Saga re-applied with kubectl apply", func() {
	DescribeTable("runs nothing again, also under a new manager and with GitOps annotations",
		func(reject bool, state string, effects []string) {
			ns := newNamespace("saga-reapply-" + strings.ToLower(state))
			apply(ns, deskYAML("Native"))
			first := startManager(ns, manager{holder: "first"})
			manifest := sagaYAML("change", reject)
			apply(ns, manifest)
			waitSaga(ns, "change", state)
			Expect(sagaEffects(ns)).To(Equal(effects))
			before := effectsFor(ns)
			ops := sagaOperations(ns, "change")
			versions := map[string]string{}
			for _, op := range ops {
				versions[op] = jsonpath(ns, "seo/"+op, "{.metadata.uid} {.metadata.resourceVersion}")
			}
			checkpoint := jsonpath(ns, "saga/change", "{.status}")

			By("replacing the manager, as a rollout does")
			first.Stop(waitStop)
			startManager(ns, manager{holder: "second"})

			// kubectl reports a CRD's object as configured even when the
			// API server finds nothing to change (it replaces lists such as
			// spec.steps whole, and the server has defaulted fields in them),
			// so the saga's own resourceVersion tells whether it was written.
			By("applying the same manifest again: the API server writes nothing")
			saga := jsonpath(ns, "saga/change", "{.metadata.generation} {.metadata.resourceVersion}")
			apply(ns, manifest)
			Expect(jsonpath(ns, "saga/change", "{.metadata.generation} {.metadata.resourceVersion}")).To(Equal(saga))

			By("applying it with the annotation a GitOps tool adds: a write, and the same spec")
			apply(ns, strings.Replace(manifest, "  name: change\n",
				"  name: change\n  annotations:\n    argocd.argoproj.io/tracking-id: once:effects.once.dev/Saga:"+ns+"/change\n", 1))
			Expect(jsonpath(ns, "saga/change", "{.metadata.annotations.argocd\\.argoproj\\.io/tracking-id}")).NotTo(BeEmpty())
			Expect(jsonpath(ns, "saga/change", "{.metadata.generation}")).To(Equal(strings.Fields(saga)[0]))

			Consistently(func() []sandbox.Effect { return effectsFor(ns) }).Should(Equal(before))
			Expect(sagaOperations(ns, "change")).To(Equal(ops))
			for _, op := range ops {
				Expect(jsonpath(ns, "seo/"+op, "{.metadata.uid} {.metadata.resourceVersion}")).To(Equal(versions[op]), op)
			}
			Expect(jsonpath(ns, "saga/change", "{.status}")).To(Equal(checkpoint))
		},
		Entry("Committed", false, "Committed", []string{"create tickets", "create configs", "create notices"}),
		Entry("Compensated", true, "Compensated",
			[]string{"create tickets", "create configs", "cancel configs", "cancel tickets"}),
	)
})

// waitStop is how long a stopped manager may take to finish its passes.
const waitStop = 15 * time.Second

// deskYAML is the Tool "desk" over the sandbox in mode Native or Lookup,
// with what a change needs: open and close a ticket, set and revert a
// config, send a notice. Closing and reverting cancel the object made, by
// its id. In Lookup mode a create is looked up by its key, a cancel by the
// state of the object it cancels.
func deskYAML(mode string) string {
	m := strings.ToLower(mode)
	var ops strings.Builder
	create := func(name, collection string) {
		fmt.Fprintf(&ops, "  - name: %s\n    path: /%s/%s\n", name, m, collection)
		if mode == "Lookup" {
			fmt.Fprintf(&ops, `    lookup:
      path: /%s/%s?key={idempotencyKey}
      found: response.status == 200 && type(response.body) == map && 'key' in response.body && response.body.key == key
      absent: response.status == 404 && type(response.body) == map && response.body.error == 'not_found'
`, m, collection)
		}
		ops.WriteString("    response:\n      externalObjectID: response.body.id\n")
	}
	cancel := func(name, collection string) {
		fmt.Fprintf(&ops, `  - name: %s
    path: /%s/%s/{id}/cancel
    request:
      pathValues:
      - name: id
        value: parameters.id
`, name, m, collection)
		if mode == "Lookup" {
			fmt.Fprintf(&ops, `    lookup:
      path: /%s/%s/{id}
      request:
        pathValues:
        - name: id
          value: parameters.id
      found: response.status == 200 && response.body.status == '%s'
      absent: response.status == 200 && response.body.status == '%s'
`, m, collection, sandbox.StatusCancelled, sandbox.StatusActive)
		}
		ops.WriteString("    response:\n      externalObjectID: response.body.id\n")
	}
	create(openTicket, "tickets")
	cancel(closeTicket, "tickets")
	create(setConfig, "configs")
	cancel(revertConfig, "configs")
	create(sendNotice, "notices")
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: Tool
metadata:
  name: desk
spec:
  http:
    url: %s
  idempotency:
    mode: %s
    lookupDelay: 1s
  timeout: 2s
  operations:
%s`, sb.URL, mode, ops.String())
}

// sagaYAML is the change of the samples on the desk: open a ticket, set a
// config that names it (its id through parametersFrom), tell the team
// (irreversible, last). With reject the desk refuses the notice for good
// (422), and the config and the ticket are undone.
func sagaYAML(name string, reject bool) string {
	notice := `{channel: "#ops"}`
	if reject {
		notice = `{channel: "#ops", reject: channel archived}`
	}
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: Saga
metadata:
  name: %s
spec:
  inputs:
    service: checkout
  steps:
  - name: ticket
    toolRef: {name: desk}
    operation: %s
    parameters: {title: scale checkout}
    retryPolicy: {initialBackoff: 200ms, maxBackoff: 2s}
    compensation:
      operation: %s
      parametersFrom:
      - {name: id, expression: steps.ticket.externalObjectID}
      retryPolicy: {initialBackoff: 200ms, maxBackoff: 2s}
  - name: config
    toolRef: {name: desk}
    operation: %s
    parameters: {replicas: 4}
    parametersFrom:
    - {name: ticket, expression: steps.ticket.externalObjectID}
    - {name: service, expression: inputs.service}
    retryPolicy: {initialBackoff: 200ms, maxBackoff: 2s}
    compensation:
      operation: %s
      parametersFrom:
      - {name: id, expression: steps.config.externalObjectID}
      retryPolicy: {initialBackoff: 200ms, maxBackoff: 2s}
  - name: notify
    toolRef: {name: desk}
    operation: %s
    irreversible: true
    parameters: %s
    parametersFrom:
    - name: text
      expression: "'scaled ' + inputs.service + ' under ' + steps.ticket.externalObjectID"
    retryPolicy: {initialBackoff: 200ms, maxBackoff: 2s}
`, name, openTicket, closeTicket, setConfig, revertConfig, sendNotice, notice)
}

// waitSaga waits until a saga is in a state.
func waitSaga(ns, name, state string) {
	GinkgoHelper()
	waitFor(ns, "saga/"+name, "jsonpath={.status.state}="+state)
}

// sagaOperations lists, sorted, the names of a saga's operations.
func sagaOperations(ns, saga string) []string {
	GinkgoHelper()
	out := strings.Fields(kubectl("", "get", "seo", "-n", ns, "-l", "effects.once.dev/saga="+saga,
		"-o", "jsonpath={.items[*].metadata.name}"))
	slices.Sort(out)
	return out
}

// namespaceEffects returns the namespace's effects in the order the tool
// performed them.
func namespaceEffects(ns string) []sandbox.Effect {
	GinkgoHelper()
	effects := effectsFor(ns)
	slices.SortFunc(effects, func(a, b sandbox.Effect) int { return int(a.Seq - b.Seq) })
	return effects
}

// sagaEffects lists the namespace's effects in the order the tool performed
// them: "create <collection>" or "cancel <collection>".
func sagaEffects(ns string) []string {
	GinkgoHelper()
	var out []string
	for _, e := range namespaceEffects(ns) {
		out = append(out, e.Action+" "+e.Collection)
	}
	return out
}

// effectIDs lists the ids of the objects the namespace's effects made or
// cancelled, in the order the tool performed them.
func effectIDs(ns string) []string {
	GinkgoHelper()
	var out []string
	for _, e := range namespaceEffects(ns) {
		out = append(out, e.ID)
	}
	return out
}

// expectKilledAt expects a dead manager's log to say which failpoint
// killed it.
func expectKilledAt(p *harness.Process, point string) {
	GinkgoHelper()
	log, err := os.ReadFile(p.Log)
	Expect(err).NotTo(HaveOccurred())
	Expect(string(log)).To(ContainSubstring("failpoint " + point + ": killing the process"))
}

// expectOthersAtRest expects every operation outside the namespace to be
// terminal, waiting for a person, or a duplicate (which never calls the
// tool), so that a manager started now calls the tool only for the
// namespace: the kill tests count the calls that pass a failpoint.
func expectOthersAtRest(ns string) {
	GinkgoHelper()
	out := kubectl("", "get", "seo", "-A", "-o",
		`jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.state} {.status.duplicateOf}{"\n"}{end}`)
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], ns+"/") || len(f) == 3 {
			continue
		}
		Expect(f).To(HaveLen(2), "operation %s has no state", f[0])
		Expect(f[1]).To(BeElementOf("Committed", "FailedFinal", "NeedsReview"),
			"operation %s is still at work and would meet this test's failpoint", f[0])
	}
}
