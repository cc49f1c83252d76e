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
	"cmp"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

// redacted replaces a secret wherever it shows.
const redacted = "[redacted]"

// minSecretPart is the shortest part of a secret (the token of
// "Bearer <token>", the password of Basic credentials) that is scrubbed on
// its own: shorter parts would scrub ordinary words. Whole values are
// scrubbed whatever their length.
const minSecretPart = 6

// minEncoded is the shortest value whose encodings (base64, hex) are
// scrubbed, and the shortest run of an encoding that is. A value shorter
// than that is found faster by guessing than by reading its encoding. Its
// encodings are runs of two or three characters that occur by chance in
// any longer encoded text. Such a value is still scrubbed as it is, in any
// case, and escaped character by character.
const minEncoded = 4

// scrubber removes secret values from what a Client returns. Tools echo
// request headers and bodies in errors and debug answers, as they are or
// in an encoding. The scrubber knows the common ones (docs/egress.md):
//
//   - The value in any case ("hunter2" and "HUNTER2").
//   - The value escaped character by character, all of it or some. The
//     escapes are percent-encoding in either case, JSON and JavaScript
//     escapes (\u0041, \x41, \/), and HTML entities (named, decimal,
//     hexadecimal).
//   - Its hexadecimal, in either case.
//   - Its base64, standard or URL-safe, padded or not. That is found at
//     any of the three alignments it can have inside a longer encoded
//     blob. What a blob's base64 holds of the value is the run of
//     characters that depend on the value's bytes alone. That run is
//     scrubbed. A character or two at each end, which also depend on
//     their neighbours, stay.
//
// Encodings nest once: the base64 of a value, percent-encoded in a query,
// is found. The Connector builds a scrubber from the values it resolved.
// The Client applies it to each description of an answer and to each
// result as it leaves. So nothing it built holds one, ids, results and
// error strings included. Expressions that decide (outcome rules, found,
// absent, replayed, valid, invalid, whether a success is the tool's) see
// the answer as it came: the scrubber never changes a decision.
type scrubber struct {
	// folded are forms matched in any case: the values and their hex.
	folded forms
	// exact are forms matched as they are: the base64 runs.
	exact forms
	// bytewise are the values that are not UTF-8, matched in ASCII's
	// either case byte for byte: folding the text's runes would change
	// the bytes of a rune that one of them starts or ends inside.
	bytewise forms
}

// forms are the forms of secrets, by their first byte, so that a text is
// searched for all of them in one pass.
type forms struct {
	by [256][][]byte
	n  int
}

func (f *forms) add(form string) {
	f.by[form[0]] = append(f.by[form[0]], []byte(form))
	f.n++
}

// newScrubber returns a scrubber for the secret values; with none, it
// changes nothing.
func newScrubber(values []string) *scrubber {
	folded, exact, bytewise := map[string]bool{}, map[string]bool{}, map[string]bool{}
	add := func(s string, minLen int) {
		if len(s) < minLen || s == "" {
			return
		}
		for _, v := range []string{s, strings.ReplaceAll(s, " ", "+")} {
			// A space in a query or a form is a plus.
			folded[string(fold([]byte(v)))] = true
			if !utf8.ValidString(v) {
				bytewise[string(foldASCII([]byte(v)))] = true
			}
		}
		if len(s) < minEncoded {
			return
		}
		// The value's encodings, and those of the value in upper or
		// lower case, which is how some tools echo it.
		for _, v := range []string{s, strings.ToUpper(s), strings.ToLower(s)} {
			folded[hex.EncodeToString([]byte(v))] = true
			for _, run := range base64Runs([]byte(v)) {
				exact[run] = true
			}
		}
	}
	for _, v := range values {
		for _, p := range secretParts(v) {
			add(p, 1)
		}
	}
	delete(folded, "")
	s := &scrubber{}
	for _, set := range []struct {
		forms map[string]bool
		to    *forms
	}{{folded, &s.folded}, {exact, &s.exact}, {bytewise, &s.bytewise}} {
		// In order, so that two scrubbers of the same values are the same.
		for _, f := range slices.Sorted(maps.Keys(set.forms)) {
			set.to.add(f)
		}
	}
	return s
}

// isAuthScheme reports whether s can be an HTTP authentication scheme, a
// token of RFC 9110. A token holds no `=` or `;`, and a cookie's pairs do.
func isAuthScheme(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.ContainsRune("!#$%&'*+-.^_`|~", c):
		default:
			return false
		}
	}
	return true
}

