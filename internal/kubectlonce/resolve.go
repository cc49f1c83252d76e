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
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/review"
)

// resolveFlags are the flags of resolve.
type resolveFlags struct {
	committed, retry, fail, compensated bool
	externalID, reason, by, step        string
	dryRun, output                      string
	// selector and allNamespaces pick many operations (or sagas) instead
	// of a NAME.
	selector      string
	allNamespaces bool
}

func newResolveCommand(o *Options) *cobra.Command {
	var f resolveFlags
	var asSaga bool
	cmd := &cobra.Command{
		Use:   "resolve (NAME | -l SELECTOR [-A]) (--committed --external-id ID | --retry | --fail) [--reason TEXT] [--by NAME]",
		Short: "Decide an operation (or a saga's compensation) in NeedsReview",
		Long: `Write a person's decision on an operation in NeedsReview into its
spec.resolution, as a GitOps repository would:

  --committed --external-id ID   the effect happened: ID is what you found at the tool
  --retry                        the effect provably did not happen: try once more
  --fail                         the operation must not run: fail it for good

A saga in NeedsReview because a compensation (or a retryUntilDone step)
failed for good is resolved in the saga's spec.resolutions, for the step it
waits on: resolve saga/NAME --retry, or --compensated when you undid the
effect by other means. An operation of a saga in NeedsReview is resolved on
that operation.

-l SELECTOR writes the same decision into every operation with these
labels that is in NeedsReview (with --saga, every such saga); -A looks in
every namespace. --committed is refused there: its id names one effect.

--by names you, for the record (default: the kubeconfig's user, or $USER);
Once's admission policy records the user the API server authenticated
beside it.

--dry-run=server sends the write with dryRun=All: the API server checks
and admits it as it would, and stores nothing. --dry-run=client sends
nothing. Both print what would be written; with -o json|yaml, the object
as it would be (as it is written without --dry-run).`,
		Example: `  kubectl once resolve charge-order-1001 --committed --external-id ch_1042 --reason "found in the dashboard"
  kubectl once resolve charge-order-1001 --retry --reason "no charge in the dashboard"
  kubectl once resolve saga/scale-search --compensated --reason "reverted by hand"
  kubectl once resolve charge-order-1001 --retry --dry-run=server -o yaml
  kubectl once resolve -l batch=2026-12-03 -A --fail --reason "the batch was withdrawn"`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: o.completeNames(reviewName),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.by == "" {
				f.by = o.defaultBy()
			}
			switch {
			case len(args) == 0 && f.selector == "":
				return errors.New("say what to resolve: NAME, or -l SELECTOR")
			case len(args) == 1 && f.selector != "":
				return errors.New("a NAME goes without -l: say one of them")
			case len(args) == 0:
				return o.resolveSelected(cmd.Context(), asSaga, f)
			case f.allNamespaces:
				return errors.New("-A goes with -l: a NAME is looked up in one namespace")
			}
			k, name, err := parseName(args[0], asSaga)
			if err != nil {
				return err
			}
			return o.resolve(cmd.Context(), k, name, f)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&f.committed, "committed", false, "the effect happened (needs --external-id)")
	fl.StringVar(&f.externalID, "external-id", "", "the id of the effect found at the tool, with --committed")
	fl.BoolVar(&f.retry, "retry", false, "the effect did not happen: allow another attempt")
	fl.BoolVar(&f.fail, "fail", false, "fail the operation for good")
	fl.BoolVar(&f.compensated, "compensated", false, "a saga's compensation: the effect was undone by other means")
	fl.StringVar(&f.step, "step", "", "a saga's step to resolve (default: the step it waits on)")
	fl.StringVar(&f.reason, "reason", "", "why, for the record")
	fl.StringVar(&f.by, "by", "", "who decides, for the record (default: the kubeconfig's user, or $USER)")
	fl.BoolVar(&asSaga, "saga", false, "NAME is a saga's (with -l: resolve sagas)")
	fl.StringVarP(&f.selector, "selector", "l", "", "resolve every operation in NeedsReview with these labels (key=value,...)")
	fl.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "with -l, in every namespace")
	addDryRunFlag(cmd, &f.dryRun)
	addOutputFlag(cmd, &f.output, "a line")
	return cmd
}

// chosen counts the decisions among the flags.
func (f resolveFlags) chosen() int {
	n := 0
	for _, b := range []bool{f.committed, f.retry, f.fail, f.compensated} {
		if b {
			n++
		}
	}
	return n
}

