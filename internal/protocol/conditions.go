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

package protocol

import (
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/outbox"
)

// transition moves st to state and sets its conditions to match.
func transition(st *v1.SideEffectOperationStatus, state v1.OperationState, reason, msg string, env Env) {
	transitionBlocked(st, state, reason, msg, false, env)
}

// transitionBlocked is transition for a state that waits for something
// outside it (blocked: Stalled, for kstatus).
func transitionBlocked(st *v1.SideEffectOperationStatus, state v1.OperationState, reason, msg string, blocked bool, env Env) {
	st.State = state
	enforceFields(st)
	// The outcome and its announcements are one write: the transactional
	// outbox. The effect is read after enforceFields, as the status keeps
	// it and as the scope's record will keep it for duplicates.
	st.Outbox = outbox.Announce(st.Outbox, outbox.KindOperation,
		outbox.Identity{Scope: env.RecordName, Effect: st.ExternalObjectID}, state, env.Subscribers)
	setConditions(st, reason, msg, blocked, env)
}

// setConditions derives the four conditions from the state, after kstatus.
// Ready=False alone reads "in progress". Stalled=True reads "failed, or
// waiting for a person". blocked marks an operation waiting for something
// outside it (a missing tool), which is stalled whatever its state.
func setConditions(st *v1.SideEffectOperationStatus, reason, msg string, blocked bool, env Env) {
	st.ObservedGeneration = env.Generation
	msg = capMessage(msg)
	told := readyMessage(st.Conditions)
	SetConditions(&st.Conditions, st.State, blocked, env.Generation, env.Now, reason, msg)
	addTransition(&st.History, told, v1.Transition{
		Time: metav1.NewTime(env.Now), State: st.State, Reason: reason, Attempt: st.Attempts,
	})
}

// SetConditions sets Ready, Succeeded, Reconciling and Stalled of a status
// in state (an operation's, or a saga's, whose states are the same) with
// one reason, in a fixed order. blocked marks a status that waits for
// something outside it: stalled whatever its state.
//
// Reconciling and Stalled are present only while True, as kstatus reads
// them (an absent one reads as False) and as Flux's own controllers write
// them; Ready and Succeeded are always there. The message is said once
// where a reader looks for it: on Ready, which kubectl's Message column,
// `kubectl once why` and Flux read, and on Reconciling or Stalled, which
// kstatus and Argo CD report. Succeeded carries the reason alone. Four
// conditions with one message each made up a third of a committed
// operation's status.
func SetConditions(conds *[]metav1.Condition, state v1.OperationState, blocked bool, generation int64, now time.Time,
	reason, msg string) {
	ready, succeeded, reconciling, stalled := conditionStatuses(state, blocked)
	// A new array, as AddHistory makes: the status being decided may share
	// the old one with the caller's status, which must not change.
	*conds = slices.Clone(*conds)
	for typ, status := range map[string]metav1.ConditionStatus{
		v1.ConditionReady:       ready,
		v1.ConditionSucceeded:   succeeded,
		v1.ConditionReconciling: reconciling,
		v1.ConditionStalled:     stalled,
	} {
		if status == metav1.ConditionFalse && (typ == v1.ConditionReconciling || typ == v1.ConditionStalled) {
			meta.RemoveStatusCondition(conds, typ)
			continue
		}
		meta.SetStatusCondition(conds, metav1.Condition{
			Type:               typ,
			Status:             status,
			ObservedGeneration: generation,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            conditionMessage(typ, msg),
		})
	}
	sortConditions(*conds)
}

// conditionMessage is the message a condition of type typ carries: msg on
// all but Succeeded, whose reason is Ready's and whose message would be too.
func conditionMessage(typ string, msg string) string {
	if typ == v1.ConditionSucceeded {
		return ""
	}
	return msg
}

// conditionStatuses maps a state to Ready, Succeeded, Reconciling, Stalled.
func conditionStatuses(state v1.OperationState, blocked bool) (ready, succeeded, reconciling, stalled metav1.ConditionStatus) {
	const t, f, u = metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	switch {
	case state == v1.StateCommitted:
		return t, t, f, f
	case state == v1.StateFailedFinal, state == v1.StateCompensated:
		// A compensated saga undid its work as asked, and ended: it did not
		// do what it was applied for, so it reads failed (kstatus Failed,
		// Argo CD Degraded), and nothing that depends on it proceeds.
		return f, f, f, t
	case state == v1.StateNeedsReview, blocked:
		return f, u, f, t
	default:
		return f, u, t, f
	}
}

// sortConditions keeps a fixed order, so that a status rendered twice
// compares equal.
func sortConditions(cs []metav1.Condition) {
	order := []string{v1.ConditionReady, v1.ConditionSucceeded, v1.ConditionReconciling, v1.ConditionStalled}
	slices.SortStableFunc(cs, func(a, b metav1.Condition) int {
		return slices.Index(order, a.Type) - slices.Index(order, b.Type)
	})
}

// readyMessage is the message of the Ready condition, if there is one.
func readyMessage(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}
