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

package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

const (
	controllerManagerName           = "kube-controller-manager"
	controllerManagerKubeconfigName = "kube-controller-manager.kubeconfig"
	controllerManagerLogName        = "kube-controller-manager.log"

	// defaultControllers are the controllers Once relies on: the garbage
	// collector acts on owner references (a Saga owns its steps), the
	// namespace controller empties and removes a deleted namespace.
	defaultControllers = "garbage-collector-controller,namespace-controller"
)

// controllerManager is a running kube-controller-manager.
type controllerManager struct {
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	err  error // how the process ended, once done is closed
}

// startControllerManager starts kube-controller-manager with only the given
// controllers, against the API server that kubeconfig names, and waits until
// its /healthz answers "ok".
func startControllerManager(logger logr.Logger, opts options, kubeconfig string,
	signals <-chan os.Signal) (*controllerManager, error) {
	port, err := freePort()
	if err != nil {
		return nil, fmt.Errorf("finding a port for kube-controller-manager: %w", err)
	}
	logPath := filepath.Join(opts.dir, controllerManagerLogName)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the kube-controller-manager log: %w", err)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + opts.controllers,
		// One process, its own admin credentials: no service account
		// tokens to mint (the token controller does not run).
		"--use-service-account-credentials=false",
		"--leader-elect=false",
		// Secure serving only for /healthz (always allowed, anonymous is
		// enough), on loopback with an in-memory self-signed certificate.
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--kube-api-qps=100",
		"--kube-api-burst=200",
	}
	cmd := exec.Command(filepath.Join(opts.assets, controllerManagerName), args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = sysProcAttr()
	logger.Info("Starting kube-controller-manager", "controllers", opts.controllers, "port", port, "log", logPath)
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	cm := &controllerManager{cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		cm.err = cmd.Wait()
		close(cm.done)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), opts.startTimeout)
	defer cancel()
	if err := cm.waitHealthy(ctx, port, signals); err != nil {
		cm.stop(logger)
		return nil, fmt.Errorf("%w (log: %s)", err, logPath)
	}
	return cm, nil
}

// waitHealthy polls https://127.0.0.1:PORT/healthz until it answers "ok", the
// process ends, the context expires or a signal arrives.
func (cm *controllerManager) waitHealthy(ctx context.Context, port int, signals <-chan os.Signal) error {
	client := &http.Client{
		Timeout: 2 * time.Second,
		Transport: &http.Transport{
			// The certificate is self-signed, made in memory at start-up,
			// and the port is on loopback.
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
		},
	}
	defer client.CloseIdleConnections()
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		last = healthz(ctx, client, url)
		if last == "ok" {
			return nil
		}
		select {
		case <-cm.done:
			return fmt.Errorf("kube-controller-manager exited during start-up: %v", cm.err)
		case <-ctx.Done():
			return fmt.Errorf("kube-controller-manager not healthy: %w (last answer: %s)", ctx.Err(), last)
		case sig := <-signals:
			return fmt.Errorf("interrupted by %s while waiting for kube-controller-manager", sig)
		case <-tick.C:
		}
	}
}

// healthz returns the body of a 200 answer, or what went wrong.
func healthz(ctx context.Context, client *http.Client, url string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err.Error()
	}
	resp, err := client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body))
}

// stop sends SIGTERM, waits up to stopTimeout, then kills. Safe to call on a
// process that has already exited.
func (cm *controllerManager) stop(logger logr.Logger) {
	defer func() { _ = cm.log.Close() }()
	select {
	case <-cm.done:
		return
	default:
	}
	if err := cm.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		logger.Error(err, "Signalling kube-controller-manager")
	}
	select {
	case <-cm.done:
		return
	case <-time.After(stopTimeout):
	}
	logger.Info("kube-controller-manager still running; killing it", "timeout", stopTimeout.String())
	_ = cm.cmd.Process.Kill()
	<-cm.done
}

// freePort asks the kernel for a free loopback port. Another process may take
// it before kube-controller-manager binds it; then start-up fails and says so.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
