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
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

// Role is what an object stands for within its logical operation.
type Role string

const (
	// RoleOriginal is the operation as first requested.
	RoleOriginal Role = "original"
	// RoleDuplicate is a duplicate delivery: another object with the same
	// key and the same parameters. It is the same logical operation.
	RoleDuplicate Role = "duplicate"
	// RoleConflict is another object with the same key and different
	// parameters: one of the two requests must be refused.
	RoleConflict Role = "conflict"
)

// Object is one SideEffectOperation as the analysis sees it: what the
// driver asked for, and the status the operator left on it.
type Object struct {
	// Name of the object.
	Name string
	// Logical numbers the logical operation (the scope) the object belongs
	// to; -1 for the operations of sagas, which Saga names instead.
	Logical int
	// Saga is the saga the object is an operation of (a step or a
	// compensation), "" for a plain operation.
	Saga string
	Role Role
	Mode v1.IdempotencyMode
	// ScopeKey is the key under which the sandbox's ledger counts the
	// effects of the object's scope (sandbox.SummaryKey).
	ScopeKey string
	// BodySHA is the hex SHA-256 of the parameters as the sandbox
	// canonicalises a request body: what the ledger's BodySHA256 holds for
	// an effect of this request.
	BodySHA string
	// Found is false when the object was not there at the end.
	Found  bool
	Status v1.SideEffectOperationStatus
}

// Issue is a falsified invariant (a violation) or something a person
// should look at (a finding).
type Issue struct {
	// Kind names the invariant (I1, I2, I4, I5, I8, or Record for a
	// record that does not match the tool, SagaRecord for a saga's,
	// SagaOrder for compensations out of order), Lost, or the finding
	// (NeedsReview, ManagerExit, Reapply).
	Kind string `json:"kind"`
	// Scope is the ledger key of the scope concerned, if any.
	Scope string `json:"scope,omitempty"`
	// Saga is the saga concerned, if any.
	Saga   string `json:"saga,omitempty"`
	Detail string `json:"detail"`
	// Objects are the objects concerned, with their final status.
	Objects map[string]v1.SideEffectOperationStatus `json:"objects,omitempty"`
	// Effects are the ledger's effects for the scope.
	Effects []sandbox.Effect `json:"effects,omitempty"`
}

func (i Issue) String() string {
	names := slices.Sorted(maps.Keys(i.Objects))
	s := fmt.Sprintf("%s: %s", i.Kind, i.Detail)
	if i.Saga != "" {
		s = fmt.Sprintf("%s: saga %s: %s", i.Kind, i.Saga, i.Detail)
	}
	if len(names) > 0 {
		s += " [" + strings.Join(names, ", ") + "]"
	}
	return s
}

