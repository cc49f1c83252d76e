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

package review

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// ApproveStep appends a, the approval of the step a.Step, to the
// spec.approvals of s, conditional on the version of s, so that an
// approval another person writes at the same time is kept. It refuses what
// CanApprove refuses. On success s is the object the API server returned.
func ApproveStep(ctx context.Context, c client.Client, s *v1.Saga, a v1.SagaApproval) error {
	if err := CanApprove(s, a.Step); err != nil {
		return err
	}
	patched := s.DeepCopy()
	patched.Spec.Approvals = append(patched.Spec.Approvals, a)
	if err := patch(ctx, c, patched, s, KindSaga); err != nil {
		return err
	}
	*s = *patched
	return nil
}

// CanApprove says why a saga's step cannot be approved, if it cannot: an
// unknown step, one that needs no approval, one already approved (said
// first, as the more telling answer), or a saga that runs no more steps.
func CanApprove(s *v1.Saga, step string) error {
	i := slices.IndexFunc(s.Spec.Steps, func(st v1.SagaStep) bool { return st.Name == step })
	if i < 0 {
		names := make([]string, len(s.Spec.Steps))
		for j, st := range s.Spec.Steps {
			names[j] = st.Name
		}
		return fmt.Errorf("saga %s has no step %s (its steps: %s)", s.Name, step, strings.Join(names, ", "))
	}
	if !s.Spec.Steps[i].RequiresApproval {
		return fmt.Errorf("step %s of saga %s does not require approval", step, s.Name)
	}
	for _, ss := range s.Status.Steps {
		if ss.Name == step && ss.Approval != nil {
			return fmt.Errorf("step %s of saga %s was approved by %s at %s", step, s.Name,
				attribution(ss.Approval.By, ss.Approval.User), ss.Approval.Time.UTC().Format(time.RFC3339))
		}
	}
	for _, a := range s.Spec.Approvals {
		if a.Step == step {
			return fmt.Errorf("step %s of saga %s is already approved in spec.approvals by %s", step, s.Name,
				attribution(a.By, a.User))
		}
	}
	if st := s.Status.State; st.IsTerminal() || st == v1.StateCompensating {
		return fmt.Errorf("saga %s is %s: it runs no more steps, there is nothing to approve", s.Name, st)
	}
	return nil
}

// attribution is who decided: the person named and, if the API server
// authenticated someone else, that user.
func attribution(by, user string) string {
	return (&v1.Resolution{By: by, User: user}).Attribution()
}
