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
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidate(t *testing.T) {
	huge := `{"pad":"` + strings.Repeat("x", maxBodyBytes) + `"}`
	tests := map[string]struct {
		body       string
		wantStatus int
		wantBody   string
	}{
		"a body the create accepts": {
			body: charge, wantStatus: 200, wantBody: `{"valid":true}` + "\n",
		},
		"an empty body is the empty object": {
			wantStatus: 200, wantBody: `{"valid":true}` + "\n",
		},
		"a business rejection": {
			body: declined, wantStatus: 422,
			wantBody: `{"error":"rejected","message":"the create would be rejected: card_declined","reason":"card_declined"}` + "\n",
		},
		"invalid JSON": {
			body: `{"amount":`, wantStatus: 400, wantBody: `{"error":"invalid_json"}` + "\n",
		},
		"a body too large": {
			body: huge, wantStatus: 413,
			wantBody: `{"error":"body_too_large","message":"request body exceeds 1048576 bytes"}` + "\n",
		},
	}
	for name, tc := range tests {
		for _, mode := range []string{ModeNative, ModeLookup, ModeNone} {
			t.Run(name+" in "+mode, func(t *testing.T) {
				h := newHarness(t, Options{})
				for range 2 {
					r := h.do(call{path: "/" + mode + "/charges/validate", key: "k1", body: tc.body})
					if diff := cmp.Diff([]any{tc.wantStatus, tc.wantBody, false}, []any{r.status, r.body, r.replayed()}); diff != "" {
						t.Errorf("answer mismatch (-want, +got):\n%s", diff)
					}
				}
				if got := h.effects(); len(got) != 0 {
					t.Errorf("effects = %v, want none: a dry run has no effect", got)
				}
				// Nothing was claimed or indexed: the create with the key
				// is a first send.
				if r := h.do(call{method: http.MethodGet, path: "/lookup/charges?key=k1"}); r.status != http.StatusNotFound {
					t.Errorf("lookup after validates = %d, want 404", r.status)
				}
				create := h.do(call{path: "/" + mode + "/charges", key: "k1", body: charge})
				if create.status != http.StatusCreated || create.replayed() {
					t.Errorf("create after validates = %d replayed=%t, want a fresh 201", create.status, create.replayed())
				}
			})
		}
	}
}

func TestValidateJudgesTheBodyAlone(t *testing.T) {
	// A dry run does not consult the native key table: a key already used
	// with another body is the create's business, not the dry run's.
	h := newHarness(t, Options{})
	h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	r := h.do(call{path: "/native/charges/validate", key: "k1", body: otherCharge})
	if diff := cmp.Diff([]any{200, false}, []any{r.status, r.replayed()}); diff != "" {
		t.Errorf("validate with a used key mismatch (-want, +got):\n%s", diff)
	}
}

