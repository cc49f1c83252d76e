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
// The operation reconciler reads in the order of an attempt's lifecycle,
// a file each:
//
//  1. sideeffectoperation_controller.go: the wiring, and Reconcile, which
//     loads the operation and starts a pass.
//  2. sideeffectoperation_pass.go: what the pass learns of the operation
//     and its tool, and the decision it carries out (drive, step).
//  3. sideeffectoperation_scope.go: binding the operation to its scope's
//     record, before any claim. The release at deletion lives here too.
//  4. sideeffectoperation_claim.go: the claim, written first, renewed
//     while a long call runs, and asked as the call's fence.
//  5. sideeffectoperation_call.go: the call to the tool, and its answer.
//  6. sideeffectoperation_write.go: the answer written, fenced on the
//     claim, or kept as evidence once the claim moved on. It holds the one
//     status writer.
//  7. sideeffectoperation_gone.go: an answer whose operation is gone,
//     written to the scope's record.
//  8. sideeffectoperation_stop.go: a stopping manager writes the answers
//     its passes still hold.
//
// Calls follow this order. A file calls into the files after it, and they
// return. A call into an earlier file is a back-call. TestBackCalls counts
// the back-calls and the pairs of files that call each other. Its ceilings
// only go down.
package controller
