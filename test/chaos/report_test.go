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
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

func TestPercentile(t *testing.T) {
	hundred := make([]int64, 100)
	for i := range hundred {
		hundred[i] = int64(100 - i) // 100 … 1, unsorted on purpose
	}
	tests := []struct {
		name string
		xs   []int64
		p    float64
		want int64
	}{
		{"empty", nil, 50, 0},
		{"one sample", []int64{7}, 99, 7},
		{"p50 of 1..100", hundred, 50, 50},
		{"p95 of 1..100", hundred, 95, 95},
		{"p99 of 1..100", hundred, 99, 99},
		{"max", hundred, 100, 100},
		{"p50 of two rounds up to the first", []int64{10, 20}, 50, 10},
		{"p99 of three is the largest", []int64{3, 1, 2}, 99, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := slices.Clone(tt.xs)
			if got := Percentile(tt.xs, tt.p); got != tt.want {
				t.Errorf("Percentile(%v, %v) = %d, want %d", tt.xs, tt.p, got, tt.want)
			}
			if !slices.Equal(before, tt.xs) {
				t.Errorf("Percentile modified its input")
			}
		})
	}
}

func effect(id, mode, key, body string) sandbox.Effect {
	return sandbox.Effect{ID: id, Mode: mode, Collection: "charges", Action: sandbox.ActionCreate, Key: key,
		BodySHA256: body}
}

