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

package mcpgateway

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/pkg/once"
)

// TestShowsForms: a host is sent a form only if it takes forms; one that
// named the URL mode alone was once sent one too.
func TestShowsForms(t *testing.T) {
	cases := map[string]struct {
		e    *mcp.ElicitationCapabilities
		want bool
	}{
		"None":        {nil, false},
		"NoModeNamed": {&mcp.ElicitationCapabilities{}, true},
		"Form":        {&mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}, true},
		"URLOnly":     {&mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}, false},
		"Both": {&mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{},
			URL: &mcp.URLElicitationCapabilities{}}, true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := showsForms(tc.e); got != tc.want {
				t.Errorf("showsForms = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestBoundTo: an answer counts only for the object, incarnation, request
// and review it was asked about; one about an earlier review was once
// recorded on the next.
func TestBoundTo(t *testing.T) {
	r := once.Request{Namespace: "shop", Tool: v1.ToolReference{Name: "payments"}, Operation: "charge",
		Key: "k", Parameters: []byte(`{"amount":1}`)}
	hash, err := once.RequestHash(r)
	if err != nil {
		t.Fatal(err)
	}
	op := &v1.SideEffectOperation{}
	op.Name, op.UID = "op", "uid-1"
	op.Spec.Parameters = &runtime.RawExtension{Raw: r.Parameters}
	op.Status.RequestHash, op.Status.ReviewGeneration = hash, 4
	asked := decisionState{Kind: fieldOperation, Name: "op", UID: "uid-1", RequestHash: hash, Review: 4}
	other := r
	other.Parameters = []byte(`{"amount":2}`)
	cases := map[string]struct {
		st   decisionState
		r    once.Request
		want string
	}{
		"AskedAboutIt":         {asked, r, ""},
		"AnotherIncarnation":   {with(asked, func(s *decisionState) { s.UID = "uid-0" }), r, "another request"},
		"AnotherObject":        {with(asked, func(s *decisionState) { s.Name = "op-2" }), r, "another request"},
		"ASaga":                {with(asked, func(s *decisionState) { s.Kind = fieldSaga }), r, "another request"},
		"AnotherRequestHash":   {with(asked, func(s *decisionState) { s.RequestHash = "sha256:0" }), r, "another request"},
		"OtherArguments":       {asked, other, "another request"},
		"AnEarlierReview":      {with(asked, func(s *decisionState) { s.Review = 2 }), r, "an earlier attempt"},
		"BeforeReviewsCounted": {with(asked, func(s *decisionState) { s.Review = 0 }), r, "an earlier attempt"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.st.boundTo(op, tc.r)
			if tc.want == "" && err != nil {
				t.Fatalf("want no error, got %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("want an error about %q, got %v", tc.want, err)
			}
		})
	}
}

func with(s decisionState, change func(*decisionState)) decisionState {
	change(&s)
	return s
}

// TestResolutionOf: the form's answer as a resolution, within the CRD's
// bounds: a long caller's name is shortened in by, a reason too long is
// refused before anything is written.
func TestResolutionOf(t *testing.T) {
	alice := &caller{user: "alice"}
	long := &caller{user: "oidc:" + strings.Repeat("u", 300)}
	cases := map[string]struct {
		content map[string]any
		c       *caller
		want    v1.Resolution
		err     string
	}{
		"Happened": {content: map[string]any{"decision": "happened", fieldExternalID: "ch_1", fieldReason: "seen"},
			c: alice, want: v1.Resolution{Action: v1.ResolutionMarkCommitted, ExternalObjectID: "ch_1", By: "mcp:alice",
				Reason: "seen"}},
		"RetryDropsTheID": {content: map[string]any{"decision": "did not happen: retry", fieldExternalID: "ch_1",
			fieldReason: "not there"}, c: alice, want: v1.Resolution{Action: v1.ResolutionRetry, By: "mcp:alice",
			Reason: "not there"}},
		"HappenedWithoutAnID": {content: map[string]any{"decision": "happened", fieldReason: "seen"}, c: alice,
			err: "needs the effect's id"},
		"UnknownDecision": {content: map[string]any{"decision": "maybe", fieldReason: "?"}, c: alice, err: "no decision"},
		"NoReason":        {content: map[string]any{"decision": "do not do it"}, c: alice, err: "no decision and reason"},
		"ReasonTooLong": {content: map[string]any{"decision": "do not do it", fieldReason: strings.Repeat("é", 1025)},
			c: alice, err: "longer than 1024 characters"},
		"ReasonAtTheBound": {content: map[string]any{"decision": "do not do it", fieldReason: strings.Repeat("é", 1024)},
			c: alice, want: v1.Resolution{Action: v1.ResolutionFail, By: "mcp:alice", Reason: strings.Repeat("é", 1024)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := resolutionOf(tc.content, tc.c)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want an error about %q, got %v", tc.err, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
	got, err := resolutionOf(map[string]any{"decision": "do not do it", fieldReason: "r"}, long)
	if err != nil || len(got.By) > 253 || !strings.HasPrefix(got.By, "mcp:oidc:") {
		t.Fatalf("a caller of %d characters: by %q (%d bytes), %v; want at most 253", len(long.user), got.By,
			len(got.By), err)
	}
}

// TestAnswerRaceWithANewReview: the gateway read the operation in review
// 4, where the question was asked; before its write landed, a person
// resolved that review, the manager applied it, and the next attempt's
// answer was lost too (review 5). The write conflicts, and the answer,
// which was about attempt 4, must not become review 5's decision: it once
// was, after the re-read checked only that the operation still needed
// review. A fake client stands in for the API server only to put the
// manager's pass between the gateway's read and its write, as a loaded API
// server or a gateway frozen for a moment does; the e2e specs run the rest
// against a real one.
func TestAnswerRaceWithANewReview(t *testing.T) {
	r, op, asked := inReview(t, 4)
	person := v1.Resolution{Action: v1.ResolutionRetry, By: "bob", Reason: "not at the tool"}
	raced := false
	kube := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(op).WithStatusSubresource(op).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object,
			p client.Patch, opts ...client.PatchOption) error {
			if raced {
				return c.Patch(ctx, obj, p, opts...)
			}
			raced = true
			// The person's Retry, applied, and the next review.
			now := &v1.SideEffectOperation{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
				return err
			}
			now.Spec.Resolution = &person
			if err := c.Update(ctx, now); err != nil {
				return err
			}
			now.Generation = 5
			now.Status.Resolution = &v1.AppliedResolution{Resolution: person, Generation: 5}
			now.Status.ReviewGeneration, now.Status.Attempts = 5, 2
			if err := c.Status().Update(ctx, now); err != nil {
				return err
			}
			return apierrors.NewConflict(schema.GroupResource{Group: v1.GroupVersion.Group,
				Resource: "sideeffectoperations"}, obj.GetName(), errors.New("the object has been modified"))
		}}).Build()
	err := decideOperation(context.Background(), &caller{user: "alice", kube: kube}, "shop", "op", r,
		retryAnswer(asked, "about attempt 1"))
	if err == nil || !strings.Contains(err.Error(), "an earlier attempt") {
		t.Errorf("the answer about review 4, written after review 5 began: %v; want a refusal", err)
	}
	got := &v1.SideEffectOperation{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(op), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Resolution == nil || *got.Spec.Resolution != person {
		t.Errorf("spec.resolution is %+v; want the person's, untouched", got.Spec.Resolution)
	}
}

// TestAnswerSameAsAnEarlierResolution: an answer in the very words of a
// resolution that stood when the review began (a manifest that kept an
// earlier object's decision) is refused before anything is written: Once
// would not apply it.
func TestAnswerSameAsAnEarlierResolution(t *testing.T) {
	r, op, asked := inReview(t, 1)
	stale := v1.Resolution{Action: v1.ResolutionRetry, By: "mcp:alice", Reason: "not at the tool"}
	op.Status.EarlierResolutions = []v1.Resolution{stale}
	kube := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(op).WithStatusSubresource(op).Build()
	err := decideOperation(context.Background(), &caller{user: "alice", kube: kube}, "shop", "op", r,
		retryAnswer(asked, stale.Reason))
	if err == nil || !strings.Contains(err.Error(), "written before this review began") {
		t.Errorf("an answer that is the disregarded resolution: %v; want a refusal", err)
	}
	got := &v1.SideEffectOperation{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(op), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Resolution != nil {
		t.Errorf("spec.resolution is %+v; want nothing written", got.Spec.Resolution)
	}
}

// inReview is a call's request r, its operation in NeedsReview since
// generation review, and the state of a question asked in that review.
func inReview(t *testing.T, review int64) (once.Request, *v1.SideEffectOperation, decisionState) {
	t.Helper()
	r := once.Request{Namespace: "shop", Tool: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
		Operation: "charge", Key: "k", Parameters: []byte(`{"amount":1}`)}
	hash, err := once.RequestHash(r)
	if err != nil {
		t.Fatal(err)
	}
	op := &v1.SideEffectOperation{}
	op.Namespace, op.Name, op.UID, op.Generation = "shop", "op", "uid-1", review
	op.Spec.Parameters = &runtime.RawExtension{Raw: r.Parameters}
	op.Status.State, op.Status.RequestHash, op.Status.ReviewGeneration = v1.StateNeedsReview, hash, review
	return r, op, decisionState{Kind: fieldOperation, Name: "op", UID: "uid-1", RequestHash: hash, Review: review}
}

// retryAnswer is a host's answer to the question asked: it did not
// happen, retry, for reason.
func retryAnswer(asked decisionState, reason string) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{RequestState: asked.encode(),
		InputResponses: mcp.InputResponseMap{decisionInput: &mcp.ElicitResult{Action: "accept",
			Content: map[string]any{"decision": "did not happen: retry", fieldReason: reason}}}}}
}
