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
	"fmt"
	"html"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
)

// scrubbedValues are the secrets the encodings are derived from: letters
// and digits, base64's own characters, HTML's and JSON's special
// characters, a letter beyond ASCII, a space, and a four-digit PIN (the
// shortest value whose encodings are scrubbed, minEncoded).
var scrubbedValues = []string{
	"hunter2-password",
	"tok/en+Secret==",
	`p&ss"wörd<x>'`,
	"R0123456789abcdef",
	"s3cr3t with space",
	"4821",
}

// encoding is one way a tool may echo a value: each function returns the
// texts that hold it, at each alignment or choice the encoding has.
type encoding func(v string) []string

// encodings are the common ways a tool echoes what it was sent, derived
// from the value: what a debug endpoint, an error page or a log line does
// with a header or a body it quotes.
var encodings = map[string]encoding{
	"Literal": func(v string) []string { return []string{v} },
	// A value echoed in a changed case: a header value normalised, an
	// identifier folded by a case-insensitive store.
	"Upper":   func(v string) []string { return []string{strings.ToUpper(v)} },
	"Lower":   func(v string) []string { return []string{strings.ToLower(v)} },
	"Swapped": func(v string) []string { return []string{strings.Map(swapCase, v)} },
	// Base64 of a longer blob (a request dump, a JWT, a cookie) that holds
	// the value anywhere: every alignment, both alphabets, padded or not.
	"Base64": func(v string) []string {
		var out []string
		for before := range 6 {
			for after := range 3 {
				blob := append(append(bytes.Repeat([]byte{0xA5}, before), v...), bytes.Repeat([]byte{'~'}, after)...)
				for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding,
					base64.RawStdEncoding, base64.RawURLEncoding} {
					out = append(out, enc.EncodeToString(blob))
				}
			}
		}
		return out
	},
	// The base64 of the value in a changed case.
	"Base64Upper": func(v string) []string {
		return []string{base64.StdEncoding.EncodeToString([]byte("x" + strings.ToUpper(v)))}
	},
	// Base64 put in a query: its +, / and = percent-encoded.
	"Base64InQuery": func(v string) []string {
		var out []string
		for before := range 3 {
			out = append(out, url.QueryEscape(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("_", before)+v))))
		}
		return out
	},
	"Hex": func(v string) []string {
		h := hex.EncodeToString([]byte(v))
		return []string{h, strings.ToUpper(h), "0x" + h + "ff"}
	},
	"HexUpperValue": func(v string) []string { return []string{hex.EncodeToString([]byte(strings.ToUpper(v)))} },
	// Percent-encoding of every byte, or of some (the ones an encoder
	// thought reserved), in either case of the hex digits.
	"Percent": func(v string) []string {
		var out []string
		for _, upper := range []bool{false, true} {
			for _, every := range []int{1, 2, 3} {
				for offset := range every {
					out = append(out, percent(v, upper, func(i int) bool { return i%every == offset }))
				}
			}
		}
		return append(out, url.QueryEscape(v), url.PathEscape(v))
	},
	// JSON's \u escapes inside a body that is not JSON (a text page that
	// quotes a JSON string), of every character or of some.
	"JSONEscapes": func(v string) []string {
		var out []string
		for _, format := range []string{`\u%04x`, `\u%04X`} {
			for _, every := range []int{1, 2} {
				for offset := range every {
					out = append(out, perRune(v, func(i int, r rune) string {
						if i%every != offset {
							return string(r)
						}
						return fmt.Sprintf(format, r)
					}))
				}
			}
		}
		return out
	},
	// JavaScript's \x escapes of the bytes, of every one or of some.
	"JSEscapes": func(v string) []string {
		var out []string
		for _, every := range []int{1, 2} {
			var b strings.Builder
			for i := range len(v) {
				if i%every == 0 {
					fmt.Fprintf(&b, `\x%02x`, v[i])
				} else {
					b.WriteByte(v[i])
				}
			}
			out = append(out, b.String())
		}
		return out
	},
	// HTML character references: decimal, hexadecimal, named where the
	// character has a name, of every character or of some.
	"HTML": func(v string) []string {
		names := map[rune]string{'&': "amp", '<': "lt", '>': "gt", '"': "quot", '\'': "apos", '/': "sol",
			'+': "plus", '=': "equals", '-': "dash"}
		var out []string
		for _, ref := range []func(r rune) string{
			func(r rune) string { return fmt.Sprintf("&#%d;", r) },
			func(r rune) string { return fmt.Sprintf("&#x%x;", r) },
			func(r rune) string { return fmt.Sprintf("&#X%X;", r) },
			func(r rune) string {
				if n, ok := names[r]; ok && n != "dash" {
					return "&" + n + ";"
				}
				return string(r)
			},
		} {
			for _, every := range []int{1, 2} {
				out = append(out, perRune(v, func(i int, r rune) string {
					if i%every != 0 {
						return string(r)
					}
					return ref(r)
				}))
			}
		}
		return append(out, html.EscapeString(v))
	},
}

