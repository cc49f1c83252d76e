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
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRestartSurvival(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	h1 := newHarness(t, Options{LedgerPath: path})
	created := h1.do(call{path: pathNativeCharges, key: "k1", body: charge})
	rejected := h1.do(call{path: pathNativeCharges, key: "k2", body: declined})
	ticket := h1.do(call{path: pathLookupTickets, key: "t1", body: `{"seat":"4A"}`})
	h1.do(call{path: pathNoneEmails, key: "e1", body: `{"to":"a@example.com"}`})
	h1.do(call{path: pathNoneEmails, key: "e1", body: `{"to":"a@example.com"}`})
	cancel := h1.do(call{path: "/native/charges/" + created.object(t).ID + "/cancel", key: "c1"})
	wantSummary, wantEffects := h1.summary(), h1.effects()
	h1.stop()

	h2 := newHarness(t, Options{LedgerPath: path})
	if diff := cmp.Diff(wantSummary, h2.summary()); diff != "" {
		t.Errorf("summary after restart mismatch (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantEffects, h2.effects()); diff != "" {
		t.Errorf("effects after restart mismatch (-want, +got):\n%s", diff)
	}
	replays := map[string]struct {
		call call
		want result
	}{
		"native create":    {call: call{path: pathNativeCharges, key: "k1", body: charge}, want: created},
		"native rejection": {call: call{path: pathNativeCharges, key: "k2", body: declined}, want: rejected},
		"native cancel":    {call: call{path: "/native/charges/" + created.object(t).ID + "/cancel", key: "c1"}, want: cancel},
	}
	for name, tc := range replays {
		r := h2.do(tc.call)
		got := []any{r.status, r.body, r.replayed()}
		if diff := cmp.Diff([]any{tc.want.status, tc.want.body, true}, got); diff != "" {
			t.Errorf("%s replay after restart mismatch (-want, +got):\n%s", name, diff)
		}
	}
	lookup := h2.do(call{method: http.MethodGet, path: "/lookup/tickets?key=t1"})
	if lookup.status != http.StatusOK || lookup.body != ticket.body {
		t.Errorf("lookup after restart = %d %q, want 200 %q", lookup.status, lookup.body, ticket.body)
	}
	obj := h2.do(call{method: http.MethodGet, path: "/native/charges/" + created.object(t).ID}).object(t)
	if obj.Status != StatusCancelled {
		t.Errorf("object status after restart = %q, want %q", obj.Status, StatusCancelled)
	}
	next := h2.do(call{path: "/none/refunds", body: `{}`}).object(t)
	lastSeq := wantEffects[len(wantEffects)-1].Seq
	if want := objectID("refunds", lastSeq+1); next.ID != want {
		t.Errorf("id after restart = %q, want %q (the sequence continues)", next.ID, want)
	}
	if diff := cmp.Diff(wantSummary.Effects+1, h2.summary().Effects); diff != "" {
		t.Errorf("effects after one more create (-want, +got):\n%s", diff)
	}
}

func TestLedgerFileFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := newHarness(t, Options{LedgerPath: path})
	created := h.do(call{path: pathNativeCharges, key: "k1", body: charge}).object(t)
	h.do(call{path: pathNativeCharges, key: "k2", body: declined})

	lines := fileLines(t, path)
	if len(lines) != 2 {
		t.Fatalf("ledger has %d lines, want an effect and a rejection: %v", len(lines), lines)
	}
	effectFields := slices.Sorted(maps.Keys(lines[0]))
	wantFields := []string{"action", "bodySHA256", "collection", "id", "key", "mode", "response", "seq", "status", "time"}
	if diff := cmp.Diff(wantFields, effectFields); diff != "" {
		t.Errorf("effect line fields mismatch (-want, +got):\n%s", diff)
	}
	gotEffect := []any{lines[0]["seq"], lines[0]["id"], lines[0]["action"], lines[0]["key"], lines[0]["status"]}
	if diff := cmp.Diff([]any{1.0, created.ID, ActionCreate, "k1", 201.0}, gotEffect); diff != "" {
		t.Errorf("effect line mismatch (-want, +got):\n%s", diff)
	}
	if diff := cmp.Diff([]any{recordRejection, "k2", 422.0}, []any{lines[1]["record"], lines[1]["key"], lines[1]["status"]}); diff != "" {
		t.Errorf("rejection line mismatch (-want, +got):\n%s", diff)
	}
	if got := len(h.effects()); got != 1 {
		t.Errorf("GET /ledger has %d effects, want the rejection left out", got)
	}
}

