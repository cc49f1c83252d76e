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
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/apiserver"
)

// The brakes run against a real API server (envtest, with the CRDs of
// config/crd), through the command as a user types it, with a kubeconfig.
// It starts for the first test that needs it; the table tests need none.
var (
	apiOnce    sync.Once
	api        *apiserver.Server
	kubeconfig string
	apiErr     error
)

// kube is the API server's client, started on first use.
func kube(t testing.TB) client.Client {
	t.Helper()
	apiOnce.Do(func() {
		if api, apiErr = apiserver.Start(); apiErr != nil {
			return
		}
		var user *envtest.AuthenticatedUser
		if user, apiErr = api.Env.AddUser(envtest.User{Name: "alice", Groups: []string{"system:masters"}}, nil); apiErr != nil {
			return
		}
		var b []byte
		if b, apiErr = user.KubeConfig(); apiErr != nil {
			return
		}
		dir, err := os.MkdirTemp("", "kubectl-once-")
		if apiErr = err; err != nil {
			return
		}
		kubeconfig = filepath.Join(dir, "kubeconfig")
		apiErr = os.WriteFile(kubeconfig, b, 0o600)
	})
	if apiErr != nil {
		t.Fatal(apiErr)
	}
	return api.Client
}

func TestMain(m *testing.M) {
	code := m.Run()
	if api != nil {
		_ = api.Stop()
	}
	if kubeconfig != "" {
		_ = os.RemoveAll(filepath.Dir(kubeconfig))
	}
	os.Exit(code)
}

var nsSeq int

// namespace creates a namespace of its own for a test.
func namespace(t *testing.T) string {
	t.Helper()
	nsSeq++
	ns := fmt.Sprintf("brakes-%d", nsSeq)
	if err := kube(t).Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// plugin runs `kubectl once ARGS -n NS` on the API server, with in as
// stdin, and returns what it printed.
func plugin(t *testing.T, o *Options, ns, in string, args ...string) (string, error) {
	t.Helper()
	kube(t)
	var out bytes.Buffer
	if o == nil {
		o = &Options{}
	}
	o.Flags = genericclioptions.NewConfigFlags(true)
	o.Streams = genericiooptions.IOStreams{In: strings.NewReader(in), Out: &out, ErrOut: &out}
	cmd := newCommand(o)
	cmd.SetOut(&out)
	flags := []string{"--kubeconfig", kubeconfig, "-n", ns}
	if args[0] == cobra.ShellCompRequestCmd {
		// The word to complete is the last.
		args = append(append(args[:2:2], flags...), args[2:]...)
	} else {
		args = append(args, flags...)
	}
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// mustPlugin is plugin, failing the test on an error.
func mustPlugin(t *testing.T, o *Options, ns string, args ...string) string {
	t.Helper()
	out, err := plugin(t, o, ns, "", args...)
	if err != nil {
		t.Fatalf("kubectl once %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// lines splits output into its lines.
func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func newTool(t *testing.T, ns, name string) *v1.Tool {
	t.Helper()
	tool := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: toolSpec()}
	if err := kube(t).Create(t.Context(), tool); err != nil {
		t.Fatal(err)
	}
	return tool
}

func toolSpec() v1.ToolSpec {
	return v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "http://127.0.0.1:8090"},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
		Operations:  []v1.ToolOperation{{Name: "charge.create", Path: "/charges"}}}
}

// newOp creates an operation with labels, and sets its state if given.
func newOp(t *testing.T, ns, name string, labels map[string]string, state v1.OperationState) *v1.SideEffectOperation {
	t.Helper()
	op := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: "pay"}, Operation: "charge.create",
			Parameters: &runtime.RawExtension{Raw: []byte(`{"amount":100}`)}}}
	if err := kube(t).Create(t.Context(), op); err != nil {
		t.Fatal(err)
	}
	if state != "" {
		op.Status.State = state
		if err := kube(t).Status().Update(t.Context(), op); err != nil {
			t.Fatal(err)
		}
	}
	return op
}