func swapCase(r rune) rune {
	if unicode.IsUpper(r) {
		return unicode.ToLower(r)
	}
	return unicode.ToUpper(r)
}

// percent percent-encodes the bytes of v for which which says so.
func percent(v string, upper bool, which func(i int) bool) string {
	var b strings.Builder
	for i := range len(v) {
		if !which(i) {
			b.WriteByte(v[i])
			continue
		}
		h := fmt.Sprintf("%%%02x", v[i])
		if upper {
			h = strings.ToUpper(h)
		}
		b.WriteString(h)
	}
	return b.String()
}

// perRune rewrites v rune by rune.
func perRune(v string, f func(i int, r rune) string) string {
	var b strings.Builder
	i := 0
	for _, r := range v {
		b.WriteString(f(i, r))
		i++
	}
	return b.String()
}

// The decoders of reveals are the standard library's or written here from
// the encodings' definitions, not the scrubber's.
var (
	percentEscape = regexp.MustCompile(`%[0-9a-fA-F]{2}`)
	unicodeEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}`)
	byteEscape    = regexp.MustCompile(`\\x[0-9a-fA-F]{2}`)
	hexRun        = regexp.MustCompile(`[0-9a-fA-F]{2,}`)
	base64Run     = regexp.MustCompile(`[A-Za-z0-9+/_-]{2,}`)
)

// reveals returns how s still shows v: as it is in any case, or after
// decoding percent-encoding, \u escapes or HTML references, then as it is,
// or in hex or base64 at any offset.
func reveals(s, v string) []string {
	var found []string
	views := map[string]string{
		"as is": s,
		"percent-decoded": percentEscape.ReplaceAllStringFunc(s, func(m string) string {
			c, _ := strconv.ParseUint(m[1:], 16, 8)
			return string([]byte{byte(c)})
		}),
		"form-decoded": strings.ReplaceAll(s, "+", " "),
		"\\u-decoded": unicodeEscape.ReplaceAllStringFunc(s, func(m string) string {
			r, _ := strconv.ParseUint(m[2:], 16, 32)
			return string(rune(r))
		}),
		"\\x-decoded": byteEscape.ReplaceAllStringFunc(s, func(m string) string {
			c, _ := strconv.ParseUint(m[2:], 16, 8)
			return string([]byte{byte(c)})
		}),
		"HTML-decoded": html.UnescapeString(s),
	}
	for name, view := range views {
		if containsFold(view, v) {
			found = append(found, name)
		}
		for _, run := range hexRun.FindAllString(view, -1) {
			for off := range 2 {
				r := run[off:]
				if d, err := hex.DecodeString(r[:len(r)/2*2]); err == nil && containsFold(string(d), v) {
					found = append(found, name+", then hex")
				}
			}
		}
		for _, run := range base64Run.FindAllString(view, -1) {
			run = strings.NewReplacer("-", "+", "_", "/").Replace(run)
			for off := range 4 {
				r := run[min(off, len(run)):]
				if len(r)%4 == 1 {
					r = r[:len(r)-1]
				}
				if d, err := base64.RawStdEncoding.DecodeString(r); err == nil && containsFold(string(d), v) {
					found = append(found, name+", then base64")
				}
			}
		}
	}
	return found
}

// containsFold reports whether s holds v in any case.
func containsFold(s, v string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(v))
}

// TestScrubberEncodings: for every value and every encoding derived from
// it, the text holds the value before it is scrubbed (so the case tests
// something) and no decodable form of it after, as a bare value, as the
// token of a Bearer header, and as the password of Basic credentials.
func TestScrubberEncodings(t *testing.T) {
	for _, v := range scrubbedValues {
		scrubbers := map[string]*scrubber{
			"Value":  newScrubber([]string{v}),
			"Bearer": newScrubber([]string{"Bearer " + v}),
			"Basic":  newScrubber([]string{"Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+v))}),
		}
		for name, enc := range encodings {
			for i, e := range enc(v) {
				in := "the tool says: " + e + " (quoted)"
				if len(reveals(in, v)) == 0 {
					t.Fatalf("%s %d of %q: the test's decoders do not see the value in %q", name, i, v, in)
				}
				for as, s := range scrubbers {
					if len(v) < minSecretPart && as != "Value" {
						// A part this short is not scrubbed on its own.
						continue
					}
					out := s.string(in)
					if how := reveals(out, v); len(how) > 0 {
						t.Errorf("%s %d of %q (%s): %q still shows it (%s): %q", name, i, v, as, in, strings.Join(how, "; "), out)
					}
					if !strings.HasPrefix(out, "the tool says: ") || !strings.HasSuffix(out, " (quoted)") {
						t.Errorf("%s %d of %q (%s): the text around it changed: %q", name, i, v, as, out)
					}
				}
			}
		}
	}
}

// TestScrubberKeepsOrdinaryText: what holds no form of a secret is kept
// as it is, however it is encoded; a value shorter than minEncoded is
// scrubbed as it is, not in its encodings, which are runs of two or three
// characters found in any encoded text.
func TestScrubberKeepsOrdinaryText(t *testing.T) {
	cases := map[string]struct {
		values []string
		text   string
	}{
		"OtherBase64":   {[]string{"hunter2-password"}, base64.StdEncoding.EncodeToString([]byte("an ordinary answer, nothing secret"))},
		"OtherHex":      {[]string{"hunter2-password"}, "sha256:" + strings.Repeat("0123456789abcdef", 4)},
		"APrefixOfIt":   {[]string{"hunter2-password"}, "hunter2 is a famous password"},
		"Escapes":       {[]string{"hunter2-password"}, `a&amp;b %41 \u0041 &#65; \n`},
		"ShortValue":    {[]string{"ab1"}, "YWIx " + hex.EncodeToString([]byte("ab1"))[:4] + " QUJ"},
		"ShortBearer":   {[]string{"Bearer abc"}, "abc is short"},
		"NotUTF8":       {[]string{"hunter2-password"}, "\xff\xfe h\xc3 \xe2\x82"},
		"ShortEncoding": {[]string{"4821"}, "NDgy MzQ4 ODIx"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := newScrubber(tc.values).string(tc.text); got != tc.text {
				t.Errorf("want %q kept, got %q", tc.text, got)
			}
		})
	}
}