// Report holds what one chaos run measured and saw:
//   - the figures that docs/design.md lists under Figures to report;
//   - the violations of the invariants of docs/design.md;
//   - what it did to the system.
type Report struct {
	Seed int64 `json:"seed"`
	// Operations counts logical operations; Objects every object,
	// duplicates and conflicts included.
	Operations       int            `json:"operations"`
	Objects          int            `json:"objects"`
	OperationsByMode map[string]int `json:"operations_by_mode"`
	// DuplicatesInjected, ConflictsInjected and Reapplies count what the
	// driver mixed in.
	DuplicatesInjected int `json:"duplicates_injected"`
	ConflictsInjected  int `json:"conflicts_injected"`
	Reapplies          int `json:"reapplies"`
	// States counts objects by final state; WaitingForReview is shown as
	// its own state.
	States map[string]int `json:"states"`

	// Effects counts create effects in the tool's ledger, Cancels cancel
	// effects (the compensations of sagas).
	Effects int `json:"effects"`
	Cancels int `json:"cancels"`
	// DuplicateEffects is the sum over scopes of (effects − 1), counted at
	// the tool, for creates and cancels alike (a cancel has a key of its
	// own); DSR is DuplicateEffects / (Operations + SagaOperations).
	DuplicateEffects int     `json:"duplicate_effects"`
	DSR              float64 `json:"dsr"`

	// Unknowns counts objects whose status.unknownTime is set; Resolved
	// those of them that ended Committed or FailedFinal without a person.
	Unknowns                  int     `json:"unknowns"`
	Resolved                  int     `json:"unknowns_resolved_automatically"`
	ReconciliationSuccessRate float64 `json:"reconciliation_success_rate"`
	// The same split by the tool's mode: Native and Lookup tools must never
	// need a person; a None tool's unknowns legitimately end in
	// NeedsReview.
	UnknownsNativeLookup                  int     `json:"unknowns_native_lookup"`
	ReconciliationSuccessRateNativeLookup float64 `json:"reconciliation_success_rate_native_lookup"`
	UnknownsNone                          int     `json:"unknowns_none"`
	ReconciliationSuccessRateNone         float64 `json:"reconciliation_success_rate_none"`

	// ConflictRejections counts objects that ended FailedFinal with reason
	// IdempotencyParameterMismatch; ConflictRate is that / Operations.
	// ConflictsInverted counts the scopes where the conflicting request
	// bound the key first, so that the original was the one refused.
	ConflictRejections int     `json:"conflict_rejections"`
	ConflictRate       float64 `json:"conflict_rate"`
	ConflictsInverted  int     `json:"conflicts_inverted"`

	// NeedsReview counts objects in NeedsReview; ManualRecoveryRate is
	// that / Unknowns. NeedsReviewWithEffect counts those whose effect the
	// ledger shows (the rest never took effect). WaitingForReview counts
	// duplicates that wait for an original in NeedsReview.
	NeedsReview             int `json:"needs_review"`
	NeedsReviewNativeLookup int `json:"needs_review_native_lookup"`
	NeedsReviewNone         int `json:"needs_review_none"`
	NeedsReviewWithEffect   int `json:"needs_review_with_effect"`
	// NeedsReviewResendRefused counts the Native and Lookup objects in
	// NeedsReview after a re-send was answered 401, 403 or 404 (the
	// resend-4xx faults), or 422 (a saga step's drawn rejection, which the
	// tool answers afresh to a re-send when the first attempt never
	// reached it): a person is needed by design there, as docs/design.md, Unknown outcomes
	// says of any 4xx answering a re-send that is not a replay.
	NeedsReviewResendRefused int     `json:"needs_review_resend_refused"`
	ManualRecoveryRate       float64 `json:"manual_recovery_rate"`
	WaitingForReview         int     `json:"waiting_for_review"`

	// Recovery time from status.unknownTime to status.completionTime of
	// the unknowns that ended, in milliseconds. Both times are kept to the
	// second by the API, so each sample is exact to about a second.
	Recovered     int   `json:"recovered"`
	RecoveryP50ms int64 `json:"recovery_p50_ms"`
	RecoveryP95ms int64 `json:"recovery_p95_ms"`
	RecoveryP99ms int64 `json:"recovery_p99_ms"`
	RecoveryMaxms int64 `json:"recovery_max_ms"`

	// Writes to SideEffectOperations and IdempotencyRecords, from the API
	// server's apiserver_request_total (verbs POST, PUT, PATCH, DELETE,
	// APPLY, any subresource): WritesTotal during the run, WritesDriver
	// those the chaos driver sent itself (creates and re-applies), and
	// WritesPerOperation = (WritesTotal − WritesDriver) / (Operations +
	// SagaOperations). Writes to Sagas are counted apart, in WritesSagas,
	// WritesSagasDriver and WritesPerSaga = operator writes / Sagas, and
	// are in the breakdowns by request.
	WritesTotal        int64            `json:"writes_total"`
	WritesDriver       int64            `json:"writes_driver"`
	WritesOperator     int64            `json:"writes_operator"`
	WritesPerOperation float64          `json:"writes_per_operation"`
	WritesPerObject    float64          `json:"writes_per_object"`
	WritesByRequest    map[string]int64 `json:"writes_by_request"`
	// WritesByCode splits WritesByRequest by response code, keyed like
	// "sideeffectoperations/status PUT 409".
	WritesByCode map[string]int64 `json:"writes_by_request_code"`
	// WritesConflicts counts the writes the API server refused with 409
	// Conflict (a lost race: a stale resourceVersion or an existing name),
	// in total and by request.
	WritesConflicts          int64            `json:"writes_conflicts"`
	WritesConflictsByRequest map[string]int64 `json:"writes_conflicts_by_request"`
	WritesSagas              int64            `json:"writes_sagas"`
	WritesSagasDriver        int64            `json:"writes_sagas_driver"`
	WritesPerSaga            float64          `json:"writes_per_saga"`

	SagaFigures

	// LostOperations counts logical operations with an object that was
	// neither terminal nor in NeedsReview (nor waiting for an original in
	// NeedsReview) when the settle bound ran out; LostObjects the objects.
	LostOperations int `json:"lost_operations"`
	LostObjects    int `json:"lost_objects"`

	// What the chaos did: manager processes started, SIGKILLs sent, kills
	// by an armed failpoint (per failpoint), exits nobody caused, and the
	// sandbox's fired faults (per fault).
	ManagerStarts   int            `json:"manager_starts"`
	KillsRandom     int            `json:"manager_kills_random"`
	KillsFailpoint  int            `json:"manager_kills_failpoint"`
	FailpointKills  map[string]int `json:"failpoint_kills"`
	FailpointMisses int            `json:"failpoints_not_reached"`
	// Stalls counts managers whose calls were stalled after their claims
	// while a successor ran (Config.StallShare).
	Stalls int `json:"manager_stalls"`
	// GracefulStops counts managers stopped with SIGTERM, as a rolling
	// update does, and left to drain and exit on their own
	// (Config.TermShare); GracefulStopTimeouts those that had not exited
	// after termGrace and were killed; GracefulStopLongestms the longest
	// time from SIGTERM to exit.
	GracefulStops         int   `json:"manager_stops_graceful"`
	GracefulStopTimeouts  int   `json:"manager_stops_graceful_timeouts"`
	GracefulStopLongestms int64 `json:"manager_stop_longest_ms"`
	UnexpectedExits       int   `json:"manager_unexpected_exits"`
	// FaultsFired counts, per fault name, the requests the sandbox's random
	// rules changed; FaultsFiredCancels those of them that were cancels
	// (compensations). The rules of one compensation's own are counted in
	// SagaFigures.
	FaultsFired        map[string]int `json:"faults_fired"`
	FaultsFiredCancels map[string]int `json:"faults_fired_cancels"`
	// MaskedDuplicates counts the creates the sandbox refused with
	// 409-exists: the operator sent a second create for a key whose effect
	// existed, and only the tool's conditional create kept it from being a
	// duplicate effect.
	MaskedDuplicates int `json:"masked_duplicates"`

	// Durations of the phases, in seconds.
	ChaosSeconds  float64 `json:"chaos_seconds"`
	SettleSeconds float64 `json:"settle_seconds"`
	TotalSeconds  float64 `json:"total_seconds"`
	Settled       bool    `json:"settled"`

	// Violations falsify an invariant; Lost are the lost objects; Findings
	// are for a person to judge.
	Violations []Issue `json:"violations"`
	Lost       []Issue `json:"lost"`
	Findings   []Issue `json:"findings"`
	// Passed is true when there is no duplicate effect, no lost operation
	// and no violation.
	Passed bool `json:"passed"`

	// MCP is what the agent saw of its calls through the MCP gateway, if
	// the run made any.
	MCP *MCPReport `json:"mcp,omitempty"`
	// LogDir holds every process's log, the ledger and the final objects;
	// ReportPath is where the JSON report was written.
	LogDir     string `json:"log_dir"`
	ReportPath string `json:"report_path"`
}

