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

// Package ingress turns messages into SideEffectOperations: an idempotent
// consumer whose inbox is the API server. Each message, a CloudEvent or a
// plain JSON webhook, becomes an operation whose name is derived from the
// message's id, so a message delivered twice names one object, and the
// API server's AlreadyExists is the dedupe. The second delivery is
// answered with the first one's operation and its state, or, once that
// operation went, from its scope's IdempotencyRecord; a second message
// with the same id and a different payload is refused.
//
// The Handler is an http.Handler serving POST /{route}; mount it under a
// prefix with http.StripPrefix.
package ingress

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// Headers of plain webhooks. A webhook names its message by
// Idempotency-Key (the IETF httpapi draft's header, as Stripe and others
// send it) or, if it has none, by Message-Id.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderMessageID      = "Message-Id"
)

// Annotations the ingress puts on the operations it makes, so that a
// person can find the message an operation came from.
const (
	AnnotationMessageID = "ingress.once.dev/message-id"
	AnnotationSource    = "ingress.once.dev/source"
	// LabelRoute names the route an operation came through.
	LabelRoute = "ingress.once.dev/route"
)

// Limits on messages.
const (
	// MaxIDLength bounds a message id, and a CloudEvent's source, in bytes.
	MaxIDLength = 1024
	// MaxBodyBytes bounds a message's body; its data must also fit in
	// v1alpha1.MaxParametersBytes of canonical JSON to become parameters.
	MaxBodyBytes = 256 * 1024
	// maxRouteName keeps "<route>-<hash>" within a DNS label.
	maxRouteName = 40
	// hashChars of hex name the message within its route: 96 bits.
	hashChars = 24
)

// Route says what the messages posted to one route become.
type Route struct {
	// Namespace the operations are made in.
	Namespace string `json:"namespace"`
	// ToolRef and Operation are the effect each message asks for; its data
	// (a JSON object) are the operation's parameters.
	ToolRef   v1.ToolReference `json:"toolRef"`
	Operation string           `json:"operation"`
	// Subscribers, if any, are told each operation's outcome.
	Subscribers []v1.Subscriber `json:"subscribers,omitempty"`
	// TTLSecondsAfterFinished is how long each operation is kept after it
	// ends (its spec.ttlSecondsAfterFinished). Unset means one hour
	// (v1alpha1.DefaultClientTTLSecondsAfterFinished). -1 keeps them until
	// someone deletes them. A message delivered again after its operation
	// went gets the outcome its scope's record keeps, within Retention.
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// Retention is how long each operation's scope record keeps its
	// outcome after it ends (spec.retention): a message delivered again
	// within it makes no second effect. Unset, the API server's default,
	// 24h; it should cover how long the sender may deliver a message again.
	Retention *metav1.Duration `json:"retention,omitempty"`
	// Signing, if set, makes the route take only messages its sender
	// signed with the route's secret (signature.go). Without it, anyone who
	// can reach the route can post a message under any id.
	Signing *Signing `json:"signing,omitempty"`
}

// Handler is the ingress endpoint.
type Handler struct {
	// Client creates and reads operations, and reads their scope records.
	// Reads after AlreadyExists must see the object that exists: use a
	// client that reads from the API server, not a cache.
	Client client.Client
	// Routes by name; a name is a DNS label of at most 40 characters.
	Routes map[string]Route
	// Now is the clock signed messages' timestamps are checked against;
	// time.Now if nil.
	Now func() time.Time
}

// Answer is the JSON body of every answer.
type Answer struct {
	// Name and Namespace of the operation the message is.
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// MessageID is the id the message was known by.
	MessageID string `json:"messageID,omitempty"`
	// State is the operation's state; Duplicate is true when an earlier
	// delivery made the operation.
	State     v1.OperationState `json:"state,omitempty"`
	Duplicate bool              `json:"duplicate,omitempty"`
	// ExternalObjectID is the committed effect's id.
	ExternalObjectID string `json:"externalObjectID,omitempty"`
	// Error and Message say why a message was refused.
	Error   string `json:"error,omitempty"`
	Message string `json:"message,omitempty"`
}

