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

package lease

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestName(t *testing.T) {
	sum := sha256.Sum256([]byte("Host_1"))
	cases := map[string]struct {
		reason, holder, want string
	}{
		"Valid": {reason: "A holder that makes a valid name is kept.", holder: "m-1", want: "once-x-m-1"},
		"Invalid": {reason: "A holder with characters a name refuses is digested.", holder: "Host_1",
			want: "once-x-" + hex.EncodeToString(sum[:8])},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := Name("once-x-", tc.holder); got != tc.want {
				t.Errorf("%s\nName(%q): want %q, got %q", tc.reason, tc.holder, tc.want, got)
			}
		})
	}
}
