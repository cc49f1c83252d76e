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

package http

import (
	"context"
	"testing"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The benchmarks of the classification of an answer: the operation's
// outcome rules (CEL), then the default table. No request is sent: the
// answer is given as the client reads it. Each checks the result of its
// last call, so that a benchmark of the wrong path fails instead of
// measuring it.

func BenchmarkClassify(b *testing.B) {
	// The tool is never called: its address is only where it would be.
	c := newClient(b, toolSpec("http://127.0.0.1:1", v1.IdempotencyNative), nil)
	op := &c.spec.Operations[0]
	in := request{Parameters: map[string]any{"amount": int64(100), "currency": "eur"},
		Key: "shop/Tool:payments/charge.create/order-1"}
	cases := []struct {
		name    string
		status  int
		body    string
		outcome v1.Outcome
		relayed bool
	}{
		// The rule does not match; the default table decides.
		{"DefaultTable", 201, `{"id": "ch_1", "parameters": {"amount": 100, "currency": "eur"}}`, v1.OutcomeSucceeded, false},
		{"DefaultTableRelayed", 503, `{"error": "unavailable"}`, v1.OutcomeRetryable, true},
		// The rule matches.
		{"Rule", 422, `{"error": "idempotency_key_reused"}`, v1.OutcomePermanent, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			body, isJSON := decodeBody([]byte(tc.body))
			if !isJSON {
				b.Fatalf("the body of the answer is not JSON: %s", tc.body)
			}
			a := answer{Status: tc.status, Headers: map[string]string{"content-type": "application/json"},
				Body: []byte(tc.body), Decoded: body, JSON: true}
			view := a.cel(in)
			ctx := context.Background()
			var (
				outcome v1.Outcome
				relayed bool
			)
			for b.Loop() {
				outcome, relayed, _ = c.classify(ctx, op, tc.status, view, "")
			}
			if outcome != tc.outcome || relayed != tc.relayed {
				b.Fatalf("classify(%d): want %s (relayed %t), got %s (relayed %t)",
					tc.status, tc.outcome, tc.relayed, outcome, relayed)
			}
		})
	}
}

func BenchmarkDefaultOutcome(b *testing.B) {
	b.ReportAllocs()
	var got v1.Outcome
	for b.Loop() {
		got = DefaultOutcome(503, v1.IdempotencyLookup)
	}
	if got != v1.OutcomeUnknown {
		b.Fatalf("DefaultOutcome(503, Lookup): want %s, got %s", v1.OutcomeUnknown, got)
	}
}
