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

package sim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/protocol"
)

// SimTool is a tool that keeps exactly the contract its capabilities
// declare, and no more:
//   - with Window > 0 it dedupes on the Idempotency-Key header, per
//     endpoint (a path is an endpoint; a tool that serves /v1 and /v2
//     keeps one key store for each, as an API migration does), for Window
//     after a key's first request, and forgets the key after that;
//   - with Lookup it answers GET <endpoint>?key=K with the newest visible
//     effect made with key K on that endpoint, and when it made it (an
//     effect is visible at most MaxLag after it happened, its declared
//     lookupDelay), and 404 not_found while none is;
//   - without either, every request is a new effect.
//
// Every effect goes to the world's ledger, named by the ref its
// parameters carry (the scope the workload made it for).
type SimTool struct {
	Name   string
	Window time.Duration
	Lookup bool
	MaxLag time.Duration
	// Skew is how far the tool's clock is from true time: the creation
	// times it reports carry it (Options.ClockSkew).
	Skew time.Duration
	// Derived is the window of its charge's derived keys, for the callers
	// through the MCP gateway (Options.Callers); zero for none.
	Derived time.Duration

	keys map[string]*keyed // endpoint + " " + key
}

type keyed struct {
	at     time.Time
	body   string
	effect *Effect
}

// Effect is one business effect at a tool.
type Effect struct {
	ID       string
	Tool     string
	Endpoint string
	Key      string
	Ref      string
	// Params is the canonical JSON of the parameters it was made with.
	Params string
	// At is when the tool made it, in true time; Stamp is the creation
	// time it reports, by its own clock.
	At, Stamp time.Time
	Visible   time.Time
	// Target is the charge a refund undoes; empty for a charge.
	Target string
	// Namespace is the lifetime of the workload's namespace it was made
	// in (World.namespaces).
	Namespace int
	// Licensed marks an effect of an attempt a person allowed with Retry:
	// the person vouched that no earlier effect existed. Vouched marks an
	// effect that existed when a person vouched so.
	Licensed, Vouched bool
	// Hidden marks an effect the tool's search showed later than its
	// declared delay (Options.Lies): a lookup may have proven it absent.
	// Known marks one that an answer Once recorded names.
	Hidden, Known bool
	// InRecord marks one that a scope's record named as its outcome at
	// some write, even if a later write or the record's end dropped it.
	InRecord bool
	// Holder made the request (the manager incarnation's claim holder);
	// Saga is the UID of the saga that controls the operation whose pass
	// made it, if one does.
	Holder string
	Saga   types.UID
	Epoch  int
}

// keyHeader is where the simulated tools read the key: the default of
// Tool.spec.idempotency.header.
const keyHeader = "Idempotency-Key"

// fault is what happens to one request on its way and back.
type fault int

const (
	faultNone fault = iota
	// faultRefused: the connection was refused; the request never left.
	faultRefused
	// faultLostBefore: the request left and never reached the tool (a
	// proxy dropped it); the client sees a reset.
	faultLostBefore
	// faultLostAfter: the tool made the effect and the answer was lost
	// (a reset, a timeout): the client cannot tell it from faultLostBefore.
	faultLostAfter
	// fault503After: a gateway answered 503 after the tool committed, as
	// real gateways do when the upstream is slow to answer.
	fault503After
	// fault503Before: the tool was overloaded and refused before doing
	// anything.
	fault503Before
)

var faultNames = map[fault]string{faultRefused: "the connection is refused", faultLostBefore: "the request is lost on its way",
	faultLostAfter: "the answer is lost after the tool made the effect", fault503After: "a gateway answers 503 after the tool made the effect",
	fault503Before: "the tool answers 503 before doing anything"}

func (t *SimTool) host() string { return t.Name + ".sim" }

// route names the store a request's path reaches: its version and its
// collection ("/v1/charges", "/v2/refunds"), and the charge a refund is of.
func route(path string) (store, target string) {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 4 && parts[1] == "charges" && parts[3] == opRefund:
		return "/" + parts[0] + "/refunds", parts[2]
	case len(parts) == 2:
		return "/" + parts[0] + "/" + parts[1], ""
	}
	return path, ""
}

