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
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// Keys derived from the arguments (spec.operations[].derivedKey).
//
// A model that retries a call may mint a new key for it: a key the caller
// never sends again protects nothing. For an operation that opts in, the
// gateway ignores the caller's key and derives one from the arguments, so
// that calls by one caller with the same arguments are one request while
// a key holds. The caller, the tool and the operation are in the key's
// scope already (ScopedKey, and the operation's scope); the derived part is
// the digest of the canonical arguments and the number of a slot.
//
// A derived key holds while its operation has not ended, whatever its age.
// The operation runs, or waits in NeedsReview for a person, and the
// gateway's own answers tell the model to call again later with the same
// arguments. The key also holds for the window after the later of its
// first use and its end. Time is cut into slots as long as the window. A
// key is named after the slot of the call that first used it. So calls
// that find no key that holds agree on a new one without state of their
// own.
//
// A call finds the key that holds in two ways:
//
//  1. Each operation made with a derived key carries derivedLabel, the
//     digest of the key's base (caller, tool, operation, canonical
//     arguments). It is kept at least the window after it ends. The call
//     lists the caller's operations with its base, as the caller, and
//     takes the oldest whose key holds.
//  2. When none does, it looks at the keys of the slots around its own.
//     An operation's scope record keeps their use once the operation went.
//     The record is kept for the outcome's retention after the end, which
//     is why a window never exceeds the retention. The call takes the
//     oldest that holds, or the key of its own slot if none does.
//
// The margin covers what a use's record loses. Times are kept to the
// second, and the gateway's replicas read their own clocks.
//
// What this cannot tell apart: two calls that both find no key (neither
// sees the other's operation yet) and fall on either side of a slot's end
// take two keys. A retry is never such a call, since it comes after the
// first call's operation was made; two requests sent at the same moment
// with the same arguments may be.

// derivedMargin is what a window is lengthened by: a second of times kept
// to the second, and a second of the replicas' clocks apart.
const derivedMargin = 2 * time.Second

// derivedPrefix starts every derived key. A caller may send a key of this
// form to an operation that does not derive its keys: it is that caller's
// key like any other, in that operation's scope.
const derivedPrefix = "derived/"

// derivedLabel is on every operation the gateway makes with a derived key:
// the digest of the key's base (derivedBase), by which a later call finds
// it whatever its age.
const derivedLabel = "once.dev/derived-key"

