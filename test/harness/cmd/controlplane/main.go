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

// Command controlplane runs a long-lived local Kubernetes control plane (etcd,
// kube-apiserver and kube-controller-manager on loopback) for the Once demo and
// end-to-end tests. It is a thin wrapper around controller-runtime's envtest,
// which picks free ports and sets up certificates, service-account keys and
// client users; kube-controller-manager it starts itself.
//
// Usually it is driven by hack/controlplane.sh (start, stop, status, env);
// it can also be run by hand:
//
//	go build -o bin/controlplane ./test/harness/cmd/controlplane
//	bin/controlplane --assets "$(hack/controlplane-binaries.sh)" --dir .local/controlplane
//
// Flags:
//
//	--assets DIR       folder with kube-apiserver, kube-controller-manager, etcd and kubectl
//	                   (default $KUBEBUILDER_ASSETS)
//	--controllers LIST kube-controller-manager's controllers (default
//	                   garbage-collector-controller,namespace-controller; "" runs none)
//	--crds DIR         CRD manifests to install and wait for (default config/crd/bases; "" for none)
//	--dir DIR          state folder (required)
//	--kubeconfig PATH  admin kubeconfig to write (default DIR/kubeconfig)
//	--start-timeout D  how long each component may take to start (default 60s)
//
// Layout of the state folder while running:
//
//	DIR/controlplane.pid   pid of this process (the session leader when started by the script)
//	DIR/controlplane.lock  held while running: one control plane per folder
//	DIR/kubeconfig         admin kubeconfig (group system:masters), mode 0600,
//	                       written only once the API server answers /readyz and
//	                       kube-controller-manager /healthz
//	DIR/kube-controller-manager.kubeconfig
//	                       its own admin kubeconfig, removed on stop
//	DIR/kube-controller-manager.log
//	                       its output, kept after stop for reading
//	DIR/etcd/              etcd data, removed on stop
//	DIR/certs/             API server certificates and keys, removed on stop
//
// It prints "kubeconfig: PATH" on stdout once ready, then runs until SIGINT or
// SIGTERM, then stops kube-controller-manager, kube-apiserver and etcd and
// removes the kubeconfigs, the data and the pid file. etcd and kube-apiserver
// output goes to stderr.
//
// Controllers: kube-controller-manager runs the garbage collector (owner
// references: deleting a Saga deletes its steps) and the namespace controller
// (a deleted namespace is emptied and goes away), nothing else. There is no
// scheduler; service accounts get no tokens, and the ServiceAccount admission
// plugin is off; pods are stored but never scheduled or run.
//
// Admission: kube-apiserver's default plugins, and also
// OwnerReferencesPermissionEnforcement, as in OpenShift.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/once-dev/once/test/apiserver"
)

const (
	pidFileName  = "controlplane.pid"
	lockFileName = "controlplane.lock"
	etcdDirName  = "etcd"
	certsDirName = "certs"

	// Each component gets this long to stop before it is killed; all three
	// together stay below the 40 seconds hack/controlplane.sh waits.
	stopTimeout = 10 * time.Second
)

type options struct {
	assets       string
	authnConfig  string
	controllers  string
	crds         string
	dir          string
	kubeconfig   string
	startTimeout time.Duration
}

func main() {
	opts := options{}
	// A flag set of our own: controller-runtime registers its own --kubeconfig
	// on the global one.
	fs := flag.NewFlagSet(filepath.Base(os.Args[0]), flag.ExitOnError)
	fs.StringVar(&opts.assets, "assets", os.Getenv("KUBEBUILDER_ASSETS"),
		"folder with the kube-apiserver, kube-controller-manager, etcd and kubectl binaries (default $KUBEBUILDER_ASSETS)")
	fs.StringVar(&opts.authnConfig, "authentication-config", "",
		"kube-apiserver's --authentication-config: a structured AuthenticationConfiguration (JWT issuers it trusts)")
	fs.StringVar(&opts.controllers, "controllers", defaultControllers,
		`kube-controller-manager's --controllers ("" starts no kube-controller-manager)`)
	fs.StringVar(&opts.crds, "crds", filepath.Join("config", "crd", "bases"),
		`folder of CRD manifests to install and wait for ("" installs none)`)
	fs.StringVar(&opts.dir, "dir", "", "state folder: pid file, etcd data, certificates (required)")
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "where to write the admin kubeconfig (default DIR/kubeconfig)")
	fs.DurationVar(&opts.startTimeout, "start-timeout", 60*time.Second,
		"how long etcd and kube-apiserver may each take to start")
	_ = fs.Parse(os.Args[1:]) // ExitOnError: Parse exits on a bad flag

	logger := zap.New(zap.WriteTo(os.Stderr)).WithName("controlplane")
	ctrllog.SetLogger(logger)

	if err := run(logger, opts, fs.Args()); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: error: %v\n", err)
		os.Exit(1)
	}
}

