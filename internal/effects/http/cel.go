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
	"errors"
	"fmt"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"
	"k8s.io/utils/lru"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/celbound"
	"github.com/once-dev/once/internal/celregex"
	"github.com/once-dev/once/internal/protocol"
)

const (
	// costLimit bounds the work one expression may do on one response, at
	// run time and in the estimate made when the tool is validated. It is
	// ten times the per-expression limit of the API server's CRD
	// validation rules. Those run on every write, where an answer's
	// expressions run once per call. It lets an expression search a 64 KiB
	// answer for the key (`response.body.items.exists(i, i.ref == key)`).
	// It refuses cross products. evalTimeout bounds the time as well.
	costLimit = 10_000_000
	// evalTimeout bounds the time of one evaluation, within the call's. The
	// cost limit bounds the work, but cel-go's cost tracking makes long
	// iterations slower than their cost says.
	evalTimeout = time.Second
	// maxPrograms bounds the programs kept, and the refusals: tools are
	// written by users, and each distinct expression is one.
	maxPrograms = 1024
)

// Compiler compiles the CEL expressions of tools over `response` and keeps
// the programs (the most recently used ones), so that an expression is
// rarely compiled twice.
type Compiler struct {
	env      *cel.Env
	programs *lru.Cache
	schemas  schemas
	// timeout bounds one evaluation's wall time: evalTimeout.
	timeout time.Duration
}

// errTimeLimit is an evaluation stopped before its end by its wall-clock
// limit or by the call's context. A CPU that other work starves makes any
// expression slow, so it decides nothing; one stopped at the cost limit
// stops there on every try.
var errTimeLimit = errors.New("stopped before its end by the time limit")

// NewCompiler returns a Compiler whose expressions see `response`, a map
// with `status` (int), `headers` (map of lower-case names to values) and
// `body` (decoded JSON, or the text).
func NewCompiler() (*Compiler, error) {
	env, err := cel.NewEnv(
		cel.Variable("response", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("parameters", cel.DynType),
		cel.Variable("key", cel.StringType),
		cel.Variable("since", cel.TimestampType),
		cel.Variable("secrets", cel.MapType(cel.StringType, cel.StringType)),
		// ext.Strings and ext.Encoders, with bounds where cel-go's costs
		// fall short.
		celbound.Library(),
		// A matches() runs to its end, past the cost limit and the
		// timeout: its pattern must be a literal of a bounded size.
		cel.ASTValidators(celregex.Validator{}),
	)
	if err != nil {
		return nil, fmt.Errorf("creating CEL environment: %w", err)
	}
	return &Compiler{env: env, programs: lru.New(maxPrograms), timeout: evalTimeout}, nil
}

// Compile checks expr, refuses it if its estimated worst-case cost exceeds
// costLimit, and returns its program. It keeps the program, or why there is
// none: a refusal costs as much to find as a program, and an invalid Tool
// is validated again in every pass of every operation that names it.
func (c *Compiler) Compile(expr string) (cel.Program, error) {
	if p, ok := c.programs.Get(expr); ok {
		return p.(compiled).prg, p.(compiled).err
	}
	p, err := c.compile(expr)
	c.programs.Add(expr, compiled{prg: p, err: err})
	return p, err
}

// compiled is an expression's program, or why it has none.
type compiled struct {
	prg cel.Program
	err error
}

// compile is Compile without the programs kept.
func (c *Compiler) compile(expr string) (cel.Program, error) {
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compiling %q: %w", expr, iss.Err())
	}
	p, err := celbound.Program(c.env, ast, responseSizes{}, costLimit)
	if over, ok := errors.AsType[*celbound.OverLimit](err); ok {
		return nil, fmt.Errorf("%q may cost up to %d on a response of %d KiB, more than the limit of %d: "+
			"iterate over less of the body, or compare less", expr, over.Estimate, maxBody>>10, costLimit)
	}
	if err != nil {
		return nil, fmt.Errorf("planning %q: %w", expr, err)
	}
	return p, nil
}

// responseSizes bounds, for cost estimates, the size of everything reached
// from `response`: no string, list or map in it is larger than what is read
// of an answer (maxBody, maxHeaderBytes).
type responseSizes struct{}

