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

package v1alpha1

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// TestDefaultsMatchCRDs holds the Default constants and the CRDs'
// +kubebuilder:default markers together: the API server and the
// controller's fallbacks must default a field the same way.
func TestDefaultsMatchCRDs(t *testing.T) {
	cases := map[string]struct {
		crd, path string
		want      any
	}{
		"timeout":          {"tools", "spec.timeout", DefaultTimeout},
		"retention":        {"sideeffectoperations", "spec.retention", DefaultRetention},
		"maxAttempts":      {"sideeffectoperations", "spec.retryPolicy.maxAttempts", DefaultMaxAttempts},
		"initialBackoff":   {"sideeffectoperations", "spec.retryPolicy.initialBackoff", DefaultInitialBackoff},
		"maxBackoff":       {"sideeffectoperations", "spec.retryPolicy.maxBackoff", DefaultMaxBackoff},
		"reconcileLimit":   {"tools", "spec.idempotency.reconcileLimit", DefaultReconcileLimit},
		"retriesPerMinute": {"tools", "spec.retryBudget.retriesPerMinute", DefaultRetriesPerMinute},
		"header":           {"tools", "spec.idempotency.header", DefaultIdempotencyHeader},
		"clusterTimeout":   {"clustertools", "spec.timeout", DefaultTimeout},
		"clusterLimit":     {"clustertools", "spec.idempotency.reconcileLimit", DefaultReconcileLimit},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := crdDefault(tc.crd, tc.path)
			if err != nil {
				t.Fatal(err)
			}
			switch want := tc.want.(type) {
			case time.Duration:
				var s string
				if err := json.Unmarshal(got, &s); err != nil {
					t.Fatalf("default of %s is %s, not a duration", tc.path, got)
				}
				d, err := time.ParseDuration(s)
				if err != nil || d != want {
					t.Errorf("CRD default of %s is %s; Go default is %s", tc.path, s, want)
				}
			default:
				w, _ := json.Marshal(want)
				if string(w) != string(got) {
					t.Errorf("CRD default of %s is %s; Go default is %s", tc.path, got, w)
				}
			}
		})
	}
}

// crdDefault reads the default of a field from the generated CRD.
func crdDefault(plural, path string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "effects.once.dev_"+plural+".yaml"))
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		return nil, err
	}
	s := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for part := range strings.SplitSeq(path, ".") {
		p, ok := s.Properties[part]
		if !ok {
			return nil, fmt.Errorf("%s has no field %s", plural, path)
		}
		s = &p
	}
	if s.Default == nil {
		return nil, fmt.Errorf("%s.%s has no default", plural, path)
	}
	return s.Default.Raw, nil
}

// TestMaxTimeoutMatchesCRDs: every timeout's rule in the CRDs bounds it
// at MaxTimeout, which the controller holds stored objects to.
func TestMaxTimeoutMatchesCRDs(t *testing.T) {
	rule := fmt.Sprintf("duration(self) <= duration('%dh')", int(MaxTimeout.Hours()))
	if time.Duration(int(MaxTimeout.Hours()))*time.Hour != MaxTimeout {
		t.Fatalf("MaxTimeout %s is not whole hours: write the rule below by hand", MaxTimeout)
	}
	for _, plural := range []string{"tools", "clustertools", "sideeffectoperations", "sagas"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "effects.once.dev_"+plural+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), rule) {
			t.Errorf("the CRD of %s has no rule %q", plural, rule)
		}
	}
}
