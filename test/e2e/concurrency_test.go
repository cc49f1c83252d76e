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
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
)

// opRow is what the tests read of each operation of a namespace.
type opRow struct {
	name, state, readyReason, duplicateOf, externalID string
	// attempts is empty when no attempt was made.
	attempts string
}

// operations lists the namespace's operations, sorted by name, with
// kubectl get.
func operations(ns string) []opRow {
	GinkgoHelper()
	out := jsonpath(ns, "seo", `{range .items[*]}{.metadata.name}{"\t"}{.status.state}{"\t"}`+
		`{.status.conditions[?(@.type=="Ready")].reason}{"\t"}{.status.duplicateOf}{"\t"}`+
		`{.status.externalObjectID}{"\t"}{.status.attempts}{"\n"}{end}`)
	var rows []opRow
	// Trim only the final newline: a line may end with an empty field.
	for line := range strings.SplitSeq(strings.TrimSuffix(out, "\n"), "\n") {
		f := strings.Split(line, "\t")
		Expect(f).To(HaveLen(6), line)
		rows = append(rows, opRow{name: f[0], state: f[1], readyReason: f[2], duplicateOf: f[3],
			externalID: f[4], attempts: f[5]})
	}
	return rows
}

// claimsIn counts, by operation name, the attempts a manager claimed in
// namespace ns, from its log: a first attempt that commits leaves no
// observation in the status to say who made it, but every claim is logged
// ("Recorded a transition" to Started).
func claimsIn(p *harness.Process, ns string) map[string]int {
	GinkgoHelper()
	b, err := os.ReadFile(p.Log)
	Expect(err).NotTo(HaveOccurred())
	claims := map[string]int{}
	for line := range strings.SplitSeq(string(b), "\n") {
		var e struct{ Msg, Namespace, Name, To string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Msg == "Recorded a transition" && e.Namespace == ns &&
			e.To == "Started" {
			claims[e.Name]++
		}
	}
	return claims
}

// waitWorking waits until a manager's controllers have started, so that
// managers started together also race together.
func waitWorking(p *harness.Process) {
	GinkgoHelper()
	Eventually(func() string { b, _ := os.ReadFile(p.Log); return string(b) }).
		Should(ContainSubstring("Starting workers"), "log: %s", p.Log)
}

var _ = Describe("Two managers without leader election", func() {
	It("share 40 operations: each commits once, and both do work", func() {
		ns := newNamespace("two-managers")
		alpha := startManager(ns, manager{holder: "alpha"})
		beta := startManager(ns, manager{holder: "beta"})
		waitWorking(alpha)
		waitWorking(beta)
		apply(ns, toolYAML("payments", "Lookup"))

		const n = 40
		var docs []string
		for i := range n {
			docs = append(docs, opYAML(fmt.Sprintf("op-%02d", i), "payments", "", fmt.Sprintf(`{"amount": %d}`, 100+i)))
		}
		apply(ns, strings.Join(docs, "---\n"))
		waitFor(ns, "seo --all", "Ready")

		rows := operations(ns)
		Expect(rows).To(HaveLen(n))
		want := map[string]int{}
		for _, r := range rows {
			Expect(r.state).To(Equal("Committed"), r.name)
			Expect(r.duplicateOf).To(BeEmpty(), r.name)
			Expect(r.attempts).To(Equal("1"), r.name)
			want[toolKey(ns, "Tool:payments", "charge.create", r.name)] = 1
		}
		Expect(effectsPerKey(ns)).To(Equal(want), "one effect per key, no more, no less")
		holders := map[string]int{}
		claimed := map[string]int{}
		for name, p := range map[string]*harness.Process{"alpha": alpha, "beta": beta} {
			for op, n := range claimsIn(p, ns) {
				holders[name] += n
				claimed[op] += n
			}
		}
		Expect(holders["alpha"]).To(BeNumerically(">", 0), "alpha made calls: %v", holders)
		Expect(holders["beta"]).To(BeNumerically(">", 0), "beta made calls: %v", holders)
		Expect(claimed).To(HaveLen(n), "every operation claimed: %v", claimed)
		for op, c := range claimed {
			Expect(c).To(Equal(1), "%s claimed once in all, by one of the two", op)
		}
		_, _ = fmt.Fprintf(GinkgoWriter, "first calls per manager: %v\n", holders)
	})
})

var _ = Describe("50 concurrent creates of one scope key through kubectl", func() {
	It("make one effect, and every object reports it", func() {
		ns := newNamespace("one-key")
		startManager(ns, manager{holder: "alpha"})
		startManager(ns, manager{holder: "beta"})
		apply(ns, toolYAML("payments", "Lookup"))

		const n = 50
		manifests := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			manifests[i] = opYAML(fmt.Sprintf("req-%02d", i), "payments", "order-1", `{"amount": 100, "currency": "eur"}`)
			wg.Go(func() { _, errs[i] = runKubectl(manifests[i], "create", "-n", ns, "-f", "-") })
		}
		wg.Wait()
		for i, err := range errs {
			Expect(err).NotTo(HaveOccurred(), "create req-%02d", i)
		}

		By("re-applying one of them")
		apply(ns, manifests[17])
		waitFor(ns, "seo --all", "Ready")

		rows := operations(ns)
		Expect(rows).To(HaveLen(n))
		owners, ids := []string{}, map[string]bool{}
		for _, r := range rows {
			Expect(r.state).To(Equal("Committed"), r.name)
			ids[r.externalID] = true
			if r.duplicateOf == "" {
				owners = append(owners, r.name)
			}
		}
		Expect(owners).To(HaveLen(1), "exactly one operation holds the key")
		for _, r := range rows {
			if r.duplicateOf == "" {
				Expect(r.attempts).To(Equal("1"), r.name)
				Expect(r.readyReason).To(Equal("Committed"), r.name)
			} else {
				Expect(r.duplicateOf).To(Equal(owners[0]), r.name)
				Expect(r.attempts).To(BeEmpty(), "%s is a duplicate: it makes no call", r.name)
				Expect(r.readyReason).To(Equal("Duplicate"), r.name)
			}
		}
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1), "one effect at the tool")
		Expect(effects[0].Key).To(Equal(toolKey(ns, "Tool:payments", "charge.create", "order-1")))
		Expect(ids).To(Equal(map[string]bool{effects[0].ID: true}), "every object reports the one effect")
	})
})
