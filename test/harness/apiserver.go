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

package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// KillAPIServer kills the control plane's kube-apiserver (SIGKILL), as a
// crash or a lost node would take it away, and waits until it is gone;
// etcd and the state folder stay. restart starts it again with the same
// command line and environment (on top of the caller's), on the same port
// and certificates, its output going to logPath: clients and kubeconfigs
// work again as they were.
//
// bin/controlplane does not supervise the restarted process: stop it
// (Process.Stop) before Stop stops the control plane, which would
// otherwise wait for it and then kill it.
func (c *ControlPlane) KillAPIServer() (restart func(logPath string) (*Process, error), err error) {
	pid, err := c.apiServerPid()
	if err != nil {
		return nil, err
	}
	args, err := procStrings(pid, "cmdline")
	if err != nil {
		return nil, err
	}
	env, err := procStrings(pid, "environ")
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	for !processGone(pid) {
		time.Sleep(20 * time.Millisecond)
	}
	return func(logPath string) (*Process, error) {
		return start(args[0], args[1:], env, logPath)
	}, nil
}

// WaitAPIServerReady waits until kube-apiserver answers /readyz with "ok".
func (c *ControlPlane) WaitAPIServerReady(ctx context.Context, poll time.Duration) error {
	for {
		out, err := c.Kubectl(ctx, "", "get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) == "ok" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready: %w (last answer %q, %v)", ctx.Err(), out, err)
		case <-time.After(poll):
		}
	}
}

// apiServerPid finds the control plane's kube-apiserver as
// hack/controlplane.sh does: by its executable's name and its
// --cert-dir=DIR/certs.
func (c *ControlPlane) apiServerPid() (int, error) {
	dir, err := filepath.EvalSymlinks(c.Dir)
	if err != nil {
		return 0, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return 0, err
	}
	want := "--cert-dir=" + filepath.Join(dir, "certs")
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var found []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kube-apiserver" || processGone(pid) {
			continue
		}
		args, err := procStrings(pid, "cmdline")
		if err == nil && len(args) > 0 && slices.Contains(args[1:], want) {
			found = append(found, pid)
		}
	}
	if len(found) != 1 {
		return 0, fmt.Errorf("the control plane in %s: found %d kube-apiserver processes, want one", dir, len(found))
	}
	return found[0], nil
}

// procStrings reads a NUL-separated file of /proc/PID: cmdline, environ.
func procStrings(pid int, name string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), name))
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, errors.New("/proc/" + strconv.Itoa(pid) + "/" + name + " is empty")
	}
	return strings.Split(string(b), "\x00"), nil
}

// processGone reports whether a process has exited: gone from /proc, or a
// zombie that its parent has not reaped yet.
func processGone(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces, so read after its ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}
