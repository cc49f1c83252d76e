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

package saga

import (
	"fmt"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The brakes people set on a saga: spec.suspend and spec.cancel. Both act
// before the saga makes a move, never on an operation in flight, as an
// operation's brakes act before its claim.
//
//   - Suspend holds the saga where it stands: no validation, no new
//     operation for a step or a compensation. An operation already made
//     goes on. A person can suspend it on its own.
//   - Cancel starts no new step. The saga stops at the step it would start
//     next, as if that step had failed for good before any effect. It
//     compensates the committed steps, last first, or ends FailedFinal
//     with reason Cancelled when none took effect.
//   - A step in flight finishes, and its operation's outcome decides. The
//     saga cancels that operation too while it has not claimed an
//     attempt. It then fails Cancelled with no call.
//   - After an irreversible step committed, the steps after it can only
//     be finished: the cancel does not stop them.
//   - A person's resolution is applied as it is. An operation it asks
//     for (a Retry) waits while the saga is suspended.

// held is the checkpoint of a saga whose next move, what, waits for the
// suspend to be lifted. It says the same on every pass, so it is written
// once.
func (d *decider) held(state v1.OperationState, step, what string) Decision {
	return d.run(state, step, v1.ReasonSuspended, fmt.Sprintf(
		"suspended (spec.suspend): %s waits until it is resumed", what))
}

// stopped reports whether the cancel stops step i: the saga is cancelled,
// and no irreversible step before i committed.
func (d *decider) stopped(i int) bool {
	return d.Spec.Cancel && d.pivot(i) == ""
}

// pivot names the irreversible step before step i that committed, if any.
// The steps after it can only be finished.
func (d *decider) pivot(i int) string {
	for j := range i {
		if d.Spec.Steps[j].Irreversible && d.st.Steps[j].State == v1.StateCommitted {
			return d.Spec.Steps[j].Name
		}
	}
	return ""
}

// unstoppable is what a message adds while the cancel cannot stop step i.
func (d *decider) unstoppable(i int) string {
	if !d.Spec.Cancel || d.pivot(i) == "" {
		return ""
	}
	return fmt.Sprintf("; the cancel does not stop it: irreversible step %s committed, so the steps after it can only be finished",
		d.pivot(i))
}

// cancelled stops the saga at step i, which has no operation of its own
// yet: the compensations begin, as after a failure with no effect.
func (d *decider) cancelled(i int) Decision {
	ss := &d.st.Steps[i]
	ss.Reason = v1.ReasonCancelled
	why := fmt.Sprintf("cancelled (spec.cancel) before step %s started", ss.Name)
	state := v1.StateStarted
	if d.st.StartedTime == nil {
		state = v1.StatePlanned
	}
	// The checkpoint says so while the scope records are read (a saga
	// cancelled before its first pass has no conditions yet).
	d.run(state, ss.Name, ReasonRunning, why)
	return d.startCompensation(i, why)
}

// inFlight is the checkpoint while step i's operation c, named name, runs.
// A cancel reaches that operation too while it has not claimed an
// attempt.
func (d *decider) inFlight(i int, name string, c Child) Decision {
	step := d.Spec.Steps[i]
	msg := fmt.Sprintf("step %s (%d of %d) is %s", step.Name, i+1, len(d.Spec.Steps), c.State.OrPlanned())
	if !d.stopped(i) {
		return d.run(v1.StateStarted, step.Name, ReasonRunning, msg+d.unstoppable(i))
	}
	dec := d.run(v1.StateStarted, step.Name, ReasonRunning, "cancelled (spec.cancel): "+msg+
		"; the saga waits for its outcome")
	if c.Unclaimed && !c.Cancel {
		dec.Action = Action{Kind: ActionCancel, Step: i, Round: d.st.Steps[i].Round, Name: name}
	}
	return dec
}

// cause says why the compensations began: the failed step's failure, or
// the cancel that stopped the saga there.
func (d *decider) cause() string {
	if d.byCancel() {
		return fmt.Sprintf("the saga was cancelled at step %s", d.st.FailedStep)
	}
	return fmt.Sprintf("step %s failed for good", d.st.FailedStep)
}

// byCancel reports whether the cancel began the compensations: it stopped
// the failed step before it started, or cancelled its operation.
func (d *decider) byCancel() bool {
	failed := d.failedIndex()
	return failed < len(d.st.Steps) && d.st.Steps[failed].Reason == v1.ReasonCancelled
}
