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
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/once-dev/once/test/apiserver"
)

var (
	ctx       context.Context
	cancel    context.CancelFunc
	apiServer *apiserver.Server
	cfg       *rest.Config
	k8sClient client.Client
	scheme    *runtime.Scheme
)

func TestShards(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Shard Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	By("starting a real API server")
	var err error
	apiServer, err = apiserver.Start()
	Expect(err).NotTo(HaveOccurred())
	cfg, k8sClient, scheme = apiServer.Config, apiServer.Client, apiServer.Scheme
})

var _ = AfterSuite(func() {
	cancel()
	if apiServer != nil {
		Expect(apiServer.Stop()).To(Succeed())
	}
})

// Short Leases keep the tests short.
const (
	leaseDuration = 2 * time.Second
	renewPeriod   = 200 * time.Millisecond
)

// member is a Sharder running as a manager would run it.
type member struct {
	*Sharder
	// cut makes every API call fail, as for a manager that lost the API
	// server.
	cut atomic.Bool
	// slowMember makes the writes of its membership Lease fail, as a
	// write that times out on a busy API server while the rest go through.
	slowMember atomic.Bool
	stop       func()
}

// newNamespace creates a namespace for one test's Leases.
func newNamespace() string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "shards-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// newMember makes a member of shards shards holding its Leases in ns; it
// starts with run.
func newMember(holder, ns string, shards int) *member {
	m := &member{}
	base, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	refuse := errors.New("the API server cannot be reached")
	c := interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if m.cut.Load() {
				return refuse
			}
			return c.List(ctx, list, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if m.cut.Load() {
				return refuse
			}
			if m.slowMember.Load() && obj.GetLabels()[LabelMember] != "" {
				return context.DeadlineExceeded
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if m.cut.Load() {
				return refuse
			}
			if m.slowMember.Load() && obj.GetLabels()[LabelMember] != "" {
				return context.DeadlineExceeded
			}
			return c.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if m.cut.Load() {
				return refuse
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	m.Sharder, err = New(Options{Client: c, Reader: c, Namespace: ns, Holder: holder, Shards: shards,
		LeaseDuration: leaseDuration, RenewPeriod: renewPeriod})
	Expect(err).NotTo(HaveOccurred())
	return m
}

// run starts the member until stop.
func (m *member) run() *member {
	mctx, mcancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(m.Start(mctx)).To(Succeed())
	}()
	m.stop = func() {
		mcancel()
		Eventually(done, 10*time.Second).Should(BeClosed())
	}
	DeferCleanup(func() { m.stop() })
	return m
}
