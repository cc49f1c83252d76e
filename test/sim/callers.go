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

// Callers: the agents and programs that ask Once for an effect
// (Options.Callers), through the code they run in a cluster.
//
//   - An agent calls pay's charge through the MCP gateway
//     (mcpgateway.Gateway.CallAs) with a key of its own: a fresh key, the
//     same key again (a call that timed out, or that was told Pending),
//     and the same key with other arguments (an agent that reuses a key
//     for another request). Its host shows forms: a call that finds its
//     operation in NeedsReview is asked, and the agent's user answers.
//   - A model calls chat's charge, whose operation derives its keys from
//     the arguments (spec.operations[].derivedKey): it retries with the
//     same arguments under a fresh key of its own, within the window.
//   - A program calls desk's charge through pkg/once's Do with a key of
//     its own; it crashes and calls Do again with the same request, or
//     reuses the key with other parameters.
//   - A program and an agent run sagas with keys of their own
//     (sagacallers.go): the program through pkg/once's DoSaga, the agent
//     through the gateway's saga tool.
//
// Each call is one step: the world stands still while it runs. A call
// runs with a context that has ended, so Do and the gateway answer what
// they read at once (the outcome, or Pending) instead of waiting: a
// caller that waits is one that calls again later, which the scheduler
// draws. What each caller is told is checked against the tools' ledger
// (check_callers.go). With Options.CallerFaults, their requests to the
// API server meet its faults (callerGate).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/mcpgateway"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// Call is a caller's call (Options.Callers): Name names the request, N
// the verb (callVerbs).
const Call Kind = "call"

// The callers' verbs.
const (
	// callNew is a request's first call, under a fresh key.
	callNew int64 = iota
	// callAgain is the same request under the same key: a retry after a
	// timeout or a Pending answer, or a program's after it crashed.
	callAgain
	// callOther is the same key with other arguments.
	callOther
	// callFresh is a model's retry with the same arguments under a fresh
	// key of its own (a derived-key operation).
	callFresh
	// callDecide is a call that carries the agent's user's answer to the
	// question the last call asked.
	callDecide
)

// The callers and the requests each makes at most in a run.
const (
	callerAgent   = "agent"
	callerModel   = "model"
	callerProgram = "program"
	// callerCheckout is a program that runs a saga per order through
	// DoSaga; callerAssistant an agent that runs them through the
	// gateway's saga tool.
	callerCheckout  = "checkout"
	callerAssistant = "assistant"
	// agentUser is who the agent and the model call as.
	agentUser = "agent@sim"
	// derivedWindow is the window of chat's derived keys.
	derivedWindow = time.Hour
)

var callerLimits = map[string]int{callerAgent: 6, callerModel: 3, callerProgram: 4, callerCheckout: 3, callerAssistant: 3}

// callerNames are the callers in the order the scheduler lists them.
var callerNames = []string{callerAgent, callerModel, callerProgram, callerCheckout, callerAssistant}

// callers are the world's callers and what they were told.
type callers struct {
	gateway  *mcpgateway.Gateway
	program  *once.Client
	kube     client.Client
	requests map[string]*callRequest
	// calling is the request whose call runs now; lost the API call whose
	// answer the API server will lose (callerGate).
	calling, lost string
}

// callRequest is one request of a caller, by the name of the action that
// made it ("agent-2").
type callRequest struct {
	name, caller string
	// tool and ref are an operation's; a saga's ref is its object's
	// name, which its steps' refs begin with.
	tool, ref string
	amount    int
	// keys are the caller's keys so far; the first is the request's own.
	keys []string
	// first is when it was first called.
	first time.Time
	// asked is the last answer's question, if it asked one: its state and
	// the id of its input.
	asked, input string
	askedOther   bool
	// recorded says whether the object held the user's last decision
	// once the call that carried it returned.
	recorded bool
	told     []told
}

// told is one answer a caller got.
type told struct {
	step int
	// what it says (toldCommitted, ...).
	what string
	// id is the effect a committed answer names; operation the object an
	// answer names, if it names one.
	id, operation string
	// noEffect: a failure that says nothing took effect.
	noEffect bool
	// decided: a person's decision is what the answer rests on.
	decided bool
	// params are the call's canonical arguments, other whether they were
	// not the request's own; epoch and namespace the lifetimes of its ref
	// and of the namespace then.
	params           string
	other            bool
	epoch, namespace int
	text             string
	// steps are a saga's steps as the call asked them, each with the
	// effect a committed answer names.
	steps []toldStep
}

// toldStep is a saga's step in an answer: its name, the canonical JSON of
// the parameters the call gave it, and the effect the answer names.
type toldStep struct {
	name, params, id string
	// decided: a person's decision committed the step.
	decided bool
}

