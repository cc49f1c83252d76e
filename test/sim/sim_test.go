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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestSeedsReplayBitForBit: a seed draws the same schedule and the same
// story every time, and its schedule, replayed, tells the story again: a
// failing seed reproduces, and a shrunk schedule stands for it. Seed 3 is
// a swarm run.
func TestSeedsReplayBitForBit(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		opts := DefaultOptions(seed)
		opts.Steps, opts.Swarm = 600, seed == 3
		first, second := Run(opts), Run(opts)
		if diff := cmp.Diff(first.Story, second.Story); diff != "" {
			t.Fatalf("seed %d: two runs differ (-first, +second):\n%s", seed, diff)
		}
		replayed := Replay(opts, first.Schedule)
		if diff := cmp.Diff(first.Story, replayed.Story); diff != "" {
			t.Fatalf("seed %d: the replayed schedule tells another story (-run, +replay):\n%s", seed, diff)
		}
		if len(first.Story) < opts.Steps {
			t.Errorf("seed %d: a story of %d lines for %d steps", seed, len(first.Story), opts.Steps)
		}
	}
}

// TestSwarmStoryReplays: a story saved from a swarm run keeps the rates
// and weights the run drew, and tells the run's story again.
func TestSwarmStoryReplays(t *testing.T) {
	opts := DefaultOptions(5)
	opts.Steps, opts.Swarm = 400, true
	r := Run(opts)
	path := filepath.Join(t.TempDir(), "story.json")
	if err := SaveStory(path, r.Options, r); err != nil {
		t.Fatal(err)
	}
	s, err := LoadStory(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Options.Weights == nil || s.Options.Summary() != r.Options.Summary() {
		t.Fatalf("the story keeps %q, the run drew %q", s.Options.Summary(), r.Options.Summary())
	}
	if diff := cmp.Diff(r.Story, Replay(s.Options, s.Schedule).Story); diff != "" {
		t.Fatalf("the saved story tells another story (-run, +replay):\n%s", diff)
	}
}

// TestStories replays the schedules the simulator found and shrank before
// the fixes they led to (testdata/stories): each broke an invariant on the
// code of its day, and must break none now.
func TestStories(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "stories", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no stories in testdata/stories: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			s, err := LoadStory(f)
			if err != nil {
				t.Fatal(err)
			}
			if r := Replay(s.Options, s.Schedule); r.Failed() {
				t.Errorf("found as: %s\n\nreplayed:\n%s", s.Violation, r.Tell())
			}
		})
	}
}

// huntSeeds is how many fixed seeds make test hunts over: deterministic,
// so never flaky, and within a minute on the shared CI machine.
const huntSeeds = 100

// swarmSeeds is how many of them, the last, draw their fault rates and
// the weights of their kinds of action from the seed (Options.Swarm), in
// place of the defaults: other mixes of faults and people, in the same
// time.
const swarmSeeds = 50

// lyingSeeds is how many of them it hunts again with Options.Lies.
const lyingSeeds = 30

// secondLifetimeSeeds is how many of them it hunts again with
// Options.SecondLifetimes.
const secondLifetimeSeeds = 50

// everythingSeeds is how many it hunts again with every flag, swarmed.
const everythingSeeds = 20

