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
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// The brakes: suspend, resume and cancel. Each sets one field of a spec
// (spec.suspend or spec.cancel) with a merge patch, on the objects its
// arguments select. An object whose field already says so is left alone.

// brakeField is a field of a spec that a brake sets.
type brakeField string

const (
	fieldSuspend brakeField = "suspend"
	fieldCancel  brakeField = "cancel"
)

// brakeKind is a kind the brakes act on, and how.
type brakeKind struct {
	kind
	// Words are what TYPE may say for it: its names, plural and short.
	Words []string
	// Namespaced is false for a cluster-scoped kind.
	Namespaced bool
	// Fields are the brake fields of its spec.
	Fields []brakeField
	// Cancelled says what follows a cancel; empty without spec.cancel.
	Cancelled string
}

var (
	toolKind        = kind{Name: "Tool", Resource: "tools"}
	clusterToolKind = kind{Name: "ClusterTool", Resource: "clustertools"}
)

// brakeKinds are the kinds the brakes act on. This table is all a kind
// needs: its words, its scope, its fields. TestBrakeKinds fails when a
// spec of Once's API has a brake field this table lacks.
var brakeKinds = []*brakeKind{
	{kind: toolKind, Words: []string{"tool", "tools"}, Namespaced: true, Fields: []brakeField{fieldSuspend}},
	{kind: clusterToolKind, Words: []string{"clustertool", "clustertools"}, Fields: []brakeField{fieldSuspend}},
	{kind: operationKind, Words: []string{"seo", "seos", "sideeffectoperation", operationKind.Resource, "op", "ops"},
		Namespaced: true, Fields: []brakeField{fieldSuspend, fieldCancel},
		Cancelled: "Once fails it (reason Cancelled) if no attempt of it may have taken effect, else a person decides"},
	{kind: sagaKind, Words: []string{"saga", sagaKind.Resource, "sg"}, Namespaced: true,
		Fields:    []brakeField{fieldSuspend, fieldCancel},
		Cancelled: "it starts no new step, and compensates the steps that committed (reason Cancelled)"},
}

// has reports whether the kind's spec has the field.
func (k *brakeKind) has(f brakeField) bool { return slices.Contains(k.Fields, f) }

// lookupBrakeKind is the kind TYPE names, nil if none of brakeKinds.
func lookupBrakeKind(word string) *brakeKind {
	word = strings.TrimSuffix(strings.ToLower(word), "."+v1.GroupVersion.Group)
	for _, k := range brakeKinds {
		if slices.Contains(k.Words, word) {
			return k
		}
	}
	return nil
}

// brakeTypes lists the first word of each brake kind, for messages.
func brakeTypes() string {
	words := make([]string, 0, len(brakeKinds))
	for _, k := range brakeKinds {
		words = append(words, k.Words[0])
	}
	return strings.Join(words, ", ")
}

// brakeAction is what a command sets: a field, to a value.
type brakeAction struct {
	// Verb is the command: suspend, resume or cancel.
	Verb  string
	Field brakeField
	Value bool
	// Done is the past tense; Already says the field needs no write.
	Done, Already string
}

var (
	suspendAction = brakeAction{Verb: "suspend", Field: fieldSuspend, Value: true, Done: "suspended",
		Already: "already suspended"}
	resumeAction = brakeAction{Verb: "resume", Field: fieldSuspend, Value: false, Done: "resumed",
		Already: "not suspended"}
	cancelAction = brakeAction{Verb: "cancel", Field: fieldCancel, Value: true, Done: "cancelled",
		Already: "already cancelled"}
)

// next is what follows a write of the action to an object of kind k.
func (a brakeAction) next(k *brakeKind) string {
	switch a {
	case suspendAction:
		return "its new calls wait until it is resumed"
	case resumeAction:
		return "held calls start on Once's next pass"
	}
	return k.Cancelled
}

// selectFlags say which objects a brake acts on, besides its arguments.
type selectFlags struct {
	selector      string
	all           bool
	allNamespaces bool
}

// brakeFlags are the flags of suspend, resume and cancel.
type brakeFlags struct {
	selectFlags
	dryRun string
	// yes skips cancel's question.
	yes bool
	// jitter spreads resume's writes over a window.
	jitter time.Duration
}

// addSelectFlags adds -l, --all and -A to a command.
func addSelectFlags(cmd *cobra.Command, f *selectFlags) {
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "act on the objects of TYPE with these labels (key=value,...)")
	cmd.Flags().BoolVar(&f.all, "all", false, "act on every object of TYPE in the namespace")
	cmd.Flags().BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "with -l or --all, in every namespace")
}

const brakeUse = " (TYPE/NAME ... | TYPE NAME ... | TYPE -l SELECTOR | TYPE --all) [-A]"

