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
	"net/http"
	"time"
)

// handleGet serves GET /{mode}/{collection}/{id}.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	mode, collection, ok := pathTarget(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	obj, found := s.state.object(mode, collection, r.PathValue("id"))
	s.mu.Unlock()
	if !found {
		writeError(w, http.StatusNotFound, errorBody{Error: CodeNotFound})
		return
	}
	writeJSON(w, http.StatusOK, obj)
}

// handleLookup serves GET /lookup/{collection}?key=K: the first object
// created with key K or, if none was, the first object cancelled with it.
// Faults apply to it like to an effect, with the lookup itself in place of
// the commit; an index that lags shows a cancel as late as a create.
func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	mode, collection, ok := pathTarget(w, r)
	if !ok {
		return
	}
	if mode != ModeLookup {
		writeError(w, http.StatusNotFound, errorBody{Error: CodeNotFound})
		return
	}
	key := r.URL.Query().Get("key")
	if key == "" {
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeMissingKey, Message: "query parameter key is required"})
		return
	}
	m := faultMatch{mode: mode, collection: collection, method: http.MethodGet, key: key, lookup: true}
	f, ok := s.chooseFault(w, r, m)
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	sleepContext(r.Context(), f.lookupDelay())
	s.mu.Lock()
	obj, found := s.state.lookup(ModeLookup, collection, key)
	since := obj.CreatedAt
	if !found {
		obj, found = s.state.lookupCancel(ModeLookup, collection, key)
		since = obj.CancelledAt
	}
	s.mu.Unlock()
	out := jsonOutcome(http.StatusNotFound, errorBody{Error: CodeNotFound})
	if found && s.visible(since, f.lookupLag()) {
		out = jsonOutcome(http.StatusOK, obj)
	}
	s.respond(w, r, f, out)
}

// visible reports whether a lookup index that lags lag behind sees what
// happened at since (an RFC 3339 time).
func (s *Server) visible(since string, lag time.Duration) bool {
	if lag <= 0 {
		return true
	}
	t, err := time.Parse(time.RFC3339Nano, since)
	return err == nil && s.now().Sub(t) >= lag
}