func TestValidateFaults(t *testing.T) {
	type answer struct {
		Status      int
		ContentType string
		Error       string
		Fault       string
	}
	jsonFault := func(status int, code, fault string) answer {
		return answer{Status: status, ContentType: contentTypeJSON, Error: code, Fault: fault}
	}
	tests := map[string]struct {
		fault      string
		want       answer
		wantErr    string // a transport error instead of an answer
		wantExit   []int
		minElapsed time.Duration
	}{
		"429":                 {fault: "429", want: jsonFault(429, CodeUnavailable, "429")},
		"503":                 {fault: "503", want: jsonFault(503, CodeUnavailable, "503")},
		"502":                 {fault: "502", want: jsonFault(502, CodeBadGateway, "502")},
		"504":                 {fault: "504", want: jsonFault(504, CodeGatewayTimeout, "504")},
		"422 refusal":         {fault: Fault422, want: jsonFault(422, CodeRejected, Fault422)},
		"500 before commit":   {fault: Fault500BeforeCommit, want: answer{Status: 500, Fault: Fault500BeforeCommit}},
		"500 after commit":    {fault: Fault500AfterCommit, want: answer{Status: 500, Fault: Fault500AfterCommit}},
		"502 after commit":    {fault: Fault502AfterCommit, want: answer{Status: 502, ContentType: contentTypeHTML, Fault: Fault502AfterCommit}},
		"503 after commit":    {fault: Fault503AfterCommit, want: answer{Status: 503, ContentType: contentTypeText, Fault: Fault503AfterCommit}},
		"504 after commit":    {fault: Fault504AfterCommit, want: answer{Status: 504, ContentType: contentTypeJSON, Fault: Fault504AfterCommit}},
		"reset before commit": {fault: FaultResetBeforeCommit, wantErr: errReset},
		"reset after commit":  {fault: FaultResetAfterCommit, wantErr: errReset},
		"drop after commit":   {fault: FaultDropAfterCommit, wantErr: errEOF},
		"exit after commit":   {fault: FaultExitAfterCommit, wantErr: errEOF, wantExit: []int{ExitCodeCrash}},
		"delay before commit": {fault: "delay-before-commit=100ms", want: jsonFault(200, "", "delay-before-commit=100ms"),
			minElapsed: 100 * time.Millisecond},
		"hold before commit": {fault: "hold-before-commit=100ms", want: jsonFault(200, "", "hold-before-commit=100ms"),
			minElapsed: 100 * time.Millisecond},
		"delay after commit": {fault: "delay-after-commit=100ms", want: jsonFault(200, "", "delay-after-commit=100ms"),
			minElapsed: 100 * time.Millisecond},
		"lookup faults leave it alone": {fault: FaultLookup503, want: jsonFault(200, "", "")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.jsonl")
			exits := make(chan int, 4)
			h := newHarness(t, Options{LedgerPath: path, Exit: func(code int) { exits <- code }})
			start := time.Now()
			r, err := h.try(call{path: "/native/charges/validate", key: "k1", fault: tc.fault, body: charge})
			elapsed := time.Since(start)
			wantErr := tc.wantErr
			if wantErr == "" {
				wantErr = errNone
			}
			if diff := cmp.Diff(wantErr, errorKind(err)); diff != "" {
				t.Fatalf("transport error %v mismatch (-want, +got):\n%s", err, diff)
			}
			if err == nil {
				got := answer{Status: r.status, ContentType: r.header.Get("Content-Type"), Error: r.errorCode(),
					Fault: r.header.Get(HeaderFault)}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("answer mismatch (-want, +got):\n%s", diff)
				}
			}
			if elapsed < tc.minElapsed {
				t.Errorf("answered after %v, want at least %v", elapsed, tc.minElapsed)
			}
			if got := fileEffects(t, path); got != 0 {
				t.Errorf("ledger file holds %d effects, want none", got)
			}
			// Stopping waits for the handler, so its send is seen.
			h.stop()
			close(exits)
			var gotExits []int
			for code := range exits {
				gotExits = append(gotExits, code)
			}
			if diff := cmp.Diff(tc.wantExit, gotExits); diff != "" {
				t.Errorf("exit codes mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestValidateLies(t *testing.T) {
	tests := map[string]struct {
		fault string
		// creates are made before the validates, with the validates' key.
		creates []string
		want    []int
	}{
		// A dry run of a conditional create says what the create would:
		// a second object for the key is refused.
		"409-exists when the key has an object": {fault: Fault409Exists, creates: []string{pathLookupTickets},
			want: []int{409, 409}},
		"409-exists when it has none":              {fault: Fault409Exists, want: []int{200, 200}},
		"409-exists for an object of another mode": {fault: Fault409Exists, creates: []string{"/none/tickets"}, want: []int{200, 200}},
		// A credential rotated between a dry run and its repeat.
		"resend-401 strikes the second validate": {fault: FaultResend401, want: []int{200, 401}},
		"resend-404 strikes the second validate": {fault: FaultResend404, want: []int{200, 404}},
		// A create with the key is no validate: the first validate is a
		// first send.
		"resend-403 counts validates apart from creates": {fault: FaultResend403, creates: []string{pathLookupTickets},
			want: []int{200, 403}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			for _, path := range tc.creates {
				h.do(call{path: path, key: "K", body: charge})
			}
			got := make([]int, 0, len(tc.want))
			for range tc.want {
				got = append(got, h.do(call{path: "/lookup/tickets/validate", key: "K", fault: tc.fault, body: charge}).status)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("statuses mismatch (-want, +got):\n%s", diff)
			}
			if got := h.summary().Effects; got != len(tc.creates) {
				t.Errorf("effects = %d, want only the creates (%d)", got, len(tc.creates))
			}
		})
	}
}
