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
	"regexp"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// Client creates and waits for operations through a controller-runtime
// client, with the rights of whoever that client authenticates as: it
// needs create and get on sideeffectoperations in the request's namespace.
type Client struct {
	kube client.Client

	// Backoff paces the retries of transient API errors.
	Backoff wait.Backoff
	// PollMin and PollMax bound the interval between two reads of an
	// operation while Do waits: it starts at PollMin and doubles up to
	// PollMax.
	PollMin, PollMax time.Duration
	// Clock tells the time by which a record's outcome has expired (New
	// sets the wall clock). A test or a simulator gives its own.
	Clock clock.PassiveClock
}

// New returns a Client over c, with default pacing.
func New(c client.Client) *Client {
	return &Client{
		kube:    c,
		Backoff: wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 6, Cap: 5 * time.Second},
		PollMin: 100 * time.Millisecond,
		PollMax: 2 * time.Second,
		Clock:   clock.RealClock{},
	}
}

// Request is one side effect bound to an idempotency key.
type Request struct {
	// Namespace of the operation.
	Namespace string
	// Name of the SideEffectOperation. Empty, it is ObjectName(Tool,
	// Operation, Key), so that a retry finds the same object.
	Name string
	// Tool performs the effect; Kind defaults to Tool.
	Tool v1.ToolReference
	// Operation is one of the tool's operations.
	Operation string
	// Key is the idempotency key: every retry of the same business
	// operation must carry the same one. Required.
	Key string
	// Parameters is the request, a JSON object; nil for none.
	Parameters json.RawMessage
	// Labels are put on the operation when Do creates it.
	Labels map[string]string
	// Retention is how long the operation's scope record keeps its outcome
	// after it ends (spec.retention), so that the same request within it
	// gets that outcome and makes no second effect; zero is the API
	// server's default, 24 hours. It must be at least the tool's replay
	// window.
	Retention time.Duration
	// TTLSecondsAfterFinished is how long the operation is kept after it
	// ends (spec.ttlSecondsAfterFinished): nil is
	// DefaultTTLSecondsAfterFinished, one hour; negative keeps it until
	// someone deletes it. Its record outlives it until Retention has passed.
	TTLSecondsAfterFinished *int32
	// Progress, if set, is called while Do waits, each time the
	// operation's state or message changes.
	Progress func(Progress)
}

// Progress is what Do reports while it waits.
type Progress struct {
	// Name of the operation (or saga).
	Name string
	// State of the operation, or phase of the saga.
	State string
	// Message of the Ready condition, or the saga's current step.
	Message string
	// Done and Total count a saga's finished steps; zero for an operation.
	Done, Total int
}

// Result is the outcome of an operation that ended well.
type Result struct {
	// Namespace and Name of the operation.
	Namespace, Name string
	// State is Committed, or Compensated for a compensated saga step.
	State v1.OperationState
	// ExternalObjectID identifies the effect at the tool.
	ExternalObjectID string
	// Result is what the tool answered, as the tool's response mapping
	// keeps it; nil when there was none, or it was larger than 16 KiB.
	Result json.RawMessage
	// ResultDigest identifies the result even when it was too large to keep.
	ResultDigest string
	// Attempts made; 0 for a duplicate, which made no call.
	Attempts int32
	// DuplicateOf names the operation whose outcome this one reports, when
	// another operation held the key.
	DuplicateOf string
	// Found is true when Do found the operation, or its record, instead of
	// creating it: this call was a retry.
	Found bool
	// Resolution is the person's decision the outcome rests on, when a
	// person resolved the operation (MarkCommitted, or a Retry that then
	// committed), or, for a duplicate (DuplicateOf), its original; nil when
	// Once established the outcome itself.
	Resolution *v1.RecordResolution
}

