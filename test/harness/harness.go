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

// Package harness runs Once the way its users do: the local control plane
// (hack/controlplane.sh), the manager and the sandbox tool as processes of
// their own, and kubectl as the client. The end-to-end tests and the chaos
// run share it. Binaries come from `make build` (bin/).
package harness

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Root is the repository's root folder, found from the working directory.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "PROJECT")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no PROJECT file above the working directory")
		}
		dir = parent
	}
}

// ControlPlane is a local etcd and kube-apiserver with the CRDs installed,
// started by hack/controlplane.sh in a state folder of its own.
type ControlPlane struct {
	Root       string
	Dir        string
	Kubeconfig string
	// Assets holds kube-apiserver, etcd and kubectl.
	Assets string
}

// StartControlPlane starts a control plane in dir (building its binaries
// if this machine has none yet).
func StartControlPlane(root, dir string) (*ControlPlane, error) {
	return StartControlPlaneWith(root, dir, ControlPlaneOptions{})
}

// ControlPlaneOptions shape a control plane.
type ControlPlaneOptions struct {
	// AuthenticationConfig is kube-apiserver's --authentication-config, if
	// any: the JWT issuers it trusts.
	AuthenticationConfig string
}

// StartControlPlaneWith starts a control plane in dir as o says.
func StartControlPlaneWith(root, dir string, o ControlPlaneOptions) (*ControlPlane, error) {
	assets, err := Assets(root)
	if err != nil {
		return nil, err
	}
	env := []string{"ONCE_CONTROLPLANE_DIR=" + dir}
	if o.AuthenticationConfig != "" {
		env = append(env, "ONCE_CONTROLPLANE_AUTHENTICATION_CONFIG="+o.AuthenticationConfig)
	}
	out, err := run(root, env, controlPlaneScript(root), "start")
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	c := &ControlPlane{Root: root, Dir: dir, Kubeconfig: lastLine(out), Assets: assets}
	if err := c.installPolicies(); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return c, nil
}