// ledgerWithOneEffect returns the contents of a ledger file holding one
// create effect.
func ledgerWithOneEffect(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "seed.jsonl")
	h := newHarness(t, Options{LedgerPath: path})
	h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	h.stop()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestLedgerTail(t *testing.T) {
	good := ledgerWithOneEffect(t)
	tests := map[string]struct {
		content string
	}{
		"intact":                            {content: good},
		"torn last line is cut off":         {content: good + `{"seq":2,"id":"ch_2","mo`},
		"last line without newline is kept": {content: strings.TrimSuffix(good, "\n")},
		"blank lines are skipped":           {content: "\n" + good + "\n\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "ledger.jsonl")
			if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			h := newHarness(t, Options{LedgerPath: path})
			if got := h.summary().Effects; got != 1 {
				t.Fatalf("effects after load = %d, want 1", got)
			}
			next := h.do(call{path: pathNativeCharges, key: "k2", body: charge}).object(t)
			if next.ID != "ch_2" {
				t.Errorf("next id = %q, want ch_2", next.ID)
			}
			if got := fileEffects(t, path); got != 2 {
				t.Errorf("ledger file has %d effects, want 2 well-formed lines", got)
			}
		})
	}
}

func TestLedgerCorruptLineRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	content := "not json\n" + ledgerWithOneEffect(t)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{LedgerPath: path}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("New on a corrupt ledger: err = %v, want an error naming line 1", err)
	}
}

