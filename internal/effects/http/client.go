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

// Package http is the HTTP backend of effects: a tool is an HTTP API, an
// operation a method and a path, the parameters the JSON body, and the
// idempotency key a header. CEL expressions from the tool's spec classify
// the answers and extract ids and results.
package http

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	nethttp "net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// maxBody bounds what is read of an answer.
const maxBody = 1 << 20

// keyPlaceholder in an operation's or a lookup's path is replaced by the
// idempotency key.
const keyPlaceholder = "{idempotencyKey}"

// Client calls one tool. It is made per call by the Connector, with the
// header values it read; it never logs them.
type Client struct {
	spec     *v1.ToolSpec
	headers  nethttp.Header
	http     *nethttp.Client
	compiler *Compiler
}

var _ effects.Client = &Client{}

// NewClient returns a Client for spec, sending headers (already resolved)
// through transport. Redirects are not followed: a redirected effect is an
// answer to classify, not a request to repeat.
func NewClient(spec *v1.ToolSpec, headers nethttp.Header, transport nethttp.RoundTripper, compiler *Compiler) *Client {
	return &Client{
		spec:    spec,
		headers: headers,
		http: &nethttp.Client{
			Transport: transport,
			CheckRedirect: func(*nethttp.Request, []*nethttp.Request) error {
				return nethttp.ErrUseLastResponse
			},
		},
		compiler: compiler,
	}
}

// NewTransport returns the transport effect calls need: HTTP/1.1 and no
// connection reuse. net/http replays a request on a reused connection that
// failed, when the request carries an Idempotency-Key header; without reuse
// there is no replay, and a stale pooled connection cannot turn a request
// that never left into one whose outcome is unknown.
func NewTransport() *nethttp.Transport {
	t := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	t.DisableKeepAlives = true
	t.ForceAttemptHTTP2 = false
	t.Protocols = new(nethttp.Protocols)
	t.Protocols.SetHTTP1(true)
	return t
}

// Execute sends the operation once. See effects.Client for the contract.
func (c *Client) Execute(ctx context.Context, req effects.Request) protocol.CallResult {
	op := c.spec.Operation(req.Operation)
	if op == nil {
		return protocol.CallResult{Outcome: v1.OutcomePermanent,
			Message: fmt.Sprintf("tool offers no operation %q", req.Operation)}
	}
	method := cmp.Or(op.Method, nethttp.MethodPost)
	u, err := c.url(op.Path, req.Key)
	if err != nil {
		return protocol.CallResult{Outcome: v1.OutcomePermanent, Message: err.Error()}
	}
	r := protocol.CallResult{Request: method + " " + u.Path}
	resp, sent, err := c.do(ctx, method, u, req, req.Parameters)
	if err != nil {
		r.Outcome, r.Message = v1.OutcomeUnknown, "no answer after the request was sent: "+err.Error()
		if !sent {
			r.Outcome, r.Message = v1.OutcomeRetryable, "request never left: "+err.Error()
		}
		return r
	}
	r.HTTPStatus = int32(resp.Status)
	r.RetryAfter = resp.RetryAfter
	r.Outcome = c.classify(op, resp, req.Mode)
	r.Replayed = c.replayed(resp)
	r.Message = resp.summary()
	if r.Outcome == v1.OutcomeSucceeded {
		c.extract(op, resp, &r.ExternalObjectID, &r.ExternalRequestID, &r.Result, &r.ResultDigest, &r.Message)
	}
	return r
}

