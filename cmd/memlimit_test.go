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

import "testing"

func TestRuntimeLimit(t *testing.T) {
	cases := map[string]struct {
		reason string
		file   string
		want   int64
	}{
		"OneGiB":     {reason: "The Deployment's 1 GiB limit gives the runtime nine tenths of it.", file: "1073741824\n", want: 966367641},
		"Unlimited2": {reason: "cgroup v2 says max for no limit.", file: "max\n", want: 0},
		"Unlimited1": {reason: "cgroup v1 says a number near the largest int64 for no limit.", file: "9223372036854771712\n", want: 0},
		"Garbage":    {reason: "Anything else sets nothing.", file: "a lot", want: 0},
		"Zero":       {reason: "Zero is no limit to share.", file: "0", want: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := runtimeLimit(tc.file); got != tc.want {
				t.Errorf("%s\nruntimeLimit(%q) = %d, want %d", tc.reason, tc.file, got, tc.want)
			}
		})
	}
}
