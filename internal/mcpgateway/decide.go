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
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/review"
	sagacore "github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/internal/text"
	"github.com/once-dev/once/pkg/once"
)

// The host's user decides (multi round-trip requests, protocol 2026-07-28).
//
// A call whose operation waits for a person (an operation in NeedsReview,
// a saga step waiting for approval) gets an input request, on a session
// that speaks 2026-07-28 over HTTP. That is a form the host shows its
// user. The host calls again with the user's answer and the request state.
// The gateway writes the decision on the object as the caller, through the
// code path of kubectl once resolve and approve (internal/review). So the
// API server's RBAC decides whether the caller may, and Once's admission
// policy records who wrote it. Then the call waits for the outcome as any
// call does.
//
// The request state is not trusted. The object is the one the call's own
// arguments name, and the call's own arguments must be the object's
// request. The state only binds the answer:
//
//   - to the incarnation of the object (its UID);
//   - for an operation, to its request hash and to the review it was asked
//     in (an answer about an earlier attempt says nothing of a later one);
//   - for a saga, to the step it waits on.
//
// A decline records nothing and answers as today, saying that the user
// declined. A cancel, or no answer, records nothing and answers as today.
// Older protocol versions and stdio get today's answers only.

// decisionInput is the id of the gateway's one input request.
const decisionInput = "once.dev/decision"

// minInputProtocol is the first protocol version with input requests.
const minInputProtocol = "2026-07-28"

// decisionState is what an input request binds its answer to.
type decisionState struct {
	// Kind is fieldOperation or fieldSaga.
	Kind string `json:"k"`
	Name string `json:"n"`
	UID  string `json:"u"`
	// RequestHash and Review (its status.reviewGeneration when asked) are
	// an operation's; Step a saga's step.
	RequestHash string `json:"h,omitempty"`
	Review      int64  `json:"r,omitempty"`
	Step        string `json:"s,omitempty"`
}

