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

package sim

// Sagas as callers (Options.Callers): a program and an agent each run
// sagas with keys of their own. Each verb stands for what such a caller
// does:
//
//   - callNew: a checkout service (checkout) runs a saga per order through
//     pkg/once's DoSaga; an agent (assistant) runs one through the
//     gateway's saga tool, once.saga.run. The key is the order's.
//   - callAgain: the program crashed, or the agent's call timed out or
//     was told Pending. It calls again with the same key and steps.
//   - callOther: the caller reuses the order's key for other steps (a
//     bug, or an order edited after it was sent).
//   - callDecide: the agent's host showed its user the gateway's form to
//     approve a step. The user approves it, or declines.
//
// The sagas are the world's own two shapes (sagas()), named after the
// saga each request makes. An odd order charges, opens a ticket once a
// person approves it, and posts an irreversible message. An even order's
// ticket is declined by the tool, so its charge is refunded. Every step
// carries the order's amount: another request under the key differs in
// each step. The program's approvals come from people (Approve), as a
// person at kubectl once approve gives them.

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/mcpgateway"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// steps are the saga's steps; other ones under its key carry another
// amount.
func (r *callRequest) steps(other bool) []v1.SagaStep {
	amount := r.amount
	if other {
		amount += 1000
	}
	extra := fmt.Sprintf(`,"amount":%d`, amount)
	charge := sagaStep(r.ref, "charge", toolPay, extra)
	if r.amount%2 == 1 {
		return []v1.SagaStep{charge, approved(sagaStep(r.ref, "ticket", toolDesk, extra)),
			sagaStep(r.ref, "notify", toolChat, extra)}
	}
	return []v1.SagaStep{charge, sagaStep(r.ref, "ticket", toolDesk, extra+`,"reject":true`)}
}

// sagaParams are the call's steps as canonical JSON, whole and step by
// step, with the effects the answer named (answered, by step name).
func (r *callRequest) sagaParams(other bool, answered []toldStep) (string, []toldStep) {
	steps := r.steps(other)
	whole, err := json.Marshal(steps)
	must(err)
	c, err := protocol.Canonical(whole)
	must(err)
	out := make([]toldStep, 0, len(steps))
	for _, st := range steps {
		p, err := protocol.Canonical(st.Parameters.Raw)
		must(err)
		ts := toldStep{name: st.Name, params: string(p)}
		for _, a := range answered {
			if a.name == st.Name {
				ts.id, ts.decided = a.id, a.decided
			}
		}
		out = append(out, ts)
	}
	return string(c), out
}

// describeSagaCall tells a saga caller's call; empty if it does not apply.
func describeSagaCall(r *callRequest, verb int64) string {
	who, via := "the checkout program", "pkg/once's DoSaga"
	if r.caller == callerAssistant {
		who, via = "the assistant", "the gateway's saga tool"
	}
	switch verb {
	case callNew:
		return fmt.Sprintf("%s runs saga %s through %s (a fresh key, %s)", who, r.name, via, r.ref)
	case callAgain:
		if r.caller == callerCheckout {
			return fmt.Sprintf("the checkout program crashed; it restarts and calls DoSaga for %s again, with the same key",
				r.name)
		}
		return fmt.Sprintf("the assistant calls the saga tool again for %s, with the same key and steps", r.name)
	case callOther:
		return fmt.Sprintf("%s reuses the key of saga %s for other steps, through %s", who, r.name, via)
	case callDecide:
		if r.asked == "" {
			return ""
		}
		return fmt.Sprintf("the assistant's user answers the gateway's question about a step of %s", r.name)
	}
	return ""
}