func run(logger logr.Logger, opts options, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected arguments: %q", args)
	}
	if err := opts.complete(); err != nil {
		return err
	}

	// Catch the signals before anything starts, so that a stop request that
	// arrives during start-up still leads to a clean shutdown.
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)

	if err := os.MkdirAll(opts.dir, 0o700); err != nil {
		return fmt.Errorf("creating the state folder: %w", err)
	}
	unlock, err := lockDir(opts.dir)
	if err != nil {
		return err
	}
	defer unlock()

	pidFile := filepath.Join(opts.dir, pidFileName)
	etcdDir := filepath.Join(opts.dir, etcdDirName)
	certsDir := filepath.Join(opts.dir, certsDirName)
	cmKubeconfig := filepath.Join(opts.dir, controllerManagerKubeconfigName)

	// Leftovers of a run that was killed: envtest reuses existing certificates
	// in CertDir without knowing their CA, so always start from scratch.
	for _, p := range []string{opts.kubeconfig, cmKubeconfig, etcdDir, certsDir} {
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("removing leftover %s: %w", p, err)
		}
	}
	for _, p := range []string{etcdDir, certsDir} {
		if err := os.Mkdir(p, 0o700); err != nil {
			return err
		}
	}
	if err := writeFileAtomic(pidFile, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("writing the pid file: %w", err)
	}

	env := newEnvironment(opts, etcdDir, certsDir)
	var cm *controllerManager
	cleanup := func() {
		// The kubeconfig goes first so that nobody picks up a dying control plane.
		if err := os.Remove(opts.kubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
			logger.Error(err, "Removing the kubeconfig")
		}
		// kube-controller-manager before the API server it talks to.
		if cm != nil {
			cm.stop(logger)
		}
		if err := os.Remove(cmKubeconfig); err != nil && !errors.Is(err, os.ErrNotExist) {
			logger.Error(err, "Removing the kube-controller-manager kubeconfig")
		}
		if err := env.Stop(); err != nil {
			logger.Error(err, "Stopping etcd and kube-apiserver")
		}
		for _, p := range []string{etcdDir, certsDir} {
			if err := os.RemoveAll(p); err != nil {
				logger.Error(err, "Removing state", "path", p)
			}
		}
		removePidFile(logger, pidFile)
	}

	logger.Info("Starting etcd and kube-apiserver", "assets", opts.assets, "dir", opts.dir)
	started := make(chan error, 1)
	go func() {
		_, err := env.Start()
		started <- err
	}()
	select {
	case err := <-started:
		if err != nil {
			cleanup()
			return fmt.Errorf("starting the control plane: %w", err)
		}
	case sig := <-signals:
		logger.Info("Signal received during start-up; stopping once started", "signal", sig.String())
		<-started
		cleanup()
		return fmt.Errorf("interrupted by %s during start-up", sig)
	}

	host := env.ControlPlane.APIServer.SecureServing.URL("https", "/").String()
	kubeconfig, err := adminKubeconfig(logger, env, opts, signals)
	if err != nil {
		cleanup()
		return err
	}
	if opts.controllers != "" {
		if err := writeFileAtomic(cmKubeconfig, kubeconfig, 0o600); err != nil {
			cleanup()
			return fmt.Errorf("writing the kube-controller-manager kubeconfig: %w", err)
		}
		if cm, err = startControllerManager(logger, opts, cmKubeconfig, signals); err != nil {
			cleanup()
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(opts.kubeconfig), 0o700); err != nil {
		cleanup()
		return err
	}
	if err := writeFileAtomic(opts.kubeconfig, kubeconfig, 0o600); err != nil {
		cleanup()
		return fmt.Errorf("writing the kubeconfig: %w", err)
	}
	logger.Info("Control plane ready", "server", host, "kubeconfig", opts.kubeconfig)
	fmt.Printf("kubeconfig: %s\n", opts.kubeconfig)

	sig := <-signals
	logger.Info("Stopping", "signal", sig.String())
	go func() {
		for s := range signals {
			logger.Info("Already stopping; signal ignored", "signal", s.String())
		}
	}()
	cleanup()
	logger.Info("Stopped")
	return nil
}

