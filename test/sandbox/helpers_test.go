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
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// Paths used throughout the tests.
const (
	collCharges        = "charges"
	pathNativeCharges  = "/native/charges"
	pathNoneCharges    = "/none/charges"
	pathNoneEmails     = "/none/emails"
	pathLookupTickets  = "/lookup/tickets"
	pathLookupTicketsK = "/lookup/tickets?key=K"
)

// fixedNow is a clock that never moves, for stable timestamps.
func fixedNow() time.Time {
	return time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
}

// harness is a sandbox served over real TCP.
type harness struct {
	t      *testing.T
	srv    *Server
	ts     *httptest.Server
	http   *http.Client
	client *Client
}

// newHarness starts a sandbox. Its HTTP client opens a fresh connection per
// request: Go's transport silently retries a request carrying an
// Idempotency-Key when a reused connection dies before the response, which
// would hide the faults under test.
func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	if opts.Now == nil {
		opts.Now = fixedNow
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	h := &harness{t: t, srv: srv, ts: ts, http: hc, client: &Client{BaseURL: ts.URL, HTTP: hc}}
	t.Cleanup(h.stop)
	return h
}

// stop shuts the server down; calling it again is harmless.
func (h *harness) stop() {
	h.ts.Close()
	if err := h.srv.Close(); err != nil {
		h.t.Errorf("Close: %v", err)
	}
}

// call is one request to the sandbox.
type call struct {
	method string // default POST
	path   string
	key    string // Idempotency-Key header
	fault  string // X-Sandbox-Fault header
	body   string
	// header holds further request headers.
	header map[string]string
}

// result is what came back.
type result struct {
	status int
	header http.Header
	body   string
}

// errorCode is the "error" field of a JSON error body, or "".
func (r result) errorCode() string {
	return r.errorBody().Error
}

// errorBody decodes a JSON error body; zero if it is none.
func (r result) errorBody() errorBody {
	var e errorBody
	_ = json.Unmarshal([]byte(r.body), &e)
	return e
}

// replayed reports whether the answer was marked as a replay.
func (r result) replayed() bool {
	return r.header.Get(HeaderReplayed) == "true"
}

// object decodes the body as an Object.
func (r result) object(t *testing.T) Object {
	t.Helper()
	var obj Object
	if err := json.Unmarshal([]byte(r.body), &obj); err != nil {
		t.Fatalf("decode object from %d %q: %v", r.status, r.body, err)
	}
	return obj
}

func (h *harness) try(c call) (result, error) {
	return h.tryWith(h.http, c)
}

func (h *harness) tryWith(hc *http.Client, c call) (result, error) {
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(h.t.Context(), method, h.ts.URL+c.path, body)
	if err != nil {
		return result{}, err
	}
	if c.key != "" {
		req.Header.Set(HeaderIdempotencyKey, c.key)
	}
	if c.fault != "" {
		req.Header.Set(HeaderFault, c.fault)
	}
	for name, value := range c.header {
		req.Header.Set(name, value)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return result{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(data)}, nil
}

// do sends c and fails the test on a transport error.
func (h *harness) do(c call) result {
	h.t.Helper()
	r, err := h.try(c)
	if err != nil {
		h.t.Fatalf("%s %s: %v", c.method, c.path, err)
	}
	return r
}

func (h *harness) summary() Summary {
	h.t.Helper()
	sum, err := h.client.Summary(h.t.Context())
	if err != nil {
		h.t.Fatalf("Summary: %v", err)
	}
	return sum
}

func (h *harness) effects() []Effect {
	h.t.Helper()
	effects, err := h.client.Effects(h.t.Context())
	if err != nil {
		h.t.Fatalf("Effects: %v", err)
	}
	return effects
}

// fileLines decodes every line of a ledger file into a generic map, without
// going through the package's own decoder.
func fileLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	defer func() { _ = f.Close() }()
	var lines []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		if len(strings.TrimSpace(sc.Text())) == 0 {
			continue
		}
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("ledger line %q: %v", sc.Text(), err)
		}
		lines = append(lines, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read ledger: %v", err)
	}
	return lines
}

// fileEffects counts the effect lines (those without a record type) in a
// ledger file.
func fileEffects(t *testing.T, path string) int {
	t.Helper()
	n := 0
	for _, line := range fileLines(t, path) {
		if _, typed := line["record"]; !typed {
			n++
		}
	}
	return n
}
