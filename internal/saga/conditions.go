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
	"time"
	"unicode"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/text"
)

// maxMessage caps condition messages, which carry tools' answers.
const maxMessage = 1024

// setConditions derives the saga's conditions from its state, as an
// operation's are (protocol.SetConditions). Ready=False alone reads "in
// progress". Stalled=True reads "failed, or waiting for a person": a
// review or, with waiting, an approval.
func setConditions(st *v1.SagaStatus, reason, msg string, waiting bool, now time.Time) {
	// Messages are capitalised sentences without trailing period (house
	// style); the decisions' format strings begin in lower case.
	if r, size := utf8.DecodeRuneInString(msg); r != utf8.RuneError {
		msg = string(unicode.ToUpper(r)) + msg[size:]
	}
	msg = text.Shorten(msg, maxMessage)
	protocol.SetConditions(&st.Conditions, st.State, waiting, st.ObservedGeneration, now, reason, msg)
	protocol.AddHistory(&st.History, v1.Transition{
		Time: metav1.NewTime(now), State: st.State, Reason: reason, Message: msg, Step: st.CurrentStep,
	})
}
