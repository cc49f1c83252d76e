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

package shard

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAssign(t *testing.T) {
	type args struct {
		n       int
		members []string
	}
	cases := map[string]struct {
		reason string
		args   args
		want   []string
	}{
		"NoMembers": {reason: "Without members no shard has an owner.",
			args: args{n: 3}, want: []string{"", "", ""}},
		"NoShards": {reason: "Zero shards assign nothing.",
			args: args{n: 0, members: []string{"a"}}, want: []string{}},
		"OneMember": {reason: "A single member owns every shard.",
			args: args{n: 4, members: []string{"a"}}, want: []string{"a", "a", "a", "a"}},
		"EmptyNamesIgnored": {reason: "An empty member name is no member.",
			args: args{n: 2, members: []string{"", "a", ""}}, want: []string{"a", "a"}},
		"Duplicates": {reason: "A member listed twice is one member.",
			args: args{n: 2, members: []string{"a", "a"}}, want: []string{"a", "a"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Assign(tc.args.n, tc.args.members)); diff != "" {
				t.Errorf("%s\nAssign(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAssignIgnoresOrder(t *testing.T) {
	a := Assign(64, []string{"m1", "m2", "m3", "m4"})
	b := Assign(64, []string{"m4", "m2", "m1", "m3"})
	if diff := cmp.Diff(a, b); diff != "" {
		t.Errorf("Every member must compute the same assignment from the same set: -first order, +second:\n%s", diff)
	}
}

func TestAssignSpreads(t *testing.T) {
	const n = 1024
	cases := map[string]struct {
		reason  string
		members []string
	}{
		"Two":  {reason: "Two members share the shards about evenly.", members: members(2)},
		"Four": {reason: "Four members share the shards about evenly.", members: members(4)},
		"Ten":  {reason: "Ten members share the shards about evenly.", members: members(10)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			counts := map[string]int{}
			for _, o := range Assign(n, tc.members) {
				counts[o]++
			}
			fair := n / len(tc.members)
			for _, m := range tc.members {
				// Within a quarter of the fair share: far beyond the
				// binomial deviation, far below a skew.
				if c := counts[m]; c < fair*3/4 || c > fair*5/4 {
					t.Errorf("%s %s owns %d of %d shards, fair is %d", tc.reason, m, c, n, fair)
				}
			}
		})
	}
}

func TestAssignMovesOnlyTheChangedMembersShards(t *testing.T) {
	const n = 256
	before := Assign(n, members(4))
	cases := map[string]struct {
		reason  string
		members []string
		// moved says which shards may change owner, from their old and
		// new owners.
		moved func(was, is string) bool
	}{
		"Leaves": {reason: "When member-2 leaves, only its shards move, to the others.",
			members: slices.DeleteFunc(members(4), func(m string) bool { return m == "member-2" }),
			moved:   func(was, is string) bool { return was == "member-2" && is != "member-2" }},
		"Joins": {reason: "When member-4 joins, only shards it takes move.",
			members: members(5),
			moved:   func(_, is string) bool { return is == "member-4" }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			after := Assign(n, tc.members)
			moved := 0
			for i := range n {
				if before[i] == after[i] {
					continue
				}
				moved++
				if !tc.moved(before[i], after[i]) {
					t.Errorf("%s Shard %d moved from %s to %s", tc.reason, i, before[i], after[i])
				}
			}
			if moved == 0 {
				t.Errorf("%s No shard moved", tc.reason)
			}
		})
	}
}

// members names k members.
func members(k int) []string {
	m := make([]string, k)
	for i := range m {
		m[i] = fmt.Sprintf("member-%d", i)
	}
	return m
}