// secretParts are the values the scrubber removes for a secret value v.
// They are v and v without surrounding space. A value with a scheme
// ("Bearer <token>", "Basic <base64>") adds its parts of minSecretPart
// bytes or more. Those are the token, and for Basic credentials
// user:password and the password.
func secretParts(v string) []string {
	parts := []string{v, strings.TrimSpace(v)}
	scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !isAuthScheme(scheme) {
		// No scheme before it (`session=…; lang=en`). The value is
		// scrubbed whole, and a part of it is no secret of its own.
		return parts
	}
	part := func(p string) {
		if len(p) >= minSecretPart {
			parts = append(parts, p)
		}
	}
	token = strings.TrimSpace(token)
	part(token)
	if !strings.EqualFold(scheme, "Basic") {
		return parts
	}
	if d, err := base64.StdEncoding.DecodeString(token); err == nil {
		part(string(d))
		if _, password, ok := strings.Cut(string(d), ":"); ok {
			part(password)
		}
	}
	return parts
}

// minSecret is the shortest secret value Once takes, and the shortest
// part of one that it scrubs (secretParts). The scrubber replaces a
// value wherever it shows, so a tool that echoes its parameters tells an
// operation's author whether a guess is the value: "[redacted]" comes
// back for the right one. A short value (a PIN) falls to a few
// operations of guesses; one of 12 bytes takes millions of them
// (docs/egress.md).
const minSecret = 12

// maxSecret bounds a secret value Once takes: the scrubber builds about
// 30 forms of each value and searches every kept text for them. Servers
// commonly refuse a header line over 8 KiB.
const maxSecret = 8 << 10

// maxSecrets bounds the secret values of one tool together.
const maxSecrets = 64 << 10

// checkSecret refuses a secret value outside [minSecret, maxSecret], or
// with a scrubbed part under minSecret. The error names no value.
func checkSecret(v string) error {
	if len(v) > maxSecret {
		return fmt.Errorf("holds more than %d bytes, the most a secret may hold", maxSecret)
	}
	for i, p := range secretParts(v) {
		if len(p) >= minSecret {
			continue
		}
		if i < 2 {
			return fmt.Errorf("holds fewer than %d bytes, the fewest a secret may hold: "+
				"a tool that echoes its parameters would let an operation guess it", minSecret)
		}
		return fmt.Errorf("holds a token or password of fewer than %d bytes, the fewest a secret may hold: "+
			"a tool that echoes its parameters would let an operation guess it", minSecret)
	}
	return nil
}

// base64Runs are the runs of base64 characters, in the standard and the
// URL-safe alphabets, that hold v wherever it starts in a longer encoded
// blob. Each run has at least minEncoded characters. There is one at each
// of the three alignments: the characters that depend on v's bytes alone.
func base64Runs(v []byte) []string {
	var runs []string
	for a := range 3 {
		// a bytes before v share its first group of three.
		enc := base64.RawStdEncoding.EncodeToString(append(make([]byte, a), v...))
		// The first characters of the group mix the bytes before v in;
		// the last of a group cut short mixes in the bytes after it.
		from := [3]int{0, 2, 3}[a]
		n := a + len(v)
		to := n/3*4 + [3]int{0, 1, 2}[n%3]
		if to-from < minEncoded {
			continue
		}
		run := enc[from:to]
		runs = append(runs, run, strings.NewReplacer("+", "-", "/", "_").Replace(run))
	}
	return runs
}

// active reports whether s scrubs anything.
func (s *scrubber) active() bool {
	return s != nil && s.folded.n+s.exact.n+s.bytewise.n > 0
}

// string scrubs v.
func (s *scrubber) string(v string) string {
	if !s.active() {
		return v
	}
	return s.upTo([]byte(v), len(v))
}

// upTo scrubs b and keeps its first n bytes: a secret that the n-th byte
// splits is found in all of b, and what of it lies before the cut is
// replaced too.
func (s *scrubber) upTo(b []byte, n int) string {
	n = min(n, len(b))
	if !s.active() {
		return string(b[:n])
	}
	var out strings.Builder
	at := 0
	for _, sp := range s.spans(b) {
		if sp.from >= n {
			break
		}
		out.Write(b[at:sp.from])
		out.WriteString(redacted)
		at = min(sp.to, n)
	}
	out.Write(b[at:n])
	return out.String()
}

// span is a range of bytes [from, to) of a text.
type span struct{ from, to int }

// spans returns where b holds a form of a secret, in order and merged: in
// b as it is and in b with its escapes decoded, each in any case for the
// forms that are matched so.
func (s *scrubber) spans(b []byte) []span {
	var found []span
	search := func(t text) {
		type searched struct {
			in    []byte
			forms *forms
		}
		sets := []searched{{t.b, &s.exact}, {t.folded(), &s.folded}}
		if s.bytewise.n > 0 {
			sets = append(sets, searched{foldASCII(t.b), &s.bytewise})
		}
		for _, set := range sets {
			for i := range set.in {
				for _, f := range set.forms.by[set.in[i]] {
					if bytes.HasPrefix(set.in[i:], f) {
						found = append(found, t.source(i, i+len(f)))
					}
				}
			}
		}
	}
	search(rawText(b))
	if d, ok := unescape(b); ok {
		search(d)
	}
	if len(found) == 0 {
		return nil
	}
	slices.SortFunc(found, func(x, y span) int { return cmp.Or(x.from-y.from, x.to-y.to) })
	merged := found[:1]
	for _, sp := range found[1:] {
		last := &merged[len(merged)-1]
		if sp.from <= last.to {
			last.to = max(last.to, sp.to)
			continue
		}
		merged = append(merged, sp)
	}
	return merged
}

