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

package protocol

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// TestPromiseOfDefaultedMethods: a method left empty promises what its
// default does, so that a Tool the API server stored with the defaults
// filled in (before they were Once's own) and the same Tool applied again
// without them pin the same promise; another method does not.
func TestPromiseOfDefaultedMethods(t *testing.T) {
	tool := func(method, lookupMethod string) *v1.ToolSpec {
		return &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
			Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/charges", Method: method,
				Lookup: &v1.LookupRequest{Path: "/charges?key={idempotencyKey}", Method: lookupMethod, Found: "true"}}}}
	}
	empty := PromiseOf(tool("", ""), "charge.create")
	if filled := PromiseOf(tool("POST", "GET"), "charge.create"); filled != empty {
		t.Errorf("POST and GET spelled out promise %s; left empty, %s", filled, empty)
	}
	if put := PromiseOf(tool("PUT", ""), "charge.create"); put == empty {
		t.Error("PUT promises what POST does")
	}
	if post := PromiseOf(tool("", "POST"), "charge.create"); post == empty {
		t.Error("a lookup by POST promises what one by GET does")
	}
}

// TestTimeout: an operation may shorten its tool's timeout, never lengthen
// it, and no call waits more than MaxTimeout, whatever was stored.
func TestTimeout(t *testing.T) {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	cases := map[string]struct {
		reason   string
		tool, op *metav1.Duration
		want     time.Duration
	}{
		"Default":           {reason: "neither sets one", want: v1.DefaultTimeout},
		"Tools":             {reason: "the tool's", tool: d(2 * time.Minute), want: 2 * time.Minute},
		"Shorter":           {reason: "an operation may shorten its tool's", tool: d(time.Minute), op: d(5 * time.Second), want: 5 * time.Second},
		"Longer":            {reason: "an operation may not lengthen its tool's", tool: d(time.Minute), op: d(87600 * time.Hour), want: time.Minute},
		"LongerThanDefault": {reason: "nor the default", op: d(10 * time.Minute), want: v1.DefaultTimeout},
		"ToolStoredLong":    {reason: "a tool stored before the bound is held to it", tool: d(87600 * time.Hour), want: v1.MaxTimeout},
		"BothStoredLong":    {reason: "so is an operation of it", tool: d(87600 * time.Hour), op: d(2 * time.Hour), want: v1.MaxTimeout},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Timeout(&v1.ToolSpec{Timeout: tc.tool}, &v1.SideEffectOperationSpec{Timeout: tc.op})
			if got != tc.want {
				t.Errorf("%s: got %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}

// TestLookupWaitsForTheClockMargin: the attempt's last send is stamped by
// one manager's clock and the lookup asked by another's, which may run
// ahead by up to the claim's grace; the lookup waits for both.
func TestLookupWaitsForTheClockMargin(t *testing.T) {
	p := NewPolicy(&v1.ToolSpec{Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyLookup,
		LookupDelay: &metav1.Duration{Duration: 20 * time.Second}}}, &v1.SideEffectOperationSpec{},
		Limits{MaxClaim: time.Minute, ClaimGrace: 10 * time.Second})
	if p.ClockMargin != 10*time.Second {
		t.Fatalf("ClockMargin = %s, want the claim's grace, 10s", p.ClockMargin)
	}
	sent := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	d := unknown(v1.SideEffectOperationStatus{IdempotencyMode: v1.IdempotencyLookup, Attempts: 1}, p,
		Env{Now: sent}, sent, "lost")
	if got, want := d.Status.NextAttemptTime.Time, sent.Add(30*time.Second); !got.Equal(want) {
		t.Errorf("NextAttemptTime = %s, want %s: the lookup delay and the clocks' margin", got, want)
	}
}