func TestDuplicateEffects(t *testing.T) {
	cancel := func(id, key string) sandbox.Effect {
		e := effect(id, "native", key, "x")
		e.Action = sandbox.ActionCancel
		return e
	}
	tests := []struct {
		name    string
		effects []sandbox.Effect
		want    int
	}{
		{"none", nil, 0},
		{"one per key", []sandbox.Effect{effect("a", "native", "k1", "x"), effect("b", "native", "k2", "x")}, 0},
		{"two for one key", []sandbox.Effect{effect("a", "native", "k1", "x"), effect("b", "native", "k1", "x")}, 1},
		{"three for one, two for another", []sandbox.Effect{
			effect("a", "lookup", "k1", "x"), effect("b", "lookup", "k1", "x"), effect("c", "lookup", "k1", "y"),
			effect("d", "none", "k2", "x"), effect("e", "none", "k2", "x")}, 3},
		{"same key in two modes is two scopes", []sandbox.Effect{effect("a", "native", "k1", "x"),
			effect("b", "lookup", "k1", "x")}, 0},
		{"keyless effects do not count", []sandbox.Effect{effect("a", "native", "k1", "x"),
			effect("b", "none", "", "x"), effect("c", "none", "", "x")}, 0},
		{"a create and a cancel with one key are two scopes", []sandbox.Effect{effect("a", "native", "k1", "x"),
			cancel("a", "k1")}, 0},
		{"two cancels for one key", []sandbox.Effect{effect("a", "native", "k1", "x"), cancel("a", "k1/undo"),
			cancel("a", "k1/undo")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DuplicateEffects(tt.effects); got != tt.want {
				t.Errorf("DuplicateEffects = %d, want %d", got, tt.want)
			}
		})
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) *metav1.Time {
	t := metav1.NewTime(t0.Add(d))
	return &t
}

// obj builds an object of scope key (mode native unless changed) with a
// body "A" unless changed.
func obj(name string, logical int, role Role, state v1.OperationState, extID string) Object {
	return Object{Name: name, Logical: logical, Role: role, Mode: v1.IdempotencyNative,
		ScopeKey: scopeOf(logical), BodySHA: "A", Found: true,
		Status: v1.SideEffectOperationStatus{State: state, ExternalObjectID: extID, Attempts: 1}}
}

func scopeOf(logical int) string {
	return sandbox.SummaryKey("native", "charges", sandbox.ActionCreate, keyOf(logical))
}

func keyOf(logical int) string { return "ns/Tool:payments/charge.create/k" + string(rune('0'+logical)) }

func withReason(o Object, reason string) Object {
	o.Status.Conditions = []metav1.Condition{{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: reason}}
	return o
}

func kinds(issues []Issue) []string {
	var k []string
	for _, i := range issues {
		k = append(k, i.Kind)
	}
	slices.Sort(k)
	return k
}

func dup(name string, logical int, of string, state v1.OperationState, extID string) Object {
	o := obj(name, logical, RoleDuplicate, state, extID)
	o.Status.DuplicateOf, o.Status.Attempts = of, 0
	return o
}

func conflict(name string, logical int) Object {
	o := withReason(obj(name, logical, RoleConflict, v1.StateFailedFinal, ""), v1.ReasonIdempotencyParameterMismatch)
	o.BodySHA, o.Status.Attempts = "B", 0
	return o
}

// analyse runs Analyse over objects, counting their logical operations.
func analyse(objects []Object, effects ...sandbox.Effect) Report {
	operations := map[int]bool{}
	for _, o := range objects {
		operations[o.Logical] = true
	}
	return Analyse(len(operations), objects, nil, effects)
}

func TestAnalyseViolations(t *testing.T) {
	silentConflict := dup("op-1-conflict", 1, "op-1", v1.StateCommitted, "ch_1")
	silentConflict.Role, silentConflict.BodySHA = RoleConflict, "B"
	tests := []struct {
		name       string
		objects    []Object
		effects    []sandbox.Effect
		violations []string
	}{{
		name: "none: one effect per key, a duplicate and a refused conflict",
		objects: []Object{
			obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1"),
			dup("op-1-dup", 1, "op-1", v1.StateCommitted, "ch_1"),
			conflict("op-1-conflict", 1),
		},
		effects: []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A")},
	}, {
		name:       "two effects for one key",
		objects:    []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1")},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A"), effect("ch_9", "native", keyOf(1), "A")},
		violations: []string{"I1"},
	}, {
		name:       "a conflicting request executed",
		objects:    []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1"), conflict("op-1-conflict", 1)},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "B")},
		violations: []string{"I4"},
	}, {
		name:       "a conflict accepted silently",
		objects:    []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1"), silentConflict},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A")},
		violations: []string{"I4", "I4"},
	}, {
		name: "a duplicate reports another effect",
		objects: []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1"),
			dup("op-1-dup", 1, "op-1", v1.StateCommitted, "ch_2")},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A")},
		violations: []string{"I5"},
	}, {
		name:       "committed as an id the tool does not have",
		objects:    []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_x")},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A")},
		violations: []string{"Record"},
	}, {
		name:       "committed without an effect",
		objects:    []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1")},
		violations: []string{"Record"},
	}, {
		name:       "failed although the tool performed it",
		objects:    []Object{withReason(obj("op-1", 1, RoleOriginal, v1.StateFailedFinal, ""), v1.ReasonRetriesExhausted)},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A")},
		violations: []string{"Record"},
	}, {
		name:       "an effect nobody asked for",
		objects:    []Object{obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1")},
		effects:    []sandbox.Effect{effect("ch_1", "native", keyOf(1), "A"), effect("ch_7", "native", keyOf(7), "A")},
		violations: []string{"I2"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := analyse(tt.objects, tt.effects...)
			if got := kinds(r.Violations); !slices.Equal(got, tt.violations) {
				t.Errorf("violations %v, want %v:\n%s", got, tt.violations, r.Table())
			}
			if r.Passed != (len(tt.violations) == 0) {
				t.Errorf("passed %v with violations %v", r.Passed, got(r))
			}
			if _, err := r.JSON(); err != nil {
				t.Errorf("JSON: %v", err)
			}
		})
	}
}

func got(r Report) []string { return kinds(r.Violations) }