// doSaga is the checkout program's DoSaga.
func (w *World) doSaga(r *callRequest, key string, other bool) told {
	res, err := w.callers.program.DoSaga(ended(), once.SagaRequest{Namespace: Namespace, Key: key,
		Steps: r.steps(other)})
	var (
		mismatch *once.MismatchError
		failed   *once.FailedError
		review   *once.NeedsReviewError
		pending  *once.PendingError
		approval *once.WaitingForApprovalError
	)
	switch {
	case err == nil:
		t := told{what: toldCommitted, operation: res.Name, text: fmt.Sprintf("%s (found %v)", res.State, res.Found)}
		for _, st := range res.Steps {
			t.steps = append(t.steps, w.stepTold(st.Name, st.Operation, st.ExternalObjectID))
			t.text += fmt.Sprintf(", %s as %s", st.Name, st.ExternalObjectID)
		}
		return t
	case errors.As(err, &mismatch):
		return told{what: toldMismatch, text: err.Error()}
	case errors.As(err, &failed) && failed.Reason == "Compensated":
		return told{what: toldCompensated, text: err.Error()}
	case errors.As(err, &failed):
		return told{what: toldFailed, text: err.Error()}
	case errors.As(err, &review):
		return told{what: toldReview, text: err.Error()}
	case errors.As(err, &approval):
		return told{what: toldWaiting, text: err.Error()}
	case errors.As(err, &pending):
		return told{what: toldPending, text: err.Error()}
	}
	return told{what: toldError, text: err.Error()}
}

// stepTold is a committed step as an answer names it: decided when its
// operation, if it is still there, holds a person's decision.
func (w *World) stepTold(name, operation, id string) toldStep {
	ts := toldStep{name: name, id: id}
	if op := w.namedOperation(operation); op != nil && op.Status.Resolution != nil {
		ts.decided = true
	}
	return ts
}

// callSagaTool is the assistant's tools/call of once.saga.run; decide
// carries its user's answer to the last question.
func (w *World) callSagaTool(r *callRequest, key string, other, decide bool) told {
	raw, err := json.Marshal(map[string]any{mcpgateway.KeyArgument: key, "steps": r.steps(other)})
	must(err)
	params := &mcp.CallToolParamsRaw{Name: mcpgateway.SagaToolName, Arguments: raw}
	reason := ""
	if decide {
		approve := w.draws.IntN("approval|"+r.name, 10) < 8
		reason = fmt.Sprintf("the assistant's user at step %d", w.step)
		action := "accept"
		if !approve {
			action = "decline"
		}
		params.RequestState = r.asked
		params.InputResponses = mcp.InputResponseMap{r.input: &mcp.ElicitResult{Action: action,
			Content: map[string]any{"approve": approve, "reason": reason}}}
		w.note("the user %ss", map[bool]string{true: "approve", false: "decline"}[approve])
	}
	r.asked, r.input = "", ""
	res, err := w.callers.gateway.CallAs(ended(), agentUser, w.callers.kube, true, &mcp.CallToolRequest{Params: params})
	if reason != "" {
		w.approvalRecorded(r, reason)
	}
	if err != nil {
		return told{what: toldError, text: err.Error()}
	}
	if len(res.InputRequests) > 0 {
		r.asked, r.askedOther = res.RequestState, other
		for id := range res.InputRequests {
			r.input = id
		}
		return told{what: toldAsk, text: "a question for its user: approve the step"}
	}
	sc, _ := res.StructuredContent.(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if !res.IsError {
		t := told{what: toldCommitted, operation: str(sc, "saga"), text: text}
		steps, _ := sc["steps"].([]map[string]any)
		for _, st := range steps {
			t.steps = append(t.steps, w.stepTold(str(st, "name"), str(st, "operation"), str(st, "externalObjectID")))
		}
		return t
	}
	t := told{text: text}
	switch str(sc, "error") {
	case v1.ReasonIdempotencyParameterMismatch:
		t.what = toldMismatch
	case "FailedFinal":
		t.what = toldFailed
		if str(sc, "reason") == "Compensated" {
			t.what = toldCompensated
		}
	case "NeedsReview":
		t.what = toldReview
	case "WaitingForApproval":
		t.what = toldWaiting
	case "Pending":
		t.what = toldPending
	default:
		t.what = toldError
	}
	return t
}

// approvalRecorded notes whether the gateway recorded the user's approval
// on the saga.
func (w *World) approvalRecorded(r *callRequest, reason string) {
	r.recorded = false
	for _, o := range w.server.peek(kindSaga) {
		s := o.(*v1.Saga)
		for _, a := range s.Spec.Approvals {
			if s.Name == r.ref && a.Reason == reason {
				w.note("the gateway records the approval of step %s of %s", a.Step, s.Name)
				r.recorded = true
				return
			}
		}
	}
	w.note("the gateway records no approval")
}
