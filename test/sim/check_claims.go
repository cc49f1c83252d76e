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

// Claims and fencing: a pass claims an attempt before it calls, and a
// stale pass writes nothing over a newer one.
//
// I2: no call before a claim of that attempt is durably written. It is
// checked at each request a tool receives.
// I6: a stale worker cannot overwrite a newer attempt's status. It is
// checked at each write of an operation's status.

import (
	v1 "github.com/once-dev/once/api/v1alpha1"
)

// checkClaimed is I2, when a request of an operation's pass is about to
// reach its tool: the pass's holder wrote a claim on this object before,
// and the API server stored it. A request that leaves after its claim
// expired still had one (the fence and the tool's contract bound what it
// may do); one that never had a claim is the violation.
func (w *World) checkClaimed(pr *passRun, what string) {
	if pr == nil || pr.req.ctrl != ctrlOperation || pr.uid == "" {
		return
	}
	holder := pr.m.holderOf(pr.incarnation)
	for k := range w.history.claims {
		if k.uid == string(pr.uid) && k.holder == holder {
			return
		}
	}
	w.fail(InvClaimFirst, pr.req.Name, "%s sent %s without a claim of its own ever stored", holder, what)
}

// checkStaleWrite is I6 at each write of an operation's status: the
// attempts never go back, nor the claim's attempt, and a terminal outcome
// stays as it is (terminal means terminal: a late answer may add evidence,
// never change the state or the effect).
func (w *World) checkStaleWrite(prev, cur *v1.SideEffectOperation) {
	ps, cs := prev.Status, cur.Status
	switch {
	case cs.Attempts < ps.Attempts:
		w.fail(InvNoStaleWrite, cur.Name, "a write took attempts back from %d to %d", ps.Attempts, cs.Attempts)
	case ps.Claim != nil && cs.Claim != nil && cs.Claim.Attempt < ps.Claim.Attempt:
		w.fail(InvNoStaleWrite, cur.Name, "a write took the claim back from attempt %d (%s) to %d (%s)",
			ps.Claim.Attempt, ps.Claim.Holder, cs.Claim.Attempt, cs.Claim.Holder)
	case ps.State.IsTerminal() && (cs.State != ps.State || cs.ExternalObjectID != ps.ExternalObjectID):
		w.fail(InvNoStaleWrite, cur.Name, "a write changed the terminal outcome %s %q to %s %q",
			ps.State, ps.ExternalObjectID, cs.State.OrPlanned(), cs.ExternalObjectID)
	}
}
