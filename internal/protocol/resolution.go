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
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func needsReview(st v1.SideEffectOperationStatus, env Env, msg string) Decision {
	st.ErrorClass = v1.ErrorOutcomeUnknown
	st.ErrorMessage = msg
	st.ReviewGeneration = env.Generation
	if r := env.Resolution; r != nil && !SameDecision(*r, st.Resolution) {
		remember(&st, *r)
	}
	transition(&st, v1.StateNeedsReview, v1.ReasonNeedsReview, msg, env)
	return Decision{Action: ActionWrite, Status: st,
		Event: &Event{Warning: true, Reason: v1.ReasonNeedsReview, Message: msg}}
}

// resolutionPending reports whether res was given after the operation last
// entered NeedsReview. A resolution that was already there then is not
// applied, and one is applied once. The generation says only that the spec
// changed since, not which field. So a resolution the same as the one
// already applied is that decision still, never a new one. The same holds
// for a resolution the same as an earlier one (status.earlierResolutions):
// one applied before it, or standing when a review began. It holds
// whatever else of the spec was edited, such as its
// ttlSecondsAfterFinished.
func resolutionPending(st v1.SideEffectOperationStatus, res *v1.Resolution, env Env) bool {
	return res != nil && env.Generation > reviewSince(st) && !SameDecision(*res, st.Resolution) && !Earlier(res, st)
}

// reviewSince is the generation after which a resolution may decide the
// review: the one the review began at, or the last applied resolution's.
func reviewSince(st v1.SideEffectOperationStatus) int64 {
	since := st.ReviewGeneration
	if since == 0 {
		// Written before reviewGeneration existed.
		since = st.ObservedGeneration
	}
	if st.Resolution != nil {
		since = max(since, st.Resolution.Generation)
	}
	return since
}

// Earlier reports whether res is one of the operation's earlier
// resolutions (status.earlierResolutions): applied before the one applied
// now, or standing in the spec when a review began. It decides no review.
func Earlier(res *v1.Resolution, st v1.SideEffectOperationStatus) bool {
	return res != nil && slices.ContainsFunc(st.EarlierResolutions, func(e v1.Resolution) bool {
		return SameResolution(*res, e)
	})
}

// maxEarlierResolutions bounds status.earlierResolutions (the CRD's
// MaxItems); the oldest go first.
const maxEarlierResolutions = 8

// remember adds r to the earlier resolutions, unless it is one of them,
// and reports whether it added it.
func remember(st *v1.SideEffectOperationStatus, r v1.Resolution) bool {
	if Earlier(&r, *st) {
		return false
	}
	r.User = ""
	st.EarlierResolutions = append(st.EarlierResolutions, r)
	if n := len(st.EarlierResolutions); n > maxEarlierResolutions {
		st.EarlierResolutions = slices.Clone(st.EarlierResolutions[n-maxEarlierResolutions:])
	}
	return true
}

// SameDecision reports whether res is the resolution applied, as far as a
// person decides it: its action, the effect it names, who and why. The
// user admission records is left out: the same decision written again by
// another account is not a new one. Only a resolution that differs from
// the one applied can decide a later review (docs/decisions.md,
// "reviewGeneration for resolutions").
func SameDecision(res v1.Resolution, applied *v1.AppliedResolution) bool {
	return applied != nil && SameResolution(res, applied.Resolution)
}

// SameResolution reports whether a and b are one decision as a person
// wrote it: the same action, external id, writer and reason (the user
// admission records is left out).
func SameResolution(a, b v1.Resolution) bool {
	return a.Action == b.Action && a.ExternalObjectID == b.ExternalObjectID && a.By == b.By && a.Reason == b.Reason
}

// ResolutionPending reports whether the operation op's spec.resolution is
// one the manager applies on its next pass in NeedsReview: written during
// this review, not the one already applied nor an earlier one.
func ResolutionPending(op *v1.SideEffectOperation) bool {
	return resolutionPending(op.Status, op.Spec.Resolution, Env{Generation: op.Generation})
}

// nextNeedsReview applies a person's resolution, once.
func nextNeedsReview(st v1.SideEffectOperationStatus, res *v1.Resolution, p Policy, env Env) Decision {
	if !resolutionPending(st, res, env) {
		if res != nil && env.Generation <= reviewSince(st) && !SameDecision(*res, st.Resolution) && remember(&st, *res) {
			// It stood when the review began (the generation has not moved
			// since), and the review began before earlierResolutions
			// existed: keep it there, before an edit moves the generation.
			return Decision{Action: ActionWrite, Status: st}
		}
		return Decision{Action: ActionWait}
	}
	if st.Resolution != nil {
		remember(&st, st.Resolution.Resolution)
	}
	st.Resolution = &v1.AppliedResolution{Resolution: *res, Generation: env.Generation,
		Time: metav1.NewTime(env.Now), FromState: st.State}
	observe(&st, v1.Observation{Time: metav1.NewTime(env.Now), Kind: v1.ObservationResolution,
		Attempt: st.Attempts, Outcome: string(res.Action), ExternalObjectID: res.ExternalObjectID,
		Message: fmt.Sprintf("Resolved by %s: %s", res.Attribution(), res.Reason)})
	ev := &Event{Reason: v1.EventResolved}
	switch res.Action {
	case v1.ResolutionMarkCommitted:
		msg := fmt.Sprintf("Marked committed by %s", res.Attribution())
		commit(&st, p, env, CallResult{ExternalObjectID: res.ExternalObjectID}, v1.ReasonResolvedCommitted, msg)
		ev.Message = msg
		return Decision{Action: ActionWrite, Status: st, Event: ev}
	case v1.ResolutionFail:
		msg := fmt.Sprintf("Failed by %s", res.Attribution())
		fail(&st, p, env, v1.ErrorPermanent, v1.ReasonResolvedFailed, msg)
		ev.Message = msg
		return Decision{Action: ActionWrite, Status: st, Event: ev}
	default:
		// Retry: the person vouches that the attempt had no effect.
		st.ErrorClass, st.ErrorMessage = "", ""
		d := execute(st, p, env, false)
		d.Event = &Event{Reason: v1.EventResolved, Message: fmt.Sprintf("Retry allowed by %s; %s",
			res.Attribution(), d.Event.Message)}
		return d
	}
}