// What an answer says (told.what).
const (
	toldCommitted = "committed"
	toldFailed    = "failed"
	toldMismatch  = "mismatch"
	toldReview    = "review"
	toldAsk       = "ask"
	toldPending   = "pending"
	toldError     = "error"
	// A saga's own answers: its committed steps undone, or a step that
	// waits for a person's approval.
	toldCompensated = "compensated"
	toldWaiting     = "waiting"
)

// newCallers builds the callers: the gateway, with the world's clock, and
// a pkg/once client, each over a client that reaches the API server as
// kubectl does.
func newCallers(w *World) *callers {
	var g Gate = gate{}
	if w.opts.CallerFaults {
		g = callerGate{w}
	}
	kube := callerClient{NewClient(w.server, nil, g)}
	gw, err := mcpgateway.New(mcpgateway.Config{REST: &rest.Config{Host: "https://api.sim"}, Namespace: Namespace,
		Clock: w.clock})
	must(err)
	oc := once.New(kube)
	oc.Clock = w.clock
	return &callers{gateway: gw, program: oc, kube: kube, requests: map[string]*callRequest{}}
}

// callerClient is a caller's client: RBAC allows the callers everything
// in the namespace, so a SelfSubjectAccessReview is allowed at once.
type callerClient struct{ *Client }

func (c callerClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	if r, ok := obj.(*authorizationv1.SelfSubjectAccessReview); ok {
		r.Status.Allowed = true
		return nil
	}
	return c.Client.Create(ctx, obj, opts...)
}

// newRequest is the request name stands for: its caller, tool and
// arguments follow from the name alone, so that a shrunk schedule makes
// the same request.
func newRequest(name string) *callRequest {
	caller, n, _ := strings.Cut(name, "-")
	r := &callRequest{name: name, caller: caller}
	_, _ = fmt.Sscan(n, &r.amount)
	switch caller {
	case callerAgent:
		r.tool = toolPay
	case callerModel:
		r.tool = toolChat
	case callerCheckout:
		r.ref = once.SagaName(name)
		return r
	case callerAssistant:
		r.ref = once.SagaName(mcpgateway.ScopedSagaKey(agentUser, name))
		return r
	default:
		r.tool = toolDesk
	}
	r.ref = r.tool + "/" + name
	return r
}

// saga reports whether the request is a saga's.
func (r *callRequest) saga() bool {
	return r.caller == callerCheckout || r.caller == callerAssistant
}

// arguments are the request's arguments; other ones under its key differ
// in the amount.
func (r *callRequest) arguments(other bool) json.RawMessage {
	amount := r.amount
	if other {
		amount += 1000
	}
	return fmt.Appendf(nil, `{"amount":%d,"ref":%q}`, amount, r.ref)
}

// callerChoices are the callers' next calls (Plan draws among them).
func (w *World) callerChoices(rng interface{ IntN(int) int }, a *Action) []choice {
	return []choice{{"call", func() bool {
		var names []string
		for _, c := range callerNames {
			for i := 1; i <= callerLimits[c]; i++ {
				name := fmt.Sprintf("%s-%d", c, i)
				names = append(names, name)
				if w.callers.requests[name] == nil {
					break
				}
			}
		}
		// A host shows its user the question at once: the answer comes
		// soon, one call in two while a question waits.
		for _, name := range names {
			if r := w.callers.requests[name]; r != nil && r.asked != "" && rng.IntN(2) == 0 {
				a.Kind, a.Name, a.N = Call, name, callDecide
				return w.describeCall(*a) != ""
			}
		}
		a.Kind, a.Name, a.N = Call, names[rng.IntN(len(names))], callNew
		if w.callers.requests[a.Name] == nil {
			return w.describeCall(*a) != ""
		}
		// Callers mostly call again; a key reused for other arguments is
		// a slip, now and then.
		var verbs []int64
		for _, v := range []struct{ verb, weight int64 }{{callAgain, 4}, {callOther, 1}, {callFresh, 2}, {callDecide, 4}} {
			if a.N = v.verb; w.describeCall(*a) != "" {
				for range v.weight {
					verbs = append(verbs, v.verb)
				}
			}
		}
		if len(verbs) == 0 {
			return false
		}
		a.N = verbs[rng.IntN(len(verbs))]
		return true
	}}}
}