// serve is the tool's side of one request that reached it. A charge is an
// effect; a refund is the effect that undoes a charge (a compensation);
// parameters with "reject": true are declined before anything happens, as
// a business rule would.
func (t *SimTool) serve(w *World, req *http.Request, body []byte) (*http.Response, *Effect) {
	endpoint, target := route(req.URL.Path)
	if req.Method == http.MethodGet {
		key := req.URL.Query().Get("key")
		if !t.Lookup {
			return respond(http.StatusNotFound, failure("no_route"), nil), nil
		}
		if e := t.shows(w, endpoint, key); e != nil {
			return respond(http.StatusOK, created(e), nil), e
		}
		return respond(http.StatusNotFound, failure("not_found"), nil), nil
	}
	key := req.Header.Get(keyHeader)
	if k := t.remembers(endpoint, key, w.clock.Now()); k != nil {
		if k.body != string(body) {
			return respond(http.StatusBadRequest, failure("idempotency_mismatch"), nil), nil
		}
		return respond(http.StatusCreated, created(k.effect),
			map[string]string{"Idempotent-Replayed": "true"}), k.effect
	}
	var params struct {
		Ref    string `json:"ref"`
		Reject bool   `json:"reject"`
	}
	_ = json.Unmarshal(body, &params)
	if params.Reject {
		return respond(http.StatusUnprocessableEntity, failure("declined"), nil), nil
	}
	if target != "" && w.effectByID(target) == nil {
		return respond(http.StatusNotFound, failure("no_such_charge"), nil), nil
	}
	e := w.recordEffect(t, endpoint, key, params.Ref)
	e.Target = target
	if c, err := protocol.Canonical(body); err == nil {
		e.Params = string(c)
	}
	w.checkParameters(e)
	if t.Window > 0 && key != "" {
		if t.keys == nil {
			t.keys = map[string]*keyed{}
		}
		t.keys[endpoint+" "+key] = &keyed{at: w.clock.Now(), body: string(body), effect: e}
	}
	return respond(http.StatusCreated, created(e), nil), e
}

// remembers is what the tool answers key at endpoint with while it
// remembers the key: a Native tool, within its window; nil otherwise.
func (t *SimTool) remembers(endpoint, key string, now time.Time) *keyed {
	if t.Window == 0 || key == "" {
		return nil
	}
	if k, ok := t.keys[endpoint+" "+key]; ok && now.Sub(k.at) < t.Window {
		return k
	}
	return nil
}

// shows is the effect a searchable tool's search answers key at endpoint
// with: the newest made with that key there that is visible, as a search
// that lists its results newest first answers. It forgets nothing (a
// ticket system finds a ticket by its reference years later); nil for a
// tool that cannot be searched, or before any effect is visible.
func (t *SimTool) shows(w *World, endpoint, key string) *Effect {
	if !t.Lookup || key == "" {
		return nil
	}
	for _, e := range slices.Backward(w.ledger) {
		if e.Tool == t.Name && e.Endpoint == endpoint && e.Key == key && !w.clock.Now().Before(e.Visible) {
			return e
		}
	}
	return nil
}

// failure is a tool's error body.
func failure(code string) map[string]any { return map[string]any{"error": code} }

// created is a tool's answer naming an effect: its id, its ref, when the
// tool made it (RFC 3339) and, for a refund, the charge it refunds, as real
// APIs report them (a payment's creation time, a refund's charge).
func created(e *Effect) map[string]any {
	body := map[string]any{"id": e.ID, "ref": e.Ref, "created": e.Stamp.UTC().Format(time.RFC3339Nano)}
	if e.Target != "" {
		body["charge"] = e.Target
	}
	return body
}

func respond(status int, body map[string]any, headers map[string]string) *http.Response {
	b, _ := json.Marshal(body)
	h := http.Header{"Content-Type": []string{"application/json"}}
	for k, v := range headers {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Header: h, Body: io.NopCloser(bytes.NewReader(b)), ContentLength: int64(len(b))}
}

// transport carries the managers' requests to the simulated tools; every
// request is a point where the scheduler may freeze the manager, and a
// request's fate is drawn from the pass's decisions.
type transport struct{ w *World }