// text is a text derived from another, with where each of its bytes came
// from: byte i of b stands for bytes [from[i], to[i]) of the source.
// from and to are nil when b is the source itself.
type text struct {
	b        []byte
	from, to []int
}

func rawText(b []byte) text { return text{b: b} }

// source is where bytes [i, j) of t came from.
func (t text) source(i, j int) span {
	if t.from == nil {
		return span{i, j}
	}
	return span{t.from[i], t.to[j-1]}
}

// folded is t in lower case, as fold makes it.
func (t text) folded() []byte {
	return fold(t.b)
}

// fold is b in lower case, rune for rune, where a rune's lower case takes
// as many bytes as the rune (all of ASCII, most of the rest). Other runes,
// and bytes that are not UTF-8, stay as they are. So positions in b are
// positions in fold(b).
func fold(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		if c := b[i]; c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if l := unicode.ToLower(r); l != r && r != utf8.RuneError && utf8.RuneLen(l) == n {
			out = utf8.AppendRune(out, l)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}

// foldASCII is b with ASCII's upper-case letters in lower case, and every
// other byte as it is.
func foldASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// unescape decodes the escapes of b: percent-encoding, JSON and
// JavaScript backslash escapes, HTML character references. It reports
// false when b holds none.
func unescape(b []byte) (text, bool) {
	if !bytes.ContainsAny(b, `%\&`) {
		return text{}, false
	}
	t := text{b: make([]byte, 0, len(b)), from: make([]int, 0, len(b)), to: make([]int, 0, len(b))}
	emit := func(s []byte, from, to int) {
		for _, c := range s {
			t.b = append(t.b, c)
			t.from = append(t.from, from)
			t.to = append(t.to, to)
		}
	}
	var one [utf8.UTFMax]byte
	decoded := false
	for i := 0; i < len(b); {
		if r, n := escapeAt(b[i:]); n > 0 {
			if r < 0 {
				// A byte, as percent-encoding and \x give one.
				emit([]byte{byte(-r - 1)}, i, i+n)
			} else {
				emit(one[:utf8.EncodeRune(one[:], r)], i, i+n)
			}
			i += n
			decoded = true
			continue
		}
		t.b, t.from, t.to = append(t.b, b[i]), append(t.from, i), append(t.to, i+1)
		i++
	}
	return t, decoded
}

// escapeAt decodes the escape b starts with. It returns a rune and the
// escape's length. The rune is -1-c for a single byte c. The length is 0
// if b starts with no escape.
func escapeAt(b []byte) (rune, int) {
	switch b[0] {
	case '%':
		if c, ok := hexByte(b[1:]); ok {
			return -1 - rune(c), 3
		}
	case '\\':
		if len(b) < 2 {
			return 0, 0
		}
		switch b[1] {
		case 'u':
			r, ok := hexRune(b[2:], 4)
			if !ok {
				return 0, 0
			}
			if utf16.IsSurrogate(r) {
				// A pair: \ud83d\ude00.
				if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
					if lo, ok := hexRune(b[8:], 4); ok {
						if p := utf16.DecodeRune(r, lo); p != utf8.RuneError {
							return p, 12
						}
					}
				}
				return 0, 0
			}
			return r, 6
		case 'x':
			if c, ok := hexByte(b[2:]); ok {
				return -1 - rune(c), 4
			}
		case '"', '\\', '/', '\'':
			return rune(b[1]), 2
		case 'b':
			return '\b', 2
		case 'f':
			return '\f', 2
		case 'n':
			return '\n', 2
		case 'r':
			return '\r', 2
		case 't':
			return '\t', 2
		}
	case '&':
		return entityAt(b)
	}
	return 0, 0
}