// MismatchError: the key is bound to a different request. Nothing was
// executed for this request; a new request needs a new key.
type MismatchError struct {
	// Kind is "operation" or "saga"; empty means operation.
	Kind                 string
	Namespace, Name, Key string
	// Message says what differs.
	Message string
	// Outcome is set when the refusal is the outcome of an operation made
	// with this very request (the tool, or Once, refused its key then), not
	// a difference between this request and the operation or record of its
	// key now.
	Outcome bool
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("idempotency key %q is bound to a different request (%s %s/%s): %s",
		e.Key, kindOf(e.Kind), e.Namespace, e.Name, e.Message)
}

// FailedError: the operation failed for good. Either the tool refused it,
// with no effect; or (Decided) a person resolved it with Fail: the
// operation must not run, and whether an earlier attempt took effect was
// not established; or (EffectReported) the tool named an effect of it after
// it failed, and that effect may stand. In no case may the request be made
// again under a new key without finding out.
type FailedError struct {
	// Kind is "operation" or "saga"; empty means operation.
	Kind            string
	Namespace, Name string
	// Class and Reason classify the failure (for example Permanent,
	// Rejected); Message is the tool's or Once's explanation.
	Class           v1.ErrorClass
	Reason, Message string
	// Decided: a person's Fail resolution ended it, after an outcome Once
	// could not tell.
	Decided bool
	// EffectReported: after it failed, a late answer of the tool named an
	// effect of it; a person should look.
	EffectReported bool
	// Resolution is the person's decision the failure rests on, if any.
	Resolution *v1.RecordResolution
}

func (e *FailedError) Error() string {
	return fmt.Sprintf("%s %s/%s failed for good (%s): %s", kindOf(e.Kind), e.Namespace, e.Name, e.Reason, e.Message)
}

// NeedsReviewError: Once cannot tell whether the effect happened. A person
// decides by setting spec.resolution; a later Do with the same key returns
// the decided outcome.
type NeedsReviewError struct {
	// Kind is "operation" or "saga"; empty means operation.
	Kind            string
	Namespace, Name string
	// Message is the operation's explanation.
	Message string
}

func (e *NeedsReviewError) Error() string {
	ref, field := "seo/"+e.Name, "spec.resolution"
	if e.Kind == KindSaga {
		ref, field = "saga/"+e.Name, "spec.resolutions"
	}
	return fmt.Sprintf("%s %s/%s needs a person's review: %s; a person decides with "+
		"`kubectl once why %s -n %s` and %s, then the same request returns the decided outcome",
		kindOf(e.Kind), e.Namespace, e.Name, e.Message, ref, e.Namespace, field)
}

// PendingError: the context ended before the operation did. The operation
// goes on; a later Do with the same key returns its outcome.
type PendingError struct {
	// Kind is "operation" or "saga"; empty means operation.
	Kind            string
	Namespace, Name string
	// State is the last state seen; Reason and Message those of the Ready
	// condition (a Stalled operation says here what it waits for).
	State           string
	Reason, Message string
	// Err is the context's error.
	Err error
}

func (e *PendingError) Error() string {
	msg := fmt.Sprintf("%s %s/%s has not ended yet (state %s",
		kindOf(e.Kind), e.Namespace, e.Name, cmp.Or(e.State, "Planned"))
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg + "); it goes on, and the same request again returns its outcome"
}

func (e *PendingError) Unwrap() error { return e.Err }

// KindSaga is the Kind of the errors about a saga.
const KindSaga = "saga"

func kindOf(kind string) string {
	return cmp.Or(kind, "operation")
}

// ObjectName is the name Do gives an operation when the request names
// none: the tool and the operation, made DNS-1123 safe, and 20 hex digits
// of the SHA-256 of kind, tool, operation and key. The same request always
// gets the same name; different keys get different names.
func ObjectName(tool v1.ToolReference, operation, key string) string {
	sum := sha256.Sum256([]byte(string(tool.EffectiveKind()) + "\x00" + tool.Name + "\x00" + operation + "\x00" + key))
	prefix := dns1123(tool.Name + "-" + operation)
	if len(prefix) > 40 {
		prefix = strings.TrimRight(prefix[:40], "-.")
	}
	if prefix == "" {
		prefix = "op"
	}
	return prefix + "-" + hex.EncodeToString(sum[:10])
}

