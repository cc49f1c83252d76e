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
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	nethttp "net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// maxBody bounds what is read of an answer, and so what CEL sees of it:
// a longer body is cut there, and CEL sees the cut body as text.
const maxBody = 64 << 10

// cutSlack is read beyond maxBody, so that a secret the cut would split is
// found whole, and what of it lies before the cut is scrubbed.
const cutSlack = 16 << 10

// maxHeaderBytes bounds the headers of an answer.
const maxHeaderBytes = 64 << 10

// keyPlaceholder in an operation's or a lookup's path is replaced by the
// idempotency key.
const keyPlaceholder = "{idempotencyKey}"

// Client calls one tool. It is made per call by the Connector, with the
// header values it read; it never logs them, and its scrubber removes them
// from all it returns.
type Client struct {
	spec     *v1.ToolSpec
	headers  nethttp.Header
	http     *nethttp.Client
	compiler *Compiler
	scrub    *scrubber
	// secretValues are the tool's secretValues, for request shapes only.
	secretValues map[string]string
	// secrets are the values read from Secrets, and token the OAuth2
	// token source, if the tool has one: each request fetches its token
	// within its own deadline, and the token joins the scrubbed values.
	secrets []string
	token   *tokenSource
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
		scrub:    newScrubber(nil),
	}
}

// NewTransport returns the transport effect calls need: HTTP/1.1 and no
// connection reuse. net/http replays a request on a reused connection that
// failed, when the request carries an Idempotency-Key header. Without
// reuse there is no replay. Nor can a stale pooled connection turn a
// request that never left into one whose outcome is unknown. A connection of its
// own also carries the request's fence (effects.Request.Fence) to its
// last moment: the write.
//
// It dials only the addresses egress allows (nil: the built-in refusals),
// checked on the address dialled, after name resolution. It uses no proxy
// from the environment: the check must see the tool's own address.
func NewTransport(egress *Egress) *nethttp.Transport {
	t := nethttp.DefaultTransport.(*nethttp.Transport).Clone()
	t.Proxy = nil
	t.DialContext = dialFenced(egress.dialer().DialContext)
	t.MaxResponseHeaderBytes = maxHeaderBytes
	t.DisableKeepAlives = true
	t.ForceAttemptHTTP2 = false
	t.Protocols = new(nethttp.Protocols)
	t.Protocols.SetHTTP1(true)
	// Offer HTTP/1.1 alone in the TLS handshake: a tool that speaks
	// HTTP/2 would pick it, and then be written HTTP/1.1.
	t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	return t
}

// Execute sends the operation once. See effects.Client for the contract.
func (c *Client) Execute(ctx context.Context, req effects.Request) protocol.CallResult {
	r, raw := c.execute(ctx, req)
	return c.scrub.call(r, raw)
}

// Lookup asks the tool whether the effect of req.Key exists.
func (c *Client) Lookup(ctx context.Context, req effects.Request) protocol.LookupResult {
	r, raw := c.lookup(ctx, req)
	return c.scrub.lookup(r, raw)
}

