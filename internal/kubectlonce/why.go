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
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/saga"
)

func newWhyCommand(o *Options) *cobra.Command {
	var asSaga bool
	var output string
	cmd := &cobra.Command{
		Use:   "why NAME | seo/NAME | saga/NAME",
		Short: "Tell an operation's or a saga's story",
		Long: `Tell the story of an operation or a saga, oldest first: every transition
with its time and reason, what the tool answered to each call, lookup and
re-send, and who resolved or approved what, as the API server authenticated
them. A bare NAME is looked up as both kinds.

With -o json or -o yaml it prints the same story as one document: the
object, where it stands, its steps (a saga's), who decided what, and the
story's entries with their fields apart, for scripts.`,
		Example: `  kubectl once why charge-order-1001
  kubectl once why saga/scale-checkout
  kubectl once why charge-order-1001 -o json | jq -r '.story[] | select(.type == "Call") | .outcome'`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: o.completeNames(anyName),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.why(cmd.Context(), args[0], asSaga, output)
		},
	}
	cmd.Flags().BoolVar(&asSaga, "saga", false, "NAME is a saga's")
	addOutputFlag(cmd, &output, "text")
	return cmd
}

func (o *Options) why(ctx context.Context, arg string, asSaga bool, output string) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	k, name, err := parseName(arg, asSaga)
	if err != nil {
		return err
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	ns, err := o.namespace()
	if err != nil {
		return err
	}
	f, err := find(ctx, c, ns, k, name)
	if err != nil {
		return err
	}
	switch {
	case output != "" && f.op != nil:
		return printDoc(o.Streams.Out, operationDoc(f.op), output)
	case output != "":
		return printDoc(o.Streams.Out, sagaDoc(f.saga), output)
	case f.op != nil:
		return writeOperation(o.Streams.Out, f.op, o.now())
	}
	return writeSaga(o.Streams.Out, f.saga, o.now())
}

// entry is one line of a story.
type entry struct {
	Time time.Time
	// What happened: "-> NeedsReview" for a transition, "call", "lookup"
	// and so on for an observation.
	What string
	// At is the attempt (operations) or the step (sagas).
	At string
	// Detail is the reason and message, or what the tool answered.
	Detail string
}

// operationStory merges an operation's transitions and observations by
// time. Both lists are oldest first and stay in their own order. Times
// have a resolution of a second. So at the same second an earlier attempt
// goes first. Within one attempt, a transition into a working state
// (Planned, Started, Reconciling, Compensating) goes before the
// observations. They go before the outcome they led to.
func operationStory(st *v1.SideEffectOperationStatus) []entry {
	events := operationEvents(st)
	out := make([]entry, 0, len(events))
	for _, e := range events {
		if e.t != nil {
			out = append(out, transitionEntry(*e.t, attemptColumn(e.t.Attempt)))
		} else {
			out = append(out, observationEntry(*e.o))
		}
	}
	return out
}

// event is one event of an operation's story: a transition or an
// observation.
type event struct {
	t *v1.Transition
	o *v1.Observation
}

// operationEvents are the events of operationStory, in its order.
func operationEvents(st *v1.SideEffectOperationStatus) []event {
	h, obs := newestTold(st.History, st.Conditions), st.Observations
	out := make([]event, 0, len(h)+len(obs))
	for len(h) > 0 || len(obs) > 0 {
		if len(obs) == 0 || len(h) > 0 && transitionFirst(h[0], obs[0]) {
			out = append(out, event{t: &h[0]})
			h = h[1:]
			continue
		}
		out = append(out, event{o: &obs[0]})
		obs = obs[1:]
	}
	return out
}

// newestTold is an operation's history with the newest transition's
// message, which the manager keeps once, in the Ready condition, when the
// entry holds none and Ready still has the entry's reason.
func newestTold(h []v1.Transition, conds []metav1.Condition) []v1.Transition {
	n := len(h)
	if n == 0 || h[n-1].Message != "" {
		return h
	}
	c := meta.FindStatusCondition(conds, v1.ConditionReady)
	if c == nil || c.Reason != h[n-1].Reason {
		return h
	}
	h = slices.Clone(h)
	h[n-1].Message = c.Message
	return h
}