func TestAnalyseConflicts(t *testing.T) {
	r := analyse([]Object{
		obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1"),
		conflict("op-1-conflict", 1),
		obj("op-2", 2, RoleOriginal, v1.StateCommitted, "ch_2"),
	}, effect("ch_1", "native", keyOf(1), "A"), effect("ch_2", "native", keyOf(2), "A"))
	if r.ConflictRejections != 1 || r.ConflictRate != 0.5 || r.ConflictsInverted != 0 || !r.Passed {
		t.Errorf("got rejections %d, rate %v, inverted %d, passed %v", r.ConflictRejections, r.ConflictRate,
			r.ConflictsInverted, r.Passed)
	}

	// The conflicting request bound the key first: the original is refused.
	won := obj("op-1-conflict", 1, RoleConflict, v1.StateCommitted, "ch_1")
	won.BodySHA = "B"
	r = analyse([]Object{
		withReason(obj("op-1", 1, RoleOriginal, v1.StateFailedFinal, ""), v1.ReasonIdempotencyParameterMismatch), won,
	}, effect("ch_1", "native", keyOf(1), "B"))
	if r.ConflictsInverted != 1 || r.ConflictRejections != 1 || !r.Passed {
		t.Errorf("got inverted %d, rejections %d, passed %v", r.ConflictsInverted, r.ConflictRejections, r.Passed)
	}
}

func TestAnalyseLost(t *testing.T) {
	none := func(o Object) Object { o.Mode = v1.IdempotencyNone; return o }
	missing := obj("op-3", 3, RoleOriginal, "", "")
	missing.Found = false
	r := analyse([]Object{
		obj("op-1", 1, RoleOriginal, v1.StateReconciling, ""),
		none(obj("op-2", 2, RoleOriginal, v1.StateNeedsReview, "")),
		none(dup("op-2-dup", 2, "op-2", v1.StatePlanned, "")),
		missing,
	})
	if got := kinds(r.Lost); !slices.Equal(got, []string{"Lost", "Lost"}) {
		t.Errorf("lost %v, want two", got)
	}
	if r.LostOperations != 2 || r.LostObjects != 2 || r.WaitingForReview != 1 || r.NeedsReviewNone != 1 {
		t.Errorf("got lost %d/%d, waiting %d, None in review %d", r.LostOperations, r.LostObjects,
			r.WaitingForReview, r.NeedsReviewNone)
	}
	if len(r.Findings) != 0 || len(r.Violations) != 0 {
		t.Errorf("a None tool in NeedsReview is neither a finding nor a violation: %v %v", r.Findings, r.Violations)
	}
	if r.Passed {
		t.Error("a run with lost operations passed")
	}
	if n, states := Unsettled(nil); n != 0 || len(states) != 0 {
		t.Errorf("Unsettled(nil) = %d, %v", n, states)
	}
}

func TestAnalyseUnknowns(t *testing.T) {
	unknown := func(o Object, recovery time.Duration) Object {
		o.Status.UnknownTime = at(0)
		if recovery > 0 {
			o.Status.CompletionTime = at(recovery)
		}
		return o
	}
	inNone := obj("op-4", 4, RoleOriginal, v1.StateNeedsReview, "")
	inNone.Mode = v1.IdempotencyNone
	r := analyse([]Object{
		unknown(obj("op-1", 1, RoleOriginal, v1.StateCommitted, "ch_1"), 2*time.Second),
		unknown(obj("op-2", 2, RoleOriginal, v1.StateCommitted, "ch_2"), 4*time.Second),
		unknown(obj("op-3", 3, RoleOriginal, v1.StateNeedsReview, ""), 0),
		unknown(inNone, 0),
	}, effect("ch_1", "native", keyOf(1), "A"), effect("ch_2", "native", keyOf(2), "A"),
		effect("ch_4", "native", keyOf(4), "A"))
	if r.Unknowns != 4 || r.Resolved != 2 || r.ReconciliationSuccessRate != 0.5 ||
		math.Abs(r.ReconciliationSuccessRateNativeLookup-2.0/3) > 1e-9 || r.ReconciliationSuccessRateNone != 0 {
		t.Errorf("got unknowns %d, resolved %d, rates %v %v %v", r.Unknowns, r.Resolved,
			r.ReconciliationSuccessRate, r.ReconciliationSuccessRateNativeLookup, r.ReconciliationSuccessRateNone)
	}
	if r.ManualRecoveryRate != 0.5 || r.NeedsReviewWithEffect != 1 {
		t.Errorf("got manual recovery rate %v, with effect %d", r.ManualRecoveryRate, r.NeedsReviewWithEffect)
	}
	if r.Recovered != 2 || r.RecoveryP50ms != 2000 || r.RecoveryP99ms != 4000 {
		t.Errorf("got %d recovered, p50 %d, p99 %d", r.Recovered, r.RecoveryP50ms, r.RecoveryP99ms)
	}
	if got := kinds(r.Findings); !slices.Equal(got, []string{"NeedsReview"}) {
		t.Errorf("a Native operation in NeedsReview is a finding; got %v", got)
	}
	if !r.Passed {
		t.Errorf("findings do not fail a run: %v", r.Problems())
	}
}

