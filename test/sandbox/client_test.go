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
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestClient(t *testing.T) {
	const slashKey = "a/b"
	h := newHarness(t, Options{})
	c := &Client{BaseURL: h.ts.URL + "/", HTTP: h.http} // a trailing slash is tolerated
	ctx := t.Context()

	if err := c.SetFaults(ctx, 5, []FaultRule{{Mode: ModeNone, Fault: "503", Count: 1}}); err != nil {
		t.Fatalf("SetFaults: %v", err)
	}
	if r := h.do(call{path: pathNoneCharges, key: slashKey, body: charge}); r.status != http.StatusServiceUnavailable {
		t.Errorf("create with the rule set = %d, want 503", r.status)
	}
	h.do(call{path: pathNoneCharges, key: slashKey, body: charge})
	h.do(call{path: pathNoneCharges, key: slashKey, body: charge})

	sum, err := c.Summary(ctx)
	if err != nil {
		t.Fatalf("Summary: %v", err)
	}
	want := Summary{
		Effects: 2, Creates: 2,
		Keys:       map[string]int{SummaryKey(ModeNone, collCharges, ActionCreate, slashKey): 2},
		Duplicates: 1, DuplicateKeys: []string{"none/charges/create/a/b"},
	}
	if diff := cmp.Diff(want, sum); diff != "" {
		t.Errorf("Summary mismatch (-want, +got):\n%s", diff)
	}
	effects, err := c.Effects(ctx)
	if err != nil || len(effects) != 2 || effects[0].Seq != 1 || effects[1].Seq != 2 {
		t.Errorf("Effects = %+v, %v; want seq 1 and 2", effects, err)
	}
	byKey, err := c.KeyEffects(ctx, slashKey)
	if err != nil || len(byKey) != 2 {
		t.Errorf("KeyEffects(a/b) = %d effects, %v; want 2", len(byKey), err)
	}

	err = c.SetFaults(ctx, 0, []FaultRule{{Fault: "meteor-strike"}})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != CodeUnknownFault {
		t.Errorf("SetFaults with a bad rule: err = %v, want an APIError 400 unknown_fault", err)
	}
	if err := c.ClearFaults(ctx); err != nil {
		t.Fatalf("ClearFaults: %v", err)
	}
	if st, err := c.Faults(ctx); err != nil || len(st.Rules) != 0 {
		t.Errorf("Faults after ClearFaults = %+v, %v; want no rules", st, err)
	}
	if err := c.Reset(ctx); err != nil {
		t.Fatalf("Reset: %v", err)
	}
	if sum, err := c.Summary(ctx); err != nil || sum.Effects != 0 {
		t.Errorf("Summary after Reset = %+v, %v; want no effects", sum, err)
	}
}

func TestClientTransportError(t *testing.T) {
	h := newHarness(t, Options{})
	base := h.ts.URL
	h.stop()
	c := &Client{BaseURL: base}
	_, err := c.Summary(t.Context())
	var apiErr *APIError
	if err == nil || errors.As(err, &apiErr) || !strings.Contains(err.Error(), "/ledger/summary") {
		t.Errorf("Summary on a stopped server: err = %v, want a transport error naming the path", err)
	}
}

func TestLogsOneLinePerRequest(t *testing.T) {
	var mu sync.Mutex
	var lines []string
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, fmt.Sprintf(format, args...))
	}
	h := newHarness(t, Options{Logf: logf})
	h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	h.do(call{path: pathNativeCharges, key: "k1", body: charge})
	h.do(call{method: http.MethodGet, path: "/ledger/summary"})
	_, _ = h.try(call{path: pathNoneCharges, fault: FaultDropAfterCommit})

	// The line for a dropped connection is written after the connection is
	// closed, so the client may see the drop first.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		if len(lines) >= 4 || time.Now().After(deadline) {
			break
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	defer mu.Unlock()
	wantPrefixes := []string{
		"POST /native/charges -> 201",
		"POST /native/charges -> 201",
		"GET /ledger/summary -> 200",
		"POST /none/charges -> closed",
	}
	wantSuffixes := []string{
		`key="k1" fault="" replayed=false`,
		`key="k1" fault="" replayed=true`,
		`key="" fault="" replayed=false`,
		`key="" fault="drop-after-commit" replayed=false`,
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d log lines, want %d:\n%s", len(lines), len(wantPrefixes), strings.Join(lines, "\n"))
	}
	for i, line := range lines {
		if !strings.HasPrefix(line, wantPrefixes[i]) || !strings.HasSuffix(line, wantSuffixes[i]) {
			t.Errorf("log line %d = %q, want %q ... %q", i, line, wantPrefixes[i], wantSuffixes[i])
		}
	}
}
