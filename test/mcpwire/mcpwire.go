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

// Package mcpwire records what an MCP server writes, as the client
// received it: the Go SDK's client takes results the official TypeScript
// clients refuse, so tests check the JSON itself.
package mcpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Result is one JSON-RPC result, by its request's method.
type Result struct {
	Method string
	Fields map[string]json.RawMessage
}

// Wire is an http.RoundTripper that sends Token as a bearer token and
// records every result of the requests it carries.
type Wire struct {
	Token string

	mu      sync.Mutex
	results []Result
}

// Results are the results recorded, in order.
func (w *Wire) Results() []Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Result(nil), w.results...)
}

// Last is the last result of method, or nil.
func (w *Wire) Last(method string) map[string]json.RawMessage {
	var last map[string]json.RawMessage
	for _, r := range w.Results() {
		if r.Method == method {
			last = r.Fields
		}
	}
	return last
}

// RoundTrip sends r and records the results of its answer: one JSON body,
// or an event stream whose data lines are messages.
func (w *Wire) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+w.Token)
	var req struct {
		Method string `json:"method"`
	}
	if r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		_ = json.Unmarshal(body, &req)
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || req.Method == "" {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	messages := [][]byte{body}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		messages = nil
		s := bufio.NewScanner(bytes.NewReader(body))
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			if data, ok := strings.CutPrefix(s.Text(), "data:"); ok {
				messages = append(messages, []byte(data))
			}
		}
	}
	for _, m := range messages {
		var msg struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if json.Unmarshal(m, &msg) == nil && msg.Result != nil {
			w.mu.Lock()
			w.results = append(w.results, Result{Method: req.Method, Fields: msg.Result})
			w.mu.Unlock()
		}
	}
	return resp, nil
}
