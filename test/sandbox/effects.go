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
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// effectRequest is a parsed create, cancel or validate request.
type effectRequest struct {
	mode       string
	collection string
	action     string
	target     string // id of the object to cancel; empty for creates
	key        string
	params     json.RawMessage // canonical request body
	bodySHA    string
	reject     string // business rejection reason; empty to proceed
	// idPrefix names a created object idPrefix + its sequence number (ch_12),
	// for the APIs whose ids have a prefix of their own; empty for the
	// collection's first two letters.
	idPrefix string
	// received is the request as received, kept with the effect.
	received *ReceivedRequest
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	s.serveEffect(w, r, ActionCreate)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	s.serveEffect(w, r, ActionCancel)
}

// serveEffect runs an effectful request: choose a fault, apply faults that
// strike before the commit, parse the body, commit (or replay; for a
// validate, judge without committing), and answer subject to faults that
// strike after the commit.
func (s *Server) serveEffect(w http.ResponseWriter, r *http.Request, action string) {
	mode, collection, ok := pathTarget(w, r)
	if !ok {
		return
	}
	req := effectRequest{
		mode:       mode,
		collection: collection,
		action:     action,
		target:     r.PathValue("id"),
		key:        r.Header.Get(HeaderIdempotencyKey),
	}
	f, ok := s.chooseFault(w, r, s.matchEffect(req))
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	if !readParams(w, r, &req) {
		return
	}
	if action == ActionValidate {
		s.respond(w, r, f, s.dryRun(r.Context(), req, f))
		return
	}
	s.respond(w, r, f, s.execute(req, f))
}

// matchEffect describes req for fault rules, and records that a request
// with its key arrived.
func (s *Server) matchEffect(req effectRequest) faultMatch {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := faultMatch{mode: req.mode, collection: req.collection, method: http.MethodPost, action: req.action, key: req.key}
	m.resend = s.state.see(requestKey{mode: req.mode, collection: req.collection, action: req.action, key: req.key})
	if req.action != ActionCancel && req.key != "" {
		_, m.exists = s.state.lookup(req.mode, req.collection, req.key)
	}
	return m
}

// readParams reads the body into req. On a bad body it answers the request
// and returns false.
func readParams(w http.ResponseWriter, r *http.Request, req *effectRequest) bool {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, errorBody{
				Error:   "body_too_large",
				Message: fmt.Sprintf("request body exceeds %d bytes", maxBodyBytes),
			})
			return false
		}
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeInvalidJSON, Message: err.Error()})
		return false
	}
	fields, canonical, err := canonicalJSON(data)
	if err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeInvalidJSON})
		return false
	}
	sum := sha256.Sum256(canonical)
	req.params = canonical
	req.bodySHA = hex.EncodeToString(sum[:])
	req.reject, _ = fields["reject"].(string)
	return true
}

// canonicalJSON decodes a JSON object and re-encodes it with sorted keys
// and no insignificant whitespace, keeping numbers exactly as written. An
// empty body is the empty object.
func canonicalJSON(data []byte) (map[string]any, []byte, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return nil, nil, fmt.Errorf("decode body: %w", err)
	}
	if fields == nil {
		return nil, nil, errors.New("decode body: not a JSON object")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, nil, errors.New("decode body: data after the JSON object")
	}
	canonical, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, fmt.Errorf("encode body: %w", err)
	}
	return fields, canonical, nil
}

// execute commits req, deduplicating on the native key table when the
// request carries a key in native mode.
// Delays sleep whatever the client does: the tool goes on processing a
// request its client gave up on.
func (s *Server) execute(req effectRequest, f *fault) outcome {
	time.Sleep(f.holdDelay())
	if req.mode != ModeNative || req.key == "" {
		time.Sleep(f.beforeCommitDelay())
		s.mu.Lock()
		defer s.mu.Unlock()
		if f.existingOnly() && req.action == ActionCreate && req.key != "" {
			if _, exists := s.state.lookup(req.mode, req.collection, req.key); exists {
				return alreadyExists(req.key)
			}
		}
		out, _ := s.commitLocked(req)
		return out
	}
	k := nativeKey{collection: req.collection, action: req.action, key: req.key}
	s.mu.Lock()
	out, claimed := s.state.claim(k, req)
	s.mu.Unlock()
	if !claimed {
		return out
	}
	// The key is visibly in flight while the delay fault sleeps.
	time.Sleep(f.beforeCommitDelay())
	s.mu.Lock()
	defer s.mu.Unlock()
	out, recorded := s.commitLocked(req)
	if !recorded {
		s.state.release(k)
	}
	return out
}

