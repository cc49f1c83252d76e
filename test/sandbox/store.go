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
)

// Object is a thing the sandbox created: a charge, a ticket, an e-mail.
type Object struct {
	ID          string          `json:"id"`
	Collection  string          `json:"collection"`
	Mode        string          `json:"mode"`
	Key         string          `json:"key"`
	Parameters  json.RawMessage `json:"parameters"`
	Status      string          `json:"status"`
	CreatedAt   string          `json:"createdAt"`
	CancelledAt string          `json:"cancelledAt,omitempty"`
	// CancelKey is the Idempotency-Key of the cancel, if it had one.
	CancelKey string `json:"cancelKey,omitempty"`
}

// nativeKey scopes a native Idempotency-Key to one collection and action,
// so a create and its cancel may share a key.
type nativeKey struct {
	collection string
	action     string
	key        string
}

// lookupKey indexes objects by the key they were created or cancelled
// with.
type lookupKey struct {
	mode       string
	collection string
	key        string
}

// requestKey is what makes two requests a send and its re-send.
type requestKey struct {
	mode       string
	collection string
	action     string
	key        string
}

// keyEntry is what a native key remembers: either that a request with it is
// in flight, or the request fingerprint and the stored answer.
type keyEntry struct {
	inFlight bool
	bodySHA  string
	target   string // the cancelled object's id; empty for creates
	status   int
	response json.RawMessage
}

// store is the in-memory state rebuilt from the ledger. The Server's mutex
// guards it.
type store struct {
	seq     int64 // highest sequence number handed out
	effects []Effect
	objects map[string]Object
	byKey   map[lookupKey]string // first object created with a key
	// byCancelKey holds the first object cancelled with a key.
	byCancelKey map[lookupKey]string
	native      map[nativeKey]*keyEntry
	seen        map[requestKey]bool // keys of requests received or recorded
}

func newStore() *store {
	st := &store{}
	st.reset(0)
	return st
}

// reset forgets everything but the sequence, so ids stay unique.
func (st *store) reset(seq int64) {
	st.seq = max(st.seq, seq)
	st.effects = nil
	st.objects = map[string]Object{}
	st.byKey = map[lookupKey]string{}
	st.byCancelKey = map[lookupKey]string{}
	st.native = map[nativeKey]*keyEntry{}
	st.seen = map[requestKey]bool{}
}

// see records that a request with k arrived, and reports whether one had
// arrived before. Requests without a key are never re-sends.
func (st *store) see(k requestKey) bool {
	if k.key == "" {
		return false
	}
	seen := st.seen[k]
	st.seen[k] = true
	return seen
}

// apply adds one ledger record to the state. Live requests and ledger
// replay on start both go through it, so they cannot disagree.
func (st *store) apply(rec record) error {
	switch rec.Record {
	case "":
		return st.applyEffect(rec.Effect)
	case recordRejection:
		st.remember(rec.Effect, rec.ID)
		return nil
	case recordReset:
		st.reset(rec.Seq)
		return nil
	default:
		return fmt.Errorf("unknown record type %q", rec.Record)
	}
}

func (st *store) applyEffect(e Effect) error {
	var obj Object
	if err := json.Unmarshal(e.Response, &obj); err != nil {
		return fmt.Errorf("decode response of effect %d: %w", e.Seq, err)
	}
	if obj.ID == "" {
		return fmt.Errorf("effect %d: response has no object id", e.Seq)
	}
	st.seq = max(st.seq, e.Seq)
	st.effects = append(st.effects, e)
	st.objects[obj.ID] = obj
	if e.Key != "" {
		st.seen[requestKey{mode: e.Mode, collection: e.Collection, action: e.Action, key: e.Key}] = true
	}
	if e.Key != "" {
		index := st.byKey
		if e.Action == ActionCancel {
			index = st.byCancelKey
		}
		k := lookupKey{mode: e.Mode, collection: e.Collection, key: e.Key}
		if _, taken := index[k]; !taken {
			index[k] = obj.ID
		}
	}
	if e.Action == ActionCancel {
		st.remember(e, e.ID)
	} else {
		st.remember(e, "")
	}
	return nil
}

// remember stores the answer for a native key, so it can be replayed.
func (st *store) remember(e Effect, target string) {
	if e.Mode != ModeNative || e.Key == "" {
		return
	}
	k := nativeKey{collection: e.Collection, action: e.Action, key: e.Key}
	st.native[k] = &keyEntry{
		bodySHA:  e.BodySHA256,
		target:   target,
		status:   e.Status,
		response: e.Response,
	}
}

// claim marks a native key as in flight for req. When the key is already
// known it returns the answer to send instead and claimed == false: the
// stored response, 409 while in flight, or 422 for a different request.
func (st *store) claim(k nativeKey, req effectRequest) (out outcome, claimed bool) {
	e, ok := st.native[k]
	switch {
	case !ok:
		st.native[k] = &keyEntry{inFlight: true}
		return outcome{}, true
	case e.inFlight:
		return jsonOutcome(http.StatusConflict, errorBody{Error: CodeInFlight}), false
	case e.bodySHA != req.bodySHA || e.target != req.target:
		return jsonOutcome(http.StatusUnprocessableEntity, errorBody{
			Error:   "idempotency_key_reused",
			Message: fmt.Sprintf("Idempotency-Key %q was first used with a different request", k.key),
		}), false
	default:
		return outcome{status: e.status, body: e.response, replayed: true}, false
	}
}

// release forgets a claim whose request recorded nothing, so a retry with
// the same key is processed afresh.
func (st *store) release(k nativeKey) {
	if e, ok := st.native[k]; ok && e.inFlight {
		delete(st.native, k)
	}
}

// object returns the object with id if it lives in mode and collection.
func (st *store) object(mode, collection, id string) (Object, bool) {
	obj, ok := st.objects[id]
	if !ok || obj.Mode != mode || obj.Collection != collection {
		return Object{}, false
	}
	return obj, true
}

// lookup returns the first object created with key in mode and
// collection.
func (st *store) lookup(mode, collection, key string) (Object, bool) {
	id, ok := st.byKey[lookupKey{mode: mode, collection: collection, key: key}]
	if !ok {
		return Object{}, false
	}
	return st.object(mode, collection, id)
}

// lookupCancel returns the first object cancelled with key in mode and
// collection.
func (st *store) lookupCancel(mode, collection, key string) (Object, bool) {
	id, ok := st.byCancelKey[lookupKey{mode: mode, collection: collection, key: key}]
	if !ok {
		return Object{}, false
	}
	return st.object(mode, collection, id)
}
