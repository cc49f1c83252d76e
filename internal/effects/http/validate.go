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
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Validate checks what the API server cannot: that every expression
// compiles and every path makes a URL. It returns all problems, joined.
// It refuses expressions over v1.MaxExpressionChars together before it
// compiles any: the CRD refuses them too, but a Tool stored before its
// rule reaches the manager.
func (c *Compiler) Validate(spec *v1.ToolSpec) error {
	var errs []error
	if _, err := url.Parse(spec.HTTP.URL); err != nil {
		errs = append(errs, fmt.Errorf("spec.http.url: %w", redact(err)))
	}
	// Expressions and schemas are compiled once all are counted.
	var exprs []fieldText
	var schemas []fieldSchema
	check := func(field, expr string) {
		if expr != "" {
			exprs = append(exprs, fieldText{field, expr})
		}
	}
	check("spec.idempotency.replayed", spec.Idempotency.Replayed)
	for i, op := range spec.Operations {
		at := fmt.Sprintf("spec.operations[%d]", i)
		errs = append(errs, checkPath(at+".path", op.Path))
		for j, rule := range op.Response.Outcomes {
			check(fmt.Sprintf("%s.response.outcomes[%d].when", at, j), rule.When)
		}
		check(at+".response.externalObjectID", op.Response.ExternalObjectID)
		check(at+".response.externalRequestID", op.Response.ExternalRequestID)
		check(at+".response.result", op.Response.Result)
		checkShape := func(at string, sh *v1.RequestShape) {
			if sh == nil {
				return
			}
			for j, v := range sh.PathValues {
				check(fmt.Sprintf("%s.pathValues[%d].value", at, j), v.Value)
			}
			for j, v := range sh.Query {
				check(fmt.Sprintf("%s.query[%d].value", at, j), v.Value)
			}
			for j, v := range sh.Headers {
				check(fmt.Sprintf("%s.headers[%d].value", at, j), v.Value)
			}
			check(at+".body", sh.Body)
		}
		checkShape(at+".request", op.Request)
		errs = append(errs, checkPlaceholders(at+".path", op.Path, op.Request))
		if l := op.Lookup; l != nil {
			checkShape(at+".lookup.request", l.Request)
			errs = append(errs, checkPlaceholders(at+".lookup.path", l.Path, l.Request))
		}
		if op.ParametersSchema != nil {
			schemas = append(schemas, fieldSchema{at + ".parametersSchema", op.Name, op.ParametersSchema.Raw})
		}
		if l := op.Lookup; l != nil {
			errs = append(errs, checkPath(at+".lookup.path", l.Path))
			check(at+".lookup.found", l.Found)
			check(at+".lookup.absent", l.Absent)
		}
		if v := op.Validate; v != nil {
			errs = append(errs, checkPath(at+".validate.path", v.Path))
			checkShape(at+".validate.request", v.Request)
			// Without a shape of its own, the operation's fills the path.
			errs = append(errs, checkPlaceholders(at+".validate.path", v.Path, cmp.Or(v.Request, op.Request)))
			check(at+".validate.valid", v.Valid)
			check(at+".validate.invalid", v.Invalid)
			check(at+".validate.message", v.Message)
		}
	}
	if err := checkCharacters(exprs); err != nil {
		return errors.Join(append(errs, err)...)
	}
	errs = append(errs, c.compileSchemas(schemas)...)
	for _, e := range exprs {
		if _, err := c.Compile(e.text); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.field, err))
		}
	}
	return errors.Join(errs...)
}

// fieldText is a field of a tool's spec and the expression it holds.
type fieldText struct{ field, text string }

// fieldSchema is an operation's parametersSchema and its field.
type fieldSchema struct {
	field, operation string
	raw              []byte
}

// compileSchemas compiles the operations' parametersSchemas. It refuses
// one over MaxSchemaBytes, and all over MaxToolSchemaBytes together,
// before it compiles any.
func (c *Compiler) compileSchemas(schemas []fieldSchema) []error {
	var errs []error
	canonical := make([][]byte, len(schemas))
	total := 0
	for i, s := range schemas {
		b, err := canonicalSchema(s.raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s of operation %q: %w", s.field, s.operation, err))
		}
		canonical[i] = b
		total += len(b)
	}
	if total > MaxToolSchemaBytes {
		errs = append(errs, fmt.Errorf("spec: the parametersSchemas take %d bytes of canonical JSON together, "+
			"more than the limit of %d: describe fewer fields, or split the operations between two Tools",
			total, MaxToolSchemaBytes))
	}
	if len(errs) > 0 {
		return errs
	}
	for i, s := range schemas {
		if _, err := c.schemas.compileCanonical(canonical[i]); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", s.field, err))
		}
	}
	return errs
}

