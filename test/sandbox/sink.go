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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"sync"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// The sink is a CloudEvents subscriber: POST /sink/{name} takes one event
// (binary or structured content mode, parsed by the CloudEvents SDK) and
// counts its deliveries by event id. It is an idempotent consumer: the
// first delivery of an id is consumed, later ones are acknowledged and
// counted, never consumed again. Tests read the counts at GET
// /sink/{name} to show that every outcome was delivered at least once
// and consumed once.
//
// Its faults, set at PUT /sink/{name}/faults, stand for what real
// subscribers do:
//
//   - Unavailable: N deliveries answered 503 before the event is read. A
//     subscriber being deployed, scaled from zero or shedding load behind
//     its load balancer (Knative's activator, an ingress with no ready
//     endpoint): the event was not taken, and a redelivery is needed.
//   - DropAnswer: N deliveries consumed, then the connection is closed
//     without an answer. A subscriber that committed the event and died,
//     or a proxy that timed out, before the 2xx reached the sender: the
//     sender cannot tell it from a lost request, so it delivers again, and
//     only the consumer's dedupe on the id keeps the effect single. This is
//     the at-least-once case.
//
// The sink's counts live in memory: they outlive the manager, not the
// sandbox process.

// SinkFaults are the faults a sink applies to its next deliveries.
type SinkFaults struct {
	// Unavailable answers the next N deliveries 503, unread.
	Unavailable int `json:"unavailable,omitempty"`
	// DropAnswer consumes the next N deliveries and closes the connection
	// without answering.
	DropAnswer int `json:"dropAnswer,omitempty"`
}

// SinkEvent is what a sink saw of one event id.
type SinkEvent struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Source  string `json:"source"`
	Subject string `json:"subject,omitempty"`
	// Deliveries counts the deliveries of the id that the sink took,
	// answered or not; Consumed is 1 (the first).
	Deliveries int `json:"deliveries"`
	Consumed   int `json:"consumed"`
	// DataDigests are the distinct SHA-256 digests of the data delivered
	// under the id: one if every delivery carried the same event.
	DataDigests []string `json:"dataDigests"`
	// Data is the first delivery's data.
	Data json.RawMessage `json:"data,omitempty"`
	// First and Last are when the first and the last delivery arrived.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
}

// SinkState is a sink's counts.
type SinkState struct {
	// Events are the ids seen, in order of their first delivery.
	Events []SinkEvent `json:"events"`
	// Deliveries counts the deliveries taken; Consumed the ids consumed.
	Deliveries int `json:"deliveries"`
	Consumed   int `json:"consumed"`
	// Unavailable and Dropped count the deliveries the faults refused and
	// the answers they dropped; Invalid the requests that were no
	// CloudEvent.
	Unavailable int `json:"unavailable"`
	Dropped     int `json:"dropped"`
	Invalid     int `json:"invalid"`
	// Faults are the faults still to apply.
	Faults SinkFaults `json:"faults"`
}

type sink struct {
	state SinkState
	index map[string]int
}

// sinks holds the sandbox's sinks by name.
type sinks struct {
	mu  sync.Mutex
	now func() time.Time
	// abort closes a connection without answering.
	abort func(http.ResponseWriter)
	by    map[string]*sink
}

func newSinks(now func() time.Time, abort func(http.ResponseWriter)) *sinks {
	return &sinks{now: now, abort: abort, by: map[string]*sink{}}
}

// get returns the named sink, creating it; the caller holds mu.
func (ss *sinks) get(name string) *sink {
	s, ok := ss.by[name]
	if !ok {
		s = &sink{index: map[string]int{}}
		ss.by[name] = s
	}
	return s
}

func (ss *sinks) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /sink/{name}", ss.handleDeliver)
	mux.HandleFunc("GET /sink/{name}", ss.handleGet)
	mux.HandleFunc("DELETE /sink/{name}", ss.handleReset)
	mux.HandleFunc("PUT /sink/{name}/faults", ss.handleFaults)
}

// sinkFault is what a delivery meets.
type sinkFault int

const (
	sinkTake sinkFault = iota
	sinkUnavailable
	sinkDrop
)

func (ss *sinks) handleDeliver(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	ss.mu.Lock()
	s := ss.get(name)
	fault := sinkTake
	switch {
	case s.state.Faults.Unavailable > 0:
		s.state.Faults.Unavailable--
		s.state.Unavailable++
		fault = sinkUnavailable
	case s.state.Faults.DropAnswer > 0:
		s.state.Faults.DropAnswer--
		fault = sinkDrop
	}
	ss.mu.Unlock()
	if fault == sinkUnavailable {
		writeUnavailable(w, http.StatusServiceUnavailable, 1)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	ev, err := cehttp.NewEventFromHTTPRequest(r)
	if err == nil {
		err = ev.Validate()
	}
	if err != nil {
		ss.mu.Lock()
		s.state.Invalid++
		ss.mu.Unlock()
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeInvalidJSON, Message: "not a CloudEvent: " + err.Error()})
		return
	}
	sum := sha256.Sum256(ev.Data())
	digest := hex.EncodeToString(sum[:])
	now := ss.now()
	ss.mu.Lock()
	i, seen := s.index[ev.ID()]
	if !seen {
		i = len(s.state.Events)
		s.index[ev.ID()] = i
		s.state.Events = append(s.state.Events, SinkEvent{ID: ev.ID(), Type: ev.Type(), Source: ev.Source(),
			Subject: ev.Subject(), Consumed: 1, Data: slices.Clone(ev.Data()), First: now})
		s.state.Consumed++
	}
	e := &s.state.Events[i]
	e.Deliveries++
	e.Last = now
	if !slices.Contains(e.DataDigests, digest) {
		e.DataDigests = append(e.DataDigests, digest)
	}
	s.state.Deliveries++
	if fault == sinkDrop {
		s.state.Dropped++
	}
	ss.mu.Unlock()
	if fault == sinkDrop {
		ss.abort(w)
		return
	}
	if seen {
		// Already consumed: acknowledged, not processed again.
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (ss *sinks) handleGet(w http.ResponseWriter, r *http.Request) {
	ss.mu.Lock()
	st := ss.get(r.PathValue("name")).state
	st.Events = slices.Clone(st.Events)
	ss.mu.Unlock()
	if st.Events == nil {
		st.Events = []SinkEvent{}
	}
	writeJSON(w, http.StatusOK, st)
}

func (ss *sinks) handleReset(w http.ResponseWriter, r *http.Request) {
	ss.mu.Lock()
	delete(ss.by, r.PathValue("name"))
	ss.mu.Unlock()
	writeEmpty(w, http.StatusNoContent)
}

func (ss *sinks) handleFaults(w http.ResponseWriter, r *http.Request) {
	var f SinkFaults
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&f); err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeInvalidJSON, Message: err.Error()})
		return
	}
	if f.Unavailable < 0 || f.DropAnswer < 0 {
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeInvalidRules, Message: "counts must not be negative"})
		return
	}
	ss.mu.Lock()
	ss.get(r.PathValue("name")).state.Faults = f
	ss.mu.Unlock()
	writeEmpty(w, http.StatusNoContent)
}
