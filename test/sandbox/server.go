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
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// Idempotency modes, the first path segment of every object route.
const (
	ModeNative = "native"
	ModeLookup = "lookup"
	ModeNone   = "none"
)

// Actions: creates and cancels are recorded in the ledger; a validate is
// never recorded, and the action only lets fault rules tell it apart.
const (
	ActionCreate   = "create"
	ActionCancel   = "cancel"
	ActionValidate = "validate"
)

// Object statuses.
const (
	StatusActive    = "active"
	StatusCancelled = "cancelled"
)

// HTTP headers the sandbox reads or writes.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
	HeaderFault          = "X-Sandbox-Fault"
)

// Error codes, the "error" field of the JSON body of error answers.
const (
	CodeInvalidJSON       = "invalid_json"
	CodeBodyTooLarge      = "body_too_large"
	CodeInvalidCollection = "invalid_collection"
	CodeNotFound          = "not_found"
	CodeMissingKey        = "missing_key"
	CodeRejected          = "rejected"
	CodeKeyReused         = "idempotency_key_reused"
	CodeInFlight          = "in_flight"
	CodeAlreadyExists     = "already_exists"
	CodeAlreadyCancelled  = "already_cancelled"
	CodeUnauthorized      = "unauthorized"
	CodeForbidden         = "forbidden"
	CodeUnknownFault      = "unknown_fault"
	CodeInvalidRules      = "invalid_rules"
	CodeUnavailable       = "unavailable"
	CodeBadGateway        = "bad_gateway"
	CodeGatewayTimeout    = "gateway_timeout"
	CodeLedgerError       = "ledger_error"
)

// ExitCodeCrash is the status the process exits with on exit-after-commit.
const ExitCodeCrash = 3

// maxBodyBytes is the largest request body the sandbox accepts.
const maxBodyBytes = 1 << 20

var collectionPattern = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Options configures a Server.
type Options struct {
	// LedgerPath is the ledger file; "" keeps the ledger in memory only.
	LedgerPath string
	// Seed seeds the random source used by probabilistic fault rules.
	Seed int64
	// Rules are the initial fault rules.
	Rules []FaultRule
	// Exit ends the process on exit-after-commit; it defaults to os.Exit.
	Exit func(code int)
	// Logf receives one line per request; nil is silent.
	Logf func(format string, args ...any)
	// Now is the clock for timestamps; it defaults to time.Now.
	Now func() time.Time
}

// Server is the sandbox API. Create it with New and serve Handler.
type Server struct {
	exit   func(code int)
	logf   func(format string, args ...any)
	now    func() time.Time
	faults *faultSet
	sinks  *sinks
	mux    *http.ServeMux

	mu      sync.Mutex // guards state and journal
	state   *store
	journal *journal // nil when the ledger is memory only
}

// New returns a Server. When opts.LedgerPath names an existing file, the
// ledger in it is replayed first.
func New(opts Options) (*Server, error) {
	faults, err := newFaultSet(opts.Seed, opts.Rules)
	if err != nil {
		return nil, fmt.Errorf("fault rules: %w", err)
	}
	s := &Server{
		exit:   opts.Exit,
		logf:   opts.Logf,
		now:    opts.Now,
		faults: faults,
		state:  newStore(),
	}
	if s.exit == nil {
		s.exit = os.Exit
	}
	if s.now == nil {
		s.now = time.Now
	}
	if opts.LedgerPath != "" {
		if err := s.load(opts.LedgerPath); err != nil {
			return nil, err
		}
	}
	s.sinks = newSinks(s.now, func(w http.ResponseWriter) { s.abort(w, false) })
	s.mux = s.routes()
	return s, nil
}

// load opens the ledger file and replays its records into memory.
func (s *Server) load(path string) error {
	j, records, err := openJournal(path)
	if err != nil {
		return err
	}
	for i, rec := range records {
		if err := s.state.apply(rec); err != nil {
			_ = j.close()
			return fmt.Errorf("replay ledger %s record %d: %w", path, i+1, err)
		}
	}
	s.journal = j
	return nil
}