// Problems says why the run failed; empty when it passed.
func (r Report) Problems() []string {
	var p []string
	if r.DuplicateEffects > 0 {
		p = append(p, fmt.Sprintf("%d duplicate effects at the tool", r.DuplicateEffects))
	}
	if r.MaskedDuplicates > 0 {
		p = append(p, fmt.Sprintf("%d second creates for an existing effect, refused by the tool's conditional create (409-exists)",
			r.MaskedDuplicates))
	}
	if r.LostOperations > 0 {
		p = append(p, fmt.Sprintf("%d lost operations (%d objects neither terminal nor in NeedsReview)",
			r.LostOperations, r.LostObjects))
	}
	if r.SagasCompensatedEarly > 0 {
		p = append(p, fmt.Sprintf("%d sagas compensated early: a step marked undone whose effect stands at the tool",
			r.SagasCompensatedEarly))
	}
	if r.MaskedCancels > 0 {
		p = append(p, fmt.Sprintf("%d second cancels of a cancelled object, refused by the tool (409 already_cancelled)",
			r.MaskedCancels))
	}
	if r.LostSagas > 0 {
		p = append(p, fmt.Sprintf("%d lost sagas (neither terminal nor in NeedsReview)", r.LostSagas))
	}
	if n := len(r.Violations); n > 0 {
		p = append(p, fmt.Sprintf("%d invariant violations", n))
	}
	return append(p, r.MCP.problems()...)
}

// JSON is the report as indented JSON.
func (r Report) JSON() ([]byte, error) {
	return json.MarshalIndent(r, "", "  ")
}

