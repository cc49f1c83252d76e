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

package controller

import (
	"context"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// passReads counts the operations a reader reads, per reconcile pass (the
// pass's reconcile ID) and operation.
type passReads struct {
	client.Reader
	mu sync.Mutex
	n  map[passRead]int
}

type passRead struct {
	pass types.UID
	name string
}

func (r *passReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*v1.SideEffectOperation); ok {
		r.mu.Lock()
		r.n[passRead{pass: controller.ReconcileIDFromContext(ctx), name: key.Name}]++
		r.mu.Unlock()
	}
	return r.Reader.Get(ctx, key, obj, opts...)
}

// most is the most reads of one operation in one pass, and of which.
func (r *passReads) most() (int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	most, name := 0, ""
	for k, n := range r.n {
		if n > most {
			most, name = n, k.name
		}
	}
	return most, name
}

// A committed step whose result the cache does not keep is read past the
// cache when a later step's parameters are computed: once per pass, also
// when its result was too large to keep and the read finds none.
var _ = Describe("A saga's reads of its steps' results", func() {
	It("reads a committed step's operation at most once per pass, its result too large to keep", func() {
		reads := &passReads{n: map[passRead]int{}}
		ns := newNamespace()
		DeferCleanup(startManager(managerOptions{sagaReader: func(r client.Reader) client.Reader {
			reads.Reader = r
			return reads
		}}))
		newDesk(ns)
		steps := changeSteps()
		// The sandbox answers the parameters back: the ticket's result is
		// over MaxResultBytes, so its operation keeps only its digest.
		steps[0].Parameters = raw(map[string]any{"title": "scale checkout",
			"blob": strings.Repeat("x", v1.MaxResultBytes+1)})
		Expect(k8sClient.Create(ctx, newSaga(ns, "big", steps))).To(Succeed())
		s := waitSaga(ns, "big", v1.StateCommitted)
		ticket := get(ns, stepStatus(s, "ticket").Operation)
		Expect(ticket.Status.Result).To(BeNil(), "the result was kept: the test needs one too large to keep")
		Expect(ticket.Status.ResultDigest).NotTo(BeEmpty())

		most, name := reads.most()
		Expect(most).To(BeNumerically(">=", 1), "no step's result was read past the cache")
		Expect(most).To(Equal(1), "a pass read operation %s %d times", name, most)
	})
})
