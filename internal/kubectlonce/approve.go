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

package kubectlonce

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/review"
)

func newApproveCommand(o *Options) *cobra.Command {
	var step, by, reason, dryRun, output string
	cmd := &cobra.Command{
		Use:   "approve SAGA --step STEP [--by NAME] [--reason TEXT]",
		Short: "Approve a saga's step that requires approval",
		Long: `Add {step, by, reason} to the saga's spec.approvals, as a GitOps repository
would. The write is conditional on the version read, so that an approval
another person writes at the same time is kept. --by names you, for the
record (default: the kubeconfig's user, or $USER); Once's admission policy
records the user the API server authenticated beside it.

--dry-run=server sends the write with dryRun=All: the API server checks
and admits it as it would, and stores nothing. --dry-run=client sends
nothing. Both print what would be written; with -o json|yaml, the saga as
it would be (as it is written without --dry-run).`,
		Example: `  kubectl once approve scale-checkout --step config --reason "change window open"
  kubectl once approve scale-checkout --step config --dry-run=server`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(approvalName),
		RunE: func(cmd *cobra.Command, args []string) error {
			k, name, err := parseName(args[0], true)
			if err != nil {
				return err
			}
			if k != &sagaKind {
				return errors.New("only a saga's step can be approved: say SAGA or saga/SAGA")
			}
			if by == "" {
				by = o.defaultBy()
			}
			return o.approve(cmd.Context(), name, v1.SagaApproval{Step: step, By: by, Reason: reason}, dryRun, output)
		},
	}
	cmd.Flags().StringVar(&step, "step", "", "the step to approve (required)")
	_ = cmd.RegisterFlagCompletionFunc("step", o.completeApprovalSteps)
	cmd.Flags().StringVar(&by, "by", "", "who approves, for the record (default: the kubeconfig's user, or $USER)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the record")
	addDryRunFlag(cmd, &dryRun)
	addOutputFlag(cmd, &output, "a line")
	return cmd
}

func (o *Options) approve(ctx context.Context, name string, a v1.SagaApproval, dryRun, output string) error {
	if err := checkDryRun(dryRun); err != nil {
		return err
	}
	if err := checkOutput(output); err != nil {
		return err
	}
	switch {
	case a.Step == "":
		return errors.New("--step is required: the step to approve")
	case a.By == "":
		return errors.New("--by is required: the kubeconfig names no user and $USER is empty")
	}
	c, err := o.writer(dryRun)
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	var written v1.SagaApproval
	s := &v1.Saga{}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s = &v1.Saga{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return apiError(err, "get", sagaKind, ns, name)
		}
		if err := review.ApproveStep(ctx, c, s, a); err != nil {
			return requestError(err)
		}
		written = a
		for _, w := range s.Spec.Approvals {
			if w.Step == a.Step {
				written = w
			}
		}
		return nil
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("saga %s changed at every try while writing the approval; try again", name)
	}
	if err != nil {
		return err
	}
	if output != "" {
		return printObject(o.Streams.Out, s, v1.GroupVersion.WithKind(sagaKind.Name), output)
	}
	approved := "approved"
	if isDryRun(dryRun) {
		approved = "would be approved"
	}
	_, err = fmt.Fprintln(o.Streams.Out, printable(fmt.Sprintf("saga/%s: step %s %s by %s%s; %s", name, a.Step, approved,
		attribution(written.By, written.User), reasonText(written.Reason),
		outcome(dryRun, "Once starts it on its next pass (kubectl once why saga/"+name+")"))))
	return err
}
