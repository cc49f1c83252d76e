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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/ingress"
)

func TestReadRoutes(t *testing.T) {
	cases := map[string]struct {
		file string
		want map[string]ingress.Route
		err  string
	}{
		"Route": {file: `routes:
  orders:
    namespace: shop
    toolRef: {name: payments}
    operation: charge.create
    subscribers: [{name: ledger, toolRef: {name: ledger}, operation: events.publish}]
`, want: map[string]ingress.Route{"orders": {Namespace: "shop", ToolRef: v1.ToolReference{Name: "payments"},
			Operation: "charge.create", Subscribers: []v1.Subscriber{{Name: "ledger", ToolRef: v1.SinkToolReference{Name: "ledger"}, Operation: "events.publish"}}}}},
		"Signed": {file: `routes:
  orders:
    namespace: shop
    toolRef: {name: payments}
    operation: charge.create
    signing: {secretFile: /etc/once/orders-secret, tolerance: 2m}
`, want: map[string]ingress.Route{"orders": {Namespace: "shop", ToolRef: v1.ToolReference{Name: "payments"},
			Operation: "charge.create", Signing: &ingress.Signing{SecretFile: "/etc/once/orders-secret",
				Tolerance: &metav1.Duration{Duration: 2 * time.Minute}}}}},
		"UnknownField": {file: "routes:\n  orders:\n    namespace: shop\n    tool: payments\n", err: `unknown field "tool"`},
		"NoRoutes":     {file: "routes: {}\n", err: "names no routes"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "routes.yaml")
			if err := os.WriteFile(path, []byte(tc.file), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := readRoutes(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error about %s, got %v", tc.err, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreUnexported(ingress.Signing{})); diff != "" {
				t.Errorf("routes (-want +got):\n%s", diff)
			}
		})
	}
}
