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

package chaos

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	ohttp "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

// toolHarness serves a sandbox and calls it through Once's HTTP client with
// the manifests of the run's tools.
type toolHarness struct {
	t        *testing.T
	url      string
	compiler *ohttp.Compiler
}

func newToolHarness(t *testing.T) *toolHarness {
	t.Helper()
	srv, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatalf("sandbox.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ts.Close()
		_ = srv.Close()
	})
	compiler, err := ohttp.NewCompiler()
	if err != nil {
		t.Fatalf("NewCompiler: %v", err)
	}
	return &toolHarness{t: t, url: ts.URL, compiler: compiler}
}

// client calls tool, asking the sandbox for fault on every request.
func (h *toolHarness) client(tool toolDef, fault string) (*ohttp.Client, effects.Request) {
	h.t.Helper()
	spec := tool.object("ns", h.url).Spec
	if err := h.compiler.Validate(&spec); err != nil {
		h.t.Fatalf("tool %s is not valid: %v", tool.name, err)
	}
	headers := http.Header{}
	if fault != "" {
		headers.Set(sandbox.HeaderFault, fault)
	}
	req := effects.Request{Operation: tool.operation, Key: "ns/Tool:" + tool.name + "/" + tool.operation + "/order-1",
		Parameters: params("order-1", 100), Timeout: 5 * time.Second}
	// The sandbox listens on loopback, which the egress policy refuses
	// unless allowed.
	loopback := &ohttp.Egress{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
	return ohttp.NewClient(&spec, headers, ohttp.NewTransport(loopback), h.compiler), req
}

func toolOf(mode v1.IdempotencyMode) toolDef {
	for _, t := range tools {
		if t.mode == mode {
			return t
		}
	}
	panic("no tool in mode " + mode)
}

// TestLookupToolAbsent checks the Lookup tool's absent expression: only the
// sandbox's own not-found answer proves absence.
func TestLookupToolAbsent(t *testing.T) {
	tests := map[string]struct {
		created bool // an effect exists for the key
		fault   string
		want    protocol.Verdict
	}{
		"not found":                      {want: protocol.VerdictAbsent},
		"found":                          {created: true, want: protocol.VerdictFound},
		"an ingress's HTML 404":          {fault: sandbox.FaultLookupRoute404, want: protocol.VerdictUndecidable},
		"an ingress's 404 for an effect": {created: true, fault: sandbox.FaultLookupRoute404, want: protocol.VerdictUndecidable},
		"unavailable":                    {fault: sandbox.FaultLookup503, want: protocol.VerdictUndecidable},
		// The lie the tool's lookupDelay must cover: a young effect is
		// reported absent.
		"a lagging index": {created: true, fault: "lookup-lag=1h", want: protocol.VerdictAbsent},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newToolHarness(t)
			tool := toolOf(v1.IdempotencyLookup)
			if tc.created {
				c, req := h.client(tool, "")
				if r := c.Execute(t.Context(), req); r.Outcome != v1.OutcomeSucceeded {
					t.Fatalf("create: %s %s", r.Outcome, r.Message)
				}
			}
			c, req := h.client(tool, tc.fault)
			got := c.Lookup(t.Context(), req)
			if diff := cmp.Diff(tc.want, got.Verdict); diff != "" {
				t.Errorf("verdict on %d %q mismatch (-want, +got):\n%s", got.HTTPStatus, got.Message, diff)
			}
			if strings.Contains(got.Message, "evaluating") {
				t.Errorf("an expression failed instead of deciding: %s", got.Message)
			}
		})
	}
}

// TestNativeToolReplayed checks the Native tool's replayed expression: the
// sandbox's replays are marked, its lies are not.
func TestNativeToolReplayed(t *testing.T) {
	tests := map[string]struct {
		fault      string
		wantStatus int32
		want       bool
	}{
		"a replay":                       {wantStatus: 201, want: true},
		"a rotated credential":           {fault: sandbox.FaultResend401, wantStatus: 401},
		"a revoked permission":           {fault: sandbox.FaultResend403, wantStatus: 403},
		"a moved route":                  {fault: sandbox.FaultResend404, wantStatus: 404},
		"a gateway error after a replay": {fault: sandbox.Fault503AfterCommit, wantStatus: 503},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newToolHarness(t)
			tool := toolOf(v1.IdempotencyNative)
			c, req := h.client(tool, "")
			if r := c.Execute(t.Context(), req); r.Outcome != v1.OutcomeSucceeded || r.Replayed {
				t.Fatalf("first send: %s replayed=%t %s", r.Outcome, r.Replayed, r.Message)
			}
			c, req = h.client(tool, tc.fault)
			r := c.Execute(t.Context(), req)
			if diff := cmp.Diff([]any{tc.wantStatus, tc.want}, []any{r.HTTPStatus, r.Replayed}); diff != "" {
				t.Errorf("re-send (status, replayed) mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

// TestToolCancels checks the tools' cancels, the compensations of the
// run's sagas: each cancels the object its id names, a Native re-send is
// replayed, and a Lookup tool finds a cancel by its own key, and only once
// it happened.
func TestToolCancels(t *testing.T) {
	for _, tool := range tools {
		t.Run(tool.name, func(t *testing.T) {
			h := newToolHarness(t)
			c, req := h.client(tool, "")
			made := c.Execute(t.Context(), req)
			if made.Outcome != v1.OutcomeSucceeded || made.ExternalObjectID == "" {
				t.Fatalf("create: %s %q %s", made.Outcome, made.ExternalObjectID, made.Message)
			}
			undo := effects.Request{Operation: tool.cancel, Key: req.Key + "/compensate",
				Parameters: []byte(`{"id":"` + made.ExternalObjectID + `"}`), Timeout: 5 * time.Second}
			if tool.mode == v1.IdempotencyLookup {
				if got := c.Lookup(t.Context(), undo).Verdict; got != protocol.VerdictAbsent {
					t.Errorf("lookup of a cancel not sent yet: %s, want Absent", got)
				}
			}
			r := c.Execute(t.Context(), undo)
			if r.Outcome != v1.OutcomeSucceeded || r.ExternalObjectID != made.ExternalObjectID {
				t.Fatalf("cancel: %s %q %s", r.Outcome, r.ExternalObjectID, r.Message)
			}
			switch tool.mode {
			case v1.IdempotencyLookup:
				got := c.Lookup(t.Context(), undo)
				if got.Verdict != protocol.VerdictFound || got.ExternalObjectID != made.ExternalObjectID {
					t.Errorf("lookup of the cancel: %s %q, want Found %q", got.Verdict, got.ExternalObjectID,
						made.ExternalObjectID)
				}
			case v1.IdempotencyNative:
				if again := c.Execute(t.Context(), undo); again.Outcome != v1.OutcomeSucceeded || !again.Replayed {
					t.Errorf("re-sent cancel: %s replayed=%t, want a replay", again.Outcome, again.Replayed)
				}
			}
		})
	}
}