// alreadyExists is a conditional create's refusal of a second object for
// key.
func alreadyExists(key string) outcome {
	return jsonOutcome(http.StatusConflict, errorBody{Error: CodeAlreadyExists,
		Message: fmt.Sprintf("an object with key %q already exists", key)})
}

// commitLocked performs req's effect, or its business rejection. It reports
// whether the outcome was recorded in the ledger. The caller holds s.mu.
//
// A cancel of an object already cancelled is refused with 409
// already_cancelled and records nothing, as an API whose objects have a
// state machine refuses a transition from the state they are in: whoever
// cancelled first, the object is cancelled once.
func (s *Server) commitLocked(req effectRequest) (outcome, bool) {
	var current Object
	if req.action == ActionCancel {
		obj, ok := s.state.object(req.mode, req.collection, req.target)
		if !ok {
			return jsonOutcome(http.StatusNotFound, errorBody{Error: CodeNotFound}), false
		}
		if obj.Status == StatusCancelled {
			return jsonOutcome(http.StatusConflict, errorBody{Error: CodeAlreadyCancelled,
				Message: fmt.Sprintf("object %s is already cancelled", obj.ID)}), false
		}
		current = obj
	}
	if req.reject != "" {
		return s.rejectLocked(req)
	}
	rec, err := s.effectRecord(req, current)
	if err == nil {
		err = s.recordLocked(rec)
	}
	if err != nil {
		return s.ledgerFailure(err), false
	}
	return outcome{status: rec.Status, body: rec.Response}, true
}

// rejectLocked answers a business rejection. In native mode with a key the
// rejection is recorded, not as an effect, so the key replays it.
func (s *Server) rejectLocked(req effectRequest) (outcome, bool) {
	out := jsonOutcome(http.StatusUnprocessableEntity, errorBody{Error: CodeRejected, Reason: req.reject})
	if req.mode != ModeNative || req.key == "" {
		return out, false
	}
	rec := record{Record: recordRejection, Effect: Effect{
		ID:         req.target,
		Mode:       req.mode,
		Collection: req.collection,
		Action:     req.action,
		Key:        req.key,
		BodySHA256: req.bodySHA,
		Status:     out.status,
		Response:   out.body,
		Time:       s.now().UTC(),
	}}
	if err := s.recordLocked(rec); err != nil {
		return s.ledgerFailure(err), false
	}
	return out, true
}

// effectRecord builds the ledger record for req's effect on current (the
// object being cancelled; zero for creates).
func (s *Server) effectRecord(req effectRequest, current Object) (record, error) {
	now := s.now().UTC()
	seq := s.state.seq + 1
	obj, status := current, http.StatusOK
	if req.action == ActionCreate {
		id := objectID(req.collection, seq)
		if req.idPrefix != "" {
			id = req.idPrefix + strconv.FormatInt(seq, 10)
		}
		obj = Object{
			ID:         id,
			Collection: req.collection,
			Mode:       req.mode,
			Key:        req.key,
			Parameters: req.params,
			Status:     StatusActive,
			CreatedAt:  now.Format(time.RFC3339Nano),
		}
		status = http.StatusCreated
	} else {
		obj.Status = StatusCancelled
		obj.CancelledAt = now.Format(time.RFC3339Nano)
		obj.CancelKey = req.key
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return record{}, fmt.Errorf("encode object %s: %w", obj.ID, err)
	}
	return record{Effect: Effect{
		Seq:        seq,
		ID:         obj.ID,
		Mode:       req.mode,
		Collection: req.collection,
		Action:     req.action,
		Key:        req.key,
		BodySHA256: req.bodySHA,
		Status:     status,
		Response:   body,
		Time:       now,
		Request:    req.received,
	}}, nil
}

func (s *Server) ledgerFailure(err error) outcome {
	s.debugf("sandbox: ledger: %v", err)
	return jsonOutcome(http.StatusInternalServerError, errorBody{Error: CodeLedgerError, Message: err.Error()})
}

// objectID names an object after the first two letters or digits of its
// collection and the ledger sequence number, e.g. ch_12 for charges.
func objectID(collection string, seq int64) string {
	prefix := make([]byte, 0, 2)
	for i := 0; i < len(collection) && len(prefix) < 2; i++ {
		if c := collection[i]; c != '-' {
			prefix = append(prefix, c)
		}
	}
	return fmt.Sprintf("%s_%d", prefix, seq)
}