// entityAt decodes the HTML character reference b starts with. It knows
// `&#65;` and `&#x41;`, their forms without the semicolon that browsers
// accept, and the named references of ASCII's punctuation.
func entityAt(b []byte) (rune, int) {
	if len(b) > 2 && b[1] == '#' {
		base, i := 10, 2
		if b[2] == 'x' || b[2] == 'X' {
			base, i = 16, 3
		}
		start := i
		var r rune
		for ; i < len(b) && i-start < 8; i++ {
			d, ok := digit(b[i], base)
			if !ok {
				break
			}
			r = r*rune(base) + rune(d)
		}
		if i == start || r > unicode.MaxRune || utf16.IsSurrogate(r) {
			return 0, 0
		}
		if i < len(b) && b[i] == ';' {
			i++
		}
		return r, i
	}
	end := bytes.IndexByte(b[:min(len(b), maxEntityName+2)], ';')
	if end < 2 {
		return 0, 0
	}
	if r, ok := entities[string(b[1:end])]; ok {
		return r, end + 1
	}
	return 0, 0
}

// entities are the named HTML character references of ASCII characters
// (HTML's list, but for the names of its other characters).
var entities = map[string]rune{
	"Tab": '\t', "NewLine": '\n', "excl": '!', "quot": '"', "QUOT": '"', "num": '#', "dollar": '$',
	"percnt": '%', "amp": '&', "AMP": '&', "apos": '\'', "lpar": '(', "rpar": ')', "ast": '*',
	"midast": '*', "plus": '+', "comma": ',', "period": '.', "sol": '/', "colon": ':', "semi": ';',
	"lt": '<', "LT": '<', "equals": '=', "gt": '>', "GT": '>', "quest": '?', "commat": '@',
	"lsqb": '[', "lbrack": '[', "bsol": '\\', "rsqb": ']', "rbrack": ']', "Hat": '^', "lowbar": '_',
	"UnderBar": '_', "grave": '`', "DiacriticalGrave": '`', "lcub": '{', "lbrace": '{',
	"verbar": '|', "vert": '|', "VerticalLine": '|', "rcub": '}', "rbrace": '}',
}

// maxEntityName is the length of the longest name in entities.
const maxEntityName = len("DiacriticalGrave")

// hexByte decodes the two hex digits b starts with.
func hexByte(b []byte) (byte, bool) {
	r, ok := hexRune(b, 2)
	return byte(r), ok
}

// hexRune decodes the n hex digits b starts with.
func hexRune(b []byte, n int) (rune, bool) {
	if len(b) < n {
		return 0, false
	}
	var r rune
	for _, c := range b[:n] {
		d, ok := digit(c, 16)
		if !ok {
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// digit is the value of c as a digit in base 10 or 16.
func digit(c byte, base int) (int, bool) {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0'), true
	case base == 16 && c >= 'a' && c <= 'f':
		return int(c-'a') + 10, true
	case base == 16 && c >= 'A' && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// value scrubs the strings, keys included, of decoded JSON, into a copy.
func (s *scrubber) value(v any) any {
	if !s.active() {
		return v
	}
	switch v := v.(type) {
	case string:
		return s.string(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[s.string(k)] = s.value(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = s.value(e)
		}
		return out
	default:
		return v
	}
}

// result is the end of every result's way out: it scrubs the JSON the
// mapping selected, inside its strings, then canonicalises it, computes its
// digest and keeps it if it fits. A note for the message says what went
// wrong.
func (s *scrubber) result(raw []byte) (kept *runtime.RawExtension, digest, note string) {
	if raw == nil {
		return nil, "", ""
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return nil, "", fmt.Sprintf("; result is not JSON: %v", s.string(err.Error()))
	}
	scrubbed, err := json.Marshal(s.value(v))
	if err != nil {
		return nil, "", fmt.Sprintf("; result cannot be encoded: %v", s.string(err.Error()))
	}
	canonical, err := protocol.Canonical(scrubbed)
	if err != nil {
		return nil, "", "; " + s.string(err.Error())
	}
	digest = protocol.Digest(canonical)
	if len(canonical) > v1.MaxResultBytes {
		return nil, digest, fmt.Sprintf("; result of %d bytes not kept (limit %d)", len(canonical), v1.MaxResultBytes)
	}
	return &runtime.RawExtension{Raw: canonical}, digest, ""
}

// call scrubs a call's result on its way out. raw is the JSON the mapping
// selected, nil if none.
func (s *scrubber) call(r protocol.CallResult, raw []byte) protocol.CallResult {
	var note string
	r.Result, r.ResultDigest, note = s.result(raw)
	r.Message = s.string(r.Message + note)
	r.Request = s.string(r.Request)
	r.ExternalObjectID = s.string(r.ExternalObjectID)
	r.ExternalRequestID = s.string(r.ExternalRequestID)
	return r
}

// lookup scrubs a lookup's result on its way out.
func (s *scrubber) lookup(r protocol.LookupResult, raw []byte) protocol.LookupResult {
	var note string
	r.Result, r.ResultDigest, note = s.result(raw)
	r.Message = s.string(r.Message + note)
	r.Request = s.string(r.Request)
	r.ExternalObjectID = s.string(r.ExternalObjectID)
	r.ExternalRequestID = s.string(r.ExternalRequestID)
	return r
}
