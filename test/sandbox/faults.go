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

package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Fault names. Those documented with a parameter accept one after "=",
// e.g. "delay-after-commit=2s" or "503=5".
const (
	// FaultDropAfterCommit commits, then closes the connection without
	// answering.
	FaultDropAfterCommit = "drop-after-commit"
	// FaultDelayAfterCommit commits, then waits a Go duration (default 5s)
	// before answering.
	FaultDelayAfterCommit = "delay-after-commit"
	// FaultDelayBeforeCommit processes the request for a Go duration
	// (default 5s) before committing, and commits even if the client has
	// gone away meanwhile. A native key is in flight for that long, so a
	// re-send with the same key answers 409 in_flight. It stands for a
	// slow tool: a payment that waits for the card network.
	FaultDelayBeforeCommit = "delay-before-commit"
	// Fault429 answers 429 with Retry-After seconds (default 1); no effect.
	Fault429 = "429"
	// Fault503 answers 503 with Retry-After seconds (default 1); no effect.
	Fault503 = "503"
	// Fault422 answers 422 rejected (reason "refused", with a message);
	// no effect. It stands for a business refusal that the request itself
	// does not explain, and that holds for as long as the rule does: a
	// refund window that closed, a frozen account, an order that shipped
	// and can no longer be cancelled. Unlike a rejection asked for in the
	// body, it is not stored against a native key: the next request is
	// decided afresh. A rule with Action cancel makes a compensation fail
	// for good.
	Fault422 = "422"
	// Fault500AfterCommit commits, then answers 500 with an empty body.
	Fault500AfterCommit = "500-after-commit"
	// Fault500BeforeCommit answers 500 with an empty body; no effect.
	Fault500BeforeCommit = "500-before-commit"
	// FaultResetBeforeCommit resets the connection; no effect.
	FaultResetBeforeCommit = "reset-before-commit"
	// FaultResetAfterCommit commits, then resets the connection.
	FaultResetAfterCommit = "reset-after-commit"
	// FaultExitAfterCommit commits, then exits the process with
	// ExitCodeCrash without answering.
	FaultExitAfterCommit = "exit-after-commit"
	// Fault502 answers 502; no effect.
	Fault502 = "502"
	// Fault504 answers 504; no effect.
	Fault504 = "504"
	// FaultLookup503 makes a lookup by key answer 503 with Retry-After
	// seconds (default 1). It does nothing to other requests.
	FaultLookup503 = "lookup-503"
	// FaultLookupTimeout makes a lookup by key wait a Go duration (default
	// 5s) before answering. It does nothing to other requests.
	FaultLookupTimeout = "lookup-timeout"

	// Fault502AfterCommit commits, then answers 502 with an HTML page. It
	// stands for a reverse proxy (nginx) whose upstream committed the
	// effect, then closed the connection before its answer reached the
	// proxy.
	Fault502AfterCommit = "502-after-commit"
	// Fault503AfterCommit commits, then answers 503 with Envoy's plain-text
	// body "upstream connect error or disconnect/reset before headers.
	// reset reason: connection termination". It stands for a service mesh
	// sidecar whose upstream committed the effect and was then terminated
	// (a rolling update) before it sent its headers.
	Fault503AfterCommit = "503-after-commit"
	// Fault504AfterCommit commits, then answers 504 with the JSON body
	// {"message":"Endpoint request timed out"}. It stands for an API
	// gateway whose upstream committed the charge but took longer to answer
	// than the gateway's integration timeout.
	Fault504AfterCommit = "504-after-commit"
	// Fault409Exists answers 409 already_exists, and creates nothing, when
	// the collection already holds an object created with the request's
	// key in the same mode; otherwise the request proceeds normally. It
	// stands for a conditional create with a client-supplied id (a
	// Kubernetes-style create, an S3 put with If-None-Match: *): a Lookup or
	// None tool that refuses a second object for one key. Native requests
	// with a key are deduped on it first, so it changes nothing there.
	Fault409Exists = "409-exists"
	// FaultResend401 answers 401 unauthorized, with no effect, to a request
	// whose key the sandbox has seen before; first sends proceed normally.
	// It stands for a credential rotated between an attempt and its
	// re-send: the re-send is not answered with the replayed first answer.
	FaultResend401 = "resend-401"
	// FaultResend403 answers 403 forbidden, with no effect, to a re-send
	// (as FaultResend401). It stands for a permission revoked, or a WAF
	// rule added, between an attempt and its re-send.
	FaultResend403 = "resend-403"
	// FaultResend404 answers an ingress's HTML 404 page, with no effect, to
	// a re-send (as FaultResend401). It stands for a route moved or removed
	// between an attempt and its re-send.
	FaultResend404 = "resend-404"
	// FaultLookupLag makes a lookup by key answer the sandbox's own 404
	// not_found for an object younger than a Go duration (default 5s),
	// though it exists. It stands for a search index that lags behind the
	// primary store (eventual consistency). It does nothing to other
	// requests.
	FaultLookupLag = "lookup-lag"
	// FaultLookupRoute404 makes a lookup by key answer 404 with an HTML page
	// (Content-Type text/html), not the sandbox's JSON. It stands for an
	// ingress or gateway that has no route for the lookup path (a moved or
	// not yet deployed route): a 404 that says nothing about the effect.
	// It does nothing to other requests.
	FaultLookupRoute404 = "lookup-route-404"
	// FaultHoldBeforeCommit holds the request for a Go duration (default
	// 5s) before the tool sees it, then processes and commits it even if
	// the client has gone away; lookups meanwhile find nothing, and a
	// native key is not in flight yet. It stands for a load balancer's
	// queue, or a tool that takes longer than the lookupDelay it declared:
	// its answer arrives after a successor proved the attempt absent. A
	// client can only detect that and raise it to a person.
	FaultHoldBeforeCommit = "hold-before-commit"
)

