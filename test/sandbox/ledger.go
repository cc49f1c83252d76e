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
	"net/http"
	"slices"
	"time"
)

// Effect is one performed side effect, a line of the ledger.
type Effect struct {
	// Seq numbers effects in the order they were performed; it keeps
	// increasing across restarts and resets.
	Seq        int64  `json:"seq"`
	ID         string `json:"id"`
	Mode       string `json:"mode"`
	Collection string `json:"collection"`
	// Action is ActionCreate or ActionCancel.
	Action string `json:"action"`
	// Key is the request's Idempotency-Key header, possibly empty.
	Key string `json:"key"`
	// BodySHA256 is the hex SHA-256 of the canonical request body.
	BodySHA256 string `json:"bodySHA256"`
	// Status and Response are the answer the effect produced.
	Status   int             `json:"status"`
	Response json.RawMessage `json:"response"`
	Time     time.Time       `json:"time"`
	// Request is the request as received, for the endpoints shaped like
	// real APIs, whose bodies are not the sandbox's JSON; nil otherwise.
	Request *ReceivedRequest `json:"request,omitempty"`
}

// ReceivedRequest is a request as the sandbox received it.
type ReceivedRequest struct {
	Method      string `json:"method"`
	Path        string `json:"path"`
	ContentType string `json:"contentType"`
	Body        string `json:"body"`
}

// Summary counts the effects in the ledger, grouped by key.
type Summary struct {
	Effects int `json:"effects"`
	Creates int `json:"creates"`
	Cancels int `json:"cancels"`
	// Keys counts effects per SummaryKey, for effects with a key only.
	Keys map[string]int `json:"keys"`
	// Duplicates is the sum over Keys of count-1.
	Duplicates int `json:"duplicates"`
	// DuplicateKeys lists, sorted, the Keys entries counted more than once.
	DuplicateKeys []string `json:"duplicateKeys"`
}

// SummaryKey is the name under which Summary.Keys groups effects.
func SummaryKey(mode, collection, action, key string) string {
	return mode + "/" + collection + "/" + action + "/" + key
}

// summarize counts effects.
func summarize(effects []Effect) Summary {
	sum := Summary{Keys: map[string]int{}, DuplicateKeys: []string{}}
	for _, e := range effects {
		sum.Effects++
		switch e.Action {
		case ActionCreate:
			sum.Creates++
		case ActionCancel:
			sum.Cancels++
		}
		if e.Key != "" {
			sum.Keys[SummaryKey(e.Mode, e.Collection, e.Action, e.Key)]++
		}
	}
	for k, n := range sum.Keys {
		if n > 1 {
			sum.Duplicates += n - 1
			sum.DuplicateKeys = append(sum.DuplicateKeys, k)
		}
	}
	slices.Sort(sum.DuplicateKeys)
	return sum
}

// effectList is the body of GET /ledger and GET /ledger/keys/{key}.
type effectList struct {
	Effects []Effect `json:"effects"`
}

// recordLocked persists rec to the ledger file, if any, and then applies it
// to memory. The caller holds s.mu.
func (s *Server) recordLocked(rec record) error {
	if s.journal != nil {
		if err := s.journal.append(rec); err != nil {
			return err
		}
	}
	return s.state.apply(rec)
}

// effects returns a copy of the ledger's effects that match keep.
func (s *Server) effects(keep func(Effect) bool) []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Effect{}
	for _, e := range s.state.effects {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

func (s *Server) handleLedger(w http.ResponseWriter, _ *http.Request) {
	all := s.effects(func(Effect) bool { return true })
	writeJSON(w, http.StatusOK, effectList{Effects: all})
}

func (s *Server) handleKeyEffects(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	matching := s.effects(func(e Effect) bool { return e.Key == key })
	writeJSON(w, http.StatusOK, effectList{Effects: matching})
}

func (s *Server) handleSummary(w http.ResponseWriter, _ *http.Request) {
	all := s.effects(func(Effect) bool { return true })
	writeJSON(w, http.StatusOK, summarize(all))
}

// handleResetLedger clears effects, objects and keys, in memory and in the
// file. The sequence keeps counting so ids are never reused.
func (s *Server) handleResetLedger(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := record{Record: recordReset, Effect: Effect{Seq: s.state.seq}}
	if s.journal != nil {
		if err := s.journal.truncate(rec); err != nil {
			s.debugf("sandbox: reset ledger: %v", err)
			writeError(w, http.StatusInternalServerError, errorBody{Error: CodeLedgerError, Message: err.Error()})
			return
		}
	}
	if err := s.state.apply(rec); err != nil {
		writeError(w, http.StatusInternalServerError, errorBody{Error: CodeLedgerError, Message: err.Error()})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
