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
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
)

// Result is what a run found.
type Result struct {
	// Options are the run's, with what a swarm run drew.
	Options    Options
	Seed       uint64
	Steps      int
	Violations []Violation
	// Schedule is every action the run took, quiet phase included; it
	// replays the run bit for bit.
	Schedule []Action
	// Story is the run told step by step.
	Story []string
}

// Failed reports whether an invariant failed.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Run draws and runs the schedule of opts.Seed: opts.Steps actions with
// faults, then a quiet phase without them (every manager connected and
// awake, tools answering), which checks liveness.
func Run(opts Options) Result {
	opts = opts.Swarmed()
	w := NewWorld(opts)
	defer w.Close()
	rng := rand.New(rand.NewPCG(opts.Seed, 1))
	schedule := make([]Action, 0, opts.Steps+1)
	for range opts.Steps {
		a := w.Plan(rng)
		schedule = append(schedule, a)
		w.Apply(a)
	}
	schedule = append(schedule, w.quiet(rng)...)
	return Result{Options: opts, Seed: opts.Seed, Steps: w.step, Violations: w.violations, Schedule: schedule, Story: w.story}
}

// Replay runs a schedule as it is, skipping actions that no longer apply.
func Replay(opts Options, schedule []Action) Result {
	opts = opts.Swarmed()
	w := NewWorld(opts)
	defer w.Close()
	for _, a := range schedule {
		w.Apply(a)
	}
	return Result{Options: opts, Seed: opts.Seed, Steps: w.step, Violations: w.violations, Schedule: schedule, Story: w.story}
}

// quietLimit is how long the quiet phase may take for every operation to
// reach a terminal state or NeedsReview: ten minutes, plus the longest
// declared delay of the workload (the default backoff cap of five
// minutes, and a lookup delay of at most a minute).
const quietLimit = 10*time.Minute + v1.DefaultMaxBackoff + time.Minute

// restless is how many passes of one object, with no time passing, the
// quiet phase takes for a loop: a settled object takes one or two per
// event it sees.
const restless = 200

// quiet ends the faults and gives everything its time to settle: one
// action, so that a shrunk schedule keeps it whole.
func (w *World) quiet(rng *rand.Rand) []Action {
	a := Action{Kind: Quiet, Sub: rng.Uint64()}
	w.Apply(a)
	return []Action{a}
}

// settle is the quiet phase: frozen passes go on, managers reach the API
// server, tools answer, caches catch up; then only reconciles and the
// clock move, until every operation and saga has settled or quietLimit has
// passed (I13). Each of its moves is a step of the story.
func (w *World) settle() {
	w.opts.FaultRate, w.opts.FreezeRate = 0, 0
	inner := func(line string) {
		w.step++
		w.story = append(w.story, fmt.Sprintf("%5d %s  %s", w.step, w.clock.Now().Sub(start).Round(time.Millisecond), line))
	}
	for _, m := range w.managers {
		for _, r := range sortedRequests(m.parked) {
			inner(fmt.Sprintf("manager %s wakes up in its pass of %s", m.Name, r))
			w.resume(m.parked[r])
		}
		m.cutOff = false
	}
	w.settleStops(inner)
	w.endIncidents(inner)
	w.createReplaced()
	if line := collectStory(w.server.Orphans()); line != "" {
		// The collector looks again, as it does within seconds once
		// nothing stalls it.
		inner(line)
		w.server.CollectOrphans()
	}
	w.drain(inner, w.clock.Now().Add(quietLimit), true)
	if left := w.unsettled(); len(left) > 0 {
		w.fail(InvLiveness, strings.Join(left, ","), "still unsettled %s after the faults stopped", quietLimit)
	}
	w.checkDelivered()
	w.checkAnnounced()
	w.callAgainAll()
	if len(w.violations) == 0 {
		w.rest(inner)
	}
}

// restPeriod is how long the world rests once everything has settled, and
// restWrites how many writes of one object that rest allows: a TTL's
// delete, a release and a record's collection take a few. A pass that
// waits, then writes and waits again, writes without end, if slowly.
const (
	restPeriod = time.Hour
	restWrites = 10
)