// TestScrubberUpTo: a text cut at n keeps nothing of a secret that the
// cut splits, in any encoding, and nothing past n.
func TestScrubberUpTo(t *testing.T) {
	const v = "hunter2-password"
	s := newScrubber([]string{v})
	for name, enc := range encodings {
		for i, e := range enc(v) {
			in := "x " + e + " y"
			for n := 0; n <= len(in); n++ {
				out := s.upTo([]byte(in), n)
				if how := reveals(out, v[:8]); len(how) > 0 {
					t.Errorf("%s %d cut at %d: %q shows the start of the value (%s)", name, i, n, out, how)
				}
				if n < len(in)-1 && strings.HasSuffix(out, " y") {
					t.Errorf("%s %d cut at %d: %q holds what lies past the cut", name, i, n, out)
				}
			}
		}
	}
}

// TestEncodedEchoNotKept: a tool that echoes the credential in an
// encoding the scrubber knows, in a text body that is the result and in a
// JSON body's strings, keeps it in no result, id or message.
func TestEncodedEchoNotKept(t *testing.T) {
	const token = "s3cr3t-t0ken-value"
	// 5 bytes before the token: it starts two bytes into a group of three.
	blob := base64.StdEncoding.EncodeToString([]byte("auth=" + token + "\n"))
	for name, tc := range map[string]struct {
		body, contentType string
		format            v1.ResponseFormat
	}{
		// A debug page that dumps the request, base64 at an offset that is
		// not a multiple of three, as some proxies log.
		"TextBase64": {"request=" + blob, "text/plain", v1.FormatText},
		"TextMixed": {"seen " + percent(token, false, func(i int) bool { return i%3 == 0 }) + " and " +
			strings.ToUpper(token) + " and " + perRune(token, func(_ int, r rune) string { return fmt.Sprintf("&#%d;", r) }),
			"text/html", v1.FormatText},
		"JSONBase64": {`{"id": "ch_1", "debug": "` + blob + `", "hex": "` + hex.EncodeToString([]byte(token)) + `"}`,
			"application/json", ""},
	} {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, canned{200, tc.contentType, tc.body})
			spec := toolSpec(srv, v1.IdempotencyNone)
			spec.HTTP.Headers = echoToolSpec(srv).HTTP.Headers
			spec.Operations[0].Response = v1.ResponseMapping{Format: tc.format, Result: "response.body"}
			if tc.format == "" {
				spec.Operations[0].Response.ExternalObjectID = "response.body.id"
			}
			c := connectTo(t, spec, "Bearer "+token)
			r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k", Timeout: time.Second})
			if r.Outcome != v1.OutcomeSucceeded {
				t.Fatalf("want Succeeded, got %s: %s", r.Outcome, r.Message)
			}
			all := resultOf(r.Result) + " " + r.Message + " " + r.ExternalObjectID
			// The result is JSON: its strings' escapes are JSON's.
			if how := reveals(strings.ReplaceAll(all, `\u0026`, "&"), token); len(how) > 0 {
				t.Errorf("the secret is kept (%s): %s", strings.Join(how, "; "), all)
			}
		})
	}
}

