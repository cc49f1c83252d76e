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
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDrawsDoNotDrift: a pass that draws where it did not before, as one
// that makes one more call does (Options.probe), leaves every other
// decision as it was: the run tells the same story, less the probe's own
// lines. So a fix that adds or removes a call leaves a stored story the
// schedule it was found as.
func TestDrawsDoNotDrift(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		opts := driftOptions(seed)
		plain := Run(opts)
		opts.probe = true
		probed := Run(opts)
		if len(probed.Story) == len(withoutProbe(probed.Story)) {
			t.Fatalf("seed %d: the probe drew nowhere", seed)
		}
		if diff := cmp.Diff(plain.Story, withoutProbe(probed.Story)); diff != "" {
			t.Fatalf("seed %d: a draw at a new site moves the others (-without, +with the probe):\n%s", seed, diff)
		}
	}
}

// TestStreamDrawsDrift: on the single stream of the stories saved before
// keyed draws, the probe moves the draws after it, as any new call did;
// without this, TestDrawsDoNotDrift could pass with a probe that moves
// nothing.
func TestStreamDrawsDrift(t *testing.T) {
	opts := driftOptions(1)
	opts.KeyedDraws = false
	plain := Run(opts)
	opts.probe = true
	if cmp.Equal(plain.Story, withoutProbe(Run(opts).Story)) {
		t.Fatal("the probe moves no draw of the single stream")
	}
}

// driftOptions are short runs that reach every site: lies, the kernel's
// freeze and second lifetimes on some seeds.
func driftOptions(seed uint64) Options {
	opts := DefaultOptions(seed)
	opts.Steps = 600
	opts.Lies, opts.FreezeInKernel, opts.SecondLifetimes = seed == 2, seed == 3, seed == 3
	return opts
}

// withoutProbe is a story less the probe's lines.
func withoutProbe(story []string) []string {
	return slices.DeleteFunc(slices.Clone(story), func(line string) bool {
		return strings.HasPrefix(strings.TrimSpace(line), probeMark)
	})
}
