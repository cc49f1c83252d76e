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
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// maxMessage caps condition messages, which carry tools' answers.
const maxMessage = 1024

// setConditions derives the saga's conditions from its state, after
// kstatus, as an operation's are: Ready=False alone reads "in progress";
// Stalled=True reads "failed, or waiting for a person" (a review or, with
// waiting, an approval).
func setConditions(st *v1.SagaStatus, reason, msg string, waiting bool, now time.Time) {
	const t, f, u = metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown
	ready, succeeded, reconciling, stalled := f, u, t, f
	switch {
	case st.State == v1.StateCommitted:
		ready, succeeded, reconciling = t, t, f
	case st.State == v1.StateCompensated:
		// Done as asked: every committed step was undone. Ready, so that
		// kstatus reads Current; not Succeeded.
		ready, succeeded, reconciling = t, f, f
	case st.State == v1.StateFailedFinal:
		succeeded, reconciling, stalled = f, f, t
	case st.State == v1.StateNeedsReview, waiting:
		reconciling, stalled = f, t
	}
	// Messages are capitalised sentences without trailing period (house
	// style); the decisions' format strings begin in lower case.
	if r, size := utf8.DecodeRuneInString(msg); r != utf8.RuneError {
		msg = string(unicode.ToUpper(r)) + msg[size:]
	}
	if len(msg) > maxMessage {
		msg = strings.ToValidUTF8(msg[:maxMessage-3], "") + "..."
	}
	for typ, status := range map[string]metav1.ConditionStatus{
		v1.ConditionReady:       ready,
		v1.ConditionSucceeded:   succeeded,
		v1.ConditionReconciling: reconciling,
		v1.ConditionStalled:     stalled,
	} {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type:               typ,
			Status:             status,
			ObservedGeneration: st.ObservedGeneration,
			LastTransitionTime: metav1.NewTime(now),
			Reason:             reason,
			Message:            msg,
		})
	}
	order := []string{v1.ConditionReady, v1.ConditionSucceeded, v1.ConditionReconciling, v1.ConditionStalled}
	slices.SortFunc(st.Conditions, func(a, b metav1.Condition) int {
		return slices.Index(order, a.Type) - slices.Index(order, b.Type)
	})
}
