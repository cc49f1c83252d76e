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
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/shard"
)

var _ = Describe("Sharded managers", func() {
	const shards = 8

	It("split the operations between them, commit each once, and take over a stopped manager's", func() {
		ns := newNamespace()
		stopA := startManager(managerOptions{holder: "sharded-a", shards: shards, shardNamespace: ns})
		DeferCleanup(startManager(managerOptions{holder: "sharded-b", shards: shards, shardNamespace: ns}))
		newTool(ns, "payments", v1.IdempotencyNative)

		By("splitting the shards")
		Eventually(shardHolders(ns), 10*time.Second).Should(And(HaveKey("sharded-a"), HaveKey("sharded-b")))

		By("committing every operation once, whichever manager holds its shard")
		for i := range 16 {
			create(newOp(ns, fmt.Sprintf("charge-%d", i), "payments", map[string]any{"amount": i}))
		}
		for i := range 16 {
			waitFor(ns, fmt.Sprintf("charge-%d", i), v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyNative, ns, fmt.Sprintf("charge-%d", i))).To(Equal(1))
		}

		By("taking the shards of a stopped manager over, with the operations created meanwhile")
		stopA()
		for i := 16; i < 32; i++ {
			create(newOp(ns, fmt.Sprintf("charge-%d", i), "payments", map[string]any{"amount": i}))
		}
		Eventually(shardHolders(ns), 10*time.Second).Should(Equal(map[string]int{"sharded-b": shards}))
		for i := 16; i < 32; i++ {
			waitFor(ns, fmt.Sprintf("charge-%d", i), v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyNative, ns, fmt.Sprintf("charge-%d", i))).To(Equal(1))
		}
	})
})

// shardHolders counts the shards each manager holds by the Leases in ns.
func shardHolders(ns string) func() map[string]int {
	return func() map[string]int {
		var list coordinationv1.LeaseList
		Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.HasLabels{shard.LabelShard})).To(Succeed())
		held := map[string]int{}
		for _, l := range list.Items {
			if h := l.Spec.HolderIdentity; h != nil && *h != "" {
				held[*h]++
			}
		}
		return held
	}
}