var notDNS = regexp.MustCompile(`[^a-z0-9-]+`)

// dns1123 lower-cases s, turns other characters into dashes and trims
// them from the ends.
func dns1123(s string) string {
	return strings.Trim(notDNS.ReplaceAllString(strings.ToLower(s), "-"), "-")
}

// Do creates the operation that req describes, or finds the one that exists
// for it, waits until it commits, fails for good or needs review (or ctx
// ends), and returns the outcome. See the package documentation for the
// errors.
//
// When the operation is gone (its TTL ran out after it ended) and its
// scope's record keeps its outcome, Do answers from the record, as
// Recorded does, and creates nothing: the recorded outcome for the same
// request, a *MismatchError for another. Once the record has expired too,
// the key starts a new lifetime: Do creates the operation again, and it
// executes again.
func (c *Client) Do(ctx context.Context, req Request) (Result, error) {
	if err := check(req); err != nil {
		return Result{}, err
	}
	created := false
	for again := 0; ; again++ {
		res, made, err := c.do(ctx, req)
		created = created || made
		if !apierrors.IsNotFound(err) || again == 2 {
			// An answer for the operation this call created is no retry's,
			// even when the record gave it.
			res.Found = res.Found && !created
			return res, err
		}
		// The operation went while Do read it (its TTL ran out between two
		// reads): its scope's record now keeps its outcome.
	}
}

// do answers req from its record, or creates (created) or finds its
// operation and waits for it.
func (c *Client) do(ctx context.Context, req Request) (res Result, created bool, err error) {
	if res, ok, err := c.Recorded(ctx, req); ok {
		return res, false, err
	}
	op, found, err := c.ensure(ctx, req)
	if err != nil {
		return Result{}, false, err
	}
	res, err = c.wait(ctx, op, req.Progress)
	res.Found = found
	return res, !found, err
}

// Recorded answers req from its scope's IdempotencyRecord: ok is true when
// the record keeps the outcome of the scope's operation, which was deleted
// after it ended, and the outcome has not expired (spec.outcome.expiryTime,
// completion plus retention). The answer is then the one the operation gave:
// the Result (Found, with the person's Resolution if one decided) or the
// error of a failure for good, for the same request; a *MismatchError for
// a request with other parameters. ok is false when only an operation can
// answer: no record, a record without an outcome (the outcome is written
// when the operation is deleted), an expired outcome, or a record this client may not read (get on
// idempotencyrecords); Do then creates or finds the operation, which adopts
// the record's outcome itself.
func (c *Client) Recorded(ctx context.Context, req Request) (res Result, ok bool, err error) {
	if err := check(req); err != nil {
		return Result{}, true, err
	}
	want := newOperation(req)
	scope := protocol.OperationScope(want)
	rec := &v1.IdempotencyRecord{}
	err = c.get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: scope.RecordName()}, rec)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		return Result{}, false, nil
	}
	if err != nil {
		return Result{}, true, err
	}
	o := rec.Spec.Outcome
	if o == nil || !o.State.IsTerminal() || !c.now().Before(o.ExpiryTime.Time) {
		return Result{}, false, nil
	}
	hash, err := requestHash(want)
	if err != nil {
		// Parameters that cannot be hashed: the operation says why.
		return Result{}, false, nil
	}
	owner := rec.Spec.Owner.Name
	if hash != rec.Spec.RequestHash {
		return Result{}, true, &MismatchError{Namespace: req.Namespace, Name: owner, Key: req.Key,
			Message: fmt.Sprintf("its record %s keeps the outcome of other parameters (request hash %s, this request's %s)",
				rec.Name, shortHash(rec.Spec.RequestHash), shortHash(hash))}
	}
	res, err = answer(req.Namespace, owner, req.Key, *o, "")
	res.Found = err == nil
	return res, true, err
}

// now is the time by Clock, or the wall clock's without one.
func (c *Client) now() time.Time {
	if c.Clock == nil {
		return time.Now()
	}
	return c.Clock.Now()
}