// complete fills in defaults and checks the options.
func (o *options) complete() error {
	if o.dir == "" {
		return errors.New("--dir is required")
	}
	if o.assets == "" {
		return errors.New("--assets is required when KUBEBUILDER_ASSETS is not set " +
			"(hack/controlplane-binaries.sh prints the folder)")
	}
	var err error
	if o.dir, err = filepath.Abs(o.dir); err != nil {
		return err
	}
	if o.assets, err = filepath.Abs(o.assets); err != nil {
		return err
	}
	binaries := []string{"etcd", "kube-apiserver", "kubectl"}
	if o.controllers != "" {
		binaries = append(binaries, controllerManagerName)
	}
	for _, name := range binaries {
		info, err := os.Stat(filepath.Join(o.assets, name))
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("no executable %s in %s (build them with hack/controlplane-binaries.sh)", name, o.assets)
		}
	}
	if o.crds != "" {
		if o.crds, err = filepath.Abs(o.crds); err != nil {
			return err
		}
		if _, err := os.Stat(o.crds); err != nil {
			return fmt.Errorf("CRD folder: %w (run make manifests, or pass --crds \"\")", err)
		}
	}
	if o.kubeconfig == "" {
		o.kubeconfig = filepath.Join(o.dir, "kubeconfig")
	}
	if o.kubeconfig, err = filepath.Abs(o.kubeconfig); err != nil {
		return err
	}
	if o.startTimeout <= 0 {
		return errors.New("--start-timeout must be positive")
	}
	return nil
}

func newEnvironment(opts options, etcdDir, certsDir string) *envtest.Environment {
	useExisting := false
	env := &envtest.Environment{
		// Never fall back to whatever cluster USE_EXISTING_CLUSTER points at.
		UseExistingCluster: &useExisting,
		ControlPlane: envtest.ControlPlane{
			// Explicit paths: KUBEBUILDER_ASSETS and TEST_ASSET_* in the
			// environment must not override --assets.
			Etcd: &envtest.Etcd{
				Path:    filepath.Join(opts.assets, "etcd"),
				DataDir: etcdDir,
				Out:     os.Stderr,
				Err:     os.Stderr,
			},
			APIServer: &envtest.APIServer{
				Path:    filepath.Join(opts.assets, "kube-apiserver"),
				CertDir: certsDir,
				Out:     os.Stderr,
				Err:     os.Stderr,
			},
			KubectlPath: filepath.Join(opts.assets, "kubectl"),
		},
		ControlPlaneStartTimeout: opts.startTimeout,
		ControlPlaneStopTimeout:  stopTimeout,
	}
	apiserver.EnforceOwnerReferences(env.ControlPlane.APIServer)
	if opts.authnConfig != "" {
		env.ControlPlane.APIServer.Configure().Set("authentication-config", opts.authnConfig)
	}
	if opts.crds != "" {
		env.CRDDirectoryPaths = []string{opts.crds}
		env.ErrorIfCRDPathMissing = true
	}
	return env
}

// adminKubeconfig provisions the admin user, waits until the API server is
// ready and returns the user's kubeconfig.
func adminKubeconfig(logger logr.Logger, env *envtest.Environment, opts options,
	signals <-chan os.Signal) ([]byte, error) {
	admin, err := env.ControlPlane.AddUser(envtest.User{
		Name:   "once-admin",
		Groups: []string{"system:masters"},
	}, &rest.Config{QPS: 100, Burst: 200})
	if err != nil {
		return nil, fmt.Errorf("provisioning the admin user: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), opts.startTimeout)
	defer cancel()
	if err := waitReady(ctx, logger, admin.Config(), signals); err != nil {
		return nil, err
	}

	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, fmt.Errorf("rendering the kubeconfig: %w", err)
	}
	return kubeconfig, nil
}

// waitReady polls /readyz as the admin user until it answers "ok".
func waitReady(ctx context.Context, logger logr.Logger, cfg *rest.Config, signals <-chan os.Signal) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		body, err := dc.RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %w (last answer: %v %s)", ctx.Err(), err, bytes.TrimSpace(body))
		case sig := <-signals:
			return fmt.Errorf("interrupted by %s while waiting for readiness", sig)
		case <-tick.C:
			logger.V(1).Info("Waiting for /readyz", "err", err)
		}
	}
}

// writeFileAtomic writes data to a temporary file next to path and renames it
// into place, so readers see either no file or the complete one.
func writeFileAtomic(path string, data []byte, mode os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if err = f.Chmod(mode); err != nil {
		return err
	}
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// lockDir takes an exclusive lock on DIR/controlplane.lock so that two control
// planes never share one state folder. The kernel drops the lock when this
// process ends, however it ends; the children do not inherit it (close-on-exec).
func lockDir(dir string) (func(), error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another control plane is running with state folder %s (%s is locked)", dir, path)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}

// removePidFile removes the pid file if it still names this process.
func removePidFile(logger logr.Logger, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		return
	}
	if err := os.Remove(path); err != nil {
		logger.Error(err, "Removing the pid file")
	}
}