// transitionFirst reports whether transition t comes before observation o.
func transitionFirst(t v1.Transition, o v1.Observation) bool {
	if !t.Time.Equal(&o.Time) {
		return t.Time.Before(&o.Time)
	}
	if t.Attempt != o.Attempt {
		return t.Attempt < o.Attempt
	}
	switch t.State {
	case v1.StatePlanned, v1.StateStarted, v1.StateReconciling, v1.StateCompensating, "":
		return true
	}
	return false
}

func transitionEntry(t v1.Transition, at string) entry {
	detail := t.Reason
	if t.Message != "" {
		detail += ": " + t.Message
	}
	return entry{Time: t.Time.Time, What: "-> " + string(t.State.OrPlanned()), At: at, Detail: detail}
}

// observationWhat names the kinds of observation in a story.
var observationWhat = map[v1.ObservationKind]string{
	v1.ObservationCall:         "call",
	v1.ObservationResend:       "re-send",
	v1.ObservationLookup:       "lookup",
	v1.ObservationStaleCall:    "stale call",
	v1.ObservationClaimExpired: "claim expired",
	v1.ObservationResolution:   "resolution",
}

func observationEntry(o v1.Observation) entry {
	what := observationWhat[o.Kind]
	if what == "" {
		what = strings.ToLower(string(o.Kind))
	}
	parts := []string{o.Outcome}
	if o.HTTPStatus != 0 {
		parts = append(parts, fmt.Sprintf("HTTP %d", o.HTTPStatus))
	}
	if o.ExternalObjectID != "" {
		parts = append(parts, "external id "+o.ExternalObjectID)
	}
	if o.Request != "" {
		parts = append(parts, o.Request)
	}
	if o.Holder != "" {
		parts = append(parts, "by "+o.Holder)
	}
	detail := strings.Join(parts, ", ")
	if o.Message != "" {
		detail += ": " + o.Message
	}
	return entry{Time: o.Time.Time, What: what, At: attemptColumn(o.Attempt), Detail: detail}
}

func attemptColumn(a int32) string {
	if a == 0 {
		return "-"
	}
	return fmt.Sprint(a)
}

// sagaStory is a saga's transitions, each at its step.
func sagaStory(st *v1.SagaStatus) []entry {
	out := make([]entry, 0, len(st.History))
	for _, t := range st.History {
		step := t.Step
		if step == "" {
			step = "-"
		}
		out = append(out, transitionEntry(t, step))
	}
	return out
}

// writeStory prints a story as a table; at names the third column.
func writeStory(out io.Writer, story []entry, at string) error {
	if len(story) == 0 {
		_, err := fmt.Fprintln(out, "\nNo story yet: the manager has not recorded a transition.")
		return err
	}
	_, _ = fmt.Fprintln(out, "\nStory, oldest first:")
	w := printers.GetNewTabWriter(out)
	_, _ = fmt.Fprintf(w, "  TIME\tWHAT\t%s\tDETAIL\n", at)
	for _, e := range story {
		_, _ = fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", stamp(e.Time), printable(e.What), printable(e.At), printable(e.Detail))
	}
	return w.Flush()
}