// Handler returns the HTTP handler serving the sandbox API.
func (s *Server) Handler() http.Handler {
	if s.logf == nil {
		return s.mux
	}
	return s.logRequests(s.mux)
}

// Close closes the ledger file. Requests that need the ledger fail afterwards.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.journal == nil {
		return nil
	}
	return s.journal.close()
}

func (s *Server) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", handleHealthz)
	mux.HandleFunc("GET /ledger", s.handleLedger)
	mux.HandleFunc("DELETE /ledger", s.handleResetLedger)
	mux.HandleFunc("GET /ledger/summary", s.handleSummary)
	mux.HandleFunc("GET /ledger/keys/{key}", s.handleKeyEffects)
	mux.HandleFunc("GET /admin/faults", s.handleGetFaults)
	mux.HandleFunc("PUT /admin/faults", s.handlePutFaults)
	mux.HandleFunc("DELETE /admin/faults", s.handleDeleteFaults)
	mux.HandleFunc("POST /{mode}/{collection}", s.handleCreate)
	mux.HandleFunc("POST /{mode}/{collection}/validate", s.handleValidate)
	mux.HandleFunc("GET /{mode}/{collection}", s.handleLookup)
	mux.HandleFunc("GET /{mode}/{collection}/{id}", s.handleGet)
	mux.HandleFunc("POST /{mode}/{collection}/{id}/cancel", s.handleCancel)
	s.realAPIRoutes(mux)
	s.sinks.routes(mux)
	return mux
}

func handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// debugf logs through Options.Logf when one is set.
func (s *Server) debugf(format string, args ...any) {
	if s.logf != nil {
		s.logf(format, args...)
	}
}

// pathTarget validates the mode and collection path values. When they are
// invalid it answers the request and returns ok == false.
func pathTarget(w http.ResponseWriter, r *http.Request) (mode, collection string, ok bool) {
	mode, collection = r.PathValue("mode"), r.PathValue("collection")
	switch mode {
	case ModeNative, ModeLookup, ModeNone:
	default:
		writeError(w, http.StatusNotFound, errorBody{Error: CodeNotFound})
		return "", "", false
	}
	if !collectionPattern.MatchString(collection) {
		writeError(w, http.StatusBadRequest, errorBody{
			Error:   "invalid_collection",
			Message: fmt.Sprintf("collection %q must match %s", collection, collectionPattern),
		})
		return "", "", false
	}
	return mode, collection, true
}

// errorBody is the JSON body of every error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// outcome is a response decided by the sandbox, before any after-commit
// fault decides whether and how it is delivered.
type outcome struct {
	status   int
	body     []byte
	replayed bool
	// contentType of a body that is not the sandbox's JSON, sent as it is.
	contentType string
}

func jsonOutcome(status int, v any) outcome {
	body, err := json.Marshal(v)
	if err != nil {
		return outcome{status: http.StatusInternalServerError, body: []byte(`{"error":"internal"}`)}
	}
	return outcome{status: status, body: body}
}

func writeOutcome(w http.ResponseWriter, out outcome) {
	if out.replayed {
		w.Header().Set(HeaderReplayed, "true")
	}
	if out.contentType != "" {
		writeText(w, out.status, out.contentType, string(out.body))
		return
	}
	writeBody(w, out.status, out.body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	writeOutcome(w, jsonOutcome(status, v))
}

func writeError(w http.ResponseWriter, status int, e errorBody) {
	writeJSON(w, status, e)
}

// writeBody writes a JSON body followed by a newline. body may be shared
// with the ledger, so it is never appended to.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(status)
	_, _ = w.Write(body)
	_, _ = w.Write([]byte{'\n'})
}

// writeEmpty answers status with an empty body.
func writeEmpty(w http.ResponseWriter, status int) {
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}