func (s decisionState) encode() string {
	b, _ := json.Marshal(s)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeState(raw string) (decisionState, error) {
	var s decisionState
	b, err := base64.RawURLEncoding.DecodeString(raw)
	if err == nil {
		err = json.Unmarshal(b, &s)
	}
	if err != nil {
		return s, errors.New("the request state is not one this gateway wrote")
	}
	return s, nil
}

// asksUser reports whether the call's session can carry an input request.
// It needs all of these:
//
//   - HTTP, not stdio, which keeps today's answers;
//   - protocol 2026-07-28 or later;
//   - a client that said it shows forms: the elicitation capability, with
//     the form mode or no mode named.
func (g *Gateway) asksUser(ctx context.Context, req *mcp.CallToolRequest) bool {
	if asks, ok := ctx.Value(asksKey{}).(bool); ok {
		// CallAs said it for its caller's host.
		return asks
	}
	if g.self != nil || req.Session == nil {
		return false
	}
	p := req.Session.InitializeParams()
	if p == nil || p.ProtocolVersion < minInputProtocol || p.Capabilities == nil {
		return false
	}
	return showsForms(p.Capabilities.Elicitation)
}

// showsForms reports whether a client's elicitation capability takes
// forms: said, or implied by a capability that names no mode (a client of
// an older version).
func showsForms(e *mcp.ElicitationCapabilities) bool {
	return e != nil && (e.Form != nil || e.URL == nil)
}

// resolutionChoices are what the user may answer about an operation in
// NeedsReview, and the resolution each writes.
var resolutionChoices = map[string]v1.ResolutionAction{
	"happened":              v1.ResolutionMarkCommitted,
	"did not happen: retry": v1.ResolutionRetry,
	"do not do it":          v1.ResolutionFail,
}

// askResolution asks the host's user to decide an operation in
// NeedsReview.
func askResolution(op *v1.SideEffectOperation, why string) mcp.Result {
	st := decisionState{Kind: fieldOperation, Name: op.Name, UID: string(op.UID), RequestHash: op.Status.RequestHash,
		Review: op.Status.ReviewGeneration}
	return inputRequired{&mcp.CallToolResult{RequestState: st.encode(), InputRequests: mcp.InputRequestMap{
		decisionInput: &mcp.ElicitParams{
			Message: fmt.Sprintf("Once cannot tell whether %s of %s %s, with %s, happened at the tool (operation "+
				"%s): %s. Check the tool, then say what happened; Once records your answer on the operation and "+
				"acts on it.", op.Spec.Operation, op.Spec.ToolRef.EffectiveKind(), op.Spec.ToolRef.Name,
				summary(op), op.Name, why),
			RequestedSchema: form(map[string]any{
				"decision":      choice("What happened", "happened", "did not happen: retry", "do not do it"),
				fieldExternalID: textField("The effect's id at the tool (needed if it happened)", 0, 253),
				fieldReason:     textField("Why", 1, maxReason),
			}, "decision", fieldReason),
		}}}}
}

// summary is an operation's parameters, shortened for a person to tell
// the request apart.
func summary(op *v1.SideEffectOperation) string {
	return shorten(op.Spec.Parameters)
}

// shorten is parameters as a person reads them in a form.
func shorten(params *runtime.RawExtension) string {
	if params == nil || len(params.Raw) == 0 {
		return "no parameters"
	}
	return text.Shorten(string(params.Raw), 200)
}

// askApproval asks the host's user to approve a saga's step.
func askApproval(s *v1.Saga, step, why string) mcp.Result {
	st := decisionState{Kind: fieldSaga, Name: s.Name, UID: string(s.UID), Step: step}
	what := ""
	for _, ss := range s.Spec.Steps {
		if ss.Name == step {
			what = fmt.Sprintf(" (%s of %s %s, with %s)", ss.Operation, ss.ToolRef.EffectiveKind(), ss.ToolRef.Name,
				shorten(ss.Parameters))
		}
	}
	return inputRequired{&mcp.CallToolResult{RequestState: st.encode(), InputRequests: mcp.InputRequestMap{
		decisionInput: &mcp.ElicitParams{
			Message: fmt.Sprintf("Saga %s waits for approval of step %s%s: %s. Approve it to let the saga run it.",
				s.Name, step, what, why),
			RequestedSchema: form(map[string]any{
				"approve":   map[string]any{schemaType: "boolean", formTitle: "Approve step " + step},
				fieldReason: textField("Why", 1, maxReason),
			}, "approve", fieldReason),
		}}}}
}

// form is the JSON Schema of a form: an object of the properties, those
// named required.
func form(props map[string]any, required ...string) map[string]any {
	f := map[string]any{schemaType: "object", properties: props}
	if len(required) > 0 {
		f["required"] = required
	}
	return f
}

// textField is a form's string field of minLength (none if 0) to maxLength
// characters.
func textField(title string, minLength, maxLength int) map[string]any {
	f := stringSchema(minLength, maxLength)
	f[formTitle] = title
	return f
}

// formTitle is the JSON Schema keyword a form shows as a field's label.
const formTitle = "title"

// choice is a form's field whose value is one of values.
func choice(title string, values ...string) map[string]any {
	return map[string]any{schemaType: "string", formTitle: title, "enum": values}
}

// answered is what the user answered to the gateway's input request, if
// the call carries an answer: the action (accept, decline, cancel) and the
// form's content.
func answered(req *mcp.CallToolRequest) (action string, content map[string]any, state string, ok bool) {
	r, found := req.Params.InputResponses[decisionInput]
	if !found || req.Params.RequestState == "" {
		return "", nil, "", false
	}
	er, isElicit := r.(*mcp.ElicitResult)
	if !isElicit {
		return "", nil, "", false
	}
	return er.Action, er.Content, req.Params.RequestState, true
}

// answeredOperation is the operation the call's answer was asked about,
// as its request state names it; "" for a call without one.
func answeredOperation(req *mcp.CallToolRequest) string {
	_, _, raw, ok := answered(req)
	if !ok {
		return ""
	}
	st, err := decodeState(raw)
	if err != nil || st.Kind != fieldOperation {
		return ""
	}
	return st.Name
}

// errDeclined: the user declined to decide.
var errDeclined = errors.New("the user declined to decide")

// decideOperation writes the user's answer on the operation named, as the
// caller. It returns errDeclined for a decline, nil when there is nothing
// to write (a cancel, an answer to another object).
func decideOperation(ctx context.Context, c *caller, ns, name string, r once.Request, req *mcp.CallToolRequest) error {
	action, content, raw, ok := answered(req)
	if !ok || action == "cancel" {
		return nil
	}
	if action == "decline" {
		return errDeclined
	}
	st, err := decodeState(raw)
	if err != nil {
		return err
	}
	op := &v1.SideEffectOperation{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, op); err != nil {
		return fmt.Errorf("reading %s to record the decision: %w", name, err)
	}
	if err := st.boundTo(op, r); err != nil {
		return err
	}
	res, err := resolutionOf(content, c)
	if err != nil {
		return err
	}
	// Each try checks the operation as it reads then: a conflict means it
	// changed, and may have moved on to another review.
	lost := false
	for again := 0; ; again++ {
		if err := st.boundTo(op, r); err != nil {
			return err
		}
		if review.CanResolve(op) != nil {
			// Decided meanwhile (this answer sent twice, or a person with
			// kubectl once): the outcome answers the call.
			return nil
		}
		if old := op.Spec.Resolution; old != nil && protocol.ResolutionPending(op) {
			if protocol.SameResolution(*old, res) {
				// This answer, written by this call's earlier try: Once
				// applies it on its next pass.
				break
			}
			// Someone decided since the question was asked (a person
			// with kubectl once, another host's user): theirs stands.
			return fmt.Errorf("%s decided %s meanwhile; nothing was recorded", old.By, name)
		}
		if protocol.SameDecision(res, op.Status.Resolution) || protocol.Earlier(&res, op.Status) {
			// Once applies a decision once: the same words as an earlier
			// review's, or as a resolution written before this review,
			// are taken for that decision, not a new one.
			return fmt.Errorf("this is the decision, with the same reason, that an earlier review of %s applied "+
				"or that was written before this review began; answer again with another reason to decide this "+
				"review. Nothing was recorded", name)
		}
		err := review.ResolveOperation(ctx, c.kube, op, res)
		if err == nil {
			break
		}
		lost = lost || mayHaveLanded(err)
		if again > 0 || (!apierrors.IsConflict(err) && !mayHaveLanded(err)) {
			return unsure(err, lost)
		}
		// Written meanwhile (the same answer sent twice, a person), or
		// written by this try with its answer lost: read it again and
		// decide once more.
		if err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, op); err != nil {
			return unsure(err, lost)
		}
	}
	// The manager applies the resolution on its next pass: until then the
	// operation still reads NeedsReview, which would answer the call.
	return waitFor(ctx, c, client.ObjectKey{Namespace: ns, Name: name}, &v1.SideEffectOperation{},
		func(o *v1.SideEffectOperation) bool {
			return o.Status.State != v1.StateNeedsReview ||
				(o.Status.Resolution != nil && o.Status.Resolution.Generation >= op.Generation)
		})
}