func newSuspendCommand(o *Options) *cobra.Command {
	var f brakeFlags
	cmd := &cobra.Command{
		Use:   "suspend" + brakeUse,
		Short: "Hold the new calls of tools, operations or sagas (spec.suspend)",
		Long: `Set spec.suspend on each object selected, with a merge patch of that field
alone. A suspended Tool or ClusterTool holds every new call to it. A
suspended operation holds its own, and a suspended saga makes no new step.
A call in flight finishes, and a lookup still runs: it makes no effect.
kubectl once resume lifts it.

TYPE is tool, clustertool, seo (op) or saga. Name objects (tool/pay seo/x), or
give a TYPE with -l SELECTOR or --all; -A looks in every namespace. An
object already suspended, or an operation that ended, is left alone.`,
		Example: `  kubectl once suspend tool/payments
  kubectl once suspend seo -l batch=2026-12-03 -A
  kubectl once suspend clustertool/mailer --dry-run=server`,
		ValidArgsFunction: o.completeBrakeTargets(suspendAction),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.brake(cmd.Context(), suspendAction, args, f)
		},
	}
	addSelectFlags(cmd, &f.selectFlags)
	addDryRunFlag(cmd, &f.dryRun)
	return cmd
}

func newResumeCommand(o *Options) *cobra.Command {
	var f brakeFlags
	cmd := &cobra.Command{
		Use:   "resume" + brakeUse + " [--jitter DURATION]",
		Short: "Lift the suspend of tools, operations or sagas",
		Long: `Set spec.suspend to false on each object selected, with a merge patch of
that field alone. The calls it held start on Once's next pass. An object
not suspended is left alone.

--jitter DURATION spreads the resumes over that window. Each object gets a
time of its own, drawn uniformly at random; the plan is printed first, and
the plugin sleeps until each time. So the held calls do not all start at
once. With --dry-run it prints the plan and writes nothing.`,
		Example: `  kubectl once resume tool/payments
  kubectl once resume seo -l batch=2026-12-03 --jitter 10m
  kubectl once resume seo --all --jitter 5m --dry-run=client`,
		ValidArgsFunction: o.completeBrakeTargets(resumeAction),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.brake(cmd.Context(), resumeAction, args, f)
		},
	}
	addSelectFlags(cmd, &f.selectFlags)
	addDryRunFlag(cmd, &f.dryRun)
	cmd.Flags().DurationVar(&f.jitter, "jitter", 0, "spread the resumes uniformly at random over this window (10m, 1h)")
	return cmd
}

func newCancelCommand(o *Options) *cobra.Command {
	var f brakeFlags
	cmd := &cobra.Command{
		Use:   "cancel" + brakeUse + " [--yes]",
		Short: "Cancel operations or sagas (spec.cancel, one way)",
		Long: `Set spec.cancel on each operation or saga selected, with a merge patch of
that field alone. Cancel is one way: the API server refuses to set it back.

Once fails a cancelled operation (reason Cancelled) if no attempt of it may
have taken effect. One whose attempt may have taken effect, and that only a
re-send could settle, goes to a person (NeedsReview). A cancelled saga
starts no new step, and compensates the steps that committed. A call in
flight finishes. An object already cancelled, or that ended, is left alone.

It asks before it cancels more than one operation; --yes does not ask.`,
		Example: `  kubectl once cancel seo/charge-order-1001
  kubectl once cancel seo -l batch=2026-12-03 --yes`,
		ValidArgsFunction: o.completeBrakeTargets(cancelAction),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.brake(cmd.Context(), cancelAction, args, f)
		},
	}
	addSelectFlags(cmd, &f.selectFlags)
	addDryRunFlag(cmd, &f.dryRun)
	cmd.Flags().BoolVarP(&f.yes, "yes", "y", false, "cancel more than one operation without asking")
	return cmd
}

// ref is an object a brake names: its kind, namespace and name.
type ref struct {
	k         *brakeKind
	namespace string
	name      string
}