// Error codes of refused messages.
const (
	CodeForbidden       = "Forbidden"
	CodeUnauthenticated = "Unauthenticated"
	CodeUnknownRoute    = "UnknownRoute"
	CodeInvalid         = "InvalidMessage"
	CodeTooLarge        = "MessageTooLarge"
	CodeMismatch        = v1.ReasonIdempotencyParameterMismatch
	CodeUnavailable     = "Unavailable"
)

// Validate checks the routes, and reads their signing secrets, as a
// gateway should at start.
func (h *Handler) Validate() error {
	for name, r := range h.Routes {
		if len(name) > maxRouteName || len(validation.IsDNS1123Label(name)) > 0 {
			return fmt.Errorf("ingress route %q: the name must be a DNS label of at most %d characters", name, maxRouteName)
		}
		if r.Namespace == "" || r.ToolRef.Name == "" || r.Operation == "" {
			return fmt.Errorf("ingress route %q: namespace, tool and operation are required", name)
		}
		if t := r.TTLSecondsAfterFinished; t != nil && *t < -1 {
			return fmt.Errorf("ingress route %q: ttlSecondsAfterFinished is -1 (kept until deleted) or 0 or more", name)
		}
		if r.Retention != nil && r.Retention.Duration <= 0 {
			return fmt.Errorf("ingress route %q: retention must be positive", name)
		}
		if r.Signing != nil {
			if err := r.Signing.load(); err != nil {
				return fmt.Errorf("ingress route %q: %w", name, err)
			}
		}
	}
	return nil
}

// ServeHTTP takes one message.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		answer(w, http.StatusMethodNotAllowed, Answer{Error: CodeInvalid, Message: "Messages are POSTed"})
		return
	}
	name := strings.Trim(r.URL.Path, "/")
	route, ok := h.Routes[name]
	if !ok {
		answer(w, http.StatusNotFound, Answer{Error: CodeUnknownRoute, Message: fmt.Sprintf("No route %q", name)})
		return
	}
	body, status, err := readBody(r)
	if err == nil && route.Signing != nil {
		// Checked before anything of the message is parsed.
		var signedID string
		if signedID, err = route.Signing.verify(r.Header, body, h.now()); err != nil {
			status = http.StatusUnauthorized
		} else {
			r.Header.Set(HeaderMessageID, signedID)
		}
	}
	var msg message
	if err == nil {
		msg, status, err = parse(r, body, route.Signing != nil)
	}
	if err != nil {
		code := CodeInvalid
		switch status {
		case http.StatusRequestEntityTooLarge:
			code = CodeTooLarge
		case http.StatusUnauthorized:
			code = CodeUnauthenticated
		}
		answer(w, status, Answer{Error: code, Message: sentence(err.Error())})
		return
	}
	status, a := h.take(r.Context(), name, route, msg)
	answer(w, status, a)
}

// message is what the ingress reads of a request.
type message struct {
	// id and source name the message: a CloudEvent's id and source, a
	// webhook's key and an empty source.
	id, source string
	// signed is a message whose id its sender signed.
	signed bool
	// params is the data, a JSON object.
	params []byte
}

// name is the operation m becomes on route. A signed message is named by
// what its signature covers, the id: a binary-mode CloudEvent's source is
// a header the signature does not cover, and whoever replays a captured
// delivery could change it to make another operation.
func (m message) name(route string) string {
	if m.signed {
		return Name(route, "", m.id)
	}
	return Name(route, m.source, m.id)
}

// now is the handler's clock.
func (h *Handler) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// readBody reads a message's body, at most MaxBodyBytes.
func readBody(r *http.Request) ([]byte, int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the body exceeds %d bytes", MaxBodyBytes)
		}
		return nil, http.StatusBadRequest, fmt.Errorf("the body cannot be read: %w", err)
	}
	return body, 0, nil
}