// Lookup asks the tool whether the effect of req.Key exists.
func (c *Client) Lookup(ctx context.Context, req effects.Request) protocol.LookupResult {
	op := c.spec.Operation(req.Operation)
	if op == nil || op.Lookup == nil {
		return protocol.LookupResult{Verdict: protocol.VerdictUndecidable,
			Message: fmt.Sprintf("operation %q has no lookup", req.Operation)}
	}
	l := op.Lookup
	method := cmp.Or(l.Method, nethttp.MethodGet)
	u, err := c.url(l.Path, req.Key)
	if err != nil {
		return protocol.LookupResult{Verdict: protocol.VerdictUndecidable, Message: err.Error()}
	}
	r := protocol.LookupResult{Verdict: protocol.VerdictUndecidable, Request: method + " " + u.Path}
	var body []byte
	if method != nethttp.MethodGet {
		body = req.Parameters
	}
	resp, _, err := c.do(ctx, method, u, req, body)
	if err != nil {
		r.Message = "lookup failed: " + err.Error()
		return r
	}
	r.HTTPStatus = int32(resp.Status)
	r.Message = resp.summary()
	found, err := c.compiler.Bool(cmp.Or(l.Found, "response.status == 200"), resp.cel())
	if err != nil {
		r.Message += "; " + err.Error()
		return r
	}
	if found {
		r.Verdict = protocol.VerdictFound
		c.extract(op, resp, &r.ExternalObjectID, &r.ExternalRequestID, &r.Result, &r.ResultDigest, &r.Message)
		return r
	}
	if l.Absent == "" {
		// Nothing the tool says proves absence: a bare 404 also comes from
		// an ingress or a gateway for a route that does not exist.
		return r
	}
	absent, err := c.compiler.Bool(l.Absent, resp.cel())
	if err != nil {
		r.Message += "; " + err.Error()
		return r
	}
	if absent {
		r.Verdict = protocol.VerdictAbsent
	}
	return r
}

// answer is a response read in full (up to maxBody).
type answer struct {
	Status     int
	StatusText string
	Headers    map[string]string
	Body       []byte
	RetryAfter time.Duration
}

func (a answer) cel() response {
	return response{Status: a.Status, Headers: a.Headers, Body: decodeBody(a.Body)}
}

// summary is a short, secret-free description: the status and the start
// of the body.
func (a answer) summary() string {
	s := a.StatusText
	if body := strings.TrimSpace(string(a.Body)); body != "" {
		const snippet = 200
		if len(body) > snippet {
			body = strings.ToValidUTF8(body[:snippet], "") + "..."
		}
		s += ": " + body
	}
	return s
}

