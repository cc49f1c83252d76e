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

package protocol

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestKstatus computes, with the kstatus library that Flux and kubectl
// wait rely on, how every state reads, from statuses this package writes.
func TestKstatus(t *testing.T) {
	cases := map[v1.OperationState]status.Status{
		v1.StatePlanned:         status.InProgressStatus,
		v1.StateStarted:         status.InProgressStatus,
		v1.StateFailedRetryable: status.InProgressStatus,
		v1.StateUnknown:         status.InProgressStatus,
		v1.StateReconciling:     status.InProgressStatus,
		v1.StateCompensating:    status.InProgressStatus,
		v1.StateCommitted:       status.CurrentStatus,
		v1.StateCompensated:     status.FailedStatus,
		v1.StateFailedFinal:     status.FailedStatus,
		v1.StateNeedsReview:     status.FailedStatus,
	}
	for state, want := range cases {
		t.Run(string(state), func(t *testing.T) {
			op := v1.SideEffectOperation{}
			op.APIVersion, op.Kind = v1.GroupVersion.String(), "SideEffectOperation"
			op.Name, op.Namespace, op.Generation = "op", "ns", 1
			transition(&op.Status, state, "Reason", "Message", env())
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&op)
			if err != nil {
				t.Fatal(err)
			}
			got, err := status.Compute(&unstructured.Unstructured{Object: raw})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != want {
				t.Errorf("%s reads %s to kstatus, want %s: %s", state, got.Status, want, got.Message)
			}
			// kstatus reports the message of Reconciling or Stalled, the
			// condition that is True.
			if want != status.CurrentStatus && got.Message != "Message" {
				t.Errorf("%s: kstatus reports %q, want the transition's message", state, got.Message)
			}
		})
	}
}
