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

package presence

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// presenceLease is a presence Lease of holder in ns, renewed at renewed for
// seconds, with version; no holder if holder is empty.
func presenceLease(ns, holder, version string, renewed time.Time, seconds int32) coordinationv1.Lease {
	l := coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: LeaseName(holder),
			Labels: map[string]string{LabelManager: "true"}, Annotations: map[string]string{AnnotationVersion: version}},
		Spec: coordinationv1.LeaseSpec{LeaseDurationSeconds: &seconds, RenewTime: new(metav1.NewMicroTime(renewed))},
	}
	if holder != "" {
		l.Spec.HolderIdentity = &holder
	}
	return l
}

func TestRunning(t *testing.T) {
	unlabelled := presenceLease("a", "x", "v1", t0, 90)
	unlabelled.Labels = nil
	unrenewed := presenceLease("a", "y", "v1", t0, 90)
	unrenewed.Spec.RenewTime = nil
	cases := map[string]struct {
		reason string
		leases []coordinationv1.Lease
		want   []Manager
	}{
		"None": {
			reason: "No Lease, no manager: an empty list, not nil, for -o json.",
			want:   []Manager{},
		},
		"Sorted": {
			reason: "Managers are sorted by namespace, then holder.",
			leases: []coordinationv1.Lease{presenceLease("b", "m-2", "v2", t0, 90), presenceLease("a", "m-9", "v1", t0, 90),
				presenceLease("b", "m-1", "v1", t0.Add(-time.Minute), 90)},
			want: []Manager{
				{Namespace: "a", Lease: "once-manager-m-9", Holder: "m-9", Version: "v1", RenewTime: t0},
				{Namespace: "b", Lease: "once-manager-m-1", Holder: "m-1", Version: "v1", RenewTime: t0.Add(-time.Minute)},
				{Namespace: "b", Lease: "once-manager-m-2", Holder: "m-2", Version: "v2", RenewTime: t0},
			},
		},
		"Expired": {
			reason: "A Lease not renewed within its duration is a manager gone: at exactly its end too.",
			leases: []coordinationv1.Lease{presenceLease("a", "gone", "v1", t0.Add(-90*time.Second), 90),
				presenceLease("a", "here", "v1", t0.Add(-89*time.Second), 90)},
			want: []Manager{{Namespace: "a", Lease: "once-manager-here", Holder: "here", Version: "v1",
				RenewTime: t0.Add(-89 * time.Second)}},
		},
		"NotAManager": {
			reason: "Leases without the label, the holder or a renewal are not managers'.",
			leases: []coordinationv1.Lease{unlabelled, unrenewed, presenceLease("a", "", "v1", t0, 90)},
			want:   []Manager{},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Running(tc.leases, t0)); diff != "" {
				t.Errorf("%s\nRunning(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLeaseName(t *testing.T) {
	cases := map[string]struct {
		reason string
		holder string
		want   string
	}{
		"Host":      {reason: "A host name and a suffix make a valid name.", holder: "once-7d9f-1a2b3c4d", want: "once-manager-once-7d9f-1a2b3c4d"},
		"Uppercase": {reason: "An identity that makes no valid name is digested (the first 8 bytes of its SHA-256, as sha256sum prints it).", holder: "Manager_1", want: "once-manager-9ee7a58294568d1e"},
		"Long": {reason: "So is one too long for a name.", holder: strings.Repeat("a", 250),
			want: "once-manager-" + "3f3e35e0a775d9b1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := LeaseName(tc.holder); got != tc.want {
				t.Errorf("%s\nLeaseName(%q) = %q, want %q", tc.reason, tc.holder, got, tc.want)
			}
		})
	}
}

func TestExpiredLong(t *testing.T) {
	cases := map[string]struct {
		reason string
		lease  coordinationv1.Lease
		want   bool
	}{
		"Renewed":  {reason: "A Lease renewed now stays.", lease: presenceLease("a", "m", "v", t0, 90), want: false},
		"Expired":  {reason: "A Lease expired a while ago stays, for a manager that may come back.", lease: presenceLease("a", "m", "v", t0.Add(-5*time.Minute), 90), want: false},
		"LongGone": {reason: "After ten durations it goes.", lease: presenceLease("a", "m", "v", t0.Add(-15*time.Minute), 90), want: true},
		"Never": {reason: "A Lease never renewed goes.", lease: func() coordinationv1.Lease {
			l := presenceLease("a", "m", "v", t0, 90)
			l.Spec.RenewTime = nil
			return l
		}(), want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := expiredLong(&tc.lease, t0, time.Hour); got != tc.want {
				t.Errorf("%s\nexpiredLong(...) = %v, want %v", tc.reason, got, tc.want)
			}
		})
	}
}