// reasonRefused is the reason of Fault422's rejection.
const reasonRefused = "refused"

// ErrUnknownFault reports a fault name or parameter the sandbox does not
// understand.
var ErrUnknownFault = errors.New("unknown fault")

const (
	defaultFaultDelay = 5 * time.Second
	defaultRetryAfter = 1
)

// faultParam is the kind of parameter a fault takes.
type faultParam int

const (
	paramNone faultParam = iota
	paramDuration
	paramSeconds
)

var faultParams = map[string]faultParam{
	FaultDropAfterCommit:   paramNone,
	FaultDelayAfterCommit:  paramDuration,
	FaultDelayBeforeCommit: paramDuration,
	Fault429:               paramSeconds,
	Fault503:               paramSeconds,
	Fault422:               paramNone,
	Fault500AfterCommit:    paramNone,
	Fault500BeforeCommit:   paramNone,
	FaultResetBeforeCommit: paramNone,
	FaultResetAfterCommit:  paramNone,
	FaultExitAfterCommit:   paramNone,
	Fault502:               paramNone,
	Fault504:               paramNone,
	FaultLookup503:         paramSeconds,
	FaultLookupTimeout:     paramDuration,
	Fault502AfterCommit:    paramNone,
	Fault503AfterCommit:    paramNone,
	Fault504AfterCommit:    paramNone,
	Fault409Exists:         paramNone,
	FaultResend401:         paramNone,
	FaultResend403:         paramNone,
	FaultResend404:         paramNone,
	FaultLookupLag:         paramDuration,
	FaultLookupRoute404:    paramNone,
	FaultHoldBeforeCommit:  paramDuration,
}

// fault is a parsed fault specification. Methods accept a nil *fault,
// which means no fault.
type fault struct {
	spec       string // as written, echoed in X-Sandbox-Fault
	kind       string // one of the Fault* names
	delay      time.Duration
	retryAfter int
}