// maxReason is the longest reason a decision holds (the CRDs' bound).
const maxReason = 1024

// decidedBy is who a decision names as its writer: the gateway for the
// caller, within the CRDs' 253 bytes (admission records the caller's full
// name beside it, as user).
func decidedBy(c *caller) string {
	return text.Shorten("mcp:"+c.user, 253)
}

// boundTo says why an answer asked with st cannot be recorded on op for
// the call's request r: the question was about another object, another
// incarnation of it, another request, or an earlier review.
func (st decisionState) boundTo(op *v1.SideEffectOperation, r once.Request) error {
	// This call's own request, which the operation holds, and the one the
	// question was asked about.
	hash, err := once.RequestHash(r)
	if err != nil || st.Kind != fieldOperation || st.Name != op.Name || types.UID(st.UID) != op.UID ||
		st.RequestHash != op.Status.RequestHash || hash != op.Status.RequestHash {
		return errors.New("the answer was asked about another request than this call's; nothing was recorded")
	}
	if st.Review != op.Status.ReviewGeneration {
		// Asked about an earlier attempt, which a decision since settled;
		// the operation waits for a person again, about another one.
		return fmt.Errorf("the answer was asked about an earlier attempt of %s, which needs review again; "+
			"nothing was recorded", op.Name)
	}
	return nil
}

// resolutionOf is the resolution a user's form answers, written by the
// gateway for caller c.
func resolutionOf(content map[string]any, c *caller) (v1.Resolution, error) {
	decision, _ := content["decision"].(string)
	act, known := resolutionChoices[decision]
	reason, _ := content[fieldReason].(string)
	if !known || reason == "" {
		return v1.Resolution{}, fmt.Errorf("the answer names no decision and reason Once knows (%q); "+
			"nothing was recorded", decision)
	}
	if utf8.RuneCountInString(reason) > maxReason {
		return v1.Resolution{}, fmt.Errorf("the reason is longer than %d characters; nothing was recorded", maxReason)
	}
	res := v1.Resolution{Action: act, By: decidedBy(c), Reason: reason}
	if act == v1.ResolutionMarkCommitted {
		// Once records the effect a person found, by its id.
		res.ExternalObjectID, _ = content[fieldExternalID].(string)
		if res.ExternalObjectID == "" {
			return v1.Resolution{}, errors.New("an answer that it happened needs the effect's id at the tool; " +
				"nothing was recorded")
		}
	}
	return res, nil
}