// describeCall tells a call; empty if it does not apply now.
func (w *World) describeCall(a Action) string {
	if w.callers == nil {
		return ""
	}
	r := w.callers.requests[a.Name]
	if (r == nil) != (a.N == callNew) || w.namespaceState() != namespaceActive {
		return ""
	}
	if r == nil {
		r = newRequest(a.Name)
	}
	if r.caller == callerModel && a.N != callNew && !w.clock.Now().Before(r.first.Add(derivedWindow)) {
		// A model calls again within minutes: the same arguments an hour
		// on are a new request, as the derived key's window says.
		return ""
	}
	if r.saga() {
		return describeSagaCall(r, a.N)
	}
	via := "the MCP gateway"
	if r.caller == callerProgram {
		via = "pkg/once's Do"
	}
	switch a.N {
	case callNew:
		return fmt.Sprintf("the %s asks %s for %s (a fresh key)", r.caller, via, r.ref)
	case callAgain:
		if r.caller == callerProgram {
			return fmt.Sprintf("the program crashed; it restarts and calls Do for %s again, with the same key", r.ref)
		}
		return fmt.Sprintf("the %s calls again for %s, with the same key and arguments", r.caller, r.ref)
	case callOther:
		if r.caller == callerModel {
			return ""
		}
		return fmt.Sprintf("the %s reuses the key of %s for other arguments, through %s", r.caller, r.ref, via)
	case callFresh:
		if r.caller != callerModel {
			return ""
		}
		return fmt.Sprintf("the model retries %s with the same arguments under a fresh key of its own", r.ref)
	case callDecide:
		if r.asked == "" {
			return ""
		}
		return fmt.Sprintf("the %s's user answers the gateway's question about %s", r.caller, r.ref)
	}
	return ""
}

// call carries out a caller's call and checks what it was told.
func (w *World) call(a Action) {
	r := w.callers.requests[a.Name]
	if r == nil {
		r = newRequest(a.Name)
		r.first = w.clock.Now()
		w.callers.requests[a.Name] = r
	}
	key := r.name
	switch a.N {
	case callNew:
		r.keys = append(r.keys, key)
	case callFresh:
		key = fmt.Sprintf("%s-retry-%d", r.name, len(r.keys))
		r.keys = append(r.keys, key)
	default:
		key = r.keys[len(r.keys)-1]
	}
	other := a.N == callOther || (a.N == callDecide && r.askedOther)
	w.callers.calling = r.name
	var t told
	switch r.caller {
	case callerProgram:
		t = w.doOnce(r, key, other)
	case callerCheckout:
		t = w.doSaga(r, key, other)
	case callerAssistant:
		t = w.callSagaTool(r, key, other, a.N == callDecide)
	default:
		t = w.callGateway(r, key, other, a.N == callDecide)
	}
	w.callers.calling, w.callers.lost = "", ""
	t.step, t.other, t.epoch, t.namespace = w.step, other, w.epochs[r.ref], w.namespaces
	if r.saga() {
		t.params, t.steps = r.sagaParams(other, t.steps)
	} else if c, err := protocol.Canonical(r.arguments(other)); err == nil {
		t.params = string(c)
	}
	w.note("it is told: %s", t.text)
	if a.N == callDecide {
		w.checkDecisionTold(r, t)
	}
	w.checkTold(r, t)
	r.told = append(r.told, t)
}

// ended is a context that has ended: a call answers what it reads at
// once, and never waits.
func ended() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// doOnce is the program's Do.
func (w *World) doOnce(r *callRequest, key string, other bool) told {
	res, err := w.callers.program.Do(ended(), once.Request{Namespace: Namespace, Tool: v1.ToolReference{Name: r.tool},
		Operation: opCharge, Key: key, Parameters: r.arguments(other)})
	var (
		mismatch *once.MismatchError
		failed   *once.FailedError
		review   *once.NeedsReviewError
		pending  *once.PendingError
	)
	switch {
	case err == nil:
		return told{what: toldCommitted, id: res.ExternalObjectID, operation: res.Name, decided: res.Resolution != nil,
			text: fmt.Sprintf("%s as %s (found %v)", res.State, res.ExternalObjectID, res.Found)}
	case errors.As(err, &mismatch):
		return told{what: toldMismatch, text: err.Error()}
	case errors.As(err, &failed):
		return told{what: toldFailed, operation: failed.Name, noEffect: !failed.Decided && !failed.EffectReported,
			decided: failed.Decided, text: err.Error()}
	case errors.As(err, &review):
		return told{what: toldReview, operation: review.Name, text: err.Error()}
	case errors.As(err, &pending):
		return told{what: toldPending, operation: pending.Name, text: err.Error()}
	}
	return told{what: toldError, text: err.Error()}
}