// TestScrubberDecidesNothing: what decides an outcome reads the answer as
// the tool sent it, so that no secret the scrubber finds in it changes
// the outcome: not whether a success is the tool's (its id read from it),
// not what of a long body the expressions see.
func TestScrubberDecidesNothing(t *testing.T) {
	const token = "7f3a9c2e1b5d4a60"
	cases := map[string]struct {
		reason string
		body   string
		rule   string
		id     string
	}{
		"IDCutFromAReference": {
			reason: "a tool whose references start with the account they belong to (the credential), " +
				"and a mapping that cuts the id out of one",
			body: `{"ref": "` + token + `:ch_1"}`,
			id:   "response.body.ref.substring(0, 16)",
		},
		"LongBody": {
			reason: "expressions see the first 64 KiB of a longer body, even where a secret spans the limit",
			body:   strings.Repeat("a", maxBody-5) + token + strings.Repeat("b", 100),
			rule:   "size(response.body) == 65536",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			srv := serve(t, canned{201, "application/json", tc.body})
			spec := toolSpec(srv, v1.IdempotencyNone)
			spec.HTTP.Headers = echoToolSpec(srv).HTTP.Headers
			spec.Operations[0].Response = v1.ResponseMapping{ExternalObjectID: tc.id, Result: "{}"}
			if tc.rule != "" {
				spec.Operations[0].Response.Outcomes = []v1.OutcomeRule{{When: tc.rule, Outcome: v1.OutcomeSucceeded},
					{When: "true", Outcome: v1.OutcomePermanent}}
			}
			c := connectTo(t, spec, "Bearer "+token)
			r := c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k", Timeout: time.Second})
			if r.Outcome != v1.OutcomeSucceeded {
				t.Errorf("%s: want Succeeded, got %s: %s", tc.reason, r.Outcome, r.Message)
			}
			if strings.Contains(r.Message+r.ExternalObjectID, token) {
				t.Errorf("%s: the secret is kept: %s %s", tc.reason, r.ExternalObjectID, r.Message)
			}
		})
	}
}
