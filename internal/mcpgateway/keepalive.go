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
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/once-dev/once/pkg/once"
)

// How a client learns that its gateway died mid-call (docs/mcp.md, "When
// the gateway dies mid-call"). A stateless gateway cannot serve a stream
// resumed with Last-Event-ID, so its event streams carry no event ids, and
// a client's only signs are the connection's end and the gateway's silence:
//
//   - A call that asked for no progress is answered as one JSON body. A
//     gateway that dies takes the connection with it, and the client's
//     pending POST fails at once. The TypeScript SDK's client learns only
//     this way. It leaves a call whose event stream broke waiting for its
//     request timeout.
//   - A call that asked for progress is answered as an event stream. The
//     stream carries a progress notification at least every
//     KeepAliveInterval. So a client may give up on a call after a few
//     intervals of silence (a host's idle timeout) without giving up on a
//     long one.

// KeepAliveInterval is the longest a call that asked for progress goes
// without a progress notification while its gateway lives.
const KeepAliveInterval = 3 * time.Second

// responseMode serves a POST whose JSON-RPC request asks for progress (a
// params._meta.progressToken) with stream, an event stream; anything else
// with single, which answers one JSON body.
func responseMode(stream, single http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			stream.ServeHTTP(w, r)
			return
		}
		// Read no more than the SDK is told to accept; it reads the rest,
		// and answers a body over its limit.
		head, err := io.ReadAll(io.LimitReader(r.Body, MaxRequestBodyBytes+1))
		r.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(head), r.Body), Closer: r.Body}
		if err == nil && asksProgress(head) {
			stream.ServeHTTP(w, r)
			return
		}
		single.ServeHTTP(w, r)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// asksProgress reports whether a JSON-RPC message, or a batch of them,
// holds a request that asks for progress.
func asksProgress(body []byte) bool {
	type message struct {
		Params struct {
			Meta struct {
				ProgressToken json.RawMessage `json:"progressToken"`
			} `json:"_meta"`
		} `json:"params"`
	}
	var batch []message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &batch) != nil {
			return false
		}
	} else {
		var m message
		if json.Unmarshal(trimmed, &m) != nil {
			return false
		}
		batch = []message{m}
	}
	for _, m := range batch {
		if t := m.Params.Meta.ProgressToken; len(t) > 0 && string(t) != "null" {
			return true
		}
	}
	return false
}

// progressNotifier sends a progress notification for every change that
// Do or DoSaga reports, when the client asked for progress, and repeats
// the last one whenever KeepAliveInterval passed without one, until ctx
// ends.
func progressNotifier(ctx context.Context, req *mcp.CallToolRequest) func(once.Progress) {
	token := req.Params.GetProgressToken()
	if token == nil || req.Session == nil {
		return nil
	}
	notify := keepAlive(ctx, KeepAliveInterval, func(progress float64, msg string) {
		_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: progress, Message: msg,
		})
	})
	return func(p once.Progress) { notify(progressMessage(p)) }
}

// keepAlive returns a function that sends a message at once, with a
// progress greater than any before; until ctx ends, it sends the last
// message again, marked as a wait, whenever interval passed without a send.
func keepAlive(ctx context.Context, interval time.Duration, send func(progress float64, msg string)) func(msg string) {
	var (
		mu   sync.Mutex
		n    int
		last = "waiting for the outcome"
	)
	sendLocked := func(msg string) {
		if ctx.Err() != nil {
			return
		}
		n++
		send(float64(n), msg)
	}
	t := time.NewTimer(interval)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				mu.Lock()
				sendLocked("still waiting: " + last)
				t.Reset(interval)
				mu.Unlock()
			}
		}
	}()
	return func(msg string) {
		mu.Lock()
		defer mu.Unlock()
		last = msg
		sendLocked(msg)
		t.Reset(interval)
	}
}