// parseTargets reads a brake's arguments: TYPE/NAME ..., TYPE NAME ...,
// or a TYPE alone with -l or --all. It returns the names, or the kind to
// list.
func parseTargets(args []string, f selectFlags, a brakeAction) ([]ref, *brakeKind, error) {
	if len(args) == 0 {
		return nil, nil, fmt.Errorf("say what to %s: TYPE/NAME, or TYPE with -l SELECTOR or --all (TYPE: %s)", a.Verb, brakeTypes())
	}
	byType := !strings.Contains(args[0], "/")
	var refs []ref
	var listed *brakeKind
	for i, arg := range args {
		word, name := arg, ""
		switch {
		case byType && i > 0:
			word, name = args[0], arg
		case !byType:
			word, name, _ = strings.Cut(arg, "/")
		}
		if strings.Contains(name, "/") || (!byType && name == "") || (byType && i > 0 && strings.Contains(arg, "/")) {
			return nil, nil, fmt.Errorf("%q is not a name: say TYPE/NAME, or TYPE and its names", arg)
		}
		k := lookupBrakeKind(word)
		if k == nil {
			return nil, nil, fmt.Errorf("%q is not a kind to %s: say %s", word, a.Verb, brakeTypes())
		}
		if !k.has(a.Field) {
			return nil, nil, fmt.Errorf("a %s has no spec.%s: suspend it, or cancel its operations (seo/NAME)", k.Name, a.Field)
		}
		switch {
		case name != "":
			refs = append(refs, ref{k: k, name: name})
		case len(args) == 1:
			listed = k
		}
	}
	sel := f.selector != "" || f.all
	switch {
	case sel && len(refs) > 0:
		return nil, nil, errors.New("names go without -l and --all: say TYPE -l SELECTOR, TYPE --all, or the names")
	case f.selector != "" && f.all:
		return nil, nil, errors.New("choose one of -l and --all")
	case !sel && len(refs) == 0:
		return nil, nil, fmt.Errorf("say which %s to %s: names, -l SELECTOR or --all", listed.Resource, a.Verb)
	case f.allNamespaces && !sel:
		return nil, nil, errors.New("-A goes with -l or --all: a name is looked up in one namespace")
	}
	return refs, listed, nil
}

// target is an object a brake acts on, as read.
type target struct {
	k   *brakeKind
	obj *unstructured.Unstructured
}

// newObject is an empty object of kind k, for a read.
func (k *brakeKind) newObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1.GroupVersion.WithKind(k.Name))
	return u
}

// ref is how a line names the target, with its namespace when shown.
func (t target) ref(withNamespace bool) string {
	s := strings.ToLower(t.k.Name) + "/" + t.obj.GetName()
	if withNamespace && t.k.Namespaced {
		s += " in " + t.obj.GetNamespace()
	}
	return s
}

// field is the value of a brake field of the target's spec.
func (t target) field(f brakeField) bool {
	b, _, _ := unstructured.NestedBool(t.obj.Object, "spec", string(f))
	return b
}

// state is the target's status.state; empty for a tool.
func (t target) state() v1.OperationState {
	s, _, _ := unstructured.NestedString(t.obj.Object, "status", "state")
	return v1.OperationState(s)
}

