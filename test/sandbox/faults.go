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
	// FaultDelayBeforeCommit waits a Go duration (default 5s) while a native
	// key is in flight, then proceeds normally.
	FaultDelayBeforeCommit = "delay-before-commit"
	// Fault429 answers 429 with Retry-After seconds (default 1); no effect.
	Fault429 = "429"
	// Fault503 answers 503 with Retry-After seconds (default 1); no effect.
	Fault503 = "503"
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
)

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
	Fault500AfterCommit:    paramNone,
	Fault500BeforeCommit:   paramNone,
	FaultResetBeforeCommit: paramNone,
	FaultResetAfterCommit:  paramNone,
	FaultExitAfterCommit:   paramNone,
	Fault502:               paramNone,
	Fault504:               paramNone,
	FaultLookup503:         paramSeconds,
	FaultLookupTimeout:     paramDuration,
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
	return f.name() == FaultLookup503 || f.name() == FaultLookupTimeout
}

// beforeCommitDelay is how long to wait before committing an effect.
func (f *fault) beforeCommitDelay() time.Duration {
	if f.name() == FaultDelayBeforeCommit {
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
		if m.lookup || !parsed.lookupOnly() {
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
	case FaultDelayAfterCommit:
		sleepContext(r.Context(), f.delay)
	}
	writeOutcome(w, out)
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