func TestAnalyseResendRefused(t *testing.T) {
	refused := func(o Object, kind v1.ObservationKind, attempt int32, status int32) Object {
		o.Status.Observations = []v1.Observation{
			{Kind: v1.ObservationCall, Attempt: 1, Outcome: "Unknown"},
			{Kind: kind, Attempt: attempt, HTTPStatus: status},
		}
		return o
	}
	r := analyse([]Object{
		refused(obj("op-1", 1, RoleOriginal, v1.StateNeedsReview, ""), v1.ObservationResend, 1, 401),
		refused(obj("op-2", 2, RoleOriginal, v1.StateNeedsReview, ""), v1.ObservationCall, 2, 404),
		refused(obj("op-3", 3, RoleOriginal, v1.StateNeedsReview, ""), v1.ObservationResend, 1, 500),
		refused(obj("op-4", 4, RoleOriginal, v1.StateNeedsReview, ""), v1.ObservationLookup, 1, 404),
		refused(obj("op-5", 5, RoleOriginal, v1.StateNeedsReview, ""), v1.ObservationResend, 1, 422),
		refused(obj("op-6", 6, RoleOriginal, v1.StateNeedsReview, ""), v1.ObservationResend, 1, 409),
	})
	if diff := cmp.Diff([]int{6, 3}, []int{r.NeedsReviewNativeLookup, r.NeedsReviewResendRefused}); diff != "" {
		t.Errorf("needs review, of which re-sends refused (-want, +got):\n%s", diff)
	}
	if !r.Passed {
		t.Errorf("findings do not fail a run: %v", r.Problems())
	}
}

func TestProblems(t *testing.T) {
	tests := map[string]struct {
		r    Report
		want int
	}{
		"clean":             {r: Report{}, want: 0},
		"masked duplicates": {r: Report{MaskedDuplicates: 2}, want: 1},
		"duplicates":        {r: Report{DuplicateEffects: 1}, want: 1},
		"lost":              {r: Report{LostOperations: 1, LostObjects: 1}, want: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.r.Problems(); len(got) != tc.want {
				t.Errorf("problems %q, want %d", got, tc.want)
			}
		})
	}
}