// Table is the report as an aligned plain-text table, followed by the
// violations and findings.
func (r Report) Table() string {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	row := func(name string, value any, note string) {
		_, _ = fmt.Fprintf(w, "%s\t%v\t%s\n", name, value, note)
	}
	section := func(title string) { _, _ = fmt.Fprintf(w, "%s\t\t\n", "— "+title) }
	rate := func(v float64) string { return fmt.Sprintf("%.4f", v) }
	of := func(n, d int) string { return fmt.Sprintf("(%d/%d)", n, d) }

	row("figure", "value", "how it was counted")
	section("workload")
	row("operations", r.Operations, fmt.Sprintf("logical operations; by mode %s", formatCounts(r.OperationsByMode)))
	row("objects", r.Objects, fmt.Sprintf("incl. %d duplicate deliveries and %d conflicting requests; %d re-applies",
		r.DuplicatesInjected, r.ConflictsInjected, r.Reapplies))
	row("final_states", formatCounts(r.States), "objects by status.state")
	section("docs/design.md, Figures to report, counted at the tool's ledger")
	row("effects", r.Effects, fmt.Sprintf("create effects in the ledger; and %d cancels (compensations)", r.Cancels))
	row("duplicate_effects", r.DuplicateEffects, "sum over scope keys, creates' and cancels', of (effects − 1)")
	row("dsr", rate(r.DSR), fmt.Sprintf("duplicate_effects / (operations + saga_operations %d)", r.SagaOperations))
	row("unknowns", r.Unknowns, fmt.Sprintf("objects with status.unknownTime; Native+Lookup %d, None %d",
		r.UnknownsNativeLookup, r.UnknownsNone))
	row("reconciliation_success_rate", rate(r.ReconciliationSuccessRate),
		of(r.Resolved, r.Unknowns)+" unknowns that ended Committed/FailedFinal without a person")
	row("  native+lookup", rate(r.ReconciliationSuccessRateNativeLookup), fmt.Sprintf(
		"1 but for re-sends answered 401/403/404/422, which need a person by design (%d)", r.NeedsReviewResendRefused))
	row("  none", rate(r.ReconciliationSuccessRateNone), "a None tool's unknown goes to a person")
	row("conflict_rate", rate(r.ConflictRate), of(r.ConflictRejections, r.Operations)+
		fmt.Sprintf(" ended IdempotencyParameterMismatch; %d where the later request won", r.ConflictsInverted))
	row("manual_recovery_rate", rate(r.ManualRecoveryRate), of(r.NeedsReview, r.Unknowns)+
		fmt.Sprintf(" in NeedsReview / unknowns; Native+Lookup %d, None %d; %d with an effect at the tool",
			r.NeedsReviewNativeLookup, r.NeedsReviewNone, r.NeedsReviewWithEffect))
	row("waiting_for_review", r.WaitingForReview, "duplicates waiting for an original in NeedsReview")
	row("recovery_p50_ms", r.RecoveryP50ms,
		fmt.Sprintf("unknownTime → completionTime of %d recovered (1s resolution)", r.Recovered))
	row("recovery_p95_ms", r.RecoveryP95ms, "")
	row("recovery_p99_ms", r.RecoveryP99ms, fmt.Sprintf("max %d", r.RecoveryMaxms))
	if r.Sagas > 0 {
		r.sagaRows(row, section, rate, of)
	}
	section("docs/design.md, The write budget")
	row("writes_per_operation", fmt.Sprintf("%.2f", r.WritesPerOperation),
		fmt.Sprintf("(writes_total − writes_driver) / operations; %.2f per object", r.WritesPerObject))
	row("writes_total", r.WritesTotal,
		"apiserver_request_total, POST/PUT/PATCH/DELETE/APPLY on sideeffectoperations and idempotencyrecords")
	row("  by request", "", formatCounts64(r.WritesByRequest))
	row("writes_driver", r.WritesDriver, "creates and re-applies the chaos driver sent")
	row("writes_operator", r.WritesOperator, "writes_total − writes_driver")
	row("writes_conflicts", r.WritesConflicts,
		"answered 409 Conflict: "+formatCounts64(r.WritesConflictsByRequest))
	row("writes_per_saga", fmt.Sprintf("%.2f", r.WritesPerSaga), fmt.Sprintf(
		"operator writes to sagas / sagas (%d writes, %d by the driver), apart from the above", r.WritesSagas, r.WritesSagasDriver))
	section("chaos")
	row("lost_operations", r.LostOperations,
		fmt.Sprintf("%d objects neither terminal nor NeedsReview at the bound", r.LostObjects))
	row("manager_starts", r.ManagerStarts, "")
	row("manager_kills_random", r.KillsRandom, "kill -9 at a random moment")
	row("manager_kills_failpoint", r.KillsFailpoint, formatCounts(r.FailpointKills)+
		fmt.Sprintf("; %d armed but not reached (then killed)", r.FailpointMisses))
	row("manager_stalls", r.Stalls, "calls stalled after the claim while a successor ran (-stall-share)")
	row("manager_stops_graceful", r.GracefulStops, fmt.Sprintf(
		"SIGTERM, drain and exit, as a rolling update (-term-share); %d killed after %s; longest %d ms",
		r.GracefulStopTimeouts, termGrace, r.GracefulStopLongestms))
	row("manager_unexpected_exits", r.UnexpectedExits, "exits nobody caused")
	row("faults_fired", sumCounts(r.FaultsFired), "requests the sandbox's rules changed, by fault:")
	for _, name := range slices.Sorted(maps.Keys(r.FaultsFired)) {
		note := faultNotes[name]
		if n := r.FaultsFiredCancels[name]; n > 0 {
			note = strings.TrimPrefix(fmt.Sprintf("%s; %d on cancels", note, n), "; ")
		}
		row("  "+name, r.FaultsFired[name], note)
	}
	row("masked_duplicates", r.MaskedDuplicates, "second creates for an existing effect that 409-exists refused; must be 0")
	row("durations_s", fmt.Sprintf("%.0f", r.TotalSeconds),
		fmt.Sprintf("chaos %.0f, settle %.0f", r.ChaosSeconds, r.SettleSeconds))
	row("violations", len(r.Violations), "falsifiers of docs/design.md, Invariants")
	row("findings", len(r.Findings), "")
	if m := r.MCP; m != nil {
		row("mcp_calls", m.Calls, fmt.Sprintf("logical tool calls through the MCP gateway, %d attempts", m.Attempts))
		row("  gateway_kills", m.GatewayKills, "gateways killed mid-call; the agent retried with the same key")
		row("  faults_fired", m.FaultsFired, "the tool's requests for these calls that the sandbox's rules changed")
		for _, code := range slices.Sorted(maps.Keys(m.Answers)) {
			row("  answered_"+code, m.Answers[code], "")
		}
		row("  duplicate_effects", m.DuplicateEffects, "must be 0")
		row("  inconsistent_answers", m.InconsistentAnswers, "a replayed call answered otherwise; must be 0")
		row("  wrong_results", m.WrongResults, "answers the ledger contradicts; must be 0")
		row("  unanswered", m.Unanswered, "must be 0")
	}
	_ = w.Flush()
	if m := r.MCP; m != nil && len(m.Issues) > 0 {
		b.WriteString("\nMCP calls:\n")
		for _, is := range m.Issues {
			b.WriteString("  - " + is + "\n")
		}
	}

	if len(r.Violations) > 0 {
		b.WriteString("\nViolations:\n")
		writeIssues(&b, r.Violations)
	}
	if len(r.Lost) > 0 {
		b.WriteString("\nLost:\n")
		writeIssues(&b, r.Lost)
	}
	if len(r.Findings) > 0 {
		b.WriteString("\nFindings:\n")
		writeIssues(&b, r.Findings)
	}
	return b.String()
}

