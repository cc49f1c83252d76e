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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// ToolSpec describes an external system that performs side effects, and what
// it promises about idempotency. Tool and ClusterTool share it. Its CEL
// expressions take at most 32768 characters together (MaxExpressionChars).
// +kubebuilder:validation:XValidation:rule="self.idempotency.mode != 'Lookup' || self.operations.all(o, has(o.lookup) && has(o.lookup.absent))",message="every operation of a tool in Lookup mode needs a lookup request whose absent expression says what proves that an effect does not exist"
// +kubebuilder:validation:XValidation:rule="self.idempotency.mode != 'Lookup' || has(self.idempotency.lookupDelay)",message="a tool in Lookup mode must state its lookupDelay: how long after a request is sent its effect may still be missing from lookups"
// +kubebuilder:validation:XValidation:rule="(has(self.idempotency) && has(self.idempotency.replayed) ? size(self.idempotency.replayed) : 0) + self.operations.map(o, (has(o.response) && has(o.response.outcomes) ? o.response.outcomes.map(r, size(r.when)).sum() : 0) + (has(o.response) && has(o.response.externalObjectID) ? size(o.response.externalObjectID) : 0) + (has(o.response) && has(o.response.externalRequestID) ? size(o.response.externalRequestID) : 0) + (has(o.response) && has(o.response.result) ? size(o.response.result) : 0) + (has(o.request) && has(o.request.pathValues) ? o.request.pathValues.map(v, size(v.value)).sum() : 0) + (has(o.request) && has(o.request.query) ? o.request.query.map(v, size(v.value)).sum() : 0) + (has(o.request) && has(o.request.headers) ? o.request.headers.map(v, size(v.value)).sum() : 0) + (has(o.request) && has(o.request.body) ? size(o.request.body) : 0) + (has(o.lookup) && has(o.lookup.request) && has(o.lookup.request.pathValues) ? o.lookup.request.pathValues.map(v, size(v.value)).sum() : 0) + (has(o.lookup) && has(o.lookup.request) && has(o.lookup.request.query) ? o.lookup.request.query.map(v, size(v.value)).sum() : 0) + (has(o.lookup) && has(o.lookup.request) && has(o.lookup.request.headers) ? o.lookup.request.headers.map(v, size(v.value)).sum() : 0) + (has(o.lookup) && has(o.lookup.request) && has(o.lookup.request.body) ? size(o.lookup.request.body) : 0) + (has(o.lookup) && has(o.lookup.found) ? size(o.lookup.found) : 0) + (has(o.lookup) && has(o.lookup.absent) ? size(o.lookup.absent) : 0) + (has(o.validate) && has(o.validate.request) && has(o.validate.request.pathValues) ? o.validate.request.pathValues.map(v, size(v.value)).sum() : 0) + (has(o.validate) && has(o.validate.request) && has(o.validate.request.query) ? o.validate.request.query.map(v, size(v.value)).sum() : 0) + (has(o.validate) && has(o.validate.request) && has(o.validate.request.headers) ? o.validate.request.headers.map(v, size(v.value)).sum() : 0) + (has(o.validate) && has(o.validate.request) && has(o.validate.request.body) ? size(o.validate.request.body) : 0) + (has(o.validate) && has(o.validate.valid) ? size(o.validate.valid) : 0) + (has(o.validate) && has(o.validate.invalid) ? size(o.validate.invalid) : 0) + (has(o.validate) && has(o.validate.message) ? size(o.validate.message) : 0)).sum() <= 32768",message="the CEL expressions of a tool may take 32768 characters together: shorten them, or split the operations between two Tools"
type ToolSpec struct {
	// http calls the tool over HTTP.
	// +required
	HTTP HTTPBackend `json:"http"`

	// idempotency is what the tool promises about repeated requests, and so
	// how Once resolves an attempt whose outcome is unknown.
	// +required
	Idempotency ToolIdempotency `json:"idempotency"`

	// timeout bounds one call, at most 1h. An operation may set a shorter
	// one, never a longer one.
	// +optional
	// +kubebuilder:default="30s"
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="timeout must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('1h')",message="timeout is at most 1h: a worker waits for each call"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// operations the tool offers, by name.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Operations []ToolOperation `json:"operations"`

	// retryBudget limits retries across all operations of this tool, so that
	// an outage of the tool does not turn into a retry storm.
	// +optional
	// +kubebuilder:default={}
	RetryBudget *RetryBudget `json:"retryBudget,omitempty"`

	// suspend holds every new call to this tool: no first attempt, no
	// retry, no re-send. A call in flight finishes. An unknown outcome is
	// still reconciled by lookup, which makes no effect. Set it back to
	// false, or remove it, to resume. A person's resolution of an
	// operation in NeedsReview is applied all the same.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// HTTPBackend is the base of every request to the tool.
type HTTPBackend struct {
	// url is the base URL; an operation's path is appended to it. It holds
	// no credentials. Once refuses to call loopback, link-local (cloud
	// metadata) and unspecified addresses, and the cluster's own ranges,
	// unless the manager allows them (--allow-egress-cidrs).
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'http' || url(self).getScheme() == 'https')",message="url must be an http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]+://[^/?#]*@')",message="url must not hold credentials (user:password@host): it shows in kubectl get; send them in a header from a Secret"
	URL string `json:"url"`

	// headers sent with every request. Values from Secrets are read at call
	// time and never copied into status, events or logs.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []HTTPHeader `json:"headers,omitempty"`

	// secretValues are values read from Secrets, at call time, that request
	// shapes may use as `secrets.<name>`: a credential an API wants in the
	// body (PagerDuty's routing_key) or in the path (a Slack webhook's).
	// They are scrubbed like every Secret value from all Once stores or
	// prints; response mappings do not see them. Each holds 12 to 4096
	// bytes: a shorter one could be guessed through a tool that echoes
	// its parameters, and one outside the bounds makes the tool fail its
	// check.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	SecretValues []SecretValue `json:"secretValues,omitempty"`

	// auth authenticates every request with credentials from Secrets (in
	// the Tool's namespace, or for a ClusterTool in the manager's cluster
	// resource namespace), read at call time and never copied into status,
	// events or logs.
	// +optional
	Auth *HTTPAuth `json:"auth,omitempty"`

	// tls configures the connection to an https URL: a CA to trust, for
	// services behind a private CA, and a client certificate.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`
}