// parse reads a CloudEvent (binary or structured content mode, through the
// CloudEvents SDK) or a plain JSON webhook from a request and its body. A
// signed message's id is the signed one: its Message-Id header, set from
// webhook-id, names a webhook, and a CloudEvent's id must be the same.
func parse(r *http.Request, body []byte, signed bool) (message, int, error) {
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m message
	if isCloudEvent(r) {
		ev, err := cehttp.NewEventFromHTTPRequest(r)
		if err == nil {
			err = ev.Validate()
		}
		if err != nil {
			return message{}, http.StatusBadRequest, fmt.Errorf("not a valid CloudEvent: %w", err)
		}
		if ct := ev.DataContentType(); ct != "" && !isJSON(ct) {
			return message{}, http.StatusUnsupportedMediaType, fmt.Errorf("the event's data must be JSON, not %s", ct)
		}
		m = message{id: ev.ID(), source: ev.Source(), signed: signed, params: ev.Data()}
		if signed && m.id != r.Header.Get(HeaderMessageID) {
			return message{}, http.StatusBadRequest, fmt.Errorf("the event's id is not the signed %s", HeaderWebhookID)
		}
	} else if signed {
		// The signed id alone names the message: an Idempotency-Key header
		// is not signed.
		if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
			return message{}, http.StatusUnsupportedMediaType, fmt.Errorf("a webhook's body must be JSON, not %s", ct)
		}
		m = message{id: r.Header.Get(HeaderMessageID), signed: true, params: body}
	} else {
		if ct := r.Header.Get("Content-Type"); ct != "" && !isJSON(ct) {
			return message{}, http.StatusUnsupportedMediaType, fmt.Errorf("a webhook's body must be JSON, not %s", ct)
		}
		m = message{id: r.Header.Get(HeaderIdempotencyKey), params: body}
		if m.id == "" {
			m.id = r.Header.Get(HeaderMessageID)
		}
		if m.id == "" {
			return message{}, http.StatusBadRequest, fmt.Errorf(
				"a webhook needs an %s or %s header naming the message", HeaderIdempotencyKey, HeaderMessageID)
		}
	}
	if len(m.id) > MaxIDLength {
		return message{}, http.StatusBadRequest, fmt.Errorf("the message id exceeds %d bytes", MaxIDLength)
	}
	if len(m.source) > MaxIDLength {
		return message{}, http.StatusBadRequest, fmt.Errorf("the event's source exceeds %d bytes", MaxIDLength)
	}
	if len(bytes.TrimSpace(m.params)) == 0 {
		m.params = []byte("{}")
	}
	var obj map[string]any
	if err := json.Unmarshal(m.params, &obj); err != nil || obj == nil {
		return message{}, http.StatusBadRequest, errors.New("the message's data must be a JSON object")
	}
	canonical, err := protocol.Canonical(m.params)
	if err != nil {
		// JSON that has no canonical form (a number out of range): the
		// manager would fail the operation, so make none.
		return message{}, http.StatusBadRequest, fmt.Errorf("the message's data have no canonical JSON form: %w", err)
	}
	// The manager would fail the operation for its size: make none.
	if protocol.CheckParameters(canonical) != nil {
		return message{}, http.StatusRequestEntityTooLarge, fmt.Errorf(
			"the message's data take more than %d bytes of canonical JSON, an operation's limit", v1.MaxParametersBytes)
	}
	return m, 0, nil
}