// KeyUse is what is known of the use of a request's key.
type KeyUse struct {
	// First is when the key was first used: the creation of its operation
	// or, once the operation is gone, of its scope's record, which is made
	// when the operation is first worked on.
	First time.Time
	// Ended says that the key's operation ended (Committed, FailedFinal or
	// Compensated), at End: its completion, as the operation or, once it is
	// gone, its record's outcome says. An operation in NeedsReview has not
	// ended; neither has one that was deleted before it ended, whose record
	// keeps its attempt for the next operation of the key.
	Ended bool
	End   time.Time
}

// Use reports what is known of the use of req's key, and false when it
// was not used (or its use is forgotten): from req's operation, or, once
// the operation is gone, from its scope's record, which is kept at least
// for the outcome's retention after the operation ends. A record this
// client may not read is an error: the key may be in use.
func (c *Client) Use(ctx context.Context, req Request) (KeyUse, bool, error) {
	if err := check(req); err != nil {
		return KeyUse{}, false, err
	}
	want := newOperation(req)
	op := &v1.SideEffectOperation{}
	err := c.get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: want.Name}, op)
	if err == nil {
		return OperationUse(op), true, nil
	}
	if !apierrors.IsNotFound(err) {
		return KeyUse{}, false, err
	}
	rec := &v1.IdempotencyRecord{}
	err = c.get(ctx, client.ObjectKey{Namespace: req.Namespace, Name: protocol.OperationScope(want).RecordName()}, rec)
	switch {
	case err == nil:
		u := KeyUse{First: rec.CreationTimestamp.Time}
		if o := rec.Spec.Outcome; o != nil && o.State.IsTerminal() {
			u.Ended, u.End = true, o.CompletionTime.Time
		}
		return u, true, nil
	case apierrors.IsNotFound(err):
		return KeyUse{}, false, nil
	}
	return KeyUse{}, false, err
}

// OperationUse is the use of op's key that op shows: its creation, and
// its completion once it ended (its creation, if it ended without one).
func OperationUse(op *v1.SideEffectOperation) KeyUse {
	u := KeyUse{First: op.CreationTimestamp.Time, Ended: op.Status.State.IsTerminal()}
	if u.Ended {
		u.End = u.First
		if t := op.Status.CompletionTime; t != nil {
			u.End = t.Time
		}
	}
	return u
}

// RequestHash is the request hash of req's operation, as its status and
// its scope's record keep it: what a decision on that operation is bound
// to.
func RequestHash(req Request) (string, error) {
	return requestHash(newOperation(req))
}

// requestHash is the request hash of the operation op would be.
func requestHash(op *v1.SideEffectOperation) (string, error) {
	scope := protocol.OperationScope(op)
	hash, _, err := protocol.RequestHash(scope.Tool, scope.Operation, raw(op.Spec.Parameters))
	return hash, err
}

// check refuses a request Do cannot make.
func check(req Request) error {
	if req.Key == "" {
		return errors.New("once: Request.Key is required: only the caller knows whether a call is a retry")
	}
	if req.Namespace == "" || req.Tool.Name == "" || req.Operation == "" {
		return errors.New("once: Request needs Namespace, Tool.Name and Operation")
	}
	return nil
}

// ensure creates the operation or reads the one that exists under its name
// (found), and checks that it is the same request.
func (c *Client) ensure(ctx context.Context, req Request) (op *v1.SideEffectOperation, found bool, err error) {
	want := newOperation(req)
	got, found, err := createOrFind(ctx, c, "operation", want, &v1.SideEffectOperation{})
	if err != nil || !found {
		return got, false, err
	}
	if msg := sameRequest(want, got); msg != "" {
		return nil, false, &MismatchError{Namespace: got.Namespace, Name: got.Name, Key: req.Key, Message: msg}
	}
	return got, true, nil
}