// execute is Execute before the scrubber: it returns the result the
// mapping selected as JSON, not yet canonical.
//
// A request the egress policy refused never left, and never will while the
// tool's address stays where it is: it fails for good (Permanent), which is
// safe because the tool never saw it. It is neither retried nor an unknown
// outcome.
func (c *Client) execute(ctx context.Context, req effects.Request) (protocol.CallResult, []byte) {
	op := c.spec.Operation(req.Operation)
	if op == nil {
		return protocol.CallResult{Outcome: v1.OutcomePermanent,
			Message: fmt.Sprintf("tool offers no operation %q", req.Operation)}, nil
	}
	// The parameters are decoded once, for the request and the answer.
	in := requestView(req)
	o, err := c.shape(ctx, cmp.Or(op.Method, nethttp.MethodPost), op.Path, op.Request, req, in)
	if errors.Is(err, errTimeLimit) {
		// Nothing was sent, and a starved CPU decides nothing.
		return protocol.CallResult{Outcome: v1.OutcomeRetryable,
			Message: "the request is not built yet: " + err.Error()}, nil
	}
	if err != nil {
		// Nothing was sent: the request cannot be built from these
		// parameters, and will not be on a retry.
		return protocol.CallResult{Outcome: v1.OutcomePermanent,
			Message: "the request cannot be built: " + err.Error()}, nil
	}
	r := protocol.CallResult{Request: o.sent()}
	resp, sent, err := c.do(ctx, o, req)
	switch {
	case errors.Is(err, ErrEgressRefused):
		r.Outcome, r.Message = v1.OutcomePermanent, "request never left: "+err.Error()
		return r, nil
	case err != nil && !sent:
		r.Outcome, r.Message = v1.OutcomeRetryable, "request never left: "+err.Error()
		return r, nil
	case err != nil:
		r.Outcome, r.Message = v1.OutcomeUnknown, "no answer after the request was sent: "+err.Error()
		return r, nil
	}
	r.HTTPStatus = int32(resp.Status)
	r.RetryAfter = resp.RetryAfter
	view := resp.cel(in)
	var ruled bool
	r.Outcome, r.Relayed, ruled = c.classify(ctx, op, resp.Status, view, req.Mode)
	r.Replayed = c.replayed(ctx, view)
	r.Message = resp.summary()
	if r.Outcome != v1.OutcomeSucceeded {
		return r, nil
	}
	// A success by the default table must look like the tool's; one that
	// a rule of the tool's author names is theirs to vouch for.
	if !ruled {
		// Decided on the answer as received, as the rest: the scrubber
		// never turns the tool's success into a page.
		if why := c.notTheTools(ctx, op, resp, view); why != "" {
			// A success the tool would not give proves nothing: an
			// effect may or may not stand behind the page in front of it.
			r.Outcome, r.Relayed = v1.OutcomeUnknown, false
			r.Message = fmt.Sprintf("a %d answer that is not the tool's (%s): %s", resp.Status, why, r.Message)
			return r, nil
		}
	}
	raw := c.extract(ctx, op, resp.kept(in), &r.ExternalObjectID, &r.ExternalRequestID, &r.Message)
	return r, raw
}

// notTheTools says why a successful answer is not one the tool gives: it
// lacks the format of the operation's mapping, or its external id cannot
// be read from it. It returns "" for the tool's answer.
func (c *Client) notTheTools(ctx context.Context, op *v1.ToolOperation, resp answer, view response) string {
	m := op.Response
	empty := len(bytes.TrimSpace(resp.Body)) == 0
	switch m.Format {
	case v1.FormatNone:
		if !empty {
			return "the operation's success has no body, and this one has " + bodyKind(resp)
		}
		return ""
	case v1.FormatText:
	default:
		switch {
		case resp.JSON:
		case resp.Cut && startsLikeJSON(resp.Body):
			// Cut at the limit, it cannot be decoded, nor an id read
			// from it; its start still tells JSON from a page.
			return ""
		case empty && m.ExternalObjectID == "" &&
			(resp.Status == nethttp.StatusNoContent || resp.Status == nethttp.StatusAccepted):
			// "Done, nothing to say" (a DELETE's 204): no page in front
			// of a tool answers so.
			return ""
		default:
			return "the operation's success is JSON, and this body is " + bodyKind(resp)
		}
	}
	if m.ExternalObjectID != "" {
		if id, err := c.compiler.String(ctx, m.ExternalObjectID, view); err != nil || id == "" {
			return "response.externalObjectID reads no id from it"
		}
	}
	return ""
}

// startsLikeJSON reports whether b opens a JSON object or array.
func startsLikeJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

// bodyKind names what a body that is not JSON is, for a message.
func bodyKind(a answer) string {
	ct := a.Headers["content-type"]
	switch {
	case len(bytes.TrimSpace(a.Body)) == 0:
		return "empty"
	case ct != "":
		return ct
	}
	return "not JSON"
}

