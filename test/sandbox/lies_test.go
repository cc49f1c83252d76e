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
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lie is what a client sees of an answer that gateways, proxies and
// ingresses shape: status, content type, body, and the replay and fault
// headers.
type lie struct {
	Status      int
	ContentType string
	Body        string
	Replayed    bool
	Fault       string
}

func lieOf(r result) lie {
	return lie{Status: r.status, ContentType: r.header.Get("Content-Type"), Body: r.body,
		Replayed: r.replayed(), Fault: r.header.Get(HeaderFault)}
}

func TestGatewayErrorAfterCommit(t *testing.T) {
	tests := map[string]struct {
		fault string
		want  lie
	}{
		"502 from nginx": {
			fault: Fault502AfterCommit,
			want:  lie{Status: 502, ContentType: contentTypeHTML, Body: nginx502, Fault: Fault502AfterCommit},
		},
		"503 from Envoy": {
			fault: Fault503AfterCommit,
			want: lie{Status: 503, ContentType: contentTypeText, Fault: Fault503AfterCommit,
				Body: "upstream connect error or disconnect/reset before headers. reset reason: connection termination"},
		},
		"504 from an API gateway": {
			fault: Fault504AfterCommit,
			want: lie{Status: 504, ContentType: contentTypeJSON, Fault: Fault504AfterCommit,
				Body: `{"message":"Endpoint request timed out"}`},
		},
	}
	for name, tc := range tests {
		for _, mode := range []string{ModeNative, ModeLookup, ModeNone} {
			t.Run(name+" in "+mode, func(t *testing.T) {
				h := newHarness(t, Options{})
				r := h.do(call{path: "/" + mode + "/charges", key: "k1", fault: tc.fault, body: charge})
				if diff := cmp.Diff(tc.want, lieOf(r)); diff != "" {
					t.Errorf("answer mismatch (-want, +got):\n%s", diff)
				}
				if r.errorCode() != "" {
					t.Errorf("body has the sandbox's error shape %q; a gateway does not send it", r.errorCode())
				}
				if got := h.summary().Effects; got != 1 {
					t.Errorf("effects = %d, want 1: the upstream committed", got)
				}
			})
		}
	}
}

func TestGatewayErrorAfterCommitThenNativeResendReplays(t *testing.T) {
	h := newHarness(t, Options{})
	h.do(call{path: pathNativeCharges, key: "k1", fault: Fault503AfterCommit, body: charge})
	effects := h.effects()
	if len(effects) != 1 {
		t.Fatalf("effects = %d, want 1", len(effects))
	}
	r := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	want := lie{Status: 201, ContentType: contentTypeJSON, Body: string(effects[0].Response) + "\n", Replayed: true}
	if diff := cmp.Diff(want, lieOf(r)); diff != "" {
		t.Errorf("re-send mismatch (-want, +got):\n%s", diff)
	}
}

func TestResendFaults(t *testing.T) {
	tests := map[string]struct {
		fault string
		want  lie
	}{
		"401 after a credential rotation": {
			fault: FaultResend401,
			want: lie{Status: 401, ContentType: contentTypeJSON, Fault: FaultResend401,
				Body: `{"error":"unauthorized","message":"invalid API key"}` + "\n"},
		},
		"403 after a permission was revoked": {
			fault: FaultResend403,
			want:  lie{Status: 403, ContentType: contentTypeJSON, Fault: FaultResend403, Body: `{"error":"forbidden"}` + "\n"},
		},
		"404 from an ingress after the route moved": {
			fault: FaultResend404,
			want:  lie{Status: 404, ContentType: contentTypeHTML, Fault: FaultResend404, Body: ingress404},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			first := h.do(call{path: pathNativeCharges, key: "k1", fault: tc.fault, body: charge})
			if diff := cmp.Diff([]any{201, false, ""}, []any{first.status, first.replayed(), first.header.Get(HeaderFault)}); diff != "" {
				t.Errorf("first send must be untouched (-want, +got):\n%s", diff)
			}
			other := h.do(call{path: pathNativeCharges, key: "k2", fault: tc.fault, body: charge})
			if other.status != http.StatusCreated {
				t.Errorf("first send of another key = %d, want 201", other.status)
			}
			resend := h.do(call{path: pathNativeCharges, key: "k1", fault: tc.fault, body: charge})
			if diff := cmp.Diff(tc.want, lieOf(resend)); diff != "" {
				t.Errorf("re-send mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Effects; got != 2 {
				t.Errorf("effects = %d, want 2 (one per key)", got)
			}
			again := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
			if again.status != http.StatusCreated || !again.replayed() || again.body != first.body {
				t.Errorf("re-send without the fault = %d replayed=%t %q, want the replay of %q",
					again.status, again.replayed(), again.body, first.body)
			}
		})
	}
}

