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
	"slices"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/text"
)

// maxHistoryMessage caps a transition's message; the conditions carry the
// whole of the current one.
const maxHistoryMessage = 256

// AddHistory appends t to a status's story unless it repeats the newest
// entry (the same state, reason, attempt and step: a question asked again,
// a wait renewed). The story is bounded at v1.MaxHistory: the first
// transition stays, and the oldest after it makes room.
func AddHistory(history *[]v1.Transition, t v1.Transition) {
	h := *history
	if n := len(h); n > 0 && repeats(h[n-1], t) {
		return
	}
	t.Message = text.Shorten(t.Message, maxHistoryMessage)
	// A new array: the status being decided may share the old one with the
	// caller's status, which the decision core never changes.
	out := make([]v1.Transition, 0, min(len(h)+1, v1.MaxHistory))
	if len(h) >= v1.MaxHistory {
		out = append(out, h[0])
		h = h[len(h)-v1.MaxHistory+2:]
	}
	*history = append(append(out, h...), t)
}

// repeats reports whether t says again what the newest entry last says.
func repeats(last, t v1.Transition) bool {
	return last.State == t.State && last.Reason == t.Reason && last.Attempt == t.Attempt && last.Step == t.Step
}

// addTransition appends t to an operation's story without its message,
// which the Ready condition carries: the newest transition's message is
// said once. told is Ready's message before this transition: it moves into
// the entry it belongs to, the newest until now, once t follows it, unless
// it says no more than the entry's reason and attempt (a claim). An entry
// written with its message (by an earlier release) keeps it.
func addTransition(history *[]v1.Transition, told string, t v1.Transition) {
	h := *history
	if n := len(h); n > 0 && h[n-1].Message == "" && told != "" && !repeats(h[n-1], t) &&
		(h[n-1].Reason != v1.ReasonExecuting || told != claimedMessage(h[n-1].Attempt)) {
		h = slices.Clone(h)
		h[n-1].Message = text.Shorten(told, maxHistoryMessage)
	}
	t.Message = ""
	AddHistory(&h, t)
	*history = h
}
