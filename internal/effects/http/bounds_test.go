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
	"runtime"
	"strings"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

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
			for i := range 24 {
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
		// The longest expression the CRD takes, the costliest to compile
		// of those tried: compiled and estimated once, then cached. A
		// chain of 2048 sums passes cel-go's depth of 250, and is refused.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		worstcase.Within(t, "compiling an expression of 4096 characters", 256<<20, func() {
			_, err = c.Compile(worstcase.Expression(0, 4096))
		})
		if err != nil {
			t.Errorf("a list of 455 elements: %v", err)
		}
		deep := "0" + strings.Repeat("+0", (4096-1)/2)
		worstcase.Within(t, "compiling a chain of 2048 sums", 16<<20, func() { _, err = c.Compile(deep) })
		if err == nil || !strings.Contains(err.Error(), "max recursion depth exceeded") {
			t.Errorf("a chain of 2048 sums must be refused for its depth: %v", err)
		}
	})
	t.Run("Tool", func(t *testing.T) {
		// Expressions of as many characters together as a Tool may carry,
		// 8 of 4096, each the costliest to compile of those tried.
		// Compiled once per generation of the Tool, then cached.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		spec := worstTool(0)
		worstcase.Within(t, "a Tool's 8 expressions of 4096 characters", 2<<30, func() { err = c.Validate(spec) })
		if err != nil {
			t.Errorf("expressions at the bound of characters together: %v", err)
		}
	})
	t.Run("ToolOverBound", func(t *testing.T) {
		// One character more is refused before any expression is compiled:
		// compiling one would allocate tens of MiB.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		spec := worstTool(1)
		worstcase.Within(t, "refusing a Tool's expressions one character over the bound", 1<<20, func() {
			err = c.Validate(spec)
		})
		want := fmt.Sprintf("take %d characters together, more than the limit of %d", v1.MaxExpressionChars+1,
			v1.MaxExpressionChars)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error that says %q", err, want)
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

// TestWorstCasesKept: what the Compiler keeps between validations, a
// refusal included, and what a kept schema costs.
func TestWorstCasesKept(t *testing.T) {
	t.Run("ToolInvalidAgain", func(t *testing.T) {
		// A Tool whose 8 costly expressions each fail at the end of their
		// check. Every operation that names the Tool validates it in each
		// of its passes: the second validation must not compile them again.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		spec := worstTool(0)
		for i := range spec.Operations[0].Response.Outcomes {
			spec.Operations[0].Response.Outcomes[i].When = worstcase.Expression(i, 4092) + " + 1"
		}
		worstcase.Within(t, "a Tool's 8 expressions of 4096 characters that fail", 2<<30, func() { err = c.Validate(spec) })
		if err == nil {
			t.Fatal("a list plus an int must be refused")
		}
		first := err.Error()
		worstcase.Within(t, "validating that Tool again", 1<<20, func() { err = c.Validate(spec) })
		if err == nil || err.Error() != first {
			t.Errorf("validating again: got %v, want %s", err, first)
		}
	})
	t.Run("SchemaInvalidAgain", func(t *testing.T) {
		// A parametersSchema at its bound, of 250 patterns at theirs, and
		// one pattern that does not compile, at the end. Every pass of
		// every operation that names the Tool validates it: the second
		// validation must not compile the schema again: only its canonical
		// form, for its digest, is made again. Before the bound on a
		// schema, 12000 patterns cost 897 MiB a pass.
		spec := schemaTool(manyPatterns(250, `"("`))
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		worstcase.Within(t, "a parametersSchema of 250 patterns that fails", 64<<20, func() { err = c.Validate(spec) })
		if err == nil || !strings.Contains(err.Error(), "does not compile") && !strings.Contains(err.Error(), "not valid regex") {
			t.Fatalf("a pattern that does not compile must be refused: %v", err)
		}
		first := err.Error()
		worstcase.Within(t, "validating that Tool again", 1<<20, func() { err = c.Validate(spec) })
		if err == nil || err.Error() != first {
			t.Errorf("validating again: got %v, want %s", err, first)
		}
	})
}

// TestSchemaBounds: a parametersSchema is bounded in bytes before it is
// compiled, alone and with its Tool's others, and so are the schemas the
// Compiler keeps. Each worst case is measured live, after collection.
func TestSchemaBounds(t *testing.T) {
	t.Run("SchemaKept", func(t *testing.T) {
		// A Tool's parametersSchemas at their bound together, each at its
		// own, of the costliest shape tried to keep. 12000 patterns, about
		// 740 KB, kept 210.7 MiB before the bound.
		spec := schemaTool(keyAbove(MaxSchemaBytes, MaxSchemaBytes/2, 0))
		second := spec.Operations[0]
		second.Name = "charge.refund"
		second.ParametersSchema = &k8sruntime.RawExtension{Raw: []byte(keyAbove(MaxSchemaBytes, MaxSchemaBytes/2, 1))}
		spec.Operations = append(spec.Operations, second)
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		kept := liveAfter(t, c, func() {
			if err := c.Validate(spec); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("a Tool's parametersSchemas of %d bytes keep %.1f MiB live", MaxToolSchemaBytes, float64(kept)/(1<<20))
		if kept > 48<<20 {
			t.Errorf("a Tool's schemas at their bound keep %d bytes, more than the 48 MiB the threat model states", kept)
		}
	})
	t.Run("SchemaOverBound", func(t *testing.T) {
		// One byte over is refused with nothing compiled: only the
		// canonical form is made. So is a schema of 12000 patterns.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		spec := schemaTool(keyAbove(MaxSchemaBytes+1, MaxSchemaBytes/2, 0))
		worstcase.Within(t, "refusing a parametersSchema one byte over its bound", 1<<20, func() { err = c.Validate(spec) })
		want := fmt.Sprintf(`spec.operations[0].parametersSchema of operation "charge.create": the schema takes %d bytes `+
			"of canonical JSON, more than the limit of %d", MaxSchemaBytes+1, MaxSchemaBytes)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error that says %q", err, want)
		}
		spec = schemaTool(manyPatterns(12000, `"^a$"`))
		worstcase.Within(t, "refusing a parametersSchema of 12000 patterns", 16<<20, func() { err = c.Validate(spec) })
		if err == nil || !strings.Contains(err.Error(), "more than the limit of") {
			t.Errorf("got %v, want it refused for its size", err)
		}
	})
	t.Run("ToolSchemasOverBound", func(t *testing.T) {
		// Three schemas, each at its bound, over the Tool's together:
		// refused with none compiled.
		spec := schemaTool(keyAbove(MaxSchemaBytes, MaxSchemaBytes/2, 0))
		for i := range 2 {
			op := spec.Operations[0]
			op.Name = fmt.Sprintf("op%d", i)
			op.ParametersSchema = &k8sruntime.RawExtension{Raw: []byte(keyAbove(MaxSchemaBytes, MaxSchemaBytes/2, i+1))}
			spec.Operations = append(spec.Operations, op)
		}
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		worstcase.Within(t, "refusing a Tool's parametersSchemas over their bound together", 4<<20, func() {
			err = c.Validate(spec)
		})
		want := fmt.Sprintf("spec: the parametersSchemas take %d bytes of canonical JSON together, more than the limit of %d",
			3*MaxSchemaBytes, MaxToolSchemaBytes)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v, want an error that says %q", err, want)
		}
	})
	t.Run("SchemaPatternRunes", func(t *testing.T) {
		// A pattern within 128 instructions whose class holds many ranges:
		// Go's regexp copies them for each instruction of an anchored
		// pattern, 1.2 MiB kept for 17 characters.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		err = c.Validate(schemaTool(`{"type":"object","properties":{"a":{"type":"string","pattern":"^[^\\pL\\pN]{1,60}$"}}}`))
		if err == nil || !strings.Contains(err.Error(), "ranges of characters, more than the limit of 2048") {
			t.Errorf("got %v, want the pattern refused for its ranges", err)
		}
	})
	t.Run("SchemaCache", func(t *testing.T) {
		// 24 distinct schemas at their bound, of the costliest shape
		// tried: the cache keeps cacheBytes of them, the ones used last.
		c, err := NewCompiler()
		if err != nil {
			t.Fatal(err)
		}
		kept := liveAfter(t, c, func() {
			for i := range 24 {
				if err := c.Validate(schemaTool(keyAbove(MaxSchemaBytes, MaxSchemaBytes/2, i))); err != nil {
					t.Fatal(err)
				}
			}
		})
		t.Logf("24 schemas of %d bytes keep %.1f MiB live; the cache keeps %d bytes of schemas", MaxSchemaBytes,
			float64(kept)/(1<<20), c.schemas.bytes)
		if c.schemas.bytes > cacheBytes {
			t.Errorf("the cache keeps %d bytes of schemas, more than %d", c.schemas.bytes, cacheBytes)
		}
		if kept > 160<<20 {
			t.Errorf("the schema cache keeps %d bytes, more than the 160 MiB the threat model states", kept)
		}
	})
}

// liveAfter is the heap f leaves live in c, after collection.
func liveAfter(t *testing.T, c *Compiler, f func()) int64 {
	t.Helper()
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	before := int64(m.HeapAlloc)
	f()
	runtime.GC()
	runtime.ReadMemStats(&m)
	runtime.KeepAlive(c)
	return int64(m.HeapAlloc) - before
}

// manyPatterns is a parametersSchema of n string properties, each with a
// pattern at its bound, and a property z whose pattern is last.
func manyPatterns(n int, last string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		fmt.Fprintf(&b, `"p%d":{"type":"string","pattern":"^[a-z]{1,30}[0-9]{1,30}$"},`, i)
	}
	fmt.Fprintf(&b, `"z":{"type":"string","pattern":%s}}}`, last)
	return b.String()
}

// worstTool is a Tool whose expressions take v1.MaxExpressionChars
// characters together, and more characters beyond, in a result.
func worstTool(more int) *v1.ToolSpec {
	op := v1.ToolOperation{Name: "op", Path: "/op"}
	for i := range v1.MaxExpressionChars / 4096 {
		op.Response.Outcomes = append(op.Response.Outcomes, v1.OutcomeRule{When: worstcase.Expression(i, 4096),
			Outcome: v1.OutcomeSucceeded})
	}
	op.Response.Result = strings.Repeat("0", more)
	return &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative}, Operations: []v1.ToolOperation{op}}
}