func TestResendFaultAfterFailedFirstSend(t *testing.T) {
	// A first send that took no effect still makes the next one a re-send:
	// the client cannot tell, and neither can a gateway.
	h := newHarness(t, Options{})
	if r := h.do(call{path: pathNativeCharges, key: "k1", fault: Fault502, body: charge}); r.status != 502 {
		t.Fatalf("first send = %d, want 502", r.status)
	}
	r := h.do(call{path: pathNativeCharges, key: "k1", fault: FaultResend401, body: charge})
	if diff := cmp.Diff([]any{401, CodeUnauthorized, false}, []any{r.status, r.errorCode(), r.replayed()}); diff != "" {
		t.Errorf("re-send mismatch (-want, +got):\n%s", diff)
	}
	if got := h.summary().Effects; got != 0 {
		t.Errorf("effects = %d, want 0", got)
	}
}

func TestConflictExists(t *testing.T) {
	type got struct {
		Status   int
		Error    string
		Replayed bool
	}
	created := got{Status: 201}
	exists := got{Status: 409, Error: CodeAlreadyExists}
	tests := map[string]struct {
		mode        string
		key         string
		want        []got
		wantEffects int
	}{
		"lookup refuses a second object for a key": {mode: ModeLookup, key: "k1", want: []got{created, exists, exists}, wantEffects: 1},
		"none refuses a second object for a key":   {mode: ModeNone, key: "k1", want: []got{created, exists, exists}, wantEffects: 1},
		"native dedupes on the key first": {mode: ModeNative, key: "k1",
			want: []got{created, {Status: 201, Replayed: true}, {Status: 201, Replayed: true}}, wantEffects: 1},
		"without a key nothing is conditional": {mode: ModeNone, want: []got{created, created, created}, wantEffects: 3},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			answers := make([]got, 0, len(tc.want))
			for range tc.want {
				r := h.do(call{path: "/" + tc.mode + "/charges", key: tc.key, fault: Fault409Exists, body: charge})
				answers = append(answers, got{Status: r.status, Error: r.errorCode(), Replayed: r.replayed()})
			}
			if diff := cmp.Diff(tc.want, answers); diff != "" {
				t.Errorf("answers mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Effects; got != tc.wantEffects {
				t.Errorf("effects = %d, want %d", got, tc.wantEffects)
			}
		})
	}
}

func TestConflictExistsIsPerModeAndCollection(t *testing.T) {
	h := newHarness(t, Options{})
	h.do(call{path: pathLookupTickets, key: "k1", body: charge})
	for _, path := range []string{"/none/tickets", "/lookup/charges"} {
		if r := h.do(call{path: path, key: "k1", fault: Fault409Exists, body: charge}); r.status != http.StatusCreated {
			t.Errorf("%s with a key used elsewhere = %d, want 201", path, r.status)
		}
	}
}

func TestSlowFirstAttemptMakesResendInFlight(t *testing.T) {
	h := newHarness(t, Options{})
	impatient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 100 * time.Millisecond}
	const slow = 600 * time.Millisecond
	start := time.Now()
	_, err := h.tryWith(impatient, call{path: pathNativeCharges, key: "k1", fault: "delay-before-commit=600ms", body: charge})
	if diff := cmp.Diff(errTimeout, errorKind(err)); diff != "" {
		t.Fatalf("first attempt error %v mismatch (-want, +got):\n%s", err, diff)
	}
	r := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	want := lie{Status: 409, ContentType: contentTypeJSON, Body: `{"error":"in_flight"}` + "\n"}
	if diff := cmp.Diff(want, lieOf(r)); diff != "" {
		t.Errorf("re-send while the first is processed (-want, +got):\n%s", diff)
	}
	time.Sleep(slow - time.Since(start) + 200*time.Millisecond)
	if got := h.summary().Effects; got != 1 {
		t.Errorf("effects = %d, want 1: the tool commits though its client left", got)
	}
	again := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	if again.status != http.StatusCreated || !again.replayed() {
		t.Errorf("re-send after the commit = %d replayed=%t, want a 201 replay", again.status, again.replayed())
	}
}