// spec reads an object's spec.suspend and spec.cancel, and its
// resourceVersion, which says whether anything was written.
func spec(t *testing.T, obj client.Object) (suspend, cancel bool, version string) {
	t.Helper()
	if err := kube(t).Get(t.Context(), client.ObjectKeyFromObject(obj), obj); err != nil {
		t.Fatal(err)
	}
	switch o := obj.(type) {
	case *v1.Tool:
		return o.Spec.Suspend, false, o.ResourceVersion
	case *v1.ClusterTool:
		return o.Spec.Suspend, false, o.ResourceVersion
	case *v1.SideEffectOperation:
		return o.Spec.Suspend, o.Spec.Cancel, o.ResourceVersion
	}
	t.Fatalf("no brakes on %T", obj)
	return false, false, ""
}

func suspended(t *testing.T, obj client.Object) bool {
	t.Helper()
	s, _, _ := spec(t, obj)
	return s
}

func TestSuspendAndResumeByName(t *testing.T) {
	ns := namespace(t)
	tool := newTool(t, ns, "pay")
	ct := &v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: ns + "-mail"}, Spec: v1.ClusterToolSpec{ToolSpec: toolSpec(),
		NamespaceSelector: &metav1.LabelSelector{}}}
	if err := kube(t).Create(t.Context(), ct); err != nil {
		t.Fatal(err)
	}
	op := newOp(t, ns, "charge", nil, "")

	out := mustPlugin(t, nil, ns, "suspend", "tool/pay", "clustertool/"+ct.Name, "seo/charge")
	want := []string{
		"tool/pay: suspended; its new calls wait until it is resumed",
		"clustertool/" + ct.Name + ": suspended; its new calls wait until it is resumed",
		"sideeffectoperation/charge: suspended; its new calls wait until it is resumed",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("suspend: -want, +got:\n%s", diff)
	}
	for _, obj := range []client.Object{tool, ct, op} {
		if !suspended(t, obj) {
			t.Errorf("%s is not suspended", obj.GetName())
		}
	}

	_, _, before := spec(t, tool)
	out = mustPlugin(t, nil, ns, "suspend", "tool", "pay")
	if diff := cmp.Diff([]string{"tool/pay: already suspended; nothing written"}, lines(out)); diff != "" {
		t.Errorf("suspend again (TYPE NAME): -want, +got:\n%s", diff)
	}
	if _, _, after := spec(t, tool); after != before {
		t.Errorf("suspend again wrote the tool: resourceVersion %s, then %s", before, after)
	}

	out = mustPlugin(t, nil, ns, "resume", "tool/pay", "clustertool/"+ct.Name, "op/charge")
	want = []string{
		"tool/pay: resumed; held calls start on Once's next pass",
		"clustertool/" + ct.Name + ": resumed; held calls start on Once's next pass",
		"sideeffectoperation/charge: resumed; held calls start on Once's next pass",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("resume: -want, +got:\n%s", diff)
	}
	for _, obj := range []client.Object{tool, ct, op} {
		if suspended(t, obj) {
			t.Errorf("%s is still suspended", obj.GetName())
		}
	}
	out = mustPlugin(t, nil, ns, "resume", "tool/pay")
	if diff := cmp.Diff([]string{"tool/pay: not suspended; nothing written"}, lines(out)); diff != "" {
		t.Errorf("resume again: -want, +got:\n%s", diff)
	}

	if out, err := plugin(t, nil, ns, "", "suspend", "tool/nope", "tool/pay"); err == nil ||
		err.Error() != "no Tool nope in namespace "+ns || out != "" {
		t.Errorf("suspend of a missing tool: %v, printed %q; want an error and nothing written", err, out)
	}
	if suspended(t, tool) {
		t.Error("a missing name let the others be written")
	}
}

