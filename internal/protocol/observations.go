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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/text"
)

// maxObservations bounds status.observations.
const maxObservations = 16

// repeated reports whether an observation is one of many questions about
// the same attempt, the evidence a person needs least: the first call of
// an attempt and what ended it matter more than the tenth lookup.
func repeated(o v1.Observation) bool {
	return o.Kind == v1.ObservationLookup || o.Kind == v1.ObservationResend
}

// observe appends o. When the list is full it drops the oldest repeated
// question, or, when there is none, the oldest observation.
func observe(st *v1.SideEffectOperationStatus, o v1.Observation) {
	obs := append(append([]v1.Observation(nil), st.Observations...), o)
	for len(obs) > maxObservations {
		drop := 0
		for i := range obs[:len(obs)-1] {
			if repeated(obs[i]) {
				drop = i
				break
			}
		}
		obs = append(obs[:drop], obs[drop+1:]...)
	}
	st.Observations = obs
}

// CallObservation is the evidence of an answer to a call.
func CallObservation(env Env, kind v1.ObservationKind, attempt int32, r CallResult) v1.Observation {
	return v1.Observation{Time: metav1.NewTime(env.Now), Kind: kind, Attempt: attempt, Holder: env.Holder,
		Outcome: string(r.Outcome), Request: r.Request, HTTPStatus: r.HTTPStatus,
		ExternalObjectID: r.ExternalObjectID, Message: capMessage(r.Message)}
}

// LookupObservation is the evidence of an answer to a lookup.
func LookupObservation(env Env, attempt int32, r LookupResult) v1.Observation {
	return v1.Observation{Time: metav1.NewTime(env.Now), Kind: v1.ObservationLookup, Attempt: attempt,
		Holder: env.Holder, Outcome: string(r.Verdict), Request: r.Request, HTTPStatus: r.HTTPStatus,
		ExternalObjectID: r.ExternalObjectID, Message: capMessage(r.Message)}
}

// maxMessage bounds messages kept in status.
const maxMessage = 512

func capMessage(s string) string {
	return text.Shorten(s, maxMessage)
}
