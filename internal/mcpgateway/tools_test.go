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

package mcpgateway

import (
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/pkg/once"
)

func TestToolNames(t *testing.T) {
	cases := map[string]struct {
		ref  v1.ToolReference
		op   string
		name string
		ok   bool
	}{
		"Tool":             {ref: v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"}, op: "charge.create", name: "payments__charge.create", ok: true},
		"ClusterTool":      {ref: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "github.com"}, op: "issue_create", name: "cluster_github.com__issue_create", ok: true},
		"ToolNamedCluster": {ref: v1.ToolReference{Kind: v1.ToolKindTool, Name: "cluster"}, op: "charge.create", name: "cluster__charge.create", ok: true},
		"OperationWith":    {ref: v1.ToolReference{Kind: v1.ToolKindTool, Name: "t"}, op: "a__b", name: "t__a__b", ok: true},
		"TooLong":          {ref: v1.ToolReference{Kind: v1.ToolKindTool, Name: strings.Repeat("a", 125)}, op: "create", name: strings.Repeat("a", 125) + "__create"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := ToolName(tc.ref, tc.op)
			if got != tc.name || ok != tc.ok {
				t.Fatalf("ToolName(%v, %q) = %q, %v; want %q, %v", tc.ref, tc.op, got, ok, tc.name, tc.ok)
			}
			ref, op, ok := ParseToolName(got)
			if diff := cmp.Diff(tc.ref, ref); diff != "" || op != tc.op || !ok {
				t.Errorf("ParseToolName(%q) = %v, %q, %v; -want ref, +got:\n%s", got, ref, op, ok, diff)
			}
		})
	}
	for _, bad := range []string{"payments", "__x", "payments__", "a_b__c", "cluster___x"} {
		if ref, op, ok := ParseToolName(bad); ok {
			t.Errorf("ParseToolName(%q) = %v, %q, true; want false", bad, ref, op)
		}
	}
}

