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
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	validationfield "k8s.io/apimachinery/pkg/util/validation/field"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

var t0 = time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)

func at(sec int) metav1.Time { return metav1.NewTime(t0.Add(time.Duration(sec) * time.Second)) }

func TestOperationStory(t *testing.T) {
	cases := map[string]struct {
		reason string
		st     v1.SideEffectOperationStatus
		want   []string // What of each entry, in order
	}{
		"Empty": {
			reason: "A record the manager has not touched has no story.",
			want:   []string{},
		},
		"SameSecond": {
			reason: "Within a second, the claim comes before its call, and the call before the outcome it led to.",
			st: v1.SideEffectOperationStatus{
				History: []v1.Transition{
					{Time: at(0), State: v1.StatePlanned, Reason: "Pending"},
					{Time: at(0), State: v1.StateStarted, Reason: "Executing", Attempt: 1},
					{Time: at(0), State: v1.StateUnknown, Reason: "OutcomeUnknown", Attempt: 1},
				},
				Observations: []v1.Observation{{Time: at(0), Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown"}},
			},
			want: []string{"-> Planned", "-> Started", "call", "-> Unknown"},
		},
		"ReviewAndResolution": {
			reason: "A lookup follows the move to Reconciling; the resolution comes between NeedsReview and Committed.",
			st: v1.SideEffectOperationStatus{
				History: []v1.Transition{
					{Time: at(0), State: v1.StateStarted, Reason: "Executing", Attempt: 1},
					{Time: at(2), State: v1.StateUnknown, Reason: "OutcomeUnknown", Attempt: 1},
					{Time: at(3), State: v1.StateReconciling, Reason: "Reconciling", Attempt: 1},
					{Time: at(3), State: v1.StateNeedsReview, Reason: "NeedsReview", Attempt: 1},
					{Time: at(9), State: v1.StateCommitted, Reason: "ResolvedCommitted", Attempt: 1},
				},
				Observations: []v1.Observation{
					{Time: at(2), Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown"},
					{Time: at(3), Kind: v1.ObservationLookup, Attempt: 1, Outcome: "Undecidable"},
					{Time: at(9), Kind: v1.ObservationResolution, Attempt: 1, Outcome: "MarkCommitted"},
				},
			},
			want: []string{"-> Started", "call", "-> Unknown", "-> Reconciling", "lookup", "-> NeedsReview",
				"resolution", "-> Committed"},
		},
		"NextAttemptSameSecond": {
			reason: "An earlier attempt's outcome comes before a later attempt's call in the same second.",
			st: v1.SideEffectOperationStatus{
				History: []v1.Transition{
					{Time: at(0), State: v1.StateStarted, Reason: "Executing", Attempt: 1},
					{Time: at(0), State: v1.StateFailedRetryable, Reason: "BackingOff", Attempt: 1},
					{Time: at(0), State: v1.StateStarted, Reason: "Executing", Attempt: 2},
					{Time: at(0), State: v1.StateCommitted, Reason: "Committed", Attempt: 2},
				},
				Observations: []v1.Observation{
					{Time: at(0), Kind: v1.ObservationCall, Attempt: 1, Outcome: "Retryable"},
					{Time: at(0), Kind: v1.ObservationCall, Attempt: 2, Outcome: "Succeeded"},
				},
			},
			want: []string{"-> Started", "call", "-> FailedRetryable", "-> Started", "call", "-> Committed"},
		},
		"ObservationsOutliveHistory": {
			reason: "Lists bounded apart keep their own order: an older observation goes first.",
			st: v1.SideEffectOperationStatus{
				History:      []v1.Transition{{Time: at(5), State: v1.StateNeedsReview, Reason: "NeedsReview", Attempt: 2}},
				Observations: []v1.Observation{{Time: at(1), Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown"}},
			},
			want: []string{"call", "-> NeedsReview"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := []string{}
			for _, e := range operationStory(&tc.st) {
				got = append(got, e.What)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\noperationStory(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestEntries(t *testing.T) {
	cases := map[string]struct {
		reason string
		got    entry
		want   entry
	}{
		"Transition": {
			reason: "A transition shows its state, reason and message.",
			got: transitionEntry(v1.Transition{Time: at(0), State: v1.StateNeedsReview, Reason: "NeedsReview",
				Message: "Cannot tell", Attempt: 1}, "1"),
			want: entry{Time: at(0).Time, What: "-> NeedsReview", At: "1", Detail: "NeedsReview: Cannot tell"},
		},
		"TransitionWithoutState": {
			reason: "An empty state reads Planned.",
			got:    transitionEntry(v1.Transition{Time: at(0), Reason: "Pending"}, "-"),
			want:   entry{Time: at(0).Time, What: "-> Planned", At: "-", Detail: "Pending"},
		},
		"Call": {
			reason: "A call shows its outcome, status, external id, request, holder and message.",
			got: observationEntry(v1.Observation{Time: at(1), Kind: v1.ObservationCall, Attempt: 2, Holder: "m-1",
				Outcome: "Succeeded", Request: "POST /charges body 0a1b", HTTPStatus: 201, ExternalObjectID: "ch_1",
				Message: "Created"}),
			want: entry{Time: at(1).Time, What: "call", At: "2",
				Detail: "Succeeded, HTTP 201, external id ch_1, POST /charges body 0a1b, by m-1: Created"},
		},
		"Lookup": {
			reason: "A lookup without a response shows its outcome and message only.",
			got: observationEntry(v1.Observation{Time: at(1), Kind: v1.ObservationLookup, Attempt: 1,
				Outcome: "Undecidable", Message: "connection refused"}),
			want: entry{Time: at(1).Time, What: "lookup", At: "1", Detail: "Undecidable: connection refused"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseName(t *testing.T) {
	type want struct {
		kind *kind
		name string
		err  string
	}
	cases := map[string]struct {
		reason string
		arg    string
		saga   bool
		want   want
	}{
		"Bare":          {reason: "A bare name has no kind.", arg: "x", want: want{name: "x"}},
		"BareSaga":      {reason: "--saga makes a bare name a saga's.", arg: "x", saga: true, want: want{kind: &sagaKind, name: "x"}},
		"ShortOp":       {reason: "seo/ names an operation.", arg: "seo/x", want: want{kind: &operationKind, name: "x"}},
		"LongOp":        {reason: "The qualified resource names an operation.", arg: "sideeffectoperations.effects.once.dev/x", want: want{kind: &operationKind, name: "x"}},
		"Saga":          {reason: "saga/ names a saga.", arg: "Saga/x", want: want{kind: &sagaKind, name: "x"}},
		"ShortSaga":     {reason: "sg/ names a saga.", arg: "sg/x", want: want{kind: &sagaKind, name: "x"}},
		"OtherKind":     {reason: "Other kinds are refused.", arg: "pod/x", want: want{err: `"pod" is neither a SideEffectOperation (seo/NAME) nor a Saga (saga/NAME)`}},
		"Empty":         {reason: "A name is required.", arg: "", want: want{err: "a name is required"}},
		"NoName":        {reason: "A kind without a name is refused.", arg: "seo/", want: want{err: `"seo/" is not a name: say NAME, seo/NAME or saga/NAME`}},
		"SagaFlagClash": {reason: "--saga with seo/ is a contradiction.", arg: "seo/x", saga: true, want: want{err: "--saga and seo/x disagree"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			k, n, err := parseName(tc.arg, tc.saga)
			got := want{kind: k, name: n}
			if err != nil {
				got = want{err: err.Error()}
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{}), cmp.Comparer(func(a, b *kind) bool { return a == b })); diff != "" {
				t.Errorf("%s\nparseName(%q, %v): -want, +got:\n%s", tc.reason, tc.arg, tc.saga, diff)
			}
		})
	}
}

func TestOperationResolution(t *testing.T) {
	cases := map[string]struct {
		reason string
		flags  resolveFlags
		want   *v1.Resolution
		err    string
	}{
		"Committed": {
			reason: "--committed with an id marks the effect committed.",
			flags:  resolveFlags{committed: true, externalID: "ch_1", by: "alice", reason: "found it"},
			want:   &v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_1", By: "alice", Reason: "found it"},
		},
		"Retry":  {reason: "--retry allows one more attempt.", flags: resolveFlags{retry: true, by: "bob"}, want: &v1.Resolution{Action: v1.ResolutionRetry, By: "bob"}},
		"Fail":   {reason: "--fail fails it.", flags: resolveFlags{fail: true, by: "bob"}, want: &v1.Resolution{Action: v1.ResolutionFail, By: "bob"}},
		"None":   {reason: "A decision is required.", flags: resolveFlags{by: "bob"}, err: "say what you decided: --committed --external-id ID, --retry or --fail (for a saga's compensation: --retry or --compensated)"},
		"Two":    {reason: "Only one decision.", flags: resolveFlags{retry: true, fail: true, by: "bob"}, err: "choose one of --committed, --retry, --fail and --compensated"},
		"NoID":   {reason: "--committed needs the id.", flags: resolveFlags{committed: true, by: "bob"}, err: "--committed needs --external-id: the id of the effect you found at the tool"},
		"IDOnly": {reason: "An id goes with --committed only.", flags: resolveFlags{retry: true, externalID: "ch_1", by: "bob"}, err: "--external-id goes with --committed only"},
		"NoBy":   {reason: "Someone decides.", flags: resolveFlags{retry: true}, err: "--by is required: the kubeconfig names no user and $USER is empty"},
		"Compensated": {reason: "--compensated is a saga's.", flags: resolveFlags{compensated: true, by: "bob"},
			err: "--compensated resolves a saga's compensation; an operation takes --committed, --retry or --fail"},
		"Step": {reason: "--step is a saga's.", flags: resolveFlags{retry: true, step: "a", by: "bob"}, err: "--step names a saga's step; an operation has none"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.flags.operationResolution()
			if diff := cmp.Diff(tc.err, errString(err)); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nresolution: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestSagaAction(t *testing.T) {
	cases := map[string]struct {
		reason string
		flags  resolveFlags
		want   v1.SagaResolutionAction
		err    string
	}{
		"Retry":       {reason: "--retry runs the compensation again.", flags: resolveFlags{retry: true, by: "a"}, want: v1.SagaRetry},
		"Compensated": {reason: "--compensated records an undo by hand.", flags: resolveFlags{compensated: true, by: "a"}, want: v1.SagaMarkCompensated},
		"Committed": {reason: "--committed is an operation's.", flags: resolveFlags{committed: true, externalID: "x", by: "a"},
			err: "a saga takes --retry or --compensated; --committed and --fail resolve an operation (an operation of the saga in NeedsReview is resolved on the operation itself)"},
		"ID": {reason: "An id is an operation's.", flags: resolveFlags{retry: true, externalID: "x", by: "a"}, err: "--external-id goes with an operation's --committed only"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := tc.flags.sagaAction()
			if diff := cmp.Diff(tc.err, errString(err)); diff != "" {
				t.Errorf("%s\nerror: -want, +got:\n%s", tc.reason, diff)
			}
			if got != tc.want {
				t.Errorf("%s\nsagaAction() = %q, want %q", tc.reason, got, tc.want)
			}
		})
	}
}

func TestAPIError(t *testing.T) {
	gr := operationKind.groupResource()
	cases := map[string]struct {
		reason string
		err    error
		verb   string
		ns     string
		name   string
		want   string
	}{
		"Forbidden": {
			reason: "A forbidden request names the verb, the resource and the namespace.",
			err:    apierrors.NewForbidden(gr, "x", errors.New(`User "bob" cannot patch resource`)),
			verb:   "patch", ns: "team-a", name: "x",
			want: "you may not patch sideeffectoperations.effects.once.dev in namespace team-a",
		},
		"ForbiddenEverywhere": {
			reason: "A list across namespaces says so.",
			err:    apierrors.NewForbidden(gr, "", errors.New("no")),
			verb:   "list",
			want:   "you may not list sideeffectoperations.effects.once.dev in all namespaces",
		},
		"NotFound": {
			reason: "A missing object is named.",
			err:    apierrors.NewNotFound(gr, "x"),
			verb:   "get", ns: "team-a", name: "x",
			want: "no SideEffectOperation x in namespace team-a",
		},
		"Invalid": {
			reason: "A refusal by the API server's validation carries its message.",
			err: apierrors.NewInvalid(v1.GroupVersion.WithKind("SideEffectOperation").GroupKind(), "x", validationfield.ErrorList{
				validationfield.Invalid(validationfield.NewPath("spec"), "object", "spec.resolution can be set or changed only while the operation is in NeedsReview")}),
			verb: "patch", ns: "team-a", name: "x",
			want: `the API server refused to patch SideEffectOperation x: spec: Invalid value: "object": spec.resolution can be set or changed only while the operation is in NeedsReview`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := apiError(tc.err, tc.verb, operationKind, tc.ns, tc.name)
			if diff := cmp.Diff(tc.want, errString(got)); diff != "" {
				t.Errorf("%s\napiError: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
