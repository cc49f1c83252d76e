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
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStatusFaults(t *testing.T) {
	type answer struct {
		Status     int
		RetryAfter string
		Fault      string
		Error      string
		Body       string // only compared when the body must be empty
	}
	tests := map[string]struct {
		fault       string
		want        answer
		emptyBody   bool
		wantEffects int
		minElapsed  time.Duration
	}{
		"429 with Retry-After": {
			fault: "429=7", want: answer{Status: 429, RetryAfter: "7", Fault: "429=7", Error: CodeUnavailable},
		},
		"503 defaults Retry-After to 1": {
			fault: "503", want: answer{Status: 503, RetryAfter: "1", Fault: "503", Error: CodeUnavailable},
		},
		"502": {
			fault: "502", want: answer{Status: 502, Fault: "502", Error: CodeBadGateway},
		},
		"504": {
			fault: "504", want: answer{Status: 504, Fault: "504", Error: CodeGatewayTimeout},
		},
		"500 before commit": {
			fault: Fault500BeforeCommit, want: answer{Status: 500, Fault: Fault500BeforeCommit}, emptyBody: true,
		},
		"500 after commit keeps the effect": {
			fault: Fault500AfterCommit, want: answer{Status: 500, Fault: Fault500AfterCommit}, emptyBody: true,
			wantEffects: 1,
		},
		"delay after commit answers late": {
			fault: "delay-after-commit=150ms", want: answer{Status: 201, Fault: "delay-after-commit=150ms"},
			wantEffects: 1, minElapsed: 150 * time.Millisecond,
		},
		"delay before commit answers late": {
			fault: "delay-before-commit=150ms", want: answer{Status: 201, Fault: "delay-before-commit=150ms"},
			wantEffects: 1, minElapsed: 150 * time.Millisecond,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			start := time.Now()
			r := h.do(call{path: pathNativeCharges, key: "k1", fault: tc.fault, body: charge})
			elapsed := time.Since(start)
			got := answer{Status: r.status, RetryAfter: r.header.Get("Retry-After"), Fault: r.header.Get(HeaderFault), Error: r.errorCode()}
			if tc.emptyBody {
				got.Body = r.body
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer mismatch (-want, +got):\n%s", diff)
			}
			if elapsed < tc.minElapsed {
				t.Errorf("answered after %v, want at least %v", elapsed, tc.minElapsed)
			}
			if got := h.summary().Effects; got != tc.wantEffects {
				t.Errorf("effects = %d, want %d", got, tc.wantEffects)
			}
		})
	}
}

// Transport error kinds, as errorKind reports them.
const (
	errNone    = "none"
	errReset   = "reset"
	errEOF     = "eof"
	errTimeout = "timeout"
)

// errorKind classifies a transport error for the connection fault tests.
func errorKind(err error) string {
	netErr, isNetErr := errors.AsType[net.Error](err)
	switch {
	case err == nil:
		return errNone
	case errors.Is(err, syscall.ECONNRESET):
		return errReset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errEOF
	case isNetErr && netErr.Timeout():
		return errTimeout
	default:
		return "other: " + err.Error()
	}
}