func TestSplitArguments(t *testing.T) {
	cases := map[string]struct {
		args   string
		meta   map[string]any
		key    string
		params string
		err    string
	}{
		"InArguments":   {args: `{"amount":100,"idempotencyKey":"k1"}`, key: "k1", params: `{"amount":100}`},
		"InMeta":        {args: `{"amount":100}`, meta: map[string]any{KeyMeta: "k2"}, key: "k2", params: `{"amount":100}`},
		"Both":          {args: `{"idempotencyKey":"k3"}`, meta: map[string]any{KeyMeta: "k3"}, key: "k3", params: `{}`},
		"None":          {args: `{"amount":1.50}`, params: `{"amount":1.50}`},
		"NoArguments":   {params: `{}`},
		"Disagree":      {args: `{"idempotencyKey":"a"}`, meta: map[string]any{KeyMeta: "b"}, err: "different keys"},
		"NotAString":    {args: `{"idempotencyKey":7}`, err: "must be a string"},
		"MetaNotAStr":   {meta: map[string]any{KeyMeta: 7.0}, err: "must be a string"},
		"NotAnObject":   {args: `[1]`, err: "JSON object"},
		"KeyTooLong":    {args: `{"idempotencyKey":"` + strings.Repeat("k", MaxKeyLength+1) + `"}`, err: "at most 200"},
		"BigNumberKept": {args: `{"n":12345678901234567890}`, params: `{"n":12345678901234567890}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			key, params, err := SplitArguments(json.RawMessage(tc.args), tc.meta)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("SplitArguments: error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if key != tc.key || string(params) != tc.params {
				t.Errorf("SplitArguments = %q, %s; want %q, %s", key, params, tc.key, tc.params)
			}
		})
	}
}

func TestInputSchema(t *testing.T) {
	keyProp := map[string]any{"type": "string", "minLength": 1, "maxLength": MaxKeyLength,
		"description": "Names this request. Send the same key when you retry it; a new request needs a new key."}
	cases := map[string]struct {
		schema string
		want   map[string]any
	}{
		"NoSchema": {want: map[string]any{"type": "object", "properties": map[string]any{KeyArgument: keyProp},
			"required": []any{KeyArgument}}},
		"Schema": {schema: `{"type":"object","additionalProperties":false,"properties":{"amount":{"type":"integer"}},"required":["amount"]}`,
			want: map[string]any{"type": "object", "additionalProperties": false,
				"properties": map[string]any{"amount": map[string]any{"type": "integer"}, KeyArgument: keyProp},
				"required":   []any{"amount", KeyArgument}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			op := &v1.ToolOperation{Name: "x"}
			if tc.schema != "" {
				op.ParametersSchema = &runtime.RawExtension{Raw: []byte(tc.schema)}
			}
			got, err := InputSchema(op)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("InputSchema: -want, +got:\n%s", diff)
			}
		})
	}
}

func TestAnswerOf(t *testing.T) {
	cases := map[string]struct {
		res     once.Result
		err     error
		isError bool
		code    string
		text    string
	}{
		"Committed": {res: once.Result{Namespace: "ns", Name: "x", State: v1.StateCommitted, ExternalObjectID: "ch_1",
			Result: json.RawMessage(`{"id":"ch_1"}`), Found: true}, text: `"replayed":true`},
		"Mismatch": {err: &once.MismatchError{Name: "x"}, isError: true, code: codeMismatch, text: "Use a new key"},
		"Failed":   {err: &once.FailedError{Name: "x", Reason: "Rejected"}, isError: true, code: codeFailed, text: "failed for good"},
		"Decided": {err: &once.FailedError{Name: "x", Reason: "ResolvedFailed", Decided: true}, isError: true, code: codeFailed,
			text: "was not established"},
		"EffectReported": {err: &once.FailedError{Name: "x", Reason: "EffectReported", EffectReported: true}, isError: true,
			code: codeFailed, text: "later reported an effect of it"},
		"NeedsReview": {err: &once.NeedsReviewError{Name: "x"}, isError: true, code: codeNeedsReview, text: "a person must decide"},
		"Pending":     {err: &once.PendingError{Name: "x", State: "Started"}, isError: true, code: codePending, text: "same idempotency key"},
		"Other":       {err: errors.New("connection refused"), isError: true, code: codeAPI, text: "connection refused"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Answer(tc.res, tc.err)
			if got.IsError != tc.isError {
				t.Errorf("IsError = %v, want %v", got.IsError, tc.isError)
			}
			text := got.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, tc.text) || (tc.code != "" && !strings.HasPrefix(text, tc.code+": ")) {
				t.Errorf("text %q, want it to start with %q and contain %q", text, tc.code, tc.text)
			}
			var failed *once.FailedError
			if errors.As(tc.err, &failed) && (failed.Decided || failed.EffectReported) && strings.Contains(text, "no lasting effect") {
				t.Errorf("a failure that does not prove no effect is told as one (I11): %q", text)
			}
		})
	}
}

func TestDerivedKey(t *testing.T) {
	a, err := DerivedKey(json.RawMessage(`{"order": "4711", "amount": 42}`), 7)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		params json.RawMessage
		slot   int64
		same   bool
	}{
		"KeysInAnotherOrder": {params: json.RawMessage(`{"amount": 42, "order": "4711"}`), slot: 7, same: true},
		"OtherSpacing":       {params: json.RawMessage(`{ "amount":42,"order":"4711" }`), slot: 7, same: true},
		"AnotherArgument":    {params: json.RawMessage(`{"order": "4712", "amount": 42}`), slot: 7},
		"AnotherSlot":        {params: json.RawMessage(`{"order": "4711", "amount": 42}`), slot: 8},
		"AnArgumentMore":     {params: json.RawMessage(`{"order": "4711", "amount": 42, "note": ""}`), slot: 7},
		"ANumberAsAString":   {params: json.RawMessage(`{"order": "4711", "amount": "42"}`), slot: 7},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := DerivedKey(tc.params, tc.slot)
			if err != nil {
				t.Fatal(err)
			}
			if (a == b) != tc.same {
				t.Errorf("DerivedKey: %q and %q; want same=%v", a, b, tc.same)
			}
			if len(ScopedKey(strings.Repeat("u", 253), b)) > 253 {
				t.Errorf("the scoped key of %q is longer than an operation's key may be", b)
			}
		})
	}
	if _, err := DerivedKey(json.RawMessage(`{"order": `), 1); err == nil {
		t.Error("arguments that are not JSON got a key")
	}
}

func TestDerivedSlot(t *testing.T) {
	const w = 10 * time.Minute
	base := time.Unix(0, 0).Add(1000 * w) // the start of slot 1000
	at := func(d time.Duration) time.Time { return base.Add(d) }
	// ended is the use of a key whose operation ended at end; running, of
	// one whose operation has not ended (it runs, or waits in NeedsReview).
	ended := func(first, end time.Duration) once.KeyUse {
		return once.KeyUse{First: at(first), Ended: true, End: at(end)}
	}
	running := func(first time.Duration) once.KeyUse { return once.KeyUse{First: at(first)} }
	cases := map[string]struct {
		reason string
		now    time.Time
		// listed are the uses of the caller's operations with the call's
		// base, by slot; use, each slot's use as read back by name.
		listed, use map[int64]once.KeyUse
		want        int64
	}{
		"Fresh": {reason: "no key around: the current slot's", now: at(time.Minute), want: 1000},
		"RetryAcrossTheBoundary": {reason: "first used 8 minutes before the slot began, ended at once, retried 1 minute after: one window",
			now: at(time.Minute), use: map[int64]once.KeyUse{999: ended(-8*time.Minute, -8*time.Minute)}, want: 999},
		"RetryInTheSameSlot": {reason: "first used and retried in one slot",
			now: at(9 * time.Minute), use: map[int64]once.KeyUse{1000: ended(time.Minute, time.Minute)}, want: 1000},
		"WindowOver": {reason: "first used and ended 8 minutes before the slot began, called 3 minutes after: a new window",
			now: at(3 * time.Minute), use: map[int64]once.KeyUse{999: ended(-8*time.Minute, -8*time.Minute)}, want: 1000},
		"WithinTheMargin": {reason: "a window and a second after the end, as read back to the second: the same",
			now: at(2*time.Minute + time.Second), use: map[int64]once.KeyUse{999: ended(-8*time.Minute, -8*time.Minute)}, want: 999},
		"PastTheMargin": {reason: "a window and the margin after the end: a new window",
			now: at(2*time.Minute + derivedMargin), use: map[int64]once.KeyUse{999: ended(-8*time.Minute, -8*time.Minute)}, want: 1000},
		"AReplicaAhead": {reason: "the first call reached a replica whose clock is past the boundary; the retry, one behind it",
			now: at(-50 * time.Millisecond), use: map[int64]once.KeyUse{1000: running(100 * time.Millisecond)}, want: 1000},
		"TheOldestThatHolds": {reason: "a key still in its window, and a newer one made since by a call that missed it: the oldest",
			now: at(time.Minute), use: map[int64]once.KeyUse{999: ended(-5*time.Minute, -5*time.Minute), 1000: running(30 * time.Second)},
			want: 999},
		"OnlyAnOldOne": {reason: "the previous window's key, two slots back, ended, and its window is over",
			now: at(time.Minute), use: map[int64]once.KeyUse{998: ended(-15*time.Minute, -15*time.Minute)}, want: 1000},
		// The rule of issue 24's review: a key holds while its operation
		// has not ended, and for the window after the later of its first
		// use and its end.
		"NotEndedPastTheWindow": {reason: "first used 15 minutes ago and still running (found by its record, its operation gone): the same",
			now: at(time.Minute), use: map[int64]once.KeyUse{998: running(-14 * time.Minute)}, want: 998},
		"EndedAfterTheWindow": {reason: "first used 8 minutes before the slot began, decided by a person 5 minutes later, called 3 minutes after the slot began: the window runs from the end",
			now: at(3 * time.Minute), use: map[int64]once.KeyUse{999: ended(-8*time.Minute, -3*time.Minute)}, want: 999},
		"EndedAWindowAgo": {reason: "ended a window and the margin ago, however late: a new window",
			now: at(7*time.Minute + derivedMargin), use: map[int64]once.KeyUse{999: ended(-8*time.Minute, -3*time.Minute)}, want: 1000},
		"ListedInNeedsReviewForHours": {reason: "an operation made 3 hours ago that waits for a person, found by its label: its key",
			now: at(time.Minute), listed: map[int64]once.KeyUse{982: running(-3 * time.Hour)}, want: 982},
		"ListedDecidedLate": {reason: "made 3 hours ago, decided 4 minutes ago: its key, for the window after the decision",
			now: at(time.Minute), listed: map[int64]once.KeyUse{982: ended(-3*time.Hour, -3*time.Minute)}, want: 982},
		"ListedDecidedAWindowAgo": {reason: "made 3 hours ago, decided 11 minutes ago: over, and the slots around are free",
			now: at(time.Minute), listed: map[int64]once.KeyUse{982: ended(-3*time.Hour, -10*time.Minute)}, want: 1000},
		"ListedTheOldestThatHolds": {reason: "an old one over, then two that hold: the older of the two",
			now: at(time.Minute), listed: map[int64]once.KeyUse{900: ended(-100*w, -90*w), 950: running(-50 * w),
				990: running(-10 * w)}, want: 950},
		"ListedBeforeTheSlots": {reason: "a listed key that holds is taken before the slots around are read",
			now: at(time.Minute), listed: map[int64]once.KeyUse{990: running(-10 * w)},
			use: map[int64]once.KeyUse{998: running(-15 * time.Minute)}, want: 990},
		"ListedOverThenARecord": {reason: "a listed key that is over, and a key of the slots around whose operation went and that holds",
			now: at(time.Minute), listed: map[int64]once.KeyUse{990: ended(-10*w, -10*w)},
			use: map[int64]once.KeyUse{999: ended(-5*time.Minute, -5*time.Minute)}, want: 999},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := derivedSlot(tc.now, w, tc.listed, func(slot int64) (once.KeyUse, bool, error) {
				if _, ok := tc.listed[slot]; ok {
					t.Errorf("slot %d was listed, and read again", slot)
				}
				u, ok := tc.use[slot]
				return u, ok, nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("%s: slot %d, want %d", tc.reason, got, tc.want)
			}
		})
	}
	if _, err := derivedSlot(base, w, nil, func(int64) (once.KeyUse, bool, error) {
		return once.KeyUse{}, false, errors.New("forbidden")
	}); err == nil {
		t.Error("a use that cannot be read must refuse the call: the key may be in use")
	}
}

// TestDerivedBase: the label is a label value, and tells apart what a
// derived key's base does.
func TestDerivedBase(t *testing.T) {
	ref := v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"}
	params := json.RawMessage(`{"order": "4711", "amount": 42}`)
	a, err := derivedBase("alice", ref, "charge.create", params)
	if err != nil {
		t.Fatal(err)
	}
	if len(a) > 63 || !regexp.MustCompile(`^[0-9a-f]+$`).MatchString(a) {
		t.Errorf("derivedBase = %q: not a label value", a)
	}
	cases := map[string]struct {
		user, operation string
		ref             v1.ToolReference
		params          json.RawMessage
		same            bool
	}{
		"KeysInAnotherOrder": {user: "alice", ref: ref, operation: "charge.create",
			params: json.RawMessage(`{"amount": 42, "order": "4711"}`), same: true},
		"AnotherCaller":    {user: "bob", ref: ref, operation: "charge.create", params: params},
		"AnotherOperation": {user: "alice", ref: ref, operation: "charge.refund", params: params},
		"AnotherTool":      {user: "alice", ref: v1.ToolReference{Kind: v1.ToolKindTool, Name: "billing"}, operation: "charge.create", params: params},
		"AClusterTool":     {user: "alice", ref: v1.ToolReference{Kind: v1.ToolKindClusterTool, Name: "payments"}, operation: "charge.create", params: params},
		"AnotherArgument":  {user: "alice", ref: ref, operation: "charge.create", params: json.RawMessage(`{"order": "4712", "amount": 42}`)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := derivedBase(tc.user, tc.ref, tc.operation, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			if (a == b) != tc.same {
				t.Errorf("derivedBase: %q and %q; want same=%v", a, b, tc.same)
			}
		})
	}
}

// TestDerivedCallMark: an operation made with a derived key carries its
// base and is kept at least the window and the margin after it ends.
func TestDerivedCallMark(t *testing.T) {
	// A window of an hour: with its margin, longer than the default of an
	// hour.
	d := &derivedCall{base: "ab", window: time.Hour}
	cases := map[string]struct {
		ttl, want *int32
	}{
		"Shorter":     {ttl: new(int32(60)), want: new(int32(3602))},
		"Longer":      {ttl: new(int32(7200)), want: new(int32(7200))},
		"KeptForEver": {ttl: new(int32(-1)), want: new(int32(-1))},
		"TheDefault":  {want: new(int32(3602))},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := once.Request{Labels: map[string]string{"once.dev/via": "mcp"}, TTLSecondsAfterFinished: tc.ttl}
			d.mark(&r)
			if diff := cmp.Diff(map[string]string{"once.dev/via": "mcp", derivedLabel: "ab"}, r.Labels); diff != "" {
				t.Errorf("labels: -want +got:\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, r.TTLSecondsAfterFinished); diff != "" {
				t.Errorf("ttlSecondsAfterFinished: -want +got:\n%s", diff)
			}
		})
	}
	var none *derivedCall
	r := once.Request{}
	none.mark(&r)
	if r.Labels != nil {
		t.Errorf("a caller's key marked its operation: %v", r.Labels)
	}
}

// TestDecisionState: the state an input request carries reads back as
// written, and anything else is refused.
func TestDecisionState(t *testing.T) {
	st := decisionState{Kind: "operation", Name: "payments-charge-create-1", UID: "u-1", RequestHash: "sha256:ab"}
	got, err := decodeState(st.encode())
	if err != nil || got != st {
		t.Errorf("decodeState(encode(%+v)) = %+v, %v", st, got, err)
	}
	for _, raw := range []string{"", "not base64!", "eyJ"} {
		if _, err := decodeState(raw); err == nil {
			t.Errorf("decodeState(%q) took a state this gateway did not write", raw)
		}
	}
}
