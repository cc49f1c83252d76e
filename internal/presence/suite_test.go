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

package presence

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/once-dev/once/test/apiserver"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	apiServer *apiserver.Server
	k8sClient client.Client
)

func TestPresence(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Presence Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(15 * time.Second)
	ctx, cancel = context.WithCancel(context.Background())
	By("starting a real API server")
	var err error
	apiServer, err = apiserver.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient = apiServer.Client
})

var _ = AfterSuite(func() {
	cancel()
	if apiServer != nil {
		Expect(apiServer.Stop()).To(Succeed())
	}
})

const (
	// A Lease that counts as running for 10 s, renewed five times a
	// second: no stall of a loaded machine's API server makes a live
	// manager look gone.
	leaseDuration = 10 * time.Second
	renewPeriod   = 200 * time.Millisecond
)

// newNamespace creates a namespace for one test's Leases.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "presence-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// publish runs a Publisher of holder and version in ns; it returns a stop
// function that waits for Start to return.
func publish(ns, holder, version string) func() {
	p, err := New(Options{Client: k8sClient, Reader: k8sClient, Namespace: ns, Holder: holder, Version: version,
		RenewPeriod: renewPeriod, LeaseDuration: leaseDuration})
	Expect(err).NotTo(HaveOccurred())
	pctx, pcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(p.Start(pctx)).To(Succeed())
	}()
	stop := func() {
		pcancel()
		Eventually(done, 10*time.Second).Should(BeClosed())
	}
	DeferCleanup(stop)
	return stop
}

// running lists the managers running in ns now.
func running(ns string) []Manager {
	GinkgoHelper()
	m, err := List(ctx, k8sClient, ns, time.Now())
	Expect(err).NotTo(HaveOccurred())
	return m
}

// holders are the holders and versions of managers.
func holders(managers []Manager) []string {
	var out []string
	for _, m := range managers {
		out = append(out, m.Holder+" "+m.Version)
	}
	return out
}

var _ = Describe("A manager's presence Lease", func() {
	It("is created with the version, renewed, and deleted when the manager stops", func() {
		ns := newNamespace()
		stop := publish(ns, "m-1", "v1.2.3")
		Eventually(func() []string { return holders(running(ns)) }).Should(Equal([]string{"m-1 v1.2.3"}))

		var l coordinationv1.Lease
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: LeaseName("m-1")}, &l)).To(Succeed())
		Expect(l.Labels).To(HaveKeyWithValue(LabelManager, "true"))
		Expect(l.Annotations).To(HaveKeyWithValue(AnnotationVersion, "v1.2.3"))
		Expect(*l.Spec.LeaseDurationSeconds).To(Equal(int32(10)))
		first := l.Spec.RenewTime.Time

		By("renewing it every period")
		Eventually(func() time.Time {
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&l), &l)).To(Succeed())
			return l.Spec.RenewTime.Time
		}).Should(BeTemporally(">", first))

		By("deleting it when the manager stops")
		stop()
		err := k8sClient.Get(ctx, client.ObjectKeyFromObject(&l), &l)
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Expect(err).To(HaveOccurred(), "the Lease is gone")
		Expect(running(ns)).To(BeEmpty())
	})

	It("lists every manager of a namespace, one Lease each, and none of other namespaces", func() {
		ns, other := newNamespace(), newNamespace()
		publish(ns, "replica-a", "v2")
		publish(ns, "replica-b", "v1")
		publish(other, "elsewhere", "v2")
		Eventually(func() []string { return holders(running(ns)) }).Should(Equal([]string{"replica-a v2", "replica-b v1"}))
		Eventually(func() []string { return holders(running("")) }).Should(ContainElements(
			"replica-a v2", "replica-b v1", "elsewhere v2"), "all namespaces")
	})

	It("no longer lists a manager that stopped renewing, and deletes its Lease once long gone", func() {
		ns := newNamespace()
		// A manager killed with SIGKILL: its Lease stays, unrenewed.
		gone := presenceLease(ns, "killed", "v0", time.Now().Add(-time.Minute), 2)
		Expect(k8sClient.Create(ctx, &gone)).To(Succeed())
		recent := presenceLease(ns, "paused", "v0", time.Now(), 60)
		Expect(k8sClient.Create(ctx, &recent)).To(Succeed())
		Expect(holders(running(ns))).To(Equal([]string{"paused v0"}), "only the Lease renewed within its duration")

		publish(ns, "m-1", "v1")
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKeyFromObject(&gone), &coordinationv1.Lease{})
		}).Should(MatchError(ContainSubstring("not found")), "ten durations gone: deleted")
		Consistently(func() []string { return holders(running(ns)) }, 3*time.Second).
			Should(Equal([]string{"m-1 v1", "paused v0"}), "a live manager's Lease is left alone")
	})
})
