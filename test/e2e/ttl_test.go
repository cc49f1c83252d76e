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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// An ended Saga with spec.ttlSecondsAfterFinished goes, the garbage
// collector its steps, each through its finalizer: their records keep the
// outcomes, so the same saga applied again within retention makes no
// effect a second time.
var _ = Describe("spec.ttlSecondsAfterFinished on a Saga", func() {
	It("deletes the ended saga, lets the garbage collector take its steps, and keeps their records", func() {
		ns := newNamespace("ttl-saga")
		startManager(ns, manager{holder: "ttl-saga"})
		apply(ns, deskYAML("Native"))
		manifest := sagaYAML("change", false)
		apply(ns, strings.Replace(manifest, "spec:\n", "spec:\n  ttlSecondsAfterFinished: 2\n", 1))

		By("deleting the saga two seconds after it ended, and its steps with it")
		Eventually(func() string {
			return kubectl("", "get", "saga", "-n", ns, "--ignore-not-found", "-o", "name", "change")
		}).WithTimeout(collectTimeout).WithPolling(200 * time.Millisecond).Should(BeEmpty())
		Eventually(func() []string { return sagaOperations(ns, "change") }).WithTimeout(collectTimeout).Should(BeEmpty(),
			"the steps of the expired saga are still there (kube-controller-manager.log in the control plane's folder)")
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))

		By("keeping each step's outcome in its scope's record")
		Expect(strings.Fields(kubectl("", "get", "idempotencyrecords", "-n", ns,
			"-o", "jsonpath={.items[*].spec.outcome.state}"))).To(Equal([]string{"Committed", "Committed", "Committed"}))

		By("applying the saga again: it commits on the records, with no second effect")
		apply(ns, manifest)
		waitSaga(ns, "change", "Committed")
		for _, step := range sagaOperations(ns, "change") {
			Expect(jsonpath(ns, "seo/"+step, "{.status.duplicateOf}")).NotTo(BeEmpty(),
				"step %s executed again instead of reporting its record", step)
		}
		Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
	})
})
