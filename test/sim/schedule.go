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

package sim

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/review"
	"github.com/once-dev/once/internal/saga"
)

// Kind is a kind of action of the scheduler.
type Kind string

// The action alphabet.
const (
	// Reconcile: a manager runs one pass of a queued request.
	Reconcile Kind = "reconcile"
	// Resume: a frozen pass goes on.
	Resume Kind = "resume"
	// Sync: a manager's cache applies some of the changes it lags behind.
	Sync Kind = "sync"
	// Relist: a manager's watch broke for longer than the API server keeps
	// its changes (410 Gone), and its informer lists everything again:
	// each object it lags behind on jumps to what it is now, in one
	// event. A name deleted and created again in the gap is one update
	// from the old object to the new; an object created and deleted in it
	// is never seen.
	Relist Kind = "relist"
	// Tick: the clock moves.
	Tick Kind = "tick"
	// Crash: a manager dies and restarts, its memory lost.
	Crash Kind = "crash"
	// Cut and Reconnect: a manager loses, and finds again, the API server.
	Cut       Kind = "cut"
	Reconnect Kind = "reconnect"
	// Apply: a person or GitOps applies an operation's manifest (again).
	Apply Kind = "apply"
	// Reapply: GitOps applies the manifest of an operation that exists
	// (a sync, or its self-heal of a drift): the fields the manifest sets
	// that may change become the manifest's.
	Reapply Kind = "reapply"
	// ApplyOther: a person applies another manifest under a name whose
	// object is gone (World.others): a GitOps repository edited so that
	// the name stands for another effect (a prune, then a create), or a
	// person at kubectl who reuses a name.
	ApplyOther Kind = "apply-other"
	// Replace: a person deletes an operation and creates its name again
	// the moment it is gone (kubectl replace --force, or a GitOps sync
	// that prunes and creates in one go), from the manifest the name has
	// now: its other one, if it has one (World.others). So a pass of the
	// old object that is frozen, or a cache that lags, meets the new one
	// under the same name.
	Replace Kind = "replace"
	// Delete: a person or a GitOps prune deletes an operation; with
	// Options.People, a person at kubectl deletes any object, a saga's
	// step or compensation among them.
	Delete Kind = "delete"
	// FailStep: a person resolves a saga step's operation in NeedsReview
	// with Fail, to stop it (and, a later Delete, deletes it: done with
	// it).
	FailStep Kind = "fail-step"
	// DeleteNamespace: a person deletes the workload's namespace, records
	// and all; the next apply creates it again, with its tools.
	DeleteNamespace Kind = "delete-namespace"
	// EditTool: a person edits a tool, within what the tool really does.
	EditTool Kind = "edit-tool"
	// EditTTL: a person sets, changes or removes an operation's or a
	// saga's ttlSecondsAfterFinished, which may change at any time.
	EditTTL Kind = "edit-ttl"
	// Resolve: a person resolves an operation in NeedsReview, after
	// looking at the tool.
	Resolve Kind = "resolve"
	// ResolveInGit: a person resolves an operation in NeedsReview as
	// GitOps has it, by writing spec.resolution into its manifest in the
	// repository, which applies it. The repository keeps the resolution:
	// every later apply of the manifest carries it, the one that creates
	// the operation again after a delete among them.
	ResolveInGit Kind = "resolve-in-git"
	// ResolveSaga: a person decides what a saga in review waits on, after
	// looking at the tool; Approve: a person approves a saga's step.
	ResolveSaga Kind = "resolve-saga"
	Approve     Kind = "approve"
	// Collect: the garbage collector deletes the objects whose owners are
	// all gone (what an owner owned goes with it at once; one created
	// after its owner went waits for this).
	Collect Kind = "collect"
	// Quiet: the faults stop (no more freezes, every request arrives and
	// is answered), and everything has its time to settle (I13).
	Quiet Kind = "quiet"
)

// Action is one step of a schedule. Sub seeds the decisions taken inside
// it (where a pass freezes, what a request meets), so that a schedule
// replays bit for bit, also with actions left out.
type Action struct {
	Kind    Kind
	Manager int
	Ctrl    string
	Name    string
	N       int64
	Sub     uint64
}

// lifetime is how long a run lasts unless second lifetimes are asked for:
// less than the default retention, so that no key is forgotten and used
// again.
const lifetime = 22 * time.Hour

// maxFrozen is how many steps a pass stays frozen at most: a freeze ends.
const maxFrozen = 400

