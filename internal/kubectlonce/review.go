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
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/internal/text"
)

// Waits are what a row of review waits for, in its STATE column.
const (
	waitReview   = "NeedsReview"
	waitApproval = "WaitingForApproval"
	waitOriginal = "WaitingForOriginal"
	// waitResume is an operation held by a suspend, on it or on its tool.
	// It waits for a person to resume it, and needs no decision.
	waitResume = "Suspended"
)

// anyNamespace is where -A looks, as a message says it.
const anyNamespace = "in any namespace"

// maxWhy caps the WHY column: one line, the start of the message.
const maxWhy = 100

// reviewFlags are review's flags.
type reviewFlags struct {
	all      bool
	output   string
	exitCode bool
}

func newReviewCommand(o *Options) *cobra.Command {
	var f reviewFlags
	cmd := &cobra.Command{
		Use:   "review [-A] [-o json|yaml] [--exit-code]",
		Short: "List the operations and sagas that need a person",
		Long: `List what waits for a person: operations and sagas in NeedsReview, sagas
waiting for an approval, and duplicates waiting behind an operation in
review, each with how long it has waited and why. Operations held by a
suspend (state Suspended) come last: they wait for a resume.

With --exit-code it exits 1 when anything waits for a decision and 0 when
nothing does, and 2 on an error, as kubectl diff does, for scripts and
alerts. An operation held by a suspend is no decision: it does not count.`,
		Example: `  kubectl once review
  kubectl once review -A -o json
  kubectl once review -A --exit-code >/dev/null || page-the-on-call`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.review(cmd.Context(), f)
			if err != nil && f.exitCode && !errors.As(err, new(*ExitError)) {
				return &ExitError{Code: 2, Err: err}
			}
			return err
		},
	}
	cmd.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "list across all namespaces")
	addOutputFlag(cmd, &f.output, "a table")
	cmd.Flags().BoolVar(&f.exitCode, "exit-code", false, "exit 1 when anything waits for a decision, 0 when nothing does (2 on an error)")
	return cmd
}

// ExitError ends the plugin with Code, printing Err if there is one.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

// ReviewItem is one entry of review -o json|yaml.
type ReviewItem struct {
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// State is what it waits for: NeedsReview, WaitingForApproval,
	// WaitingForOriginal, or Suspended (a resume).
	State string    `json:"state"`
	Since time.Time `json:"since"`
	Why   string    `json:"why"`
}

// ReviewList is what review -o json|yaml prints.
type ReviewList struct {
	Items []ReviewItem `json:"items"`
}

func (o *Options) review(ctx context.Context, f reviewFlags) error {
	if err := checkOutput(f.output); err != nil {
		return err
	}
	all := f.all
	c, err := o.client()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	var opts []client.ListOption
	listNS := ""
	if !all {
		opts, listNS = append(opts, client.InNamespace(ns)), ns
	}
	var ops v1.SideEffectOperationList
	if err := c.List(ctx, &ops, opts...); err != nil {
		return apiError(err, "list", operationKind, listNS, "")
	}
	var sagas v1.SagaList
	if err := c.List(ctx, &sagas, opts...); err != nil {
		return apiError(err, "list", sagaKind, listNS, "")
	}
	rows := reviewRows(ops.Items, sagas.Items)
	switch {
	case f.output != "":
		err = writeReviewList(o.Streams.Out, rows, f.output)
	case len(rows) == 0:
		where := "in namespace " + ns
		if all {
			where = anyNamespace
		}
		_, err = fmt.Fprintf(o.Streams.Out, "Nothing needs a person %s.\n", where)
	default:
		err = writeReview(o.Streams.Out, rows, all, o.now())
	}
	if err == nil && f.exitCode && slices.ContainsFunc(rows, reviewRow.decides) {
		return &ExitError{Code: 1}
	}
	return err
}

// decides reports whether the row waits for a decision: everything but an
// operation held by a suspend.
func (r reviewRow) decides() bool { return r.Wait != waitResume }

// writeReviewList prints the rows as a list in JSON or YAML, an empty list
// when nothing waits.
func writeReviewList(out io.Writer, rows []reviewRow, format string) error {
	list := ReviewList{Items: []ReviewItem{}}
	for _, r := range rows {
		list.Items = append(list.Items, ReviewItem{Namespace: r.Namespace, Kind: r.Kind, Name: r.Name, State: r.Wait,
			Since: r.Since.UTC(), Why: r.Why})
	}
	return printDoc(out, list, format)
}

// reviewRow is one line of review.
type reviewRow struct {
	Namespace, Kind, Name string
	// Wait is what it waits for: NeedsReview, WaitingForApproval,
	// WaitingForOriginal or Suspended.
	Wait string
	// Since is when it began to wait.
	Since time.Time
	// Why is the one line that says why.
	Why string
}

