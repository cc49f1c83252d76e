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

import "sync"

// limiter bounds the tool calls that wait at once, in all and per caller.
// Each holds a goroutine and reads the API server until its outcome or the
// call timeout. A caller that hangs up does not always end it. It
// bounds the TokenReviews in flight too, in all and per client.
type limiter struct {
	total, perCaller int

	mu       sync.Mutex
	inFlight int
	byCaller map[string]int
}

// acquire takes a place for a call of user, or reports that there is none.
func (l *limiter) acquire(user string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight >= l.total || l.byCaller[user] >= l.perCaller {
		return false
	}
	if l.byCaller == nil {
		l.byCaller = map[string]int{}
	}
	l.inFlight++
	l.byCaller[user]++
	return true
}

// release gives back a place acquire took.
func (l *limiter) release(user string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inFlight--
	if l.byCaller[user]--; l.byCaller[user] == 0 {
		delete(l.byCaller, user)
	}
}
