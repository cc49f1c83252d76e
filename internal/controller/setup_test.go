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

package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/outbox"
)

// testDeps are complete Deps on a fake client and a fake clock.
func testDeps() Deps {
	c := fake.NewClientBuilder().Build()
	return Deps{Client: c, APIReader: c, Recorder: events.NewFakeRecorder(1),
		Clock: clocktesting.NewFakeClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)), Transport: httpeffects.NewTransport(nil)}
}

func TestBuildRefusesMissingDeps(t *testing.T) {
	cases := map[string]struct {
		reason string
		drop   func(*Deps)
		want   string
	}{
		"Complete": {
			reason: "Jitter and Shards may be nil: math/rand and no sharding.",
			drop:   func(*Deps) {},
		},
		"NoClient": {
			reason: "Without a client nothing is read or written.",
			drop:   func(d *Deps) { d.Client = nil },
			want:   "building the reconcilers: Deps.Client is nil",
		},
		"NoAPIReader": {
			reason: "Secrets and fresh reads go past the cache.",
			drop:   func(d *Deps) { d.APIReader = nil },
			want:   "building the reconcilers: Deps.APIReader is nil",
		},
		"NoRecorder": {
			reason: "Operations and sagas record events.",
			drop:   func(d *Deps) { d.Recorder = nil },
			want:   "building the reconcilers: Deps.Recorder is nil",
		},
		"NoClock": {
			reason: "The clock is never taken from a global.",
			drop:   func(d *Deps) { d.Clock = nil },
			want:   "building the reconcilers: Deps.Clock is nil",
		},
		"NoTransport": {
			reason: "Calls and deliveries need a transport.",
			drop:   func(d *Deps) { d.Transport = nil },
			want:   "building the reconcilers: Deps.Transport is nil",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := testDeps()
			tc.drop(&d)
			_, err := Config{}.Build(d)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nBuild(...): -want error, +got error:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestBuildWiresDeps checks that what Setup filled in before Build existed
// is filled by Build, and that the reconcilers take the clock and the
// jitter they are given.
func TestBuildWiresDeps(t *testing.T) {
	d := testDeps()
	d.Jitter = func(time.Duration) time.Duration { return 7 * time.Second }
	rs, err := Config{Holder: "h", MaxConcurrentReconciles: 3}.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	op := rs.Operation
	if op.Connector == nil || op.Validator == nil || op.Budgets == nil || op.Recorder == nil {
		t.Errorf("the operation reconciler misses a part: %+v", op)
	}
	if op.Clock != d.Clock || op.Holder != "h" || op.MaxConcurrentReconciles != 3 {
		t.Errorf("the operation reconciler does not carry the config and clock given")
	}
	if got := op.jitter()(time.Minute); got != 7*time.Second {
		t.Errorf("operation jitter: got %v, want the Deps' 7s", got)
	}
	if rs.Saga.plans == nil || rs.Saga.Connector == nil || rs.Saga.Clock != d.Clock {
		t.Errorf("the saga reconciler misses a part: %+v", rs.Saga)
	}
	if rs.Record.Clock != d.Clock {
		t.Errorf("the record reconciler does not carry the clock given")
	}
	var kinds []outbox.Kind
	for _, r := range rs.Outbox {
		kinds = append(kinds, r.kind.name)
		if got := r.jitter()(time.Minute); got != 7*time.Second {
			t.Errorf("outbox jitter of %s: got %v, want the Deps' 7s", r.kind.name, got)
		}
		if r.Budget != outbox.DefaultBudget || r.Timeout != DefaultOutboxTimeout || r.Connector == nil || r.Validator == nil || r.Clock != d.Clock {
			t.Errorf("the relay of %s misses a part: %+v", r.kind.name, r)
		}
	}
	if diff := cmp.Diff([]outbox.Kind{outbox.KindOperation, outbox.KindSaga}, kinds); diff != "" {
		t.Errorf("relays: -want, +got:\n%s", diff)
	}

	toolNames := func(c Config) []string {
		rs, err := c.Build(testDeps())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, r := range rs.Tools {
			names = append(names, r.name)
		}
		return names
	}
	if diff := cmp.Diff([]string{"tool", "clustertool"}, toolNames(Config{})); diff != "" {
		t.Errorf("tool reconcilers of a manager watching every namespace: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"tool"}, toolNames(Config{WatchNamespaces: []string{"a"}})); diff != "" {
		t.Errorf("tool reconcilers of a manager watching some namespaces: -want, +got:\n%s", diff)
	}
}

// TestBuildWiresErrorBackoff checks that every reconciler Build makes is
// retried after an error with the config's cap and the Deps' jitter: each
// runs a controller of the manager.
func TestBuildWiresErrorBackoff(t *testing.T) {
	d := testDeps()
	d.Jitter = func(time.Duration) time.Duration { return 7 * time.Second }
	rs, err := Config{MaxErrorBackoff: 2 * time.Second}.Build(d)
	if err != nil {
		t.Fatal(err)
	}
	backoffs := map[string]ErrorBackoff{"sideeffectoperation": rs.Operation.ErrorBackoff, "saga": rs.Saga.ErrorBackoff,
		"idempotencyrecord": rs.Record.ErrorBackoff}
	for _, r := range rs.Outbox {
		backoffs["outbox-"+string(r.kind.name)] = r.ErrorBackoff
	}
	for _, r := range rs.Tools {
		backoffs[r.name] = r.ErrorBackoff
	}
	got := map[string]time.Duration{}
	for name, b := range backoffs {
		if b.Jitter == nil || b.Jitter(time.Minute) != 7*time.Second {
			t.Errorf("the %s reconciler's error backoff does not draw from the Deps' jitter", name)
		}
		got[name] = b.Max
	}
	want := map[string]time.Duration{"sideeffectoperation": 2 * time.Second, "saga": 2 * time.Second,
		"idempotencyrecord": 2 * time.Second, "outbox-operation": 2 * time.Second, "outbox-saga": 2 * time.Second,
		"tool": 2 * time.Second, "clustertool": 2 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the reconcilers' error backoff caps: -want, +got:\n%s", diff)
	}
}