// createOrFind creates a copy of want (a kind of object), retrying what
// may pass, and returns it; or, when an object of its name exists, reads
// it into existing and returns that (found).
func createOrFind[T client.Object](ctx context.Context, c *Client, kind string, want, existing T) (T, bool, error) {
	created := want
	err := c.retry(ctx, func() error {
		obj := want.DeepCopyObject().(T)
		err := c.kube.Create(ctx, obj)
		if err == nil {
			created = obj
		}
		return err
	})
	var none T
	if err == nil {
		return created, false, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return none, false, fmt.Errorf("creating %s %s/%s: %w", kind, want.GetNamespace(), want.GetName(), err)
	}
	if err := c.get(ctx, client.ObjectKeyFromObject(want), existing); err != nil {
		return none, false, err
	}
	return existing, true, nil
}

func newOperation(req Request) *v1.SideEffectOperation {
	name := req.Name
	if name == "" {
		name = ObjectName(req.Tool, req.Operation, req.Key)
	}
	tool := req.Tool
	tool.Kind = tool.EffectiveKind()
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name, Labels: req.Labels},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:                 tool,
			Operation:               req.Operation,
			IdempotencyKey:          req.Key,
			TTLSecondsAfterFinished: v1.ClientTTL(req.TTLSecondsAfterFinished),
		},
	}
	if req.Retention > 0 {
		op.Spec.Retention = &metav1.Duration{Duration: req.Retention}
	}
	if len(req.Parameters) > 0 && !bytes.Equal(bytes.TrimSpace(req.Parameters), []byte("null")) {
		op.Spec.Parameters = &runtime.RawExtension{Raw: req.Parameters}
	}
	return op
}

// DefaultTTLSecondsAfterFinished is how long Do and DoSaga keep what they
// made after it ends, unless the request says otherwise: they make one
// object per call, which would otherwise stay for ever. The scope records
// keep the outcomes for their retention after the objects are gone.
const DefaultTTLSecondsAfterFinished = v1.DefaultClientTTLSecondsAfterFinished

// sameRequest says how got differs from the request want stands for, or ""
// when it is the same request.
func sameRequest(want, got *v1.SideEffectOperation) string {
	switch {
	case got.Spec.ToolRef.EffectiveKind() != want.Spec.ToolRef.EffectiveKind(),
		got.Spec.ToolRef.Name != want.Spec.ToolRef.Name:
		return fmt.Sprintf("it names %s %s", got.Spec.ToolRef.EffectiveKind(), got.Spec.ToolRef.Name)
	case got.Spec.Operation != want.Spec.Operation:
		return fmt.Sprintf("it is operation %s", got.Spec.Operation)
	case protocol.OperationScope(got).Key != want.Spec.IdempotencyKey:
		return fmt.Sprintf("the object %s holds key %q", got.Name, protocol.OperationScope(got).Key)
	}
	a, errA := protocol.Canonical(raw(want.Spec.Parameters))
	b, errB := protocol.Canonical(raw(got.Spec.Parameters))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		return fmt.Sprintf("the object %s holds other parameters (canonical digest %s, this request's %s)",
			got.Name, shortDigest(b), shortDigest(a))
	}
	return ""
}

func raw(r *runtime.RawExtension) []byte {
	if r == nil {
		return nil
	}
	return r.Raw
}

func shortDigest(b []byte) string {
	return shortHash(protocol.Digest(b))
}

// shortHash is the first twelve hex digits of a "sha256:" digest.
func shortHash(d string) string {
	d = strings.TrimPrefix(d, "sha256:")
	return d[:min(12, len(d))]
}

// wait reads op until it ends, needs review or ctx ends.
func (c *Client) wait(ctx context.Context, op *v1.SideEffectOperation, progress func(Progress)) (Result, error) {
	interval := c.PollMin
	var last Progress
	for {
		if res, done, err := Outcome(op); done {
			return res, err
		}
		ready := meta.FindStatusCondition(op.Status.Conditions, v1.ConditionReady)
		p := Progress{Name: op.Name, State: string(op.Status.State.OrPlanned())}
		if ready != nil {
			p.Message = ready.Message
		}
		if progress != nil && p != last {
			progress(p)
		}
		last = p
		select {
		case <-ctx.Done():
			pe := &PendingError{Namespace: op.Namespace, Name: op.Name, State: p.State, Message: p.Message, Err: ctx.Err()}
			if ready != nil {
				pe.Reason = ready.Reason
			}
			return Result{Namespace: op.Namespace, Name: op.Name}, pe
		case <-time.After(interval):
		}
		interval = min(2*interval, c.PollMax)
		next := &v1.SideEffectOperation{}
		if err := c.get(ctx, client.ObjectKeyFromObject(op), next); err != nil {
			if ctx.Err() != nil {
				continue // reported as pending above
			}
			return Result{}, err
		}
		op = next
	}
}

