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
	"fmt"
	"net/http/httptest"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	v1 "github.com/once-dev/once/api/v1alpha1"
	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/test/sandbox"
)

// The suite runs the real controllers against a real API server (envtest,
// with kube-apiserver and etcd built from source by
// hack/controlplane-binaries.sh) and a real HTTP tool (the sandbox), and
// counts effects at the tool.

var (
	ctx       context.Context
	cancel    context.CancelFunc
	testEnv   *envtest.Environment
	cfg       *rest.Config
	k8sClient client.Client
	scheme    = runtime.NewScheme()

	// tool is the sandbox tool every test calls, and ledger its ledger.
	toolURL string
	ledger  *sandbox.Client
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1.AddToScheme(scheme))

	By("starting a real API server")
	testEnv = &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: controlPlaneAssets(),
	}
	var err error
	cfg, err = testEnv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "once-system"}})).To(Succeed())
	installPolicies()

	By("starting the sandbox tool")
	s, err := sandbox.New(sandbox.Options{})
	Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(s.Handler())
	DeferCleanup(func() { srv.Close(); _ = s.Close() })
	toolURL = srv.URL
	ledger = &sandbox.Client{BaseURL: srv.URL}
	metrics.Register(k8sClient)
})

var _ = AfterSuite(func() {
	cancel()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// controlPlaneAssets is KUBEBUILDER_ASSETS, or the folder that
// hack/controlplane-binaries.sh builds (once per machine) and prints.
func controlPlaneAssets() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	out, err := exec.Command(filepath.Join("..", "..", "hack", "controlplane-binaries.sh")).Output()
	Expect(err).NotTo(HaveOccurred(), "building the control plane binaries")
	return strings.TrimSpace(string(out))
}

// managerOptions shape a test manager. Claims are short so that takeovers
// happen within a test.
type managerOptions struct {
	holder   string
	maxClaim time.Duration
	// shards turns sharding on, with short Leases in shardNamespace.
	shards         int
	shardNamespace string
	// outbox bounds the relay's deliveries; the default budget if zero.
	outbox outbox.Budget
}

var managerSeq struct {
	sync.Mutex
	n int
}

// startManager runs the Once controllers in a manager of their own, as a
// separate process would, and returns a function that stops it. Several
// can run at once, without leader election.
func startManager(o managerOptions) (stop func()) {
	managerSeq.Lock()
	managerSeq.n++
	n := managerSeq.n
	managerSeq.Unlock()
	if o.holder == "" {
		o.holder = fmt.Sprintf("manager-%d", n)
	}
	if o.maxClaim == 0 {
		o.maxClaim = 2 * time.Second
	}
	// The sandbox listens on 127.0.0.1, which the egress policy refuses
	// unless allowed, as --allow-egress-cidrs does for the manager.
	c := Config{Holder: o.holder, ClusterResourceNamespace: "once-system", MaxConcurrentReconciles: 4,
		MaxClaim: o.maxClaim, ClaimGrace: time.Second,
		Egress: &httpeffects.Egress{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Shards: o.shards, ShardNamespace: o.shardNamespace,
		ShardLeaseDuration: 2 * time.Second, ShardRenewPeriod: 200 * time.Millisecond,
		OutboxBudget: o.outbox, OutboxTimeout: 2 * time.Second}
	shutdown := c.GracefulShutdownTimeout()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   CacheOptions(),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Controller:              config.Controller{SkipNameValidation: new(true)},
		GracefulShutdownTimeout: &shutdown,
	})
	Expect(err).NotTo(HaveOccurred())
	mctx, mcancel := context.WithCancel(ctx)
	Expect(Setup(mctx, mgr, c)).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	return func() {
		mcancel()
		Eventually(done, 30*time.Second).Should(BeClosed())
	}
}
