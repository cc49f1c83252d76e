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

// Command manager runs the Once controllers.
package main

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	// Import all Kubernetes client auth plugins (e.g. Azure, GCP, OIDC, etc.)
	// to ensure that exec-entrypoint and run can make use of them.
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	effectsv1alpha1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/controller"
	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/metrics"
	"github.com/once-dev/once/internal/presence"
	// +kubebuilder:scaffold:imports
)

var (
	scheme   = runtime.NewScheme()
	setupLog = ctrl.Log.WithName("setup")
	// version is stamped at build time (make build, the Dockerfile):
	// -ldflags "-X main.version=...".
	version = "devel"
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(effectsv1alpha1.AddToScheme(scheme))
	// +kubebuilder:scaffold:scheme
}

// options are the manager's flags.
type options struct {
	metricsAddr, probeAddr   string
	pprofAddr                string
	secureMetrics, http2     bool
	metricsCertPath          string
	leaderElect              bool
	holder                   string
	clusterResourceNamespace string
	maxConcurrentReconciles  int
	maxWorkersPerTool        int
	maxWorkersPerNamespace   int
	maxClaim, claimGrace     time.Duration
	maxErrorBackoff          time.Duration
	shards                   int
	shardNamespace           string
	leaderElectionNamespace  string
	shardLease, shardRenew   time.Duration
	// watchNamespaces is comma-separated.
	watchNamespaces string
	printVersion    bool
	// serviceCIDRs, podCIDRs and allowEgressCIDRs are comma-separated.
	serviceCIDRs, podCIDRs, allowEgressCIDRs string
}

