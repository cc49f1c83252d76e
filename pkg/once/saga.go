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

package once

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	sagacore "github.com/once-dev/once/internal/saga"
)

// SagaRequest is a saga bound to an idempotency key: steps that run in
// order, each once, with the compensations of the committed steps run in
// reverse when one fails for good (docs/sagas.md).
type SagaRequest struct {
	// Namespace of the saga.
	Namespace string
	// Name of the Saga. Empty, it is SagaName(Key).
	Name string
	// Key is the saga's idempotency key (no "/"). Required.
	Key string
	// Inputs are the saga's own data, a JSON object; nil for none.
	Inputs json.RawMessage
	// Steps of the saga.
	Steps []v1.SagaStep
	// Labels are put on the saga when DoSaga creates it.
	Labels map[string]string
	// TTLSecondsAfterFinished is how long the saga is kept after it ends
	// (spec.ttlSecondsAfterFinished): nil is
	// DefaultTTLSecondsAfterFinished, one hour; negative keeps it until
	// someone deletes it. Its steps' records keep their outcomes for their
	// retention all the same.
	TTLSecondsAfterFinished *int32
	// Progress, if set, is called while DoSaga waits, each time the saga's
	// state, current step or count of steps done changes.
	Progress func(Progress)
}

// SagaResult is the outcome of a saga whose every step committed.
type SagaResult struct {
	// Namespace and Name of the saga.
	Namespace, Name string
	// State is Committed.
	State v1.OperationState
	// Steps are the steps' checkpoints: state, key, external object id.
	Steps []v1.SagaStepStatus
	// Found is true when DoSaga found the saga instead of creating it.
	Found bool
}

// WaitingForApprovalError: the saga waits for a person's approval of a
// step (spec.approvals). A later DoSaga with the same key returns the
// outcome once it is approved and done.
type WaitingForApprovalError struct {
	Namespace, Name string
	// Step waits for approval.
	Step string
	// Message is the saga's explanation.
	Message string
}

func (e *WaitingForApprovalError) Error() string {
	return fmt.Sprintf("saga %s/%s waits for a person's approval of step %s: %s", e.Namespace, e.Name, e.Step, e.Message)
}

// SagaName is the name DoSaga gives a saga when the request names none.
func SagaName(key string) string {
	sum := sha256.Sum256([]byte(key))
	prefix := dns1123(key)
	if len(prefix) > 30 {
		prefix = strings.TrimRight(prefix[:30], "-")
	}
	if prefix == "" {
		return "saga-" + hex.EncodeToString(sum[:10])
	}
	return "saga-" + prefix + "-" + hex.EncodeToString(sum[:10])
}

// DoSaga creates the saga that req describes, or finds the one that
// exists for it, waits until every step committed, the saga failed or was
// compensated, needs review or waits for an approval (or ctx ends), and
// returns the outcome. A compensated saga is a *FailedError with reason
// Compensated: its committed steps were undone.
func (c *Client) DoSaga(ctx context.Context, req SagaRequest) (SagaResult, error) {
	if req.Key == "" || strings.Contains(req.Key, "/") {
		return SagaResult{}, errors.New("once: SagaRequest.Key is required and holds no \"/\"")
	}
	if req.Namespace == "" || len(req.Steps) == 0 {
		return SagaResult{}, errors.New("once: SagaRequest needs Namespace and Steps")
	}
	want := newSaga(req)
	saga, found, err := createOrFind(ctx, c, "saga", want, &v1.Saga{})
	if err != nil {
		return SagaResult{}, err
	}
	if found {
		if msg := sameSaga(want, saga); msg != "" {
			return SagaResult{}, &MismatchError{Kind: KindSaga, Namespace: saga.Namespace, Name: saga.Name,
				Key: req.Key, Message: msg}
		}
	}
	res, err := c.waitSaga(ctx, saga, req.Progress)
	res.Found = found
	return res, err
}

func newSaga(req SagaRequest) *v1.Saga {
	name := req.Name
	if name == "" {
		name = SagaName(req.Key)
	}
	s := &v1.Saga{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name, Labels: req.Labels},
		Spec: v1.SagaSpec{IdempotencyKey: req.Key, Steps: req.Steps,
			TTLSecondsAfterFinished: v1.ClientTTL(req.TTLSecondsAfterFinished)},
	}
	if len(req.Inputs) > 0 && !bytes.Equal(bytes.TrimSpace(req.Inputs), []byte("null")) {
		s.Spec.Inputs = &runtime.RawExtension{Raw: req.Inputs}
	}
	return s
}