// parseFault parses "name" or "name=param".
func parseFault(spec string) (*fault, error) {
	spec = strings.TrimSpace(spec)
	name, param, hasParam := strings.Cut(spec, "=")
	kind, ok := faultParams[name]
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownFault, spec)
	}
	f := &fault{spec: spec, kind: name, delay: defaultFaultDelay, retryAfter: defaultRetryAfter}
	if !hasParam {
		return f, nil
	}
	switch kind {
	case paramDuration:
		d, err := time.ParseDuration(param)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownFault, spec, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("%w %q: negative duration", ErrUnknownFault, spec)
		}
		f.delay = d
	case paramSeconds:
		n, err := strconv.Atoi(param)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w %q: want a whole number of seconds", ErrUnknownFault, spec)
		}
		f.retryAfter = n
	default:
		return nil, fmt.Errorf("%w %q: %s takes no parameter", ErrUnknownFault, spec, name)
	}
	return f, nil
}

func (f *fault) name() string {
	if f == nil {
		return ""
	}
	return f.kind
}

// lookupOnly reports whether the fault only affects lookups by key.
func (f *fault) lookupOnly() bool {
	switch f.name() {
	case FaultLookup503, FaultLookupTimeout, FaultLookupLag, FaultLookupRoute404:
		return true
	}
	return false
}

// resendOnly reports whether the fault only affects a request whose key
// the sandbox has seen before.
func (f *fault) resendOnly() bool {
	switch f.name() {
	case FaultResend401, FaultResend403, FaultResend404:
		return true
	}
	return false
}

// existingOnly reports whether the fault only affects a create whose key
// already has an object.
func (f *fault) existingOnly() bool {
	return f.name() == Fault409Exists
}

// applies reports whether the fault affects the request m describes:
// lookup faults only lookups, re-send faults only re-sends, and 409-exists
// only creates whose key already has an object.
func (f *fault) applies(m faultMatch) bool {
	if m.lookup {
		return !f.resendOnly() && !f.existingOnly()
	}
	return !f.lookupOnly() && (!f.resendOnly() || m.resend) && (!f.existingOnly() || m.exists)
}

// beforeCommitDelay is how long to process a request before committing
// its effect, holding a native key in flight.
func (f *fault) beforeCommitDelay() time.Duration {
	if f.name() == FaultDelayBeforeCommit {
		return f.delay
	}
	return 0
}

// holdDelay is how long to hold a request before processing it.
func (f *fault) holdDelay() time.Duration {
	if f.name() == FaultHoldBeforeCommit {
		return f.delay
	}
	return 0
}

// lookupLag is how old an object must be for a lookup to find it.
func (f *fault) lookupLag() time.Duration {
	if f.name() == FaultLookupLag {
		return f.delay
	}
	return 0
}

// lookupDelay is how long to wait before answering a lookup by key.
func (f *fault) lookupDelay() time.Duration {
	switch f.name() {
	case FaultDelayBeforeCommit, FaultLookupTimeout:
		return f.delay
	}
	return 0
}

// chooseFault picks the request's fault: the X-Sandbox-Fault header if
// present, else the rules. It marks the response with the fault. On an
// unknown fault it answers 400 and returns ok == false.
func (s *Server) chooseFault(w http.ResponseWriter, r *http.Request, m faultMatch) (f *fault, ok bool) {
	if spec := r.Header.Get(HeaderFault); spec != "" {
		parsed, err := parseFault(spec)
		if err != nil {
			writeError(w, http.StatusBadRequest, errorBody{Error: CodeUnknownFault, Message: err.Error()})
			return nil, false
		}
		// 409-exists asked for by the header is decided at the commit,
		// under the lock, so that concurrent creates cannot both pass.
		if parsed.applies(m) || (parsed.existingOnly() && !m.lookup) {
			f = parsed
		}
	} else {
		f = s.faults.pick(m)
	}
	if f != nil {
		w.Header().Set(HeaderFault, f.spec)
	}
	return f, true
}

