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
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
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

// Timeout bounds one call of the operation: its tool's timeout (or the
// default), or its own where that is shorter, and never more than
// MaxTimeout. An operation's author may not hold a worker longer than the
// tool's author allows; objects stored before the CRDs' bound are held to
// it here.
func Timeout(tool *v1.ToolSpec, op *v1.SideEffectOperationSpec) time.Duration {
	t := min(durationOr(tool.Timeout, v1.DefaultTimeout), v1.MaxTimeout)
	if op.Timeout != nil && op.Timeout.Duration > 0 {
		t = min(t, op.Timeout.Duration)
	}
	return t
}

// Retention is how long the operation's scope record keeps its outcome
// after it ends.
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
		LookupDelay:  durationOr(tool.Idempotency.LookupDelay, timeout),
		ClockMargin:  l.ClaimGrace,
		Retention:    Retention(op),
		DedupeWindow: durationOr(tool.Idempotency.DedupeWindow, v1.DefaultDedupeWindow),
		Promise:      PromiseOf(tool, op.Operation),
	}
}

// durationOr returns d's duration, or def when d is unset.
func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

// Refusal is why an operation must fail before any call.
type Refusal struct {
	Class   v1.ErrorClass
	Reason  string
	Message string
}

// CheckParameters refuses parameters larger than the documented limit,
// measured as canonical JSON.
func CheckParameters(canonical []byte) *Refusal {
	if len(canonical) <= v1.MaxParametersBytes {
		return nil
	}
	return &Refusal{v1.ErrorInvalid, v1.ReasonParametersTooLarge, fmt.Sprintf(
		"spec.parameters take %d bytes of canonical JSON; the limit is %d", len(canonical), v1.MaxParametersBytes)}
}

// CheckRetention refuses a retention shorter than the tool's replay
// window: a replay after the record expired would execute again (I7).
func CheckRetention(p Policy, tool *v1.ToolSpec, toolName string) *Refusal {
	w := tool.Idempotency.ReplayWindow
	if w == nil || p.Retention >= w.Duration {
		return nil
	}
	return &Refusal{v1.ErrorInvalid, v1.ReasonRetentionTooShort, fmt.Sprintf(
		"spec.retention %s is shorter than the replay window %s of %s: a replay could execute again",
		p.Retention, w.Duration, toolName)}
}

// maxExponent bounds the exponent of a number in the parameters, so that
// checking its exactness stays cheap; a double holds none beyond it.
const maxExponent = 400

// CheckNumbers refuses parameters with a number whose canonical form is
// another number. The request hash reads numbers as IEEE doubles. It
// writes each as the shortest decimal that reads back as the same double
// (RFC 8785). So 12345678901234567 and 12345678901234568 would be one
// request, and a key bound to one would silently accept the other (I4).
// 0.1 and 1e2 pass: their canonical forms, 0.1 and 100, are the same
// numbers. Values beyond a double's precision belong in strings (I-JSON,
// RFC 7493).
func CheckNumbers(raw []byte) *Refusal {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			// The end, or JSON the hash refuses on its own.
			return nil
		}
		n, ok := tok.(json.Number)
		if !ok || exactDouble(string(n)) {
			continue
		}
		return &Refusal{v1.ErrorInvalid, v1.ReasonParametersInvalid, fmt.Sprintf(
			"spec.parameters hold the number %.40s, which has more precision than a double: the request hash "+
				"could not tell it from a nearby number; send it as a string", n)}
	}
}

// exactDouble reports whether the JSON number s is the same number as its
// canonical form, the shortest decimal that reads back as its double.
func exactDouble(s string) bool {
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		exp, err := strconv.Atoi(s[i+1:])
		if err != nil || exp > maxExponent || exp < -maxExponent {
			return false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return false
	}
	written, ok := new(big.Rat).SetString(s)
	if !ok {
		return false
	}
	canonical, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	return ok && written.Cmp(canonical) == 0
}

// PromiseOf is the digest of what an unknown attempt of one of a tool's
// operations is reconciled by: the tool's address, where the key travels,
// the operation's request and lookup, and the declared delays and windows.
// The mode is pinned on its own (status.idempotencyMode); credentials,
// static headers and the response mapping change nothing about what is
// asked, and are left out so that rotating a Secret is not a change.
func PromiseOf(tool *v1.ToolSpec, operation string) string {
	promise := struct {
		URL         string
		Idempotency v1.ToolIdempotency
		Operation   *v1.ToolOperation
	}{URL: tool.HTTP.URL, Idempotency: tool.Idempotency}
	promise.Idempotency.Mode, promise.Idempotency.ReconcileLimit, promise.Idempotency.ReplayWindow = "", 0, nil
	for i := range tool.Operations {
		if o := tool.Operations[i]; o.Name == operation {
			o.Response = v1.ResponseMapping{}
			o.Validate, o.ParametersSchema = nil, nil
			// A method left to its default is that method: a Tool stored
			// when the API server filled it in promises the same.
			o.Method = cmp.Or(o.Method, "POST")
			if o.Lookup != nil {
				l := *o.Lookup
				l.Method = cmp.Or(l.Method, "GET")
				o.Lookup = &l
			}
			promise.Operation = &o
		}
	}
	b, err := json.Marshal(promise)
	if err != nil {
		return ""
	}
	return Digest(b)
}