// rest lets a settled world run for restPeriod, only reconciles and the
// clock moving, and fails an object written more than restWrites times
// meanwhile (I13): a loop with a delay between its writes, which the
// quiet phase's count of passes at one instant does not see. It waits
// first for what the callers' last calls started.
func (w *World) rest(inner func(string)) {
	// What the callers' last calls started settles first.
	w.drain(inner, w.clock.Now().Add(quietLimit), true)
	if left := w.unsettled(); len(left) > 0 {
		w.fail(InvLiveness, strings.Join(left, ","), "still unsettled %s after the callers' last calls", quietLimit)
		return
	}
	writes := map[objKey]int{}
	w.server.Wrote = func(k objKey) { writes[k]++ }
	defer func() { w.server.Wrote = nil }()
	w.drain(inner, w.clock.Now().Add(restPeriod), false)
	keys := make([]objKey, 0, len(writes))
	for k, n := range writes {
		if n > restWrites {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b objKey) int { return strings.Compare(a.String(), b.String()) })
	for _, k := range keys {
		w.fail(InvLiveness, k.String(), "written %d times in the %s after everything settled: a pass that waits, then writes, wakes the next",
			writes[k], restPeriod)
	}
}

// drain runs reconciles, collectors and the clock until deadline; with
// untilSettled, only until every operation and saga has settled. It
// stops at a loop it finds.
func (w *World) drain(inner func(string), deadline time.Time, untilSettled bool) {
	// still counts each object's passes since nothing was ready (then the
	// clock moves, or a collector looks): a controller whose pass wakes
	// its next one at once (a write that only moves its own timestamps)
	// would call the API server without end.
	still := map[request]int{}
	for moves := 0; w.clock.Now().Before(deadline) && moves < 20000; moves++ {
		progressed := false
		for _, m := range w.managers {
			m.cache.Sync(m.cache.Behind())
			for _, r := range w.ready(m) {
				inner(fmt.Sprintf("manager %s reconciles %s", m.Name, r))
				w.start(m, r)
				w.createReplaced()
				w.check()
				progressed = true
				if still[r]++; still[r] == restless {
					w.fail(InvLiveness, r.String(), "%d passes while the clock stood still: each pass wakes the next", restless)
					return
				}
			}
		}
		if progressed {
			continue
		}
		clear(still)
		if line := collectStory(w.server.Orphans()); line != "" {
			inner(line)
			w.server.CollectOrphans()
			continue
		}
		if line := w.clearingStory(); line != "" {
			// The namespace controller goes on, as it does within seconds
			// once nothing stalls it.
			inner(line)
			w.clearNext()
			continue
		}
		if untilSettled && len(w.unsettled()) == 0 && !w.announcing() {
			break
		}
		d := w.untilAny()
		if d <= 0 || w.clock.Now().Add(d).After(deadline) {
			d = max(time.Second, deadline.Sub(w.clock.Now()))
		}
		inner(fmt.Sprintf("the clock moves %s", d))
		w.clock.Advance(d)
	}
}