func TestResetLedger(t *testing.T) {
	tests := map[string]struct {
		withFile bool
	}{
		"memory": {withFile: false},
		"file":   {withFile: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var path string
			if tc.withFile {
				path = filepath.Join(t.TempDir(), "ledger.jsonl")
			}
			h := newHarness(t, Options{LedgerPath: path})
			first := h.do(call{path: pathNativeCharges, key: "k1", body: charge}).object(t)
			h.do(call{path: pathLookupTickets, key: "t1"})
			if err := h.client.Reset(t.Context()); err != nil {
				t.Fatalf("Reset: %v", err)
			}
			empty := Summary{Keys: map[string]int{}, DuplicateKeys: []string{}}
			if diff := cmp.Diff(empty, h.summary()); diff != "" {
				t.Errorf("summary after reset mismatch (-want, +got):\n%s", diff)
			}
			if r := h.do(call{method: http.MethodGet, path: "/native/charges/" + first.ID}); r.status != http.StatusNotFound {
				t.Errorf("object after reset = %d, want 404", r.status)
			}
			if r := h.do(call{method: http.MethodGet, path: "/lookup/tickets?key=t1"}); r.status != http.StatusNotFound {
				t.Errorf("lookup after reset = %d, want 404", r.status)
			}
			again := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
			if again.header.Get(HeaderReplayed) != "" || again.object(t).ID != "ch_3" {
				t.Errorf("create after reset = %s replayed=%q, want a fresh ch_3", again.body, again.header.Get(HeaderReplayed))
			}
			if !tc.withFile {
				return
			}
			if got := fileEffects(t, path); got != 1 {
				t.Errorf("ledger file has %d effects after reset and one create, want 1", got)
			}
			h.stop()
			restarted := newHarness(t, Options{LedgerPath: path})
			next := restarted.do(call{path: pathNoneCharges}).object(t)
			if diff := cmp.Diff([]any{1 + 1, "ch_4"}, []any{restarted.summary().Effects, next.ID}); diff != "" {
				t.Errorf("effects and next id after restart mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestKeyEffects(t *testing.T) {
	h := newHarness(t, Options{})
	const odd = "order 7/charge?"
	h.do(call{path: pathNoneCharges, key: odd, body: charge})
	h.do(call{path: "/lookup/charges", key: odd, body: charge})
	h.do(call{path: pathNoneCharges, key: "other", body: charge})
	h.do(call{path: pathNoneCharges, body: charge})

	tests := map[string]struct {
		key  string
		want []string // modes of the matching effects, in order
	}{
		"escaped key":   {key: odd, want: []string{ModeNone, ModeLookup}},
		"plain key":     {key: "other", want: []string{ModeNone}},
		"unknown key":   {key: "missing", want: []string{}},
		"prefix of key": {key: "order", want: []string{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			effects, err := h.client.KeyEffects(t.Context(), tc.key)
			if err != nil {
				t.Fatalf("KeyEffects: %v", err)
			}
			modes := make([]string, 0, len(effects))
			for _, e := range effects {
				if e.Key != tc.key {
					t.Errorf("effect %d has key %q, want %q", e.Seq, e.Key, tc.key)
				}
				modes = append(modes, e.Mode)
			}
			if diff := cmp.Diff(tc.want, modes); diff != "" {
				t.Errorf("modes mismatch (-want, +got):\n%s", diff)
			}
		})
	}
	raw := h.do(call{method: http.MethodGet, path: "/ledger/keys/" + url.PathEscape(odd)})
	if raw.status != http.StatusOK || !strings.HasPrefix(raw.body, `{"effects":[`) {
		t.Errorf("GET /ledger/keys = %d %q, want 200 with an effects list", raw.status, raw.body)
	}
}

func TestSummarize(t *testing.T) {
	effect := func(mode, action, key string) Effect {
		return Effect{Mode: mode, Collection: collCharges, Action: action, Key: key}
	}
	tests := map[string]struct {
		effects []Effect
		want    Summary
	}{
		"empty": {
			want: Summary{Keys: map[string]int{}, DuplicateKeys: []string{}},
		},
		"keyless effects are counted but not grouped": {
			effects: []Effect{effect(ModeNone, ActionCreate, ""), effect(ModeNone, ActionCancel, "")},
			want:    Summary{Effects: 2, Creates: 1, Cancels: 1, Keys: map[string]int{}, DuplicateKeys: []string{}},
		},
		"groups by mode, collection, action and key": {
			effects: []Effect{
				effect(ModeNone, ActionCreate, "b"),
				effect(ModeNone, ActionCreate, "b"),
				effect(ModeNone, ActionCreate, "b"),
				effect(ModeNone, ActionCancel, "b"),
				effect(ModeLookup, ActionCreate, "a"),
				effect(ModeLookup, ActionCreate, "a"),
				effect(ModeNative, ActionCreate, "b"),
			},
			want: Summary{
				Effects: 7, Creates: 6, Cancels: 1,
				Keys: map[string]int{
					"none/charges/create/b":   3,
					"none/charges/cancel/b":   1,
					"lookup/charges/create/a": 2,
					"native/charges/create/b": 1,
				},
				Duplicates:    3,
				DuplicateKeys: []string{"lookup/charges/create/a", "none/charges/create/b"},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, summarize(tc.effects)); diff != "" {
				t.Errorf("summarize mismatch (-want, +got):\n%s", diff)
			}
		})
	}
}

func TestClosedLedgerRefusesEffects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.jsonl")
	h := newHarness(t, Options{LedgerPath: path})
	if err := h.srv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	r := h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	if diff := cmp.Diff([]any{500, CodeLedgerError}, []any{r.status, r.errorCode()}); diff != "" {
		t.Errorf("create on a closed ledger (-want, +got):\n%s", diff)
	}
	if got := h.summary().Effects; got != 0 {
		t.Errorf("effects = %d, want 0: an effect that is not persisted did not happen", got)
	}
}