// SagaMismatch says how s differs from the saga req asks for, or "" when
// s is that request's saga (the approvals and resolutions people wrote
// aside), as DoSaga compares them before it answers from a saga it found.
func SagaMismatch(req SagaRequest, s *v1.Saga) string {
	return sameSaga(newSaga(req), s)
}

// sameSaga says how got differs from the request want stands for, or ""
// when it is the same request. The key binds the whole spec but the
// approvals and resolutions people write later: every field of every step,
// the inputs and the subscribers, compared as the API server stores them.
func sameSaga(want, got *v1.Saga) string {
	if k := sagacore.Key(got.Name, &got.Spec); k != want.Spec.IdempotencyKey {
		return fmt.Sprintf("the saga %s holds key %q", got.Name, k)
	}
	if a, b := stepNames(got), stepNames(want); a != b {
		return fmt.Sprintf("the saga %s has steps %s; this request has %s", got.Name, a, b)
	}
	a, errA := boundSpec(want)
	b, errB := boundSpec(got)
	if err := errors.Join(errA, errB); err != nil {
		return fmt.Sprintf("the saga %s cannot be compared with this request: %v", got.Name, err)
	}
	var paths []string
	diffJSON("", a, b, &paths)
	if len(paths) == 0 {
		return ""
	}
	const shown = 4
	list := strings.Join(paths[:min(len(paths), shown)], ", ")
	if len(paths) > shown {
		list += fmt.Sprintf(" and %d more", len(paths)-shown)
	}
	return fmt.Sprintf("the saga %s differs from this request in %s", got.Name, list)
}

func stepNames(s *v1.Saga) string {
	names := make([]string, 0, len(s.Spec.Steps))
	for _, st := range s.Spec.Steps {
		names = append(names, st.Name)
	}
	return strings.Join(names, ", ")
}

// boundSpec is the part of a saga's spec that its key binds, as canonical
// JSON decoded, the way the API server stores it: defaults filled in,
// parameters without a null, lists keyed by name in name order (their CEL
// equality ignores order; steps keep theirs). The key, which sameSaga
// compares first, and approvals and resolutions are left out.
func boundSpec(s *v1.Saga) (map[string]any, error) {
	spec := s.Spec.DeepCopy()
	// How long the saga is kept after it ends binds nothing. Nor do a
	// person's suspend and cancel: they say whether it goes on.
	spec.IdempotencyKey, spec.Approvals, spec.Resolutions, spec.TTLSecondsAfterFinished = "", nil, nil, nil
	spec.Suspend, spec.Cancel = false, false
	spec.Inputs = nonNull(spec.Inputs)
	slices.SortFunc(spec.Subscribers, func(a, b v1.Subscriber) int { return strings.Compare(a.Name, b.Name) })
	for i := range spec.Steps {
		st := &spec.Steps[i]
		st.ToolRef.Kind = st.ToolRef.EffectiveKind()
		st.Parameters = nonNull(st.Parameters)
		sortExpressions(st.ParametersFrom)
		defaultRetryPolicy(st.RetryPolicy)
		if c := st.Compensation; c != nil {
			if c.ToolRef != nil {
				c.ToolRef.Kind = c.ToolRef.EffectiveKind()
			}
			c.Parameters = nonNull(c.Parameters)
			sortExpressions(c.ParametersFrom)
			defaultRetryPolicy(c.RetryPolicy)
		}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	canonical, err := protocol.Canonical(b)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(canonical))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if steps, ok := m["steps"].([]any); ok {
		byName := map[string]any{}
		for i, st := range steps {
			byName[spec.Steps[i].Name] = st
		}
		m["steps"] = byName
	}
	return m, nil
}

// nonNull drops a JSON null, which the API server does not store.
func nonNull(r *runtime.RawExtension) *runtime.RawExtension {
	if r == nil || len(bytes.TrimSpace(r.Raw)) == 0 || bytes.Equal(bytes.TrimSpace(r.Raw), []byte("null")) {
		return nil
	}
	return r
}

func sortExpressions(e []v1.ParameterExpression) {
	slices.SortFunc(e, func(a, b v1.ParameterExpression) int { return strings.Compare(a.Name, b.Name) })
}

