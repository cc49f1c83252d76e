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

package protocol

import (
	"testing"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestPromiseOfDefaultedMethods: a method left empty promises what its
// default does, so that a Tool the API server stored with the defaults
// filled in (before they were Once's own) and the same Tool applied again
// without them pin the same promise; another method does not.
func TestPromiseOfDefaultedMethods(t *testing.T) {
	tool := func(method, lookupMethod string) *v1.ToolSpec {
		return &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
			Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/charges", Method: method,
				Lookup: &v1.LookupRequest{Path: "/charges?key={idempotencyKey}", Method: lookupMethod, Found: "true"}}}}
	}
	empty := PromiseOf(tool("", ""), "charge.create")
	if filled := PromiseOf(tool("POST", "GET"), "charge.create"); filled != empty {
		t.Errorf("POST and GET spelled out promise %s; left empty, %s", filled, empty)
	}
	if put := PromiseOf(tool("PUT", ""), "charge.create"); put == empty {
		t.Error("PUT promises what POST does")
	}
	if post := PromiseOf(tool("", "POST"), "charge.create"); post == empty {
		t.Error("a lookup by POST promises what one by GET does")
	}
}
