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

package shard

import (
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

const shards = 8

var _ = Describe("Sharder", func() {
	It("splits the shards between two managers, and gives them all to one when the other stops", func() {
		ns := newNamespace()
		a := newMember("a", ns, shards).run()
		b := newMember("b", ns, shards).run()

		By("splitting the shards with none held by both")
		Eventually(split(a, b), 10*time.Second).Should(Succeed())
		Consistently(func() []int { return intersection(a.Held(), b.Held()) }, time.Second).Should(BeEmpty())
		Expect(a.Held()).To(Equal(assigned("a", []string{"a", "b"})), "the held shards are the assignment's")
		for _, i := range a.Held() {
			Expect(holder(ns, i)).To(Equal("a"), "shard %d's Lease names its holder", i)
		}

		By("stopping one, which releases its shards")
		a.stop()
		Expect(a.Held()).To(BeEmpty())
		// Well before the Leases would expire.
		Eventually(b.Held, leaseDuration/2).Should(Equal(all(shards)))
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: MemberLeaseName("a")}, &coordinationv1.Lease{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the stopped member's Lease is deleted, got %v", err)
	})

	It("takes over the shards of a manager that stops renewing", func() {
		ns := newNamespace()
		a := newMember("a", ns, shards).run()
		b := newMember("b", ns, shards).run()
		Eventually(split(a, b), 10*time.Second).Should(Succeed())

		By("cutting one off the API server")
		a.cut.Store(true)
		Eventually(a.Held, 2*leaseDuration).Should(BeEmpty(), "a manager that cannot renew gives its shards up")
		Eventually(b.Held, 4*leaseDuration).Should(Equal(all(shards)))
		Consistently(func() []int { return intersection(a.Held(), b.Held()) }, time.Second).Should(BeEmpty())
	})

	It("keeps its shards through failed renewals of its membership until the membership expires", func() {
		ns := newNamespace()
		a := newMember("a", ns, shards).run()
		Eventually(a.Held, 10*time.Second).Should(Equal(all(shards)))

		By("failing the membership's renewals for half its duration")
		a.slowMember.Store(true)
		Consistently(a.Held, leaseDuration/2).Should(Equal(all(shards)),
			"a membership whose Lease has not expired keeps its shards")
		for i := range shards {
			Expect(holder(ns, i)).To(Equal("a"), "shard %d's Lease is not released", i)
		}

		By("failing them past its duration")
		Eventually(a.Held, 2*leaseDuration).Should(BeEmpty(), "a membership that expired holds no shard")

		By("renewing again")
		a.slowMember.Store(false)
		Eventually(a.Held, 10*time.Second).Should(Equal(all(shards)))
	})

	It("takes no new shard while its membership's renewals fail", func() {
		ns := newNamespace()
		a := newMember("a", ns, shards).run()
		b := newMember("b", ns, shards).run()
		Eventually(split(a, b), 10*time.Second).Should(Succeed())
		mine := a.Held()

		By("failing a's membership renewals, and stopping b, which releases its shards")
		a.slowMember.Store(true)
		b.stop()
		Consistently(a.Held, leaseDuration/2).Should(Equal(mine),
			"a membership that may lapse keeps its shards and takes none of the released")

		By("renewing again")
		a.slowMember.Store(false)
		Eventually(a.Held, 10*time.Second).Should(Equal(all(shards)))
	})

	It("enqueues the objects of a shard it acquires", func() {
		ns := newNamespace()
		var names []string
		for i := range 24 {
			o := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("op-%d", i)},
				Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create",
					Parameters: &runtime.RawExtension{Raw: []byte(`{}`)}}}
			Expect(k8sClient.Create(ctx, o)).To(Succeed())
			names = append(names, o.Name)
		}
		a := newMember("a", ns, shards)
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
		DeferCleanup(q.ShutDown)
		Expect(a.Resync(k8sClient, &v1.SideEffectOperationList{}, nil).Start(ctx, q)).To(Succeed())
		b := newMember("b", ns, shards).run()
		Eventually(b.Held, 10*time.Second).Should(Equal(all(shards)))
		a.run()
		Eventually(split(a, b), 10*time.Second).Should(Succeed())

		By("enqueuing the objects of the shards taken from the other manager")
		seen := map[string]bool{}
		drain := func() map[string]bool {
			for q.Len() > 0 {
				r, _ := q.Get()
				if r.Namespace == ns {
					seen[r.Name] = true
				}
				q.Done(r)
			}
			return seen
		}
		Eventually(drain, 5*time.Second).Should(HaveLen(objectsIn(ns, names, a.Held())))
		for name := range seen {
			Expect(a.Held()).To(ContainElement(shardOf(ns, name)), "only the acquired shards' objects are enqueued")
		}

		By("enqueuing the other manager's objects when it leaves")
		b.stop()
		Eventually(a.Held, 10*time.Second).Should(Equal(all(shards)))
		Eventually(drain, 5*time.Second).Should(HaveLen(len(names)))
	})
})

// split checks that a and b hold every shard between them, both some.
func split(a, b *member) func(Gomega) {
	return func(g Gomega) {
		g.Expect(a.Held()).NotTo(BeEmpty())
		g.Expect(b.Held()).NotTo(BeEmpty())
		g.Expect(union(a.Held(), b.Held())).To(Equal(all(shards)))
	}
}

// shardOf is the shard of the operation ns/name, as created above.
func shardOf(ns, name string) int {
	return OperationKey(&v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create"}}).Shard(shards)
}

// objectsIn counts the operations of names in shards.
func objectsIn(ns string, names []string, in []int) int {
	n := 0
	for _, name := range names {
		if slices.Contains(in, shardOf(ns, name)) {
			n++
		}
	}
	return n
}

// holder is the holder of shard i's Lease in ns.
func holder(ns string, i int) string {
	var l coordinationv1.Lease
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: ShardLeaseName(i)}, &l)).To(Succeed())
	return holderOf(&l)
}

// assigned lists the shards Assign gives to m among members.
func assigned(m string, members []string) []int {
	var mine []int
	for i, o := range Assign(shards, members) {
		if o == m {
			mine = append(mine, i)
		}
	}
	return mine
}

func all(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func union(a, b []int) []int {
	u := slices.Concat(a, b)
	slices.Sort(u)
	return slices.Compact(u)
}

func intersection(a, b []int) []int {
	var both []int
	for _, i := range a {
		if slices.Contains(b, i) {
			both = append(both, i)
		}
	}
	return both
}
