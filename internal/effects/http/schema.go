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
	"container/list"
	"context"
	"errors"
	"fmt"
	nethttp "net/http"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/celregex"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// MaxSchemaBytes bounds one operation's parametersSchema, in bytes of
// canonical JSON. Compiled, a schema keeps up to about 1300 bytes per byte
// of it (a long property name above many small schemas, each of which
// keeps the whole path to itself): 16 KiB keep about 20 MiB.
const MaxSchemaBytes = 16 * 1024

// MaxToolSchemaBytes bounds a Tool's parametersSchemas together, in bytes
// of canonical JSON: about 40 MiB compiled at most.
const MaxToolSchemaBytes = 32 * 1024

// maxPatternRunes bounds the ranges of characters in a pattern's program.
// Go's regexp copies them for each instruction of an anchored pattern: a
// class such as [^\pL\pN] repeated 60 times would keep 1.2 MiB.
const maxPatternRunes = 2048

// cacheBytes bounds the schemas the cache keeps, by the bytes of their
// canonical JSON, each with entryBytes more: 8 at MaxSchemaBytes, about
// 160 MiB compiled at most, or some 250 of the samples' size.
const (
	cacheBytes = 128 * 1024
	entryBytes = 128
)

// maxViolations bounds the violations named in one message.
const maxViolations = 5

// schemas compiles the parameter schemas of tools' operations
// (github.com/santhosh-tekuri/jsonschema/v6), keeps them by digest, and
// checks parameters against them. It keeps the ones used last, up to
// cacheBytes of their canonical JSON.
type schemas struct {
	mu    sync.Mutex
	bytes int
	order list.List                // of *keptSchema, the one used last first
	byKey map[string]*list.Element // digest → its element in order
}

// keptSchema is a compiled schema, or why it does not compile, by digest.
type keptSchema struct {
	digest string
	weight int
	compiledSchema
}

// refuseLoads refuses every document a schema refers to: a Tool author's
// schema must not make the manager read files or call URLs.
type refuseLoads struct{}

func (refuseLoads) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s: schemas may not refer to other documents", url)
}

// boundedRegexp compiles a schema's pattern with Go's regexp, if its
// program is within the bound CEL's matches() has: a match takes the
// input's length times the program's size.
// Its ranges of characters are bounded too (maxPatternRunes).
func boundedRegexp(pattern string) (jsonschema.Regexp, error) {
	if err := celregex.Check(pattern); err != nil {
		return nil, err
	}
	if n := patternRunes(pattern); n > maxPatternRunes {
		return nil, fmt.Errorf("pattern %q holds %d ranges of characters, more than the limit of %d "+
			"(a class such as \\pL holds hundreds, and counts once per repetition): use smaller classes or counts",
			pattern, n, maxPatternRunes)
	}
	return regexp.Compile(pattern)
}

// patternRunes counts the bounds of the character ranges in a pattern's
// program, which celregex.Check has already parsed.
func patternRunes(pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0
	}
	n := 0
	for _, in := range prog.Inst {
		n += len(in.Rune)
	}
	return n
}

// canonicalSchema is a parametersSchema's canonical form, refused over
// MaxSchemaBytes before anything compiles it.
func canonicalSchema(raw []byte) ([]byte, error) {
	canonical, err := protocol.Canonical(raw)
	if err != nil {
		return nil, err
	}
	if len(canonical) > MaxSchemaBytes {
		return nil, fmt.Errorf("the schema takes %d bytes of canonical JSON, more than the limit of %d: "+
			"describe fewer fields, or split the operation", len(canonical), MaxSchemaBytes)
	}
	return canonical, nil
}

func (s *schemas) compile(raw []byte) (*jsonschema.Schema, error) {
	canonical, err := canonicalSchema(raw)
	if err != nil {
		return nil, err
	}
	return s.compileCanonical(canonical)
}

// compileCanonical compiles a canonical schema within MaxSchemaBytes, or
// finds it kept.
func (s *schemas) compileCanonical(canonical []byte) (*jsonschema.Schema, error) {
	digest := protocol.Digest(canonical)
	if c, ok := s.get(digest); ok {
		return c.sch, c.err
	}
	sch, err := compileSchema(canonical)
	s.add(&keptSchema{digest: digest, weight: len(canonical) + entryBytes, compiledSchema: compiledSchema{sch: sch, err: err}})
	return sch, err
}