// defaultRetryPolicy fills in what the API server defaults in a retry
// policy that is set.
func defaultRetryPolicy(p *v1.RetryPolicy) {
	if p == nil {
		return
	}
	p.MaxAttempts = cmp.Or(p.MaxAttempts, v1.DefaultMaxAttempts)
	if p.InitialBackoff == nil {
		p.InitialBackoff = &metav1.Duration{Duration: v1.DefaultInitialBackoff}
	}
	if p.MaxBackoff == nil {
		p.MaxBackoff = &metav1.Duration{Duration: v1.DefaultMaxBackoff}
	}
}

// diffJSON appends to paths where a and b differ: into objects, but not
// into parameters and inputs, whose values are the caller's. Steps, keyed
// by name, read steps[<name>].
func diffJSON(path string, a, b any, paths *[]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok || path == "inputs" || strings.HasSuffix(path, ".parameters") {
		if !reflect.DeepEqual(a, b) {
			*paths = append(*paths, path)
		}
		return
	}
	keys := slices.Collect(maps.Keys(am))
	for k := range bm {
		if _, ok := am[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := k
		switch {
		case path == "steps":
			p = "steps[" + k + "]"
		case path != "":
			p = path + "." + k
		}
		diffJSON(p, am[k], bm[k], paths)
	}
}

// waitSaga reads saga until it ends, needs a person or ctx ends.
func (c *Client) waitSaga(ctx context.Context, saga *v1.Saga, progress func(Progress)) (SagaResult, error) {
	interval := c.PollMin
	var last Progress
	for {
		if res, err, done := sagaOutcome(saga); done {
			return res, err
		}
		p := Progress{Name: saga.Name, State: string(saga.Status.State.OrPlanned()),
			Message: saga.Status.CurrentStep, Done: int(saga.Status.StepsDone), Total: len(saga.Spec.Steps)}
		if progress != nil && p != last {
			progress(p)
		}
		last = p
		select {
		case <-ctx.Done():
			pe := &PendingError{Kind: KindSaga, Namespace: saga.Namespace, Name: saga.Name, State: p.State, Err: ctx.Err()}
			if ready := meta.FindStatusCondition(saga.Status.Conditions, v1.ConditionReady); ready != nil {
				pe.Reason, pe.Message = ready.Reason, ready.Message
			}
			return SagaResult{Namespace: saga.Namespace, Name: saga.Name}, pe
		case <-time.After(interval):
		}
		interval = min(2*interval, c.PollMax)
		next := &v1.Saga{}
		if err := c.get(ctx, client.ObjectKeyFromObject(saga), next); err != nil {
			if ctx.Err() != nil {
				continue
			}
			return SagaResult{}, err
		}
		saga = next
	}
}

// reasonWaitingForApproval is the saga's Stalled reason while a step waits
// for approval.
const reasonWaitingForApproval = sagacore.ReasonWaitingForApproval

// sagaOutcome reads the answer of saga, if it has one.
func sagaOutcome(saga *v1.Saga) (SagaResult, error, bool) {
	st := saga.Status
	msg, reason := "", ""
	if ready := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); ready != nil {
		msg, reason = ready.Message, ready.Reason
	}
	switch st.State {
	case v1.StateCommitted:
		return SagaResult{Namespace: saga.Namespace, Name: saga.Name, State: st.State, Steps: st.Steps}, nil, true
	case v1.StateCompensated:
		why := fmt.Sprintf("step %s failed for good", st.FailedStep)
		if reason == v1.ReasonCancelled {
			why = fmt.Sprintf("the saga was cancelled at step %s", st.FailedStep)
		}
		return SagaResult{}, &FailedError{Kind: KindSaga, Namespace: saga.Namespace, Name: saga.Name, Reason: "Compensated",
			Message: fmt.Sprintf("%s and every committed step was undone: %s", why, msg)}, true
	case v1.StateFailedFinal:
		return SagaResult{}, &FailedError{Kind: KindSaga, Namespace: saga.Namespace, Name: saga.Name,
			Reason: reason, Message: msg}, true
	case v1.StateNeedsReview:
		return SagaResult{}, &NeedsReviewError{Kind: KindSaga, Namespace: saga.Namespace, Name: saga.Name, Message: msg}, true
	}
	if stalled := meta.FindStatusCondition(st.Conditions, v1.ConditionStalled); stalled != nil &&
		stalled.Status == metav1.ConditionTrue && stalled.Reason == reasonWaitingForApproval {
		return SagaResult{}, &WaitingForApprovalError{Namespace: saga.Namespace, Name: saga.Name, Step: st.CurrentStep,
			Message: stalled.Message}, true
	}
	return SagaResult{}, nil, false
}
