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
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
)

// FaultRule injects Fault into matching requests. Empty match fields match
// everything. Rules apply to POST requests (creates, cancels and
// validates); a rule applies to lookups by key (GET
// /lookup/{collection}?key=K) when its Method is GET or its Fault is a
// lookup fault (lookup-503, lookup-timeout, lookup-lag, lookup-route-404),
// and to lookups only then. A rule whose Fault is a re-send fault
// (resend-401, resend-403, resend-404) matches only requests whose key the
// sandbox has seen before, and a 409-exists rule only creates and
// validates whose key already has an object, so that Fired counts only the
// requests the fault changed.
type FaultRule struct {
	Mode       string `json:"mode"`
	Collection string `json:"collection"`
	Method     string `json:"method"`
	// Action matches one kind of POST request: ActionCreate,
	// ActionCancel or ActionValidate, so that a rule can fail only a
	// cancel (a compensation) or only a dry run. A rule with an Action
	// never matches lookups.
	Action string `json:"action"`
	// KeyPrefix matches the start of the Idempotency-Key header, or of the
	// key queried by a lookup.
	KeyPrefix string `json:"keyPrefix"`
	// Fault is a fault specification, e.g. "503=2".
	Fault string `json:"fault"`
	// Probability is the chance the rule fires on a matching request; 0
	// means 1.
	Probability float64 `json:"probability"`
	// Count > 0 limits how many times the rule fires.
	Count int `json:"count"`
}

// FaultRuleState is a rule with its firing counters.
type FaultRuleState struct {
	FaultRule
	Fired int `json:"fired"`
	// Remaining is how many more times the rule may fire, -1 if unlimited.
	Remaining int `json:"remaining"`
}

// FaultState is the fault configuration, as GET /admin/faults reports it.
type FaultState struct {
	Seed  int64            `json:"seed"`
	Rules []FaultRuleState `json:"rules"`
}

// faultConfig is the body of PUT /admin/faults.
type faultConfig struct {
	Seed  int64       `json:"seed"`
	Rules []FaultRule `json:"rules"`
}

// faultMatch describes a request for rule matching.
type faultMatch struct {
	mode       string
	collection string
	method     string
	// action is the POST request's, empty for lookups.
	action string
	key    string
	lookup bool
	// resend is true when a request with the same mode, collection, action
	// and key came before.
	resend bool
	// exists is true when the request is a create or a validate and an
	// object was created with its key in its mode and collection.
	exists bool
}

type activeRule struct {
	rule  FaultRule
	fault *fault
	fired int
}

func (a *activeRule) matches(m faultMatch) bool {
	r := a.rule
	if (r.Mode != "" && r.Mode != m.mode) ||
		(r.Collection != "" && r.Collection != m.collection) ||
		(r.Action != "" && r.Action != m.action) ||
		!strings.HasPrefix(m.key, r.KeyPrefix) {
		return false
	}
	if !a.fault.applies(m) {
		return false
	}
	if m.lookup {
		return r.Method == http.MethodGet || (r.Method == "" && a.fault.lookupOnly())
	}
	return r.Method == "" || r.Method == m.method
}

func (a *activeRule) exhausted() bool {
	return a.rule.Count > 0 && a.fired >= a.rule.Count
}

// faultSet holds the fault rules and their seeded random source.
type faultSet struct {
	mu    sync.Mutex
	seed  int64
	rng   *rand.Rand
	rules []*activeRule
}

func newFaultSet(seed int64, rules []FaultRule) (*faultSet, error) {
	rs := &faultSet{}
	if err := rs.set(seed, rules); err != nil {
		return nil, err
	}
	return rs, nil
}

// set replaces the rules and reseeds the random source. On error nothing
// changes.
func (rs *faultSet) set(seed int64, rules []FaultRule) error {
	active, err := compileRules(rules)
	if err != nil {
		return err
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.seed = seed
	rs.rng = rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	rs.rules = active
	return nil
}

func (rs *faultSet) clear() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.rules = nil
}

// pick returns the fault of the first matching rule that fires, or nil.
func (rs *faultSet) pick(m faultMatch) *fault {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, a := range rs.rules {
		if !a.matches(m) || a.exhausted() {
			continue
		}
		if p := a.rule.Probability; p > 0 && p < 1 && rs.rng.Float64() >= p {
			continue
		}
		a.fired++
		return a.fault
	}
	return nil
}

func (rs *faultSet) state() FaultState {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	st := FaultState{Seed: rs.seed, Rules: []FaultRuleState{}}
	for _, a := range rs.rules {
		remaining := -1
		if a.rule.Count > 0 {
			remaining = a.rule.Count - a.fired
		}
		st.Rules = append(st.Rules, FaultRuleState{FaultRule: a.rule, Fired: a.fired, Remaining: remaining})
	}
	return st
}

func compileRules(rules []FaultRule) ([]*activeRule, error) {
	active := make([]*activeRule, 0, len(rules))
	for i, r := range rules {
		r.Method = strings.ToUpper(r.Method)
		f, err := parseFault(r.Fault)
		if err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		if err := validateRule(r); err != nil {
			return nil, fmt.Errorf("rule %d: %w", i, err)
		}
		active = append(active, &activeRule{rule: r, fault: f})
	}
	return active, nil
}

func validateRule(r FaultRule) error {
	switch r.Mode {
	case "", ModeNative, ModeLookup, ModeNone:
	default:
		return fmt.Errorf("unknown mode %q", r.Mode)
	}
	switch r.Method {
	case "", http.MethodPost, http.MethodGet:
	default:
		return fmt.Errorf("method %q is not POST or GET", r.Method)
	}
	switch r.Action {
	case "", ActionCreate, ActionCancel, ActionValidate:
	default:
		return fmt.Errorf("unknown action %q", r.Action)
	}
	if r.Action != "" && r.Method == http.MethodGet {
		return fmt.Errorf("action %q is a POST request: a GET rule with it would never fire", r.Action)
	}
	if r.Collection != "" && !collectionPattern.MatchString(r.Collection) {
		return fmt.Errorf("invalid collection %q", r.Collection)
	}
	if !(r.Probability >= 0 && r.Probability <= 1) {
		return fmt.Errorf("probability %v is not within [0, 1]", r.Probability)
	}
	if r.Count < 0 {
		return fmt.Errorf("negative count %d", r.Count)
	}
	return nil
}

func (s *Server) handleGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.faults.state())
}

func (s *Server) handlePutFaults(w http.ResponseWriter, r *http.Request) {
	var cfg faultConfig
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		writeError(w, http.StatusBadRequest, errorBody{Error: CodeInvalidJSON, Message: err.Error()})
		return
	}
	if err := s.faults.set(cfg.Seed, cfg.Rules); err != nil {
		code := CodeInvalidRules
		if errors.Is(err, ErrUnknownFault) {
			code = CodeUnknownFault
		}
		writeError(w, http.StatusBadRequest, errorBody{Error: code, Message: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, s.faults.state())
}

func (s *Server) handleDeleteFaults(w http.ResponseWriter, _ *http.Request) {
	s.faults.clear()
	writeJSON(w, http.StatusOK, s.faults.state())
}