// common checks what both kinds need: one decision, and someone to make it.
func (f resolveFlags) common() error {
	switch n := f.chosen(); {
	case n == 0:
		return errors.New("say what you decided: --committed --external-id ID, --retry or --fail " +
			"(for a saga's compensation: --retry or --compensated)")
	case n > 1:
		return errors.New("choose one of --committed, --retry, --fail and --compensated")
	}
	if f.by == "" {
		return errors.New("--by is required: the kubeconfig names no user and $USER is empty")
	}
	return nil
}

// operationResolution is the resolution the flags ask of an operation.
func (f resolveFlags) operationResolution() (*v1.Resolution, error) {
	if err := f.common(); err != nil {
		return nil, err
	}
	switch {
	case f.compensated:
		return nil, errors.New("--compensated resolves a saga's compensation; an operation takes --committed, --retry or --fail")
	case f.step != "":
		return nil, errors.New("--step names a saga's step; an operation has none")
	case f.committed && f.externalID == "":
		return nil, errors.New("--committed needs --external-id: the id of the effect you found at the tool")
	case !f.committed && f.externalID != "":
		return nil, errors.New("--external-id goes with --committed only")
	}
	r := &v1.Resolution{By: f.by, Reason: f.reason, ExternalObjectID: f.externalID}
	switch {
	case f.committed:
		r.Action = v1.ResolutionMarkCommitted
	case f.retry:
		r.Action = v1.ResolutionRetry
	default:
		r.Action = v1.ResolutionFail
	}
	return r, nil
}

// sagaAction is the action the flags ask of a saga's step.
func (f resolveFlags) sagaAction() (v1.SagaResolutionAction, error) {
	if err := f.common(); err != nil {
		return "", err
	}
	switch {
	case f.committed || f.fail:
		return "", errors.New("a saga takes --retry or --compensated; --committed and --fail resolve an operation " +
			"(an operation of the saga in NeedsReview is resolved on the operation itself)")
	case f.externalID != "":
		return "", errors.New("--external-id goes with an operation's --committed only")
	case f.retry:
		return v1.SagaRetry, nil
	}
	return v1.SagaMarkCompensated, nil
}

func (o *Options) resolve(ctx context.Context, k *kind, name string, f resolveFlags) error {
	// Check the flags before asking the cluster: a typo fails fast.
	if err := checkDryRun(f.dryRun); err != nil {
		return err
	}
	if err := checkOutput(f.output); err != nil {
		return err
	}
	var err error
	switch k {
	case &sagaKind:
		_, err = f.sagaAction()
	case &operationKind:
		_, err = f.operationResolution()
	default:
		err = f.common()
	}
	if err != nil {
		return err
	}
	c, err := o.writer(f.dryRun)
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	var msg string
	var written client.Object
	var gvk schema.GroupVersionKind
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := find(ctx, c, ns, k, name)
		if err != nil {
			return err
		}
		if got.op != nil {
			msg, err = resolveOperation(ctx, c, got.op, f)
			written, gvk = got.op, v1.GroupVersion.WithKind(operationKind.Name)
		} else {
			msg, err = resolveSaga(ctx, c, got.saga, f)
			written, gvk = got.saga, v1.GroupVersion.WithKind(sagaKind.Name)
		}
		return err
	})
	if apierrors.IsConflict(err) {
		return fmt.Errorf("%s changed at every try while writing the resolution; try again", name)
	}
	if err != nil {
		return err
	}
	if f.output != "" {
		return printObject(o.Streams.Out, written, gvk, f.output)
	}
	_, err = fmt.Fprintln(o.Streams.Out, printable(msg))
	return err
}

// outcome is how a write's message ends: what happens next, or that
// nothing changed in a dry run.
func outcome(dryRun, next string) string {
	if !isDryRun(dryRun) {
		return next
	}
	return "nothing changed" + dryRunNote(dryRun)
}

// wrote is the verb of a write's message.
func wrote(dryRun string) string {
	if !isDryRun(dryRun) {
		return "wrote"
	}
	return "would write"
}

// resolveOperation writes the resolution the flags ask into an operation
// in NeedsReview (review.ResolveOperation). A conflict is returned as it
// is, for a retry.
func resolveOperation(ctx context.Context, c client.Client, op *v1.SideEffectOperation, f resolveFlags) (string, error) {
	r, err := f.operationResolution()
	if err != nil {
		return "", err
	}
	if err := review.ResolveOperation(ctx, c, op, *r); err != nil {
		return "", requestError(err)
	}
	written := r
	if op.Spec.Resolution != nil {
		written = op.Spec.Resolution
	}
	return fmt.Sprintf("sideeffectoperation/%s: %s spec.resolution %s; %s", op.Name, wrote(f.dryRun),
		resolutionText(*written), outcome(f.dryRun, "Once applies it on its next pass (kubectl once why "+op.Name+")")), nil
}

