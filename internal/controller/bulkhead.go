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

import (
	"sync"
	"time"
)

// bulkheadRetry is about how soon a pass that found its tool's bulkhead,
// or its namespace's share, full looks again (with jitter, between half of
// it and all of it).
const bulkheadRetry = 2 * time.Second

// DefaultWorkersPerTool is the bound of a Bulkhead for a manager with
// workers workers: a quarter of them, at least one. A tool that hangs then
// holds a quarter of the workers until its calls' timeouts, and three such
// tools at once still leave a quarter to the others.
func DefaultWorkersPerTool(workers int) int {
	return max(1, workers/4)
}

// DefaultWorkersPerNamespace is the share of one namespace's calls for a
// manager with workers workers: half of them, at least one. A namespace
// whose calls never end then holds half of the workers until their
// timeouts, and every other namespace still has the other half.
func DefaultWorkersPerNamespace(workers int) int {
	return max(1, workers/2)
}

// Bulkhead bounds, per key, the passes inside a call (its OAuth2 token
// request included). Keyed by tool, it is the tool's bulkhead: a tool that
// does not answer holds at most Max workers, and the others' operations
// keep theirs. Keyed by namespace, it is the namespace's share: a tenant
// whose calls never end holds at most Max workers, and the other tenants
// keep theirs. A pass that finds either full is requeued before it claims
// anything.
type Bulkhead struct {
	// Max is the bound per key. Zero or less means none.
	Max int

	mu sync.Mutex
	in map[string]int
}

// Enter takes one of the key's places. ok is false when all are taken;
// otherwise leave gives the place back (once, however often it is called).
func (b *Bulkhead) Enter(key string) (leave func(), ok bool) {
	if b == nil || b.Max <= 0 {
		return func() {}, true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.in[key] >= b.Max {
		return nil, false
	}
	if b.in == nil {
		b.in = map[string]int{}
	}
	b.in[key]++
	return sync.OnceFunc(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.in[key]--; b.in[key] <= 0 {
			delete(b.in, key)
		}
	}), true
}

// InCall is the number of passes inside a call under the key.
func (b *Bulkhead) InCall(key string) int {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.in[key]
}
