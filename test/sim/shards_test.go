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
	"math/rand/v2"
	"strings"
	"testing"
)

// runWorld runs a seed as Run does, and hands its world to see before it
// closes.
func runWorld(opts Options, see func(w *World)) {
	opts = opts.Swarmed()
	w := NewWorld(opts)
	defer w.Close()
	rng := rand.New(rand.NewPCG(opts.Seed, 1))
	for range opts.Steps {
		w.Apply(w.Plan(rng))
	}
	w.quiet(rng)
	see(w)
}

// TestShardsMove: with shards, an object's shard moves between managers
// within its lifetime, and both claim it: the old owner before the move,
// the new one after. A change that kept each object with one manager
// would leave the hunt blind to handovers without failing.
func TestShardsMove(t *testing.T) {
	if testing.Short() {
		t.Skip("full runs: make test, not -short")
	}
	for seed := uint64(1); seed <= 20; seed++ {
		moved, both := false, ""
		runWorld(DefaultOptions(seed), func(w *World) {
			managers := map[string]map[string]bool{}
			for k := range w.history.claims {
				if managers[k.uid] == nil {
					managers[k.uid] = map[string]bool{}
				}
				managers[k.uid][strings.SplitN(k.holder, "-", 2)[0]] = true
			}
			for uid, ms := range managers {
				if len(ms) > 1 {
					both = uid
				}
			}
			for _, line := range w.story {
				moved = moved || strings.Contains(line, "'s shards: ") && !strings.Contains(line, "took []")
			}
		})
		if moved && both != "" {
			t.Logf("seed %d: operation %s claimed by both managers", seed, both)
			return
		}
	}
	t.Error("no run of seeds 1 to 20 moves a shard with an operation claimed by both managers")
}

// TestStopWritesHeld: a manager told to stop writes an answer it held
// through the product's stop path (WriteHeld) in some default run.
func TestStopWritesHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("full runs: make test, not -short")
	}
	// A stop finds an answer held in few runs: it takes a write that
	// failed just before.
	const stopSeeds = 80
	for seed := uint64(1); seed <= stopSeeds; seed++ {
		written := 0
		runWorld(DefaultOptions(seed), func(w *World) { written = w.stopWrites })
		if written > 0 {
			t.Logf("seed %d: %d answers written as a manager stopped", seed, written)
			return
		}
	}
	t.Errorf("no run of seeds 1 to %d writes an answer as a manager stops", stopSeeds)
}

// TestWithoutShards: a world without shards or stops has no Leases, and
// its managers hold every object, as stories saved before them expect.
func TestWithoutShards(t *testing.T) {
	opts := DefaultOptions(1)
	opts.Shards, opts.Stops = 0, false
	w := NewWorld(opts)
	defer w.Close()
	for k := range w.server.objects {
		if k.Kind == kindLease || k.Name == shardNamespace {
			t.Errorf("a world without shards holds %s", k)
		}
	}
	for _, m := range w.managers {
		if m.sharder != nil || !m.owns(nil, w.manifests[0]) {
			t.Errorf("manager %s without shards does not hold every object", m.Name)
		}
	}
}
