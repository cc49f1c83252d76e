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

package kubectlonce

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
)

func TestSagaResolvable(t *testing.T) {
	waiting := func(reason, msg string) *v1.Saga {
		s := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Name: "change"}}
		s.Status.State = v1.StateNeedsReview
		s.Status.Conditions = []metav1.Condition{{Type: v1.ConditionStalled, Status: metav1.ConditionTrue, Reason: reason, Message: msg}}
		return s
	}
	cannot := waiting(saga.ReasonCannotCompensate,
		"Step ticket's effect was made by operation t-1, not by this saga, which therefore does not undo it")
	cases := map[string]struct {
		reason string
		saga   *v1.Saga
		action v1.SagaResolutionAction
		err    string
	}{
		"FailedCompensation": {reason: "A compensation that failed for good may be retried.",
			saga: waiting(saga.ReasonCompensationFailed, "Step ticket: compensation failed"), action: v1.SagaRetry},
		"CannotCompensateMarked": {reason: "A step Once cannot undo may be marked compensated.",
			saga: cannot, action: v1.SagaMarkCompensated},
		"CannotCompensateRetried": {reason: "The saga applies only MarkCompensated there: a Retry would wait for ever.",
			saga: cannot, action: v1.SagaRetry,
			err: "saga change waits because step ticket's effect was made by operation t-1, not by this saga, which " +
				"therefore does not undo it: Once cannot undo it, so only --compensated applies, once you have undone " +
				"the effect by other means"},
		"Foreign": {reason: "No resolution moves a saga whose operation another made.",
			saga:   waiting(saga.ReasonForeignOperation, "Step ticket: SideEffectOperation change-ticket exists, but this saga did not make it"),
			action: v1.SagaMarkCompensated,
			err: "saga change waits because step ticket: SideEffectOperation change-ticket exists, but this saga did not " +
				"make it: no resolution applies; it goes on once that operation is gone"},
		"InvalidSpec": {reason: "No resolution mends a spec that no longer compiles.",
			saga: waiting(v1.ReasonInvalidSpec, "The spec no longer compiles, and steps have run: x"), action: v1.SagaRetry,
			err: "saga change stopped because the spec no longer compiles, and steps have run: x: no resolution applies"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.err, errString(sagaResolvable(tc.saga, tc.action))); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