func TestSuspendBySelector(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	batch := map[string]string{"batch": "b1"}
	a, b := newOp(t, ns, "a", batch, ""), newOp(t, ns, "b", batch, "")
	unlabelled := newOp(t, ns, "c", nil, "")
	elsewhere := newOp(t, other, "a", batch, "")
	done := newOp(t, ns, "done", batch, v1.StateCommitted)

	out := mustPlugin(t, nil, ns, "suspend", "seo", "-l", "batch=b1")
	want := []string{
		"sideeffectoperation/done: Committed, it makes no more calls; nothing written",
		"sideeffectoperation/a: suspended; its new calls wait until it is resumed",
		"sideeffectoperation/b: suspended; its new calls wait until it is resumed",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("suspend -l: -want, +got:\n%s", diff)
	}
	for obj, want := range map[*v1.SideEffectOperation]bool{a: true, b: true, unlabelled: false, elsewhere: false, done: false} {
		if got := suspended(t, obj); got != want {
			t.Errorf("%s/%s suspended = %v, want %v", obj.Namespace, obj.Name, got, want)
		}
	}

	out = mustPlugin(t, nil, ns, "suspend", "seos", "-l", "batch=b1", "-A")
	want = []string{
		"sideeffectoperation/a in " + ns + ": already suspended; nothing written",
		"sideeffectoperation/b in " + ns + ": already suspended; nothing written",
		"sideeffectoperation/done in " + ns + ": Committed, it makes no more calls; nothing written",
		"sideeffectoperation/a in " + other + ": suspended; its new calls wait until it is resumed",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("suspend -l -A: -want, +got:\n%s", diff)
	}
	if !suspended(t, elsewhere) {
		t.Error("-A left the other namespace's operation")
	}

	out = mustPlugin(t, nil, ns, "resume", "seo", "--all")
	want = []string{
		"sideeffectoperation/c: not suspended; nothing written",
		"sideeffectoperation/done: not suspended; nothing written",
		"sideeffectoperation/a: resumed; held calls start on Once's next pass",
		"sideeffectoperation/b: resumed; held calls start on Once's next pass",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("resume --all: -want, +got:\n%s", diff)
	}
	if !suspended(t, elsewhere) {
		t.Error("--all without -A reached another namespace")
	}
	if out := mustPlugin(t, nil, ns, "resume", "seo", "-l", "batch=none"); out != "No sideeffectoperations found in namespace "+ns+".\n" {
		t.Errorf("resume -l that selects nothing printed %q", out)
	}
}

func TestCancel(t *testing.T) {
	ns := namespace(t)
	batch := map[string]string{"batch": "b1"}
	one := newOp(t, ns, "one", nil, "")
	a, b := newOp(t, ns, "a", batch, ""), newOp(t, ns, "b", batch, "")
	newOp(t, ns, "done", batch, v1.StateFailedFinal)
	cancelled := func(op *v1.SideEffectOperation) bool { _, c, _ := spec(t, op); return c }

	out := mustPlugin(t, nil, ns, "cancel", "seo/one")
	want := "sideeffectoperation/one: cancelled; Once fails it (reason Cancelled) if no attempt of it may have taken effect, else a person decides\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("cancel of one asks nothing: -want, +got:\n%s", diff)
	}
	if !cancelled(one) {
		t.Error("one is not cancelled")
	}
	_, _, before := spec(t, one)
	if out := mustPlugin(t, nil, ns, "cancel", "seo/one"); out != "sideeffectoperation/one: already cancelled; nothing written\n" {
		t.Errorf("cancel again printed %q", out)
	}
	if _, _, after := spec(t, one); after != before {
		t.Error("cancel again wrote the operation")
	}

	question := "Cancel 2 objects? Cancel is one way: spec.cancel cannot be set back to false.\n" +
		"  sideeffectoperation/a\n  sideeffectoperation/b\nType yes to cancel them: "
	out, err := plugin(t, nil, ns, "no\n", "cancel", "seo", "-l", "batch=b1")
	if err == nil || err.Error() != "nothing cancelled: not confirmed (--yes does not ask)" {
		t.Errorf("cancel of many, answered no: error %v", err)
	}
	if diff := cmp.Diff("sideeffectoperation/done: FailedFinal, it makes no more calls; nothing written\n"+question+"\n", out); diff != "" {
		t.Errorf("cancel of many asks: -want, +got:\n%s", diff)
	}
	if cancelled(a) || cancelled(b) {
		t.Error("an unconfirmed cancel wrote")
	}

	out, err = plugin(t, nil, ns, "yes\n", "cancel", "seo", "-l", "batch=b1")
	if err != nil || !strings.Contains(out, question+"sideeffectoperation/a: cancelled;") {
		t.Errorf("cancel of many, answered yes: %v\n%s", err, out)
	}
	if !cancelled(a) || !cancelled(b) {
		t.Error("a confirmed cancel did not write")
	}

	c, d := newOp(t, ns, "c", batch, ""), newOp(t, ns, "d", batch, "")
	out = mustPlugin(t, nil, ns, "cancel", "seo", "c", "d", "--yes")
	if strings.Contains(out, "Type yes") || !cancelled(c) || !cancelled(d) {
		t.Errorf("cancel --yes asked, or did not write:\n%s", out)
	}

	if _, err := plugin(t, nil, ns, "", "cancel", "tool/pay"); err == nil ||
		err.Error() != "a Tool has no spec.cancel: suspend it, or cancel its operations (seo/NAME)" {
		t.Errorf("cancel of a tool: %v", err)
	}
}