func (s *schemas) get(digest string) (compiledSchema, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.byKey[digest]
	if !ok {
		return compiledSchema{}, false
	}
	s.order.MoveToFront(e)
	return e.Value.(*keptSchema).compiledSchema, true
}

// add keeps a schema, and drops the ones used longest ago until the kept
// fit in cacheBytes.
func (s *schemas) add(k *keptSchema) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey == nil {
		s.byKey = map[string]*list.Element{}
	}
	if _, ok := s.byKey[k.digest]; ok {
		return
	}
	s.byKey[k.digest] = s.order.PushFront(k)
	s.bytes += k.weight
	for s.bytes > cacheBytes {
		last := s.order.Back()
		old := last.Value.(*keptSchema)
		s.order.Remove(last)
		delete(s.byKey, old.digest)
		s.bytes -= old.weight
	}
}

// compiledSchema is a schema, or why it does not compile: a refusal costs
// as much to find as a schema, and an invalid Tool is validated again in
// every pass of every operation that names it.
type compiledSchema struct {
	sch *jsonschema.Schema
	err error
}

// compileSchema compiles a canonical schema, its patterns bounded.
func compileSchema(canonical []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(canonical))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(refuseLoads{})
	c.UseRegexpEngine(boundedRegexp)
	const url = "parametersSchema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	return c.Compile(url)
}

// CheckParameters checks an operation's canonical parameters against its
// operation's parametersSchema, if it has one. The error names each field
// and the rule it breaks.
func (c *Compiler) CheckParameters(spec *v1.ToolSpec, operation string, params []byte) error {
	op := spec.Operation(operation)
	if op == nil {
		return nil
	}
	if err := c.checkSchema(op, params); err != nil {
		return err
	}
	return c.checkRequest(spec, op, params)
}

// checkRequest builds the operation's request from the parameters, as a
// call would, and refuses what cannot be built (a missing parameter, a
// wrong type), so that it fails before any claim. The key and the secret
// values are stand-ins: they are known at call time, and their values
// cannot make a request unbuildable.
func (c *Compiler) checkRequest(spec *v1.ToolSpec, op *v1.ToolOperation, params []byte) error {
	if op.Request == nil {
		return nil
	}
	stand := map[string]string{}
	for _, sv := range spec.HTTP.SecretValues {
		stand[sv.Name] = "s"
	}
	cl := &Client{spec: spec, compiler: c, secretValues: stand}
	_, err := cl.shape(context.Background(), cmp.Or(op.Method, nethttp.MethodPost), op.Path, op.Request,
		effects.Request{Operation: op.Name, Key: "k", Parameters: params},
		requestView(effects.Request{Key: "k", Parameters: params}))
	if err != nil {
		return fmt.Errorf("spec.parameters cannot make the operation's request: %w", err)
	}
	return nil
}

// checkSchema checks the parameters against the operation's schema.
func (c *Compiler) checkSchema(op *v1.ToolOperation, params []byte) error {
	operation := op.Name
	if op.ParametersSchema == nil || len(op.ParametersSchema.Raw) == 0 {
		return nil
	}
	sch, err := c.schemas.compile(op.ParametersSchema.Raw)
	if err != nil {
		return fmt.Errorf("the parametersSchema of operation %q does not compile: %w", operation, err)
	}
	if len(params) == 0 {
		params = []byte("{}")
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return fmt.Errorf("spec.parameters: %w", err)
	}
	err = sch.Validate(inst)
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return err
	}
	return &ParametersError{Violations: violations(verr)}
}

// ParametersError lists how parameters break their schema.
type ParametersError struct {
	// Violations read "at <JSON pointer>: <rule>", in order.
	Violations []string
}

func (e *ParametersError) Error() string {
	v := e.Violations
	more := ""
	if len(v) > maxViolations {
		more = fmt.Sprintf("; and %d more", len(v)-maxViolations)
		v = v[:maxViolations]
	}
	return "spec.parameters do not match the operation's parametersSchema: " + strings.Join(v, "; ") + more
}

// english prints the rules broken.
var english = message.NewPrinter(language.English)

// violations flattens a validation error to its leaves, each naming the
// field (a JSON pointer into spec.parameters) and the rule.
func violations(e *jsonschema.ValidationError) []string {
	var out []string
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			field := "/" + strings.Join(e.InstanceLocation, "/")
			out = append(out, fmt.Sprintf("at %s: %s", field, e.ErrorKind.LocalizedString(english)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(e)
	slices.Sort(out)
	return out
}