// faultNotes say, in the table, what a fault stands for.
var faultNotes = map[string]string{
	sandbox.Fault502AfterCommit: "committed, then a proxy's HTML 502",
	sandbox.Fault503AfterCommit: "committed, then Envoy's plain-text 503",
	sandbox.Fault504AfterCommit: "committed, then an API gateway's 504",
	sandbox.Fault409Exists:      "conditional create refused a second object for a key",
	sandbox.FaultResend401:      "re-send refused: a rotated credential",
	sandbox.FaultResend403:      "re-send refused: a revoked permission",
	sandbox.FaultResend404:      "re-send refused: a moved route (ingress 404)",
	sandbox.FaultLookupLag:      "lookup index lag, within lookupDelay",
	sandbox.FaultLookupRoute404: "lookup answered by an ingress's HTML 404",
}

// maxListed bounds the issues the table lists; the JSON has them all.
const maxListed = 20

func writeIssues(b *strings.Builder, issues []Issue) {
	for i, is := range issues {
		if i == maxListed {
			fmt.Fprintf(b, "  … and %d more (see the JSON report)\n", len(issues)-maxListed)
			return
		}
		fmt.Fprintf(b, "  - %s\n", is)
	}
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// formatCounts writes a map of counts as "a=1 b=2", sorted by key.
func formatCounts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func formatCounts64(m map[string]int64) string {
	if len(m) == 0 {
		return "-"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// ratio is n/d; vacuously 1 for a success rate with nothing to succeed at,
// which the caller passes as empty.
func ratio(n, d int, empty float64) float64 {
	if d == 0 {
		return empty
	}
	return float64(n) / float64(d)
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of xs, or 0
// when xs is empty. xs need not be sorted; it is not modified.
func Percentile[T cmp.Ordered](xs []T, p float64) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

// DuplicateEffects is the sum over scope keys of (effects − 1), counted
// from the ledger's effects: creates and cancels, each action under keys
// of its own, as an operation and its compensation have. Effects without
// a key cannot be told apart and are not counted here (Analyse reports
// them as I2 violations).
func DuplicateEffects(effects []sandbox.Effect) int {
	perKey := map[string]int{}
	for _, e := range effects {
		if e.Key != "" {
			perKey[effectScope(e)]++
		}
	}
	n := 0
	for _, c := range perKey {
		n += max(c-1, 0)
	}
	return n
}

// effectScope is the ledger key of an effect's scope: a create's, or a
// cancel's.
func effectScope(e sandbox.Effect) string {
	return sandbox.SummaryKey(e.Mode, e.Collection, e.Action, e.Key)
}

// scope gathers a scope's objects and its effects at the tool, all of one
// action (creates, or cancels).
type scope struct {
	key     string
	objects []*Object
	effects []sandbox.Effect
}

// Analyse computes the figures and checks the invariants from the final
// statuses of the objects (plain operations and the operations of sagas)
// and of the sagas, and the tool's ledger. operations is the number of
// logical plain operations. The chaos fields (kills, faults, writes,
// durations) are left for the caller.
func Analyse(operations int, objects []Object, sagas []Saga, effects []sandbox.Effect) Report {
	r := Report{
		Operations:       operations,
		OperationsByMode: map[string]int{},
		States:           map[string]int{},
		Violations:       []Issue{},
		Lost:             []Issue{},
		Findings:         []Issue{},
		SagaFigures: SagaFigures{SagaStates: map[string]int{}, SagaReviewReasons: map[string]int{},
			SagaOperationStates: map[string]int{}},
	}
	byName := map[string]*Object{}
	scopes := map[string]*scope{}
	var order []string
	for i := range objects {
		o := &objects[i]
		byName[o.Name] = o
		s := scopes[o.ScopeKey]
		if s == nil {
			s = &scope{key: o.ScopeKey}
			scopes[o.ScopeKey] = s
			order = append(order, o.ScopeKey)
		}
		s.objects = append(s.objects, o)
		if o.Saga != "" {
			r.SagaOperationObjects++
			if len(s.objects) == 1 {
				r.SagaOperations++
			}
			continue
		}
		r.Objects++
		switch o.Role {
		case RoleOriginal:
			r.OperationsByMode[string(o.Mode)]++
		case RoleDuplicate:
			r.DuplicatesInjected++
		case RoleConflict:
			r.ConflictsInjected++
		}
	}

	// Every effect must belong to a scope an object asked for (I2).
	for _, e := range effects {
		s := scopes[effectScope(e)]
		switch {
		case e.Key == "" || s == nil:
			r.Violations = append(r.Violations, Issue{Kind: "I2", Scope: effectScope(e), Effects: []sandbox.Effect{e},
				Detail: fmt.Sprintf("effect %s (%s %s/%s, key %q) belongs to no operation: a call nobody claimed",
					e.ID, e.Action, e.Mode, e.Collection, e.Key)})
		default:
			s.effects = append(s.effects, e)
		}
	}
	for _, e := range effects {
		switch e.Action {
		case sandbox.ActionCreate:
			r.Effects++
		case sandbox.ActionCancel:
			r.Cancels++
		}
	}
	r.DuplicateEffects = DuplicateEffects(effects)

	lostLogical := map[int]bool{}
	for _, key := range order {
		s := scopes[key]
		checkScope(&r, s, byName, lostLogical)
	}
	r.LostOperations = len(lostLogical)
	analyseSagas(&r, sagas, byName, effects)

	// Figures over the unknowns.
	var recovery []int64
	resolvedNone, resolvedOther := 0, 0
	for i := range objects {
		o := &objects[i]
		st := o.Status
		if st.UnknownTime == nil {
			continue
		}
		r.Unknowns++
		none := o.Mode == v1.IdempotencyNone
		if none {
			r.UnknownsNone++
		} else {
			r.UnknownsNativeLookup++
		}
		if (st.State == v1.StateCommitted || st.State == v1.StateFailedFinal) && st.Resolution == nil {
			r.Resolved++
			if none {
				resolvedNone++
			} else {
				resolvedOther++
			}
		}
		if st.State.IsTerminal() && st.CompletionTime != nil {
			recovery = append(recovery, st.CompletionTime.Sub(st.UnknownTime.Time).Milliseconds())
		}
	}
	r.ReconciliationSuccessRate = ratio(r.Resolved, r.Unknowns, 1)
	r.ReconciliationSuccessRateNativeLookup = ratio(resolvedOther, r.UnknownsNativeLookup, 1)
	r.ReconciliationSuccessRateNone = ratio(resolvedNone, r.UnknownsNone, 1)
	r.ManualRecoveryRate = ratio(r.NeedsReview, r.Unknowns, 0)
	r.ConflictRate = ratio(r.ConflictRejections, r.Operations, 0)
	r.DSR = ratio(r.DuplicateEffects, r.Operations+r.SagaOperations, 0)
	r.Recovered = len(recovery)
	r.RecoveryP50ms = Percentile(recovery, 50)
	r.RecoveryP95ms = Percentile(recovery, 95)
	r.RecoveryP99ms = Percentile(recovery, 99)
	r.RecoveryMaxms = Percentile(recovery, 100)
	r.Passed = len(r.Problems()) == 0
	return r
}

// checkScope checks one scope's objects against its effects, and counts
// its objects' final states.
func checkScope(r *Report, s *scope, byName map[string]*Object, lostLogical map[int]bool) {
	c := &scopeCheck{r: r, s: s, byName: byName}
	c.checkEffects()
	c.split()
	c.checkRequests()
	c.checkOwners()
	c.checkDuplicates()
	c.countStates(lostLogical)
}

// scopeCheck is the check of one scope.
type scopeCheck struct {
	r      *Report
	s      *scope
	byName map[string]*Object
	// refused are the objects refused as a mismatch, accepted the others,
	// and owners those accepted that duplicate no other.
	refused, accepted, owners []*Object
	// winner is the body hash of the request the key is bound to.
	winner string
}

// statuses are the objects' final statuses, for an issue.
func statuses(objs ...*Object) map[string]v1.SideEffectOperationStatus {
	m := map[string]v1.SideEffectOperationStatus{}
	for _, o := range objs {
		m[o.Name] = o.Status
	}
	return m
}

// violate records a violation about the scope, with its effects.
func (c *scopeCheck) violate(kind, detail string, objs ...*Object) {
	c.r.Violations = append(c.r.Violations, Issue{Kind: kind, Scope: c.s.key, Detail: detail,
		Objects: statuses(objs...), Effects: c.s.effects})
}

// checkEffects: at most one effect per scope key (I1), a create's or a
// cancel's.
func (c *scopeCheck) checkEffects() {
	if n := len(c.s.effects); n > 1 {
		ids := make([]string, 0, n)
		for _, e := range c.s.effects {
			ids = append(ids, e.ID)
		}
		c.violate("I1", fmt.Sprintf("%d effects for one scope key: %s", n, strings.Join(ids, ", ")), c.s.objects...)
	}
}

// split sorts the objects into refused, accepted and owners, and finds the
// request the key is bound to: the owner's.
func (c *scopeCheck) split() {
	for _, o := range c.s.objects {
		switch {
		case !o.Found:
		case isMismatch(o.Status):
			c.refused = append(c.refused, o)
		default:
			c.accepted = append(c.accepted, o)
			if o.Status.DuplicateOf == "" {
				c.owners = append(c.owners, o)
			}
		}
	}
	c.r.ConflictRejections += len(c.refused)
	switch {
	case len(c.owners) > 0:
		c.winner = c.owners[0].BodySHA
	case len(c.accepted) > 0:
		c.winner = c.accepted[0].BodySHA
	}
	if len(c.owners) > 1 {
		c.violate("I1", fmt.Sprintf("%d objects own one scope key; only one may execute", len(c.owners)), c.owners...)
	}
}

// checkRequests: the key is bound to one request; any other is refused
// and never executes (I4); the same request is never refused (I5).
func (c *scopeCheck) checkRequests() {
	for _, o := range c.accepted {
		if o.BodySHA != c.winner {
			c.violate("I4", "two different requests accepted for one key: a silent acceptance of other parameters",
				c.accepted...)
			break
		}
	}
	for _, o := range c.refused {
		if o.BodySHA == c.winner {
			c.violate("I5", fmt.Sprintf("%s has the same parameters as the request the key is bound to, "+
				"yet was refused as a mismatch", o.Name), o)
		}
		if o.Role == RoleOriginal {
			c.r.ConflictsInverted++
		}
	}
	for _, o := range c.s.objects {
		if o.Role == RoleConflict && o.Found && !isMismatch(o.Status) && o.BodySHA != c.winner {
			c.violate("I4", fmt.Sprintf("conflicting request %s was not refused with %s", o.Name,
				v1.ReasonIdempotencyParameterMismatch), o)
		}
	}
	for _, e := range c.s.effects {
		if e.BodySHA256 != c.winner {
			c.violate("I4", fmt.Sprintf("effect %s was made with a body (sha256 %.12s) other than the request "+
				"the key is bound to (%.12s): a conflicting request executed", e.ID, e.BodySHA256, c.winner),
				c.s.objects...)
		}
	}
}

// checkOwners: the owner's record matches the tool: Committed as the
// effect the tool has, FailedFinal only without one, and no effect without
// a claimed attempt (I2).
func (c *scopeCheck) checkOwners() {
	ids := map[string]bool{}
	for _, e := range c.s.effects {
		ids[e.ID] = true
	}
	for _, o := range c.owners {
		st := o.Status
		switch st.State {
		case v1.StateCommitted:
			switch {
			case len(c.s.effects) == 0:
				c.violate("Record", fmt.Sprintf("%s is Committed as %q, but the tool has no effect for its key",
					o.Name, st.ExternalObjectID), o)
			case !ids[st.ExternalObjectID]:
				c.violate("Record", fmt.Sprintf("%s is Committed as %q, which is not the id the tool has for its key",
					o.Name, st.ExternalObjectID), o)
			}
		case v1.StateFailedFinal:
			if len(c.s.effects) > 0 {
				c.violate("Record", fmt.Sprintf("%s ended FailedFinal (%s), but the tool performed its effect %s",
					o.Name, readyReason(st), c.s.effects[0].ID), o)
			}
		case v1.StateNeedsReview:
			if len(c.s.effects) > 0 {
				c.r.NeedsReviewWithEffect++
			}
		}
		if st.Attempts == 0 && len(c.s.effects) > 0 {
			c.violate("I2", fmt.Sprintf("%s never claimed an attempt, yet the tool has an effect for its key", o.Name), o)
		}
	}
}

// checkDuplicates: a duplicate reports what the object it duplicates
// reports (I5).
func (c *scopeCheck) checkDuplicates() {
	for _, o := range c.accepted {
		if o.Status.DuplicateOf == "" {
			continue
		}
		orig := c.byName[o.Status.DuplicateOf]
		switch {
		case orig == nil || orig.ScopeKey != c.s.key:
			c.violate("I5", fmt.Sprintf("%s is a duplicate of %q, which is not an object of its scope",
				o.Name, o.Status.DuplicateOf), o)
		case orig.Status.State.IsTerminal():
			if o.Status.State != orig.Status.State || o.Status.ExternalObjectID != orig.Status.ExternalObjectID {
				c.violate("I5", fmt.Sprintf("duplicate %s reports %s %q, but %s reports %s %q", o.Name,
					o.Status.State, o.Status.ExternalObjectID, orig.Name, orig.Status.State,
					orig.Status.ExternalObjectID), o, orig)
			}
		case o.Status.State.IsTerminal():
			c.violate("I5", fmt.Sprintf("duplicate %s ended %s while %s, which it duplicates, is %s", o.Name,
				o.Status.State, orig.Name, orig.Status.State), o, orig)
		}
	}
}

// countStates counts the final states, the objects in NeedsReview (a
// finding for a Native or Lookup tool) and the lost ones.
func (c *scopeCheck) countStates(lostLogical map[int]bool) {
	r := c.r
	for _, o := range c.s.objects {
		st := o.Status
		state, settled := settledState(o, c.byName)
		if state == stateWaitingForReview {
			r.WaitingForReview++
		}
		if o.Saga != "" {
			r.SagaOperationStates[state]++
		} else {
			r.States[state]++
		}
		if st.State == v1.StateNeedsReview {
			r.NeedsReview++
			if o.Mode == v1.IdempotencyNone {
				r.NeedsReviewNone++
			} else {
				r.NeedsReviewNativeLookup++
				detail := fmt.Sprintf("%s (%s tool) needs a person: %s", o.Name, o.Mode, readyMessage(st))
				if resendRefused(st) {
					r.NeedsReviewResendRefused++
					detail += " (expected: a re-send was answered 401/403/404/422, not a replay)"
				}
				r.Findings = append(r.Findings, Issue{Kind: "NeedsReview", Scope: c.s.key, Objects: statuses(o),
					Effects: c.s.effects, Detail: detail})
			}
		}
		if !settled {
			r.LostObjects++
			if o.Saga == "" {
				lostLogical[o.Logical] = true
			}
			detail := fmt.Sprintf("%s is %s at the bound: %s", o.Name, state, readyMessage(st))
			if !o.Found {
				detail = o.Name + " was not found at the end"
			}
			r.Lost = append(r.Lost, Issue{Kind: "Lost", Scope: c.s.key, Detail: detail,
				Objects: statuses(o), Effects: c.s.effects})
		}
	}
}

// stateWaitingForReview is the state the report gives a duplicate that
// waits for an original in NeedsReview, and stateMissing an object not
// found at the end.
const (
	stateWaitingForReview = "WaitingForReview"
	stateMissing          = "Missing"
)

// settledState names o's final state for the report, and says whether it
// settled: it ended, needs a person, or waits for an original that needs
// one.
func settledState(o *Object, byName map[string]*Object) (string, bool) {
	st := o.Status
	switch {
	case !o.Found:
		return stateMissing, false
	case st.State.IsTerminal() || st.State == v1.StateNeedsReview:
		return string(st.State), true
	case waitsForReview(o, byName):
		return stateWaitingForReview, true
	case st.State == "":
		return string(v1.StatePlanned), false
	default:
		return string(st.State), false
	}
}

// Unsettled counts the objects that are neither terminal nor in
// NeedsReview nor waiting for an original in NeedsReview, and counts every
// object by state.
func Unsettled(objects []Object) (int, map[string]int) {
	byName := map[string]*Object{}
	for i := range objects {
		byName[objects[i].Name] = &objects[i]
	}
	n, states := 0, map[string]int{}
	for i := range objects {
		state, settled := settledState(&objects[i], byName)
		states[state]++
		if !settled {
			n++
		}
	}
	return n, states
}

// waitsForReview reports whether o is a duplicate that waits for an
// original in NeedsReview: it waits for the person too.
func waitsForReview(o *Object, byName map[string]*Object) bool {
	orig := byName[o.Status.DuplicateOf]
	return o.Status.DuplicateOf != "" && orig != nil && orig.Status.State == v1.StateNeedsReview &&
		(o.Status.State == "" || o.Status.State == v1.StatePlanned)
}

// resendRefused reports whether a re-send of the object's request (a
// re-send of an unknown attempt, or a later attempt with the same key) was
// answered 401, 403 or 404 (the lies the run draws), or 422 (the
// rejection a saga's step carries).
func resendRefused(st v1.SideEffectOperationStatus) bool {
	for _, ob := range st.Observations {
		resend := ob.Kind == v1.ObservationResend || (ob.Kind == v1.ObservationCall && ob.Attempt > 1)
		switch ob.HTTPStatus {
		case 401, 403, 404, 422:
		default:
			resend = false
		}
		if resend {
			return true
		}
	}
	return false
}

func isMismatch(st v1.SideEffectOperationStatus) bool {
	return st.State == v1.StateFailedFinal && readyReason(st) == v1.ReasonIdempotencyParameterMismatch
}

func readyReason(st v1.SideEffectOperationStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func readyMessage(st v1.SideEffectOperationStatus) string {
	if c := meta.FindStatusCondition(st.Conditions, v1.ConditionReady); c != nil {
		return cmp.Or(c.Message, c.Reason)
	}
	return "no Ready condition"
}
