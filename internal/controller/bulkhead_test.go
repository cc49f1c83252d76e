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

package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBulkhead(t *testing.T) {
	b := &Bulkhead{Max: 2}
	var leaves []func()
	for i := range 2 {
		leave, ok := b.Enter("Tool/ns/slow")
		if !ok {
			t.Fatalf("entry %d of 2 refused", i+1)
		}
		leaves = append(leaves, leave)
	}
	if _, ok := b.Enter("Tool/ns/slow"); ok {
		t.Error("a third entry into a bulkhead of 2 was let in")
	}
	if _, ok := b.Enter("Tool/ns/other"); !ok {
		t.Error("another tool's entry was refused: its bulkhead is its own")
	}
	leaves[0]()
	leaves[0]() // leaving twice gives one place back
	if n := b.InCall("Tool/ns/slow"); n != 1 {
		t.Errorf("in call after one left twice: %d, want 1", n)
	}
	if _, ok := b.Enter("Tool/ns/slow"); !ok {
		t.Error("the place given back was not taken")
	}
	if _, ok := (&Bulkhead{}).Enter("Tool/ns/slow"); !ok {
		t.Error("a bulkhead without a bound refused")
	}
}

func TestDefaultShares(t *testing.T) {
	type want struct{ perTool, perNamespace int }
	cases := map[string]struct {
		reason  string
		workers int
		want    want
	}{
		"OneWorker": {
			reason:  "A manager of one worker lets each tool and each namespace have it.",
			workers: 1, want: want{perTool: 1, perNamespace: 1},
		},
		"TestManager": {
			reason:  "The envtest manager's 4 workers: one per tool, two per namespace.",
			workers: 4, want: want{perTool: 1, perNamespace: 2},
		},
		"Default": {
			reason:  "The default 10 workers: two per tool, five per namespace.",
			workers: 10, want: want{perTool: 2, perNamespace: 5},
		},
		"Odd": {
			reason:  "Shares round down: a namespace never holds more than half.",
			workers: 7, want: want{perTool: 1, perNamespace: 3},
		},
		"Many": {
			reason:  "40 workers: ten per tool, twenty per namespace.",
			workers: 40, want: want{perTool: 10, perNamespace: 20},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := want{perTool: DefaultWorkersPerTool(tc.workers), perNamespace: DefaultWorkersPerNamespace(tc.workers)}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNamespaceShare: keyed by namespace, a bulkhead lets one namespace's
// calls take its share and no more, and lets every other namespace in.
func TestNamespaceShare(t *testing.T) {
	share := &Bulkhead{Max: DefaultWorkersPerNamespace(4)}
	var leaves []func()
	for i := range 2 {
		leave, ok := share.Enter("tarpit")
		if !ok {
			t.Fatalf("call %d of the namespace's 2 refused", i+1)
		}
		leaves = append(leaves, leave)
	}
	if _, ok := share.Enter("tarpit"); ok {
		t.Error("a third call of a namespace whose share is 2 was let in")
	}
	other, ok := share.Enter("shop")
	if !ok {
		t.Error("another namespace's call was refused: its share is its own")
	}
	other()
	leaves[1]()
	if n := share.InCall("tarpit"); n != 1 {
		t.Errorf("the namespace's calls after one ended: %d, want 1", n)
	}
	if _, ok := share.Enter("tarpit"); !ok {
		t.Error("the place an ended call gave back was not taken")
	}
}
