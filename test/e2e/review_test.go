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

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/sandbox"
)

var _ = Describe("An operation in NeedsReview", func() {
	It("is resolved by a person with kubectl alone", func() {
		ns := newNamespace("review")
		startManager(ns, manager{holder: "review"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, Count: 1})
		apply(ns, toolYAML("mailer", "None"))
		apply(ns, opYAML("x", "mailer", "", `{"to": "a@example.com"}`))

		By("waiting until Once gives up: the tool neither dedupes nor can be asked")
		waitFor(ns, "seo/x", "Stalled")
		Expect(jsonpath(ns, "seo/x", "{.status.state}")).To(Equal("NeedsReview"))
		Expect(jsonpath(ns, "seo/x", `{.status.conditions[?(@.type=="Ready")].status}`)).To(Equal("False"))
		Expect(jsonpath(ns, "seo/x", `{.status.observations[0].request}`)).To(MatchRegexp(`^POST /none/charges body [0-9a-f]{12}$`))

		By("finding the effect in the tool's ledger, as a person would")
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1))
		Expect(effects[0].Key).To(Equal(toolKey(ns, "Tool:mailer", "charge.create", "x")))
		id := effects[0].ID
		Expect(id).NotTo(BeEmpty())

		By("marking it committed with kubectl patch")
		patch := fmt.Sprintf(`{"spec":{"resolution":{"action":"MarkCommitted","externalObjectID":%q,`+
			`"by":"e2e","reason":"found in the ledger"}}}`, id)
		kubectl("", "patch", "-n", ns, "seo", "x", "--type", "merge", "-p", patch)
		waitFor(ns, "seo/x", "Ready")
		Expect(jsonpath(ns, "seo/x", "{.status.state}")).To(Equal("Committed"))
		Expect(jsonpath(ns, "seo/x", "{.status.resolution.by}")).To(Equal("e2e"))
		Expect(jsonpath(ns, "seo/x", "{.status.resolution.fromState}")).To(Equal("NeedsReview"))
		Expect(jsonpath(ns, "seo/x", "{.status.externalObjectID}")).To(Equal(id))
		Expect(jsonpath(ns, "seo/x", `{.status.conditions[?(@.type=="Ready")].reason}`)).To(Equal("ResolvedCommitted"))
		Expect(jsonpath(ns, "seo/x", `{.status.conditions[?(@.type=="Stalled")].status}`)).NotTo(Equal("True"))
		Expect(effectsFor(ns)).To(HaveLen(1))
	})
})
