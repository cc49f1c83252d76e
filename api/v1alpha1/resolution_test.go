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

package v1alpha1

import "testing"

func TestResolutionAttribution(t *testing.T) {
	cases := map[string]struct {
		reason string
		res    Resolution
		want   string
	}{
		"NoUser":   {reason: "Without the admission policy only the claim is known", res: Resolution{By: "bob"}, want: "bob"},
		"SameUser": {reason: "A claim that matches the authenticated user is said once", res: Resolution{By: "bob", User: "bob"}, want: "bob"},
		"OtherUser": {reason: "A claim that differs names the authenticated user too",
			res: Resolution{By: "bob", User: "alice-real"}, want: "bob (authenticated as alice-real)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.res.Attribution(); got != tc.want {
				t.Errorf("%s\nAttribution(): want %q, got %q", tc.reason, tc.want, got)
			}
		})
	}
}
