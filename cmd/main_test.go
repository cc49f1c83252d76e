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

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitList(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     string
		want   []string
	}{
		"Empty": {
			reason: "an empty flag names nothing: every namespace is watched",
			in:     "",
			want:   nil,
		},
		"One": {
			reason: "one namespace",
			in:     "team-a",
			want:   []string{"team-a"},
		},
		"Several": {
			reason: "namespaces are separated by commas, spaces around them dropped",
			in:     "team-a, team-b ,team-c",
			want:   []string{"team-a", "team-b", "team-c"},
		},
		"EmptyItems": {
			reason: "empty items, from a trailing or doubled comma, are dropped",
			in:     ",team-a,,team-b,",
			want:   []string{"team-a", "team-b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, splitList(tc.in)); diff != "" {
				t.Errorf("%s\nsplitList(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}