// stamp is a time as the story prints it: RFC 3339, in UTC.
func stamp(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// field is a line of a header: a label and a value.
type field struct{ label, value string }

func writeFields(out io.Writer, fields []field) {
	w := printers.GetNewTabWriter(out)
	for _, f := range fields {
		if f.value != "" {
			_, _ = fmt.Fprintf(w, "  %s:\t%s\n", f.label, printable(f.value))
		}
	}
	_ = w.Flush()
}

// writeOperation tells an operation's story: what it is, where it stands,
// who decided what, and its transitions and observations by time.
func writeOperation(out io.Writer, op *v1.SideEffectOperation, now time.Time) error {
	st := &op.Status
	state := st.State.OrPlanned()
	_, _ = fmt.Fprintf(out, "SideEffectOperation %s/%s\n", printable(op.Namespace), printable(op.Name))
	key := st.IdempotencyKey
	if key == "" {
		key = op.Spec.IdempotencyKey
	}
	// An ended operation's status does not keep the key sent to the tool:
	// it is derived from the spec, as the manager derives it.
	key += " (sent to the tool as " + cmp.Or(st.ToolIdempotencyKey, protocol.OperationScope(op).ToolKey()) + ")"
	fields := []field{
		{"Tool", fmt.Sprintf("%s %s, operation %s", op.Spec.ToolRef.EffectiveKind(), op.Spec.ToolRef.Name, op.Spec.Operation)},
		{"Key", key},
		{"Parameters", parameters(op.Spec.Parameters, st.RequestHash)},
		{"Saga", sagaOf(op)},
		{"State", fmt.Sprintf("%s since %s", state, when(since(op.CreationTimestamp, st.Conditions, st.History), now))},
		{"Why", readyMessage(st.Conditions)},
		{"Attempts", fmt.Sprint(st.Attempts)},
		{"External ID", st.ExternalObjectID},
		{"Duplicate of", st.DuplicateOf},
	}
	if st.ErrorMessage != "" && st.ErrorMessage != readyMessage(st.Conditions) {
		fields = append(fields, field{"Last error", fmt.Sprintf("%s: %s", st.ErrorClass, st.ErrorMessage)})
	}
	if cl := st.Claim; cl != nil {
		live := "expires"
		if !cl.ExpiryTime.After(now) {
			live = "expired"
		}
		fields = append(fields, field{"Claim", fmt.Sprintf("held by %s for attempt %d, %s %s",
			cl.Holder, cl.Attempt, live, when(cl.ExpiryTime.Time, now))})
	}
	if r := st.Resolution; r != nil {
		how := fmt.Sprintf(", applied %s, out of %s", when(r.Time.Time, now), r.FromState)
		if st.DuplicateOf != "" {
			// A duplicate adopts the decision taken on its original.
			how = fmt.Sprintf(", on %s %s", st.DuplicateOf, when(r.Time.Time, now))
		}
		fields = append(fields, field{"Resolved", resolutionText(r.Resolution) + how})
	}
	written, disregarded := specResolution(op)
	if written != nil {
		fields = append(fields, field{"Written", resolutionText(*written) + ", in spec.resolution, not applied yet"})
	}
	if disregarded != nil {
		fields = append(fields, field{"Disregarded", resolutionText(*disregarded) +
			", in spec.resolution, decided or written before this review began: it does not decide this review"})
	}
	writeFields(out, fields)
	return writeStory(out, operationStory(st), "ATTEMPT")
}

// specResolution says what an operation's spec.resolution is to the review
// it is in: written during it and waiting to be applied, or disregarded
// (decided or written before it began, status.earlierResolutions). Outside
// NeedsReview it is neither.
func specResolution(op *v1.SideEffectOperation) (written, disregarded *v1.Resolution) {
	r := op.Spec.Resolution
	switch {
	case r == nil || op.Status.State != v1.StateNeedsReview:
		return nil, nil
	case protocol.ResolutionPending(op):
		return r, nil
	case protocol.Earlier(r, op.Status):
		return nil, r
	}
	return nil, nil
}

// resolutionText says what a resolution decided and who decided it.
func resolutionText(r v1.Resolution) string {
	s := string(r.Action)
	if r.ExternalObjectID != "" {
		s += " (external id " + r.ExternalObjectID + ")"
	}
	s += " by " + r.Attribution()
	if r.Reason != "" {
		s += fmt.Sprintf(" (%q)", r.Reason)
	}
	return s
}

// parameters describes an operation's parameters without their values:
// how many fields, and the request hash that binds them.
func parameters(p *runtime.RawExtension, hash string) string {
	n := parameterFields(p)
	s := fmt.Sprintf("%d fields", n)
	if n == 1 {
		s = "1 field"
	}
	if hash != "" {
		s += ", request hash " + hash
	}
	return s
}

// sagaOf names the saga and step an operation belongs to, if any.
func sagaOf(op *v1.SideEffectOperation) string {
	s := sagaOwner(op)
	if s == "" {
		return ""
	}
	if step := op.Labels[saga.LabelStep]; step != "" {
		s += ", step " + step
	}
	if op.Labels[saga.LabelRole] == saga.RoleCompensation {
		s += " (its compensation)"
	}
	return s
}

// sagaOwner is the name of the saga that controls an operation, if any.
func sagaOwner(op *v1.SideEffectOperation) string {
	for _, ref := range op.OwnerReferences {
		if ref.Kind == sagaKind.Name && ref.Controller != nil && *ref.Controller {
			return ref.Name
		}
	}
	return ""
}

// readyMessage is the Ready condition's message: where things stand.
func readyMessage(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, v1.ConditionReady); c != nil {
		return c.Message
	}
	return ""
}