// decisionWait bounds the wait for the manager to apply a decision; the
// call's own deadline bounds it too. A call past it answers what the
// object says then, and the same call again answers the outcome.
const decisionWait = 30 * time.Second

// waitFor reads the object until applied says the manager applied a
// decision, the bound passes or ctx ends; only an error of the API server
// other than a passing bound is returned.
func waitFor[T client.Object](ctx context.Context, c *caller, key client.ObjectKey, obj T, applied func(T) bool) error {
	ctx, cancel := context.WithTimeout(ctx, decisionWait)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := c.kube.Get(ctx, key, obj); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if applied(obj) {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// decideSaga writes the user's approval of the step the saga waits on, as
// the caller. A refusal to approve is a decline.
func decideSaga(ctx context.Context, c *caller, ns string, r once.SagaRequest, req *mcp.CallToolRequest, asks bool) error {
	action, content, raw, ok := answered(req)
	if !asks || !ok || action == "cancel" {
		return nil
	}
	if approve, _ := content["approve"].(bool); action == "decline" || !approve {
		return errDeclined
	}
	st, err := decodeState(raw)
	if err != nil {
		return err
	}
	name := once.SagaName(r.Key)
	s := &v1.Saga{}
	if err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		return fmt.Errorf("reading saga %s to record the approval: %w", name, err)
	}
	if err := st.sagaBoundTo(s, r); err != nil {
		return err
	}
	reason, _ := content[fieldReason].(string)
	if utf8.RuneCountInString(reason) > maxReason {
		return fmt.Errorf("the reason is longer than %d characters; nothing was recorded", maxReason)
	}
	a := v1.SagaApproval{Step: st.Step, By: decidedBy(c), Reason: reason}
	// Each try checks the saga as it reads then, as for an operation.
	lost := false
	for again := 0; ; again++ {
		if err := st.sagaBoundTo(s, r); err != nil {
			return err
		}
		if review.CanApprove(s, st.Step) != nil {
			// Approved meanwhile, or the saga moved on: its outcome answers.
			return nil
		}
		if !waitsOn(s, st.Step) {
			return fmt.Errorf("saga %s does not wait for approval of step %s now; nothing was recorded", name, st.Step)
		}
		err := review.ApproveStep(ctx, c.kube, s, a)
		if err == nil {
			break
		}
		lost = lost || mayHaveLanded(err)
		if again > 0 || (!apierrors.IsConflict(err) && !mayHaveLanded(err)) {
			return unsure(err, lost)
		}
		if err := c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
			return unsure(err, lost)
		}
	}
	// As for a resolution: the saga waits until the manager applies it.
	return waitFor(ctx, c, client.ObjectKey{Namespace: ns, Name: name}, &v1.Saga{}, func(s *v1.Saga) bool {
		if s.Status.State.IsTerminal() {
			return true
		}
		for _, ss := range s.Status.Steps {
			if ss.Name == st.Step {
				return ss.Approval != nil
			}
		}
		return false
	})
}

// sagaBoundTo says why an approval asked with st cannot be recorded on s
// for the call's request r: the question was about another saga, another
// incarnation of it, or the call's steps and inputs are not the saga's.
func (st decisionState) sagaBoundTo(s *v1.Saga, r once.SagaRequest) error {
	if st.Kind != fieldSaga || st.Name != s.Name || types.UID(st.UID) != s.UID {
		return fmt.Errorf("the answer was asked about another saga than %s; nothing was recorded", s.Name)
	}
	if msg := once.SagaMismatch(r, s); msg != "" {
		// The same key with other steps or inputs: the saga the user
		// approved is not this call's request.
		return fmt.Errorf("the answer was asked about another request than this call's (%s); nothing was recorded", msg)
	}
	return nil
}