// lookup is Lookup before the scrubber, as execute is Execute.
func (c *Client) lookup(ctx context.Context, req effects.Request) (protocol.LookupResult, []byte) {
	op := c.spec.Operation(req.Operation)
	if op == nil || op.Lookup == nil {
		return protocol.LookupResult{Verdict: protocol.VerdictUndecidable,
			Message: fmt.Sprintf("operation %q has no lookup", req.Operation)}, nil
	}
	l := op.Lookup
	in := requestView(req)
	o, err := c.shape(ctx, cmp.Or(l.Method, nethttp.MethodGet), l.Path, l.Request, req, in)
	if err != nil {
		return protocol.LookupResult{Verdict: protocol.VerdictUndecidable,
			Message: "the lookup cannot be built: " + err.Error()}, nil
	}
	r := protocol.LookupResult{Verdict: protocol.VerdictUndecidable, Request: o.sent()}
	resp, _, err := c.do(ctx, o, req)
	if err != nil {
		r.Message = "lookup failed: " + err.Error()
		return r, nil
	}
	r.HTTPStatus = int32(resp.Status)
	r.Message = resp.summary()
	view := resp.cel(in)
	// Without an expression, nothing the tool says proves either: a 200
	// also comes from an ingress's default page, a bare 404 from a gateway
	// for a route that does not exist.
	found, foundErr := c.proves(ctx, l.Found, view)
	absent, absentErr := c.proves(ctx, l.Absent, view)
	for _, err := range []error{foundErr, absentErr} {
		if err != nil {
			r.Message += "; " + err.Error()
		}
	}
	switch {
	case foundErr != nil:
		// A found that failed said nothing: "absent" on its silence would
		// be a guess, and a guess here makes a second effect. (An absent
		// that failed does not undo what found proves.)
	case found && absent:
		r.Message += "; both found and absent accept this answer, so it proves neither"
	case found:
		r.Verdict = protocol.VerdictFound
		return r, c.extract(ctx, op, resp.kept(in), &r.ExternalObjectID, &r.ExternalRequestID, &r.Message)
	case absent:
		r.Verdict = protocol.VerdictAbsent
	}
	return r, nil
}

// proves evaluates a lookup's expression; an empty one proves nothing.
func (c *Client) proves(ctx context.Context, expr string, view response) (bool, error) {
	if expr == "" {
		return false, nil
	}
	return c.compiler.Bool(ctx, expr, view)
}

// answer is a response read in full, up to maxBody, as it was received.
// Decisions (found, absent, outcome rules, replayed, valid, invalid) run on
// what the tool said (cel): a secret that also occurs in the key must not
// hide the key from a lookup. What is kept (ids, results, messages) is
// mapped from the answer scrubbed (kept) and scrubbed again on its way out.
type answer struct {
	Status     int
	StatusText string
	Headers    map[string]string
	// Body is the body, up to maxBody.
	Body []byte
	// Decoded is the body as JSON decodes it, or its text if it is not
	// JSON or was cut.
	Decoded any
	// JSON is true when the body is JSON.
	JSON bool
	// Cut is true when the body was longer than maxBody.
	Cut bool
	// read is what was read of a cut body: Body and up to cutSlack more,
	// so that the scrubber finds a secret that the cut splits.
	read       []byte
	RetryAfter time.Duration
	// scrub is applied to every description of the answer.
	scrub *scrubber
}

// cel is the answer as decisions see it: as received.
func (a answer) cel(in request) response {
	return response{Status: a.Status, Headers: a.Headers, Body: a.Decoded, request: in}
}