// Outcome is the answer Do gives for op as it stands: done is false while
// op has not ended, and Do would wait on. For callers that watch
// operations themselves.
func Outcome(op *v1.SideEffectOperation) (Result, bool, error) {
	st := op.Status
	ready := meta.FindStatusCondition(st.Conditions, v1.ConditionReady)
	reason, msg := "", st.ErrorMessage
	if ready != nil {
		reason = ready.Reason
		msg = cmp.Or(ready.Message, msg)
	}
	if st.State == v1.StateNeedsReview {
		return Result{}, true, &NeedsReviewError{Namespace: op.Namespace, Name: op.Name, Message: msg}
	}
	if !st.State.IsTerminal() {
		return Result{}, false, nil
	}
	res, err := answer(op.Namespace, op.Name, protocol.OperationScope(op).Key, v1.RecordOutcome{
		State: st.State, Attempts: st.Attempts, ExternalObjectID: st.ExternalObjectID, Result: st.Result,
		ResultDigest: st.ResultDigest, ErrorClass: st.ErrorClass, Reason: reason,
		ErrorMessage: cmp.Or(st.ErrorMessage, msg), Resolution: st.Resolution.Record(),
	}, st.DuplicateOf)
	return res, true, err
}

// answer is the answer for an operation that ended in o, whether the
// operation says it or, after it is gone, its record.
func answer(namespace, name, key string, o v1.RecordOutcome, duplicateOf string) (Result, error) {
	if o.State == v1.StateFailedFinal {
		if o.ErrorClass == v1.ErrorConflict || o.Reason == v1.ReasonIdempotencyParameterMismatch {
			return Result{}, &MismatchError{Namespace: namespace, Name: name, Key: key, Message: o.ErrorMessage,
				Outcome: true}
		}
		return Result{}, &FailedError{Namespace: namespace, Name: name, Class: o.ErrorClass,
			Reason: o.Reason, Message: o.ErrorMessage, Decided: protocol.Decided(o.Reason),
			EffectReported: o.Reason == v1.ReasonEffectReported, Resolution: o.Resolution}
	}
	res := Result{Namespace: namespace, Name: name, State: o.State, ExternalObjectID: o.ExternalObjectID,
		ResultDigest: o.ResultDigest, Attempts: o.Attempts, DuplicateOf: duplicateOf, Resolution: o.Resolution}
	if o.Result != nil {
		res.Result = json.RawMessage(o.Result.Raw)
	}
	return res, nil
}

// get reads an object, retrying transient errors.
func (c *Client) get(ctx context.Context, key client.ObjectKey, obj client.Object) error {
	err := c.retry(ctx, func() error { return c.kube.Get(ctx, key, obj) })
	if err != nil {
		return fmt.Errorf("reading %s: %w", key, err)
	}
	return nil
}

// retry runs fn until it succeeds, fails with an error that is not
// transient, the backoff is spent or ctx ends.
func (c *Client) retry(ctx context.Context, fn func() error) error {
	b := c.Backoff
	for {
		err := fn()
		if err == nil || !Transient(err) || b.Steps <= 1 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(b.Step()):
		}
	}
}

// Transient reports whether err is an answer of the API server (or the
// network) that a same-request retry may get past: a timeout, 429, a 5xx,
// a refused or reset connection, or a conflict.
func Transient(err error) bool {
	switch {
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err),
		apierrors.IsConflict(err):
		return true
	case utilnet.IsConnectionRefused(err), utilnet.IsConnectionReset(err), utilnet.IsProbableEOF(err):
		return true
	}
	return false
}