// TestExpressionCharacters: every expression of a Tool counts toward
// v1.MaxExpressionChars, in code points as the API server counts them.
// Each field below holds one: if one were not counted, the Tool one
// character over would be taken.
func TestExpressionCharacters(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		reason string
		total  int
		err    string
	}{
		"AtLimit": {reason: "expressions of 32768 characters together are taken", total: v1.MaxExpressionChars},
		"OverLimit": {reason: "one character more, in any of them, is refused", total: v1.MaxExpressionChars + 1,
			err: "spec: the CEL expressions take 32769 characters together, more than the limit of 32768: " +
				"shorten them, or split the operations between two Tools"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.Validate(everyExpression(tc.total))
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("%s: %v", tc.reason, err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("%s: got %v, want an error that says %q", tc.reason, err, tc.err)
			}
		})
	}
}

// everyExpression is a Tool with an expression in each field that holds
// one, total characters together. The first holds the rest of the total,
// a string of 'é' (two bytes, one character each).
func everyExpression(total int) *v1.ToolSpec {
	var fields []*string
	shape := func() *v1.RequestShape {
		sh := &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "a"}}, Query: []v1.NamedValue{{Name: "q"}},
			Headers: []v1.NamedValue{{Name: "h"}}}
		fields = append(fields, &sh.PathValues[0].Value, &sh.Query[0].Value, &sh.Headers[0].Value, &sh.Body)
		return sh
	}
	op := v1.ToolOperation{Name: "op", Path: "/op/{a}", Request: shape(),
		Lookup:   &v1.LookupRequest{Path: "/op/{a}", Request: shape()},
		Validate: &v1.ValidateRequest{Path: "/op/{a}", Request: shape()},
		Response: v1.ResponseMapping{Outcomes: []v1.OutcomeRule{{Outcome: v1.OutcomeSucceeded}}}}
	spec := &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative}, Operations: []v1.ToolOperation{op}}
	o := &spec.Operations[0]
	fields = append(fields, &spec.Idempotency.Replayed, &o.Lookup.Found, &o.Lookup.Absent, &o.Validate.Valid,
		&o.Validate.Invalid, &o.Validate.Message, &o.Response.Outcomes[0].When, &o.Response.ExternalObjectID,
		&o.Response.ExternalRequestID, &o.Response.Result)
	rest := total
	for _, f := range fields[1:] {
		*f = "0"
		rest--
	}
	*fields[0] = "'" + strings.Repeat("é", rest-2) + "'"
	return spec
}

// keyAbove is a parametersSchema of exactly n bytes of canonical JSON,
// the costliest shape tried to keep: a property whose name takes key
// bytes, above as many empty schemas as fit. Each keeps the path to
// itself, the long name included. Schemas of distinct seeds differ.
func keyAbove(n, key, seed int) string {
	var b strings.Builder
	for i := 0; b.Len() < n-key-64; i++ {
		fmt.Fprintf(&b, `"%x":{},`, i)
	}
	children := strings.TrimSuffix(b.String(), ",")
	shape := func(k int) string {
		return fmt.Sprintf(`{"properties":{"%x%s":{"properties":{%s}}}}`, seed, strings.Repeat("k", k), children)
	}
	return shape(n - len(shape(0)))
}
