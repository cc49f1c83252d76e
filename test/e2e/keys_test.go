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
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("The same key", func() {
	It("with a different payload is rejected with IdempotencyParameterMismatch and makes no call", func() {
		ns := newNamespace("mismatch")
		startManager(ns, manager{holder: "mismatch"})
		apply(ns, toolYAML("payments", "Native"))
		apply(ns, opYAML("first", "payments", "order-7", `{"amount": 100}`))
		waitFor(ns, "seo/first", "Ready")

		apply(ns, opYAML("second", "payments", "order-7", `{"amount": 1000}`))
		waitState(ns, "second", "FailedFinal")
		Expect(jsonpath(ns, "seo/second", `{.status.conditions[?(@.type=="Ready")].reason}`)).
			To(Equal("IdempotencyParameterMismatch"))
		Expect(jsonpath(ns, "seo/second", `{.status.conditions[?(@.type=="Stalled")].status}`)).To(Equal("True"))
		Expect(jsonpath(ns, "seo/second", "{.status.errorClass}")).To(Equal("Conflict"))
		Expect(jsonpath(ns, "seo/second", "{.status.attempts}")).To(BeElementOf("", "0"), "no attempt was made")
		Expect(jsonpath(ns, "seo/second", "{.status.observations}")).To(BeEmpty(), "no call was made")
		Expect(jsonpath(ns, "seo/first", "{.status.state}")).To(Equal("Committed"))
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1), "still one effect for the key")
		Expect(effects[0].Key).To(Equal(toolKey(ns, "Tool:payments", "charge.create", "order-7")))
	})

	It("delivered twice as a message makes one effect, whether it maps to one object or two", func() {
		ns := newNamespace("redelivery")
		startManager(ns, manager{holder: "redelivery"})
		apply(ns, toolYAML("payments", "Lookup"))
		msg := opYAML("msg-123", "payments", "", `{"amount": 1}`)

		By("creating the same object twice: the object name is the dedupe")
		kubectl(msg, "create", "-n", ns, "-f", "-")
		_, err := runKubectl(msg, "create", "-n", ns, "-f", "-")
		Expect(err).To(MatchError(ContainSubstring("AlreadyExists")))

		By("mapping the message to a second object with the same key")
		kubectl(opYAML("msg-123-redelivered", "payments", "msg-123", `{"amount": 1}`), "create", "-n", ns, "-f", "-")
		waitFor(ns, "seo --all", "Ready")

		rows := operations(ns)
		Expect(rows).To(HaveLen(2))
		// Either may bind the key first; the other reports its outcome.
		Expect([]string{rows[0].duplicateOf, rows[1].duplicateOf}).To(Or(
			Equal([]string{"", "msg-123"}), Equal([]string{"msg-123-redelivered", ""})))
		Expect([]string{rows[0].attempts, rows[1].attempts}).To(ConsistOf("1", ""), "the duplicate makes no call")
		effects := effectsFor(ns)
		Expect(effects).To(HaveLen(1))
		Expect(effects[0].Key).To(Equal(toolKey(ns, "Tool:payments", "charge.create", "msg-123")))
		Expect(rows[0].externalID).To(Equal(effects[0].ID))
		Expect(rows[1].externalID).To(Equal(effects[0].ID))
	})
})