// bindFlags defines the manager's flags on fs, into o, and the logger's;
// main uses flag.CommandLine, where controller-runtime adds --kubeconfig.
func bindFlags(fs *flag.FlagSet, o *options) *zap.Options {
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0", "The address the metrics endpoint binds to. "+
		"Use :8443 for HTTPS or :8080 for HTTP, or leave as 0 to disable the metrics service.")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081",
		"The address the probe endpoint binds to; 0 disables it.")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"The address pprof's endpoints listen on (plain HTTP, no authentication); empty disables them. "+
			"For profiling, not for production.")
	fs.BoolVar(&o.leaderElect, "leader-elect", false, "Enable leader election. Once is safe without it: "+
		"claims are fenced per operation; leader election only saves duplicate work.")
	fs.BoolVar(&o.secureMetrics, "metrics-secure", true, "Serve the metrics endpoint over HTTPS with authn/authz.")
	fs.StringVar(&o.metricsCertPath, "metrics-cert-path", "", "The directory with the metrics endpoint's serving "+
		"certificate and key, tls.crt and tls.key (config/default/cert_metrics_manager_patch.yaml mounts cert-manager's "+
		"there); it is reloaded when they change. Empty: a self-signed certificate made at start.")
	fs.BoolVar(&o.http2, "enable-http2", false, "Enable HTTP/2 for the metrics server.")
	fs.StringVar(&o.holder, "holder-identity", "", "This process's identity in claims; "+
		"defaults to the host name and a random suffix, unique per process.")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "once-system",
		"The namespace that holds the Secrets ClusterTools refer to.")
	fs.IntVar(&o.maxConcurrentReconciles, "max-concurrent-reconciles", 10,
		"How many operations are handled at once; each may hold a call to a tool.")
	fs.IntVar(&o.maxWorkersPerTool, "max-workers-per-tool", 0,
		"How many operations may be inside one tool's calls (its token request included) at once, so that a tool "+
			"that does not answer holds no more; 0 means a quarter of --max-concurrent-reconciles, at least 1.")
	fs.IntVar(&o.maxWorkersPerNamespace, "max-workers-per-namespace", 0,
		"How many operations of one namespace may be inside calls at once, so that one tenant's calls that never "+
			"end leave the others workers; 0 means half of --max-concurrent-reconciles, at least 1.")
	fs.DurationVar(&o.maxClaim, "max-claim", time.Minute,
		"The longest claim taken without renewal; calls with longer timeouts renew their claim while they run.")
	fs.DurationVar(&o.claimGrace, "claim-grace", 10*time.Second,
		"Added to every claim, for writing the outcome after the call's timeout.")
	fs.DurationVar(&o.maxErrorBackoff, "max-error-backoff", controller.DefaultMaxErrorBackoff,
		"The longest wait before a reconcile that failed (the API server unreachable, a write refused) is retried. "+
			"The wait doubles from 5ms up to this, jittered: work resumes within this of the API server's return.")
	fs.IntVar(&o.shards, "shards", 0, "Split the operations and sagas into this many shards, held by the running "+
		"managers through Leases, so that managers stop contending for the same objects; every manager must use "+
		"the same number. 0 turns sharding off: every manager handles every object.")
	fs.StringVar(&o.shardNamespace, "shard-namespace", "",
		"The namespace that holds the shards' Leases and the Lease with this manager's version "+
			"(kubectl once version); defaults to the manager's own namespace in a pod, "+
			"and to --cluster-resource-namespace outside one.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "",
		"The namespace that holds the leader election's Lease; defaults to the manager's own namespace in a pod. "+
			"Required with --leader-elect outside a pod.")
	fs.DurationVar(&o.shardLease, "shard-lease-duration", 15*time.Second,
		"How long a shard's Lease lasts without renewal: the shards of a manager that died wait this long for another.")
	fs.DurationVar(&o.shardRenew, "shard-renew-period", 5*time.Second,
		"How often a manager renews its shards' Leases and looks for members joining or leaving.")
	fs.StringVar(&o.serviceCIDRs, "service-cidrs", "",
		"The cluster's service CIDRs, comma-separated: tools are never called at addresses in them.")
	fs.StringVar(&o.podCIDRs, "pod-cidrs", "",
		"The cluster's pod CIDRs, comma-separated: tools are never called at addresses in them.")
	fs.StringVar(&o.allowEgressCIDRs, "allow-egress-cidrs", "",
		"CIDRs, comma-separated, that tools may be called at even though they are refused otherwise "+
			"(loopback, link-local, the cluster's ranges); for example 127.0.0.0/8 for a tool on the manager's host.")
	fs.StringVar(&o.watchNamespaces, "watch-namespaces", "", "Namespaces, comma-separated, that this manager "+
		"alone watches and serves; empty serves all. A manager so restricted serves no ClusterTools and reads no "+
		"Namespaces: it needs rights in these namespaces only (config/namespaced).")
	fs.BoolVar(&o.printVersion, "version", false, "Print the version and exit.")
	zapOpts := &zap.Options{}
	zapOpts.BindFlags(fs)
	return zapOpts
}

func main() {
	var o options
	zapOpts := bindFlags(flag.CommandLine, &o)
	flag.Parse()
	if o.printVersion {
		fmt.Println(version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(zapOpts)))

	if err := run(o); err != nil {
		setupLog.Error(err, "Manager failed")
		os.Exit(1)
	}
}

