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

package v1alpha1

import "time"

// Defaults of optional fields. The API server applies them (the
// +kubebuilder:default markers), and the controller falls back to them for
// objects stored before a default existed; defaults_test.go holds the two
// together, so they cannot drift.
const (
	// DefaultTimeout bounds one call (ToolSpec.timeout).
	DefaultTimeout = 30 * time.Second
	// DefaultRetention keeps a record after its operation ends
	// (SideEffectOperationSpec.retention).
	DefaultRetention = 24 * time.Hour
	// DefaultDedupeWindow is how long a Native tool is taken to remember
	// a key (ToolIdempotency.dedupeWindow), as payment APIs do.
	DefaultDedupeWindow = 24 * time.Hour
	// DefaultMaxAttempts bounds attempts (RetryPolicy.maxAttempts).
	DefaultMaxAttempts = 5
	// DefaultInitialBackoff is the first backoff ceiling
	// (RetryPolicy.initialBackoff).
	DefaultInitialBackoff = time.Second
	// DefaultMaxBackoff caps backoff (RetryPolicy.maxBackoff).
	DefaultMaxBackoff = 5 * time.Minute
	// DefaultReconcileLimit bounds questions about one unknown attempt
	// (ToolIdempotency.reconcileLimit).
	DefaultReconcileLimit = 10
	// DefaultRetriesPerMinute is a tool's retry budget
	// (RetryBudget.retriesPerMinute).
	DefaultRetriesPerMinute = 60
	// DefaultIdempotencyHeader carries the key (ToolIdempotency.header).
	DefaultIdempotencyHeader = "Idempotency-Key"
)

// MaxTimeout bounds one call (ToolSpec.timeout, and an operation's or a
// saga step's, which may shorten its tool's and never lengthen it): a
// worker waits for the call, and a claim is renewed while it runs. The
// CRDs say the same in their rules.
const MaxTimeout = time.Hour

// DefaultClientTTLSecondsAfterFinished is the ttlSecondsAfterFinished that
// programs which make operations and sagas for their callers (the Go
// client, the MCP gateway, the ingress) set unless told otherwise: they
// make one object per call, and the objects would fill etcd. The API
// server sets none: an object a person or a GitOps tool applied is kept,
// since a GitOps tool applies a deleted manifest again, and after the
// record's retention that executes again (docs/gitops.md).
const DefaultClientTTLSecondsAfterFinished int32 = 3600

// ClientTTL is the spec.ttlSecondsAfterFinished of an object a program
// makes, from what its caller asked: nil is
// DefaultClientTTLSecondsAfterFinished, a negative value none (kept for
// ever).
func ClientTTL(asked *int32) *int32 {
	switch {
	case asked == nil:
		d := DefaultClientTTLSecondsAfterFinished
		return &d
	case *asked < 0:
		return nil
	}
	t := *asked
	return &t
}