// unsettled are the operations and sagas neither terminal nor waiting
// for a person (NeedsReview; Stalled: a duplicate of an operation in
// review, an operation whose tool is missing; a step's approval).
func (w *World) unsettled() []string {
	var out []string
	if w.namespaceState() == namespaceTerminating {
		var left []string
		for k := range w.server.objects {
			if k.Namespace == Namespace {
				left = append(left, k.String())
			}
		}
		slices.Sort(left)
		out = append(out, fmt.Sprintf("namespace %s, terminating, holds %s", Namespace, strings.Join(left, " ")))
	}
	for _, o := range w.server.peek(kindSaga) {
		s := o.(*v1.Saga)
		ready := meta.FindStatusCondition(s.Status.Conditions, v1.ConditionReady)
		approval := ready != nil && ready.Reason == saga.ReasonWaitingForApproval
		if !s.Status.State.IsTerminal() && s.Status.State != v1.StateNeedsReview && !approval {
			out = append(out, fmt.Sprintf("saga %s (%s)", s.Name, s.Status.State.OrPlanned()))
		}
	}
	for _, o := range w.server.peek(kindSaga) {
		s := o.(*v1.Saga)
		if s.Status.State.IsTerminal() && w.expired(s.Spec.TTLSecondsAfterFinished, s.Status.CompletionTime, s.Status.Conditions) {
			out = append(out, fmt.Sprintf("saga %s (its TTL ran out)", s.Name))
		}
	}
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		switch {
		case !op.Status.State.IsTerminal():
			if op.Status.State != v1.StateNeedsReview && !meta.IsStatusConditionTrue(op.Status.Conditions, v1.ConditionStalled) {
				out = append(out, fmt.Sprintf("%s (%s)", op.Name, op.Status.State.OrPlanned()))
			}
		case !op.DeletionTimestamp.IsZero():
			out = append(out, fmt.Sprintf("%s (deleted, its finalizer not released)", op.Name))
		case op.Status.Attempts > 0 && op.Status.DuplicateOf == "" && !slices.Contains(op.Finalizers, v1.FinalizerRecord):
			out = append(out, fmt.Sprintf("%s (ended without the finalizer that keeps its outcome)", op.Name))
		case metav1.GetControllerOfNoCopy(op) == nil &&
			w.expired(op.Spec.TTLSecondsAfterFinished, op.Status.CompletionTime, op.Status.Conditions):
			out = append(out, fmt.Sprintf("%s (its TTL ran out)", op.Name))
		}
	}
	return out
}

// expired reports whether an ended object's ttlSecondsAfterFinished ran
// out: it ended (its completion time, or its Ready condition's last
// transition) at least that long ago.
func (w *World) expired(ttl *int32, completion *metav1.Time, conditions []metav1.Condition) bool {
	if ttl == nil {
		return false
	}
	ended := completion
	if ended == nil {
		if c := meta.FindStatusCondition(conditions, v1.ConditionReady); c != nil {
			ended = &c.LastTransitionTime
		}
	}
	return ended != nil && !w.clock.Now().Before(ended.Add(time.Duration(*ttl)*time.Second))
}

// announcing reports whether an announcement is still to be delivered.
func (w *World) announcing() bool {
	for _, kind := range []string{kindOperation, kindSaga} {
		if slices.ContainsFunc(w.server.peek(kind), pendingOutbox) {
			return true
		}
	}
	return false
}

// Close ends the passes that are still frozen, so that no goroutine of
// the world outlives it.
func (w *World) Close() {
	for _, m := range w.managers {
		parked := m.parked
		m.incarnation++
		for _, r := range sortedRequests(parked) {
			w.resume(parked[r])
		}
		m.sharder.end()
	}
}

// Shrink removes actions from a failing schedule while the same invariant
// still fails, first in large chunks, then one by one, and returns the
// shortest schedule found and its result.
func Shrink(opts Options, failing Result) Result {
	want := failing.Violations[0].Invariant
	best := failing
	fails := func(s []Action) (Result, bool) {
		r := Replay(opts, s)
		for _, v := range r.Violations {
			if v.Invariant == want {
				return r, true
			}
		}
		return r, false
	}
	// The run stopped mattering after the step that failed.
	if cut := failing.Violations[0].Step; cut < len(best.Schedule) {
		if r, ok := fails(best.Schedule[:cut]); ok {
			best = r
		}
	}
	for chunk := len(best.Schedule) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(best.Schedule); {
			try := append(append([]Action{}, best.Schedule[:i]...), best.Schedule[i+chunk:]...)
			if r, ok := fails(try); ok {
				best = r
				continue
			}
			i += chunk
		}
	}
	return best
}

// Tell is a result as a story a person can read.
func (r Result) Tell() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s; %d steps\n", r.Options.Summary(), r.Steps)
	for _, line := range r.Story {
		b.WriteString(line)
		b.WriteByte('\n')
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION %s\n", v)
	}
	return b.String()
}
