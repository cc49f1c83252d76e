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
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// collectTimeout is how long the control plane's kube-controller-manager
// may take to act on a deletion: the namespace controller's and the
// garbage collector's passes, and the manager keeping each operation's
// outcome before its finalizer goes.
const collectTimeout = 60 * time.Second

// The local control plane runs kube-controller-manager's garbage collector
// and namespace controller (test/harness/cmd/controlplane): without them a
// deleted namespace stays Terminating and a deleted Saga leaves its steps.
var _ = Describe("The control plane's garbage collector", func() {
	It("removes a deleted namespace whose operation has kept its outcome", func() {
		ns := newNamespace("gc-namespace")
		startManager(ns, manager{holder: "gc-namespace"})
		apply(ns, toolYAML("payments", "Native"))
		apply(ns, opYAML("charge", "payments", "", `{"amount": 7}`))
		waitState(ns, "charge", "Committed")
		Expect(jsonpath(ns, "seo/charge", "{.metadata.finalizers}")).To(ContainSubstring(v1.FinalizerRecord))

		By("deleting the namespace: the namespace controller deletes the operation, the manager lets it go")
		kubectl("", "delete", "namespace", ns, "--wait=false")
		Eventually(func() string {
			return kubectl("", "get", "namespace", "--ignore-not-found", "-o", "name", ns)
		}).WithTimeout(collectTimeout).Should(BeEmpty(),
			"namespace %s is still there (kube-controller-manager.log in the control plane's folder)", ns)
	})

	It("deletes a deleted Saga's steps through their owner references", func() {
		ns := newNamespace("gc-saga")
		startManager(ns, manager{holder: "gc-saga"})
		apply(ns, deskYAML("Native"))
		apply(ns, sagaYAML("change", false))
		waitSaga(ns, "change", "Committed")
		steps := sagaOperations(ns, "change")
		Expect(steps).To(Equal([]string{"change.config", "change.notify", "change.ticket"}))
		sagaUID := jsonpath(ns, "saga/change", "{.metadata.uid}")
		for _, step := range steps {
			Expect(jsonpath(ns, "seo/"+step, "{.metadata.ownerReferences[?(@.kind=='Saga')].uid}")).To(Equal(sagaUID),
				"step %s is not owned by its saga", step)
		}

		By("deleting the saga alone (background): the garbage collector deletes its steps")
		kubectl("", "delete", "saga", "change", "-n", ns, "--cascade=background", "--wait=false")
		Eventually(func() []string { return sagaOperations(ns, "change") }).WithTimeout(collectTimeout).Should(BeEmpty(),
			"the steps of the deleted saga are still there (kube-controller-manager.log in the control plane's folder)")
	})
})