// installPolicies applies the admission policies of config/policy, as a
// deployment does, and waits until the API server enforces them: until a
// dry-run create of an operation comes back with the finalizer the
// operation-finalizer policy adds.
func (c *ControlPlane) installPolicies() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Kubectl(ctx, "", "apply", "-k", filepath.Join(c.Root, "config", "policy")); err != nil {
		return fmt.Errorf("installing the admission policies: %w", err)
	}
	probe := `{"apiVersion":"effects.once.dev/v1alpha1","kind":"SideEffectOperation",` +
		`"metadata":{"name":"policy-probe","namespace":"default"},` +
		`"spec":{"toolRef":{"name":"none"},"operation":"probe"}}`
	for {
		out, err := c.Kubectl(ctx, probe, "create", "--dry-run=server", "-o", "jsonpath={.metadata.finalizers}", "-f", "-")
		if err == nil && strings.Contains(out, "effects.once.dev/record") {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the admission policies are not enforced after a minute (last answer %q, %v)", out, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop stops the control plane and removes its state.
func (c *ControlPlane) Stop() error {
	_, err := run(c.Root, []string{"ONCE_CONTROLPLANE_DIR=" + c.Dir}, controlPlaneScript(c.Root), "stop")
	return err
}

func controlPlaneScript(root string) string {
	return filepath.Join(root, "hack", "controlplane.sh")
}

// Kubectl runs the control plane's kubectl (the version of the API server)
// with stdin, and returns its standard output; an error carries stderr.
func (c *ControlPlane) Kubectl(ctx context.Context, stdin string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Assets, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s",
			strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Process is a binary of the project running on its own.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// Log holds everything the process wrote.
	Log string
}

// ManagerOptions shape a manager process.
type ManagerOptions struct {
	// Binary is the manager to run; bin/manager-failpoints by default.
	Binary string
	// Holder is its identity in claims; unique per process by default.
	Holder string
	// Failpoints sets GOFAIL_FAILPOINTS, for example
	// `executeAfterAnswer=1*return("kill")`.
	Failpoints string
	// FailpointAddr sets GOFAIL_HTTP: an endpoint to set failpoints while
	// the manager runs.
	FailpointAddr string
	// MetricsAddr is where the metrics endpoint listens (plain HTTP); none
	// by default.
	MetricsAddr string
	// Args are extra flags.
	Args []string
	// Log is the file the manager's output goes to.
	Log string
}

// StartManager runs a manager against the control plane.
func (c *ControlPlane) StartManager(o ManagerOptions) (*Process, error) {
	bin := o.Binary
	if bin == "" {
		bin = filepath.Join(c.Root, "bin", "manager-failpoints")
	}
	// The sandbox tool listens on loopback, which the manager refuses to
	// call unless allowed.
	args := []string{"--health-probe-bind-address=0", "--metrics-secure=false",
		"--metrics-bind-address=" + cmp.Or(o.MetricsAddr, "0"), "--zap-log-level=info",
		"--allow-egress-cidrs=127.0.0.0/8"}
	if o.Holder != "" {
		args = append(args, "--holder-identity="+o.Holder)
	}
	args = append(args, o.Args...)
	env := []string{"KUBECONFIG=" + c.Kubeconfig}
	if o.Failpoints != "" {
		env = append(env, "GOFAIL_FAILPOINTS="+o.Failpoints)
	}
	if o.FailpointAddr != "" {
		env = append(env, "GOFAIL_HTTP="+o.FailpointAddr)
	}
	return start(bin, args, env, o.Log)
}

// Sandbox is the sandbox tool running as a process.
type Sandbox struct {
	*Process
	// URL is where it listens.
	URL string
}

// StartSandbox runs the sandbox tool on addr (127.0.0.1:0 for any port),
// keeping its ledger in ledgerPath so that it survives a restart.
func StartSandbox(root, addr, ledgerPath, logPath string, args ...string) (*Sandbox, error) {
	args = append([]string{"--listen", addr, "--ledger", ledgerPath}, args...)
	p, err := start(filepath.Join(root, "bin", "sandbox-tool"), args, nil, logPath)
	if err != nil {
		return nil, err
	}
	url, err := p.waitListening("sandbox-tool")
	if err != nil {
		return nil, err
	}
	return &Sandbox{Process: p, URL: url}, nil
}

// StartGateway runs the MCP gateway (bin/once-mcp) against the control
// plane on addr (127.0.0.1:0 for any port), with extra flags, and returns
// it with the URL of its MCP endpoint once it listens. It serves plain HTTP
// on loopback unless args give it a certificate.
func (c *ControlPlane) StartGateway(addr, logPath string, args ...string) (*Process, string, error) {
	if !slices.Contains(args, "--tls-cert-file") {
		args = append([]string{"--insecure-http"}, args...)
	}
	args = append([]string{"--listen", addr, "--kubeconfig", c.Kubeconfig}, args...)
	p, err := start(filepath.Join(c.Root, "bin", "once-mcp"), args, nil, logPath)
	if err != nil {
		return nil, "", err
	}
	url, err := p.waitListening("once-mcp")
	if err != nil {
		return nil, "", err
	}
	return p, url, nil
}

// waitListening waits up to 30 s for the program name to print where it
// listens ("<name> listening on <url>"), and returns the URL; it kills a
// process that does not say.
func (p *Process) waitListening(name string) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if url := p.printed(name + " listening on "); url != "" {
			return url, nil
		}
		if p.Exited() {
			return "", fmt.Errorf("%s exited: %v; log: %s", name, p.err, readFile(p.Log))
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Kill()
	return "", fmt.Errorf("%s did not say where it listens; log: %s", name, readFile(p.Log))
}

func start(bin string, args, env []string, logPath string) (*Process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: %w (run make build)", bin, err)
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = log.Close()
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), Log: logPath}
	go func() {
		p.err = cmd.Wait()
		_ = log.Close()
		close(p.done)
	}()
	return p, nil
}

// printed is the rest of the first line of the log that starts with
// prefix, once there is one.
func (p *Process) printed(prefix string) string {
	s := bufio.NewScanner(strings.NewReader(readFile(p.Log)))
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), prefix); ok {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// Kill sends SIGKILL, as kill -9 does, and waits for the process to end.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and waits up to a timeout, then kills.
func (p *Process) Stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
	}
}

// Wait waits for the process to end and returns its exit code.
func (p *Process) Wait(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode(), nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("process %d still running after %s", p.cmd.Process.Pid, timeout)
	}
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Signaled returns the signal that ended the process, and false if it has
// not ended or ended by exiting (normally or with an error code).
func (p *Process) Signaled() (syscall.Signal, bool) {
	if !p.Exited() || p.cmd.ProcessState == nil {
		return 0, false
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}

// Pid is the process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has ended.
func (p *Process) Done() <-chan struct{} { return p.done }

// FreeAddr returns a loopback address with a port free right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// Assets is the folder of this machine's kube-apiserver, etcd and kubectl,
// which hack/controlplane-binaries.sh builds if there are none yet.
func Assets(root string) (string, error) {
	out, err := run(root, nil, filepath.Join(root, "hack", "controlplane-binaries.sh"))
	if err != nil {
		return "", fmt.Errorf("building the control plane binaries: %w", err)
	}
	return lastLine(out), nil
}

func run(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