// argumentsDigest is 32 hex digits of the SHA-256 of the canonical
// arguments.
func argumentsDigest(params json.RawMessage) (string, error) {
	canonical, err := protocol.Canonical(params)
	if err != nil {
		return "", fmt.Errorf("the arguments cannot be read as JSON: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:16]), nil
}

// DerivedKey is the key of a call whose arguments are params, in slot n of
// a window: derived/<digest>/<n>, the digest 32 hex digits of the SHA-256
// of the canonical arguments.
func DerivedKey(params json.RawMessage, n int64) (string, error) {
	digest, err := argumentsDigest(params)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s%s/%d", derivedPrefix, digest, n), nil
}

// derivedBase is the value of derivedLabel on the operations of calls by
// user of operation of ref with params. It is 32 hex digits of the SHA-256
// of the caller, the tool, the operation and the canonical arguments. A
// label value holds at most 63 characters.
func derivedBase(user string, ref v1.ToolReference, operation string, params json.RawMessage) (string, error) {
	digest, err := argumentsDigest(params)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(strings.Join([]string{CallerID(user), string(ref.EffectiveKind()), ref.Name,
		operation, digest}, "\x00")))
	return hex.EncodeToString(sum[:16]), nil
}

// Slot is the number of the slot of a window that t falls in.
func Slot(t time.Time, window time.Duration) int64 {
	return t.UnixNano() / int64(window)
}

// holds reports whether a derived key used as u holds at now: while its
// operation has not ended, and for the window and the margin after the
// later of its first use and its end.
func holds(u once.KeyUse, now time.Time, window time.Duration) bool {
	if !u.Ended {
		return true
	}
	last := u.First
	if u.End.After(last) {
		last = u.End
	}
	return now.Before(last.Add(window + derivedMargin))
}

// derivedSlot is the slot whose key a call at now takes. It is the first
// of these:
//
//  1. The oldest of listed whose key holds. listed holds the uses of the
//     caller's operations with the call's base, by slot.
//  2. The oldest of the slots around now's whose key holds, as use reads
//     it. use reads it from the operation, or from its scope's record once
//     it went.
//  3. Now's slot.
//
// use says false for a key that was not used.
func derivedSlot(now time.Time, window time.Duration, listed map[int64]once.KeyUse,
	use func(slot int64) (once.KeyUse, bool, error)) (int64, error) {
	for _, s := range slices.Sorted(maps.Keys(listed)) {
		if holds(listed[s], now, window) {
			return s, nil
		}
	}
	n := Slot(now, window)
	// A key first used less than a window and the margin ago is of slot
	// n-2 at the oldest (a window is far longer than the margin), and of
	// slot n+1 at the newest (a replica whose clock is ahead).
	for s := n - 2; s <= n+1; s++ {
		if _, ok := listed[s]; ok {
			continue // its operation is there, and its key does not hold
		}
		u, used, err := use(s)
		if err != nil {
			return 0, err
		}
		if used && holds(u, now, window) {
			return s, nil
		}
	}
	return n, nil
}

// derivedCall is what a call with a derived key puts on the operation it
// makes.
type derivedCall struct {
	// base is derivedLabel's value.
	base   string
	window time.Duration
}

// mark labels r's operation with d's base, and keeps it at least the
// window and the margin after it ends, so that a later call finds it for
// as long as its key holds.
func (d *derivedCall) mark(r *once.Request) {
	if d == nil {
		return
	}
	if r.Labels == nil {
		r.Labels = map[string]string{}
	}
	r.Labels[derivedLabel] = d.base
	keep := int32(math.Ceil((d.window + derivedMargin).Seconds()))
	ttl := cmp.Or(r.TTLSecondsAfterFinished, new(once.DefaultTTLSecondsAfterFinished))
	if *ttl >= 0 && *ttl < keep {
		r.TTLSecondsAfterFinished = &keep
	}
}

// callKey is the key of a call by c, unscoped: the key the operation
// derives from the arguments when it derives them (with what its
// operation then carries), the caller's key otherwise. A tool that does
// not exist or that the caller may not read leaves the caller's key to
// decide. A retry goes to its operation whatever became of the tool. An
// answer instead of a key refuses the call. A call may carry its host's
// answer about an operation (answering, its name). It goes to that
// operation if it is one of these arguments', whether or not its key
// still holds. The question invited the answer, at whatever time the user
// gives it.
func (g *Gateway) callKey(ctx context.Context, c *caller, ns string, ref v1.ToolReference, operation, key string,
	params json.RawMessage, name, answering string, tool v1.GenericTool, toolErr error) (string, *derivedCall,
	*mcp.CallToolResult) {
	rule, err := derivedKeyRule(tool, toolErr, operation)
	if err != nil {
		// Reading the rule failed for a while (a timeout, throttling):
		// guessing it could give a retry another key.
		return "", nil, errorAnswer(err)
	}
	if rule == nil {
		if key == "" {
			return "", nil, toolError(codeKeyRequired, missingKey(name), nil)
		}
		return key, nil, nil
	}
	window, retention := rule.Window.Duration, cmp.Or(g.cfg.Retention, v1.DefaultRetention)
	if window > retention {
		return "", nil, toolError(codeUnknownTool, fmt.Sprintf("%s derives its keys within %s, longer than the %s "+
			"this gateway keeps outcomes (--retention): a retry after the outcome is forgotten would act again; "+
			"nothing was done", name, window, retention), nil)
	}
	oc := g.onceClient(c.kube)
	use := func(k string) (once.KeyUse, bool, error) {
		return oc.Use(ctx, g.operationRequest(ns, ref, operation, ScopedKey(c.user, k), params, c.user))
	}
	if key != "" {
		// A call made with the caller's key before the operation derived
		// its keys: its retry keeps that key.
		if _, ok, err := use(key); err != nil || ok {
			return key, nil, keyRefusal(err, name)
		}
	}
	base, err := derivedBase(c.user, ref, operation, params)
	if err != nil {
		return "", nil, toolError(codeInvalidArguments, err.Error(), nil)
	}
	listed, err := g.derivedUses(ctx, c, ns, ref, operation, params, base)
	if err != nil {
		return "", nil, listRefusal(err, name)
	}
	for s := range listed {
		if k, err := DerivedKey(params, s); err == nil && answering != "" &&
			once.ObjectName(ref, operation, ScopedKey(c.user, k)) == answering {
			return k, &derivedCall{base: base, window: window}, nil
		}
	}
	slot, err := derivedSlot(g.cfg.Clock.Now(), window, listed, func(slot int64) (once.KeyUse, bool, error) {
		k, err := DerivedKey(params, slot)
		if err != nil {
			return once.KeyUse{}, false, err
		}
		return use(k)
	})
	if err != nil {
		return "", nil, keyRefusal(err, name)
	}
	derived, err := DerivedKey(params, slot)
	if err != nil {
		return "", nil, toolError(codeInvalidArguments, err.Error(), nil)
	}
	return derived, &derivedCall{base: base, window: window}, nil
}

// derivedUses lists, as the caller, its operations labeled with base. It
// returns, by slot, the use of each that is what the label says: a derived
// key of these arguments, for this tool and operation, under the name the
// gateway gives it. A label is not proof: anyone who may create
// operations can write one.
func (g *Gateway) derivedUses(ctx context.Context, c *caller, ns string, ref v1.ToolReference, operation string,
	params json.RawMessage, base string) (map[int64]once.KeyUse, error) {
	var ops v1.SideEffectOperationList
	if err := c.kube.List(ctx, &ops, client.InNamespace(ns), client.MatchingLabels{derivedLabel: base}); err != nil {
		return nil, err
	}
	digest, err := argumentsDigest(params)
	if err != nil {
		return nil, err
	}
	prefix := ScopedKey(c.user, derivedPrefix+digest+"/")
	uses := map[int64]once.KeyUse{}
	for i := range ops.Items {
		op := &ops.Items[i]
		n, ok := strings.CutPrefix(op.Spec.IdempotencyKey, prefix)
		if !ok || op.Spec.ToolRef.EffectiveKind() != ref.EffectiveKind() || op.Spec.ToolRef.Name != ref.Name ||
			op.Spec.Operation != operation || op.Name != once.ObjectName(ref, operation, op.Spec.IdempotencyKey) {
			continue
		}
		slot, err := strconv.ParseInt(n, 10, 64)
		if err != nil || strconv.FormatInt(slot, 10) != n {
			continue
		}
		uses[slot] = once.OperationUse(op)
	}
	return uses, nil
}

// derivedKeyRule is the operation's rule for derived keys, from the tool
// readTool read: nil when it has none, or when the tool does not exist or
// the caller may not read it.
func derivedKeyRule(tool v1.GenericTool, err error, operation string) (*v1.DerivedKey, error) {
	switch {
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	if op := tool.GetSpec().Operation(operation); op != nil {
		return op.DerivedKey, nil
	}
	return nil, nil
}

// listRefusal is the answer to a call whose operations cannot be listed;
// nil for no error.
func listRefusal(err error, name string) *mcp.CallToolResult {
	if apierrors.IsForbidden(err) {
		return toolError(codeForbidden, fmt.Sprintf("%s derives its keys from the arguments, and to find the "+
			"operation an earlier call with the same arguments made, whatever its age, the gateway lists your "+
			"operations as you: %v; nothing was done. A caller of such a tool needs list on sideeffectoperations",
			name, err), nil)
	}
	return keyRefusal(err, name)
}

// keyRefusal is the answer to a call whose key's use cannot be read;
// nil for no error.
func keyRefusal(err error, name string) *mcp.CallToolResult {
	switch {
	case err == nil:
		return nil
	case apierrors.IsForbidden(err):
		return toolError(codeForbidden, fmt.Sprintf("%s derives its keys from the arguments, and to know whether "+
			"a call is a retry the gateway reads, as you, the operation and then its scope's record: %v; nothing was "+
			"done. A caller of such a tool needs get on sideeffectoperations and idempotencyrecords", name, err), nil)
	}
	return errorAnswer(err)
}
