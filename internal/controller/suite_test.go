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
	"cmp"
	"context"
	"fmt"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/test/apiserver"
	"github.com/once-dev/once/test/sandbox"
)

// The suite runs the real controllers against a real API server (envtest,
// with kube-apiserver and etcd built from source by
// hack/controlplane-binaries.sh) and a real HTTP tool (the sandbox), and
// counts effects at the tool.

var (
	ctx       context.Context
	cancel    context.CancelFunc
	apiServer *apiserver.Server
	cfg       *rest.Config
	k8sClient client.Client
	scheme    *runtime.Scheme

	// tool is the sandbox tool every test calls, and ledger its ledger.
	toolURL string
	ledger  *sandbox.Client
)

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	// Gomega's default of one second is shorter than a shared CI machine
	// may take to run one pass; a spec that needs a shorter or longer
	// wait says so.
	SetDefaultEventuallyTimeout(15 * time.Second)
	RunSpecs(t, "Controller Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())

	By("starting a real API server")
	var err error
	apiServer, err = apiserver.Start()
	Expect(err).NotTo(HaveOccurred())
	cfg, k8sClient, scheme = apiServer.Config, apiServer.Client, apiServer.Scheme
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
	if apiServer != nil {
		Expect(apiServer.Stop()).To(Succeed())
	}
})

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
	// config is the manager's identity on the API server; envtest's
	// admin (system:masters) if nil.
	config *rest.Config
	// watch are the only namespaces it watches, as --watch-namespaces
	// says; all if empty.
	watch []string
	// sagaReader, if set, wraps what the saga reconciler reads past the
	// cache through.
	sagaReader func(client.Reader) client.Reader
	// sagaEvalTimeout, if set, bounds the wall time of a saga's
	// expressions, as a CPU starved by others would.
	sagaEvalTimeout time.Duration
	// synced, if set, is closed once the operation controller's workers
	// have started: its handlers have seen what the cache listed, so a
	// change made after it reaches the controller as a change.
	synced chan struct{}
	// workersPerTool is the per-tool bulkhead; every worker if zero. The
	// default bulkhead (a quarter of the 4 workers: one) would let one
	// tool's calls through one at a time, and the specs that make many
	// operations of one tool wait on it; the bulkhead's own specs set it.
	workersPerTool int
	// workersPerNamespace is a namespace's share of the workers; every
	// worker if zero, for the same reason: most specs make their
	// operations in one namespace. The share's own specs set it.
	workersPerNamespace int
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
		MaxWorkersPerTool: cmp.Or(o.workersPerTool, 4), MaxWorkersPerNamespace: cmp.Or(o.workersPerNamespace, 4),
		MaxClaim: o.maxClaim, ClaimGrace: time.Second,
		Egress: &httpeffects.Egress{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		Shards: o.shards, ShardNamespace: o.shardNamespace,
		ShardLeaseDuration: 2 * time.Second, ShardRenewPeriod: 200 * time.Millisecond,
		OutboxBudget: o.outbox, OutboxTimeout: 2 * time.Second, WatchNamespaces: o.watch}
	shutdown := c.GracefulShutdownTimeout()
	if o.config == nil {
		o.config = cfg
	}
	logger := logf.Log
	if o.synced != nil {
		logger = logr.New(&workersStarted{LogSink: logger.GetSink(), controller: "sideeffectoperation",
			started: sync.OnceFunc(func() { close(o.synced) })})
	}
	mgr, err := ctrl.NewManager(o.config, ctrl.Options{
		Logger:                  logger,
		Scheme:                  scheme,
		Cache:                   WatchOnly(CacheOptions(), o.watch),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Controller:              config.Controller{SkipNameValidation: new(true)},
		GracefulShutdownTimeout: &shutdown,
	})
	Expect(err).NotTo(HaveOccurred())
	mctx, mcancel := context.WithCancel(ctx)
	if o.sagaReader == nil && o.sagaEvalTimeout == 0 {
		Expect(Setup(mctx, mgr, c)).To(Succeed())
	} else {
		d, err := c.depsOf(mgr)
		Expect(err).NotTo(HaveOccurred())
		rs, err := c.Build(d)
		Expect(err).NotTo(HaveOccurred())
		if o.sagaReader != nil {
			rs.Saga.APIReader = o.sagaReader(rs.Saga.APIReader)
		}
		rs.Saga.EvalTimeout = o.sagaEvalTimeout
		Expect(rs.SetupWithManager(mctx, mgr)).To(Succeed())
	}
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

// workersStarted passes a manager's log on, and calls started when the
// named controller logs that its workers start. controller-runtime starts
// them only after its sources have synced: a cache synced before that
// (WaitForCacheSync) may still deliver what it listed to the controller
// later, with the changes made meanwhile folded into it.
type workersStarted struct {
	logr.LogSink
	controller string
	named      bool
	started    func()
}

func (w *workersStarted) Info(level int, msg string, kv ...any) {
	if w.named && msg == "Starting workers" {
		w.started()
	}
	w.LogSink.Info(level, msg, kv...)
}

func (w *workersStarted) WithValues(kv ...any) logr.LogSink {
	named := w.named
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i] == "controller" && kv[i+1] == w.controller {
			named = true
		}
	}
	return &workersStarted{LogSink: w.LogSink.WithValues(kv...), controller: w.controller, named: named, started: w.started}
}

func (w *workersStarted) WithName(name string) logr.LogSink {
	return &workersStarted{LogSink: w.LogSink.WithName(name), controller: w.controller, named: w.named, started: w.started}
}
