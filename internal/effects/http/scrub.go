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
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

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

// scrubber removes secret header values from what a Client returns. Tools
// echo request headers in errors and debug answers, as they are, or in an
// encoding; the scrubber knows the common ones. The Connector builds one
// from the values it resolved; the Client applies it to each description
// of an answer and to each result as it leaves (so that nothing it built,
// ids, results and error strings included, holds one). Expressions see the
// answer as it came: a secret that also occurs in a key must not hide it.
type scrubber struct {
	r *strings.Replacer
	// forms are the secrets' forms the replacer replaces.
	forms []string
}

// newScrubber returns a scrubber for the secret values; with none, it
// changes nothing.
func newScrubber(values []string) *scrubber {
	forms := map[string]bool{}
	add := func(s string, minLen int) {
		if len(s) < minLen {
			return
		}
		forms[s] = true
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding,
			base64.RawStdEncoding, base64.RawURLEncoding} {
			forms[enc.EncodeToString([]byte(s))] = true
		}
		forms[url.QueryEscape(s)] = true
		forms[url.PathEscape(s)] = true
		if b, err := json.Marshal(s); err == nil {
			forms[string(b[1:len(b)-1])] = true
			// Some encoders escape the slash too.
			forms[strings.ReplaceAll(string(b[1:len(b)-1]), "/", `\/`)] = true
		}
	}
	for _, v := range values {
		add(v, 1)
		add(strings.TrimSpace(v), 1)
		scheme, token, ok := strings.Cut(strings.TrimSpace(v), " ")
		if !ok {
			continue
		}
		token = strings.TrimSpace(token)
		add(token, minSecretPart)
		if !strings.EqualFold(scheme, "Basic") {
			continue
		}
		if d, err := base64.StdEncoding.DecodeString(token); err == nil {
			add(string(d), minSecretPart)
			if _, password, ok := strings.Cut(string(d), ":"); ok {
				add(password, minSecretPart)
			}
		}
	}
	delete(forms, "")
	if len(forms) == 0 {
		return &scrubber{}
	}
	// Longest first: where one form contains another, the whole is replaced.
	sorted := slices.SortedFunc(maps.Keys(forms), func(a, b string) int {
		return cmp.Or(len(b)-len(a), strings.Compare(a, b))
	})
	pairs := make([]string, 0, 2*len(sorted))
	for _, f := range sorted {
		pairs = append(pairs, f, redacted)
	}
	return &scrubber{r: strings.NewReplacer(pairs...), forms: sorted}
}

// string scrubs s.
func (s *scrubber) string(v string) string {
	if s == nil || s.r == nil {
		return v
	}
	return s.r.Replace(v)
}

// cutBefore returns where to cut b at or before n so that no form of a
// secret spans the cut: the start of the first that would, until none
// does.
func (s *scrubber) cutBefore(b []byte, n int) int {
	if s == nil {
		return n
	}
	for moved := true; moved; {
		moved = false
		for _, f := range s.forms {
			// An occurrence that starts in the window and before n ends
			// after it.
			from, to := max(0, n-len(f)+1), min(len(b), n+len(f)-1)
			if i := bytes.Index(b[from:to], []byte(f)); i >= 0 && from+i < n {
				n, moved = from+i, true
			}
		}
	}
	return n
}

// value scrubs the strings, keys included, of decoded JSON, into a copy.
func (s *scrubber) value(v any) any {
	if s == nil || s.r == nil {
		return v
	}
	switch v := v.(type) {
	case string:
		return s.r.Replace(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[s.r.Replace(k)] = s.value(e)
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
