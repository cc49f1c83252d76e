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

// Package celregex bounds the regular expressions of CEL expressions that
// users write, before anything runs them. cel-go stops an evaluation at its
// cost limit or its context only between the iterations of a
// comprehension. So one matches() call runs to its end however long it
// takes. Its time grows with the input's length times the size of the
// pattern's compiled program. A bounded repetition is copied into the
// program once per repeat: (a{1,10}){1,10} is a hundred copies of a.
//
// Validator refuses two things when an expression is compiled:
//
//   - a matches() whose pattern is not a string literal. One computed at
//     run time, from an answer say, cannot be bounded before it runs.
//   - a pattern whose program, repetitions expanded, has more than
//     MaxProgram instructions.
//
// Cost charges a matches() call, at run time and in the estimate, by the
// length of its input times the size of its program, where cel-go guesses
// from the length of the pattern's text.
//
// cel-go's own cel.RegexProgramSizeLimit (v0.31) is not used: it compiles
// the parsed pattern without simplifying it, so it neither counts the
// expansion of a repetition nor survives one (regexp/syntax panics on a
// {n,m} it has not simplified). Validator plugs into cel-go's
// ASTValidators hook instead, so the refusal is an issue of the compile.
package celregex

import (
	"fmt"
	"math"
	"regexp/syntax"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
)

// MaxProgram bounds the instructions of one pattern's compiled program,
// its bounded repetitions expanded. A match visits each instruction at most
// once per character of its input. So a pattern at the bound on the
// largest input an expression sees (64 KiB) takes about 8 million steps.
// That is a quarter of a second on a loaded two-core machine, where
// ((a{1,10}){1,10}){1,10}b (2,222 instructions) took five seconds. The
// patterns tools and sagas need (an id's shape, a prefix, a UUID at 40)
// are far below it.
const MaxProgram = 128

// costPerStep is the cost of one step of a match (one instruction on one
// character): a tenth, as cel-go charges for one character of a string
// traversed.
const costPerStep = 0.1

// Size is the number of instructions of pattern's program, as Go's regexp
// compiles it: parsed, simplified (each bounded repetition expanded) and
// compiled.
func Size(pattern string) (int, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return 0, err
	}
	return len(prog.Inst), nil
}

// Check returns why pattern may not be used, or nil. It bounds every
// pattern a user writes: CEL's matches() and a parameters schema's
// pattern alike.
func Check(pattern string) error {
	n, err := Size(pattern)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", pattern, err)
	}
	if n > MaxProgram {
		return fmt.Errorf("pattern %q compiles to %d instructions, more than the limit of %d "+
			"(a repetition {n,m} counts m times, nested ones multiply): use smaller counts, or * and +",
			pattern, n, MaxProgram)
	}
	return nil
}

// Validator is a cel.ASTValidator that refuses the matches() calls Check
// refuses and those whose pattern is not a string literal. Add it to an
// environment with cel.ASTValidators.
type Validator struct{}

var _ cel.ASTValidator = Validator{}

// Name names the validator in cel-go's configuration.
func (Validator) Name() string { return "once.regex_program_size" }

// Validate reports each matches() call whose pattern is refused.
func (Validator) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	for _, e := range ast.MatchDescendants(ast.NavigateAST(a), ast.KindMatcher(ast.CallKind)) {
		pattern, ok := patternOf(e)
		if !ok {
			continue
		}
		if pattern.Kind() != ast.LiteralKind {
			iss.ReportErrorAtID(pattern.ID(), "the pattern of matches() must be a string literal: "+
				"one computed when the expression runs cannot be bounded before")
			continue
		}
		s, ok := pattern.AsLiteral().(types.String)
		if !ok {
			continue // the type checker refuses it
		}
		if err := Check(string(s)); err != nil {
			iss.ReportErrorAtID(pattern.ID(), "%s", err.Error())
		}
	}
}

// patternOf returns the pattern argument of a matches() call.
func patternOf(e ast.Expr) (ast.Expr, bool) {
	call := e.AsCall()
	if call.FunctionName() != overloads.Matches {
		return nil, false
	}
	args := call.Args()
	switch {
	case call.IsMemberFunction() && len(args) == 1:
		return args[0], true
	case !call.IsMemberFunction() && len(args) == 2:
		return args[1], true
	}
	return nil, false
}

// Cost is a cel-go ActualCostEstimator that charges a matches() call
// (len(input)+1) × Size(pattern) × costPerStep; every other call costs
// what cel-go says.
type Cost struct{}

// CallCost returns the cost of a matches() call, nil for any other.
func (Cost) CallCost(function, overloadID string, args []ref.Val, _ ref.Val) *uint64 {
	if overloadID != overloads.Matches && overloadID != overloads.MatchesString {
		return nil
	}
	if len(args) != 2 {
		return nil
	}
	in, ok1 := args[0].(types.String)
	pattern, ok2 := args[1].(types.String)
	if !ok1 || !ok2 {
		return nil
	}
	n, err := Size(string(pattern))
	if err != nil {
		return nil
	}
	c := steps(uint64(len(in)), n)
	return &c
}

// Estimate is the most a matches() call with a literal pattern may cost
// on an input of at most maxInput characters (fewer if CEL knows the
// input's size), for a cel-go CostEstimator's EstimateCallCost; nil for
// any other call.
func Estimate(overloadID string, target *checker.AstNode, args []checker.AstNode, maxInput uint64) *checker.CallEstimate {
	var in, pattern checker.AstNode
	switch {
	case overloadID == overloads.MatchesString && target != nil && len(args) == 1:
		in, pattern = *target, args[0]
	case overloadID == overloads.Matches && target == nil && len(args) == 2:
		in, pattern = args[0], args[1]
	default:
		return nil
	}
	if pattern.Expr().Kind() != ast.LiteralKind {
		return nil
	}
	s, ok := pattern.Expr().AsLiteral().(types.String)
	if !ok {
		return nil
	}
	n, err := Size(string(s))
	if err != nil {
		return nil
	}
	if size := in.ComputedSize(); size != nil {
		maxInput = min(maxInput, size.Max)
	}
	return &checker.CallEstimate{CostEstimate: checker.CostEstimate{Min: 0, Max: steps(maxInput, n)}}
}

func steps(input uint64, program int) uint64 {
	return uint64(math.Ceil(float64(input+1) * float64(program) * costPerStep))
}