func TestBrakeDryRun(t *testing.T) {
	ns := namespace(t)
	tool := newTool(t, ns, "pay")
	newOp(t, ns, "a", nil, "")
	newOp(t, ns, "b", nil, "")
	_, _, before := spec(t, tool)
	for _, dry := range []string{dryRunClient, dryRunServer} {
		out := mustPlugin(t, nil, ns, "suspend", "tool/pay", "--dry-run="+dry)
		if want := "tool/pay: would be suspended; nothing changed (" + dry + " dry run)\n"; out != want {
			t.Errorf("suspend --dry-run=%s printed %q, want %q", dry, out, want)
		}
		out = mustPlugin(t, nil, ns, "cancel", "seo", "--all", "--dry-run="+dry)
		if strings.Contains(out, "Type yes") || strings.Count(out, "would be cancelled") != 2 {
			t.Errorf("cancel --dry-run=%s asked, or did not say what it would do:\n%s", dry, out)
		}
	}
	if _, _, after := spec(t, tool); after != before {
		t.Error("a dry run wrote the tool")
	}
	var list v1.SideEffectOperationList
	if err := kube(t).List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, op := range list.Items {
		if op.Spec.Cancel {
			t.Errorf("a dry run cancelled %s", op.Name)
		}
	}
}

// fakeTime is a clock that sleeps by moving on, and records each sleep.
type fakeTime struct {
	now    time.Time
	sleeps []time.Duration
	// during runs at each sleep, before the clock moves.
	during func(n int)
}

func (f *fakeTime) Now() time.Time { return f.now }

func (f *fakeTime) Sleep(_ context.Context, d time.Duration) error {
	if f.during != nil {
		f.during(len(f.sleeps))
	}
	f.sleeps = append(f.sleeps, d)
	f.now = f.now.Add(d)
	return nil
}

// draws is a random source that returns the given fractions of n, in turn.
func draws(fractions ...float64) func(n int64) int64 {
	i := 0
	return func(n int64) int64 {
		f := fractions[i%len(fractions)]
		i++
		return int64(f * float64(n))
	}
}

func TestResumeJitter(t *testing.T) {
	ns := namespace(t)
	ops := map[string]*v1.SideEffectOperation{}
	for _, name := range []string{"a", "b", "c"} {
		ops[name] = newOp(t, ns, name, nil, "")
	}
	mustPlugin(t, nil, ns, "suspend", "seo", "--all")
	start := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)

	// a, b, c draw 0.5, 0.1 and 0.9 of 10m: b goes first, at +1m.
	plan := "Plan: 3 to resume over 10m0s, each at a time of its own:\n" +
		"  +1m0s   2026-12-03T17:01:00Z   sideeffectoperation/b\n" +
		"  +5m0s   2026-12-03T17:05:00Z   sideeffectoperation/a\n" +
		"  +9m0s   2026-12-03T17:09:00Z   sideeffectoperation/c\n"

	clock := &fakeTime{now: start}
	o := &Options{Now: clock.Now, Sleep: clock.Sleep, Rand: draws(0.5, 0.1, 0.9)}
	out := mustPlugin(t, o, ns, "resume", "seo", "--all", "--jitter", "10m", "--dry-run=client")
	want := plan +
		"sideeffectoperation/b: would be resumed at 2026-12-03T17:01:00Z; nothing changed (client dry run)\n" +
		"sideeffectoperation/a: would be resumed at 2026-12-03T17:05:00Z; nothing changed (client dry run)\n" +
		"sideeffectoperation/c: would be resumed at 2026-12-03T17:09:00Z; nothing changed (client dry run)\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("resume --jitter --dry-run: -want, +got:\n%s", diff)
	}
	if len(clock.sleeps) != 0 {
		t.Errorf("a dry run slept %v", clock.sleeps)
	}
	for name, op := range ops {
		if !suspended(t, op) {
			t.Errorf("a dry run resumed %s", name)
		}
	}

	// At each sleep, the operations not due yet are still suspended.
	clock = &fakeTime{now: start}
	clock.during = func(n int) {
		for i, name := range []string{"b", "a", "c"} {
			if got := suspended(t, ops[name]); got != (i >= n) {
				t.Errorf("at sleep %d, %s suspended = %v", n, name, got)
			}
		}
	}
	o = &Options{Now: clock.Now, Sleep: clock.Sleep, Rand: draws(0.5, 0.1, 0.9)}
	out = mustPlugin(t, o, ns, "resume", "seo", "--all", "--jitter", "10m")
	want = plan +
		"sideeffectoperation/b: resumed at 2026-12-03T17:01:00Z; held calls start on Once's next pass\n" +
		"sideeffectoperation/a: resumed at 2026-12-03T17:05:00Z; held calls start on Once's next pass\n" +
		"sideeffectoperation/c: resumed at 2026-12-03T17:09:00Z; held calls start on Once's next pass\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("resume --jitter: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{time.Minute, 4 * time.Minute, 4 * time.Minute}, clock.sleeps); diff != "" {
		t.Errorf("sleeps: -want, +got:\n%s", diff)
	}
	for name, op := range ops {
		if suspended(t, op) {
			t.Errorf("%s is still suspended", name)
		}
	}
}

