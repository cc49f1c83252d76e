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
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// suspend sets or lifts the saga's spec.suspend.
func suspend(on bool) func(*sim) {
	return func(s *sim) { s.spec.Suspend = on }
}

// cancelSaga sets the saga's spec.cancel.
func cancelSaga(s *sim) { s.spec.Cancel = true }

// readyMessage is the checkpoint's Ready message.
func readyMessage(st v1.SagaStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// saying checks that the Ready message holds want.
func saying(want string) func(*testing.T, v1.SagaStatus) {
	return func(t *testing.T, st v1.SagaStatus) {
		t.Helper()
		if got := readyMessage(st); !strings.Contains(got, want) {
			t.Errorf("the Ready message is %q, want it to hold %q", got, want)
		}
	}
}

// TestDecideSuspend: a suspended saga validates nothing and makes no
// operation, for a step or a compensation; what runs goes on; resumed, it
// goes on where it stopped.
func TestDecideSuspend(t *testing.T) {
	held := func(o outcome) outcome {
		o.Reason = v1.ReasonSuspended
		return o
	}
	runSequences(t, map[string]sequence{
		"FromTheStart": {
			reason: "A saga created suspended validates nothing and creates nothing until it is resumed.",
			setup:  suspend(true),
			stages: []stage{
				{reason: "Held before the first validation.", want: held(outcome{State: planned, Step: "reserve"}),
					check: saying("Suspended (spec.suspend): the validation of step reserve waits until it is resumed")},
				same("It stays so.", nil, held(outcome{State: planned, Step: "reserve"})),
				{reason: "Resumed: validated, then started.", do: suspend(false), acts: start.acts, want: start.want},
				toCharge,
			},
		},
		"BetweenSteps": {
			reason: "The step in flight goes on; the next one waits for the resume.",
			stages: []stage{start,
				same("Suspended while reserve runs: it goes on.", suspend(true), start.want),
				{reason: "Reserve committed: charge waits.", do: set(committed, "order.reserve"),
					want:  held(outcome{State: started, Step: "charge", Done: 1}),
					check: saying("Suspended (spec.suspend): step charge (2 of 3) waits until it is resumed")},
				same("It stays so.", nil, held(outcome{State: started, Step: "charge", Done: 1})),
				{reason: "Resumed: charge starts.", do: suspend(false), acts: toCharge.acts, want: toCharge.want},
			},
		},
		"Compensation": {
			reason: "A compensation waits for the resume too.",
			stages: []stage{start, toCharge, toShip,
				{reason: "Ship fails while suspended: charge's compensation waits.",
					do:    all(suspend(true), set(failedFinal, "order.ship")),
					want:  held(outcome{State: compensatingS, Step: "charge", Done: 2, ToUndo: 2, Failed: "ship"}),
					check: saying("the compensation of step charge waits")},
				{reason: "Resumed.", do: suspend(false), acts: shipFails.acts, want: shipFails.want},
			},
		},
		"Retry": {
			reason: "A person's Retry is applied; the operation it asks for waits for the resume.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[2].RetryUntilDone = true
				return steps
			}(),
			stages: []stage{start, toCharge, toShip,
				same("Ship fails for good.", set(failedFinal, "order.ship"), review(toShip.want, ReasonStepFailed)),
				same("Retried while suspended: applied, and held.", all(suspend(true), resolve("ship", v1.SagaRetry, "r1")),
					held(outcome{State: started, Step: "ship", Done: 2})),
				{reason: "Resumed: round 2.", do: suspend(false), acts: []string{"create order.ship.2 k/ship/2"}, want: toShip.want},
			},
		},
	})
}

// TestSuspendWritesOnce: a held saga decides the same checkpoint on every
// pass, so it is written once.
func TestSuspendWritesOnce(t *testing.T) {
	s := newSim(t, threeSteps())
	s.pass()
	s.spec.Suspend = true
	set(committed, "order.reserve")(s)
	s.pass()
	if reasonOf(s.status) != v1.ReasonSuspended {
		t.Fatalf("the saga is not held: %+v", outcomeOf(s.status))
	}
	first := *s.status.DeepCopy()
	s.now = s.now.Add(5 * 60 * 1e9)
	s.pass()
	if diff := gocmp.Diff(first, s.status); diff != "" {
		t.Errorf("a second pass changed the held checkpoint (-first, +second):\n%s", diff)
	}
}

