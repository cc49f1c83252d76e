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
// The window is fixed to the first call's time, without state of its own:
// time is cut into slots as long as the window, and a call in slot n joins
// the key of slot n-1 if that key's first use is less than a window ago, and
// takes the key of slot n otherwise. A key of slot n-2 or earlier was first
// used more than a window ago, so two reads decide. They find the first use
// for as long as the outcome is kept (the operation, then its scope's
// record), which is why a window never exceeds the retention.

// derivedPrefix starts every derived key: a caller's key never takes this
// form, since the gateway ignores callers' keys where it derives them.
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

// derivedSlot is the slot whose key a call at now takes: the previous
// slot's while that key's first use is less than a window ago, the current
// one's otherwise. firstUsed says when a slot's key was first used, and
// false when it was not.
func derivedSlot(now time.Time, window time.Duration,
	firstUsed func(slot int64) (time.Time, bool, error)) (int64, error) {
	n := Slot(now, window)
	first, used, err := firstUsed(n - 1)
	if err != nil {
		return 0, err
	}
	if used && now.Before(first.Add(window)) {
		return n - 1, nil
	}
	return n, nil
}

// callKey is the key of a call by c, unscoped: the key the operation
// derives from the arguments when it derives them, the caller's key
// otherwise. A tool that cannot be read leaves the caller's key to decide
// (a retry goes to its operation whatever became of the tool); an answer
// instead of a key refuses the call.
func (g *Gateway) callKey(ctx context.Context, c *caller, ns string, ref v1.ToolReference, operation, key string,
	params json.RawMessage, name string) (string, *mcp.CallToolResult) {
	var rule *v1.DerivedKey
	if tool, answer := g.usableTool(ctx, c, ref, ns, operation); answer == nil {
		rule = tool.GetSpec().Operation(operation).DerivedKey
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
	firstUsed := func(slot int64) (time.Time, bool, error) {
		k, err := DerivedKey(params, slot)
		if err != nil {
			return time.Time{}, false, err
		}
		return oc.FirstUsed(ctx, g.operationRequest(ns, ref, operation, ScopedKey(c.user, k), params, c.user))
	}
	slot, err := derivedSlot(time.Now(), window, firstUsed)
	if apierrors.IsForbidden(err) {
		return "", toolError(codeForbidden, fmt.Sprintf("%s derives its keys from the arguments, and to know whether "+
			"a call is a retry the gateway reads, as you, the operation and then its scope's record: %v; nothing was "+
			"done. A caller of such a tool needs get on sideeffectoperations and idempotencyrecords", name, err), nil)
	}
	if err != nil {
		return "", errorAnswer(err)
	}
	derived, err := DerivedKey(params, slot)
	if err != nil {
		return "", toolError(codeInvalidArguments, err.Error(), nil)
	}
	return derived, nil
}