func (responseSizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if path := n.Path(); len(path) > 0 {
		switch path[0] {
		case "response":
			return &checker.SizeEstimate{Min: 0, Max: max(maxBody, maxHeaderBytes)}
		case "parameters":
			return &checker.SizeEstimate{Min: 0, Max: v1.MaxParametersBytes}
		case "key":
			return &checker.SizeEstimate{Min: 0, Max: 255}
		case "secrets":
			return &checker.SizeEstimate{Min: 0, Max: maxSecretValue}
		}
	}
	if t := n.Type(); t != nil && t.Kind() == types.TypeKind {
		// A type, as type(response.body) == map compares: CEL has no size
		// for it and would assume the largest.
		return &checker.SizeEstimate{Min: 1, Max: 1}
	}
	return nil
}

// EstimateCallCost charges a matches() by its program's size on the
// largest string an expression sees; cel-go estimates the rest.
func (responseSizes) EstimateCallCost(_, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return celregex.Estimate(overloadID, target, args, max(maxBody, maxHeaderBytes, v1.MaxParametersBytes))
}

// response is the CEL view of an HTTP answer, next to the request it
// answers: `parameters` and `key` are there too.
type response struct {
	Status  int
	Headers map[string]string
	Body    any
	request
}

// request is the CEL view of an operation. It holds its parameters
// (decoded JSON), the key sent to the tool, and the time its lifetime
// began (the Unix epoch when not known). For shaping a request only, it
// holds the tool's secret values too.
type request struct {
	Parameters any
	Key        string
	Since      time.Time
	Secrets    map[string]string
}

func (r request) activation() map[string]any {
	secrets := r.Secrets
	if secrets == nil {
		secrets = map[string]string{}
	}
	since := r.Since
	if since.IsZero() {
		since = time.Unix(0, 0).UTC()
	}
	return map[string]any{"parameters": r.Parameters, "key": r.Key, "since": since, "secrets": secrets}
}

func (r response) activation() map[string]any {
	a := r.request.activation()
	a["response"] = map[string]any{
		"status":  int64(r.Status),
		"headers": r.Headers,
		"body":    r.Body,
	}
	return a
}

// activation is what an expression sees.
type activation interface{ activation() map[string]any }

// eval runs expr on r, within costLimit and evalTimeout, and stops when
// ctx ends.
func (c *Compiler) eval(ctx context.Context, expr string, r activation) (ref.Val, error) {
	p, err := c.Compile(expr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, _, err := p.ContextEval(ctx, r.activation())
	if cancelled, ok := errors.AsType[interpreter.EvalCancelledError](err); ok && cancelled.Cause == interpreter.CostLimitExceeded {
		return nil, fmt.Errorf("evaluating %q: stopped at the cost limit of %d", expr, costLimit)
	}
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("evaluating %q: %w (%w)", expr, errTimeLimit, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", expr, err)
	}
	return v, nil
}

// Bool evaluates a condition; anything but true is false.
func (c *Compiler) Bool(ctx context.Context, expr string, r activation) (bool, error) {
	v, err := c.eval(ctx, expr, r)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("%q is %s, not a bool", expr, v.Type().TypeName())
	}
	return bool(b), nil
}

// String evaluates an id: strings as they are, numbers in decimal.
func (c *Compiler) String(ctx context.Context, expr string, r activation) (string, error) {
	v, err := c.eval(ctx, expr, r)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case types.String:
		return string(v), nil
	case types.Int, types.Uint, types.Double, types.Bool:
		return fmt.Sprint(v.Value()), nil
	default:
		return "", fmt.Errorf("%q is %s, not a string", expr, v.Type().TypeName())
	}
}

// JSON evaluates a result and encodes it as JSON, refused before it is
// written when it may pass celbound.MaxValueBytes.
func (c *Compiler) JSON(ctx context.Context, expr string, r activation) ([]byte, error) {
	v, err := c.eval(ctx, expr, r)
	if err != nil {
		return nil, err
	}
	out, _, err := celbound.JSON(v, 0, celbound.MaxValueBytes)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", expr, err)
	}
	return out, nil
}

// decodeBody makes a body CEL-friendly. JSON becomes a value with whole
// numbers as int, so that `response.body.id == 42` holds. Anything else
// stays text. isJSON tells which.
func decodeBody(b []byte) (v any, isJSON bool) {
	if len(b) == 0 {
		return "", false
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b), false
	}
	return protocol.WholeNumbers(v), true
}