var errReset = errors.New("read tcp 10.0.0.2:41234->10.0.0.9:443: read: connection reset by peer")

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := t.w
	if req.URL.Hostname() == sinkHost {
		return w.sink(req)
	}
	tool := w.tools[strings.TrimSuffix(req.URL.Hostname(), ".sim")]
	if tool == nil {
		return nil, fmt.Errorf("dial tcp: lookup %s: no such host", req.URL.Hostname())
	}
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
	}
	pr := w.running
	what := req.Method + " " + tool.Name + req.URL.RequestURI()
	if err := w.toolGate(pr, "before it sends "+what); err != nil {
		return nil, err
	}
	// The transport checks the request's context, then asks its fence at
	// the last moment before it writes, as the real one's connection does:
	// a claim that expired while the manager was frozen stops here, whether
	// or not its timer fired yet.
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	if err := httpeffects.CheckFence(req.Context()); err != nil {
		w.note("%s: the claim's fence stops it: %v", what, err)
		return nil, err
	}
	if req.Method != http.MethodGet {
		w.checkClaimed(pr, what)
	}
	if kernel := "with " + what + " in the kernel's buffer"; w.opts.FreezeInKernel && pr != nil &&
		w.draws.Float64("freeze|"+pr.site()+"|"+kernel) < w.opts.FreezeRate {
		// Bytes in the kernel's buffer leave even while the process is
		// frozen, or after it died: nothing the manager checks can stop
		// them any more.
		w.freezeAt(pr, kernel)
	}
	f := w.drawFault(pr, what)
	if f == faultRefused {
		w.note("%s: %s", what, faultNames[f])
		return nil, errors.New("dial tcp 10.0.0.9:443: connect: connection refused")
	}
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	if f == faultLostBefore || f == fault503Before {
		w.note("%s: %s", what, faultNames[f])
		if f == fault503Before {
			return respond(http.StatusServiceUnavailable, failure("overloaded"), nil), nil
		}
		return nil, errReset
	}
	resp, effect := tool.serve(w, req, body)
	if err := w.toolGate(pr, "with the answer to "+what+" on its way"); err != nil {
		return nil, err
	}
	switch f {
	case faultLostAfter:
		w.note("%s: %s", what, faultNames[f])
		return nil, errReset
	case fault503After:
		w.note("%s: %s", what, faultNames[f])
		return respond(http.StatusServiceUnavailable, failure("upstream timeout"), nil), nil
	}
	if effect != nil && req.Method == http.MethodGet && effect.Epoch != w.epochs[effect.Ref] {
		// A search that forgets nothing shows an earlier lifetime's
		// effect: no answer about this lifetime's requests, which I12
		// asks to be kept. (Once commits one made within the clock's
		// margin before this lifetime began, as it cannot tell; I10
		// judges that commit.)
		w.note("%s: the search shows %s, made in an earlier lifetime of its key", what, effect.ID)
	} else if effect != nil && pr != nil {
		w.delivered(pr, effect)
	}
	return resp, nil
}

// sortedEffects are the ledger's effects of one ref, oldest first.
func sortedEffects(ledger []*Effect, ref string) []*Effect {
	var out []*Effect
	for _, e := range ledger {
		if e.Ref == ref {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b *Effect) int { return a.At.Compare(b.At) })
	return out
}

// sinkHost is the subscribers' address, sinkTool the Tool that declares it
// and opDeliver its operation.
const (
	sinkHost  = "hooks.sim"
	sinkTool  = "hooks"
	opDeliver = "events.deliver"
)

// Delivery is one announcement a subscriber received.
type Delivery struct {
	ID               string
	Kind, Name       string
	State            string
	ExternalObjectID string
	At               time.Time
}

// sink is the subscriber: it keeps every announcement that reaches it, in
// a ledger of its own, and answers 202. A delivery meets the faults a
// tool's request does: refused, lost, or answered after it arrived.
func (w *World) sink(req *http.Request) (*http.Response, error) {
	pr := w.running
	if err := w.toolGate(pr, "before it delivers to the subscriber"); err != nil {
		return nil, err
	}
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	f := w.drawFault(pr, "deliver "+req.Header.Get("Ce-Id"))
	if f == faultRefused {
		return nil, errors.New("dial tcp 10.0.0.7:443: connect: connection refused")
	}
	if trace := httptrace.ContextClientTrace(req.Context()); trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	if f == faultLostBefore || f == fault503Before {
		return nil, errReset
	}
	var body struct {
		Kind             string `json:"kind"`
		Name             string `json:"name"`
		State            string `json:"state"`
		ExternalObjectID string `json:"externalObjectID"`
	}
	b, _ := io.ReadAll(req.Body)
	_ = json.Unmarshal(b, &body)
	d := Delivery{ID: req.Header.Get("Ce-Id"), Kind: body.Kind, Name: body.Name, State: body.State,
		ExternalObjectID: body.ExternalObjectID, At: w.clock.Now()}
	w.deliveries = append(w.deliveries, d)
	w.note("the subscriber receives %s %s of %s (id %s)", body.State, body.ExternalObjectID, body.Name, d.ID)
	w.checkAnnouncement(d)
	if f == faultLostAfter || f == fault503After {
		return nil, errReset
	}
	return &http.Response{StatusCode: http.StatusAccepted, Status: "202 Accepted", Header: http.Header{},
		Body: io.NopCloser(bytes.NewReader(nil))}, nil
}