// TestDecideCancel: a cancelled saga starts no new step. It compensates
// the committed ones, last first, or ends FailedFinal with reason
// Cancelled when none took effect. A step in flight finishes first, and
// its operation's outcome decides.
func TestDecideCancel(t *testing.T) {
	cancelled := func(o outcome) outcome {
		o.Reason = v1.ReasonCancelled
		return o
	}
	compensated1 := outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: v1.ReasonCancelled,
		Stalled: true}
	runSequences(t, map[string]sequence{
		"BeforeAnyStep": {
			reason: "Cancelled before anything ran: no validation, no operation, FailedFinal with reason Cancelled.",
			setup:  cancelSaga,
			stages: []stage{
				{reason: "Ended.", want: cancelled(outcome{State: failedFinal, Failed: "reserve", Stalled: true}),
					check: func(t *testing.T, st v1.SagaStatus) {
						if st.StartedTime != nil || st.CompletionTime == nil || st.Steps[0].Reason != v1.ReasonCancelled {
							t.Errorf("nothing ran, the saga ended: %+v", st)
						}
						saying("Cancelled (spec.cancel) before step reserve started")(t, st)
					}},
				same("It stays so.", nil, cancelled(outcome{State: failedFinal, Failed: "reserve", Stalled: true})),
			},
		},
		"AfterTheFirstStep": {
			reason: "Cancelled after step 1 committed: step 2 never starts, step 1 is compensated.",
			stages: []stage{start,
				{reason: "Reserve commits after the cancel: its compensation starts.", do: all(cancelSaga, set(committed, "order.reserve")),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge"),
					check: saying("The saga was cancelled at step charge; compensating step reserve")},
				{reason: "Compensated.", do: set(committed, "order.reserve.undo"), want: compensated1},
			},
		},
		"UnclaimedStep": {
			reason: "A step's operation that has not claimed is cancelled too, and fails with no call.",
			stages: []stage{start, toCharge,
				{reason: "The saga cancels charge's operation.", do: cancelSaga, acts: []string{"cancel order.charge"},
					want: toCharge.want, check: saying("Cancelled (spec.cancel): step charge (2 of 3) is Planned")},
				{reason: "It fails Cancelled: reserve is compensated.", do: cancelledOp("order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
				{reason: "Compensated.", do: set(committed, "order.reserve.undo"), want: compensated1},
			},
		},
		"ClaimedStep": {
			reason: "A step in flight finishes; it committed, so it is compensated too, last first.",
			stages: []stage{start, toCharge,
				same("Charge claimed, then the cancel: it goes on.", all(set(started, "order.charge"), cancelSaga), toCharge.want),
				{reason: "It commits: no ship, charge undone first.", do: set(committed, "order.charge"),
					acts: []string{"create order.charge.undo k/charge/compensate"}, want: comp("charge", 2, 0, 2, "ship")},
				{reason: "Then reserve.", do: set(committed, "order.charge.undo"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 2, 1, 2, "ship")},
				same("Compensated.", set(committed, "order.reserve.undo"),
					cancelled(outcome{State: compensatedS, Done: 2, Undone: 2, ToUndo: 2, Failed: "ship", Stalled: true})),
			},
		},
		"StepFailsOnItsOwn": {
			reason: "A step in flight that fails for good on its own ends the saga as a failure does.",
			stages: []stage{start, toCharge,
				same("Claimed, then the cancel.", all(set(started, "order.charge"), cancelSaga), toCharge.want),
				{reason: "It fails for good.", do: set(failedFinal, "order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge"),
					check: saying("Step charge failed for good")},
				same("Compensated.", set(committed, "order.reserve.undo"),
					outcome{State: compensatedS, Done: 1, Undone: 1, ToUndo: 1, Failed: "charge", Reason: ReasonCompensated, Stalled: true}),
			},
		},
		"LastStepCommits": {
			reason: "A cancel that comes while the last step runs changes nothing once it commits: no step is left to stop.",
			stages: []stage{start, toCharge, toShip,
				same("Claimed, then the cancel.", all(set(started, "order.ship"), cancelSaga), toShip.want),
				same("Committed.", set(committed, "order.ship"), outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted}),
			},
		},
		"StepInReview": {
			reason: "A step in NeedsReview waits for its person; their decision stands, then the saga stops.",
			stages: []stage{start, toCharge,
				same("Charge needs review, then the cancel.", all(set(needsReview, "order.charge"), cancelSaga),
					review(toCharge.want, v1.ReasonNeedsReview)),
				{reason: "Resolved Committed: it is undone, no ship.", do: set(committed, "order.charge"),
					acts: []string{"create order.charge.undo k/charge/compensate"}, want: comp("charge", 2, 0, 2, "ship")},
			},
		},
		"Approval": {
			reason: "A step that waits for approval is stopped without one.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[1].RequiresApproval = true
				return steps
			}(),
			stages: []stage{start,
				same("Charge waits for approval.", set(committed, "order.reserve"),
					outcome{State: started, Step: "charge", Done: 1, Reason: ReasonWaitingForApproval, Stalled: true}),
				{reason: "Cancelled: reserve is compensated.", do: cancelSaga,
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
			},
		},
		"AfterAnIrreversibleStep": {
			reason: "After an irreversible step committed, the steps after it can only be finished: the cancel does not stop them.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[1].Compensation, steps[1].Irreversible = nil, true
				steps[2].RetryUntilDone = true
				return steps
			}(),
			stages: []stage{start, toCharge,
				{reason: "Charge commits after the cancel: ship starts all the same.", do: all(cancelSaga, set(committed, "order.charge")),
					acts: toShip.acts, want: toShip.want, check: saying("the cancel does not stop it: irreversible step charge committed")},
				same("Committed.", set(committed, "order.ship"), outcome{State: committed, Done: 3, Reason: v1.ReasonCommitted}),
			},
		},
		"RetryUntilDone": {
			reason: "A retryUntilDone step that failed for good, before any irreversible step, is compensated past once cancelled.",
			steps: func() []v1.SagaStep {
				steps := threeSteps()
				steps[1].RetryUntilDone = true
				return steps
			}(),
			stages: []stage{start, toCharge,
				same("Charge fails for good: a person decides.", set(failedFinal, "order.charge"), review(toCharge.want, ReasonStepFailed)),
				{reason: "The person cancels instead: reserve is compensated.", do: cancelSaga,
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
			},
		},
		"Suspended": {
			reason: "A cancelled saga that is suspended decides to compensate, and waits for the resume to do it.",
			stages: []stage{start,
				same("Reserve commits, cancelled and suspended.", all(suspend(true), cancelSaga, set(committed, "order.reserve")),
					outcome{State: compensatingS, Step: "reserve", Done: 1, ToUndo: 1, Failed: "charge", Reason: v1.ReasonSuspended}),
				{reason: "Resumed.", do: suspend(false), acts: []string{"create order.reserve.undo k/reserve/compensate"},
					want: comp("reserve", 1, 0, 1, "charge")},
			},
		},
		"WrittenIntent": {
			reason: "A step's operation that a written checkpoint names may exist beyond the cache: it is made again, " +
				"cancelled, and fails with no call.",
			stages: []stage{start, toCharge,
				{reason: "The cache does not show charge's operation yet.",
					do:   all(cancelSaga, func(s *sim) { delete(s.children, "order.charge"); delete(s.made, "order.charge") }),
					acts: []string{"create order.charge k/charge"}, want: toCharge.want},
				{reason: "It fails Cancelled.", do: cancelledOp("order.charge"),
					acts: []string{"create order.reserve.undo k/reserve/compensate"}, want: comp("reserve", 1, 0, 1, "charge")},
			},
		},
	})
}

// TestCancelMakesOperationsCancelled: the operation a cancelled saga makes
// again, where its checkpoint named it, carries spec.cancel.
func TestCancelMakesOperationsCancelled(t *testing.T) {
	s := newSim(t, threeSteps())
	run(t, s, []stage{start, toCharge})
	delete(s.children, "order.charge")
	delete(s.made, "order.charge")
	s.spec.Cancel = true
	s.pass()
	if c := s.children["order.charge"]; !c.Cancel {
		t.Fatalf("charge's operation was made again without spec.cancel: %+v", c)
	}
}
