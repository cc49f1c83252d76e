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
	"cmp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Limits are the manager's own bounds on claims.
type Limits struct {
	// MaxClaim bounds a claim's duration before renewal; a call whose
	// timeout is longer renews its claim while it runs.
	MaxClaim time.Duration
	// ClaimGrace is added to every claim, for the outcome write after the
	// call's timeout.
	ClaimGrace time.Duration
}

// MaxClaimDuration is the longest any claim runs without renewal.
func (l Limits) MaxClaimDuration() time.Duration {
	return l.MaxClaim + l.ClaimGrace
}

// Timeout bounds one call of the operation: its own timeout, or its tool's,
// or the default.
func Timeout(tool *v1.ToolSpec, op *v1.SideEffectOperationSpec) time.Duration {
	return durationOr(op.Timeout, durationOr(tool.Timeout, v1.DefaultTimeout))
}

// Retention is how long the operation's record is kept after it ends.
func Retention(op *v1.SideEffectOperationSpec) time.Duration {
	return durationOr(op.Retention, v1.DefaultRetention)
}

// NewPolicy is the policy of an operation against its tool, with every
// default in one place: the API types' Default constants.
func NewPolicy(tool *v1.ToolSpec, op *v1.SideEffectOperationSpec, l Limits) Policy {
	rp := op.RetryPolicy
	if rp == nil {
		rp = &v1.RetryPolicy{}
	}
	timeout := Timeout(tool, op)
	return Policy{
		Mode:             tool.Idempotency.Mode,
		MaxAttempts:      cmp.Or(rp.MaxAttempts, v1.DefaultMaxAttempts),
		ReconcileLimit:   cmp.Or(tool.Idempotency.ReconcileLimit, v1.DefaultReconcileLimit),
		InitialBackoff:   durationOr(rp.InitialBackoff, v1.DefaultInitialBackoff),
		MaxBackoff:       durationOr(rp.MaxBackoff, v1.DefaultMaxBackoff),
		ClaimDuration:    min(timeout, l.MaxClaim) + l.ClaimGrace,
		MaxClaimDuration: l.MaxClaimDuration(),
		// Required in Lookup mode; a tool stored before it was falls back
		// to the longest a request of it may take.
		LookupDelay: durationOr(tool.Idempotency.LookupDelay, timeout),
		Retention:   Retention(op),
	}
}

// durationOr returns d's duration, or def when d is unset.
func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}
