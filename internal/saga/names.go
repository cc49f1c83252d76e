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
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Labels on a saga's operations, so that people and the saga find them.
const (
	LabelSaga = "effects.once.dev/saga"
	LabelStep = "effects.once.dev/step"
	LabelRole = "effects.once.dev/role"

	RoleStep         = "step"
	RoleCompensation = "compensation"
)

// LabelValue is the value of LabelSaga for a saga: its name, or, for a
// name longer than a label value may be, its start and a digest of it.
func LabelValue(saga string) string {
	if len(saga) <= validation.LabelValueMaxLength {
		return saga
	}
	sum := sha256.Sum256([]byte(saga))
	return strings.TrimRight(saga[:validation.LabelValueMaxLength-17], ".-") + "-" + hex.EncodeToString(sum[:8])
}

// OperationName is the name of the operation that runs a step (undo: its
// compensation) in a round. Step names hold no dots, so the last segments
// say which step of which saga it is. A later round is a segment of its
// own, all digits, which no step name is. A suffix such as "-2" would not
// do: step a's second round must not take step a-2's name. A name too long for the
// API server keeps a digest of the saga's name instead of all of it.
func OperationName(saga, step string, undo bool, round int32) string {
	suffix := step
	if undo {
		suffix += ".undo"
	}
	if round > 1 {
		suffix += fmt.Sprintf(".%d", round)
	}
	name := saga + "." + suffix
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(saga))
	short := strings.TrimRight(saga[:validation.DNS1123SubdomainMaxLength-len(suffix)-1-17], ".-")
	return short + "-" + hex.EncodeToString(sum[:8]) + "." + suffix
}

// OperationKey is the idempotency key of a step's operation (undo: its
// compensation's) in a round, derived from the saga's key so that two
// sagas with one key make each effect at most once.
func OperationKey(sagaKey, step string, undo bool, round int32) string {
	key := sagaKey + "/" + step
	if undo {
		key += "/compensate"
	}
	if round > 1 {
		key += fmt.Sprintf("/%d", round)
	}
	return key
}

// ScopeName names a saga's scope, its namespace and its effective key, in
// the ids of its announcements: "saga-" and the hex SHA-256 of the two,
// each escaped so that no choice of them can forge another pair's string.
// Sagas of one key in one namespace make each step's effect at most once
// (OperationKey), so they share one scope; the prefix keeps it apart from
// every operation's scope record name ("scope-…").
func ScopeName(namespace, key string) string {
	sum := sha256.Sum256([]byte(url.PathEscape(namespace) + "/" + url.PathEscape(key)))
	return "saga-" + hex.EncodeToString(sum[:])
}

// Effect is what a saga's outcome stands for, in the ids of its
// announcements. It holds the external ids of its steps' and
// compensations' effects, in spec order, each with the name of its step.
// It is empty when none names one. A saga whose steps duplicate another
// saga's adopts their outcomes, external ids included. So it has the same
// Effect. A saga of a key used again after its steps' records expired
// makes new effects. So it has another, unless none of them names an
// external id.
func Effect(st v1.SagaStatus) string {
	var parts []string
	for _, s := range st.Steps {
		if s.ExternalObjectID != "" {
			parts = append(parts, url.QueryEscape(s.Name)+"="+url.QueryEscape(s.ExternalObjectID))
		}
		if c := s.Compensation; c != nil && c.ExternalObjectID != "" {
			parts = append(parts, url.QueryEscape(s.Name+".undo")+"="+url.QueryEscape(c.ExternalObjectID))
		}
	}
	return strings.Join(parts, "&")
}