// checkCharacters refuses expressions over v1.MaxExpressionChars together.
func checkCharacters(exprs []fieldText) error {
	n := 0
	for _, e := range exprs {
		n += utf8.RuneCountInString(e.text)
	}
	if n > v1.MaxExpressionChars {
		return fmt.Errorf("spec: the CEL expressions take %d characters together, more than the limit of %d: "+
			"shorten them, or split the operations between two Tools", n, v1.MaxExpressionChars)
	}
	return nil
}

// readsList matches an expression that reads a list: a search's items.
var readsList = regexp.MustCompile(`\.(exists|exists_one|all|filter|map)\(|\bsize\(|==\s*\[\s*\]`)

// identifier matches the names an expression reads.
var identifier = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)

// completeness are the names by which answers say whether a list is
// complete: a total or count, a next page or cursor, a flag.
var completeness = map[string]bool{
	"total": true, "total_count": true, "totalCount": true, "count": true, "totalResults": true,
	"next": true, "next_page": true, "nextPage": true, "next_cursor": true, "nextCursor": true, "nextPageToken": true,
	"has_more": true, "hasMore": true, "more": true, "cursor": true, "page": true, "pages": true,
	"incomplete_results": true, "complete": true, "truncated": true, "links": true,
}

// readsCompleteness reports whether expr reads a name by which answers say
// a list is complete.
func readsCompleteness(expr string) bool {
	for _, name := range identifier.FindAllString(expr, -1) {
		if completeness[name] {
			return true
		}
	}
	return false
}

// readsOnlyStatus matches an expression that reads neither the body nor
// the headers of the answer.
func readsOnlyStatus(expr string) bool {
	return !strings.Contains(expr, "response.body") && !strings.Contains(expr, "response.headers")
}

// Warnings are what Validate cannot refuse but a tool author should know:
//
//   - A lookup's found that reads the status alone. A default page answers
//     200 too. Tools made before found was required have that default.
//   - An absent that reads a list with nothing that says the list is
//     complete. A search proves absence only from a complete answer. One
//     page of many, or a sort that puts the effect later, proves nothing.
func Warnings(spec *v1.ToolSpec) []string {
	var out []string
	for i, op := range spec.Operations {
		l := op.Lookup
		if l == nil {
			continue
		}
		at := fmt.Sprintf("spec.operations[%d].lookup", i)
		if l.Found != "" && readsOnlyStatus(l.Found) {
			out = append(out, at+".found reads the status alone: an ingress's default page or an empty search "+
				"answers 200 too; check what the tool says of the key")
		}
		if readsList.MatchString(l.Absent) && !readsCompleteness(l.Absent) {
			out = append(out, at+".absent reads a list but nothing that says it is complete "+
				"(a total, a next page): a search proves absence only from a complete answer")
		}
	}
	return out
}

func checkPath(field, path string) error {
	if path == "" {
		return nil
	}
	if !strings.HasPrefix(path, "/") && !strings.HasPrefix(path, "?") {
		return fmt.Errorf("%s: %q must start with / or ?", field, path)
	}
	if _, err := url.Parse(strings.ReplaceAll(path, keyPlaceholder, "k")); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

// placeholder matches a {name} in a path.
var placeholder = regexp.MustCompile(`\{([^{}/]+)\}`)

// checkPlaceholders refuses a path placeholder that no path value fills.
func checkPlaceholders(field, path string, sh *v1.RequestShape) error {
	filled := map[string]bool{strings.Trim(keyPlaceholder, "{}"): true}
	if sh != nil {
		for _, v := range sh.PathValues {
			filled[v.Name] = true
		}
	}
	for _, m := range placeholder.FindAllStringSubmatch(path, -1) {
		if !filled[m[1]] {
			return fmt.Errorf("%s: {%s} has no value in request.pathValues", field, m[1])
		}
	}
	return nil
}
