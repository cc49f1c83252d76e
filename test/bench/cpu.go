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

package bench

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/prometheus/procfs"
)

// controlPlaneProcs are a control plane's kube-apiserver and etcd, whose
// CPU time a phase reads before and after its work. CPU seconds per
// operation say where a phase's cost goes: to kube-apiserver or to etcd,
// and how much more of it an operation of Once takes than one of the
// ceiling. A phase's throughput is by definition kube-apiserver's cores
// over its CPU per operation, so the two figures tell apart an API server
// that works more per operation from one that gets fewer cores (a
// manager on the same machine takes some).
type controlPlaneProcs struct {
	apiserver, etcd procfs.Proc
}

// Roles of a control plane's processes.
const (
	roleAPIServer = "kube-apiserver"
	roleEtcd      = "etcd"
)

// findControlPlane finds the processes of the control plane whose state
// folder is dir (absolute, as hack/controlplane.sh resolves it).
func findControlPlane(dir string) (controlPlaneProcs, error) {
	var cp controlPlaneProcs
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return cp, err
	}
	procs, err := procfs.AllProcs()
	if err != nil {
		return cp, fmt.Errorf("listing processes: %w", err)
	}
	var apiservers, etcds []procfs.Proc
	for _, p := range procs {
		comm, err := p.Comm()
		if err != nil {
			continue // gone meanwhile
		}
		args, err := p.CmdLine()
		if err != nil {
			continue
		}
		switch controlPlaneRole(comm, args, dir) {
		case roleAPIServer:
			apiservers = append(apiservers, p)
		case roleEtcd:
			etcds = append(etcds, p)
		}
	}
	if len(apiservers) != 1 || len(etcds) != 1 {
		return cp, fmt.Errorf("the control plane in %s: found %d kube-apiserver and %d etcd processes, want one of each",
			dir, len(apiservers), len(etcds))
	}
	return controlPlaneProcs{apiserver: apiservers[0], etcd: etcds[0]}, nil
}

// controlPlaneRole is the role of the process with executable comm and
// arguments args in the control plane whose state folder is dir, or ""
// if it is not one of its processes. It recognises them as
// hack/controlplane.sh does: kube-apiserver --cert-dir=DIR/certs, etcd
// --data-dir=DIR/etcd.
func controlPlaneRole(comm string, args []string, dir string) string {
	switch {
	case comm == roleAPIServer && hasFlag(args, "--cert-dir", filepath.Join(dir, "certs")):
		return roleAPIServer
	case comm == roleEtcd && hasFlag(args, "--data-dir", filepath.Join(dir, "etcd")):
		return roleEtcd
	}
	return ""
}

// hasFlag says whether args set flag to value, as --flag=value or as
// --flag value.
func hasFlag(args []string, flag, value string) bool {
	for i, a := range args {
		if a == flag+"="+value || a == flag && i+1 < len(args) && args[i+1] == value {
			return true
		}
	}
	return false
}

// cpu reads the CPU seconds (user and system) kube-apiserver and etcd have
// used since they started.
func (c controlPlaneProcs) cpu() (apiserver, etcd float64, err error) {
	a, err := c.apiserver.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("reading kube-apiserver's CPU time: %w", err)
	}
	e, err := c.etcd.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("reading etcd's CPU time: %w", err)
	}
	return a.CPUTime(), e.CPUTime(), nil
}

// usage is the CPU seconds a phase's processes have used: its managers'
// (from their metrics) and its control plane's.
type usage struct {
	managers, apiserver, etcd float64
}

// usage reads the CPU seconds of the control plane and of the managers
// whose metrics are at addrs (none for the ceiling).
func (e *env) usage(ctx context.Context, addrs []string) (usage, error) {
	var u usage
	var err error
	if u.managers, err = managersCPU(ctx, addrs); err != nil {
		return u, err
	}
	u.apiserver, u.etcd, err = e.procs.cpu()
	return u, err
}

// since is the CPU seconds used between before and u.
func (u usage) since(before usage) usage {
	return usage{managers: u.managers - before.managers, apiserver: u.apiserver - before.apiserver,
		etcd: u.etcd - before.etcd}
}

// setCPU sets p's CPU figures from the CPU seconds its operations cost.
func (p *Phase) setCPU(u usage) {
	per1000 := func(s float64) float64 { return s / float64(p.Operations) * 1000 }
	p.ManagerCPUSecondsPer1000 = per1000(u.managers)
	p.APIServerCPUSecondsPer1000 = per1000(u.apiserver)
	p.EtcdCPUSecondsPer1000 = per1000(u.etcd)
}
