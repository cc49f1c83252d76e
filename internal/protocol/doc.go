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

// Package protocol is the decision core of Once: pure functions that, given
// an operation's status, what the tool promises, the clock and an outcome,
// return the next status and the action to take. It has no client and does
// no I/O, so every rule is table-tested here. (A scope's IdempotencyRecord,
// which outlives its operations, is the other thing it decides about:
// Arbitrate and AtDeletion.)
//
// The invariants it keeps (docs/design.md, "Invariants"):
//
//   - Every call to the tool is preceded by a status that claims it: Next
//     never returns a call action without a status to write first, and that
//     status holds a claim for the attempt (I2).
//   - An attempt whose outcome is unknown is never retried before it is
//     reconciled: from Unknown the only ways on are a re-send with the same
//     key (Native), a lookup (Lookup) or a person (None, or the limit) (I3).
//   - Only an attempt that provably had no effect is retried: a retryable
//     answer, a lookup that proves absence, or a person's Retry.
//   - Terminal states stay terminal, and only a person's resolution leaves
//     NeedsReview.
//
// The controller writes each status with the object's resourceVersion as a
// precondition, so a decision taken on a stale view loses the write (I6).
//
// # Files
//
// A file per topic:
//
//   - types.go: what a decision takes and gives (Policy, Env, Decision, and
//     the tool's answers).
//   - next.go: Next, which decides when no answer is in hand. It claims
//     attempts, marks outcomes unknown, and asks the tool about them.
//   - answers.go: what an answer means (AfterCall, AfterResend,
//     AfterLookup), and how an operation ends (Fail).
//   - resolution.go: a person's decisions. An operation enters
//     NeedsReview, and a resolution is applied once.
//   - duplicates.go: an operation whose scope another one held (Adopt,
//     WaitForOriginal, Inherit).
//   - scope.go, release.go, stale.go: the scope's record when an operation
//     binds it (Arbitrate), at deletion (AtDeletion), and for a late
//     answer (Stale, StaleForRecord).
//   - conditions.go, history.go, observations.go, fields.go: what a status
//     says besides its state.
//   - policy.go, hash.go, json.go: a policy from a tool, a request's hash
//     and key, and JSON numbers.
package protocol
