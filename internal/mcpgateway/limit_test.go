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

package mcpgateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLimiter(t *testing.T) {
	type step struct {
		acquire bool // false: release
		user    string
	}
	cases := map[string]struct {
		reason string
		steps  []step
		want   []bool // what each acquire answered
	}{
		"PerCaller": {reason: "a caller gets at most two places, others still get theirs",
			steps: []step{{true, "a"}, {true, "a"}, {true, "a"}, {true, "b"}},
			want:  []bool{true, true, false, true}},
		"Total": {reason: "three places in all, whoever asks",
			steps: []step{{true, "a"}, {true, "b"}, {true, "c"}, {true, "d"}},
			want:  []bool{true, true, true, false}},
		"Released": {reason: "a place given back is taken again",
			steps: []step{{true, "a"}, {true, "a"}, {false, "a"}, {true, "a"}, {true, "a"}},
			want:  []bool{true, true, true, false}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := &limiter{total: 3, perCaller: 2}
			var got []bool
			for _, s := range tc.steps {
				if s.acquire {
					got = append(got, l.acquire(s.user))
				} else {
					l.release(s.user)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nacquire answers: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