// Plan draws the next action from the world as it is.
func (w *World) Plan(rng *rand.Rand) Action {
	a := Action{Sub: rng.Uint64()}
	// A freeze ends.
	for _, m := range w.managers {
		for _, r := range sortedRequests(m.parked) {
			if w.step-m.parked[r].parkedAt > maxFrozen {
				a.Kind, a.Manager, a.Ctrl, a.Name = Resume, idx(w, m), r.ctrl, r.Name
				return a
			}
		}
	}
	if w.planStops(rng, &a) {
		return a
	}
	choices := append([]choice{
		{"reconcile", func() bool {
			m := w.managers[rng.IntN(len(w.managers))]
			ready := w.ready(m)
			if len(ready) == 0 {
				return false
			}
			r := ready[rng.IntN(len(ready))]
			a.Kind, a.Manager, a.Ctrl, a.Name = Reconcile, idx(w, m), r.ctrl, r.Name
			return true
		}},
		{"resume", func() bool {
			m := w.managers[rng.IntN(len(w.managers))]
			ps := slices.DeleteFunc(sortedRequests(m.parked), func(r request) bool {
				return w.clock.Now().Before(m.parked[r].holdUntil)
			})
			if len(ps) == 0 {
				return false
			}
			r := ps[rng.IntN(len(ps))]
			a.Kind, a.Manager, a.Ctrl, a.Name = Resume, idx(w, m), r.ctrl, r.Name
			return true
		}},
		{"sync", func() bool {
			m := w.managers[rng.IntN(len(w.managers))]
			if m.cache.Behind() == 0 {
				return false
			}
			a.Kind, a.Manager, a.N = Sync, idx(w, m), 1+rng.Int64N(int64(m.cache.Behind()))
			return true
		}},
		{"relist", func() bool {
			m := w.managers[rng.IntN(len(w.managers))]
			a.Kind, a.Manager = Relist, idx(w, m)
			return m.cache.Behind() > 1
		}},
		{"tick", func() bool {
			a.Kind = Tick
			switch p := rng.IntN(100); {
			case p < 50:
				a.N = int64(w.untilDue())
			case p < 90:
				a.N = int64(time.Second) * (1 + rng.Int64N(30))
			case p < 99:
				a.N = int64(time.Minute) * (1 + rng.Int64N(10))
			default:
				a.N = int64(time.Hour) * (1 + rng.Int64N(30))
			}
			if !w.opts.SecondLifetimes {
				// The run ends before a record's retention can pass. A
				// move takes at most half of the time left, so that time
				// keeps moving to the end: a clock stopped at the limit
				// would leave the faulted steps after it at one instant,
				// where no backoff, claim or delay runs out.
				a.N = min(a.N, int64(start.Add(lifetime).Sub(w.clock.Now())/2))
			}
			return a.N > 0
		}},
		{"crash", func() bool {
			a.Kind, a.Manager = Crash, rng.IntN(len(w.managers))
			return !w.managers[a.Manager].down()
		}},
		{"cut", func() bool {
			m := rng.IntN(len(w.managers))
			a.Kind, a.Manager = Cut, m
			if w.managers[m].cutOff {
				a.Kind = Reconnect
			}
			return true
		}},
		{"collect", func() bool {
			a.Kind = Collect
			return len(w.server.Orphans()) > 0 || w.clearingStory() != ""
		}},
	}, w.peopleChoices(rng, &a)...)
	if w.opts.Callers {
		choices = append(choices, w.callerChoices(rng, &a)...)
	}
	if w.opts.Stops {
		choices = append(choices, w.stopChoice(rng, &a))
	}
	if w.opts.Brakes {
		choices = append(choices, w.brakeChoices(rng, &a)...)
	}
	total := 0
	for _, c := range choices {
		total += w.weight(c.name)
	}
	for range 50 {
		n := rng.IntN(total)
		for _, c := range choices {
			if n < w.weight(c.name) {
				if c.fill() {
					return a
				}
				break
			}
			n -= w.weight(c.name)
		}
	}
	a.Kind, a.N = Tick, int64(time.Second)
	return a
}

// choice is one kind of action the scheduler may draw, named as in
// baseWeights; fill fills the action in and reports whether it applies
// now.
type choice struct {
	name string
	fill func() bool
}

// baseWeights are the scheduler's kinds of action, in the order Plan
// draws among them, and their weights. A swarm run never switches a
// steady one off: without them nothing runs, or time stops.
var baseWeights = []kindWeight{
	{"reconcile", 40, true}, {"resume", 8, true}, {"sync", 20, true}, {"tick", 12, true},
	{"crash", 1, false}, {"cut", 2, false}, {"collect", 2, false},
	{"apply", 4, true}, {"delete", 1, false}, {"delete-in-review", 1, false}, {"reapply", 1, false},
	{"delete-namespace", 1, false}, {"edit-tool", 1, false}, {"edit-ttl", 1, false},
	{"resolve-saga", 2, false}, {"resolve", 3, false}, {"edit-ttl-in-review", 1, false},
	{"apply-other", 1, false}, {"delete-any", 1, false}, {"fail-step", 1, false},
	{"replace", 2, false}, {"relist", 2, false}, {"call", 6, false}, {"stop", 1, false},
}

// kindWeight is a kind of action's base weight. A steady one is never
// switched off.
type kindWeight struct {
	name   string
	weight int
	steady bool
}

// weight is the weight of a kind of action in this run.
func (w *World) weight(name string) int {
	if n, ok := w.opts.Weights[name]; ok {
		return n
	}
	for _, list := range [][]kindWeight{baseWeights, brakeWeights} {
		for _, b := range list {
			if b.name == name {
				return b.weight
			}
		}
	}
	panic("sim: no weight for " + name)
}

// peopleChoices are what people may do next (Plan draws among them and
// the managers' and the clock's moves); each fills a.
func (w *World) peopleChoices(rng *rand.Rand, a *Action) []choice {
	choices := []choice{
		{"apply", func() bool {
			mf := w.manifests[rng.IntN(len(w.manifests))]
			if w.exists(mf.GetName()) || !w.mayApply(mf) {
				return false
			}
			a.Kind, a.Name = Apply, mf.GetName()
			return true
		}},
		{"delete", func() bool {
			mf := w.manifests[rng.IntN(len(w.manifests))]
			if !w.exists(mf.GetName()) {
				return false
			}
			a.Kind, a.Name = Delete, mf.GetName()
			return true
		}},
		{"delete-in-review", func() bool {
			// A person's reflex with an operation stuck in review: delete
			// it, to apply its manifest again (an Apply, later).
			var stuck []string
			for _, name := range w.inReview() {
				if w.operationManifest(name) != nil {
					stuck = append(stuck, name)
				}
			}
			if len(stuck) == 0 {
				return false
			}
			a.Kind, a.Name = Delete, stuck[rng.IntN(len(stuck))]
			return true
		}},
		{"reapply", func() bool {
			mf, ok := w.manifests[rng.IntN(len(w.manifests))].(*v1.SideEffectOperation)
			if !ok {
				return false
			}
			// The manifest its object was created from.
			mf = w.operationManifest(mf.Name)
			if _, changes := w.reapplies(mf); !changes {
				return false
			}
			a.Kind, a.Name = Reapply, mf.Name
			return true
		}},
		{"delete-namespace", func() bool {
			// Rare: a namespace deleted with work in flight, about once
			// in two runs.
			if rng.IntN(40) != 0 || w.namespaceState() != namespaceActive {
				return false
			}
			a.Kind = DeleteNamespace
			return true
		}},
		{"edit-tool", func() bool {
			names := []string{toolChat, toolDesk, toolPay}
			a.Kind, a.Name, a.N = EditTool, names[rng.IntN(len(names))], rng.Int64N(4)
			return true
		}},
		{"edit-ttl", func() bool {
			mf := w.manifests[rng.IntN(len(w.manifests))]
			if !w.exists(mf.GetName()) {
				return false
			}
			a.Kind, a.Name, a.N = EditTTL, mf.GetName(), rng.Int64N(int64(len(ttlEdits)))
			return true
		}},
		{"resolve-saga", func() bool {
			sagas := w.sagasWaiting()
			if len(sagas) == 0 {
				return false
			}
			s := sagas[rng.IntN(len(sagas))]
			a.Kind, a.Name = ResolveSaga, s.Name
			if s.Status.State != v1.StateNeedsReview {
				a.Kind = Approve
			}
			return true
		}},
		{"resolve", func() bool {
			waiting := w.inReview()
			if len(waiting) == 0 {
				return false
			}
			a.Kind, a.Name, a.N = Resolve, waiting[rng.IntN(len(waiting))], rng.Int64N(10)
			if rng.IntN(3) == 0 && w.operationManifest(a.Name) != nil {
				a.Kind = ResolveInGit
			}
			return true
		}},
		{"edit-ttl-in-review", func() bool {
			// A person edits an operation that waits in review, not its
			// resolution: kubectl edit (or a GitOps apply of a manifest
			// whose TTL changed) sets a TTL so that it goes once decided.
			// An edit moves the generation without deciding anything.
			waiting := w.inReview()
			if len(waiting) == 0 {
				return false
			}
			a.Kind, a.Name, a.N = EditTTL, waiting[rng.IntN(len(waiting))], rng.Int64N(int64(len(ttlEdits)))
			return true
		}},
	}
	if w.opts.People {
		choices = append(choices, w.morePeople(rng, a)...)
	}
	return choices
}

