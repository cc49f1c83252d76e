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
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html"
	nethttp "net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/celbound"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/worstcase"
)

// FuzzShape shapes a request whose path, query and key come from the
// fuzzer. A value fills its place and no other: on the wire, the path
// has the template's segments, each value's segment unescapes to it, no
// '?' or '#' of a value shows, and url.ParseQuery gives back each query
// value, as the only value of its name. A path value of "." or ".." is
// refused.
func FuzzShape(f *testing.F) {
	f.Add("acme/widgets", "a b&c=d+e", "ns/Tool:t/issue.create/k#1?x")
	f.Add("..", "", "k")
	f.Add("%2e%2e", "%", "a&b=c")
	f.Add("?#/;,", "\x00\xff", "{repo}")
	f.Add("{idempotencyKey}", "{repo}", "100%+")
	const path = "/repos/{repo}/keys/{idempotencyKey}?at={repo}&key={idempotencyKey}"
	spec := &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example/api/"},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative, Header: "Idempotency-Key"},
		Operations: []v1.ToolOperation{{Name: "issue.create", Path: path, Request: &v1.RequestShape{
			PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}},
			Query:      []v1.NamedValue{{Name: "q", Value: "parameters.q"}},
		}}}}
	c := newClient(f, spec, nil)
	op := spec.Operations[0]
	f.Fuzz(func(t *testing.T, repo, q, key string) {
		params, err := json.Marshal(map[string]string{"repo": repo, "q": q})
		if err != nil {
			t.Fatal(err)
		}
		// What the expressions see: JSON made invalid UTF-8 valid.
		var want map[string]string
		if err := json.Unmarshal(params, &want); err != nil {
			t.Fatal(err)
		}
		req := effects.Request{Operation: op.Name, Key: key, Parameters: params}
		o, err := c.shape(t.Context(), nethttp.MethodPost, op.Path, op.Request, req, requestView(req))
		if want["repo"] == "." || want["repo"] == ".." {
			if err == nil {
				t.Fatalf("path value %q taken: %s", want["repo"], o.url)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		wire := o.url.RequestURI()
		sent, err := url.ParseRequestURI(wire)
		if err != nil {
			t.Fatalf("%q does not parse: %v", wire, err)
		}
		if sent.Fragment != "" || strings.Contains(wire, "#") {
			t.Fatalf("%q has a fragment", wire)
		}
		segments := strings.Split(sent.EscapedPath(), "/")
		if len(segments) != 6 || segments[1] != "api" || segments[2] != "repos" || segments[4] != "keys" {
			t.Fatalf("path %q has not the template's segments", sent.EscapedPath())
		}
		for i, want := range map[int]string{3: want["repo"], 5: key} {
			if got, err := url.PathUnescape(segments[i]); err != nil || got != want {
				t.Fatalf("segment %d of %q is %q (%v), want %q", i, wire, got, err, want)
			}
		}
		query, err := url.ParseQuery(sent.RawQuery)
		if err != nil {
			t.Fatalf("query of %q: %v", wire, err)
		}
		wantQuery := url.Values{"at": {want["repo"]}, "key": {key}, "q": {want["q"]}}
		if diff := cmp.Diff(wantQuery, query); diff != "" {
			t.Fatalf("query of %q (-want, +got):\n%s", wire, diff)
		}
	})
}

// FuzzFormEncode encodes an object, with a nested object and a list, as a
// form: url.ParseQuery gives back every value under its bracketed name,
// and nothing else.
func FuzzFormEncode(f *testing.F) {
	f.Add("amount", "2000", "order", "o 1&x=y", 1.5, true)
	f.Add("", "", "", "", 0.0, false)
	f.Add("a[b]", "[]", "%", "=&;", -1e21, true)
	f.Add("é", "\xff", "+", "\u2028", 1e-7, false)
	f.Fuzz(func(t *testing.T, key, value, nestedKey, nestedValue string, n float64, b bool) {
		doc, err := json.Marshal(map[string]any{key: value, "nested": map[string]any{nestedKey: nestedValue},
			"list": []any{value, n, b, nil}})
		if err != nil {
			return
		}
		var obj map[string]any
		if err := json.Unmarshal(doc, &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) != 3 {
			// The key is "nested" or "list".
			return
		}
		// The key as JSON made it: invalid UTF-8 made valid.
		for k := range obj {
			if k != "nested" && k != "list" {
				key = k
			}
		}
		// The form's values are the JSON's as text: what encoding/json
		// makes of the number (json.Number keeps its text).
		num, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		form, err := formEncode(doc)
		if err != nil {
			t.Fatalf("%s: %v", doc, err)
		}
		got, err := url.ParseQuery(string(form))
		if err != nil {
			t.Fatalf("%q: %v", form, err)
		}
		nested := obj["nested"].(map[string]any)
		want := url.Values{}
		for name, v := range map[string]string{
			key: obj[key].(string), "nested[" + lastKey(nested) + "]": nested[lastKey(nested)].(string),
			"list[0]": obj[key].(string), "list[1]": string(num), "list[2]": fmt.Sprint(b), "list[3]": "",
		} {
			want[name] = append(want[name], v)
		}
		for name, vs := range want {
			if !equalAsSets(got[name], vs) {
				t.Fatalf("form %q: %s is %q, want %q", form, name, got[name], vs)
			}
		}
		if pairs := strings.Count(string(form), "&") + 1; pairs != 6 {
			t.Fatalf("form %q has %d pairs, want 6", form, pairs)
		}
	})
}

// lastKey is the key of a map of one entry.
func lastKey(m map[string]any) string {
	for k := range m {
		return k
	}
	return ""
}

// equalAsSets reports whether a and b hold the same values, in any order.
func equalAsSets(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	count := map[string]int{}
	for _, v := range a {
		count[v]++
	}
	for _, v := range b {
		count[v]--
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// FuzzScrub puts a secret, in one of the encodings the scrubber knows, in
// a text, and scrubs it: no stretch of the output between two
// "[redacted]" holds the secret in any case, nor its hex, nor its base64
// (standard or URL-safe, padded or not), when it is long enough to be
// scrubbed encoded.
func FuzzScrub(f *testing.F) {
	f.Add("hunter2", "error: ", " was refused", uint8(0))
	f.Add("s3cr3t-token", `{"echo":"`, `"}`, uint8(1))
	f.Add("pass word", "q=", "&x=1", uint8(2))
	f.Add("Bearer abcdef123", "Authorization: ", "", uint8(3))
	f.Add("p@ss/w0rd", "https://x/?t=", "", uint8(4))
	f.Add("<tag>&", "<p>", "</p>", uint8(5))
	f.Add("abcd", "xx", "yy", uint8(6))
	f.Add("é-secret", "", "", uint8(7))
	f.Fuzz(func(t *testing.T, secret, before, after string, encoding uint8) {
		if strings.TrimSpace(secret) == "" {
			return
		}
		in := before + encoded(secret, encoding) + after
		out := newScrubber([]string{secret}).string(in)
		for piece := range strings.SplitSeq(out, redacted) {
			if what, ok := holds(piece, secret); ok {
				t.Fatalf("scrubbed %q (secret %q, encoding %d) to %q, which holds its %s", in, secret,
					encoding%8, out, what)
			}
		}
	})
}

// encoded is secret in the encoding e names.
func encoded(secret string, e uint8) string {
	switch e % 8 {
	case 1:
		b, _ := json.Marshal(secret)
		return string(b[1 : len(b)-1])
	case 2:
		return url.QueryEscape(secret)
	case 3:
		return strings.ToUpper(secret)
	case 4:
		return url.PathEscape(secret)
	case 5:
		return html.EscapeString(secret)
	case 6:
		return base64.StdEncoding.EncodeToString([]byte(secret))
	case 7:
		return hex.EncodeToString([]byte(secret))
	}
	return secret
}

// holds reports whether text holds secret, in ASCII's either case, or,
// for a secret of minEncoded bytes or more, its hex or its base64 at the
// start of an encoded blob (the scrubber's other alignments are its own).
func holds(text, secret string) (string, bool) {
	if bytes.Contains(foldASCII([]byte(text)), foldASCII([]byte(secret))) {
		return "value", true
	}
	if len(secret) < minEncoded {
		return "", false
	}
	if bytes.Contains(foldASCII([]byte(text)), []byte(hex.EncodeToString([]byte(secret)))) {
		return "hex", true
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		if s := strings.TrimRight(enc.EncodeToString([]byte(secret)), "="); strings.Contains(text, s) {
			return "base64", true
		}
	}
	return "", false
}

// toolAllocBound is what one of a Tool's expressions may allocate, run on
// an answer: its cost limit of ten million, at most a few bytes a unit.
const toolAllocBound = 256 << 20

// FuzzToolCEL compiles an expression as a Tool's, and runs it on an
// answer: it is refused when compiled, or it ends within its cost limit
// and time limit, or it is refused with one of them; what it allocates
// stays within toolAllocBound, and a value it returns within
// celbound.MaxValueBytes of JSON.
func FuzzToolCEL(f *testing.F) {
	for _, expr := range []string{
		"response.body.id",
		"response.status == 201 && response.body.items.exists(i, i.ref == key)",
		"response.body.items.map(i, i.name + key).join(',')",
		"{'id': string(response.body.id), 'keys': [key, parameters.order]}",
		"response.body.name.replace('a', response.body.name)",
		"response.headers['x-request-id']",
		"'%s-%d'.format([parameters.order, response.status])",
		"response.body.items.map(a, response.body.items.map(b, a.name + b.name))",
		"size(response.body.name.split('')) > 3",
		"base64.encode(bytes(response.body.name))",
		"parameters.order.matches('^o-[0-9]+$')",
	} {
		f.Add(expr, []byte(`{"id":42,"name":"aaaa","items":[{"ref":"k","name":"x"},{"ref":"o","name":"y"}]}`))
	}
	c, err := NewCompiler()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, expr string, body []byte) {
		if len(body) > maxBody || len(expr) > 4096 {
			return
		}
		if _, err := c.Compile(expr); err != nil {
			return
		}
		decoded, _ := decodeBody(body)
		r := response{Status: 200, Headers: map[string]string{"x-request-id": "r-1"}, Body: decoded,
			request: request{Parameters: map[string]any{"order": "o-1"}, Key: "ns/Tool:t/op/k"}}
		var out []byte
		alloc, took := worstcase.Allocated(func() { out, err = c.JSON(context.Background(), expr, r) })
		if alloc > toolAllocBound {
			t.Fatalf("%q allocated %d bytes, more than %d", expr, alloc, toolAllocBound)
		}
		if took > 5*evalTimeout {
			t.Fatalf("%q ran for %s, past its time limit of %s", expr, took, evalTimeout)
		}
		if err != nil {
			if strings.Contains(err.Error(), "cost") &&
				!strings.Contains(err.Error(), fmt.Sprintf("stopped at the cost limit of %d", costLimit)) &&
				!strings.Contains(err.Error(), "would") {
				t.Fatalf("%q refused about its cost, not at the limit: %v", expr, err)
			}
			return
		}
		if len(out) > celbound.MaxValueBytes {
			t.Fatalf("%q returned %d bytes of JSON, more than %d", expr, len(out), celbound.MaxValueBytes)
		}
		if !json.Valid(out) {
			t.Fatalf("%q returned %q, no JSON", expr, out)
		}
	})
}
