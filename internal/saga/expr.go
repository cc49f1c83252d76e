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

package saga

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"
	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/celbound"
	"github.com/once-dev/once/internal/celregex"
	"github.com/once-dev/once/internal/protocol"
)

const (
	// costLimit bounds one expression's work, estimated when it is
	// compiled and counted while it runs. Inputs are at most 64 KiB, so
	// this allows a few passes over them.
	costLimit = 1_000_000
	// maxStepBytes bounds what an expression reads of a step: its result
	// (canonical JSON, as the operation's status keeps it) and its
	// externalObjectID.
	maxStepBytes = v1.MaxResultBytes
	// DefaultEvalTimeout bounds the wall time of the expressions of one
	// step or compensation, together, unless a Plan says otherwise. An
	// evaluation looks at its context at each iteration of a comprehension
	// (celbound.Program); one without a comprehension is bounded by its
	// length and the guards.
	DefaultEvalTimeout = time.Second
	// stepsVar and inputsVar are what expressions see.
	stepsVar, inputsVar = "steps", "inputs"
)

// ErrTimeLimit is an evaluation stopped before its end by its wall-clock
// limit, or by its caller's context. A CPU that other work starves makes
// any expression slow, so it is a reason to try again, never a verdict;
// one stopped at the cost limit stops there on every try.
var ErrTimeLimit = errors.New("stopped before its end by the time limit; tried again")

// Plan is a saga's compiled expressions: per step, the parameters of the
// step and of its compensation, and the steps each refers to.
type Plan struct {
	steps []stepPlan
	// EvalTimeout bounds the wall time of one step's expressions, together;
	// DefaultEvalTimeout if zero.
	EvalTimeout time.Duration
}

type stepPlan struct {
	do, undo expressions
}

// expressions computes the parameters of one operation.
type expressions struct {
	literal  []byte // the literal parameters, as written
	programs []namedProgram
	refs     []string // the steps referred to, sorted
}

type namedProgram struct {
	name, expr string
	prg        cel.Program
}

var env = func() *cel.Env {
	e, err := cel.NewEnv(
		cel.Variable(inputsVar, cel.DynType),
		cel.Variable(stepsVar, cel.MapType(cel.StringType, cel.DynType)),
		// ext.Strings and ext.Encoders, with bounds where cel-go's costs
		// fall short.
		celbound.Library(),
		// A matches() runs to its end, past the cost limit and the
		// timeout: its pattern must be a literal of a bounded size.
		cel.ASTValidators(celregex.Validator{}),
	)
	if err != nil {
		panic(fmt.Sprintf("saga: creating the CEL environment: %v", err))
	}
	return e
}()

// Compile checks every expression of spec. Each must compile. Each must
// refer only to steps before its own, by name; a compensation may also
// refer to its own step. Each must cost at most the limit on the largest
// inputs and step data it may read. It checks that the inputs are within their limit. It returns all
// problems, joined, each naming its field.
func Compile(spec *v1.SagaSpec) (*Plan, error) {
	if err := checkCharacters(spec); err != nil {
		return nil, errors.Join(checkInputs(spec.Inputs), err)
	}
	plan := &Plan{steps: make([]stepPlan, len(spec.Steps))}
	errs := []error{checkInputs(spec.Inputs)}
	for i, s := range spec.Steps {
		before := names(spec.Steps[:i])
		at := fmt.Sprintf("spec.steps[%d]", i)
		var err error
		plan.steps[i].do, err = compile(at+".parametersFrom", s.Parameters, s.ParametersFrom, before, s.Name)
		errs = append(errs, err)
		if c := s.Compensation; c != nil {
			plan.steps[i].undo, err = compile(at+".compensation.parametersFrom", c.Parameters, c.ParametersFrom,
				append(before, s.Name), "")
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return plan, nil
}

// checkCharacters refuses expressions over MaxExpressionChars together,
// before any is compiled: the bound is on that work. The CRD refuses them
// too; a saga stored before its rule is refused here.
func checkCharacters(spec *v1.SagaSpec) error {
	n := 0
	for _, s := range spec.Steps {
		exprs := s.ParametersFrom
		if s.Compensation != nil {
			exprs = append(slices.Clip(exprs), s.Compensation.ParametersFrom...)
		}
		for _, pe := range exprs {
			n += utf8.RuneCountInString(pe.Expression)
		}
	}
	if n > v1.MaxExpressionChars {
		return fmt.Errorf("spec.steps: the parametersFrom expressions take %d characters together, more than the "+
			"limit of %d: shorten them, or split the saga in two", n, v1.MaxExpressionChars)
	}
	return nil
}

// checkInputs refuses inputs over their limit, measured as canonical JSON:
// every expression's estimate assumes it.
func checkInputs(in *runtime.RawExtension) error {
	if in == nil || len(in.Raw) == 0 {
		return nil
	}
	canonical, err := protocol.Canonical(in.Raw)
	if err != nil {
		return fmt.Errorf("spec.inputs: %w", err)
	}
	if len(canonical) > v1.MaxInputsBytes {
		return fmt.Errorf("spec.inputs take %d bytes of canonical JSON; the limit is %d", len(canonical), v1.MaxInputsBytes)
	}
	return nil
}

func names(steps []v1.SagaStep) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Name
	}
	return out
}