// reviewRows picks what needs a person: operations and sagas in
// NeedsReview, sagas waiting for an approval, and operations waiting behind
// a duplicate in review. Rows are by namespace, the longest waiting first.
// Operations held by a suspend follow, in a group of their own.
func reviewRows(ops []v1.SideEffectOperation, sagas []v1.Saga) []reviewRow {
	var rows []reviewRow
	inReview := map[string]bool{} // namespace/name of operations in review
	for i := range ops {
		op := &ops[i]
		if op.Status.State != v1.StateNeedsReview {
			continue
		}
		inReview[op.Namespace+"/"+op.Name] = true
		rows = append(rows, reviewRow{Namespace: op.Namespace, Kind: operationKind.Name, Name: op.Name,
			Wait: waitReview, Since: since(op.CreationTimestamp, op.Status.Conditions, op.Status.History),
			Why: why(op.Status.Conditions)})
	}
	for i := range ops {
		op := &ops[i]
		if op.Status.DuplicateOf == "" || op.Status.State.IsTerminal() || !inReview[op.Namespace+"/"+op.Status.DuplicateOf] {
			continue
		}
		rows = append(rows, reviewRow{Namespace: op.Namespace, Kind: operationKind.Name, Name: op.Name,
			Wait: waitOriginal, Since: since(op.CreationTimestamp, op.Status.Conditions, op.Status.History),
			Why: oneLine(fmt.Sprintf("Duplicate of %s, which needs review: resolve %s", op.Status.DuplicateOf, op.Status.DuplicateOf))})
	}
	for i := range ops {
		op := &ops[i]
		if op.Status.State.IsTerminal() || protocol.ReadyReason(op.Status) != v1.ReasonSuspended {
			continue
		}
		rows = append(rows, reviewRow{Namespace: op.Namespace, Kind: operationKind.Name, Name: op.Name,
			Wait: waitResume, Since: since(op.CreationTimestamp, op.Status.Conditions, op.Status.History),
			Why: why(op.Status.Conditions)})
	}
	for i := range sagas {
		s := &sagas[i]
		stalled := meta.FindStatusCondition(s.Status.Conditions, v1.ConditionStalled)
		wait := ""
		switch {
		case s.Status.State == v1.StateNeedsReview:
			wait = waitReview
		case stalled != nil && stalled.Status == metav1.ConditionTrue && stalled.Reason == saga.ReasonWaitingForApproval:
			wait = waitApproval
		default:
			continue
		}
		rows = append(rows, reviewRow{Namespace: s.Namespace, Kind: sagaKind.Name, Name: s.Name, Wait: wait,
			Since: since(s.CreationTimestamp, s.Status.Conditions, s.Status.History), Why: why(s.Status.Conditions)})
	}
	slices.SortStableFunc(rows, func(a, b reviewRow) int {
		return cmp.Or(-compareBool(a.decides(), b.decides()), strings.Compare(a.Namespace, b.Namespace), a.Since.Compare(b.Since),
			strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return rows
}

// compareBool orders false before true.
func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// since is when an operation or a saga began to wait as it does: its newest
// transition, else when it stalled, else its creation.
func since(created metav1.Time, conds []metav1.Condition, history []v1.Transition) time.Time {
	if n := len(history); n > 0 {
		return history[n-1].Time.Time
	}
	if c := meta.FindStatusCondition(conds, v1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
		return c.LastTransitionTime.Time
	}
	return created.Time
}

// why is the one line that says why an operation or a saga waits: the Stalled message,
// else the Ready message, shortened.
func why(conds []metav1.Condition) string {
	for _, t := range []string{v1.ConditionStalled, v1.ConditionReady} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Message != "" &&
			(t == v1.ConditionReady || c.Status == metav1.ConditionTrue) {
			return oneLine(c.Message)
		}
	}
	return ""
}

// oneLine keeps the first line of s, at most maxWhy bytes of it.
func oneLine(s string) string {
	s, _, cut := strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > maxWhy {
		return text.Shorten(s, maxWhy)
	}
	if cut {
		s += "..."
	}
	return s
}

// writeReview prints the rows as a table, with a NAMESPACE column for -A.
func writeReview(out io.Writer, rows []reviewRow, all bool, now time.Time) error {
	w := printers.GetNewTabWriter(out)
	if all {
		_, _ = fmt.Fprint(w, "NAMESPACE\t")
	}
	_, _ = fmt.Fprintln(w, "KIND\tNAME\tSTATE\tAGE\tWHY")
	for _, r := range rows {
		if all {
			_, _ = fmt.Fprintf(w, "%s\t", printable(r.Namespace))
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", printable(r.Kind), printable(r.Name), printable(r.Wait), age(now, r.Since),
			printable(r.Why))
	}
	return w.Flush()
}

// age is how long ago t was, as kubectl get prints it.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}
