//go:build tools

// Package tools pins the control plane's commands as dependencies of this
// module; hack/controlplane-binaries.sh builds them into a versioned cache.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