func TestScopeKey(t *testing.T) {
	op := logicalOp{tool: toolOf(v1.IdempotencyNative), key: "order-1"}
	tests := map[string]struct {
		reported string
		want     string
	}{
		"as the status reports it": {reported: "once:abc", want: "native/charges/create/once:abc"},
		"as the operator sends it": {want: "native/charges/create/t1/Tool:payments/charge.create/order-1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, op.scopeKey("t1", tc.reported)); diff != "" {
				t.Errorf("scope key mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestBodySHA(t *testing.T) {
	sum := sha256.Sum256([]byte(`{"amount":4200,"currency":"eur","order":"order-1"}`))
	want := hex.EncodeToString(sum[:])
	for _, body := range []string{
		`{"amount":4200,"currency":"eur","order":"order-1"}`,
		`{ "order": "order-1", "currency": "eur", "amount": 4200 }`,
		string(params("order-1", 4200)),
	} {
		if got := bodySHA([]byte(body)); got != want {
			t.Errorf("bodySHA(%s) = %s, want %s", body, got, want)
		}
	}
}

func TestParseWrites(t *testing.T) {
	line := func(code, group, resource, sub, verb string, n int) string {
		return fmt.Sprintf(`apiserver_request_total{code=%q,component="apiserver",dry_run="",group=%q,`+
			`resource=%q,scope="resource",subresource=%q,verb=%q,version="v1alpha1"} %d`+"\n",
			code, group, resource, sub, verb, n)
	}
	const once = "effects.once.dev"
	text := "# HELP apiserver_request_total Counter of apiserver requests.\n" +
		"# TYPE apiserver_request_total counter\n" +
		line("201", once, "sideeffectoperations", "", "POST", 10) +
		line("200", once, "sideeffectoperations", "status", "PUT", 25) +
		line("409", once, "sideeffectoperations", "status", "PUT", 5) +
		line("201", once, "idempotencyrecords", "", "POST", 8) +
		line("200", once, "sideeffectoperations", "", "LIST", 99) +
		line("201", "", "namespaces", "", "POST", 3) +
		"# HELP other_total Something else.\n# TYPE other_total counter\nother_total 1\n"
	w, err := ParseWrites(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := Writes{"sideeffectoperations POST 201": 10, "sideeffectoperations/status PUT 200": 25,
		"sideeffectoperations/status PUT 409": 5, "idempotencyrecords POST 201": 8}
	if len(w) != len(want) || w.Total() != 48 {
		t.Fatalf("got %v, want %v", w, want)
	}
	for k, v := range want {
		if w[k] != v {
			t.Errorf("%s = %d, want %d", k, w[k], v)
		}
	}
	if got := w.ByRequest()["sideeffectoperations/status PUT"]; got != 30 {
		t.Errorf("status PUTs = %d, want 30", got)
	}
	if got := w.Conflicts(); len(got) != 1 || got["sideeffectoperations/status PUT"] != 5 {
		t.Errorf("conflicts = %v", got)
	}
	d := w.Sub(Writes{"sideeffectoperations POST 201": 4})
	if d["sideeffectoperations POST 201"] != 6 || d.Total() != 44 {
		t.Errorf("Sub = %v", d)
	}
}

func TestFaultRules(t *testing.T) {
	const rate, lieShare = 0.3, 0.4
	rules := faultRules("ns", rate, lieShare)
	// fail and lie are the chances that a request of one tool, method and
	// action fails, and fails with a lie.
	type target struct{ mode, method, action string }
	fail, lie := map[target]float64{}, map[target]float64{}
	left := map[target]float64{}
	lies := map[string]bool{}
	for _, f := range []string{sandbox.Fault502AfterCommit, sandbox.Fault503AfterCommit, sandbox.Fault504AfterCommit,
		sandbox.Fault409Exists, sandbox.FaultResend401, sandbox.FaultResend403, sandbox.FaultResend404,
		sandbox.FaultLookupLag, sandbox.FaultLookupRoute404} {
		lies[f] = true
	}
	for _, r := range rules {
		if r.KeyPrefix != "ns/" {
			t.Errorf("rule %s matches other namespaces", r.Fault)
		}
		tg := target{r.Mode, r.Method, r.Action}
		if _, ok := left[tg]; !ok {
			left[tg] = 1
		}
		p := left[tg] * r.Probability
		left[tg] -= p
		fail[tg] += p
		name, param, _ := strings.Cut(r.Fault, "=")
		if lies[name] {
			lie[tg] += p
		}
		switch name {
		case sandbox.FaultHoldBeforeCommit:
			t.Errorf("hold-before-commit breaks the tool's contract; it must not be drawn")
		case sandbox.Fault409Exists:
			if r.Mode == "native" || r.Action != sandbox.ActionCreate {
				t.Errorf("409-exists drawn for the Native tool, or for a %s, which it never changes", r.Action)
			}
		case sandbox.FaultResend401, sandbox.FaultResend403, sandbox.FaultResend404:
			if r.Mode != "native" {
				t.Errorf("%s drawn for the %s tool", name, r.Mode)
			}
		case sandbox.FaultLookupLag:
			lag, err := time.ParseDuration(param)
			if err != nil || lag+faultDelay >= lookupDelay {
				t.Errorf("lookup-lag %q plus the longest processing %s is not below lookupDelay %s", param, faultDelay, lookupDelay)
			}
		}
	}
	want := []target{{"native", "POST", "create"}, {"lookup", "POST", "create"}, {"none", "POST", "create"},
		{"native", "POST", "cancel"}, {"lookup", "POST", "cancel"}, {"none", "POST", "cancel"}, {"lookup", "GET", ""}}
	if len(fail) != len(want) {
		t.Errorf("rules for %v, want %v", fail, want)
	}
	for _, tg := range want {
		if got := fail[tg]; math.Abs(got-rate) > 1e-9 {
			t.Errorf("%v requests fail with probability %v, want %v", tg, got, rate)
		}
		if got := lie[tg]; math.Abs(got-rate*lieShare) > 1e-9 {
			t.Errorf("%v requests are lied to with probability %v, want %v", tg, got, rate*lieShare)
		}
	}
	for _, r := range faultRules("ns", rate, 0) {
		if name, _, _ := strings.Cut(r.Fault, "="); lies[name] {
			t.Errorf("lie share 0 draws %s", r.Fault)
		}
	}
}

func TestMakePlan(t *testing.T) {
	c := Config{Operations: 2000, Seed: 7}.Defaults()
	a, b := makePlan(c), makePlan(c)
	ja, _ := json.Marshal(summarise(a))
	jb, _ := json.Marshal(summarise(b))
	if string(ja) != string(jb) {
		t.Fatal("the plan is not determined by the seed")
	}
	s := summarise(a)
	near := func(name string, got int, share float64) {
		if want := share * float64(c.Operations); math.Abs(float64(got)-want) > 0.2*want {
			t.Errorf("%s: %d, want about %.0f", name, got, want)
		}
	}
	near("native", s["native"], c.NativeShare)
	near("lookup", s["lookup"], c.LookupShare)
	near("none", s["none"], 1-c.NativeShare-c.LookupShare)
	near("duplicates", s["duplicate"], c.DuplicateShare)
	near("conflicts", s["conflict"], c.ConflictShare)
	near("re-applies", s["reapply"], c.ReapplyShare)
	for _, op := range a {
		if op.objects[0].role != RoleOriginal {
			t.Fatalf("operation %d does not start with its original", op.index)
		}
		for _, po := range op.objects[1:] {
			same := bodySHA(po.params) == bodySHA(op.objects[0].params)
			if same != (po.role == RoleDuplicate) {
				t.Errorf("%s (%s) has same parameters: %v", po.name, po.role, same)
			}
		}
	}
}

func summarise(plan []logicalOp) map[string]int {
	s := map[string]int{}
	for _, op := range plan {
		s[op.tool.sandboxMode()]++
		for _, po := range op.objects[1:] {
			s[string(po.role)]++
		}
		if op.reapply {
			s["reapply"]++
		}
	}
	return s
}

func TestDefaults(t *testing.T) {
	c := Config{}.Defaults()
	if c.Operations != 2000 || c.Seed != 1 || c.FaultRate != 0.3 || c.NoFaults || c.KillInterval != 5*time.Second ||
		c.FailpointShare != 0.4 || c.SettleTimeout != 10*time.Minute || c.LieShare != 0.3 || c.TermShare != 0.15 {
		t.Errorf("defaults: %+v", c)
	}
	if c.Sagas != 250 || c.SagaFailShare != 0.4 || c.CompensationFaultShare != 0.3 || c.CompensationRefusalShare != 0.1 {
		t.Errorf("saga defaults: %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
	if c := (Config{Operations: 300, Sagas: -1}).Defaults(); c.Sagas != 0 {
		t.Errorf("a negative number of sagas must mean none: %d", c.Sagas)
	}
	if err := (Config{CompensationFaultShare: 0.8, CompensationRefusalShare: 0.3}).Defaults().validate(); err == nil {
		t.Error("compensation shares above 1 validate")
	}
	c = Config{FaultRate: -1, FailpointShare: -1, DuplicateShare: -1}.Defaults()
	if !c.NoFaults || c.FaultRate != 0 || c.FailpointShare != 0 || c.DuplicateShare != 0 {
		t.Errorf("a negative share must mean none: %+v", c)
	}
	if err := (Config{NativeShare: 0.7, LookupShare: 0.7}).Defaults().validate(); err == nil {
		t.Error("shares above 1 validate")
	}
	if err := (Config{FailpointShare: 0.5, StallShare: 0.3, TermShare: 0.3}).Defaults().validate(); err == nil {
		t.Error("kill shares above 1 validate")
	}
}
