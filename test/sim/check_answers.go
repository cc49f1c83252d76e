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

// Answers a manager holds: what a tool answered reaches the API server.
//
// I12: an answer a manager received is written by its next pass that
// reaches the API server, as the outcome or as evidence, and is never
// dropped. Once its operation is gone, the scope's record or an Event
// keeps it. It is checked at the end of each pass (checkHeld); after each
// step, the answers already kept are cleared (accountGone, pruneHeld).

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// checkHeld runs after a pass of an operation that reached the API server
// throughout: every answer the manager holds for it must now be recorded.
func (w *World) checkHeld(m *Manager, nn types.NamespacedName) {
	op := &v1.SideEffectOperation{}
	exists := w.server.Get(objKey{Kind: kindOperation, NamespacedName: nn}, op) == nil
	for _, h := range w.held {
		if h.effect == nil || h.m != m || h.incarnation != m.incarnation || h.op != nn {
			continue
		}
		if !exists || h.uid != op.UID {
			w.checkHeldAfterGone(h)
			continue
		}
		if w.recordedIn(op, h.effect) {
			h.effect.Known = true
			h.effect = nil
			continue
		}
		w.fail(InvAnswerKept, nn.Name, "manager %s received effect %s at step %d, and its pass ended with %s %s without recording it",
			m.Name, h.effect.ID, h.step, op.Status.State.OrPlanned(), protocol.ReadyReason(op.Status))
		h.effect = nil
	}
}

// checkHeldAfterGone is I12 for an answer whose operation went (deleted, or
// replaced by another object of its name) before the pass that holds it
// ended: the answer is in the scope's record, or raised in an Event that
// names its effect. A namespace a person deleted forgot it on purpose.
func (w *World) checkHeldAfterGone(h *heldAnswer) {
	e := h.effect
	h.effect = nil
	if w.wiped[e.Namespace] || w.keptAfterGone(e) {
		return
	}
	w.fail(InvAnswerKept, h.op.Name, "manager %s received effect %s at step %d for an object that went (uid %s), "+
		"and its pass ended without it in the scope's record or an Event", h.m.Name, e.ID, h.step, h.uid)
}

// accountGone clears, after each step, the held answers that a status, a
// record or an Event keeps already: a write whose answer was lost may have
// landed, and what is kept may go later by its retention, which forgets
// on purpose (I7). An answer of an operation that still exists is cleared
// once its status names the effect; one of an operation that went, once a
// record or an Event does.
func (w *World) accountGone() {
	for _, h := range w.held {
		if h.effect == nil {
			continue
		}
		if op := w.operationByUID(h.uid); op != nil {
			if w.recordedIn(op, h.effect) {
				h.effect.Known, h.effect = true, nil
			}
			continue
		}
		if w.keptAfterGone(h.effect) {
			h.effect = nil
		}
	}
}

// keptAfterGone reports whether an answer naming e is in a scope's record
// or an Event now, and marks e known if it is. A record that named it and
// whose lifetime then ended kept it too: what retention forgets after is
// I7's to judge.
func (w *World) keptAfterGone(e *Effect) bool {
	if e.InRecord && e.Epoch < w.epochs[e.Ref] {
		return true
	}
	for _, o := range w.server.peek(kindRecord) {
		if out := o.(*v1.IdempotencyRecord).Spec.Outcome; out != nil && out.ExternalObjectID == e.ID {
			e.Known = true
			return true
		}
	}
	for _, ev := range w.events {
		if strings.Contains(ev.note, e.ID) {
			e.Known = true
			return true
		}
	}
	return false
}

func (w *World) pruneHeld() {
	kept := w.held[:0]
	for _, h := range w.held {
		if h.effect != nil {
			kept = append(kept, h)
		}
	}
	w.held = kept
}

// heldByLive reports whether a manager that still runs holds the answer
// that names e, not yet recorded.
func (w *World) heldByLive(e *Effect) bool {
	for _, h := range w.held {
		if h.effect == e && h.m.incarnation == h.incarnation {
			return true
		}
	}
	return false
}

// recordedIn reports whether an operation's status, or an Event about it,
// names the effect.
func (w *World) recordedIn(op *v1.SideEffectOperation, e *Effect) bool {
	st := op.Status
	if st.ExternalObjectID == e.ID {
		return true
	}
	for _, o := range st.Observations {
		if o.ExternalObjectID == e.ID {
			return true
		}
	}
	for _, ev := range w.events {
		if ev.regarding.Name == op.Name && strings.Contains(ev.note, e.ID) {
			return true
		}
	}
	return false
}

// operationByUID is the operation with that UID, or nil.
func (w *World) operationByUID(uid types.UID) *v1.SideEffectOperation {
	for _, o := range w.server.peek(kindOperation) {
		if o.GetUID() == uid {
			return o.(*v1.SideEffectOperation)
		}
	}
	return nil
}