// faultBeforeCommit applies a fault that strikes before any effect. It
// reports whether the request has been dealt with.
func (s *Server) faultBeforeCommit(w http.ResponseWriter, f *fault) bool {
	switch f.name() {
	case Fault429:
		writeUnavailable(w, http.StatusTooManyRequests, f.retryAfter)
	case Fault503, FaultLookup503:
		writeUnavailable(w, http.StatusServiceUnavailable, f.retryAfter)
	case Fault502:
		writeError(w, http.StatusBadGateway, errorBody{Error: CodeBadGateway})
	case Fault504:
		writeError(w, http.StatusGatewayTimeout, errorBody{Error: CodeGatewayTimeout})
	case Fault500BeforeCommit:
		writeEmpty(w, http.StatusInternalServerError)
	case Fault422:
		writeError(w, http.StatusUnprocessableEntity, errorBody{Error: CodeRejected, Reason: reasonRefused,
			Message: "the tool refuses this request"})
	case FaultResend401:
		writeError(w, http.StatusUnauthorized, errorBody{Error: CodeUnauthorized, Message: "invalid API key"})
	case FaultResend403:
		writeError(w, http.StatusForbidden, errorBody{Error: CodeForbidden})
	case FaultResend404, FaultLookupRoute404:
		writeText(w, http.StatusNotFound, contentTypeHTML, ingress404)
	case FaultResetBeforeCommit:
		s.abort(w, true)
	default:
		return false
	}
	return true
}

// respond delivers out, or not, as the after-commit fault dictates.
func (s *Server) respond(w http.ResponseWriter, r *http.Request, f *fault, out outcome) {
	switch f.name() {
	case FaultDropAfterCommit:
		s.abort(w, false)
		return
	case FaultResetAfterCommit:
		s.abort(w, true)
		return
	case FaultExitAfterCommit:
		s.exit(ExitCodeCrash)
		// Only reached when Options.Exit returns, as in tests.
		s.abort(w, false)
		return
	case Fault500AfterCommit:
		writeEmpty(w, http.StatusInternalServerError)
		return
	case Fault502AfterCommit:
		writeText(w, http.StatusBadGateway, contentTypeHTML, nginx502)
		return
	case Fault503AfterCommit:
		writeText(w, http.StatusServiceUnavailable, contentTypeText, envoy503)
		return
	case Fault504AfterCommit:
		writeText(w, http.StatusGatewayTimeout, contentTypeJSON, gateway504)
		return
	case FaultDelayAfterCommit:
		sleepContext(r.Context(), f.delay)
	}
	writeOutcome(w, out)
}

// Bodies that gateways, proxies and ingresses send, not the sandbox.
const (
	contentTypeHTML = "text/html"
	contentTypeText = "text/plain"
	contentTypeJSON = "application/json"

	ingress404 = "<html><body><h1>404 Not Found</h1></body></html>"
	nginx502   = "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n" +
		"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	envoy503   = "upstream connect error or disconnect/reset before headers. reset reason: connection termination"
	gateway504 = `{"message":"Endpoint request timed out"}`
)

// writeText answers status with body as it is, of contentType.
func writeText(w http.ResponseWriter, status int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

func writeUnavailable(w http.ResponseWriter, status, retryAfter int) {
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter))
	writeError(w, status, errorBody{Error: CodeUnavailable})
}

// abort closes the connection without answering. With reset it sets
// SO_LINGER to 0 first, so the peer sees a TCP reset.
func (s *Server) abort(w http.ResponseWriter, reset bool) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		s.debugf("sandbox: cannot hijack connection, aborting the response instead: %v", err)
		panic(http.ErrAbortHandler)
	}
	if reset {
		if err := setLingerZero(conn); err != nil {
			s.debugf("sandbox: %v", err)
		}
	}
	if err := conn.Close(); err != nil {
		s.debugf("sandbox: close hijacked connection: %v", err)
	}
}

func setLingerZero(conn net.Conn) error {
	if wrapped, ok := conn.(interface{ NetConn() net.Conn }); ok {
		conn = wrapped.NetConn()
	}
	tcp, ok := conn.(*net.TCPConn)
	if !ok {
		return fmt.Errorf("cannot reset a %T connection, closing it", conn)
	}
	if err := tcp.SetLinger(0); err != nil {
		return fmt.Errorf("set linger: %w", err)
	}
	return nil
}

// sleepContext waits for d or until ctx is done.
func sleepContext(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