// morePeople are what people do in the world of Options.People.
func (w *World) morePeople(rng *rand.Rand, a *Action) []choice {
	return []choice{
		{"apply-other", func() bool {
			names := slices.Sorted(maps.Keys(w.others))
			name := names[rng.IntN(len(names))]
			// After the first object of the name: the repository edited,
			// or the name reused, once it is gone.
			if _, applied := w.live[name]; !applied || w.exists(name) || !w.mayApply(w.others[name]) {
				return false
			}
			a.Kind, a.Name = ApplyOther, name
			return true
		}},
		{"delete-any", func() bool {
			// kubectl delete of whatever a person sees: an operation a
			// saga created, a compensation, a saga.
			names := w.deletable()
			if len(names) == 0 {
				return false
			}
			a.Kind, a.Name = Delete, names[rng.IntN(len(names))]
			return true
		}},
		{"replace", func() bool {
			// A person replaces an operation whose manifest they changed,
			// or, one time in two, one that seems stuck in flight (a call
			// under way, or a worker that stopped in it).
			names := w.replaceable()
			if len(names) == 0 {
				return false
			}
			if stuck := w.started(names); len(stuck) > 0 && rng.IntN(2) == 0 {
				names = stuck
			}
			a.Kind, a.Name = Replace, names[rng.IntN(len(names))]
			return true
		}},
		{"fail-step", func() bool {
			// A person who failed a step deletes its operation next:
			// done with it.
			if names := w.failedSteps(); len(names) > 0 {
				a.Kind, a.Name = Delete, names[rng.IntN(len(names))]
				return true
			}
			names := w.stepsInReview()
			if len(names) == 0 {
				return false
			}
			a.Kind, a.Name = FailStep, names[rng.IntN(len(names))]
			return true
		}},
	}
}

// mayApply reports whether people apply mf now, as far as its scope's
// lifetimes go: a scope forgotten within a run is applied again only
// when the run asks for second lifetimes, or when the manifest's own
// short retention let it be forgotten (Options.People).
func (w *World) mayApply(mf client.Object) bool {
	if w.opts.SecondLifetimes || !w.forgotten(mf) {
		return true
	}
	op, ok := mf.(*v1.SideEffectOperation)
	return ok && op.Spec.Retention != nil && op.Spec.Retention.Duration < lifetime
}

// deletable are the operations and sagas a person may delete: every one
// not being deleted already.
func (w *World) deletable() []string {
	var out []string
	for _, kind := range []string{kindOperation, kindSaga} {
		for _, o := range w.server.peek(kind) {
			if o.GetNamespace() == Namespace && o.GetDeletionTimestamp().IsZero() {
				out = append(out, o.GetName())
			}
		}
	}
	slices.Sort(out)
	return out
}

// failedSteps are the saga steps' operations a person failed that still
// stand: the same objects, not being deleted.
func (w *World) failedSteps() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(w.failed)) {
		o, ok := w.server.objects[opObjKey(name)]
		if ok && o.GetUID() == w.failed[name] && o.GetDeletionTimestamp().IsZero() {
			out = append(out, name)
		}
	}
	return out
}

// stepsInReview are the operations in NeedsReview that a saga created.
func (w *World) stepsInReview() []string {
	var out []string
	for _, name := range w.inReview() {
		if o := w.server.objects[opObjKey(name)]; metav1.GetControllerOfNoCopy(o) != nil {
			out = append(out, name)
		}
	}
	return out
}

func idx(w *World, m *Manager) int {
	for i, x := range w.managers {
		if x == m {
			return i
		}
	}
	return -1
}

