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
	"context"
	"encoding/json"
	"fmt"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/worstcase"
)

// TestWorstCases: what a tool's answer, a token endpoint's answer, a
// Secret and a Tool's author write costs the manager at its bound, each
// measured. docs/threat-model.md's table of bounds quotes the figures;
// each ceiling here is the table's.
func TestWorstCases(t *testing.T) {
	// An answer of many small JSON values, the most work per byte.
	// Built before any measure, so that only the manager's side is
	// counted.
	many := func(n int) []byte { return []byte(`{"a":[` + strings.Repeat(`0,`, n/2) + `0]}`) }
	huge, full := many(8<<20), many(maxBody)
	tool := func(answer func(w nethttp.ResponseWriter)) *httptest.Server {
		srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			answer(w)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	run := func(t *testing.T, spec *v1.ToolSpec) protocol.CallResult {
		t.Helper()
		c := newClient(t, spec, nil)
		return c.Execute(context.Background(), effects.Request{Operation: "charge.create", Key: "k", Timeout: 10 * time.Second})
	}
	t.Run("Answer", func(t *testing.T) {
		// 8 MiB of small values: read to 80 KiB, seen to 64 KiB, mapped
		// whole by result.
		srv := tool(func(w nethttp.ResponseWriter) {
			w.WriteHeader(nethttp.StatusCreated)
			_, _ = w.Write(huge)
		})
		spec := toolSpec(srv.URL, v1.IdempotencyNone)
		spec.Operations[0].Response = v1.ResponseMapping{Result: "response.body"}
		var r protocol.CallResult
		worstcase.Within(t, "an answer of 8 MiB", 8<<20, func() { r = run(t, spec) })
		if !strings.Contains(r.Message, "expressions saw only its first 64 KiB") {
			t.Errorf("the answer must be cut at 64 KiB: %s", r.Message)
		}
	})
	t.Run("AnswerJSON", func(t *testing.T) {
		// 64 KiB of small values, all seen as JSON and mapped whole.
		srv := tool(func(w nethttp.ResponseWriter) {
			w.WriteHeader(nethttp.StatusCreated)
			_, _ = w.Write(full)
		})
		spec := toolSpec(srv.URL, v1.IdempotencyNone)
		spec.Operations[0].Response = v1.ResponseMapping{Result: "response.body"}
		var r protocol.CallResult
		worstcase.Within(t, "an answer of 64 KiB of JSON", 16<<20, func() { r = run(t, spec) })
		if r.Outcome != v1.OutcomeSucceeded {
			t.Errorf("an answer at the bound is read: %s: %s", r.Outcome, r.Message)
		}
	})
	t.Run("AnswerHeaders", func(t *testing.T) {
		// Headers past 64 KiB are refused while they are read.
		srv := tool(func(w nethttp.ResponseWriter) {
			for i := range 64 {
				w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("h", 16<<10))
			}
			w.WriteHeader(nethttp.StatusCreated)
		})
		var r protocol.CallResult
		worstcase.Within(t, "an answer's headers of 1 MiB", 4<<20, func() { r = run(t, toolSpec(srv.URL, v1.IdempotencyNone)) })
		if r.Outcome == v1.OutcomeSucceeded || !strings.Contains(r.Message, "header") {
			t.Errorf("headers over 64 KiB must be refused: %s: %s", r.Outcome, r.Message)
		}
	})
	t.Run("Expression", func(t *testing.T) {
		// The longest expression the CRD takes, of the smallest terms:
		// compiled and estimated once, then cached. A chain of 2048 sums
		// passes cel-go's depth of 250, and is refused.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		list := "[" + strings.Repeat("0,", (4096-2)/2) + "]"
		worstcase.Within(t, "compiling an expression of 4096 characters", 16<<20, func() { _, err = c.Compile(list) })
		if err != nil {
			t.Errorf("a list of 2047 elements: %v", err)
		}
		deep := "0" + strings.Repeat("+0", (4096-1)/2)
		worstcase.Within(t, "compiling a chain of 2048 sums", 16<<20, func() { _, err = c.Compile(deep) })
		if err == nil || !strings.Contains(err.Error(), "max recursion depth exceeded") {
			t.Errorf("a chain of 2048 sums must be refused for its depth: %v", err)
		}
	})
	t.Run("Schema", func(t *testing.T) {
		// A parametersSchema whose patterns are at their bound, checked
		// against 64 KiB of parameters, each property matched by each.
		props := map[string]string{}
		for i := range 64 {
			props[fmt.Sprintf("p%d", i)] = `{"type":"string","pattern":"^[a-z]{1,30}[0-9]{1,30}$"}`
		}
		var b strings.Builder
		b.WriteString(`{"type":"object","properties":{`)
		i := 0
		for k, v := range props {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, "%q:%s", k, v)
			i++
		}
		b.WriteString(`}}`)
		spec := schemaTool(b.String())
		params := map[string]string{}
		for k := range props {
			params[k] = strings.Repeat("a", (v1.MaxParametersBytes-64*12)/64)
		}
		raw, err := json.Marshal(params)
		if err != nil {
			t.Fatal(err)
		}
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		worstcase.Within(t, "a parametersSchema of 64 patterns over 64 KiB of parameters", 16<<20, func() {
			err = c.CheckParameters(spec, "charge.create", raw)
		})
		if err == nil {
			t.Error("parameters that match no pattern must be refused")
		}
	})
	t.Run("SecretHeader", func(t *testing.T) {
		// A header's Secret may hold 1 MiB, the API server's bound. The
		// scrubber would look for it in every answer: the tool is refused
		// before the scrubber is built.
		srv := tool(func(w nethttp.ResponseWriter) {
			w.WriteHeader(nethttp.StatusCreated)
			_, _ = w.Write(full)
		})
		secrets := secretsOf(t, map[string]map[string]string{"big": {"v": strings.Repeat("k", (1<<20)-1024)}})
		c := connector(t, secrets, NewTransport(loopback))
		tl := authTool(srv.URL, &v1.HTTPAuth{Bearer: &v1.SecretKeySelector{Name: "big", Key: "v"}}, nil)
		tl.Spec.Operations[0].Response.Result = "response.body"
		worstcase.Within(t, "a header's Secret of 1 MiB, and a call", 32<<20, func() {
			cl, err := c.Connect(context.Background(), tl)
			if err != nil {
				return
			}
			if o := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: 10 * time.Second}); o.Outcome == v1.OutcomeSucceeded {
				t.Error("a call with a header's Secret of 1 MiB must be refused")
			}
		})
	})
	t.Run("TokenAnswer", func(t *testing.T) {
		// A token endpoint's answer is read to 1 MiB (golang.org/x/oauth2).
		// Its token is a header, which the scrubber would look for in
		// every answer: a token over the bound is refused before.
		token := strings.Repeat("t", (1<<20)-64)
		tokens := tool(func(w nethttp.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, token)
		})
		srv := tool(func(w nethttp.ResponseWriter) {
			w.WriteHeader(nethttp.StatusCreated)
			_, _ = w.Write(full)
		})
		secrets := secretsOf(t, map[string]map[string]string{"oauth": {"clientID": "client-id-1", "clientSecret": "s3cr3t-secret"}})
		c := connector(t, secrets, NewTransport(loopback))
		tl := authTool(srv.URL, &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{TokenURL: tokens.URL, SecretName: "oauth"}}, nil)
		tl.Spec.Operations[0].Response.Result = "response.body"
		worstcase.Within(t, "a token of 1 MiB, and a call", 32<<20, func() {
			cl, err := c.Connect(context.Background(), tl)
			if err != nil {
				t.Fatal(err)
			}
			_ = cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: 10 * time.Second})
		})
	})
}
