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

// Package apiserver starts a real API server for a package's tests:
// envtest with Once's CRDs, on the control plane's binaries that this
// repository builds from source.
package apiserver

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/harness"
)

// Server is a running API server with Once's CRDs.
type Server struct {
	Env    *envtest.Environment
	Config *rest.Config
	// Client knows client-go's kinds and Once's (Scheme).
	Client client.Client
	Scheme *runtime.Scheme
}

// Start starts an API server with the CRDs of config/crd/bases, on
// KUBEBUILDER_ASSETS or, without it, on the binaries that
// hack/controlplane-binaries.sh builds (once per machine) and prints.
func Start() (*Server, error) {
	root, err := harness.Root()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		if assets, err = harness.Assets(root); err != nil {
			return nil, err
		}
	}
	s := &Server{Scheme: runtime.NewScheme(), Env: &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
	}}
	EnforceOwnerReferences(s.Env.ControlPlane.GetAPIServer())
	utilruntime.Must(clientgoscheme.AddToScheme(s.Scheme))
	utilruntime.Must(v1.AddToScheme(s.Scheme))
	if s.Config, err = s.Env.Start(); err != nil {
		return nil, fmt.Errorf("starting the API server: %w", err)
	}
	if s.Client, err = client.New(s.Config, client.Options{Scheme: s.Scheme}); err != nil {
		_ = s.Env.Stop()
		return nil, err
	}
	return s, nil
}

// EnforceOwnerReferences turns on the admission plugin
// OwnerReferencesPermissionEnforcement, in addition to the API server's
// default ones, as OpenShift runs it: an owner reference with
// blockOwnerDeletion is admitted only from a user who may update the
// owner's finalizers subresource. The manager sets one on each step
// operation of a saga.
func EnforceOwnerReferences(s *envtest.APIServer) {
	s.Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement")
}

// Stop stops the API server.
func (s *Server) Stop() error { return s.Env.Stop() }