// isCloudEvent reports whether the request is a CloudEvent: binary mode
// carries ce-specversion, structured mode its own media type.
func isCloudEvent(r *http.Request) bool {
	if r.Header.Get("Ce-Specversion") != "" {
		return true
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return strings.HasPrefix(mt, "application/cloudevents")
}

func isJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// Name is the operation a message on route becomes: "<route>-" and 24 hex
// of the SHA-256 of the route, the source and the id. It is a DNS label,
// the same for every delivery of the message, and different for messages
// of different sources or routes. A signed message has the empty source.
func Name(route, source, id string) string {
	sum := sha256.Sum256([]byte(route + "\x00" + source + "\x00" + id))
	return route + "-" + hex.EncodeToString(sum[:])[:hashChars]
}

// take makes the message's operation, or finds the one an earlier delivery
// made.
func (h *Handler) take(ctx context.Context, routeName string, route Route, m message) (int, Answer) {
	log := logf.FromContext(ctx)
	op := &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: route.Namespace, Name: m.name(routeName),
			Labels:      map[string]string{LabelRoute: routeName},
			Annotations: map[string]string{AnnotationMessageID: m.id}},
		Spec: v1.SideEffectOperationSpec{ToolRef: route.ToolRef, Operation: route.Operation,
			Parameters: &runtime.RawExtension{Raw: m.params}, Subscribers: route.Subscribers,
			Retention: route.Retention, TTLSecondsAfterFinished: v1.ClientTTL(route.TTLSecondsAfterFinished)},
	}
	if m.source != "" {
		op.Annotations[AnnotationSource] = m.source
	}
	if status, a, ok := h.recorded(ctx, op, m); ok {
		return status, a
	}
	if status, a, ok := h.namedBefore(ctx, routeName, op, m); ok {
		return status, a
	}
	err := h.Client.Create(ctx, op)
	switch {
	case err == nil:
		log.V(1).Info("Made an operation of a message", "route", routeName, "operation", op.Name)
		return http.StatusAccepted, answerOf(op, m.id, false)
	case apierrors.IsAlreadyExists(err):
		return h.existing(ctx, op, m)
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
		return http.StatusUnprocessableEntity, Answer{MessageID: m.id, Error: CodeInvalid,
			Message: "The operation was refused: " + statusMessage(err)}
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err):
		return http.StatusForbidden, forbidden(m.id, "create", op.Namespace)
	default:
		log.Error(err, "Cannot make the operation of a message", "route", routeName, "operation", op.Name)
		return http.StatusServiceUnavailable, Answer{MessageID: m.id, Error: CodeUnavailable,
			Message: "The operation cannot be made now; send the message again"}
	}
}

// namedBefore answers a signed CloudEvent that the release before named
// with its source, if its operation or its record is still there, so that
// a message taken then and delivered again now makes no second operation.
// It can go once every route's retention has passed since that upgrade.
func (h *Handler) namedBefore(ctx context.Context, routeName string, op *v1.SideEffectOperation, m message) (
	int, Answer, bool) {
	if !m.signed || m.source == "" {
		return 0, Answer{}, false
	}
	before := op.DeepCopy()
	before.Name = Name(routeName, m.source, m.id)
	if status, a, ok := h.recorded(ctx, before, m); ok {
		return status, a, true
	}
	err := h.Client.Get(ctx, client.ObjectKeyFromObject(before), &v1.SideEffectOperation{})
	if apierrors.IsNotFound(err) {
		return 0, Answer{}, false
	}
	status, a := h.existing(ctx, before, m)
	return status, a, true
}

// existing answers a message whose operation exists: the same message
// again gets its state, a different one with the same id is refused.
func (h *Handler) existing(ctx context.Context, want *v1.SideEffectOperation, m message) (int, Answer) {
	got := &v1.SideEffectOperation{}
	if err := h.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return http.StatusForbidden, forbidden(m.id, "get", want.Namespace)
		}
		// Deleted in between, or unreadable: the sender retries.
		return http.StatusServiceUnavailable, Answer{MessageID: m.id, Error: CodeUnavailable,
			Message: "The message's operation cannot be read now; send the message again"}
	}
	if !sameMessage(want, got) {
		return http.StatusConflict, mismatchAnswer(got.Name, got.Namespace, m.id)
	}
	a := answerOf(got, m.id, true)
	if got.Status.State.IsTerminal() {
		return http.StatusOK, a
	}
	return http.StatusAccepted, a
}