func TestResumeJitterKnowsTheObject(t *testing.T) {
	ns := namespace(t)
	a, b := newOp(t, ns, "a", nil, ""), newOp(t, ns, "b", nil, "")
	mustPlugin(t, nil, ns, "suspend", "seo/a", "seo/b")

	// While the plugin sleeps, someone resumes a, and b is deleted and
	// created again, suspended.
	clock := &fakeTime{now: time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)}
	clock.during = func(n int) {
		if n != 0 {
			return
		}
		if err := kube(t).Get(t.Context(), client.ObjectKeyFromObject(a), a); err != nil {
			t.Fatal(err)
		}
		a.Spec.Suspend = false
		if err := kube(t).Update(t.Context(), a); err != nil {
			t.Fatal(err)
		}
		if err := kube(t).Delete(t.Context(), b); err != nil {
			t.Fatal(err)
		}
		again := &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}, Spec: b.Spec}
		again.Spec.Suspend = true
		if err := kube(t).Create(t.Context(), again); err != nil {
			t.Fatal(err)
		}
	}
	o := &Options{Now: clock.Now, Sleep: clock.Sleep, Rand: draws(0.1, 0.2)}
	out, err := plugin(t, o, ns, "", "resume", "seo/a", "seo/b", "--jitter", "10s")
	want := []string{
		"Plan: 2 to resume over 10s, each at a time of its own:",
		"  +1s   2026-12-03T17:00:01Z   sideeffectoperation/a",
		"  +2s   2026-12-03T17:00:02Z   sideeffectoperation/b",
		"sideeffectoperation/a: not suspended; nothing written",
		"sideeffectoperation/b: deleted and created again since it was read; left alone",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("resume --jitter: -want, +got:\n%s", diff)
	}
	if err == nil || err.Error() != "could not resume sideeffectoperation/b" {
		t.Errorf("error %v", err)
	}
	if !suspended(t, b) {
		t.Error("the new b was resumed: a write reached an object the plan never read")
	}
}

