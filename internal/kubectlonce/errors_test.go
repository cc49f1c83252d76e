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
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/once-dev/once/internal/review"
)

func TestRequestError(t *testing.T) {
	refusal := errors.New("x is Committed: there is nothing to resolve")
	cases := map[string]struct {
		reason string
		err    error
		want   string
	}{
		"Refusal": {reason: "A refusal of internal/review is printed as it is.", err: refusal, want: refusal.Error()},
		"GetOperation": {reason: "The read of a saga's operation is worded as the plugin words a get of an operation.",
			err: &review.RequestError{Verb: "get", Kind: review.KindOperation, Namespace: "team-a", Name: "s-ticket",
				Err: apierrors.NewForbidden(operationKind.groupResource(), "s-ticket", errors.New("no"))},
			want: "you may not get sideeffectoperations.effects.once.dev in namespace team-a"},
		"PatchSaga": {reason: "The write of a saga is worded as the plugin words a patch of a saga.",
			err: &review.RequestError{Verb: "patch", Kind: review.KindSaga, Namespace: "team-a", Name: "s",
				Err: apierrors.NewNotFound(sagaKind.groupResource(), "s")},
			want: "no Saga s in namespace team-a"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, errString(requestError(tc.err))); diff != "" {
				t.Errorf("%s\nrequestError: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
