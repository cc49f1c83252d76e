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

package sim

// Brakes: what people's suspend and cancel hold (brakes.go, and
// internal/protocol's brake).
//
// I17: no first attempt, retry or re-send is claimed against a brake. It is
// checked at each write of an operation's status that stores a new claim:
//
//   - The operation's own brakes hold exactly. A claim is a status write
//     conditional on the version its pass read. A person's edit of the
//     spec makes a new version. So the spec stored beside a claim is the
//     spec its pass decided on, and it says neither suspend nor cancel.
//   - A tool's suspend is seen through a cache that lags. A pass that read
//     the tool before its cache showed the suspend may still claim: it
//     decided on what it read. So the check holds each pass to what it
//     read: a pass whose every read of the operation's tool showed it
//     suspended claims nothing. The world sees each read (gate.Read),
//     through the manager's cache or past it.
//   - A lookup's claim is allowed. It makes no effect, and it settles an
//     unknown outcome.
//   - A person's resolution of a review is applied as it is: a claim
//     written from NeedsReview (their Retry) is exempt.
//
// A cancel that ends an operation FailedFinal, reason Cancelled, says that
// no attempt took effect. I11 checks that as it checks every failure that
// says "no effect" (checkOutcome, checkRecords, and what callers are
// told): no effect of the request stands in its key's lifetime, unless a
// late answer reported one (reason EffectReported).

import (
	"fmt"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// toolRead is what a pass's reads of one tool showed of its suspend.
type toolRead struct {
	suspended, running bool
}

// readTool notes a read of a tool by the pass.
func (p *passRun) readTool(t v1.GenericTool) {
	if p.tools == nil {
		p.tools = map[string]toolRead{}
	}
	k := string(t.Kind()) + "/" + t.GetName()
	r := p.tools[k]
	if t.GetSpec().Suspend {
		r.suspended = true
	} else {
		r.running = true
	}
	p.tools[k] = r
}

// checkBraked is I17 at a write of an operation's status, from prev to cur.
func (w *World) checkBraked(prev, cur *v1.SideEffectOperation) {
	what := claimed(prev.Status, cur.Status)
	if what == "" || prev.Status.State == v1.StateNeedsReview {
		return
	}
	holder := cur.Status.Claim.Holder
	switch {
	case cur.Spec.Cancel:
		w.fail(InvBrakes, cur.Name, "%s claimed %s of an operation that is cancelled (generation %d)",
			holder, what, cur.Generation)
	case cur.Spec.Suspend:
		w.fail(InvBrakes, cur.Name, "%s claimed %s of an operation that is suspended (generation %d)",
			holder, what, cur.Generation)
	}
	pr := w.running
	if pr == nil || pr.req.ctrl != ctrlOperation || pr.uid != cur.UID {
		return
	}
	tool, _ := cur.Spec.ToolRef.Object(cur.Namespace)
	k := string(tool.Kind()) + "/" + cur.Spec.ToolRef.Name
	if r := pr.tools[k]; r.suspended && !r.running {
		w.fail(InvBrakes, cur.Name, "%s claimed %s in a pass that read %s suspended at each of its reads",
			holder, what, k)
	}
}

// claimed names the call a status write from ps to cs claims: "attempt N"
// (a first attempt or a retry), or the re-send of an unknown attempt.
// Empty when it claims nothing new (no claim, or a renewal of the one in
// flight), or claims a lookup.
func claimed(ps, cs v1.SideEffectOperationStatus) string {
	c := cs.Claim
	if c == nil {
		return ""
	}
	if p := ps.Claim; p != nil && p.Holder == c.Holder && p.Attempt == c.Attempt && p.AcquireTime.Equal(&c.AcquireTime) &&
		ps.Attempts == cs.Attempts && ps.ReconcileAttempts == cs.ReconcileAttempts {
		return ""
	}
	switch cs.State {
	case v1.StateStarted:
		return fmt.Sprintf("attempt %d", c.Attempt)
	case v1.StateReconciling:
		// An unknown attempt is re-sent where its mode is Native, and
		// looked up where it is Lookup (protocol's reconcileUnknown): the
		// status keeps the attempt's mode.
		if cs.IdempotencyMode == v1.IdempotencyNative {
			return fmt.Sprintf("the re-send that settles attempt %d", c.Attempt)
		}
	}
	return ""
}
