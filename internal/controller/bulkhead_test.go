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

import "testing"

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
	for workers, want := range map[int]int{1: 1, 4: 1, 10: 2, 16: 4, 40: 10} {
		if got := DefaultWorkersPerTool(workers); got != want {
			t.Errorf("DefaultWorkersPerTool(%d) = %d, want %d", workers, got, want)
		}
	}
}
