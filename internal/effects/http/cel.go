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
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/ext"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// costLimit bounds the work one expression may do on one response.
const costLimit = 1_000_000

// Compiler compiles the CEL expressions of tools over `response` and keeps
// the programs, so each expression is compiled once per process.
type Compiler struct {
	env *cel.Env

	mu       sync.Mutex
	programs map[string]cel.Program
}

// NewCompiler returns a Compiler whose expressions see `response`, a map
// with `status` (int), `headers` (map of lower-case names to values) and
// `body` (decoded JSON, or the text).
func NewCompiler() (*Compiler, error) {
	env, err := cel.NewEnv(
		cel.Variable("response", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
		ext.Encoders(),
	)
	if err != nil {
		return nil, fmt.Errorf("creating CEL environment: %w", err)
	}
	return &Compiler{env: env, programs: map[string]cel.Program{}}, nil
}

// Compile checks expr and returns its program.
func (c *Compiler) Compile(expr string) (cel.Program, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.programs[expr]; ok {
		return p, nil
	}
	ast, iss := c.env.Compile(expr)
	if iss.Err() != nil {
		return nil, fmt.Errorf("compiling %q: %w", expr, iss.Err())
	}
	p, err := c.env.Program(ast, cel.CostLimit(costLimit))
	if err != nil {
		return nil, fmt.Errorf("planning %q: %w", expr, err)
	}
	c.programs[expr] = p
	return p, nil
}

// response is the CEL view of an HTTP answer.
type response struct {
	Status  int
	Headers map[string]string
	Body    any
}

func (r response) activation() map[string]any {
	return map[string]any{"response": map[string]any{
		"status":  int64(r.Status),
		"headers": r.Headers,
		"body":    r.Body,
	}}
}

func (c *Compiler) eval(expr string, r response) (ref.Val, error) {
	p, err := c.Compile(expr)
	if err != nil {
		return nil, err
	}
	v, _, err := p.Eval(r.activation())
	if err != nil {
		return nil, fmt.Errorf("evaluating %q: %w", expr, err)
	}
	return v, nil
}

// Bool evaluates a condition; anything but true is false.
func (c *Compiler) Bool(expr string, r response) (bool, error) {
	v, err := c.eval(expr, r)
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
func (c *Compiler) String(expr string, r response) (string, error) {
	v, err := c.eval(expr, r)
	if err != nil {
		return "", err
	}
	switch v := v.(type) {
	case types.String:
		return string(v), nil
	case types.Int, types.Uint, types.Double:
		return fmt.Sprint(v.Value()), nil
	default:
		return "", fmt.Errorf("%q is %s, not a string", expr, v.Type().TypeName())
	}
}

// JSON evaluates a result and encodes it as JSON.
func (c *Compiler) JSON(expr string, r response) ([]byte, error) {
	v, err := c.eval(expr, r)
	if err != nil {
		return nil, err
	}
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, fmt.Errorf("%q: converting to JSON: %w", expr, err)
	}
	out, err := protojson.Marshal(native.(*structpb.Value))
	if err != nil {
		return nil, fmt.Errorf("%q: encoding JSON: %w", expr, err)
	}
	return out, nil
}

// decodeBody makes a body CEL-friendly: JSON with whole numbers as int, so
// that `response.body.id == 42` holds; otherwise the text.
func decodeBody(b []byte) any {
	if len(b) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return string(b)
	}
	return wholeNumbers(v)
}

func wholeNumbers(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
		return v
	case map[string]any:
		for k, e := range v {
			v[k] = wholeNumbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = wholeNumbers(e)
		}
		return v
	default:
		return v
	}
}