// do sends one request. sent reports whether the request was written out
// in full: an error before that proves the tool never saw it.
func (c *Client) do(ctx context.Context, method string, u *url.URL, req effects.Request, body []byte) (answer, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	hr, err := nethttp.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return answer{}, false, fmt.Errorf("building request: %w", err)
	}
	// net/http may replay a request that carries an Idempotency-Key header
	// when it can rewind the body. That replay would be an effect nobody
	// claimed: besides the transport's, this is the second guard.
	if len(body) > 0 {
		hr.GetBody = nil
	}
	maps.Copy(hr.Header, c.headers)
	hr.Header.Set(cmp.Or(c.spec.Idempotency.Header, v1.DefaultIdempotencyHeader), req.Key)
	if len(body) > 0 {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", "once")

	resp, err := c.http.Do(hr)
	if err != nil {
		return answer{}, wrote.Load(), redact(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return answer{}, true, fmt.Errorf("reading the answer to %s: %w", resp.Status, redact(err))
	}
	a := answer{Status: resp.StatusCode, StatusText: resp.Status, Headers: map[string]string{}, Body: b,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	for name := range resp.Header {
		a.Headers[strings.ToLower(name)] = resp.Header.Get(name)
	}
	return a, true, nil
}

// classify applies the operation's outcome rules, then the default table
// for the mode the attempt was made under.
func (c *Client) classify(op *v1.ToolOperation, a answer, mode v1.IdempotencyMode) v1.Outcome {
	for _, rule := range op.Response.Outcomes {
		if ok, err := c.compiler.Bool(rule.When, a.cel()); err == nil && ok {
			return rule.Outcome
		}
	}
	return DefaultOutcome(a.Status, cmp.Or(mode, c.spec.Idempotency.Mode))
}

// replayed applies the tool's replayed expression: whether the answer is
// the tool's replay of the first answer to the key.
func (c *Client) replayed(a answer) bool {
	expr := c.spec.Idempotency.Replayed
	if expr == "" {
		return false
	}
	ok, err := c.compiler.Bool(expr, a.cel())
	return err == nil && ok
}

// DefaultOutcome is DESIGN's error table for an HTTP status, in a mode.
// Only what proves that the request had no effect is retryable: a 429 is
// the tool's own refusal. A gateway answers 502, 503 and 504 (and a proxy
// 408) also after its upstream committed, so they are retryable only where
// a retry is a same-key re-send to a tool that dedupes. A 409 is a Native
// tool's "same key in flight" (the first attempt is still running) or
// another tool's "already exists": both say an effect may exist.
func DefaultOutcome(status int, mode v1.IdempotencyMode) v1.Outcome {
	switch {
	case status >= 200 && status < 300:
		return v1.OutcomeSucceeded
	case status == nethttp.StatusTooManyRequests:
		return v1.OutcomeRetryable
	case status == nethttp.StatusRequestTimeout, status == nethttp.StatusBadGateway,
		status == nethttp.StatusServiceUnavailable, status == nethttp.StatusGatewayTimeout:
		if mode == v1.IdempotencyNative {
			return v1.OutcomeRetryable
		}
		return v1.OutcomeUnknown
	case status == nethttp.StatusConflict:
		return v1.OutcomeUnknown
	case status >= 400 && status < 500:
		return v1.OutcomePermanent
	default:
		// 500 and the rest: the tool may have acted before it failed.
		return v1.OutcomeUnknown
	}
}

// extract maps a successful answer to ids and a result. A mapping that
// fails leaves its field empty and says so in the message.
func (c *Client) extract(op *v1.ToolOperation, a answer, objectID, requestID *string,
	result **runtime.RawExtension, digest *string, msg *string) {
	note := func(err error) { *msg += "; " + err.Error() }
	m := op.Response
	if m.ExternalObjectID != "" {
		if s, err := c.compiler.String(m.ExternalObjectID, a.cel()); err != nil {
			note(err)
		} else {
			*objectID = s
		}
	}
	if m.ExternalRequestID != "" {
		if s, err := c.compiler.String(m.ExternalRequestID, a.cel()); err != nil {
			note(err)
		} else {
			*requestID = s
		}
	}
	raw, err := c.compiler.JSON(cmp.Or(m.Result, "response.body"), a.cel())
	if err != nil {
		note(err)
		return
	}
	canonical, err := protocol.Canonical(raw)
	if err != nil {
		note(err)
		return
	}
	*digest = protocol.Digest(canonical)
	if len(canonical) <= v1.MaxResultBytes {
		*result = &runtime.RawExtension{Raw: canonical}
	} else {
		*msg += fmt.Sprintf("; result of %d bytes not kept (limit %d)", len(canonical), v1.MaxResultBytes)
	}
}

// url joins the tool's URL and a path, with the key in place of
// {idempotencyKey}: path-escaped before the query, query-escaped in it.
func (c *Client) url(path, key string) (*url.URL, error) {
	if i := strings.Index(path, keyPlaceholder); i >= 0 {
		escaped := url.PathEscape(key)
		if q := strings.Index(path, "?"); q >= 0 && q < i {
			escaped = url.QueryEscape(key)
		}
		path = strings.ReplaceAll(path, keyPlaceholder, escaped)
	}
	u, err := url.Parse(strings.TrimRight(c.spec.HTTP.URL, "/") + path)
	if err != nil {
		return nil, fmt.Errorf("tool URL and path %q do not make a URL: %w", path, redact(err))
	}
	return u, nil
}

// retryAfter parses a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := nethttp.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// redact drops user information from URLs in errors.
func redact(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		if u, perr := url.Parse(ue.URL); perr == nil && u.User != nil {
			u.User = nil
			return &url.Error{Op: ue.Op, URL: u.String(), Err: ue.Err}
		}
	}
	return err
}
