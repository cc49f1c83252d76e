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

// The simulator's checks live in one file per family of invariants, as
// docs/design.md numbers them ("Invariants"). This file holds what they
// share: the invariants' names, fail, and the two drivers. check runs
// after every step; observe runs at every write the API server stores.
// The other checks run where their moment is: at a request a tool
// receives (checkClaimed), at an effect a tool makes (checkParameters,
// checkSagaOrder), at the end of a pass (checkHeld), at a delivery
// (checkAnnouncement), and once a run settles (checkDelivered,
// checkAnnounced, and I13's liveness in run.go).
//
//   - check_effects.go: I1, I4, I5, the effects of one scope.
//   - check_claims.go: I2, I6, claims and fencing.
//   - check_retention.go: I7, what records remember and when they forget.
//   - check_sagas.go: I8, I14 and I13's SagaGone, a saga's order.
//   - check_outcomes.go: I10, I11, what an outcome says of the tool.
//   - check_answers.go: I12, the answers a manager holds.
//   - check_outbox.go: I15, announcements and their deliveries.
//   - check_brakes.go: I17, no call claimed against a person's brake.

import (
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Violation is an invariant that failed, at the step it failed.
type Violation struct {
	Invariant string
	Step      int
	Message   string
}

func (v Violation) String() string {
	return fmt.Sprintf("step %d: %s: %s", v.Step, v.Invariant, v.Message)
}

// The invariants the simulator checks, as docs/design.md numbers them
// ("Invariants"). I3 and I9 are not checked on their own: that section
// says why.
const (
	// InvOneEffect (I1): at most one effect per scope while its record is
	// kept, for every tool that keeps its contract.
	InvOneEffect = "I1 at most one effect per scope"
	// InvClaimFirst (I2): no call before a claim of that attempt is
	// durably written.
	InvClaimFirst = "I2 no call before a durable claim"
	// InvParameters (I4): the same key with other parameters never
	// executes.
	InvParameters = "I4 other parameters never execute"
	// InvFirstResult (I5): the same key with the same parameters returns
	// the first result.
	InvFirstResult = "I5 the same request returns the first result"
	// InvNoStaleWrite (I6): a stale worker cannot overwrite a newer
	// attempt's status.
	InvNoStaleWrite = "I6 no stale write"
	// InvRetention (I7): a scope's record outlives its retention; runs
	// shorter than a retention forget nothing.
	InvRetention = "I7 records outlive the retention"
	// InvCompensated (I8): a saga is never Compensated while a step's
	// effect stands.
	InvCompensated = "I8 no Compensated while an effect stands"
	// InvCommittedHasEffect (I10): no Committed without an effect at the
	// tool.
	InvCommittedHasEffect = "I10 no Committed without an effect"
	// InvNoFalseNoEffect (I11): nothing reports "no effect" while the tool
	// holds the effect; a person's decision is reported as a decision.
	InvNoFalseNoEffect = "I11 no false \"no effect\""
	// InvAnswerKept (I12): an answer a manager received is recorded, as
	// the outcome or as evidence, by its next pass that reaches the API
	// server; it is never dropped.
	InvAnswerKept = "I12 an answer in hand is never dropped"
	// InvLiveness (I13): once faults stop, every operation reaches a
	// terminal state or NeedsReview within ten simulated minutes, longer
	// only where a declared delay says so.
	InvLiveness = "I13 liveness"
	// InvSagaOrder (I14): a saga step's effect comes only after the step
	// before it committed; a compensation's only for an effect that
	// stands, once every later step's standing effect is undone.
	InvSagaOrder = "I14 saga order"
	// InvOneAnnouncement (I15): the outbox announces each effect under one
	// id, whatever object carries it, at least once.
	InvOneAnnouncement = "I15 one effect, one announcement id"
	// InvDecisionTold (I16): a person who decides through a caller is told
	// the truth about it: never "not recorded" for a decision the object
	// holds.
	InvDecisionTold = "I16 a decision is told as recorded or not"
	// InvBrakes (I17): no first attempt, retry or re-send is claimed on an
	// operation that is suspended or cancelled, nor by a pass that read
	// its tool suspended.
	InvBrakes = "I17 no call claimed against a brake"
)

// fail records a violation once per invariant and subject.
func (w *World) fail(inv, subject, format string, args ...any) {
	for _, v := range w.violations {
		if v.Invariant == inv && strings.HasPrefix(v.Message, subject+":") {
			return
		}
	}
	v := Violation{Invariant: inv, Step: w.step, Message: subject + ": " + fmt.Sprintf(format, args...)}
	w.violations = append(w.violations, v)
	w.story = append(w.story, "    !! "+v.Invariant+": "+v.Message)
}

// check runs the invariants on the world after a step.
func (w *World) check() {
	w.forget()
	ops := map[string][]*v1.SideEffectOperation{}
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		ops[refOf(op)] = append(ops[refOf(op)], op)
	}
	w.checkOneEffect()
	refs := make([]string, 0, len(ops))
	for ref := range ops {
		refs = append(refs, ref)
	}
	slices.Sort(refs)
	for _, ref := range refs {
		list := ops[ref]
		w.checkFirstResult(ref, list)
		for _, op := range list {
			w.checkAccepted(op)
			w.checkOutcome(ref, op, list)
		}
	}
	w.checkCompensated()
	w.checkSagaGone()
	w.checkRecords()
	w.accountGone()
	for _, h := range w.held {
		if h.m.incarnation != h.incarnation {
			h.effect = nil // the process that held it is gone
		}
	}
	w.pruneHeld()
}

// history is what the API server stored over a run, kept by the world as
// each write lands (APIServer.Observe): what a check needs once the
// object that held it is gone.
type history struct {
	// claims holds every claim an operation's status held: its UID, its
	// holder and its attempt.
	claims map[claimKey]bool
	// announced holds, by event id, the last state an outbox entry had
	// and the lifetime of the namespace it was written in.
	announced map[string]announcement
}

type claimKey struct {
	uid     string
	holder  string
	attempt int32
}

type announcement struct {
	object    string
	state     v1.DeliveryState
	namespace int
}

// observe is the API server's hook: it runs at every stored write,
// before the write is visible, with the object as it was and as it is
// (nil when absent).
func (w *World) observe(old, cur client.Object) {
	if cur == nil {
		if rec, ok := old.(*v1.IdempotencyRecord); ok {
			w.checkRecordOwed(rec)
		}
		return
	}
	switch o := cur.(type) {
	case *v1.SideEffectOperation:
		if c := o.Status.Claim; c != nil {
			w.history.claims[claimKey{uid: string(o.UID), holder: c.Holder, attempt: c.Attempt}] = true
		}
		w.noteAnnouncements(o.Name, o.Status.Outbox)
		if prev, ok := old.(*v1.SideEffectOperation); ok && prev.UID == o.UID {
			w.checkStaleWrite(prev, o)
			w.checkFinalizerKept(prev, o)
			w.checkBraked(prev, o)
		}
	case *v1.Saga:
		w.noteAnnouncements(o.Name, o.Status.Outbox)
	case *v1.IdempotencyRecord:
		if out := o.Spec.Outcome; out != nil {
			if e := w.effectByID(out.ExternalObjectID); e != nil {
				e.InRecord = true
			}
		}
	}
}

func (w *World) noteAnnouncements(object string, entries []v1.OutboxEntry) {
	for _, e := range entries {
		w.history.announced[e.EventID] = announcement{object: object, state: e.State, namespace: w.namespaces}
	}
}
