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
	v1 "github.com/once-dev/once/api/v1alpha1"
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
