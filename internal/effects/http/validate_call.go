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

package http

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	nethttp "net/http"
	"strings"

	"github.com/once-dev/once/internal/effects"
)

// The defaults of a validate's expressions, as the API server sets them.
const (
	defaultValid   = "response.status >= 200 && response.status < 300"
	defaultInvalid = "response.status >= 400 && response.status < 500 && response.status != 408 && response.status != 429"
)

// maxRefusal bounds the explanation of a refusal, or of an answer that
// decides nothing.
const maxRefusal = 512

// Validate asks the tool whether it would accept req, with no effect: the
// operation's validate request, sent once. Invalid is the tool's own
// refusal. It is also what Execute would fail for good without sending:
// no such operation, parameters the request cannot be built from, an
// address the egress policy refuses. An answer that decides nothing, or
// none, is Undecided, to ask again later.
func (c *Client) Validate(ctx context.Context, req effects.Request) effects.ValidateResult {
	r := c.validate(ctx, req)
	r.Message = c.scrub.string(r.Message)
	return r
}

// validate is Validate before the scrubber.
func (c *Client) validate(ctx context.Context, req effects.Request) effects.ValidateResult {
	op := c.spec.Operation(req.Operation)
	if op == nil {
		return refused(fmt.Sprintf("the tool offers no operation %q", req.Operation))
	}
	v := op.Validate
	if v == nil {
		return effects.ValidateResult{Verdict: effects.ValidateNotOffered}
	}
	in := requestView(req)
	// Shaped as the operation's request unless the validate has a shape of
	// its own, so that the tool judges the values that would be sent.
	o, err := c.shape(ctx, cmp.Or(v.Method, nethttp.MethodPost), v.Path, cmp.Or(v.Request, op.Request), req, in)
	if errors.Is(err, errTimeLimit) {
		return undecided("the validate request is not built yet: " + err.Error())
	}
	if err != nil {
		return refused("the validate request cannot be built: " + err.Error())
	}
	resp, sent, err := c.do(ctx, o, req)
	switch {
	case errors.Is(err, ErrEgressRefused):
		return refused("the validate request never left: " + err.Error())
	case err != nil && !sent:
		return undecided("the validate request never left: " + err.Error())
	case err != nil:
		return undecided("no answer to the validate request: " + err.Error())
	}
	r := effects.ValidateResult{HTTPStatus: int32(resp.Status)}
	view := resp.cel(in)
	valid, validErr := c.compiler.Bool(ctx, cmp.Or(v.Valid, defaultValid), view)
	if validErr == nil && valid {
		r.Verdict = effects.ValidateValid
		return r
	}
	// A valid expression that fails on a refusal's body (a field only a
	// success has) does not hide the refusal.
	invalid, invalidErr := c.compiler.Bool(ctx, cmp.Or(v.Invalid, defaultInvalid), view)
	if invalidErr == nil && invalid {
		r.Verdict, r.Message = effects.ValidateInvalid, c.refusal(ctx, v.Message, resp, resp.kept(in))
		return r
	}
	r.Verdict = effects.ValidateUndecided
	r.Message = "the answer decides nothing: " + resp.describe(maxRefusal)
	for _, err := range []error{validErr, invalidErr} {
		if err != nil {
			r.Message += "; " + err.Error()
		}
	}
	return r
}

// refusal explains a refusal: what the message expression extracts, or
// else the status and the start of the body.
func (c *Client) refusal(ctx context.Context, expr string, resp answer, view response) string {
	if expr == "" {
		return resp.describe(maxRefusal)
	}
	s, err := c.compiler.String(ctx, expr, view)
	if err != nil {
		return resp.describe(maxRefusal) + "; " + err.Error()
	}
	if s = strings.TrimSpace(s); s == "" {
		return resp.describe(maxRefusal)
	}
	return shorten(c.scrub.string(s), maxRefusal)
}

func refused(msg string) effects.ValidateResult {
	return effects.ValidateResult{Verdict: effects.ValidateInvalid, Message: msg}
}

func undecided(msg string) effects.ValidateResult {
	return effects.ValidateResult{Verdict: effects.ValidateUndecided, Message: msg}
}
