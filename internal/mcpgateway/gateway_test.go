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
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/pkg/once"
)

// TestCallsAreKeptAnHour: a tools/call's operation is kept an hour after it
// ends unless the gateway is told otherwise, and its record the retention
// the gateway is given.
func TestCallsAreKeptAnHour(t *testing.T) {
	type lifetime struct {
		TTL       *int32
		Retention time.Duration
	}
	cases := map[string]struct {
		reason string
		cfg    Config
		want   lifetime
	}{
		"Default": {reason: "an hour, and the API server's retention", want: lifetime{TTL: ptr.To[int32](3600)}},
		"Set": {reason: "the gateway's TTL and retention",
			cfg:  Config{TTLSecondsAfterFinished: ptr.To[int32](120), Retention: 48 * time.Hour},
			want: lifetime{TTL: ptr.To[int32](120), Retention: 48 * time.Hour}},
		"KeptForEver": {reason: "-1 is passed on: pkg/once sets no TTL for it",
			cfg: Config{TTLSecondsAfterFinished: ptr.To[int32](-1)}, want: lifetime{TTL: ptr.To[int32](-1)}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			tc.cfg.REST = &rest.Config{Host: "https://127.0.0.1:1"}
			g, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			r := g.operationRequest("ns", v1.ToolReference{Name: "payments"}, "charge.create", "k", nil, "alice")
			if diff := cmp.Diff(tc.want, lifetime{TTL: r.TTLSecondsAfterFinished, Retention: r.Retention}); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestAnswerSaysWhoDecided: an answer whose outcome rests on a person's
// resolution says so, whether the operation or its record gave it.
func TestAnswerSaysWhoDecided(t *testing.T) {
	cases := map[string]struct {
		reason string
		res    once.Result
		want   any
	}{
		"Proven": {reason: "an outcome Once established names no one",
			res: once.Result{State: v1.StateCommitted, ExternalObjectID: "ch_1"}},
		"Decided": {reason: "a person's MarkCommitted is named, with the authenticated user",
			res: once.Result{State: v1.StateCommitted, ExternalObjectID: "ch_found", Found: true,
				Resolution: &v1.RecordResolution{Action: v1.ResolutionMarkCommitted, By: "alice", User: "kube:alice"}},
			want: map[string]any{"action": "MarkCommitted", "by": "alice (authenticated as kube:alice)"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sc := Answer(tc.res, nil).StructuredContent.(map[string]any)
			if diff := cmp.Diff(tc.want, sc[fieldResolution]); diff != "" {
				t.Errorf("%s: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
