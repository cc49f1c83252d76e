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
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/pkg/once"
)

// Keys derived from the arguments (spec.operations[].derivedKey).
//
// A model that retries a call may mint a new key for it: a key the caller
// never sends again protects nothing. For an operation that opts in, the
// gateway ignores the caller's key and derives one from the arguments, so
// that calls by one caller with the same arguments within a window are one
// request. The caller, the tool and the operation are in the key's scope
// already (ScopedKey, and the operation's scope); the derived part is the
// digest of the canonical arguments and the number of the window.
//
// The window is fixed to the first call's time, without state of its own.
// Time is cut into slots as long as the window, and a key is named after
// the slot of the call that first used it. A call takes the key, among
// those of the slots around its own, whose first use is less than a window
// (and a margin) ago, the oldest if several are; the key of its own slot
// if none is. The first use is found for as long as the outcome is kept
// (the operation, then its scope's record), which is why a window never
// exceeds the retention. The margin covers what the first use's record
// loses: creation times are kept to the second, and the gateway's replicas
// read their own clocks.
//
// What this cannot tell apart: two calls that both find no key (neither
// sees the other's operation yet) and fall on either side of a slot's end
// take two keys. A retry is never such a call, since it comes after the
// first call's operation was made; two requests sent at the same moment
// with the same arguments may be.

// derivedMargin is what a window is lengthened by: a second of creation
// times kept to the second, and a second of the replicas' clocks apart.
const derivedMargin = 2 * time.Second

// derivedPrefix starts every derived key. A caller may send a key of this
// form to an operation that does not derive its keys: it is that caller's
// key like any other, in that operation's scope.
const derivedPrefix = "derived/"

// DerivedKey is the key of a call whose arguments are params, in slot n of
// a window: derived/<digest>/<n>, the digest 32 hex digits of the SHA-256
// of the canonical arguments.
func DerivedKey(params json.RawMessage, n int64) (string, error) {
	canonical, err := protocol.Canonical(params)
	if err != nil {
		return "", fmt.Errorf("the arguments cannot be read as JSON: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return fmt.Sprintf("%s%s/%d", derivedPrefix, hex.EncodeToString(sum[:16]), n), nil
}

// Slot is the number of the slot of a window that t falls in.
func Slot(t time.Time, window time.Duration) int64 {
	return t.UnixNano() / int64(window)
}

// derivedSlot is the slot whose key a call at now takes: the oldest of
// the slots around now's whose key was first used less than a window and
// the margin ago, or now's slot if none was. firstUsed says when a slot's
// key was first used, and false when it was not.
func derivedSlot(now time.Time, window time.Duration,
	firstUsed func(slot int64) (time.Time, bool, error)) (int64, error) {
	n := Slot(now, window)
	// A key first used less than a window and the margin ago is of slot
	// n-2 at the oldest (a window is far longer than the margin), and of
	// slot n+1 at the newest (a replica whose clock is ahead).
	for s := n - 2; s <= n+1; s++ {
		first, used, err := firstUsed(s)
		if err != nil {
			return 0, err
		}
		if used && now.Before(first.Add(window+derivedMargin)) {
			return s, nil
		}
	}
	return n, nil
}

// callKey is the key of a call by c, unscoped: the key the operation
// derives from the arguments when it derives them, the caller's key
// otherwise. A tool that does not exist or that the caller may not read
// leaves the caller's key to decide (a retry goes to its operation
// whatever became of the tool); an answer instead of a key refuses the
// call.
func (g *Gateway) callKey(ctx context.Context, c *caller, ns string, ref v1.ToolReference, operation, key string,
	params json.RawMessage, name string, tool v1.GenericTool, toolErr error) (string, *mcp.CallToolResult) {
	rule, err := derivedKeyRule(tool, toolErr, operation)
	if err != nil {
		// Reading the rule failed for a while (a timeout, throttling):
		// guessing it could give a retry another key.
		return "", errorAnswer(err)
	}
	if rule == nil {
		if key == "" {
			return "", toolError(codeKeyRequired, missingKey(name), nil)
		}
		return key, nil
	}
	window, retention := rule.Window.Duration, cmp.Or(g.cfg.Retention, v1.DefaultRetention)
	if window > retention {
		return "", toolError(codeUnknownTool, fmt.Sprintf("%s derives its keys within %s, longer than the %s this "+
			"gateway keeps outcomes (--retention): a retry after the outcome is forgotten would act again; nothing was "+
			"done", name, window, retention), nil)
	}
	oc := once.New(c.kube)
	used := func(k string) (time.Time, bool, error) {
		return oc.FirstUsed(ctx, g.operationRequest(ns, ref, operation, ScopedKey(c.user, k), params, c.user))
	}
	if key != "" {
		// A call made with the caller's key before the operation derived
		// its keys: its retry keeps that key.
		if _, ok, err := used(key); err != nil || ok {
			return key, keyRefusal(err, name)
		}
	}
	slot, err := derivedSlot(time.Now(), window, func(slot int64) (time.Time, bool, error) {
		k, err := DerivedKey(params, slot)
		if err != nil {
			return time.Time{}, false, err
		}
		return used(k)
	})
	if err != nil {
		return "", keyRefusal(err, name)
	}
	derived, err := DerivedKey(params, slot)
	if err != nil {
		return "", toolError(codeInvalidArguments, err.Error(), nil)
	}
	return derived, nil
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

// keyRefusal is the answer to a call whose key's first use cannot be read;
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
