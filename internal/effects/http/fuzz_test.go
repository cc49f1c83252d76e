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
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"html"
	nethttp "net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
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