// recorded answers a message whose operation went (its TTL ran out after
// it ended) from the scope's record, while the record keeps the outcome.
// It answers as the operation would: a duplicate with its state, or a
// mismatch for another payload. Nothing is made. ok is false when only an
// operation can answer. pkg/once's Recorded decides, as for the gateway.
// Only an operation can answer in these cases:
//
//   - no record;
//   - no outcome yet;
//   - an expired outcome;
//   - a sender that may not get idempotencyrecords. Its message then makes
//     the operation again, which adopts the recorded outcome.
func (h *Handler) recorded(ctx context.Context, want *v1.SideEffectOperation, m message) (int, Answer, bool) {
	res, ok, err := once.New(h.Client).Recorded(ctx, once.Request{Namespace: want.Namespace, Name: want.Name,
		Tool: want.Spec.ToolRef, Operation: want.Spec.Operation, Key: want.Name, Parameters: m.params})
	if !ok {
		return 0, Answer{}, false
	}
	a := Answer{Name: res.Name, Namespace: want.Namespace, MessageID: m.id, State: res.State, Duplicate: true,
		ExternalObjectID: res.ExternalObjectID}
	mismatch, isMismatch := errors.AsType[*once.MismatchError](err)
	failed, isFailed := errors.AsType[*once.FailedError](err)
	switch {
	case err == nil:
		return http.StatusOK, a, true
	case isMismatch && mismatch.Outcome:
		// The same message, whose operation ended refused: answered as
		// its operation answered while it was there.
		a.Name, a.State = mismatch.Name, v1.StateFailedFinal
		return http.StatusOK, a, true
	case isMismatch:
		return http.StatusConflict, mismatchAnswer(mismatch.Name, want.Namespace, m.id), true
	case isFailed:
		a.Name, a.State = failed.Name, v1.StateFailedFinal
		return http.StatusOK, a, true
	}
	logf.FromContext(ctx).Error(err, "Cannot read the record of a message's operation", "operation", want.Name)
	return http.StatusServiceUnavailable, Answer{MessageID: m.id, Error: CodeUnavailable,
		Message: "The message's record cannot be read now; send the message again"}, true
}

// mismatchAnswer refuses message id, taken before by operation name with
// another payload.
func mismatchAnswer(name, namespace, id string) Answer {
	return Answer{Name: name, Namespace: namespace, MessageID: id, Error: CodeMismatch, Message: fmt.Sprintf(
		"Message %q was taken before with a different payload or route; the first one stands", id)}
}

// sameMessage reports whether got is the operation want describes: the
// same route, and the same request as the operator binds a key to (scope
// and request hash: tool, operation and canonical parameters).
func sameMessage(want, got *v1.SideEffectOperation) bool {
	scope := protocol.OperationScope(want)
	if got.Labels[LabelRoute] != want.Labels[LabelRoute] || protocol.OperationScope(got) != scope {
		return false
	}
	a, _, errA := protocol.RequestHash(scope.Tool, scope.Operation, parameters(want))
	b, _, errB := protocol.RequestHash(scope.Tool, scope.Operation, parameters(got))
	return errA == nil && errB == nil && a == b
}

func parameters(op *v1.SideEffectOperation) []byte {
	if op.Spec.Parameters == nil {
		return nil
	}
	return op.Spec.Parameters.Raw
}

func answerOf(op *v1.SideEffectOperation, id string, duplicate bool) Answer {
	return Answer{Name: op.Name, Namespace: op.Namespace, MessageID: id, State: op.Status.State.OrPlanned(),
		Duplicate: duplicate, ExternalObjectID: op.Status.ExternalObjectID}
}

// sentence capitalises an error's text for an answer's message.
func sentence(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func statusMessage(err error) string {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return se.Status().Message
	}
	return err.Error()
}

func answer(w http.ResponseWriter, status int, a Answer) {
	b, err := json.Marshal(a)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// forbidden answers a sender whose Kubernetes rights do not cover the
// route: the operation is made as the sender, so RBAC decides.
func forbidden(id, verb, namespace string) Answer {
	return Answer{MessageID: id, Error: CodeForbidden, Message: fmt.Sprintf(
		"The sender may not %s sideeffectoperations.effects.once.dev in namespace %s", verb, namespace)}
}