func compile(at string, literal *runtime.RawExtension, exprs []v1.ParameterExpression, allowed []string, self string) (expressions, error) {
	var out expressions
	if literal != nil {
		out.literal = literal.Raw
	}
	refs := map[string]bool{}
	var errs []error
	for j, pe := range exprs {
		field := fmt.Sprintf("%s[%d] (%s)", at, j, pe.Name)
		checked, iss := env.Compile(pe.Expression)
		if iss.Err() != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, iss.Err()))
			continue
		}
		used, err := stepRefs(checked)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			continue
		}
		for _, name := range used {
			if !slices.Contains(allowed, name) {
				errs = append(errs, fmt.Errorf("%s: %s", field, badRef(name, allowed, self)))
				continue
			}
			refs[name] = true
		}
		prg, err := celbound.Program(env, checked, sizes{}, costLimit)
		if over, ok := errors.AsType[*celbound.OverLimit](err); ok {
			errs = append(errs, fmt.Errorf("%s: may cost up to %d on inputs of %d KiB and step data of %d KiB, "+
				"more than the limit of %d: iterate over less, or build smaller strings",
				field, over.Estimate, v1.MaxInputsBytes>>10, maxStepBytes>>10, costLimit))
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", field, err))
			continue
		}
		out.programs = append(out.programs, namedProgram{name: pe.Name, expr: pe.Expression, prg: prg})
	}
	out.refs = slices.Sorted(maps.Keys(refs))
	return out, errors.Join(errs...)
}

// sizes bounds, for cost estimates, everything an expression reads:
// inputs at most MaxInputsBytes, and each step's data at most
// maxStepBytes. Compile and activation check both before anything runs.
type sizes struct{}

func (sizes) EstimateSize(n checker.AstNode) *checker.SizeEstimate {
	if path := n.Path(); len(path) > 0 {
		switch path[0] {
		case inputsVar:
			return &checker.SizeEstimate{Min: 0, Max: v1.MaxInputsBytes}
		case stepsVar:
			return &checker.SizeEstimate{Min: 0, Max: maxStepBytes}
		}
	}
	if t := n.Type(); t != nil && t.Kind() == types.TypeKind {
		// A type, as type(inputs.x) == string compares: CEL has no size
		// for it and would assume the largest.
		return &checker.SizeEstimate{Min: 1, Max: 1}
	}
	return nil
}

// EstimateCallCost charges a matches() by its program's size on the
// largest string an expression reads; cel-go estimates the rest.
func (sizes) EstimateCallCost(_, overloadID string, target *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	return celregex.Estimate(overloadID, target, args, max(v1.MaxInputsBytes, maxStepBytes))
}

func badRef(name string, allowed []string, self string) string {
	switch {
	case name == self:
		return fmt.Sprintf("steps.%s is this step: a step's parameters can use only the steps before it", name)
	case len(allowed) == 0:
		return fmt.Sprintf("steps.%s: the first step has no earlier steps to use", name)
	default:
		return fmt.Sprintf("steps.%s is not a step before this one (those are %v)", name, allowed)
	}
}

// stepRefs lists the steps an expression refers to. Steps must be named
// literally, as steps.<name> or steps['<name>'], so that the references
// are known before anything runs.
func stepRefs(checked *cel.Ast) ([]string, error) {
	var refs []string
	var errs []error
	named := map[int64]bool{} // the steps idents used as steps.<name>
	ast.PreOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		switch e.Kind() {
		case ast.SelectKind:
			sel := e.AsSelect()
			if isSteps(sel.Operand()) {
				named[sel.Operand().ID()] = true
				refs = append(refs, sel.FieldName())
			}
		case ast.CallKind:
			call := e.AsCall()
			fn := call.FunctionName()
			if (fn != operators.Index && fn != operators.OptIndex && fn != operators.OptSelect) ||
				len(call.Args()) != 2 || !isSteps(call.Args()[0]) {
				return
			}
			named[call.Args()[0].ID()] = true
			if lit := call.Args()[1]; lit.Kind() == ast.LiteralKind {
				if s, ok := lit.AsLiteral().(types.String); ok {
					refs = append(refs, string(s))
					return
				}
			}
			errs = append(errs, errors.New("steps must be indexed by a step's name written out, not a computed value"))
		}
	}))
	ast.PreOrderVisit(checked.NativeRep().Expr(), ast.NewExprVisitor(func(e ast.Expr) {
		if isSteps(e) && !named[e.ID()] {
			errs = append(errs, errors.New("steps must be used as steps.<name>: a step is referred to by its name"))
		}
	}))
	return refs, errors.Join(errs...)
}

