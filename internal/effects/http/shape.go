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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	nethttp "net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// outgoing is one request as Once sends it.
type outgoing struct {
	method string
	url    *url.URL
	body   []byte
	// contentType of a body; JSON if empty.
	contentType string
	// header holds the shaped headers; the tool's own and the key's are
	// set over them.
	header nethttp.Header
	// withheld is the body with each secret value (secrets.<name>) in
	// place of the value, for the evidence; nil when the body holds none.
	withheld []byte
}

// sent says what was sent, for the evidence: the method, the path and a
// digest of the body, never a value of a header or of the body. The
// digest is of the body as the shape builds it with no secret value in it
// (withheld). It tells two attempts that sent different parameters apart.
// It is a function of what whoever reads the operation can read already:
// its parameters, its key, the tool's spec. So nothing is learnt from it
// by guessing, a short PIN included. It does not tell whether two
// attempts sent the same secret values.
func (o outgoing) sent() string {
	s := o.method + " " + o.url.EscapedPath()
	if len(o.body) > 0 {
		body := o.body
		if o.withheld != nil {
			body = o.withheld
		}
		s += " body " + strings.TrimPrefix(protocol.Digest(body), "sha256:")[:12]
	}
	return s
}

// withheldSecrets stands in for the tool's secret values in the body the
// evidence digests: a value of its own for each name.
func withheldSecrets(values map[string]string) map[string]string {
	out := make(map[string]string, len(values))
	for name := range values {
		out[name] = "(secret value " + name + ")"
	}
	return out
}

// requestView is the operation as expressions see it.
func requestView(req effects.Request) request {
	var params any
	if len(req.Parameters) > 0 {
		params, _ = decodeBody(req.Parameters)
	}
	if params == nil || params == "" {
		params = map[string]any{}
	}
	return request{Parameters: params, Key: req.Key, Since: req.Since}
}

// shape builds a request, an operation's or its lookup's, as the request
// shape s says. It builds the path with the key and the path values in
// place, the query, the headers and, but for a GET, the body. Without a
// shape, the parameters are the JSON body. An error means nothing was
// sent.
func (c *Client) shape(ctx context.Context, method, path string, s *v1.RequestShape, req effects.Request,
	in request) (outgoing, error) {
	o := outgoing{method: method, header: nethttp.Header{}}
	if method != nethttp.MethodGet {
		o.body = req.Parameters
	}
	if s == nil {
		u, err := c.url(path, req.Key)
		o.url = u
		return o, err
	}
	in.Secrets = c.secretValues
	for _, pv := range s.PathValues {
		v, err := c.compiler.String(ctx, pv.Value, in)
		if err != nil {
			return o, fmt.Errorf("path value %s: %w", pv.Name, err)
		}
		if v == "." || v == ".." {
			// Escaping leaves dots alone, and a server or a proxy on the
			// way resolves them: the request would go to another route.
			return o, fmt.Errorf("path value %s is %q, which names no path segment", pv.Name, v)
		}
		path = placeValue(path, pv.Name, v)
	}
	u, err := c.url(path, req.Key)
	if err != nil {
		return o, err
	}
	q := u.Query()
	for _, qv := range s.Query {
		v, err := c.compiler.String(ctx, qv.Value, in)
		if err != nil {
			return o, fmt.Errorf("query parameter %s: %w", qv.Name, err)
		}
		q.Set(qv.Name, v)
	}
	u.RawQuery = q.Encode()
	o.url = u
	for _, h := range s.Headers {
		v, err := c.compiler.String(ctx, h.Value, in)
		if err != nil {
			return o, fmt.Errorf("header %s: %w", h.Name, err)
		}
		o.header.Set(h.Name, v)
	}
	if s.Body != "" && method != nethttp.MethodGet {
		if o.body, err = c.body(ctx, s, in); err != nil {
			return o, fmt.Errorf("body: %w", err)
		}
		if len(in.Secrets) > 0 {
			// Built again for the evidence, without the secret values; a
			// body that cannot be built so is digested as the empty one.
			in.Secrets = withheldSecrets(in.Secrets)
			if o.withheld, err = c.body(ctx, s, in); err != nil || o.withheld == nil {
				o.withheld = []byte{}
			}
		}
	} else if s.Encoding == v1.BodyForm && len(o.body) > 0 {
		if o.body, err = formEncode(o.body); err != nil {
			return o, fmt.Errorf("body: %w", err)
		}
	}
	if s.Encoding == v1.BodyForm && len(o.body) > 0 {
		o.contentType = "application/x-www-form-urlencoded"
	}
	return o, nil
}

// placeValue puts v in place of {name} in a path: path-escaped before
// the ?, query-escaped after it, so that a value can add no path segment
// and no query parameter.
func placeValue(path, name, v string) string {
	head, query, hasQuery := strings.Cut(path, "?")
	head = strings.ReplaceAll(head, "{"+name+"}", url.PathEscape(v))
	if !hasQuery {
		return head
	}
	return head + "?" + strings.ReplaceAll(query, "{"+name+"}", url.QueryEscape(v))
}

// body builds the body of shape s: canonical JSON, or a form.
func (c *Client) body(ctx context.Context, s *v1.RequestShape, in request) ([]byte, error) {
	raw, err := c.compiler.JSON(ctx, s.Body, in)
	if err != nil {
		return nil, err
	}
	// One body for one request, byte for byte, on every re-send.
	b, err := protocol.Canonical(raw)
	if err != nil {
		return nil, err
	}
	if s.Encoding == v1.BodyForm && len(b) > 0 {
		return formEncode(b)
	}
	return b, nil
}

// formEncode turns a JSON object into a form, with nested objects and
// lists in brackets (`metadata[order]=1`, `items[0]=a`), keys in order.
func formEncode(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("a form body must be an object, not %T", doc)
	}
	var pairs []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(v)) {
				walk(prefix+"["+k+"]", v[k])
			}
		case []any:
			for i, e := range v {
				walk(prefix+"["+strconv.Itoa(i)+"]", e)
			}
		case nil:
			pairs = append(pairs, url.QueryEscape(prefix)+"=")
		default:
			pairs = append(pairs, url.QueryEscape(prefix)+"="+url.QueryEscape(fmt.Sprint(v)))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		walk(k, obj[k])
	}
	return []byte(strings.Join(pairs, "&")), nil
}