// ready are a manager's queued requests that are due and not in a frozen
// pass (a queue never hands out an item that is being processed).
func (w *World) ready(m *Manager) []request {
	if m.halted() {
		return nil
	}
	var out []request
	for _, r := range sortedRequests(m.queue) {
		if _, busy := m.parked[r]; busy || m.queue[r].After(w.clock.Now()) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// untilDue is how long until the next queued request or timer is due.
func (w *World) untilDue() time.Duration {
	var next time.Time
	for _, m := range w.managers {
		for _, at := range m.queue {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	if t, ok := w.clock.Next(); ok && (next.IsZero() || t.Before(next)) {
		next = t
	}
	d := next.Sub(w.clock.Now())
	if next.IsZero() || d <= 0 {
		return 0
	}
	return d.Round(time.Millisecond) + time.Millisecond
}

func (w *World) exists(name string) bool {
	_, ok := w.server.objects[w.manifestKey(name)]
	return ok
}

// manifestKey names the object of a manifest.
func (w *World) manifestKey(name string) objKey {
	for _, mf := range w.manifests {
		if mf.GetName() == name {
			return keyOf(mf)
		}
	}
	// A saga a caller made (sagacallers.go) has no manifest.
	k := objKey{Kind: kindSaga, NamespacedName: types.NamespacedName{Namespace: Namespace, Name: name}}
	if _, ok := w.server.objects[k]; ok {
		return k
	}
	return opObjKey(name)
}

// opObjKey is the simulated API server's key of the operation name, not
// an idempotency key.
func opObjKey(name string) objKey {
	return objKey{Kind: kindOperation, NamespacedName: types.NamespacedName{Namespace: Namespace, Name: name}}
}

// toolObjKey is the simulated API server's key of the Tool name, not the
// idempotency key sent to a tool (protocol.Scope.ToolKey).
func toolObjKey(name string) objKey {
	return objKey{Kind: kindTool, NamespacedName: types.NamespacedName{Namespace: Namespace, Name: name}}
}

func (w *World) inReview() []string {
	var out []string
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		if op.Status.State == v1.StateNeedsReview && op.DeletionTimestamp.IsZero() {
			out = append(out, op.Name)
		}
	}
	return out
}

// Apply carries out an action, if it still applies (a replay with actions
// left out may find it does not), and checks the invariants after it.
func (w *World) Apply(a Action) {
	w.step++
	w.draws = newDraws(a.Sub, w.opts.KeyedDraws)
	line := w.describe(a)
	if line == "" {
		return
	}
	w.story = append(w.story, fmt.Sprintf("%5d %s  %s", w.step, w.clock.Now().Sub(start).Round(time.Millisecond), line))
	var m *Manager
	if a.Manager >= 0 && a.Manager < len(w.managers) {
		m = w.managers[a.Manager]
	}
	switch a.Kind {
	case Reconcile:
		w.start(m, request{a.Ctrl, types.NamespacedName{Namespace: Namespace, Name: a.Name}})
	case Resume:
		w.resume(m.parked[request{a.Ctrl, types.NamespacedName{Namespace: Namespace, Name: a.Name}}])
	case Sync:
		m.cache.Sync(int(a.N))
	case Relist:
		m.cache.Relist()
	case Tick:
		w.clock.Advance(time.Duration(a.N))
	case Crash:
		// The old incarnation's frozen passes are dead: each ends at its
		// next call, having sent nothing more.
		parked := m.parked
		m.incarnation++
		for _, r := range sortedRequests(parked) {
			w.resume(parked[r])
		}
		m.cutOff = false
		m.boot()
	case Cut:
		m.cutOff = true
	case Reconnect:
		m.cutOff = false
	case Collect:
		// kube-controller-manager's garbage collector and namespace
		// controller look at once.
		if w.clearingStory() != "" {
			w.clearNext()
		}
		w.server.CollectOrphans()
	case Apply, ApplyOther:
		w.apply(a)
	case FailStep:
		w.failStep(a.Name)
	case Reapply:
		w.reapply(w.operationManifest(a.Name))
	case Delete:
		if o, ok := w.server.objects[w.manifestKey(a.Name)]; ok {
			must(w.server.Delete(o, nil))
		}
	case Replace:
		w.replace(a.Name)
	case DeleteNamespace:
		w.deleteNamespace()
	case EditTool:
		w.editTool(a.Name, a.N)
	case EditTTL:
		w.editTTL(a.Name, a.N)
	case Resolve, ResolveInGit:
		w.resolve(a.Name, a.N, a.Kind == ResolveInGit)
	case ResolveSaga:
		w.resolveSaga(a.Name)
	case Approve:
		w.approve(a.Name)
	case Quiet:
		w.settle()
	case Call:
		w.call(a)
	case Stop, WriteHeld, Start:
		w.applyStop(a, m)
	default:
		w.applyBrake(a)
	}
	w.createReplaced()
	w.check()
}

// describe is an action as a line of the story; empty if it does not
// apply now.
func (w *World) describe(a Action) string {
	var m *Manager
	if a.Manager >= 0 && a.Manager < len(w.managers) {
		m = w.managers[a.Manager]
	}
	r := request{a.Ctrl, types.NamespacedName{Namespace: Namespace, Name: a.Name}}
	switch a.Kind {
	case Reconcile:
		if _, queued := m.queue[r]; !queued || m.halted() {
			return ""
		}
		if _, busy := m.parked[r]; busy {
			return ""
		}
		return fmt.Sprintf("manager %s reconciles %s", m.Name, r)
	case Resume:
		pr, ok := m.parked[r]
		if !ok {
			return ""
		}
		return fmt.Sprintf("manager %s wakes up in its pass of %s, %s", m.Name, r, pr.point)
	case Sync:
		if m.cache.Behind() == 0 {
			return ""
		}
		return fmt.Sprintf("manager %s's cache catches up by %d of %d changes", m.Name, min(int(a.N), m.cache.Behind()), m.cache.Behind())
	case Relist:
		if m.cache.Behind() == 0 {
			return ""
		}
		return fmt.Sprintf("manager %s's watch expired: its cache lists again, and takes %d changes as they stand now",
			m.Name, m.cache.Behind())
	case Tick:
		return fmt.Sprintf("the clock moves %s", time.Duration(a.N))
	case Apply, ApplyOther, Reapply, Delete, Replace, FailStep, DeleteNamespace, EditTool, EditTTL, Quiet, Resolve, ResolveInGit,
		ResolveSaga, Approve:
		return w.describePerson(a)
	case Stop, WriteHeld, Start:
		return w.describeStop(a, m)
	case SuspendTool, ResumeTool, SuspendOperation, ResumeOperation, Cancel, Uncancel:
		return w.describeBrake(a)
	case Crash:
		if m.down() {
			return ""
		}
		return fmt.Sprintf("manager %s crashes and restarts as %s-%d", m.Name, m.Name, m.incarnation+1)
	case Cut:
		if m.cutOff {
			return ""
		}
		return fmt.Sprintf("manager %s is cut off from the API server", m.Name)
	case Reconnect:
		if !m.cutOff {
			return ""
		}
		return fmt.Sprintf("manager %s reaches the API server again", m.Name)
	case Call:
		return w.describeCall(a)
	case Collect:
		return strings.Join(slices.DeleteFunc([]string{w.clearingStory(), collectStory(w.server.Orphans())},
			func(s string) bool { return s == "" }), "; ")
	}
	return ""
}

// describePerson is describe for what people do, and for the quiet phase.
func (w *World) describePerson(a Action) string {
	switch a.Kind {
	case Apply:
		if w.exists(a.Name) {
			return ""
		}
		return fmt.Sprintf("a person applies the manifest of %s", a.Name)
	case ApplyOther, FailStep:
		return w.describeMore(a)
	case Replace:
		mf, other := w.replacement(a.Name)
		if mf == nil || !w.exists(a.Name) {
			return ""
		}
		return fmt.Sprintf("a person replaces %s (kubectl replace --force): deletes it, and creates it from %s "+
			"(%s of tool %s, for %s) the moment it is gone", a.Name, manifestName(other), mf.Spec.Operation,
			mf.Spec.ToolRef.Name, refOf(mf))
	case Reapply:
		mf := w.operationManifest(a.Name)
		if mf == nil {
			return ""
		}
		if _, changes := w.reapplies(mf); !changes {
			return ""
		}
		return fmt.Sprintf("GitOps applies the manifest of %s again, as its repository has it", a.Name)
	case Delete:
		if !w.exists(a.Name) {
			return ""
		}
		return fmt.Sprintf("a person deletes %s", a.Name)
	case DeleteNamespace:
		if w.namespaceState() != namespaceActive {
			return ""
		}
		return fmt.Sprintf("a person deletes namespace %s, with everything in it", Namespace)
	case EditTool:
		if _, ok := w.server.objects[toolObjKey(a.Name)]; !ok {
			return ""
		}
		return fmt.Sprintf("a person edits tool %s: %s", a.Name, toolEdits[a.N%int64(len(toolEdits))])
	case EditTTL:
		if !w.exists(a.Name) {
			return ""
		}
		return fmt.Sprintf("a person %s of %s", ttlEdits[a.N%int64(len(ttlEdits))].say, a.Name)
	case Quiet:
		return "the faults stop: no more freezes, every request arrives and is answered"
	case Resolve, ResolveInGit:
		op := &v1.SideEffectOperation{}
		if w.server.Get(opObjKey(a.Name), op) != nil || op.Status.State != v1.StateNeedsReview {
			return ""
		}
		if a.Kind == ResolveInGit {
			if w.operationManifest(a.Name) == nil {
				return ""
			}
			return fmt.Sprintf("a person looks at the tool and resolves %s in its manifest, which GitOps applies "+
				"(the repository keeps the resolution)", a.Name)
		}
		return fmt.Sprintf("a person looks at the tool and resolves %s", a.Name)
	case ResolveSaga, Approve:
		s := &v1.Saga{}
		if w.server.Get(w.manifestKey(a.Name), s) != nil || s.Status.CurrentStep == "" {
			return ""
		}
		if a.Kind == Approve {
			return fmt.Sprintf("a person approves step %s of saga %s", s.Status.CurrentStep, a.Name)
		}
		if s.Status.State != v1.StateNeedsReview {
			return ""
		}
		return fmt.Sprintf("a person looks at the tools and resolves step %s of saga %s", s.Status.CurrentStep, a.Name)
	}
	return ""
}

// describeMore is describePerson for what people do in the world of
// Options.People.
func (w *World) describeMore(a Action) string {
	if a.Kind == ApplyOther {
		mf := w.others[a.Name]
		if mf == nil || w.exists(a.Name) {
			return ""
		}
		return fmt.Sprintf("a person applies another manifest under the name %s: %s of tool %s, for %s",
			a.Name, mf.Spec.Operation, mf.Spec.ToolRef.Name, refOf(mf))
	}
	op := &v1.SideEffectOperation{}
	if w.server.Get(opObjKey(a.Name), op) != nil || op.Status.State != v1.StateNeedsReview ||
		metav1.GetControllerOfNoCopy(op) == nil {
		return ""
	}
	return fmt.Sprintf("a person fails step operation %s, in review, to stop it", a.Name)
}

var toolEdits = []string{"the other endpoint (/v1 ↔ /v2)", "the other mode it supports", "its declared delays", "back as it was"}

// apply is an Apply or an ApplyOther: GitOps creates a namespace that is
// gone before anything in it.
func (w *World) apply(a Action) {
	if w.namespaceState() == namespaceGone {
		w.recreateNamespace()
	}
	if a.Kind == ApplyOther {
		w.create(w.others[a.Name], true)
		return
	}
	for _, mf := range w.manifests {
		if mf.GetName() == a.Name {
			w.create(mf, false)
		}
	}
}

// create applies a manifest that creates its object; other says it is the
// name's other manifest (World.others), which GitOps applies to the object
// from then on.
func (w *World) create(mf client.Object, other bool) {
	if err := w.server.Create(mf.DeepCopyObject().(client.Object)); err != nil {
		w.note("the apply fails: %v", err)
		return
	}
	if _, ok := mf.(*v1.SideEffectOperation); ok {
		w.live[mf.GetName()] = other
	}
}

// replaceable are the operations of the workload's manifests a person may
// replace: every one that stands, not being deleted.
func (w *World) replaceable() []string {
	var out []string
	for _, mf := range w.manifests {
		if _, ok := mf.(*v1.SideEffectOperation); !ok {
			continue
		}
		if o, ok := w.server.objects[opObjKey(mf.GetName())]; ok && o.GetDeletionTimestamp().IsZero() {
			out = append(out, mf.GetName())
		}
	}
	return out
}

// started are those of names whose operation is Started: a call is under
// way, or the worker that claimed it stopped.
func (w *World) started(names []string) []string {
	var out []string
	for _, name := range names {
		if o, ok := w.server.objects[opObjKey(name)]; ok && o.(*v1.SideEffectOperation).Status.State == v1.StateStarted {
			out = append(out, name)
		}
	}
	return out
}

// replacement is the manifest a replace of name creates, and whether it is
// the name's other one (World.others): the one its object was not created
// from, if the name has two (a repository edited, so that the name stands
// for another effect now), else the same.
func (w *World) replacement(name string) (*v1.SideEffectOperation, bool) {
	_, has := w.others[name]
	other := has && !w.live[name]
	return w.manifestOf(name, other), other
}

// manifestOf is the name's other manifest (World.others), or its first.
func (w *World) manifestOf(name string, other bool) *v1.SideEffectOperation {
	if other {
		return w.others[name]
	}
	for _, mf := range w.manifests {
		if m, ok := mf.(*v1.SideEffectOperation); ok && m.Name == name {
			return m
		}
	}
	return nil
}

func manifestName(other bool) string {
	if other {
		return "its other manifest"
	}
	return "its manifest"
}

// replace is kubectl replace --force: it deletes the operation, waits
// until it is gone (its release done), and creates it again from the
// manifest it has now (createReplaced). The old object's passes, frozen
// or reading a cache that lags, then meet another object of its name.
func (w *World) replace(name string) {
	_, other := w.replacement(name)
	w.replacing[name] = other
	if o, ok := w.server.objects[opObjKey(name)]; ok {
		must(w.server.Delete(o, nil))
	}
}

// createReplaced creates the names being replaced whose objects are gone,
// as kubectl replace --force does once its delete has finished: in the
// step the object went. A namespace that is going refuses the create.
func (w *World) createReplaced() {
	for _, name := range slices.Sorted(maps.Keys(w.replacing)) {
		if w.exists(name) {
			continue
		}
		other := w.replacing[name]
		delete(w.replacing, name)
		mf := w.manifestOf(name, other)
		if w.namespaceState() != namespaceActive || !w.mayApply(mf) {
			w.note("the replace of %s creates nothing: its namespace or its scope's lifetime is gone", name)
			continue
		}
		w.note("%s is gone: kubectl creates it again from %s", name, manifestName(other))
		w.create(mf, other)
	}
}

// failStep is a person's Fail of a saga step's operation in review,
// through the code kubectl once resolve runs: they stop it, whatever the
// tool shows. It is a decision, not a proof that nothing happened (I11).
func (w *World) failStep(name string) {
	op := &v1.SideEffectOperation{}
	must(w.server.Get(opObjKey(name), op))
	res := v1.Resolution{Action: v1.ResolutionFail, By: "carol", Reason: fmt.Sprintf("stopped at step %d", w.step)}
	if err := review.ResolveOperation(context.Background(), w.people, op, res); err != nil {
		w.note("the resolution fails: %v", err)
		return
	}
	w.failed[name] = op.UID
}

// editTool changes a Tool object within what the simulated tool really
// does: an endpoint it serves, a mode it supports, a lookup delay no
// shorter and a replay window no longer than its own.
func (w *World) editTool(name string, edit int64) {
	t := w.tools[name]
	cr := &v1.Tool{}
	must(w.server.Get(toolObjKey(name), cr))
	spec := &cr.Spec
	switch edit % int64(len(toolEdits)) {
	case 0:
		from, to := "/v1/", "/v2/"
		if spec.Operations[0].Path == "/v2/charges" {
			from, to = to, from
		}
		for i := range spec.Operations {
			op := &spec.Operations[i]
			op.Path = replace(op.Path, from, to)
			if op.Lookup != nil {
				op.Lookup.Path = replace(op.Lookup.Path, from, to)
			}
		}
	case 1:
		modes := []v1.IdempotencyMode{v1.IdempotencyNone}
		if t.Window > 0 {
			modes = append(modes, v1.IdempotencyNative)
		}
		if t.Lookup {
			modes = append(modes, v1.IdempotencyLookup)
		}
		for i, m := range modes {
			if m == spec.Idempotency.Mode {
				spec.Idempotency.Mode = modes[(i+1)%len(modes)]
				break
			}
		}
	case 2:
		if t.Lookup {
			spec.Idempotency.LookupDelay = &metav1.Duration{Duration: t.MaxLag * time.Duration(1+w.draws.IntN("lookup delay|"+name, 3))}
		}
		if t.Window > 0 {
			spec.Idempotency.DedupeWindow = &metav1.Duration{Duration: t.Window / time.Duration(1+w.draws.IntN("dedupe window|"+name, 2))}
		}
	default:
		// Back as it was described, but for a suspend, which the person
		// who edits leaves alone (brakes.go).
		suspend := cr.Spec.Suspend
		cr.Spec = toolCR(t).Spec
		cr.Spec.Suspend = suspend
	}
	if err := w.server.Update(cr, false); err != nil {
		w.note("the edit fails: %v", err)
	}
}

// ttlEdits are what a person may write into ttlSecondsAfterFinished: none,
// at once, a minute, an hour.
var ttlEdits = []struct {
	say     string
	seconds *int32
}{
	{"removes the TTL", nil},
	{"sets a TTL of 0 s", new(int32(0))},
	{"sets a TTL of 60 s", new(int32(60))},
	{"sets a TTL of 3600 s", new(int32(3600))},
}

// editTTL writes ttlSecondsAfterFinished of an operation or a saga, as
// kubectl edit would: an update of the spec, the generation moves.
func (w *World) editTTL(name string, edit int64) {
	key := w.manifestKey(name)
	ttl := ttlEdits[edit%int64(len(ttlEdits))].seconds
	var obj client.Object
	if key.Kind == kindOperation {
		op := &v1.SideEffectOperation{}
		must(w.server.Get(key, op))
		op.Spec.TTLSecondsAfterFinished = ttl
		obj = op
	} else {
		s := &v1.Saga{}
		must(w.server.Get(key, s))
		s.Spec.TTLSecondsAfterFinished = ttl
		obj = s
	}
	if err := w.server.Update(obj, false); err != nil {
		w.note("the edit fails: %v", err)
	}
}

func replace(s, from, to string) string {
	if len(s) >= len(from) && s[:len(from)] == from {
		return to + s[len(from):]
	}
	return s
}

// resolve is a person's review: they look at the tool as it shows itself
// (a tool that can be searched shows an effect once it is visible there;
// one that cannot shows nothing) and mark the operation committed with the
// effect they find, or, finding none, allow a retry or fail it. A retry is
// the person's word that nothing happened: an effect it leads to is theirs
// (Effect.Licensed), not Once's. inGit: the resolution is also written
// into the operation's manifest, which keeps it.
func (w *World) resolve(name string, choice int64, inGit bool) {
	op := &v1.SideEffectOperation{}
	must(w.server.Get(opObjKey(name), op))
	res := &v1.Resolution{By: "alice", Reason: fmt.Sprintf("review at step %d", w.step)}
	var seen []*Effect
	for _, e := range w.current(refOf(op)) {
		if w.tools[e.Tool].Lookup && !w.clock.Now().Before(e.Visible) {
			seen = append(seen, e)
		}
	}
	switch {
	case len(seen) > 0:
		res.Action, res.ExternalObjectID = v1.ResolutionMarkCommitted, seen[0].ID
	case choice < 7:
		res.Action = v1.ResolutionRetry
		// The person vouches that nothing happened: an effect that did is
		// theirs to answer for, not Once's.
		for _, e := range w.current(refOf(op)) {
			e.Vouched = true
		}
	default:
		res.Action = v1.ResolutionFail
	}
	w.note("alice finds %d effects for %s and writes %s", len(seen), refOf(op), res.Action)
	if inGit {
		// Into the repository, which keeps it; GitOps applies it, past
		// kubectl once's checks.
		mf := w.operationManifest(name)
		mf.Spec.Resolution = res.DeepCopy()
		if !w.reapply(mf) {
			return
		}
	} else if err := review.ResolveOperation(context.Background(), w.people, op, *res); err != nil {
		// The same code path as kubectl once resolve's.
		w.note("the resolution fails: %v", err)
		return
	}
	if res.Action == v1.ResolutionRetry {
		w.licenses[inEpoch(refOf(op), w.epochs[refOf(op)])]++
	}
	if res.Action == v1.ResolutionMarkCommitted && w.opts.People {
		w.undoByHand(seen[1:])
	}
}

// undoByHand is a person who saw several effects of one operation at its
// tool (a Retry of theirs let a second one through), marked the first
// its outcome, and undoes the others by hand: Once knows only of the one
// they named, and a saga compensates only that one. Stories found before
// Options.People replay without it.
func (w *World) undoByHand(extra []*Effect) {
	for _, e := range extra {
		undo := w.recordEffect(w.tools[e.Tool], e.Endpoint, "", e.Ref+byHandSuffix)
		undo.Target = e.ID
		w.note("alice undoes %s by hand", e.ID)
	}
}

// operationManifest is the manifest of the operation name, nil if there
// is none: the one its object was last created from.
func (w *World) operationManifest(name string) *v1.SideEffectOperation {
	if w.live[name] {
		return w.others[name]
	}
	for _, mf := range w.manifests {
		if m, ok := mf.(*v1.SideEffectOperation); ok && m.Name == name {
			return m
		}
	}
	return nil
}

// reapplies reports whether applying mf again would change its operation,
// which exists, and returns the operation as it reads: whether a field the
// manifest sets, of those that may change (spec.resolution and
// ttlSecondsAfterFinished), differs from the object's. An apply leaves the
// fields it does not set as they are (kubectl apply, server-side apply),
// and the user admission records in a resolution is the API server's, not
// the manifest's.
func (w *World) reapplies(mf *v1.SideEffectOperation) (*v1.SideEffectOperation, bool) {
	op := &v1.SideEffectOperation{}
	if w.server.Get(opObjKey(mf.Name), op) != nil {
		return nil, false
	}
	r, ttl := mf.Spec.Resolution, mf.Spec.TTLSecondsAfterFinished
	return op, r != nil && (op.Spec.Resolution == nil || !protocol.SameResolution(*r, *op.Spec.Resolution)) ||
		ttl != nil && (op.Spec.TTLSecondsAfterFinished == nil || *ttl != *op.Spec.TTLSecondsAfterFinished)
}

// reapply is GitOps applying mf to its operation, which exists: the fields
// reapplies compares become the manifest's. The API server refuses a
// resolution outside NeedsReview: the sync fails, and the GitOps tool
// shows it; nothing changes. It reports whether the object changed.
func (w *World) reapply(mf *v1.SideEffectOperation) bool {
	op, changes := w.reapplies(mf)
	if !changes {
		return false
	}
	if r := mf.Spec.Resolution; r != nil {
		op.Spec.Resolution = r.DeepCopy()
	}
	if ttl := mf.Spec.TTLSecondsAfterFinished; ttl != nil {
		op.Spec.TTLSecondsAfterFinished = new(*ttl)
	}
	if err := w.server.Update(op, false); err != nil {
		w.note("the sync fails: %v", err)
		return false
	}
	return true
}

// current are the effects of a scope since it was last forgotten.
func (w *World) current(ref string) []*Effect {
	var out []*Effect
	for _, e := range sortedEffects(w.ledger, ref) {
		if e.Epoch == w.epochs[ref] {
			out = append(out, e)
		}
	}
	return out
}

// forgotten reports whether a scope of a manifest was forgotten once: its
// retention passed after an effect.
func (w *World) forgotten(mf client.Object) bool {
	var refs []string
	switch o := mf.(type) {
	case *v1.SideEffectOperation:
		refs = append(refs, refOf(o))
	case *v1.Saga:
		for _, s := range o.Spec.Steps {
			refs = append(refs, o.Name+"/"+s.Name, o.Name+"/"+s.Name+"/undo")
		}
	}
	for _, r := range refs {
		if w.epochs[r] > 0 {
			return true
		}
	}
	return false
}

// byHandSuffix marks the ref of an effect a person made by hand.
const byHandSuffix = "/by-hand"

// sagasWaiting are the sagas that wait for a person: in review, or for an
// approval.
func (w *World) sagasWaiting() []*v1.Saga {
	var out []*v1.Saga
	for _, o := range w.server.List(kindSaga, Namespace) {
		s := o.(*v1.Saga)
		ready := meta.FindStatusCondition(s.Status.Conditions, v1.ConditionReady)
		waiting := s.Status.State == v1.StateNeedsReview ||
			(ready != nil && ready.Reason == saga.ReasonWaitingForApproval)
		if waiting && s.DeletionTimestamp.IsZero() && s.Status.CurrentStep != "" {
			out = append(out, s)
		}
	}
	return out
}

// approve is a person's approval of the step a saga waits on, through the
// code kubectl once approve runs.
func (w *World) approve(name string) {
	s := &v1.Saga{}
	must(w.server.Get(w.manifestKey(name), s))
	a := v1.SagaApproval{Step: s.Status.CurrentStep, By: "bob", Reason: fmt.Sprintf("looked at step %d", w.step)}
	if err := review.ApproveStep(context.Background(), w.people, s, a); err != nil {
		w.note("the approval fails: %v", err)
	}
}

// resolveSaga is a person's decision on the step a saga in review waits
// on: they look at the tool, undo by hand every effect of the step they
// can see there, and mark the step compensated. What they cannot see they
// vouch for: it stands on their word (I11).
func (w *World) resolveSaga(name string) {
	s := &v1.Saga{}
	must(w.server.Get(w.manifestKey(name), s))
	step := s.Status.CurrentStep
	ref := name + "/" + step
	for _, e := range w.standing(ref) {
		if !w.tools[e.Tool].Lookup || w.clock.Now().Before(e.Visible) {
			e.Vouched = true
			continue
		}
		undo := w.recordEffect(w.tools[e.Tool], e.Endpoint, "", ref+byHandSuffix)
		undo.Target = e.ID
		w.note("alice undoes %s by hand", e.ID)
	}
	r := v1.SagaResolution{Step: step, Action: v1.SagaMarkCompensated, By: "alice", Reason: fmt.Sprintf("review at step %d", w.step)}
	if err := review.ResolveSaga(context.Background(), w.people, s, r); err != nil {
		w.note("the resolution fails: %v", err)
	}
}

// The states of the workload's namespace.
const (
	namespaceActive = iota
	namespaceTerminating
	namespaceGone
)

func (w *World) namespaceState() int {
	ns, ok := w.server.objects[namespaceKey(Namespace)]
	switch {
	case !ok:
		return namespaceGone
	case !ns.GetDeletionTimestamp().IsZero():
		return namespaceTerminating
	}
	return namespaceActive
}

// deleteNamespace is kubectl delete namespace: every object in it goes,
// its scope records with them. A person who does that forgets every key
// of the namespace on purpose, with what calls in flight learn after it:
// an effect made in that namespace's lifetime is not a record's to
// outlive (I7), and a key applied again in a new namespace of the same
// name starts a new lifetime.
func (w *World) deleteNamespace() {
	w.wiped[w.namespaces] = true
	ns := w.server.objects[namespaceKey(Namespace)]
	if !w.opts.NamespaceByKind {
		must(w.server.Delete(ns, nil))
		return
	}
	if !ns.GetDeletionTimestamp().IsZero() {
		return
	}
	w.server.Terminate(Namespace)
	// The namespace controller lists the resource types from discovery and
	// deletes them in the order it lists them, which no one fixes.
	kinds := w.server.Kinds(Namespace)
	w.clearing = w.clearing[:0]
	for len(kinds) > 0 {
		i := w.draws.IntN("namespace order", len(kinds))
		w.clearing = append(w.clearing, kinds[i])
		kinds = slices.Delete(kinds, i, i+1)
	}
}

// clearNext is the namespace controller's delete of the next resource
// type of a terminating namespace; when it has been through them all, it
// lists again and deletes what is left (an object whose type it had not
// listed), as its next pass does.
func (w *World) clearNext() {
	if w.namespaceState() != namespaceTerminating {
		w.clearing = nil
		return
	}
	kind := ""
	if len(w.clearing) > 0 {
		kind, w.clearing = w.clearing[0], w.clearing[1:]
	}
	w.server.DeleteKind(Namespace, kind)
}

// clearingStory tells what the namespace controller deletes next; empty
// when it has nothing to do.
func (w *World) clearingStory() string {
	if w.namespaceState() != namespaceTerminating || !w.opts.NamespaceByKind {
		return ""
	}
	if len(w.clearing) > 0 {
		return fmt.Sprintf("the namespace controller deletes every %s in %s", w.clearing[0], Namespace)
	}
	if w.undeleted() {
		return fmt.Sprintf("the namespace controller deletes what is left in %s", Namespace)
	}
	return ""
}

// undeleted reports whether the workload's namespace holds an object not
// yet marked deleted.
func (w *World) undeleted() bool {
	for k, o := range w.server.objects {
		if k.Namespace == Namespace && o.GetDeletionTimestamp().IsZero() {
			return true
		}
	}
	return false
}

// recreateNamespace is what GitOps applies before anything in a namespace
// that is gone: the namespace, and its tools as they were first described,
// the subscribers' sink among them.
func (w *World) recreateNamespace() {
	must(w.server.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}))
	w.namespaces++
	for _, name := range []string{toolChat, toolDesk, toolPay} {
		must(w.server.Create(toolCR(w.tools[name])))
	}
	must(w.server.Create(sinkCR()))
	w.note("GitOps creates namespace %s again, with its tools and its sink", Namespace)
}

// collectStory tells what the garbage collector deletes; empty when it
// finds nothing.
func collectStory(orphans []objKey) string {
	if len(orphans) == 0 {
		return ""
	}
	names := make([]string, len(orphans))
	for i, k := range orphans {
		names[i] = k.Name
	}
	return fmt.Sprintf("the garbage collector deletes %s, whose owner is gone", strings.Join(names, ", "))
}