// heldBy is why an operation waits for a suspend, if it does: its Ready
// message. A suspended tool holds operations that are not suspended.
func (t target) heldBy() string {
	if t.k.kind != operationKind {
		return ""
	}
	op := &v1.SideEffectOperation{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(t.obj.Object, op); err != nil || op.Status.State.IsTerminal() ||
		protocol.ReadyReason(op.Status) != v1.ReasonSuspended {
		return ""
	}
	return why(op.Status.Conditions)
}

// readTargets reads the objects the arguments select: each named one, or
// those a list finds. Nothing is written before all are read.
func (o *Options) readTargets(ctx context.Context, c client.Client, refs []ref, listed *brakeKind, f selectFlags) ([]target, string, error) {
	ns, err := o.namespace()
	if err != nil {
		return nil, "", err
	}
	where := "in namespace " + ns
	if f.allNamespaces {
		where = anyNamespace
	}
	var out []target
	seen := map[string]bool{}
	for _, r := range refs {
		if r.k.Namespaced {
			r.namespace = ns
		}
		key := r.k.Name + "/" + r.namespace + "/" + r.name
		if seen[key] {
			continue
		}
		seen[key] = true
		obj := r.k.newObject()
		if err := c.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: r.name}, obj); err != nil {
			return nil, "", apiError(err, "get", r.k.kind, r.namespace, r.name)
		}
		out = append(out, target{k: r.k, obj: obj})
	}
	if listed == nil {
		return out, where, nil
	}
	if !listed.Namespaced {
		where = ""
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(v1.GroupVersion.WithKind(listed.Name + "List"))
	var opts []client.ListOption
	listNS := ""
	if listed.Namespaced && !f.allNamespaces {
		opts, listNS = append(opts, client.InNamespace(ns)), ns
	}
	if f.selector != "" {
		sel, err := labels.Parse(f.selector)
		if err != nil {
			return nil, "", fmt.Errorf("-l %q: %w", f.selector, err)
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, "", apiError(err, "list", listed.kind, listNS, "")
	}
	for i := range list.Items {
		out = append(out, target{k: listed, obj: &list.Items[i]})
	}
	return out, where, nil
}

// brake runs suspend, resume or cancel: it reads what the arguments
// select, says which need no write, asks before a cancel of many, and
// writes the others, at once or spread by --jitter.
func (o *Options) brake(ctx context.Context, a brakeAction, args []string, f brakeFlags) error {
	if err := checkDryRun(f.dryRun); err != nil {
		return err
	}
	if f.jitter < 0 {
		return fmt.Errorf("--jitter %s: a window is positive", f.jitter)
	}
	refs, listed, err := parseTargets(args, f.selectFlags, a)
	if err != nil {
		return err
	}
	c, err := o.writer(f.dryRun)
	if err != nil {
		return err
	}
	targets, where, err := o.readTargets(ctx, c, refs, listed, f.selectFlags)
	if err != nil {
		return err
	}
	if len(targets) == 0 {
		_, err = fmt.Fprintln(o.Streams.Out, strings.TrimSpace("No "+listed.Resource+" found "+where)+".")
		return err
	}
	withNS := f.allNamespaces
	var writes []target
	for _, t := range targets {
		if skip := skipReason(t, a); skip != "" {
			o.say(t.ref(withNS), skip)
			continue
		}
		writes = append(writes, t)
	}
	if a == cancelAction && len(writes) > 1 && !f.yes && !isDryRun(f.dryRun) {
		if err := o.confirmCancel(writes, withNS); err != nil {
			return err
		}
	}
	if f.jitter > 0 && len(writes) > 0 {
		return o.spread(ctx, c, a, writes, f, withNS)
	}
	var failed []string
	for _, t := range writes {
		if err := o.write(ctx, c, a, t, f.dryRun, withNS, ""); err != nil {
			o.say(t.ref(withNS), err.Error())
			failed = append(failed, t.ref(withNS))
		}
	}
	return failedError(a, failed)
}

// skipReason says why a target needs no write, or is empty.
func skipReason(t target, a brakeAction) string {
	if t.field(a.Field) == a.Value {
		msg := a.Already + "; nothing written"
		if a == resumeAction {
			if held := t.heldBy(); held != "" {
				msg += "; it waits all the same: " + held
			}
		}
		return msg
	}
	if st := t.state(); a.Value && st.IsTerminal() {
		return fmt.Sprintf("%s, it makes no more calls; nothing written", st)
	}
	return ""
}

// failedError is the error a brake returns when some writes failed.
func failedError(a brakeAction, failed []string) error {
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("could not %s %s", a.Verb, strings.Join(failed, ", "))
}

// say prints one line about one object.
func (o *Options) say(ref, what string) {
	_, _ = fmt.Fprintln(o.Streams.Out, printable(ref+": "+what))
}

// write sets the action's field on t with a merge patch of that field
// alone. The patch carries the UID read, so an object deleted and created
// again under the name is refused, not changed. at, if given, says when.
func (o *Options) write(ctx context.Context, c client.Client, a brakeAction, t target, dryRun string, withNS bool, at string) error {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": t.obj.GetUID()},
		"spec":     map[string]any{string(a.Field): a.Value},
	})
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, t.obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
		if apierrors.IsInvalid(err) && strings.Contains(err.Error(), "metadata.uid") {
			return errors.New("deleted and created again since it was read; left alone")
		}
		return apiError(err, "patch", t.k.kind, t.obj.GetNamespace(), t.obj.GetName())
	}
	if dryRun != dryRunClient && t.field(a.Field) != a.Value {
		return fmt.Errorf("the API server did not keep spec.%s: does its CRD for %s have it? (install Once's CRDs of this version)",
			a.Field, t.k.Resource)
	}
	done := a.Done
	if at != "" {
		done += " at " + at
	}
	if isDryRun(dryRun) {
		o.say(t.ref(withNS), "would be "+done+"; "+outcome(dryRun, ""))
		return nil
	}
	o.say(t.ref(withNS), done+"; "+a.next(t.k))
	return nil
}

// confirmCancel asks before a cancel of more than one operation. Only yes
// (or y) goes on.
func (o *Options) confirmCancel(writes []target, withNS bool) error {
	out := o.Streams.Out
	_, _ = fmt.Fprintf(out, "Cancel %d objects? Cancel is one way: spec.cancel cannot be set back to false.\n", len(writes))
	for _, t := range writes {
		_, _ = fmt.Fprintln(out, "  "+printable(t.ref(withNS)))
	}
	_, _ = fmt.Fprint(out, "Type yes to cancel them: ")
	answer := ""
	if o.Streams.In != nil {
		answer, _ = bufio.NewReader(o.Streams.In).ReadString('\n')
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return nil
	}
	_, _ = fmt.Fprintln(out)
	return errors.New("nothing cancelled: not confirmed (--yes does not ask)")
}