// callGateway is the agent's or the model's tools/call; decide carries
// the user's answer to the last question.
func (w *World) callGateway(r *callRequest, key string, other, decide bool) told {
	name, _ := mcpgateway.ToolName(v1.ToolReference{Name: r.tool}, opCharge)
	args := map[string]any{}
	must(json.Unmarshal(r.arguments(other), &args))
	args[mcpgateway.KeyArgument] = key
	raw, err := json.Marshal(args)
	must(err)
	params := &mcp.CallToolParamsRaw{Name: name, Arguments: raw}
	var decision *v1.Resolution
	if decide {
		decision = w.userDecides(r)
		content := map[string]any{"decision": decisionChoices[decision.Action], "reason": decision.Reason}
		if decision.ExternalObjectID != "" {
			content["externalObjectID"] = decision.ExternalObjectID
		}
		params.RequestState = r.asked
		params.InputResponses = mcp.InputResponseMap{r.input: &mcp.ElicitResult{Action: "accept", Content: content}}
	}
	r.asked, r.input = "", ""
	res, err := w.callers.gateway.CallAs(ended(), agentUser, w.callers.kube, true,
		&mcp.CallToolRequest{Params: params})
	if decision != nil {
		w.decided(r, decision)
	}
	if err != nil {
		return told{what: toldError, text: err.Error()}
	}
	if len(res.InputRequests) > 0 {
		r.asked, r.askedOther = res.RequestState, other
		for id := range res.InputRequests {
			r.input = id
		}
		return told{what: toldAsk, text: "a question for its user: what happened"}
	}
	sc, _ := res.StructuredContent.(map[string]any)
	str := func(k string) string { s, _ := sc[k].(string); return s }
	text := ""
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			text = tc.Text
		}
	}
	if !res.IsError {
		_, decided := sc["resolution"]
		return told{what: toldCommitted, id: str("externalObjectID"), operation: str("operation"), decided: decided, text: text}
	}
	t := told{operation: str("operation"), text: text}
	switch str("error") {
	case v1.ReasonIdempotencyParameterMismatch:
		t.what = toldMismatch
	case "FailedFinal":
		t.what = toldFailed
		t.noEffect = strings.Contains(text, "no lasting effect")
		t.decided = strings.Contains(text, "a person's decision")
	case "NeedsReview":
		t.what = toldReview
	case "Pending":
		t.what = toldPending
	default:
		t.what = toldError
	}
	return t
}

// decisionChoices are the gateway's form's words for each decision.
var decisionChoices = map[v1.ResolutionAction]string{
	v1.ResolutionMarkCommitted: "happened",
	v1.ResolutionRetry:         "did not happen: retry",
	v1.ResolutionFail:          "do not do it",
}

// userDecides is what the agent's user answers, as a person at kubectl
// does (resolve): they look at the tool, name the first effect they see
// there, or, seeing none, allow a retry or stop it.
func (w *World) userDecides(r *callRequest) *v1.Resolution {
	res := &v1.Resolution{Reason: fmt.Sprintf("the agent's user at step %d", w.step)}
	for _, e := range w.current(r.ref) {
		if w.tools[e.Tool].Lookup && !w.clock.Now().Before(e.Visible) {
			res.Action, res.ExternalObjectID = v1.ResolutionMarkCommitted, e.ID
			return res
		}
	}
	res.Action = v1.ResolutionFail
	if w.draws.IntN("decision|"+r.name, 10) < 7 {
		res.Action = v1.ResolutionRetry
	}
	return res
}

// decided notes what a user's answer, once the gateway recorded it, means
// for the ledger: a Retry is their word that nothing happened, and an
// effect it leads to is theirs (Effect.Licensed).
func (w *World) decided(r *callRequest, d *v1.Resolution) {
	recorded := false
	defer func() { r.recorded = recorded }()
	for _, o := range w.server.peek(kindOperation) {
		op := o.(*v1.SideEffectOperation)
		if refOf(op) == r.ref && op.Spec.Resolution != nil && op.Spec.Resolution.Reason == d.Reason {
			recorded = true
		}
	}
	if !recorded {
		w.note("the gateway records nothing")
		return
	}
	w.note("the gateway records %s for %s", d.Action, r.ref)
	if d.Action != v1.ResolutionRetry {
		return
	}
	for _, e := range w.current(r.ref) {
		e.Vouched = true
	}
	w.licenses[inEpoch(r.ref, w.epochs[r.ref])]++
}

// callAgainAll is every caller calling once more for each of its
// requests when the world has settled: what each is told last.
func (w *World) callAgainAll() {
	if w.callers == nil {
		return
	}
	for _, c := range callerNames {
		for i := 1; i <= callerLimits[c]; i++ {
			name := fmt.Sprintf("%s-%d", c, i)
			if w.callers.requests[name] == nil {
				continue
			}
			a := Action{Kind: Call, Name: name, N: callAgain}
			line := w.describeCall(a)
			if line == "" {
				continue
			}
			w.step++
			w.story = append(w.story, fmt.Sprintf("%5d %s  %s", w.step, w.clock.Now().Sub(start).Round(time.Millisecond), line))
			w.call(a)
		}
	}
}
