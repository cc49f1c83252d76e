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

// The brakes people set (Options.Brakes): spec.suspend on a Tool and on an
// operation, and spec.cancel on an operation. internal/protocol's brake
// says what each holds. Each action stands for what a person does in a
// cluster, at kubectl:
//
//   - SuspendTool, then ResumeTool: an incident at a provider (an outage on
//     its status page, a bug found in what the tool sends). The person on
//     call suspends the Tool, so that no new call reaches it; the calls in
//     flight end. Operations of the tool pile up, held. Once the incident
//     is over, they resume the tool, and the held operations go on.
//   - SuspendOperation, then ResumeOperation: a person holds one operation
//     while they check something (a charge a customer disputes), then lets
//     it go on.
//   - Cancel: a person cancels an operation they no longer want (the order
//     was called off). A saga's step and a caller's operation may be
//     cancelled too: whoever sees them may.
//   - Uncancel: a person who regrets a cancel tries to take it back. The
//     API server refuses it (the CRD's CEL rule): they must create another
//     operation, with another key.
//
// When the faults stop, the incidents are over: people resume what they
// suspended (endIncidents), and what was held must settle (I13).

import (
	"fmt"
	"math/rand/v2"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The brakes' kinds of action.
const (
	// SuspendTool and ResumeTool: a person sets and removes a Tool's
	// spec.suspend, as an incident begins and ends.
	SuspendTool Kind = "suspend-tool"
	ResumeTool  Kind = "resume-tool"
	// SuspendOperation and ResumeOperation: a person sets and removes an
	// operation's spec.suspend.
	SuspendOperation Kind = "suspend-operation"
	ResumeOperation  Kind = "resume-operation"
	// Cancel: a person sets an operation's spec.cancel.
	Cancel Kind = "cancel"
	// Uncancel: a person tries to clear spec.cancel, which the API server
	// refuses.
	Uncancel Kind = "uncancel"
)

// brakeWeights are the brakes' kinds of action and their weights. A swarm
// run draws them after everything else it draws (Swarmed).
var brakeWeights = []kindWeight{{"suspend-tool", 1, false}, {"suspend-operation", 1, false}, {"cancel", 1, false}}

// brakeChoices are the brakes people may set or lift next; each fills a.
func (w *World) brakeChoices(rng *rand.Rand, a *Action) []choice {
	return []choice{
		{"suspend-tool", func() bool {
			// One draw in three finds a given tool: a suspend lasts some
			// hundreds of steps, an incident during which its operations
			// come and wait.
			names := []string{toolChat, toolDesk, toolPay}
			a.Name = names[rng.IntN(len(names))]
			t := &v1.Tool{}
			if w.server.Get(toolObjKey(a.Name), t) != nil {
				return false
			}
			a.Kind = SuspendTool
			if t.Spec.Suspend {
				a.Kind = ResumeTool
			}
			return true
		}},
		{"suspend-operation", func() bool {
			ops := w.brakeable(false)
			if len(ops) == 0 {
				return false
			}
			op := ops[rng.IntN(len(ops))]
			a.Kind, a.Name = SuspendOperation, op.Name
			if op.Spec.Suspend {
				a.Kind = ResumeOperation
			}
			return true
		}},
		{"cancel", func() bool {
			ops := w.brakeable(true)
			if len(ops) == 0 {
				return false
			}
			op := ops[rng.IntN(len(ops))]
			a.Kind, a.Name = Cancel, op.Name
			if op.Spec.Cancel {
				a.Kind = Uncancel
			}
			return true
		}},
	}
}

// brakeable are the operations a person may brake: those not ended, not
// being deleted; with cancelled, those cancelled too, ended or not (whose
// cancel a person may try to take back).
func (w *World) brakeable(cancelled bool) []*v1.SideEffectOperation {
	var out []*v1.SideEffectOperation
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		if op.DeletionTimestamp.IsZero() && (!op.Status.State.IsTerminal() || cancelled && op.Spec.Cancel) {
			out = append(out, op)
		}
	}
	return out
}

// describeBrake is describe for the brakes: empty if the action does not
// apply now.
func (w *World) describeBrake(a Action) string {
	if a.Kind == SuspendTool || a.Kind == ResumeTool {
		t := &v1.Tool{}
		if w.server.Get(toolObjKey(a.Name), t) != nil || t.Spec.Suspend == (a.Kind == SuspendTool) {
			return ""
		}
		if a.Kind == SuspendTool {
			return fmt.Sprintf("an incident at %s: a person suspends tool %s (spec.suspend)", a.Name, a.Name)
		}
		return fmt.Sprintf("the incident at %s is over: a person resumes tool %s", a.Name, a.Name)
	}
	op := &v1.SideEffectOperation{}
	if w.server.Get(opObjKey(a.Name), op) != nil || !op.DeletionTimestamp.IsZero() {
		return ""
	}
	switch {
	case a.Kind == SuspendOperation && !op.Spec.Suspend:
		return fmt.Sprintf("a person suspends operation %s (spec.suspend)", a.Name)
	case a.Kind == ResumeOperation && op.Spec.Suspend:
		return fmt.Sprintf("a person resumes operation %s", a.Name)
	case a.Kind == Cancel && !op.Spec.Cancel:
		return fmt.Sprintf("a person cancels operation %s (spec.cancel), in state %s", a.Name, op.Status.State.OrPlanned())
	case a.Kind == Uncancel && op.Spec.Cancel:
		return fmt.Sprintf("a person tries to take back the cancel of %s", a.Name)
	}
	return ""
}

// applyBrake carries out a brake's action, as kubectl patch does: an
// update of the spec, so the generation moves. Another kind of action it
// leaves alone.
func (w *World) applyBrake(a Action) {
	switch a.Kind {
	case SuspendTool, ResumeTool:
		t := &v1.Tool{}
		must(w.server.Get(toolObjKey(a.Name), t))
		t.Spec.Suspend = a.Kind == SuspendTool
		if err := w.server.Update(t, false); err != nil {
			w.note("the patch fails: %v", err)
		}
	case SuspendOperation, ResumeOperation, Cancel, Uncancel:
		op := &v1.SideEffectOperation{}
		must(w.server.Get(opObjKey(a.Name), op))
		if a.Kind == Cancel || a.Kind == Uncancel {
			op.Spec.Cancel = a.Kind == Cancel
		} else {
			op.Spec.Suspend = a.Kind == SuspendOperation
		}
		if err := w.server.Update(op, false); err != nil {
			w.note("the API server refuses it: %v", err)
		}
	}
}

// endIncidents is the end of every incident when the faults stop: people
// resume each tool and each operation they suspended, so that what was
// held settles (I13). Each resume is a step of the story.
func (w *World) endIncidents(inner func(string)) {
	if !w.opts.Brakes {
		return
	}
	for _, name := range []string{toolChat, toolDesk, toolPay} {
		a := Action{Kind: ResumeTool, Name: name}
		if line := w.describeBrake(a); line != "" {
			inner(line)
			w.applyBrake(a)
		}
	}
	for _, o := range w.server.peek(kindOperation) {
		if !o.(*v1.SideEffectOperation).Spec.Suspend {
			continue
		}
		// Being deleted or not: a suspend left on an object that goes
		// holds nothing, but costs nothing to lift either.
		op := o.DeepCopyObject().(*v1.SideEffectOperation)
		inner(fmt.Sprintf("a person resumes operation %s", op.Name))
		op.Spec.Suspend = false
		if err := w.server.Update(op, false); err != nil {
			w.note("the API server refuses it: %v", err)
		}
	}
}