func run(o options) error {
	if o.holder == "" {
		o.holder = defaultHolder()
	}
	if o.shards > 0 && o.leaderElect {
		// The leader alone would reconcile, while every manager held
		// shards: the others' shards would wait for them to die.
		return fmt.Errorf("--shards and --leader-elect exclude each other: shards split the work among managers that all run")
	}
	var tlsOpts []func(*tls.Config)
	if !o.http2 {
		// HTTP/2 stream cancellation and rapid reset (CVE-2023-44487,
		// CVE-2023-39325) are avoided by serving HTTP/1.1 only.
		tlsOpts = append(tlsOpts, func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} })
	}
	metricsOpts := metricsserver.Options{BindAddress: o.metricsAddr, SecureServing: o.secureMetrics, TLSOpts: tlsOpts}
	if o.metricsCertPath != "" {
		// controller-runtime watches the files and serves the newest.
		metricsOpts.CertDir = o.metricsCertPath
	}
	if o.secureMetrics {
		metricsOpts.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	cfg := controller.Config{
		Holder:                   o.holder,
		ClusterResourceNamespace: o.clusterResourceNamespace,
		MaxConcurrentReconciles:  o.maxConcurrentReconciles,
		MaxWorkersPerTool:        o.maxWorkersPerTool,
		MaxWorkersPerNamespace:   o.maxWorkersPerNamespace,
		MaxClaim:                 o.maxClaim,
		ClaimGrace:               o.claimGrace,
		MaxErrorBackoff:          o.maxErrorBackoff,
		Shards:                   o.shards,
		ShardNamespace:           cmp.Or(o.shardNamespace, ownNamespace()),
		ShardLeaseDuration:       o.shardLease,
		ShardRenewPeriod:         o.shardRenew,
		WatchNamespaces:          splitList(o.watchNamespaces),
	}
	egress, err := egressPolicy(o)
	if err != nil {
		return err
	}
	cfg.Egress = egress
	shutdown := cfg.GracefulShutdownTimeout()
	restCfg := ctrl.GetConfigOrDie()
	// controller-runtime turns client-go's client-side rate limit (5
	// requests per second by default) off when none is configured
	// (QPS -1): the API server's priority and fairness is the limit.
	setupLog.Info("API client", "qps", restCfg.QPS, "burst", restCfg.Burst)
	mgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		Scheme:                  scheme,
		Cache:                   controller.WatchOnly(controller.CacheOptions(), cfg.WatchNamespaces),
		Metrics:                 metricsOpts,
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "once-manager.once.dev",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		// The lease is given up once the manager has stopped, after the
		// calls in flight are written: a standby takes over at once
		// instead of after the lease expires. main returns right after.
		LeaderElectionReleaseOnCancel: true,
		// A stopping manager finishes the calls in flight and writes
		// their answers: a rolling update must not turn a committed call
		// into an unknown outcome.
		GracefulShutdownTimeout: &shutdown,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controller.Setup(ctx, mgr, cfg); err != nil {
		return err
	}
	// +kubebuilder:scaffold:builder
	metrics.Register(mgr.GetClient())
	// The version and holder on a Lease of this manager's own, beside the
	// shards' (kubectl once version).
	pub, err := presence.New(presence.Options{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(),
		Namespace: cmp.Or(cfg.ShardNamespace, cfg.ClusterResourceNamespace), Holder: o.holder, Version: version})
	if err != nil {
		return err
	}
	if err := mgr.Add(pub); err != nil {
		return fmt.Errorf("adding the presence Lease: %w", err)
	}

	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("setting up the health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("informers", cacheSynced(mgr.GetCache())); err != nil {
		return fmt.Errorf("setting up the ready check: %w", err)
	}
	if limit := setMemoryLimit(); limit > 0 {
		setupLog.Info("Set the Go runtime's memory limit from the container's", "bytes", limit)
	}
	setupLog.Info("Starting manager", "version", version, "holder", o.holder, "shards", o.shards,
		"watchNamespaces", cfg.WatchNamespaces)
	return mgr.Start(ctx)
}

// cacheSynced is the readiness check: ready once the informers the
// manager has started have synced, so that it answers from a full view.
// A standby of leader election is ready too once its cache is; it starts
// the controllers' informers when it is elected.
func cacheSynced(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New("the informers have not synced")
		}
		return nil
	}
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var items []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// egressPolicy is the egress policy the flags describe.
func egressPolicy(o options) (*httpeffects.Egress, error) {
	e := &httpeffects.Egress{}
	for flagName, v := range map[string]string{"service-cidrs": o.serviceCIDRs, "pod-cidrs": o.podCIDRs} {
		p, err := httpeffects.ParseCIDRs(v)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flagName, err)
		}
		e.Refused = append(e.Refused, p...)
	}
	allowed, err := httpeffects.ParseCIDRs(o.allowEgressCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--allow-egress-cidrs: %w", err)
	}
	e.Allowed = allowed
	return e, nil
}

// defaultHolder is unique per process: a restarted manager must not take
// its predecessor's claims for its own.
func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil {
		host = "once"
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// serviceAccountNamespace is where a pod finds its own namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace of the manager's pod, where its Role grants
// the Leases; empty outside a pod.
func ownNamespace() string {
	b, err := os.ReadFile(serviceAccountNamespace)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