// when is a time and how long ago (or in how long) it is.
func when(t, now time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	if t.After(now) {
		return fmt.Sprintf("%s (in %s)", stamp(t), age(t, now))
	}
	return fmt.Sprintf("%s (%s ago)", stamp(t), age(now, t))
}

// writeSaga tells a saga's story: where it stands, each step with its
// operation, approval and compensation, and its transitions.
func writeSaga(out io.Writer, s *v1.Saga, now time.Time) error {
	st := &s.Status
	state := st.State.OrPlanned()
	_, _ = fmt.Fprintf(out, "Saga %s/%s\n", printable(s.Namespace), printable(s.Name))
	key := st.IdempotencyKey
	if key == "" {
		key = s.Spec.IdempotencyKey
	}
	progress := fmt.Sprintf("%d of %d steps done", st.StepsDone, len(s.Spec.Steps))
	if st.CurrentStep != "" {
		progress = "at step " + st.CurrentStep + ", " + progress
	}
	fields := []field{
		{"Key", key},
		{"State", fmt.Sprintf("%s since %s, %s", state, when(since(s.CreationTimestamp, st.Conditions, st.History), now), progress)},
		{"Why", readyMessage(st.Conditions)},
		{"Failed step", st.FailedStep},
	}
	if st.CompensationsTotal > 0 {
		fields = append(fields, field{"Compensated", fmt.Sprintf("%d of %d", st.CompensationsDone, st.CompensationsTotal)})
	}
	writeFields(out, fields)
	_, _ = fmt.Fprintln(out, "\nSteps:")
	for _, line := range stepLines(s) {
		_, _ = fmt.Fprintln(out, "  "+printable(line))
	}
	return writeStory(out, sagaStory(st), "STEP")
}

// stepLines describes each step of a saga: its operation and state, its
// approval, its compensation and any resolution.
func stepLines(s *v1.Saga) []string {
	status := map[string]*v1.SagaStepStatus{}
	for i := range s.Status.Steps {
		status[s.Status.Steps[i].Name] = &s.Status.Steps[i]
	}
	approvals := map[string]v1.SagaApproval{}
	for _, a := range s.Spec.Approvals {
		approvals[a.Step] = a
	}
	var lines []string
	for _, step := range s.Spec.Steps {
		ss := status[step.Name]
		line := step.Name + ": "
		switch {
		case ss != nil && ss.Operation != "":
			line += fmt.Sprintf("%s, operation %s", ss.State.OrPlanned(), ss.Operation)
			if ss.ExternalObjectID != "" {
				line += ", external id " + ss.ExternalObjectID
			}
		case waitsForApproval(s, step, ss):
			line += fmt.Sprintf("waits for approval (kubectl once approve %s --step %s)", s.Name, step.Name)
		default:
			line += "not started"
		}
		if ss != nil && ss.Message != "" {
			line += "; " + ss.Message
		}
		lines = append(lines, line)
		if ss != nil && ss.Approval != nil {
			a := ss.Approval
			lines = append(lines, "    approved by "+attribution(a.By, a.User)+reasonText(a.Reason)+", applied "+stamp(a.Time.Time))
		} else if a, ok := approvals[step.Name]; ok {
			lines = append(lines, "    approved by "+a.By+reasonText(a.Reason)+" in spec.approvals, not applied yet")
		}
		if ss != nil && ss.Compensation != nil {
			c := ss.Compensation
			l := fmt.Sprintf("    compensation: operation %s", c.Operation)
			if c.State != "" {
				l += ", " + string(c.State)
			}
			if c.ExternalObjectID != "" {
				l += ", external id " + c.ExternalObjectID
			}
			if c.Message != "" {
				l += "; " + c.Message
			}
			lines = append(lines, l)
			if r := c.Resolution; r != nil {
				lines = append(lines, "    compensation resolved: "+sagaResolutionText(*r))
			}
		}
		if ss != nil && ss.Resolution != nil {
			lines = append(lines, "    resolved: "+sagaResolutionText(*ss.Resolution))
		}
	}
	return lines
}

func sagaResolutionText(r v1.SagaResolution) string {
	return string(r.Action) + " by " + attribution(r.By, r.User) + reasonText(r.Reason)
}

// attribution is who decided: the person named and, if the API server
// authenticated someone else, that user.
func attribution(by, user string) string {
	return (&v1.Resolution{By: by, User: user}).Attribution()
}

func reasonText(reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf(" (%q)", reason)
}
