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

package http

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestTokenSourcesBounded shows the bound the threat model states for the
// OAuth2 token sources: at most maxTokenSources are kept, and the next new
// one drops them all. A tenant with many OAuth2 Tools can so make every
// tool fetch its token again, once per maxTokenSources new sources.
func TestTokenSourcesBounded(t *testing.T) {
	var ts tokens
	o := &v1.OAuth2ClientCredentials{TokenURL: "https://token.example"}
	tool := func(i int) v1.GenericTool {
		return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("tool-%d", i)}}
	}
	source := func(i int) *tokenSource { return ts.source(tool(i), o, "client-id", "client-secret-1", nil) }
	first := source(0)
	for i := 1; i < maxTokenSources; i++ {
		source(i)
	}
	if source(0) != first {
		t.Fatal("a token source was dropped before the bound")
	}
	if n := len(ts.sources); n != maxTokenSources {
		t.Fatalf("%d token sources kept, want %d", n, maxTokenSources)
	}
	source(maxTokenSources)
	if n := len(ts.sources); n != 1 {
		t.Errorf("%d token sources kept past the bound, want 1: the new one", n)
	}
	if source(0) == first {
		t.Error("a token source outlived the bound: the sources are not bounded")
	}
}
