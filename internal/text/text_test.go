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

package text

import "testing"

func TestShorten(t *testing.T) {
	cases := map[string]struct {
		s    string
		n    int
		want string
	}{
		"Fits":            {"Committed as ch_1", 17, "Committed as ch_1"},
		"Cut":             {"Committed as ch_1", 12, "Committed..."},
		"RuneNotCutInTwo": {"Prix: 10€ et plus", 12, "Prix: 10..."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Shorten(tc.s, tc.n); got != tc.want {
				t.Errorf("Shorten(%q, %d) = %q, want %q", tc.s, tc.n, got, tc.want)
			}
		})
	}
}