// resolveSaga writes the resolution the flags ask into the entry of
// spec.resolutions for the step a saga in NeedsReview waits on
// (review.ResolveSaga). A conflict is returned as it is, for a retry.
func resolveSaga(ctx context.Context, c client.Client, s *v1.Saga, f resolveFlags) (string, error) {
	action, err := f.sagaAction()
	if err != nil {
		return "", err
	}
	step := s.Status.CurrentStep
	entry := v1.SagaResolution{Step: f.step, Action: action, By: f.by, Reason: f.reason}
	if err := review.ResolveSaga(ctx, c, s, entry); err != nil {
		return "", requestError(err)
	}
	entry.Step = step
	for _, r := range s.Spec.Resolutions {
		if r.Step == step {
			entry = r
		}
	}
	return fmt.Sprintf("saga/%s: %s spec.resolutions for step %s: %s; %s", s.Name, wrote(f.dryRun), step,
		sagaResolutionText(entry), outcome(f.dryRun, "Once applies it on its next pass (kubectl once why saga/"+s.Name+")")), nil
}

// resolveSelected writes one decision into every operation (or saga) that
// -l selects and that is in NeedsReview. A failure is said and the others
// go on; the command fails at the end.
func (o *Options) resolveSelected(ctx context.Context, asSaga bool, f resolveFlags) error {
	if err := checkDryRun(f.dryRun); err != nil {
		return err
	}
	switch {
	case f.output != "":
		return errors.New("-o prints one object: it goes with a NAME, not with -l")
	case f.committed:
		return errors.New("--committed names one effect by its id: resolve each operation by its NAME")
	}
	k, chosen := &operationKind, f.operationResolution
	if asSaga {
		k, chosen = &sagaKind, func() (*v1.Resolution, error) { _, err := f.sagaAction(); return nil, err }
	}
	if _, err := chosen(); err != nil {
		return err
	}
	sel, err := labels.Parse(f.selector)
	if err != nil {
		return fmt.Errorf("-l %q: %w", f.selector, err)
	}
	c, err := o.writer(f.dryRun)
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	listNS, where := "", anyNamespace
	if !f.allNamespaces {
		opts, listNS, where = append(opts, client.InNamespace(ns)), ns, "in namespace "+ns
	}
	var keys []client.ObjectKey
	if asSaga {
		var list v1.SagaList
		if err := c.List(ctx, &list, opts...); err != nil {
			return apiError(err, "list", sagaKind, listNS, "")
		}
		for _, s := range list.Items {
			if s.Status.State == v1.StateNeedsReview {
				keys = append(keys, client.ObjectKeyFromObject(&s))
			}
		}
	} else {
		var list v1.SideEffectOperationList
		if err := c.List(ctx, &list, opts...); err != nil {
			return apiError(err, "list", operationKind, listNS, "")
		}
		for _, op := range list.Items {
			if op.Status.State == v1.StateNeedsReview {
				keys = append(keys, client.ObjectKeyFromObject(&op))
			}
		}
	}
	if len(keys) == 0 {
		_, err := fmt.Fprintf(o.Streams.Out, "No %s with labels %s is in NeedsReview %s.\n", k.Resource, f.selector, where)
		return err
	}
	var failed []string
	for _, key := range keys {
		msg, err := resolveOne(ctx, c, k, key, f)
		if err != nil {
			msg = strings.ToLower(k.Name) + "/" + key.Name + ": " + err.Error()
			failed = append(failed, key.Name)
		}
		if f.allNamespaces {
			msg = strings.Replace(msg, ":", " in "+key.Namespace+":", 1)
		}
		_, _ = fmt.Fprintln(o.Streams.Out, printable(msg))
	}
	if len(failed) > 0 {
		return fmt.Errorf("could not resolve %s", strings.Join(failed, ", "))
	}
	return nil
}

// resolveOne writes the decision into one object of kind k, read again at
// each try of a conflict.
func resolveOne(ctx context.Context, c client.Client, k *kind, key client.ObjectKey, f resolveFlags) (string, error) {
	var msg string
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := find(ctx, c, key.Namespace, k, key.Name)
		if err != nil {
			return err
		}
		if got.op != nil {
			msg, err = resolveOperation(ctx, c, got.op, f)
		} else {
			msg, err = resolveSaga(ctx, c, got.saga, f)
		}
		return err
	})
	if apierrors.IsConflict(err) {
		return "", errors.New("changed at every try while writing the resolution; try again")
	}
	return msg, err
}
