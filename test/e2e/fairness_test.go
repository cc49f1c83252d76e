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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// committedIn counts the namespace's operations in Committed.
func committedIn(ns string) int {
	GinkgoHelper()
	return strings.Count(jsonpath(ns, "seo", `{range .items[*]}{.status.state}{"\n"}{end}`), "Committed\n")
}

// One namespace floods the manager; another's operations are not held back
// behind the flood (docs/threat-model.md, "Tenants"). The flood is already
// there when the manager starts (it was created while the manager was down,
// or faster than it works): every operation is in its queue at once, the
// flooding namespace's listed first. One worker makes the order the queue
// hands requests out in the whole story.
var _ = Describe("A namespace's flood", func() {
	It("does not hold back another namespace's operations", func() {
		const flood, others = 500, 5
		// The bound: the other namespace's operations all commit while at
		// most a tenth of the flood has. A first-in, first-out queue makes
		// them wait for all of it.
		const bound = flood / 10
		floodNS, otherNS := newNamespace("fair-flood"), newNamespace("fair-other")
		apply(floodNS, toolYAML("payments", "Native"))
		apply(otherNS, toolYAML("payments", "Native"))
		var docs []string
		for i := range flood {
			docs = append(docs, opYAML(fmt.Sprintf("flood-%03d", i), "payments", "", `{"amount": 1}`))
		}
		kubectl(strings.Join(docs, "---\n"), "create", "-n", floodNS, "-f", "-")
		docs = docs[:0]
		for i := range others {
			docs = append(docs, opYAML(fmt.Sprintf("other-%d", i), "payments", "", `{"amount": 2}`))
		}
		kubectl(strings.Join(docs, "---\n"), "create", "-n", otherNS, "-f", "-")

		began := time.Now()
		startManager(floodNS, manager{holder: "fair", args: []string{"--max-concurrent-reconciles=1"}})
		Eventually(func() int { return committedIn(otherNS) }, waitTimeout, 100*time.Millisecond).Should(Equal(others))
		otherDone := time.Since(began)
		floodDone := committedIn(floodNS)
		AddReportEntry("the other namespace", fmt.Sprintf("its %d operations committed %s after the start, "+
			"while %d of the flood's %d had (bound %d)", others, otherDone.Round(time.Millisecond), floodDone, flood, bound),
			ReportEntryVisibilityAlways)
		Expect(floodDone).To(BeNumerically("<=", bound),
			"the other namespace's operations waited behind the flood")

		By("committing the whole flood too, one effect per operation")
		Eventually(func() int { return committedIn(floodNS) }, waitTimeout, time.Second).Should(Equal(flood))
		AddReportEntry("the flood", fmt.Sprintf("its %d operations committed %s after the start", flood,
			time.Since(began).Round(time.Millisecond)), ReportEntryVisibilityAlways)
		for ns, ops := range map[string]int{floodNS: flood, otherNS: others} {
			perKey := effectsPerKey(ns)
			for key, n := range perKey {
				Expect(n).To(Equal(1), "effects for %s", key)
			}
			Expect(perKey).To(HaveLen(ops), "keys with an effect in %s", ns)
		}
	})
})