// clock is a test clock that moves only when told.
type clock struct{ offset atomic.Int64 }

func (c *clock) now() time.Time          { return fixedNow().Add(time.Duration(c.offset.Load())) }
func (c *clock) advance(d time.Duration) { c.offset.Add(int64(d)) }

func TestLookupLies(t *testing.T) {
	notFound := lie{Status: 404, ContentType: contentTypeJSON, Body: `{"error":"not_found"}` + "\n"}
	tests := map[string]struct {
		age   time.Duration // of the object when it is looked up
		fault string
		want  lie
	}{
		"lag hides a young object": {
			age: 4 * time.Second, fault: "lookup-lag=5s",
			want: lie{Status: 404, ContentType: contentTypeJSON, Body: notFound.Body, Fault: "lookup-lag=5s"},
		},
		"lag shows an object as old as the lag": {
			age: 5 * time.Second, fault: "lookup-lag=5s",
			want: lie{Status: 200, ContentType: contentTypeJSON, Fault: "lookup-lag=5s"},
		},
		"route 404 from an ingress": {
			fault: FaultLookupRoute404,
			want:  lie{Status: 404, ContentType: contentTypeHTML, Body: ingress404, Fault: FaultLookupRoute404},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var c clock
			h := newHarness(t, Options{Now: c.now})
			created := h.do(call{path: pathLookupTickets, key: "K", fault: tc.fault})
			if created.status != http.StatusCreated || created.header.Get(HeaderFault) != "" {
				t.Fatalf("create = %d fault %q, want 201 untouched by a lookup fault",
					created.status, created.header.Get(HeaderFault))
			}
			c.advance(tc.age)
			got := lieOf(h.do(call{method: http.MethodGet, path: pathLookupTicketsK, fault: tc.fault}))
			if tc.want.Status == http.StatusOK {
				tc.want.Body = created.body
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("lookup mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Effects; got != 1 {
				t.Errorf("effects = %d, want 1", got)
			}
		})
	}
}

func TestHoldBeforeCommit(t *testing.T) {
	tests := map[string]struct {
		path string
		// resend is the re-send's answer while the first is held: a Native
		// key is not in flight yet, so the re-send creates and the held
		// request then replays.
		resend      lie
		wantEffects int
	}{
		"lookup": {path: pathLookupTickets, resend: lie{Status: 201, ContentType: contentTypeJSON}, wantEffects: 2},
		"native": {path: "/native/tickets", resend: lie{Status: 201, ContentType: contentTypeJSON}, wantEffects: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			impatient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 100 * time.Millisecond}
			start := time.Now()
			_, err := h.tryWith(impatient, call{path: tc.path, key: "K", fault: "hold-before-commit=500ms", body: charge})
			if diff := cmp.Diff(errTimeout, errorKind(err)); diff != "" {
				t.Fatalf("held attempt error %v mismatch (-want, +got):\n%s", err, diff)
			}
			if got := h.summary().Effects; got != 0 {
				t.Errorf("effects while held = %d, want 0", got)
			}
			if r := h.do(call{method: http.MethodGet, path: pathLookupTicketsK}); r.status != http.StatusNotFound {
				t.Errorf("lookup while held = %d, want 404", r.status)
			}
			r := h.do(call{path: tc.path, key: "K", body: charge})
			r.body = ""
			if diff := cmp.Diff(tc.resend, lieOf(r)); diff != "" {
				t.Errorf("re-send while held mismatch (-want, +got):\n%s", diff)
			}
			time.Sleep(500*time.Millisecond - time.Since(start) + 200*time.Millisecond)
			if got := h.summary().Effects; got != tc.wantEffects {
				t.Errorf("effects after the hold = %d, want %d: the held request commits though its client left",
					got, tc.wantEffects)
			}
		})
	}
}
