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

// Package failpoint stops the manager at named points of the protocol, so
// that tests hit the crash windows on purpose. It is compiled in only with
// the build tag `failpoints`; without it every point is a constant no-op
// and the production binary has no way to trigger one.
//
// The points are go.etcd.io/gofail failpoints, set through gofail's
// runtime: the GOFAIL_FAILPOINTS environment variable at start
// ("executeAfterAnswer=return(\"kill\")"), GOFAIL_HTTP for an endpoint to
// set them while running, or Enable in-process. A point's value chooses
// what happens:
//
//   - "kill": the process sends itself SIGKILL, as kill -9 would.
//   - "stop": the process sends itself SIGSTOP, as a stalled node or a
//     debugger would. It goes on from there once it is continued
//     (SIGCONT).
//   - "abandon": the pass stops and writes nothing more, as if the worker
//     had died there. It blocks until the manager stops, so that the same
//     manager does not pick the object up again. This is for tests that
//     run the manager in-process and stop it to play the crash.
//
// gofail's sleep and pause terms work too.
package failpoint

// The points, in the order a pass meets them.
const (
	// BindAfterNoRecord: an operation whose key is its own name found no
	// scope record. It has not claimed.
	BindAfterNoRecord = "bindAfterNoRecord"
	// ExecuteAfterClaim: the attempt's claim is written. The tool has not
	// been called.
	ExecuteAfterClaim = "executeAfterClaim"
	// BeforeWrite: a call's request (an attempt's or a re-send's) has its
	// connection and is about to be written: the last moment before its
	// bytes leave, where its claim's fence is asked. Meant for "stop".
	BeforeWrite = "beforeWrite"
	// ExecuteAfterAnswer: the tool answered the attempt. The answer is not
	// written.
	ExecuteAfterAnswer = "executeAfterAnswer"
	// ReconcileAfterClaim: a reconciliation (re-send or lookup) is claimed.
	// The tool has not been asked.
	ReconcileAfterClaim = "reconcileAfterClaim"
	// ReconcileAfterAnswer: the tool answered the reconciliation. The
	// answer is not written.
	ReconcileAfterAnswer = "reconcileAfterAnswer"
	// TakeoverAfterRecord: an operation took over the scope record of a
	// deleted owner. It has not written the inherited unknown outcome.
	TakeoverAfterRecord = "takeoverAfterRecord"
	// OutboxBeforeDeliver: an outcome and its announcements are written.
	// The relay has not delivered them.
	OutboxBeforeDeliver = "outboxBeforeDeliver"
	// OutboxAfterDeliver: the relay delivered an announcement. The
	// delivery is not written, so it will be delivered again.
	OutboxAfterDeliver = "outboxAfterDeliver"
)

// Points lists every point.
var Points = []string{BindAfterNoRecord, ExecuteAfterClaim, BeforeWrite, ExecuteAfterAnswer, ReconcileAfterClaim, ReconcileAfterAnswer,
	TakeoverAfterRecord, OutboxBeforeDeliver, OutboxAfterDeliver}
