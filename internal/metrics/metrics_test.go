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

package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestToolValues shows that tools of one name in two namespaces and a
// ClusterTool of that name are counted apart.
func TestToolValues(t *testing.T) {
	tools := []v1.GenericTool{
		&v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "payments"}},
		&v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "payments"}},
		&v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: "payments"}},
	}
	for _, tool := range tools {
		Retries.WithLabelValues(ToolValues(tool)...).Inc()
		ToolCalls.WithLabelValues(ToolValues(tool, "execute", "succeeded")...).Inc()
	}
	if got := testutil.CollectAndCount(Retries); got != len(tools) {
		t.Errorf("want one series per tool, got %d", got)
	}
	if got := testutil.CollectAndCount(ToolCalls); got != len(tools) {
		t.Errorf("want one series per tool, got %d", got)
	}
	want := []string{"ClusterTool", "", "payments", "execute"}
	if diff := cmp.Diff(want, ToolValues(tools[2], "execute")); diff != "" {
		t.Errorf("ToolValues: -want, +got:\n%s", diff)
	}
}