func TestConnectionFaults(t *testing.T) {
	tests := map[string]struct {
		fault       string
		wantErr     string
		wantEffects int
		wantExit    []int
	}{
		"drop after commit":   {fault: FaultDropAfterCommit, wantErr: errEOF, wantEffects: 1},
		"reset after commit":  {fault: FaultResetAfterCommit, wantErr: errReset, wantEffects: 1},
		"reset before commit": {fault: FaultResetBeforeCommit, wantErr: errReset, wantEffects: 0},
		"exit after commit":   {fault: FaultExitAfterCommit, wantErr: errEOF, wantEffects: 1, wantExit: []int{3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.jsonl")
			exits := make(chan int, 4)
			h := newHarness(t, Options{LedgerPath: path, Exit: func(code int) { exits <- code }})
			_, err := h.try(call{path: pathNoneCharges, key: "k1", fault: tc.fault, body: charge})
			if diff := cmp.Diff(tc.wantErr, errorKind(err)); diff != "" {
				t.Errorf("client error %v mismatch (-want, +got):\n%s", err, diff)
			}
			// The ledger file is read directly: the effect must be durable
			// by the time the connection dies or the process would exit.
			if got := fileEffects(t, path); got != tc.wantEffects {
				t.Errorf("ledger file holds %d effects, want %d", got, tc.wantEffects)
			}
			if got := h.summary().Effects; got != tc.wantEffects {
				t.Errorf("summary counts %d effects, want %d", got, tc.wantEffects)
			}
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

func TestRetryAfterLostResponseReplays(t *testing.T) {
	tests := map[string]string{
		"drop":  FaultDropAfterCommit,
		"reset": FaultResetAfterCommit,
		"500":   Fault500AfterCommit,
		"exit":  FaultExitAfterCommit,
	}
	for name, fault := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{Exit: func(int) {}})
			_, _ = h.try(call{path: pathNativeCharges, key: "k1", fault: fault, body: charge})
			effects := h.effects()
			if len(effects) != 1 {
				t.Fatalf("effects after %s = %d, want 1", fault, len(effects))
			}
			r := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
			got := []any{r.status, r.replayed(), r.body}
			want := []any{201, true, string(effects[0].Response) + "\n"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("retry mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestDelayAfterCommitOutlastsClient(t *testing.T) {
	h := newHarness(t, Options{})
	impatient := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 100 * time.Millisecond}
	start := time.Now()
	_, err := h.tryWith(impatient, call{path: pathNoneCharges, fault: FaultDelayAfterCommit, body: charge})
	if diff := cmp.Diff(errTimeout, errorKind(err)); diff != "" {
		t.Errorf("client error %v mismatch (-want, +got):\n%s", err, diff)
	}
	if got := h.summary().Effects; got != 1 {
		t.Errorf("effects = %d, want 1", got)
	}
	// The server stops waiting once the client is gone, so shutting it down
	// does not take the default five seconds.
	h.stop()
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("request plus shutdown took %v, want the delay cut short", elapsed)
	}
}

func TestLookupFaults(t *testing.T) {
	type answer struct {
		Err        string
		Status     int
		RetryAfter string
		Fault      string
	}
	tests := map[string]struct {
		call       call
		want       answer
		minElapsed time.Duration
	}{
		"lookup-503 on a lookup": {
			call: call{method: http.MethodGet, path: pathLookupTicketsK, fault: FaultLookup503},
			want: answer{Err: errNone, Status: 503, RetryAfter: "1", Fault: FaultLookup503},
		},
		"lookup-timeout delays a lookup": {
			call:       call{method: http.MethodGet, path: pathLookupTicketsK, fault: "lookup-timeout=150ms"},
			want:       answer{Err: errNone, Status: 200, Fault: "lookup-timeout=150ms"},
			minElapsed: 150 * time.Millisecond,
		},
		"503 applies to a lookup": {
			call: call{method: http.MethodGet, path: pathLookupTicketsK, fault: "503=2"},
			want: answer{Err: errNone, Status: 503, RetryAfter: "2", Fault: "503=2"},
		},
		"drop after the lookup": {
			call: call{method: http.MethodGet, path: pathLookupTicketsK, fault: FaultDropAfterCommit},
			want: answer{Err: errEOF},
		},
		"lookup-503 does nothing to a create": {
			call: call{path: pathLookupTickets, key: "K2", fault: FaultLookup503},
			want: answer{Err: errNone, Status: 201},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, Options{})
			h.do(call{path: pathLookupTickets, key: "K"})
			start := time.Now()
			r, err := h.try(tc.call)
			elapsed := time.Since(start)
			got := answer{Err: errorKind(err), Status: r.status, RetryAfter: r.header.Get("Retry-After"), Fault: r.header.Get(HeaderFault)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("answer mismatch (-want, +got):\n%s", diff)
			}
			if elapsed < tc.minElapsed {
				t.Errorf("answered after %v, want at least %v", elapsed, tc.minElapsed)
			}
		})
	}
}

func TestParseFault(t *testing.T) {
	tests := map[string]struct {
		spec    string
		want    *fault
		wantErr bool
	}{
		"plain":                {spec: FaultDropAfterCommit, want: &fault{spec: FaultDropAfterCommit, kind: FaultDropAfterCommit, delay: 5 * time.Second, retryAfter: 1}},
		"default delay":        {spec: FaultDelayAfterCommit, want: &fault{spec: FaultDelayAfterCommit, kind: FaultDelayAfterCommit, delay: 5 * time.Second, retryAfter: 1}},
		"delay":                {spec: "delay-before-commit=250ms", want: &fault{spec: "delay-before-commit=250ms", kind: FaultDelayBeforeCommit, delay: 250 * time.Millisecond, retryAfter: 1}},
		"retry after":          {spec: "429=30", want: &fault{spec: "429=30", kind: Fault429, delay: 5 * time.Second, retryAfter: 30}},
		"spaces trimmed":       {spec: " 504 ", want: &fault{spec: "504", kind: Fault504, delay: 5 * time.Second, retryAfter: 1}},
		"lookup timeout":       {spec: "lookup-timeout=2s", want: &fault{spec: "lookup-timeout=2s", kind: FaultLookupTimeout, delay: 2 * time.Second, retryAfter: 1}},
		"lookup lag":           {spec: "lookup-lag=2s", want: &fault{spec: "lookup-lag=2s", kind: FaultLookupLag, delay: 2 * time.Second, retryAfter: 1}},
		"hold default":         {spec: FaultHoldBeforeCommit, want: &fault{spec: FaultHoldBeforeCommit, kind: FaultHoldBeforeCommit, delay: 5 * time.Second, retryAfter: 1}},
		"gateway after commit": {spec: Fault503AfterCommit, want: &fault{spec: Fault503AfterCommit, kind: Fault503AfterCommit, delay: 5 * time.Second, retryAfter: 1}},
		"resend":               {spec: FaultResend404, want: &fault{spec: FaultResend404, kind: FaultResend404, delay: 5 * time.Second, retryAfter: 1}},
		"exists takes nothing": {spec: "409-exists=1", wantErr: true},
		"resend takes nothing": {spec: "resend-401=1s", wantErr: true},
		"lag needs a duration": {spec: "lookup-lag=2", wantErr: true},
		"unknown":              {spec: "fire", wantErr: true},
		"empty":                {spec: "", wantErr: true},
		"case matters":         {spec: "Drop-After-Commit", wantErr: true},
		"bad duration":         {spec: "delay-after-commit=5", wantErr: true},
		"negative duration":    {spec: "lookup-timeout=-1s", wantErr: true},
		"bad seconds":          {spec: "503=1.5", wantErr: true},
		"negative seconds":     {spec: "503=-1", wantErr: true},
		"parameter not wanted": {spec: "reset-after-commit=1", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := parseFault(tc.spec)
			if tc.wantErr {
				if !errors.Is(err, ErrUnknownFault) {
					t.Errorf("parseFault(%q) err = %v, want ErrUnknownFault", tc.spec, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseFault(%q): %v", tc.spec, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(fault{})); diff != "" {
				t.Errorf("parseFault(%q) mismatch (-want, +got):\n%s", tc.spec, diff)
			}
		})
	}
}