// TestHunt is the bounded hunt make test runs: seeds 1 to huntSeeds, each
// of DefaultOptions' steps and its quiet phase, the last swarmSeeds of
// them swarm runs, every invariant checked after every step. A failure prints the shrunk story; make sim hunts
// further, over random seeds.
func TestHunt(t *testing.T) {
	if testing.Short() {
		t.Skip("the hunt runs in make test, not with -short")
	}
	began, steps := time.Now(), 0
	for seed := uint64(1); seed <= huntSeeds; seed++ {
		opts := DefaultOptions(seed)
		if opts.Swarm = seed > huntSeeds-swarmSeeds; opts.Swarm {
			// A swarm run draws its rate of the API server's faults.
			opts.APIFaultRate = 0.03
		}
		r := Run(opts)
		steps += r.Steps
		if r.Failed() {
			t.Fatalf("%s: %s\n\nshrunk:\n%s", r.Options.Summary(), r.Violations[0], Shrink(opts, r).Tell())
		}
	}
	// Then the world where a searchable tool's index lags past its
	// declared delay, with managers that freeze more often: Once cannot
	// prove what the tool hides, but must stop saying "no effect" once an
	// answer names it.
	for seed := uint64(1); seed <= lyingSeeds; seed++ {
		opts := DefaultOptions(seed)
		opts.Lies, opts.FreezeRate = true, 0.1
		r := Run(opts)
		steps += r.Steps
		if r.Failed() {
			t.Fatalf("seed %d with lies: %s\n\nshrunk:\n%s", seed, r.Violations[0], Shrink(opts, r).Tell())
		}
	}
	// Then runs that outlast the records' retention: keys live again
	// after their records expired, and tools that remember longer than
	// Once (a search that forgets nothing, a dedupe window that outlives
	// a namespace) still answer them with an earlier lifetime's effect.
	for seed := uint64(1); seed <= secondLifetimeSeeds; seed++ {
		opts := DefaultOptions(seed)
		opts.SecondLifetimes = true
		r := Run(opts)
		steps += r.Steps
		if r.Failed() {
			t.Fatalf("seed %d with second lifetimes: %s\n\nshrunk:\n%s", seed, r.Violations[0], Shrink(opts, r).Tell())
		}
	}
	// Then every flag at once, swarmed: lies, second lifetimes, the API
	// server's faults and skewed clocks.
	for seed := uint64(1); seed <= everythingSeeds; seed++ {
		opts := DefaultOptions(seed)
		opts.Lies, opts.SecondLifetimes, opts.Swarm, opts.APIFaultRate = true, true, true, 0.03
		opts.ClockSkew = 4 * time.Second
		r := Run(opts)
		steps += r.Steps
		if r.Failed() {
			t.Fatalf("%s with every flag: %s\n\nshrunk:\n%s", r.Options.Summary(), r.Violations[0], Shrink(opts, r).Tell())
		}
	}
	d := time.Since(began)
	t.Logf("%d seeds (%d swarm), %d with lies, %d with second lifetimes, %d with every flag, %d steps in %s: %.0f steps/s",
		huntSeeds, swarmSeeds, lyingSeeds, secondLifetimeSeeds, everythingSeeds, steps, d.Round(time.Millisecond),
		float64(steps)/d.Seconds())
}

// TestPeopleAct: the people of Options.People do what they stand for in
// default runs: a name applied again with its other manifest, a saga's
// step deleted, a step failed by a person, a short retention that lets a
// scope be forgotten on time. So do those of Options.Brakes. A change that made one of them never
// happen would leave the hunt blind to it without failing.
func TestPeopleAct(t *testing.T) {
	if testing.Short() {
		t.Skip("ten full runs: make test, not -short")
	}
	want := []string{"applies another manifest under the name", "a person deletes order-1.",
		"a person fails step operation", "nothing remembers desk/desk-1 any more",
		"the namespace controller deletes every SideEffectOperation in team",
		"watch expired: its cache lists again",
		// The brakes (Options.Brakes): an incident at a tool, begun and
		// over; an operation held and let go; a cancel, and a cancel a
		// person tries to take back, which the API server refuses.
		"a person suspends tool", "is over: a person resumes tool", "a person suspends operation",
		"a person resumes operation", "a person cancels operation", "spec.cancel cannot be taken back"}
	// The acts are drawn among many others, the callers' and the stops'
	// among them: the runs go on until each was seen, up to peopleSeeds.
	const peopleSeeds = 40
	seen := map[string]bool{}
	for seed := uint64(1); seed <= peopleSeeds && len(seen) < len(want); seed++ {
		for _, line := range Run(DefaultOptions(seed)).Story {
			for _, w := range want {
				if strings.Contains(line, w) {
					seen[w] = true
				}
			}
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Errorf("no run of seeds 1 to %d tells %q", peopleSeeds, w)
		}
	}
}

// TestNamespaceControllerSweeps: admission lets a create into a namespace
// for a second after it is marked terminating, and the namespace
// controller's last sweep deletes what got in; later creates are refused.
func TestNamespaceControllerSweeps(t *testing.T) {
	w := NewWorld(DefaultOptions(1))
	defer w.Close()
	// A saga: no object of its kind is in the namespace when the
	// controller lists the types to delete.
	saga := func(name string) *v1.Saga {
		return &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name}}
	}
	w.deleteNamespace()
	if err := w.server.Create(saga("late")); err != nil {
		t.Fatalf("a create within the admission lag is refused: %v", err)
	}
	w.clock.Advance(2 * time.Second)
	if err := w.server.Create(saga("later")); !apierrors.IsForbidden(err) {
		t.Fatalf("a create after the admission lag: want Forbidden, got %v", err)
	}
	var told []string
	for range 20 {
		line := w.clearingStory()
		if line == "" {
			break
		}
		told = append(told, line)
		w.clearNext()
	}
	if len(told) == 0 || !strings.Contains(told[len(told)-1], "deletes what is left") {
		t.Errorf("the last sweep is missing: %q", told)
	}
	if _, ok := w.server.objects[objKey{Kind: kindSaga, NamespacedName: types.NamespacedName{Namespace: Namespace, Name: "late"}}]; ok {
		t.Error("what got in during the lag was not deleted")
	}
}
