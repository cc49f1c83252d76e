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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/test/sandbox"
)

// crashCase is a manager killed with SIGKILL at one of the protocol's
// crash windows.
type crashCase struct {
	// point is the failpoint at which the manager kills itself.
	point string
	// mode is the tool's idempotency mode.
	mode string
	// lost makes the tool drop its first answer after committing, so that
	// the operation has to be reconciled (for the reconcile* points).
	lost bool
	// killedIn is the state the record shows once the manager is dead.
	killedIn string
	// effectsAtKill is how many effects the tool made before the kill.
	effectsAtKill int
	// final is the state the successor manager leads the operation to.
	final string
}

var _ = Describe("A manager killed with kill -9", func() {
	DescribeTable("at a crash window, then replaced, makes exactly one effect",
		func(c crashCase) {
			ns := newNamespace(strings.ToLower("kill-" + c.point + "-" + c.mode))
			if c.lost {
				faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
			}
			apply(ns, toolYAML("tool", c.mode))

			By(fmt.Sprintf("running a manager that kills itself at %s", c.point))
			crashing := startManager(ns, manager{holder: "crashing", failpoints: c.point + `=return("kill")`})
			apply(ns, opYAML("op", "tool", "", `{"amount": 5}`))
			expectKilled(crashing)
			log, err := os.ReadFile(crashing.Log)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(log)).To(ContainSubstring("failpoint " + c.point + ": killing the process"))

			By("reading the record the dead manager left")
			Expect(jsonpath(ns, "seo/op", "{.status.state}")).To(Equal(c.killedIn))
			Expect(jsonpath(ns, "seo/op", "{.status.claim.holder}")).To(Equal("crashing"), "the claim was recorded")
			Expect(effectsFor(ns)).To(HaveLen(c.effectsAtKill))

			By("starting a fresh manager without failpoints")
			startManager(ns, manager{holder: "successor"})
			waitState(ns, "op", c.final)
			if c.lost {
				// A reconciliation is a question: the successor asks again
				// once the dead manager's claim has expired.
				Expect(jsonpath(ns, "seo/op", "{.status.reconcileAttempts}")).To(Equal("2"),
					"the dead manager's question and the successor's")
			} else {
				Expect(jsonpath(ns, "seo/op", "{.status.observations[*].kind}")).To(ContainSubstring("ClaimExpired"),
					"the successor took over the dead manager's claim")
			}
			effects := effectsFor(ns)
			Expect(effects).To(HaveLen(1))
			Expect(effects[0].Key).To(Equal(toolKey(ns, "Tool:tool", "charge.create", "op")))
			if c.final == "Committed" {
				Expect(jsonpath(ns, "seo/op", "{.status.externalObjectID}")).To(Equal(effects[0].ID))
				Expect(jsonpath(ns, "seo/op", "{.status.observations[-1:].holder}")).To(Equal("successor"),
					"the successor learned the outcome")
			} else {
				Expect(jsonpath(ns, "seo/op", `{.status.conditions[?(@.type=="Stalled")].status}`)).To(Equal("True"))
				Expect(jsonpath(ns, "seo/op", `{.status.conditions[?(@.type=="Stalled")].reason}`)).To(Equal("NeedsReview"))
			}
		},
		Entry("after the claim, before the call (Native)", crashCase{
			point: failpoint.ExecuteAfterClaim, mode: "Native", killedIn: "Started", final: "Committed"}),
		Entry("after the claim, before the call (Lookup)", crashCase{
			point: failpoint.ExecuteAfterClaim, mode: "Lookup", killedIn: "Started", final: "Committed"}),
		Entry("after the tool answered, before the answer was recorded (Native)", crashCase{
			point: failpoint.ExecuteAfterAnswer, mode: "Native", killedIn: "Started", effectsAtKill: 1, final: "Committed"}),
		Entry("after the tool answered, before the answer was recorded (Lookup)", crashCase{
			point: failpoint.ExecuteAfterAnswer, mode: "Lookup", killedIn: "Started", effectsAtKill: 1, final: "Committed"}),
		Entry("after the tool answered, before the answer was recorded (None: a person decides)", crashCase{
			point: failpoint.ExecuteAfterAnswer, mode: "None", killedIn: "Started", effectsAtKill: 1, final: "NeedsReview"}),
		Entry("after claiming a reconciliation of a lost answer (Native)", crashCase{
			point: failpoint.ReconcileAfterClaim, mode: "Native", lost: true,
			killedIn: "Reconciling", effectsAtKill: 1, final: "Committed"}),
		Entry("after claiming a reconciliation of a lost answer (Lookup)", crashCase{
			point: failpoint.ReconcileAfterClaim, mode: "Lookup", lost: true,
			killedIn: "Reconciling", effectsAtKill: 1, final: "Committed"}),
		Entry("after the tool answered a reconciliation, before it was recorded (Native)", crashCase{
			point: failpoint.ReconcileAfterAnswer, mode: "Native", lost: true,
			killedIn: "Reconciling", effectsAtKill: 1, final: "Committed"}),
		Entry("after the tool answered a reconciliation, before it was recorded (Lookup)", crashCase{
			point: failpoint.ReconcileAfterAnswer, mode: "Lookup", lost: true,
			killedIn: "Reconciling", effectsAtKill: 1, final: "Committed"}),
	)
})

var _ = Describe("The tool crashes after committing", func() {
	It("keeps its ledger across a restart on the same address, and the operation commits once", func() {
		ns := newNamespace("tool-crash")
		startManager(ns, manager{holder: "tool-crash"})
		before, err := ledger.Summary(context.Background())
		Expect(err).NotTo(HaveOccurred())
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultExitAfterCommit, Count: 1})
		apply(ns, toolYAML("payments", "Native"))

		crashed := sb
		// Whatever happens, the next tests need a sandbox (registered after
		// faults, so it runs before the faults are cleared).
		DeferCleanup(func() {
			if sb.Exited() {
				startSandbox()
			}
		})
		apply(ns, opYAML("op", "payments", "", `{"amount": 12}`))

		By("waiting for the sandbox to exit after it committed")
		code, err := crashed.Wait(3 * time.Minute)
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(sandbox.ExitCodeCrash))
		onDisk, err := os.ReadFile(ledgerPath)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(onDisk)).To(ContainSubstring(`"` + toolKey(ns, "Tool:payments", "charge.create", "op") + `"`))

		By("restarting it on the same address with the same ledger file")
		startSandbox()
		Expect(sb.URL).To(Equal(crashed.URL))
		after, err := ledger.Summary(context.Background())
		Expect(err).NotTo(HaveOccurred())
		Expect(after.Effects).To(Equal(before.Effects+1), "every earlier effect survived the restart")
		Expect(effectsFor(ns)).To(HaveLen(1), "the effect made just before the crash survived it")

		waitState(ns, "op", "Committed")
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1))
		Expect(jsonpath(ns, "seo/op", "{.status.externalObjectID}")).To(Equal(effects[0].ID))
	})
})