func isSteps(e ast.Expr) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == stepsVar }

// Refs returns the steps a step's parameters (or, with undo, its
// compensation's) use.
func (p *Plan) Refs(step int, undo bool) []string {
	if undo {
		return p.steps[step].undo.refs
	}
	return p.steps[step].do.refs
}

// StepData is what a later step may use of an earlier one.
type StepData struct {
	Result           []byte // JSON, as the operation's status holds it
	ExternalObjectID string
}

// Parameters computes the parameters of a step (or of its compensation,
// with undo): the literal ones, with the computed ones over them. data
// holds the steps the parameters use; a missing one is an error. The
// result is canonical JSON.
func (p *Plan) Parameters(ctx context.Context, step int, undo bool, inputs []byte, data map[string]StepData) ([]byte, error) {
	x := p.steps[step].do
	if undo {
		x = p.steps[step].undo
	}
	params := map[string]any{}
	if len(x.literal) > 0 {
		if err := json.Unmarshal(x.literal, &params); err != nil {
			return nil, fmt.Errorf("literal parameters: %w", err)
		}
	}
	if len(x.programs) > 0 {
		act, err := activation(inputs, x.refs, data)
		if err != nil {
			return nil, err
		}
		// The expressions of one step share one time limit, checked at
		// each step of a comprehension, and their values one bound,
		// checked before each is written: a step may have 32 expressions.
		ctx, cancel := context.WithTimeout(ctx, cmp.Or(p.EvalTimeout, DefaultEvalTimeout))
		defer cancel()
		var used int64
		for _, np := range x.programs {
			v, n, err := eval(ctx, np, act, used)
			if err != nil {
				return nil, err
			}
			params[np.name], used = v, n
		}
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encoding parameters: %w", err)
	}
	return protocol.Canonical(raw)
}

func activation(inputs []byte, refs []string, data map[string]StepData) (map[string]any, error) {
	in := map[string]any{}
	if len(inputs) > 0 {
		if err := json.Unmarshal(inputs, &in); err != nil {
			return nil, fmt.Errorf("spec.inputs: %w", err)
		}
	}
	steps := map[string]any{}
	for _, name := range refs {
		d, ok := data[name]
		if !ok {
			return nil, fmt.Errorf("step %s has no recorded outcome to use", name)
		}
		if err := checkStep(name, d); err != nil {
			return nil, err
		}
		var result any
		if len(d.Result) > 0 {
			if err := json.Unmarshal(d.Result, &result); err != nil {
				return nil, fmt.Errorf("the result of step %s: %w", name, err)
			}
		}
		steps[name] = map[string]any{"result": protocol.WholeNumbers(result), "externalObjectID": d.ExternalObjectID}
	}
	return map[string]any{inputsVar: protocol.WholeNumbers(in), stepsVar: steps}, nil
}

// checkStep refuses a step's data over the size every expression's
// estimate assumes.
func checkStep(name string, d StepData) error {
	if len(d.ExternalObjectID) > maxStepBytes {
		return fmt.Errorf("the externalObjectID of step %s takes %d bytes; the limit is %d",
			name, len(d.ExternalObjectID), maxStepBytes)
	}
	if len(d.Result) <= maxStepBytes {
		return nil
	}
	canonical, err := protocol.Canonical(d.Result)
	if err != nil {
		return fmt.Errorf("the result of step %s: %w", name, err)
	}
	if len(canonical) > maxStepBytes {
		return fmt.Errorf("the result of step %s takes %d bytes of canonical JSON; the limit is %d",
			name, len(canonical), maxStepBytes)
	}
	return nil
}

// eval runs one program and returns its value, decoded from JSON, and
// what the step's values may take with it, after used bytes. Values that
// may take more than celbound.MaxValueBytes are refused before they are
// written.
func eval(ctx context.Context, np namedProgram, act map[string]any, used int64) (any, int64, error) {
	v, _, err := np.prg.ContextEval(ctx, act)
	if cancelled, ok := errors.AsType[interpreter.EvalCancelledError](err); ok && cancelled.Cause == interpreter.CostLimitExceeded {
		return nil, 0, fmt.Errorf("parameter %s (%q): stopped at the cost limit of %d", np.name, np.expr, costLimit)
	}
	if err != nil && ctx.Err() != nil {
		return nil, 0, fmt.Errorf("parameter %s (%q): %w", np.name, np.expr, ErrTimeLimit)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("parameter %s (%q): %w", np.name, np.expr, err)
	}
	raw, n, err := celbound.JSON(v, used, celbound.MaxValueBytes)
	if err != nil {
		return nil, n, fmt.Errorf("parameter %s (%q): %w", np.name, np.expr, err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, n, fmt.Errorf("parameter %s (%q): %w", np.name, np.expr, err)
	}
	return out, n, nil
}