func TestParseTargets(t *testing.T) {
	type want struct {
		refs   []string
		listed string
		err    string
	}
	cases := map[string]struct {
		reason string
		args   []string
		flags  selectFlags
		action brakeAction
		want   want
	}{
		"Names": {reason: "TYPE/NAME, in every spelling.", action: suspendAction,
			args: []string{"tool/a", "ClusterTool/b", "seo/c", "op/d", "sideeffectoperations.effects.once.dev/e"},
			want: want{refs: []string{"Tool/a", "ClusterTool/b", "SideEffectOperation/c", "SideEffectOperation/d", "SideEffectOperation/e"}}},
		"TypeThenNames": {reason: "TYPE NAME NAME.", action: suspendAction, args: []string{"tools", "a", "b"},
			want: want{refs: []string{"Tool/a", "Tool/b"}}},
		"Selector": {reason: "TYPE with -l lists.", action: suspendAction, args: []string{"seo"}, flags: selectFlags{selector: "a=b"},
			want: want{listed: "SideEffectOperation"}},
		"All": {reason: "TYPE with --all lists, -A too.", action: resumeAction, args: []string{"tool"}, flags: selectFlags{all: true, allNamespaces: true},
			want: want{listed: "Tool"}},
		"Nothing": {reason: "Something is required.", action: suspendAction,
			want: want{err: "say what to suspend: TYPE/NAME, or TYPE with -l SELECTOR or --all (TYPE: tool, clustertool, seo, saga)"}},
		"TypeAlone": {reason: "A TYPE alone selects nothing.", action: suspendAction, args: []string{"tool"},
			want: want{err: "say which tools to suspend: names, -l SELECTOR or --all"}},
		"NamesAndSelector": {reason: "Names go without -l.", action: suspendAction, args: []string{"tool/a"}, flags: selectFlags{selector: "a=b"},
			want: want{err: "names go without -l and --all: say TYPE -l SELECTOR, TYPE --all, or the names"}},
		"NamesEverywhere": {reason: "-A needs a list.", action: suspendAction, args: []string{"tool/a"}, flags: selectFlags{allNamespaces: true},
			want: want{err: "-A goes with -l or --all: a name is looked up in one namespace"}},
		"OtherKind": {reason: "Pods have no brakes.", action: suspendAction, args: []string{"pod/x"},
			want: want{err: `"pod" is not a kind to suspend: say tool, clustertool, seo, saga`}},
		"CancelTool": {reason: "A tool cannot be cancelled.", action: cancelAction, args: []string{"clustertool/x"},
			want: want{err: "a ClusterTool has no spec.cancel: suspend it, or cancel its operations (seo/NAME)"}},
		"Mixed": {reason: "TYPE NAME does not take TYPE/NAME after it.", action: suspendAction, args: []string{"tool", "seo/x"},
			want: want{err: `"seo/x" is not a name: say TYPE/NAME, or TYPE and its names`}},
		"NoName": {reason: "TYPE/ without a name.", action: suspendAction, args: []string{"tool/"},
			want: want{err: `"tool/" is not a name: say TYPE/NAME, or TYPE and its names`}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			refs, listed, err := parseTargets(tc.args, tc.flags, tc.action)
			var got want
			for _, r := range refs {
				got.refs = append(got.refs, r.k.Name+"/"+r.name)
			}
			if listed != nil {
				got.listed = listed.Name
			}
			if err != nil {
				got = want{err: err.Error()}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nparseTargets(%q): -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}

// TestBrakeKinds holds brakeKinds to the API: each kind whose spec has
// suspend or cancel has a row with those fields. It fails once Saga gains
// them, until Saga's row is added.
func TestBrakeKinds(t *testing.T) {
	specs := map[string]reflect.Type{
		toolKind.Name:        reflect.TypeFor[v1.ToolSpec](),
		clusterToolKind.Name: reflect.TypeFor[v1.ClusterToolSpec](),
		operationKind.Name:   reflect.TypeFor[v1.SideEffectOperationSpec](),
		sagaKind.Name:        reflect.TypeFor[v1.SagaSpec](),
	}
	for name, typ := range specs {
		var want []brakeField
		for _, f := range []brakeField{fieldSuspend, fieldCancel} {
			if hasJSONField(typ, string(f)) {
				want = append(want, f)
			}
		}
		var got []brakeField
		for _, k := range brakeKinds {
			if k.Name == name {
				got = k.Fields
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the brake fields of %s: -its spec, +brakeKinds:\n%s", name, diff)
		}
	}
}

// hasJSONField reports whether a struct has a field of that JSON name,
// inline structs included.
func hasJSONField(typ reflect.Type, name string) bool {
	for f := range typ.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name || (tag == "" && f.Anonymous && hasJSONField(f.Type, name)) {
			return true
		}
	}
	return false
}

func TestReviewListsHeldOperations(t *testing.T) {
	ns := namespace(t)
	op := newOp(t, ns, "held", nil, v1.StatePlanned)
	op.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1.ReasonSuspended,
		Message: "Suspended by Tool pay (spec.suspend): attempt 1 waits until it is resumed", LastTransitionTime: metav1.Now()}}
	if err := kube(t).Status().Update(t.Context(), op); err != nil {
		t.Fatal(err)
	}
	later := op.CreationTimestamp.Add(5 * time.Minute)
	out, err := plugin(t, &Options{Now: func() time.Time { return later }}, ns, "", "review", "--exit-code")
	if err != nil {
		t.Errorf("review --exit-code with only a held operation: %v; a suspend is no decision", err)
	}
	want := []string{"KIND                  NAME   STATE       AGE   WHY",
		"SideEffectOperation   held   Suspended   5m    Suspended by Tool pay (spec.suspend): attempt 1 waits until it is resumed"}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("review: -want, +got:\n%s", diff)
	}
	newOp(t, ns, "x", nil, v1.StateNeedsReview)
	if _, err := plugin(t, nil, ns, "", "review", "--exit-code"); err == nil || err.Error() != "exit status 1" {
		t.Errorf("review --exit-code with an operation in review: %v, want exit status 1", err)
	}
}