// kept is the answer as mappings see it, whose values are kept. It is
// scrubbed, with the key and the parameters scrubbed the same way. So a
// mapping that compares them still matches. One that transforms an echoed
// secret (a substring, a change of case) finds none.
func (a answer) kept(in request) response {
	if !a.scrub.active() {
		return a.cel(in)
	}
	headers := make(map[string]string, len(a.Headers))
	for k, v := range a.Headers {
		headers[k] = a.scrub.string(v)
	}
	in.Key, in.Parameters = a.scrub.string(in.Key), a.scrub.value(in.Parameters)
	body := a.scrub.value(a.Decoded)
	if a.Cut {
		body = strings.ToValidUTF8(a.keptText(), "")
	}
	return response{Status: a.Status, Headers: headers, Body: body, request: in}
}

// keptText is the body as text, scrubbed: a cut body cut where it was,
// with a secret that the cut splits replaced.
func (a answer) keptText() string {
	if a.Cut {
		return a.scrub.upTo(a.read, len(a.Body))
	}
	return a.scrub.string(string(a.Body))
}

// summary is a short, secret-free description: the status and the start
// of the body, re-encoded if it is JSON.
func (a answer) summary() string {
	return a.describe(200)
}

// describe is a summary with up to snippet bytes of the body, scrubbed
// before it is cut, so that no part of a secret shows.
func (a answer) describe(snippet int) string {
	s := a.scrub.string(a.StatusText)
	var text string
	if a.JSON {
		// Scrubbed before it is encoded again: the encoding of a secret
		// need not be one the scrubber knows.
		var b strings.Builder
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(a.scrub.value(a.Decoded)); err == nil {
			text = a.scrub.string(b.String())
		}
	}
	if text == "" {
		text = a.keptText()
	}
	if body := strings.TrimSpace(text); body != "" {
		s += ": " + shorten(body, snippet)
	}
	if a.Cut {
		s += fmt.Sprintf("; body longer than %d KiB: expressions saw only its first %d KiB, as text",
			maxBody>>10, maxBody>>10)
	}
	return s
}

// shorten cuts s to at most n bytes of valid UTF-8, and says so.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}

// do sends one request. sent reports whether the request was written out
// in full: an error before that proves the tool never saw it.
func (c *Client) do(ctx context.Context, o outgoing, req effects.Request) (answer, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, req.Timeout)
	defer cancel()
	// The token first, before the trace and the fence: its request is not
	// the tool's, and an error getting it means the tool saw nothing.
	headers, err := c.authorize(ctx)
	if err != nil {
		return answer{}, false, err
	}
	var wrote atomic.Bool
	ctx, f := withFence(ctx, req.Fence)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) {
			if f != nil {
				f.connected.Store(true)
			}
		},
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				wrote.Store(true)
			}
		},
	})
	body := o.body
	hr, err := nethttp.NewRequestWithContext(ctx, o.method, o.url.String(), bytes.NewReader(body))
	if err != nil {
		return answer{}, false, fmt.Errorf("building request: %w", err)
	}
	// net/http may replay a request that carries an Idempotency-Key header
	// when it can rewind the body. That replay would be an effect nobody
	// claimed: besides the transport's, this is the second guard.
	if len(body) > 0 {
		hr.GetBody = nil
	}
	for name, v := range req.Headers {
		hr.Header.Set(name, v)
	}
	maps.Copy(hr.Header, o.header)
	maps.Copy(hr.Header, headers)
	hr.Header.Set(cmp.Or(c.spec.Idempotency.Header, v1.DefaultIdempotencyHeader), req.Key)
	if len(body) > 0 {
		hr.Header.Set("Content-Type", cmp.Or(o.contentType, "application/json"))
	}
	hr.Header.Set("Accept", "application/json")
	hr.Header.Set("User-Agent", "once")

	resp, err := c.http.Do(hr)
	if err != nil {
		// net/http reports a request written once it is in its buffer; a
		// fence that stopped the flush knows that nothing of it left.
		return answer{}, wrote.Load() && !f.stoppedRequest(), redact(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+cutSlack))
	if err != nil {
		return answer{}, true, fmt.Errorf("reading the answer to %s: %w", resp.Status, redact(err))
	}
	a := answer{Status: resp.StatusCode, StatusText: resp.Status, Headers: map[string]string{}, Body: b,
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), req.Now()), scrub: c.scrub}
	for name := range resp.Header {
		a.Headers[strings.ToLower(name)] = resp.Header.Get(name)
	}
	if len(a.Body) > maxBody {
		// Cut at the limit for decisions, whatever the scrubber knows; what
		// is kept is scrubbed from all that was read, so that it holds no
		// part of a secret the cut splits (keptText).
		a.read, a.Body, a.Cut = a.Body, a.Body[:maxBody], true
		a.Decoded = strings.ToValidUTF8(string(a.Body), "")
	} else {
		a.Decoded, a.JSON = decodeBody(a.Body)
	}
	return a, true, nil
}