// SecretValue names a value read from a Secret.
type SecretValue struct {
	// name of the value, as expressions see it: `secrets.<name>`.
	// +required
	// +kubebuilder:validation:Pattern=`^[A-Za-z_][A-Za-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// secretKeyRef selects the key of a Secret.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// HTTPAuth is one way to authenticate requests.
// +kubebuilder:validation:XValidation:rule="[has(self.bearer), has(self.basic), has(self.oauth2)].exists_one(x, x)",message="auth needs exactly one of bearer, basic and oauth2"
type HTTPAuth struct {
	// bearer sends `Authorization: Bearer <token>`, the token read from a
	// Secret.
	// +optional
	Bearer *SecretKeySelector `json:"bearer,omitempty"`
	// basic sends HTTP basic authentication.
	// +optional
	Basic *BasicAuth `json:"basic,omitempty"`
	// oauth2 gets a bearer token with the OAuth2 client credentials grant
	// (RFC 6749 §4.4) and renews it before it expires.
	// +optional
	OAuth2 *OAuth2ClientCredentials `json:"oauth2,omitempty"`
}

// BasicAuth is a user name and a password from a Secret.
type BasicAuth struct {
	// secretName is the Secret with the keys `username` and `password`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
}

// OAuth2ClientCredentials gets tokens with the client credentials grant.
type OAuth2ClientCredentials struct {
	// tokenURL is the authorization server's token endpoint, where the
	// client secret is sent: https, or plain http to a loopback host only
	// (localhost, 127.0.0.0/8, ::1, as tests and demos run it), and no
	// credentials in it. The egress policy applies to it as to the tool.
	// The token request follows no redirect, and a call's timeout bounds it.
	// +required
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (url(self).getScheme() == 'https' || url(self).getScheme() == 'http')",message="tokenURL must be an http or https URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^(?i)http:') || self.matches('^(?i)http://(localhost|127[.][0-9]+[.][0-9]+[.][0-9]+|[[]::1[]])(:[0-9]+)?([/?#]|$)')",message="tokenURL must be https: the client secret is sent to it (plain http only to a loopback host)"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[^:/?#]+://[^/?#]*@')",message="tokenURL must not hold credentials (user:password@host): the client's credentials come from secretName"
	TokenURL string `json:"tokenURL"`
	// secretName is the Secret with the keys `clientID` and
	// `clientSecret`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName"`
	// scopes to ask for.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Scopes []string `json:"scopes,omitempty"`
}

// TLSConfig is how Once connects to an https tool.
type TLSConfig struct {
	// caSecretName is a Secret whose key `ca.crt` holds PEM certificates
	// to trust besides the system's.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CASecretName string `json:"caSecretName,omitempty"`
	// clientCertificateSecretName is a kubernetes.io/tls Secret (`tls.crt`
	// and `tls.key`) whose certificate Once presents to the tool.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClientCertificateSecretName string `json:"clientCertificateSecretName,omitempty"`
	// serverName is the name to verify the tool's certificate against, if
	// not the URL's host.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
}

// HTTPHeader is one request header, given literally or read from a Secret.
// +kubebuilder:validation:XValidation:rule="has(self.value) != has(self.valueFrom)",message="a header needs exactly one of value and valueFrom"
type HTTPHeader struct {
	// name of the header.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`

	// value of the header, for values that are not secret.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`

	// valueFrom reads the value from a Secret: in the Tool's namespace, or
	// for a ClusterTool in the manager's cluster resource namespace.
	// +optional
	ValueFrom *HeaderSource `json:"valueFrom,omitempty"`
}

// HeaderSource is where a header's value comes from.
type HeaderSource struct {
	// secretKeyRef selects a key of a Secret.
	// +required
	SecretKeyRef SecretKeySelector `json:"secretKeyRef"`
}

// SecretKeySelector selects a key of a Secret.
type SecretKeySelector struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// key within the Secret's data.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// IdempotencyMode is what a tool promises about repeated requests.
// +kubebuilder:validation:Enum=Native;Lookup;None
type IdempotencyMode string

const (
	// IdempotencyNative: the tool dedupes requests on the idempotency key
	// header and answers a repeat with the first result (409 while the first
	// is still in flight). An unknown outcome is resolved by re-sending.
	IdempotencyNative IdempotencyMode = "Native"
	// IdempotencyLookup: the tool does not dedupe, but can be asked by key
	// whether an effect exists. An unknown outcome is resolved by asking.
	IdempotencyLookup IdempotencyMode = "Lookup"
	// IdempotencyNone: the tool neither dedupes nor answers questions. An
	// unknown outcome goes to a person (NeedsReview).
	IdempotencyNone IdempotencyMode = "None"
)

// ToolIdempotency is what the tool promises about repeated requests.
type ToolIdempotency struct {
	// mode is Native, Lookup or None.
	// +required
	Mode IdempotencyMode `json:"mode"`

	// header carries the idempotency key on every request, in every mode.
	// +optional
	// +kubebuilder:default="Idempotency-Key"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Header string `json:"header,omitempty"`

	// replayWindow is the longest time after which a request for the same
	// business operation may still arrive (a redelivered message, a GitOps
	// re-apply, a client retry). Operations against this tool must keep
	// their records at least this long: a shorter spec.retention is refused.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="replayWindow must not be negative"
	ReplayWindow *metav1.Duration `json:"replayWindow,omitempty"`

	// dedupeWindow is, in Native mode, how long the tool remembers a key
	// after its first request: a re-send within it is answered with the
	// first request's outcome; after it, the tool takes the request as a
	// new one (Stripe keeps keys 24 hours). Once re-sends an attempt whose
	// outcome is unknown only while the re-send arrives within this window
	// of the key's first request; after it, a person decides. Default 24h.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="dedupeWindow must be positive"
	DedupeWindow *metav1.Duration `json:"dedupeWindow,omitempty"`

	// lookupDelay is, in Lookup mode, the longest time from the moment a
	// request is sent until its effect shows in lookups: the time the tool
	// may take to process a request, plus how far its lookup index may lag
	// behind. A lookup sooner than that can miss an effect that exists, and
	// an absent answer would allow a second attempt. Once counts it from
	// the latest moment the unknown attempt's request could have left (the
	// end of its claim), and adds the manager's claim grace, its margin for
	// skewed clocks, so an absent answer proves absence only if the tool
	// keeps this promise. Required in Lookup mode.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="lookupDelay must not be negative"
	LookupDelay *metav1.Duration `json:"lookupDelay,omitempty"`

	// replayed is a CEL expression over `response`, true when an answer to a
	// re-send is the tool's replay of the first answer, for example
	// `response.headers['idempotent-replayed'] == 'true'`. In Native mode a
	// re-send that is answered with a 4xx that is not a replay (a rotated
	// credential, a moved route) settles nothing: the operation goes to
	// NeedsReview instead of failing. Without it, only 2xx answers to a
	// re-send settle an unknown attempt.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Replayed string `json:"replayed,omitempty"`

	// reconcileLimit bounds the questions asked about one unknown attempt
	// (re-sends in Native mode, lookups in Lookup mode) before the operation
	// goes to NeedsReview.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	ReconcileLimit int32 `json:"reconcileLimit,omitempty"`
}

// ToolOperation is one operation the tool offers.
type ToolOperation struct {
	// name of the operation, as SideEffectOperations name it in
	// spec.operation.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`
	Name string `json:"name"`

	// method of the request; POST if empty. (Defaults inside a list item
	// are Once's, not the API server's, so that re-applying a manifest
	// leaves it unchanged.)
	// +optional
	// +kubebuilder:validation:Enum=POST;PUT;PATCH;DELETE
	Method string `json:"method,omitempty"`

	// path appended to the tool's URL. {idempotencyKey} is replaced by the
	// path-escaped key sent to the tool.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path,omitempty"`

	// request shapes the request from the operation's parameters and key,
	// for APIs that want values in the path or the query, a form-encoded
	// body, or the key in the body. Without it the parameters are the JSON
	// body. The key is sent in spec.idempotency.header either way.
	// +optional
	Request *RequestShape `json:"request,omitempty"`

	// parametersSchema is a JSON Schema (draft 2020-12 unless it says
	// otherwise in $schema) that an operation's spec.parameters must match.
	// An operation whose parameters do not match fails at once, with reason
	// ParametersInvalid and a message naming each field and rule, before any
	// claim and with no call. It is kept as written, so that it can also
	// describe the operation to others (agents, catalogues). References to
	// other documents ($ref to a URL) are refused. It holds at most 16 KiB
	// of canonical JSON, and a Tool's schemas 32 KiB together: a larger one
	// makes the Tool fail its check, before it is compiled.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	ParametersSchema *runtime.RawExtension `json:"parametersSchema,omitempty"`

	// lookup asks the tool whether the effect of a key exists; required in
	// Lookup mode.
	// +optional
	Lookup *LookupRequest `json:"lookup,omitempty"`

	// validate asks the tool, with no effect, whether it would accept the
	// operation's request (a dry run). Sagas validate their steps with it
	// before the first step runs; a refusal stops the saga before any
	// effect. It is sent once, with a key of its own in
	// spec.idempotency.header (a saga sends its step's key and
	// "/validate", so that a tool that remembers keys never takes the
	// step's request for a repeat of the dry run); a call that gets no answer (a reset, a
	// timeout) or an answer that decides nothing is asked again later.
	// +optional
	Validate *ValidateRequest `json:"validate,omitempty"`

	// response maps the tool's answer to an outcome, an external object id
	// and a result.
	// +optional
	Response ResponseMapping `json:"response,omitempty"`

	// sink marks the operation as a receiver of outcomes: operations and
	// sagas may name it in spec.subscribers, and the outbox relay calls it
	// with each announcement, the event's data as its parameters. The relay
	// calls no operation that is not marked so.
	// +optional
	Sink bool `json:"sink,omitempty"`

	// derivedKey makes the MCP gateway derive a call's idempotency key from
	// the caller, the tool, the operation and the call's canonical
	// arguments, whatever key the caller sends: calls by one caller with the
	// same arguments are one request while the first call's operation has
	// not ended, and within the window after the later of its first use and
	// its end, so a model that retries with a fresh key makes no second
	// effect. Two calls meant as two requests with the same arguments in
	// that time are one too: set it where that cannot be meant (a charge for
	// an order, a ticket for an incident). Without it, the caller's key
	// decides.
	// +optional
	DerivedKey *DerivedKey `json:"derivedKey,omitempty"`
}

// DerivedKey is an operation's rule for keys derived from the arguments.
type DerivedKey struct {
	// window is how long after the first call, or after its operation
	// ended if that is later, calls with the same arguments are that call's
	// retries (two seconds more, for clocks); until its operation ends they
	// are, whatever its age. At least 10s and at most 24h: no longer than
	// the outcome is kept (spec.retention of the operations the gateway
	// makes, 24h by default), which the gateway checks too.
	// +required
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="window must be between 10s and 24h"
	Window metav1.Duration `json:"window"`
}

// RequestShape builds a request from an operation. Expressions are CEL over
// `parameters` (the operation's spec.parameters), `key` (the key sent to
// the tool) and `secrets` (the tool's spec.http.secretValues). A value that cannot be computed (a missing parameter, a wrong
// type) fails the attempt before anything is sent.
type RequestShape struct {
	// pathValues fill the {name} placeholders of the operation's path, each
	// path-escaped, for example `name: repo, value: parameters.repo` for
	// `/repos/{repo}/issues`. A placeholder after the path's `?` is
	// query-escaped, so that a value adds no query parameter.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	PathValues []NamedValue `json:"pathValues,omitempty"`
	// query adds query parameters, each query-escaped.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Query []NamedValue `json:"query,omitempty"`
	// headers adds request headers. Secrets belong in spec.http.headers.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Headers []NamedValue `json:"headers,omitempty"`
	// body is an expression for the body: an object, for example
	// `{'dedup_key': key, 'summary': parameters.title}`. Defaults to
	// `parameters`.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Body string `json:"body,omitempty"`
	// encoding of the body: JSON (the default), or Form
	// (application/x-www-form-urlencoded, nested objects and lists as
	// `a[b]=c` and `a[0]=c`).
	// +optional
	// +kubebuilder:validation:Enum=JSON;Form
	Encoding BodyEncoding `json:"encoding,omitempty"`
}

// BodyEncoding is how a request body is encoded.
type BodyEncoding string

const (
	// BodyJSON encodes the body as JSON.
	BodyJSON BodyEncoding = "JSON"
	// BodyForm encodes the body as application/x-www-form-urlencoded.
	BodyForm BodyEncoding = "Form"
)

// NamedValue is a name and a CEL expression for its value: a string, a
// number or a bool.
type NamedValue struct {
	// name of the path placeholder, query parameter or header.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// value is a CEL expression over `parameters` and `key`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value"`
}

// LookupRequest asks the tool whether the effect of an idempotency key
// exists. Expressions are CEL over `response` (status, headers, body).
type LookupRequest struct {
	// method of the lookup request; GET if empty.
	// +optional
	// +kubebuilder:validation:Enum=GET;POST
	Method string `json:"method,omitempty"`

	// path appended to the tool's URL; {idempotencyKey} is replaced by the
	// query-escaped key sent to the tool.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`

	// request shapes the lookup as an operation's request shapes the
	// operation: to ask by a business key built from the parameters, for
	// example `query: [{name: labels, value: "'once-' + parameters.ticket"}]`.
	// found and absent see `parameters` and `key` too, so a search answer
	// that lists candidates proves the effect when one carries the key:
	// `response.body.items.exists(i, i.external_id == key)`. Expressions
	// are bounded in cost: a loop inside a loop over the answer is refused.
	// The lookup and its expressions also see `since`, the timestamp at
	// which the first attempt of this lifetime of the key was claimed
	// (status.startedTime; the Unix epoch when not known), to tell this
	// lifetime's effect from one its key made before its record expired.
	// +optional
	Request *RequestShape `json:"request,omitempty"`

	// found is true when the answer proves the effect exists. It must
	// match only the tool's own answer about this key, never a status
	// alone: an ingress's default page, a route that moved to an index
	// page and an empty search all answer 200. Check what the tool says of
	// the key, for example
	// `response.status == 200 && type(response.body) == map && response.body.key == key`,
	// or, over a search, that an item carries it. An answer that both
	// expressions accept proves nothing. A tool that keeps its effects
	// longer than spec.retention finds, for a key applied again after its
	// record expired, the effect of the key's earlier lifetime; where the
	// tool says when it made the effect, accept only a later one:
	// `timestamp(response.body.created) >= since - duration('1h')` (the
	// hour allows for the tool's clock, and is shorter than the retention).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Found string `json:"found"`

	// absent is true when the answer proves the effect does not exist; it is
	// required in Lookup mode, because a bare 404 also comes from an
	// ingress or a gateway for a route that does not exist. Make it match
	// only the tool's own "not found" answer, for example
	// `response.status == 404 && response.body.error == 'not_found'`. A
	// search proves absence only from a complete answer: over a paginated
	// result, also check that no page follows (the tool's total or next
	// page), and ask narrowly enough (by the key) that one page holds every
	// match. An answer that is neither found nor absent is undecidable: Once
	// asks again later, and a person decides when the limit is reached.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Absent string `json:"absent,omitempty"`
}

// ValidateRequest asks the tool whether it would accept a request, with no
// effect. It is sent once, with the operation's parameters and a key of its
// own (in spec.idempotency.header, as every request), shaped like the operation's
// request unless it has a request shape of its own. A call that gets no
// answer (a reset, a timeout) decides nothing, and is asked again later.
// Expressions are CEL over `response`, `parameters` and `key`.
type ValidateRequest struct {
	// method of the validate request; POST if empty.
	// +optional
	// +kubebuilder:validation:Enum=GET;POST;PUT;PATCH
	Method string `json:"method,omitempty"`

	// path appended to the tool's URL; {idempotencyKey} is replaced by the
	// path-escaped key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`

	// request shapes the validate request; defaults to the operation's.
	// +optional
	Request *RequestShape `json:"request,omitempty"`

	// valid is true when the answer says the request would be accepted. It
	// is evaluated first. If empty, `response.status >= 200 && response.status < 300`.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Valid string `json:"valid,omitempty"`

	// invalid is true when the answer says the request would be refused
	// for good. An answer that is neither (a 503, a gateway's page) is
	// asked again later: only the tool's own refusal stops a saga, or a
	// request that cannot be made (parameters it cannot be built from, an
	// address the egress policy refuses).
	// If empty, `response.status >= 400 && response.status < 500 &&
	// response.status != 408 && response.status != 429`.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Invalid string `json:"invalid,omitempty"`

	// message extracts the refusal's explanation for the saga's status,
	// for example `response.body.message`, cut at 512 bytes. Without it,
	// or when it yields nothing, the explanation is the status and the
	// first 512 bytes of the body.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// ResponseMapping turns the tool's answer into an outcome, an external object
// id and a result. Expressions are CEL over `response`: `response.status`
// (int), `response.headers` (map of lower-case names to values) and
// `response.body` (the decoded JSON, or the text when it is not JSON).
type ResponseMapping struct {
	// outcomes are rules evaluated in order before the default
	// classification; the first whose `when` is true decides.
	// By default 2xx succeeds; 429 is retryable; 408, 502, 503 and 504 are
	// retryable for a Native tool (a re-send with the same key is safe) and
	// have an unknown outcome otherwise (a gateway may answer them after its
	// upstream committed); 409 has an unknown outcome (a Native tool's "same
	// key in flight", another tool's "already exists"); 500 and other 5xx
	// have an unknown outcome; other 4xx are permanent.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Outcomes []OutcomeRule `json:"outcomes,omitempty"`

	// externalObjectID extracts the id of the effect, for example
	// `response.body.id`.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ExternalObjectID string `json:"externalObjectID,omitempty"`

	// externalRequestID extracts the tool's id for the request, for example
	// `response.headers['request-id']`.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	ExternalRequestID string `json:"externalRequestID,omitempty"`

	// format is what a success of this operation carries: JSON (the
	// default), Text (a body of any kind) or None (no body, as a 204). A
	// 2xx answer that does not carry it, or from which externalObjectID
	// cannot be read, is not taken as the tool's unless an outcome rule
	// names it: a captive portal, a WAF's sign-in page or a misrouted proxy
	// answers 200 too. Its outcome is unknown, and settled as the mode
	// settles one (a same-key re-send, a lookup, or a person).
	// +optional
	// +kubebuilder:validation:Enum=JSON;Text;None
	Format ResponseFormat `json:"format,omitempty"`

	// result extracts what is kept in status.result; `response.body` if
	// empty.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Result string `json:"result,omitempty"`
}

// ResponseFormat is what a success carries (ResponseMapping.format).
type ResponseFormat string

const (
	// FormatJSON: a JSON body; the default.
	FormatJSON ResponseFormat = "JSON"
	// FormatText: a body of any kind.
	FormatText ResponseFormat = "Text"
	// FormatNone: no body.
	FormatNone ResponseFormat = "None"
)

// Outcome is the class of a tool's answer.
// +kubebuilder:validation:Enum=Succeeded;Retryable;Permanent;Unknown
type Outcome string

const (
	// OutcomeSucceeded: the effect happened.
	OutcomeSucceeded Outcome = "Succeeded"
	// OutcomeRetryable: the effect provably did not happen; try again later.
	OutcomeRetryable Outcome = "Retryable"
	// OutcomePermanent: the tool refused for good; the effect did not happen.
	OutcomePermanent Outcome = "Permanent"
	// OutcomeUnknown: the effect may or may not have happened.
	OutcomeUnknown Outcome = "Unknown"
)

// OutcomeRule classifies the answers for which `when` is true.
type OutcomeRule struct {
	// when is a CEL expression over `response`.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	When string `json:"when"`

	// outcome of the answers that match.
	// +required
	Outcome Outcome `json:"outcome"`
}

// RetryBudget limits retries across all operations of a tool, per manager.
type RetryBudget struct {
	// retriesPerMinute is the steady rate of retries allowed; first attempts
	// are never limited. When the budget is spent, retries wait.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	RetriesPerMinute int32 `json:"retriesPerMinute,omitempty"`
}

// ToolStatus is what Once observed about a tool's definition.
type ToolStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions: Ready is True when the definition is valid (expressions
	// compile, referenced Secret keys exist); Stalled is True when it is not.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=once
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.idempotency.mode`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.http.url`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Tool is an external system, in the operations' namespace, that performs
// side effects.
type Tool struct {
	metav1.TypeMeta `json:",inline"`

	// metadata is a standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitzero"`

	// spec describes the tool.
	// +required
	Spec ToolSpec `json:"spec"`

	// status is what Once observed about the definition.
	// +optional
	Status ToolStatus `json:"status,omitzero"`
}

// +kubebuilder:object:root=true

// ToolList contains a list of Tool.
type ToolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitzero"`
	Items           []Tool `json:"items"`
}

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(SchemeGroupVersion, &Tool{}, &ToolList{})
		return nil
	})
}