func TestResolveBySelector(t *testing.T) {
	ns, other := namespace(t), namespace(t)
	batch := map[string]string{"batch": "b1"}
	newOp(t, ns, "a", batch, v1.StateNeedsReview)
	newOp(t, ns, "b", batch, v1.StateNeedsReview)
	newOp(t, ns, "busy", batch, v1.StateStarted)
	newOp(t, ns, "c", nil, v1.StateNeedsReview)
	newOp(t, other, "a", batch, v1.StateNeedsReview)
	resolution := func(ns, name string) v1.ResolutionAction {
		op := &v1.SideEffectOperation{}
		if err := kube(t).Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, op); err != nil {
			t.Fatal(err)
		}
		if op.Spec.Resolution == nil {
			return ""
		}
		return op.Spec.Resolution.Action
	}

	out := mustPlugin(t, nil, ns, "resolve", "-l", "batch=b1", "--fail", "--by", "alice", "--reason", "withdrawn")
	next := "; Once applies it on its next pass (kubectl once why "
	want := []string{
		`sideeffectoperation/a: wrote spec.resolution Fail by alice ("withdrawn")` + next + "a)",
		`sideeffectoperation/b: wrote spec.resolution Fail by alice ("withdrawn")` + next + "b)",
	}
	if diff := cmp.Diff(want, lines(out)); diff != "" {
		t.Errorf("resolve -l: -want, +got:\n%s", diff)
	}
	for name, want := range map[string]v1.ResolutionAction{"a": v1.ResolutionFail, "b": v1.ResolutionFail, "busy": "", "c": ""} {
		if got := resolution(ns, name); got != want {
			t.Errorf("%s resolved %q, want %q", name, got, want)
		}
	}
	if got := resolution(other, "a"); got != "" {
		t.Errorf("-l without -A resolved another namespace's operation: %q", got)
	}

	out = mustPlugin(t, nil, ns, "resolve", "-l", "batch=b1", "-A", "--retry", "--by", "alice", "--dry-run=client")
	if !strings.Contains(out, "sideeffectoperation/a in "+other+": would write spec.resolution Retry by alice; nothing changed") {
		t.Errorf("resolve -l -A --dry-run did not name the other namespace's operation:\n%s", out)
	}
	if got := resolution(other, "a"); got != "" {
		t.Errorf("a dry run resolved: %q", got)
	}

	if _, err := plugin(t, nil, ns, "", "resolve", "-l", "batch=b1", "--committed", "--external-id", "x", "--by", "alice"); err == nil ||
		err.Error() != "--committed names one effect by its id: resolve each operation by its NAME" {
		t.Errorf("resolve -l --committed: %v", err)
	}
}

func TestCompleteBrakeTargets(t *testing.T) {
	ns := namespace(t)
	newOp(t, ns, "held", nil, "")
	newOp(t, ns, "free", nil, "")
	newOp(t, ns, "done", nil, v1.StateCommitted)
	mustPlugin(t, nil, ns, "suspend", "seo/held")
	cases := map[string]struct {
		reason string
		args   []string
		want   []string
	}{
		"Kinds":        {reason: "Before a slash, the kinds with the field.", args: []string{"cancel", ""}, want: []string{"seo/", "saga/", ":6"}},
		"KindsSuspend": {reason: "Suspend has three.", args: []string{"suspend", "c"}, want: []string{"clustertool/", ":6"}},
		"Resume":       {reason: "Resume offers what is suspended.", args: []string{"resume", "seo/"}, want: []string{"seo/held", ":4"}},
		"Suspend":      {reason: "Suspend offers what is not, and has not ended.", args: []string{"suspend", "seo", ""}, want: []string{"free", ":4"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out := mustPlugin(t, nil, ns, append([]string{"__complete"}, tc.args...)...)
			var got []string
			for _, l := range lines(out) {
				if !strings.HasPrefix(l, "Completion ended") {
					got = append(got, l)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n__complete %q: -want, +got:\n%s", tc.reason, tc.args, diff)
			}
		})
	}
}