// authorize returns the headers of a request: the tool's, with an OAuth2
// token fetched (or reused) within ctx.
func (c *Client) authorize(ctx context.Context) (nethttp.Header, error) {
	if c.token == nil {
		return c.headers, nil
	}
	tok, err := c.token.token(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkSecret(tok.AccessToken); err != nil {
		return nil, fmt.Errorf("auth.oauth2: the token %w", err)
	}
	h := c.headers.Clone()
	tok.SetAuthHeader(&nethttp.Request{Header: h})
	c.scrub = newScrubber(append(slices.Clip(c.secrets), tok.AccessToken, h.Get("Authorization")))
	return h, nil
}

// classify applies the operation's outcome rules, then the default table
// for the mode the attempt was made under. relayed reports a retryable
// answer that a gateway also gives after its upstream committed. Only the
// default table's 408, 502, 503 and 504 for a Native tool are such. A
// tool's own rule vouches for its answer (ruled), as the tool's.
func (c *Client) classify(ctx context.Context, op *v1.ToolOperation, status int, view response,
	mode v1.IdempotencyMode) (outcome v1.Outcome, relayed, ruled bool) {
	for _, rule := range op.Response.Outcomes {
		if ok, err := c.compiler.Bool(ctx, rule.When, view); err == nil && ok {
			return rule.Outcome, false, true
		}
	}
	outcome = DefaultOutcome(status, cmp.Or(mode, c.spec.Idempotency.Mode))
	return outcome, outcome == v1.OutcomeRetryable && status != nethttp.StatusTooManyRequests, false
}

// replayed applies the tool's replayed expression: whether the answer is
// the tool's replay of the first answer to the key.
func (c *Client) replayed(ctx context.Context, view response) bool {
	expr := c.spec.Idempotency.Replayed
	if expr == "" {
		return false
	}
	ok, err := c.compiler.Bool(ctx, expr, view)
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

// extract maps a successful answer to ids and returns the result the
// mapping selects (response.body by default) as JSON; the scrubber makes it
// canonical on its way out. A mapping that fails leaves its field empty and
// says so in the message.
func (c *Client) extract(ctx context.Context, op *v1.ToolOperation, view response,
	objectID, requestID, msg *string) []byte {
	note := func(err error) { *msg += "; " + err.Error() }
	m := op.Response
	if m.ExternalObjectID != "" {
		if s, err := c.compiler.String(ctx, m.ExternalObjectID, view); err != nil {
			note(err)
		} else {
			*objectID = s
		}
	}
	if m.ExternalRequestID != "" {
		if s, err := c.compiler.String(ctx, m.ExternalRequestID, view); err != nil {
			note(err)
		} else {
			*requestID = s
		}
	}
	raw, err := c.compiler.JSON(ctx, cmp.Or(m.Result, "response.body"), view)
	if err != nil {
		note(err)
		return nil
	}
	return raw
}

// url joins the tool's URL and a path, with the key in place of
// {idempotencyKey}: path-escaped before the query, query-escaped in it,
// each place escaped for where it is (placeValue).
func (c *Client) url(path, key string) (*url.URL, error) {
	path = placeValue(path, strings.Trim(keyPlaceholder, "{}"), key)
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
