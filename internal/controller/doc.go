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

// Package controller holds Once's reconcilers and the wiring they share.
// Each reconciler loads its object, asks a pure core what to do
// (internal/protocol for an operation, internal/saga for a saga), and
// writes the answer with a conditional write.
//
// # The operation reconciler's reading order
//
// The operation reconciler reads from the top down: a file calls the files
// after it, and they return. Each file does one thing:
//
//  1. sideeffectoperation_controller.go: the wiring, Reconcile, which
//     loads the operation and hands it on, and a stopping manager's last
//     writes of the answers it holds.
//  2. sideeffectoperation_drive.go: the driver, which decides what the
//     pass of an unfinished operation does next (drive, step).
//  3. sideeffectoperation_scope.go: binding the operation to its scope's
//     record, before any claim.
//  4. sideeffectoperation_release.go: the finalizer, and the release of a
//     deleted operation into its scope's record.
//  5. sideeffectoperation_call.go: the connection, the retry budget, and
//     the call to the tool.
//  6. sideeffectoperation_claim.go: the claim kept while the call runs,
//     renewed, and asked as the call's fence.
//  7. sideeffectoperation_answer.go: an answer in hand is never dropped
//     (I12). Its opening comment states the rule.
//  8. sideeffectoperation_gone.go: an answer whose operation is gone,
//     written to the scope's record.
//  9. sideeffectoperation_record.go: scope records and their owners, as
//     the reconciler reads them.
//  10. sideeffectoperation_write.go: the one status writer and the one
//     re-read, bound to the operation's UID.
//  11. sideeffectoperation_pass.go: what a pass knows (the operation, its
//     working status, its tool and policy) and the answer a call brought.
//
// A call into an earlier file is a back-call. TestBackCalls counts the
// back-calls and the pairs of files that call each other. Its ceilings
// only go down.
package controller