// waitsOn reports whether the saga waits for a person's approval of step
// now, as its status says.
func waitsOn(s *v1.Saga, step string) bool {
	stalled := meta.FindStatusCondition(s.Status.Conditions, v1.ConditionStalled)
	return s.Status.CurrentStep == step && stalled != nil && stalled.Status == metav1.ConditionTrue &&
		stalled.Reason == sagacore.ReasonWaitingForApproval
}

// decisionRefused is the answer to a call whose decision could not be
// recorded: RBAC refused the caller, or the object moved on. A write whose
// answer was lost may have been recorded all the same, and says so.
func decisionRefused(err error, code string) *mcp.CallToolResult {
	if apierrors.IsForbidden(err) {
		return toolError(codeForbidden, "you may not decide this: "+err.Error()+"; nothing was recorded", nil)
	}
	if maybe, ok := errors.AsType[*maybeRecorded](err); ok {
		return toolError(code, "the decision may have been recorded, but the API server's answer to it was lost ("+
			maybe.err.Error()+"); call again with the same key: the answer says what stands", nil)
	}
	return toolError(code, "the decision was not recorded: "+err.Error(), nil)
}

// maybeRecorded is a decision whose write may have been applied: the API
// server's answer to it was lost.
type maybeRecorded struct{ err error }

func (m *maybeRecorded) Error() string {
	return "the decision may have been recorded: " + m.err.Error()
}

func (m *maybeRecorded) Unwrap() error { return m.err }

// unsure is err, or maybeRecorded if an earlier write's answer was lost.
func unsure(err error, lost bool) error {
	if lost {
		return &maybeRecorded{err: err}
	}
	return err
}

// mayHaveLanded reports whether a write that failed with err may have
// been applied: its answer was lost (a dropped connection, a timeout, a
// server error). The API server's refusals were not applied.
func mayHaveLanded(err error) bool {
	switch apierrors.ReasonForError(err) {
	case metav1.StatusReasonConflict, metav1.StatusReasonForbidden, metav1.StatusReasonInvalid,
		metav1.StatusReasonBadRequest, metav1.StatusReasonNotFound, metav1.StatusReasonTooManyRequests,
		metav1.StatusReasonUnauthorized, metav1.StatusReasonMethodNotAllowed, metav1.StatusReasonGone,
		metav1.StatusReasonRequestEntityTooLarge, metav1.StatusReasonUnsupportedMediaType,
		metav1.StatusReasonNotAcceptable, metav1.StatusReasonAlreadyExists:
		return false
	}
	return true
}

// askResolution is the input request to answer a call whose operation
// waits for a person, when the host's user can be asked and was not yet in
// this call; nil otherwise.
func (g *Gateway) askResolution(ctx context.Context, req *mcp.CallToolRequest, c *caller, ns string, err error,
	declined bool) mcp.Result {
	var nr *once.NeedsReviewError
	if declined || !errors.As(err, &nr) || nr.Kind == once.KindSaga || !g.asksUser(ctx, req) {
		return nil
	}
	if _, _, _, ok := answered(req); ok {
		return nil
	}
	if may, err := c.may(ctx, ns, "patch", "sideeffectoperations"); err != nil || !may {
		// A user who could not record the answer is not asked.
		return nil
	}
	op := &v1.SideEffectOperation{}
	if c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: nr.Name}, op) != nil || op.Status.State != v1.StateNeedsReview {
		return nil
	}
	return askResolution(op, nr.Message)
}

// askApproval is askResolution for a saga's step waiting for approval.
func (g *Gateway) askApproval(ctx context.Context, req *mcp.CallToolRequest, c *caller, ns string, err error,
	declined bool) mcp.Result {
	var wa *once.WaitingForApprovalError
	if declined || !errors.As(err, &wa) || !g.asksUser(ctx, req) {
		return nil
	}
	if _, _, _, ok := answered(req); ok {
		return nil
	}
	if may, err := c.may(ctx, ns, "patch", "sagas"); err != nil || !may {
		return nil
	}
	s := &v1.Saga{}
	if c.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: wa.Name}, s) != nil {
		return nil
	}
	return askApproval(s, wa.Step, wa.Message)
}

// withDecline adds to an answer that the host's user declined to decide.
func withDecline(r *mcp.CallToolResult, declined bool) *mcp.CallToolResult {
	if !declined || !r.IsError || len(r.Content) == 0 {
		return r
	}
	if t, ok := r.Content[0].(*mcp.TextContent); ok {
		t.Text += ". The user declined to decide: nothing was recorded, and a person must decide (kubectl once)"
	}
	return r
}
