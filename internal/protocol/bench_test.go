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
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The benchmarks of the hashing and of the decision core, the pure code
// every reconcile runs. Each checks the result of its last call, so that a
// benchmark of the wrong path fails instead of measuring it.

var (
	benchTool = v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"}
	// smallParameters is a parameters document as a person writes it;
	// smallCanonical is its canonical form.
	smallParameters = []byte(`{"amount": 100, "currency": "eur", "meta": {"order": "o-1", "tags": ["a", "b"]}}`)
	smallCanonical  = `{"amount":100,"currency":"eur","meta":{"order":"o-1","tags":["a","b"]}}`
)

// largeParameters is a parameters document of about 16 KiB: keys in no
// order, whitespace, numbers in several forms, escaped strings.
func largeParameters(tb testing.TB) []byte {
	tb.Helper()
	var b strings.Builder
	b.WriteString(`{"currency": "eur", "amount": 1e5, "lines": [`)
	for i := 0; b.Len() < 16<<10-100; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "SKU-%05d", "qty": %d, "price": %d.50, "note": "caf\u00e9 \"%d\"", `+
			`"tags": ["b", "a"], "meta": {"z": true, "a": null}}`, i, i%7+1, i*3, i)
	}
	b.WriteString(`], "customer": {"name": "Zoë", "email": "zoe@example.com"}}`)
	doc := []byte(b.String())
	if n := len(doc); n < 15<<10 || n > 17<<10 {
		tb.Fatalf("the large document has %d bytes, want about 16 KiB", n)
	}
	return doc
}

func BenchmarkCanonical(b *testing.B) {
	large := largeParameters(b)
	largeCanonical, err := Canonical(large)
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		doc  []byte
		want []byte
	}{
		{"Small", smallParameters, []byte(smallCanonical)},
		{"16KiB", large, largeCanonical},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.doc)))
			var (
				out []byte
				err error
			)
			for b.Loop() {
				out, err = Canonical(tc.doc)
			}
			// The canonical form is a fixed point: canonicalising it again
			// changes nothing.
			if err != nil || !bytes.Equal(out, tc.want) {
				b.Fatalf("Canonical: got %.80q, %v; want %.80q", out, err, tc.want)
			}
			if again, _ := Canonical(out); !bytes.Equal(again, out) {
				b.Fatalf("Canonical is not a fixed point on %.80q", out)
			}
		})
	}
}

func BenchmarkRequestHash(b *testing.B) {
	b.ReportAllocs()
	var (
		hash      string
		canonical []byte
		err       error
	)
	for b.Loop() {
		hash, canonical, err = RequestHash(benchTool, "charge.create", smallParameters)
	}
	if err != nil || len(hash) != len("sha256:")+64 || !strings.HasPrefix(hash, "sha256:") ||
		string(canonical) != smallCanonical {
		b.Fatalf("RequestHash: got %q, %s, %v", hash, canonical, err)
	}
}

func BenchmarkDigest(b *testing.B) {
	cases := []struct {
		name string
		doc  []byte
	}{
		{"Small", []byte(smallCanonical)},
		{"16KiB", largeParameters(b)},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.doc)))
			var got string
			for b.Loop() {
				got = Digest(tc.doc)
			}
			if want := fmt.Sprintf("sha256:%x", sha256.Sum256(tc.doc)); got != want {
				b.Fatalf("Digest: want %s, got %s", want, got)
			}
		})
	}
}

func benchScope(key string) Scope {
	return Scope{Namespace: "shop", Tool: benchTool, Operation: "charge.create", Key: key}
}

func BenchmarkScopeRecordName(b *testing.B) {
	b.ReportAllocs()
	s := benchScope("order-1/charge")
	var got string
	for b.Loop() {
		got = s.RecordName()
	}
	if len(got) != len("scope-")+64 || !strings.HasPrefix(got, "scope-") {
		b.Fatalf("RecordName: got %q", got)
	}
}

func BenchmarkScopeToolKey(b *testing.B) {
	cases := []struct {
		name, key string
		want      func(string) bool
	}{
		{"Short", "order-1/charge", func(k string) bool { return k == "shop/Tool:payments/charge.create/order-1/charge" }},
		{"Digest", strings.Repeat("k", 300), func(k string) bool {
			return strings.HasPrefix(k, "once:") && len(k) == len("once:")+64
		}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			s := benchScope(tc.key)
			var got string
			for b.Loop() {
				got = s.ToolKey()
			}
			if !tc.want(got) {
				b.Fatalf("ToolKey: got %q", got)
			}
		})
	}
}

// benchStatus is an operation's status as the protocol leaves it under
// mode: a request hash and a key, and the conditions and evidence of each
// step.
func benchStatus(b *testing.B, mode v1.IdempotencyMode) (planned, started, unknown v1.SideEffectOperationStatus) {
	b.Helper()
	hash, _, err := RequestHash(benchTool, "charge.create", smallParameters)
	if err != nil {
		b.Fatal(err)
	}
	planned = v1.SideEffectOperationStatus{State: v1.StatePlanned, RequestHash: hash,
		IdempotencyKey: "order-1/charge", ObservedGeneration: 1}
	d := Next(planned, nil, policy(mode), env())
	if d.Action != ActionExecute {
		b.Fatalf("a planned operation: want %s, got %s", ActionExecute, d.Action)
	}
	started = d.Status
	d = AfterCall(started, policy(mode), env(), CallResult{Outcome: v1.OutcomeUnknown,
		HTTPStatus: 500, Request: "POST /charges", Message: "500 Internal Server Error"})
	if d.Status.State != v1.StateUnknown {
		b.Fatalf("after a 500: want %s, got %s", v1.StateUnknown, d.Status.State)
	}
	return planned, started, d.Status
}

func BenchmarkNext(b *testing.B) {
	planned, started, unknown := benchStatus(b, v1.IdempotencyNative)
	_, _, unknownLookup := benchStatus(b, v1.IdempotencyLookup)
	other := env()
	other.Holder = "worker-b"
	// A lookup proves absence only after the lookup delay.
	later := env()
	later.Now = now.Add(time.Minute)
	cases := []struct {
		name   string
		st     v1.SideEffectOperationStatus
		mode   v1.IdempotencyMode
		env    Env
		action Action
		state  v1.OperationState
	}{
		{"PlannedExecutes", planned, v1.IdempotencyNative, env(), ActionExecute, v1.StateStarted},
		{"StartedLiveClaimWaits", started, v1.IdempotencyNative, other, ActionWait, ""},
		{"UnknownNativeResends", unknown, v1.IdempotencyNative, env(), ActionResend, v1.StateReconciling},
		{"UnknownLookupLooksUp", unknownLookup, v1.IdempotencyLookup, later, ActionLookup, v1.StateReconciling},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			p := policy(tc.mode)
			var d Decision
			for b.Loop() {
				d = Next(tc.st, nil, p, tc.env)
			}
			if d.Action != tc.action || d.Status.State != tc.state {
				b.Fatalf("Next: want %s to %q, got %s to %q", tc.action, tc.state, d.Action, d.Status.State)
			}
		})
	}
}

func BenchmarkAfterCall(b *testing.B) {
	b.ReportAllocs()
	_, started, _ := benchStatus(b, v1.IdempotencyNative)
	result := []byte(`{"amount":100,"id":"ch_1"}`)
	r := CallResult{Outcome: v1.OutcomeSucceeded, HTTPStatus: 201, ExternalObjectID: "ch_1",
		ExternalRequestID: "req_1", Result: &runtime.RawExtension{Raw: result}, ResultDigest: Digest(result),
		Request: "POST /charges", Message: "201 Created"}
	p := policy(v1.IdempotencyNative)
	var d Decision
	for b.Loop() {
		d = AfterCall(started, p, env(), r)
	}
	if d.Action != ActionWrite || d.Status.State != v1.StateCommitted || d.Status.ExternalObjectID != "ch_1" {
		b.Fatalf("AfterCall: want %s to %s, got %s to %s", ActionWrite, v1.StateCommitted, d.Action, d.Status.State)
	}
}

func BenchmarkArbitrate(b *testing.B) {
	planned, _, _ := benchStatus(b, v1.IdempotencyNative)
	self := v1.RecordOwner{Name: "b", UID: "uid-b"}
	prev := v1.RecordOwner{Name: "a", UID: "uid-a"}
	outcome := &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_1", ExpiryTime: *at(time.Hour)}
	rec := func(owner v1.RecordOwner, o *v1.RecordOutcome) v1.IdempotencyRecordSpec {
		return v1.IdempotencyRecordSpec{Owner: owner, RequestHash: planned.RequestHash, Outcome: o,
			Retention: metav1.Duration{Duration: time.Hour}}
	}
	// A duplicate that already recorded that it waits: the steady state
	// while its original runs, which compares the statuses in full.
	waiting := WaitForOriginal(planned, env(), prev.Name, false)
	cases := []struct {
		name   string
		st     v1.SideEffectOperationStatus
		rec    v1.IdempotencyRecordSpec
		owner  Owner
		action ScopeAction
	}{
		{"OwnerProceeds", planned, rec(self, nil), Owner{}, ScopeProceed},
		{"DuplicateAdopts", planned, rec(prev, outcome), Owner{}, ScopeWrite},
		{"DuplicateWaits", waiting, rec(prev, nil), Owner{Alive: true}, ScopeWait},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			p := policy(v1.IdempotencyNative)
			var d ScopeDecision
			for b.Loop() {
				d = Arbitrate(tc.st, self, tc.rec, false, tc.owner, p, env())
			}
			if d.Action != tc.action {
				b.Fatalf("Arbitrate: want %s, got %s", tc.action, d.Action)
			}
		})
	}
}
