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

package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Client reads the ledger of, and sets faults on, a running sandbox. It is
// meant for test suites.
type Client struct {
	// BaseURL is the sandbox address, e.g. "http://127.0.0.1:8090".
	BaseURL string
	// HTTP is the client to use; nil means http.DefaultClient.
	HTTP *http.Client
}

// APIError is a non-2xx answer from the sandbox.
type APIError struct {
	StatusCode int
	Code       string // the "error" field of the body
	Message    string // the "message" field of the body
}

func (e *APIError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("sandbox: status %d: %s: %s", e.StatusCode, e.Code, e.Message)
	}
	return fmt.Sprintf("sandbox: status %d: %s", e.StatusCode, e.Code)
}

// Summary returns the ledger summary.
func (c *Client) Summary(ctx context.Context) (Summary, error) {
	var sum Summary
	err := c.do(ctx, http.MethodGet, "/ledger/summary", nil, &sum)
	return sum, err
}

// Effects returns every effect in the ledger, in order.
func (c *Client) Effects(ctx context.Context) ([]Effect, error) {
	var list effectList
	err := c.do(ctx, http.MethodGet, "/ledger", nil, &list)
	return list.Effects, err
}

// KeyEffects returns the effects recorded with an Idempotency-Key.
func (c *Client) KeyEffects(ctx context.Context, key string) ([]Effect, error) {
	var list effectList
	err := c.do(ctx, http.MethodGet, "/ledger/keys/"+url.PathEscape(key), nil, &list)
	return list.Effects, err
}

// SetFaults replaces the fault rules and reseeds their random source.
func (c *Client) SetFaults(ctx context.Context, seed int64, rules []FaultRule) error {
	if rules == nil {
		rules = []FaultRule{}
	}
	return c.do(ctx, http.MethodPut, "/admin/faults", faultConfig{Seed: seed, Rules: rules}, nil)
}

// Faults returns the fault rules with their counters.
func (c *Client) Faults(ctx context.Context) (FaultState, error) {
	var st FaultState
	err := c.do(ctx, http.MethodGet, "/admin/faults", nil, &st)
	return st, err
}

// ClearFaults removes every fault rule.
func (c *Client) ClearFaults(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/admin/faults", nil, nil)
}

// Reset clears the ledger, objects and keys.
func (c *Client) Reset(ctx context.Context) error {
	return c.do(ctx, http.MethodDelete, "/ledger", nil, nil)
}

// Sink returns what the named sink saw.
func (c *Client) Sink(ctx context.Context, name string) (SinkState, error) {
	var st SinkState
	err := c.do(ctx, http.MethodGet, "/sink/"+url.PathEscape(name), nil, &st)
	return st, err
}

// SetSinkFaults sets the faults the named sink applies to its next
// deliveries.
func (c *Client) SetSinkFaults(ctx context.Context, name string, f SinkFaults) error {
	return c.do(ctx, http.MethodPut, "/sink/"+url.PathEscape(name)+"/faults", f, nil)
}

// ResetSink forgets what the named sink saw, and its faults.
func (c *Client) ResetSink(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/sink/"+url.PathEscape(name), nil, nil)
}

// do sends in as JSON (when not nil) and decodes a 2xx answer into out
// (when not nil). Other answers become an *APIError.
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(c.BaseURL, "/")+path, body)
	if err != nil {
		return fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	httpClient := c.HTTP
	if httpClient == nil {
		httpClient = http.DefaultClient
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("sandbox %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("read %s %s: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e errorBody
		_ = json.Unmarshal(data, &e)
		return &APIError{StatusCode: resp.StatusCode, Code: e.Error, Message: e.Message}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode %s %s: %w", method, path, err)
	}
	return nil
}
