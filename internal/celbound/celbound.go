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

// Package celbound bounds the work and the memory of users' CEL
// expressions where cel-go's cost model does not.
//
// cel-go charges a call after it returns, by what it estimates the call
// did. Where that is far less than what the call built or walked, one
// expression can allocate gigabytes or run for seconds within its cost
// limit. A call whose arguments are dyn, as everything read from JSON is,
// has no overload at run time, and cel-go charges it 1 whatever it did.
// Library and Cost close each such case that the manager's environments
// have:
//
//   - replace(), join() and format() refuse a result over MaxValueBytes
//     before they build it.
//   - Every call that builds a string, bytes or a list is charged a unit
//     per byte or element built: concatenation, conversions, replace(),
//     join(), format(), strings.quote(). cel-go charged format() by its
//     pattern, and + on dyn values 1.
//   - A call that reads text is charged a tenth per byte read, and one that
//     turns it into runes (charAt(), indexOf(), substring()) a unit per
//     byte. Conversions and size() on dyn values cost 1 in cel-go.
//   - A refusal costs refusalCost, so that an || or an && that swallows it
//     can try again only a few times.
//   - ==, != and in must have an operand whose size is bounded by what the
//     expression reads: a scalar, a literal, or a value read as it is. Two
//     computed lists can share their elements (a + a, doubled twenty
//     times), and comparing them walks every element of both, in one call
//     that nothing interrupts.
//
// Estimates still come from cel-go, and may count less than these charges:
// the charges, counted as the expression runs, are the bound. JSON writes
// a value as JSON, refusing it first when it may pass a bound.
package celbound

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/operators"
	"github.com/google/cel-go/common/overloads"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/once-dev/once/internal/celregex"
)

// MaxValueBytes bounds one string that replace(), join() or format()
// builds, and the JSON of the values an evaluation returns. It is sixteen
// times the largest input (64 KiB).
const MaxValueBytes = 1 << 20

// refusalCost is what a refused call costs: a quarter of a saga
// expression's cost limit and a fortieth of a Tool's, so that the error is
// reported when nothing swallows it, and an evaluation that swallows
// refusals soon stops. Each refusal's own count stops at MaxValueBytes.
const refusalCost = 250_000

// Library adds ext.Strings and ext.Encoders to an environment, with the
// bounds above. Compile users' expressions in it with Program.
func Library() cel.EnvOption {
	return cel.Lib(library{})
}

type library struct{}

func (library) LibraryName() string { return "once.celbound" }

func (library) CompileOptions() []cel.EnvOption {
	s, l := cel.StringType, cel.ListType(cel.StringType)
	list, mapT := cel.ListType(cel.TypeParamType("T")), cel.MapType(cel.TypeParamType("K"), cel.TypeParamType("V"))
	return []cel.EnvOption{
		ext.Strings(),
		ext.Encoders(),
		// built passes a literal through, so that Cost charges what it
		// built (Prepare wraps each literal in it).
		cel.Function(builtFunction,
			cel.Overload("once_built_list", []*cel.Type{list}, list, cel.UnaryBinding(passThrough)),
			cel.Overload("once_built_map", []*cel.Type{mapT}, mapT, cel.UnaryBinding(passThrough))),
		cel.CostEstimatorOptions(
			checker.OverloadCostEstimate("once_built_list", estimateBuilt),
			checker.OverloadCostEstimate("once_built_map", estimateBuilt)),
		cel.Function("replace",
			cel.MemberOverload("string_replace_string_string", []*cel.Type{s, s, s}, s,
				cel.FunctionBinding(guardReplace(original("replace", "string_replace_string_string")))),
			cel.MemberOverload("string_replace_string_string_int", []*cel.Type{s, s, s, cel.IntType}, s,
				cel.FunctionBinding(guardReplace(original("replace", "string_replace_string_string_int"))))),
		cel.Function("join",
			cel.MemberOverload("list_join", []*cel.Type{l}, s,
				cel.FunctionBinding(guardJoin(original("join", "list_join")))),
			cel.MemberOverload("list_join_string", []*cel.Type{l, s}, s,
				cel.FunctionBinding(guardJoin(original("join", "list_join_string"))))),
		cel.Function("format",
			cel.MemberOverload("string_format", []*cel.Type{s, cel.ListType(cel.DynType)}, s,
				cel.FunctionBinding(guardFormat(original("format", "string_format"))))),
		cel.Function("split",
			cel.MemberOverload("string_split_string", []*cel.Type{s, s}, l,
				cel.FunctionBinding(guardSplit(original("split", "string_split_string")))),
			cel.MemberOverload("string_split_string_int", []*cel.Type{s, s, cel.IntType}, l,
				cel.FunctionBinding(guardSplit(original("split", "string_split_string_int"))))),
		cel.ASTValidators(comparisons{}),
	}
}

// ProgramOptions charges some of ext.Strings' and ext.Encoders' calls by
// what they build and read. Added after their own trackers, they replace
// those of the same overloads. Cost charges the calls without a tracker.
func (library) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostTrackerOptions(
		interpreter.OverloadCostTracker("string_replace_string_string", chargeReplace),
		interpreter.OverloadCostTracker("string_replace_string_string_int", chargeReplace),
		interpreter.OverloadCostTracker("list_join", chargeBuilt),
		interpreter.OverloadCostTracker("list_join_string", chargeBuilt),
		interpreter.OverloadCostTracker("string_format", chargeBuilt),
		interpreter.OverloadCostTracker(overloads.ExtQuoteString, chargeBuilt),
		interpreter.OverloadCostTracker("string_index_of_string", chargeRunes),
		interpreter.OverloadCostTracker("string_index_of_string_int", chargeRunes),
		interpreter.OverloadCostTracker("string_last_index_of_string", chargeRunes),
		interpreter.OverloadCostTracker("string_last_index_of_string_int", chargeRunes),
		interpreter.OverloadCostTracker("string_char_at_int", chargeRunes),
		interpreter.OverloadCostTracker("string_substring_int", chargeRunes),
		interpreter.OverloadCostTracker("string_substring_int_int", chargeRunes),
		interpreter.OverloadCostTracker("string_split_string", chargeSplit),
		interpreter.OverloadCostTracker("string_split_string_int", chargeSplit),
		interpreter.OverloadCostTracker("base64_encode_bytes", chargeCall),
		interpreter.OverloadCostTracker("base64_decode_string", chargeCall),
	)}
}

func passThrough(v ref.Val) ref.Val { return v }

// stringsEnv holds ext.Strings, whose bindings the guards call.
var stringsEnv = func() *cel.Env {
	e, err := cel.NewEnv(ext.Strings())
	if err != nil {
		panic(fmt.Sprintf("celbound: creating the CEL environment: %v", err))
	}
	return e
}()

// original returns ext.Strings' binding of one overload of a function,
// whichever of its forms it has.
func original(function, overload string) functions.FunctionOp {
	bindings, err := stringsEnv.Functions()[function].Bindings()
	if err != nil {
		panic(fmt.Sprintf("celbound: the bindings of %s: %v", function, err))
	}
	for _, b := range bindings {
		if b.Operator != overload {
			continue
		}
		return func(args ...ref.Val) ref.Val {
			switch {
			case len(args) == 1 && b.Unary != nil:
				return b.Unary(args[0])
			case len(args) == 2 && b.Binary != nil:
				return b.Binary(args[0], args[1])
			}
			return b.Function(args...)
		}
	}
	panic(fmt.Sprintf("celbound: ext.Strings has no overload %s of %s", overload, function))
}

// tooLarge is the error of a call whose result would pass the bound.
func tooLarge(call string, n int64) ref.Val {
	return types.NewErr("%s would build a string of %d bytes or more, more than the limit of %d", call, n, MaxValueBytes)
}

// guardReplace refuses a replace() whose result passes the bound. The
// result's length is counted without building it: one replacement per
// match (per character and one more for an empty old), at most n.
func guardReplace(next functions.FunctionOp) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		str, ok1 := args[0].(types.String)
		old, ok2 := args[1].(types.String)
		repl, ok3 := args[2].(types.String)
		if !ok1 || !ok2 || !ok3 || len(repl) <= len(old) {
			return next(args...)
		}
		k := int64(strings.Count(string(str), string(old)))
		if len(args) == 4 {
			if n, ok := args[3].(types.Int); ok && n >= 0 {
				k = min(k, int64(n))
			}
		}
		if n := int64(len(str)) + k*int64(len(repl)-len(old)); n > MaxValueBytes {
			return tooLarge("replace()", n)
		}
		return next(args...)
	}
}

// guardJoin refuses a join() whose result passes the bound; it stops
// counting there.
func guardJoin(next functions.FunctionOp) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		var sep types.String
		if len(args) == 2 {
			sep, _ = args[1].(types.String)
		}
		if l, ok := args[0].(traits.Lister); ok {
			var n int64
			for it := l.Iterator(); it.HasNext() == types.True; {
				s, _ := it.Next().(types.String)
				// An element counts at least one, so that a list of empty
				// strings is not walked past the bound.
				if n += 1 + int64(len(s)) + int64(len(sep)); n > MaxValueBytes {
					return tooLarge("join()", n)
				}
			}
		}
		return next(args...)
	}
}

// maxSearch bounds a split()'s text times its separator, in bytes: a
// search compares them, in one call, in up to that many steps.
const maxSearch = 1 << 26

// guardSplit refuses a split() whose search may take more than maxSearch
// steps.
func guardSplit(next functions.FunctionOp) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		if n := byteLen(args[0]) * max(1, byteLen(args[1])); n > maxSearch {
			return types.NewErr("split() would compare a text and a separator of %d bytes by %d, more than the limit of %d",
				byteLen(args[0]), byteLen(args[1]), maxSearch)
		}
		return next(args...)
	}
}

// guardFormat refuses a format() whose result may pass the bound: its
// text and what formatted counts of its arguments.
func guardFormat(next functions.FunctionOp) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		f, _ := args[0].(types.String)
		if n := int64(len(f)) + size(args[1], MaxValueBytes, formatted); n > MaxValueBytes {
			return tooLarge("format()", n)
		}
		return next(args...)
	}
}

// chargeBuilt charges a call a tenth per byte or element it read and a
// unit per byte it built, and a refusal refusalCost.
func chargeBuilt(args []ref.Val, result ref.Val) *uint64 {
	c := uint64(refusalCost)
	if s, ok := result.(types.String); ok {
		c = 1 + read(args) + uint64(len(s))
	}
	return &c
}

// chargeReplace charges a replace() its search and a unit per byte built;
// a refusal refusalCost.
func chargeReplace(args []ref.Val, result ref.Val) *uint64 {
	c := uint64(refusalCost)
	if s, ok := result.(types.String); ok {
		c = 1 + search(args[0], args[1]) + uint64(len(s))
	}
	return &c
}

// chargeRunes charges a call that turns its text into runes (four bytes
// each) a unit per byte of the text, and a search besides.
func chargeRunes(args []ref.Val, result ref.Val) *uint64 {
	c := 1 + byteLen(args[0]) + byteLen(result)
	if len(args) > 1 {
		if _, ok := args[1].(types.String); ok {
			c += search(args[0], args[1])
		}
	}
	return &c
}

// chargeSplit charges a split() its search and what it built; a refusal
// refusalCost.
func chargeSplit(args []ref.Val, result ref.Val) *uint64 {
	c := uint64(refusalCost)
	if !types.IsError(result) {
		c = 1 + search(args[0], args[1]) + built(result)
	}
	return &c
}

// search is what a search of text for needle costs: a tenth per byte of
// the text times the needle's length, at least one.
func search(text, needle ref.Val) uint64 {
	return tenth(byteLen(text) * max(1, byteLen(needle)))
}

// tenth is a tenth of n, rounded up: what reading n bytes costs.
func tenth(n uint64) uint64 { return (n + 9) / 10 }

// chargeCall charges a call as Cost charges one without a tracker.
func chargeCall(args []ref.Val, result ref.Val) *uint64 {
	return Cost{}.CallCost("", "", args, result)
}

// byteLen is the bytes of a string, 0 for anything else.
func byteLen(v ref.Val) uint64 {
	s, _ := v.(types.String)
	return uint64(len(s))
}

// read is a tenth of the bytes of text among args.
func read(args []ref.Val) uint64 {
	var n uint64
	for _, a := range args {
		n += textLen(a)
	}
	return tenth(n)
}

// textLen is the bytes of a string or bytes, 0 for anything else.
func textLen(v ref.Val) uint64 {
	switch x := v.(type) {
	case types.String:
		return uint64(len(x))
	case types.Bytes:
		return uint64(len(x))
	}
	return 0
}

// elementBytes is what a built list or map is charged per element or
// entry: the reference it holds.
const elementBytes = 16

// built is what a value that a call built is charged: its bytes, or
// elementBytes per element of a list or entry of a map.
func built(v ref.Val) uint64 {
	if n := textLen(v); n > 0 {
		return n
	}
	return elementBytes * elements(v)
}

// elements is the elements of a list or the entries of a map, 0 for
// anything else.
func elements(v ref.Val) uint64 {
	switch v.(type) {
	case traits.Lister, traits.Mapper:
		if n, ok := v.(traits.Sizer).Size().(types.Int); ok && n > 0 {
			return uint64(n)
		}
	}
	return 0
}

// Cost charges the calls that no overload tracker charges: cel-go's own
// functions, and every call on dyn values, which has no overload at run
// time. A call is charged 1, a tenth per byte of text it read, and what
// it built: its bytes, or elementBytes per element (a value passed
// through or appended to in place was not built). A comparison is also
// charged a tenth per element it may walk, a literal (wrapped by Prepare)
// what it built, and a call that failed its arguments whole. matches() is
// charged as celregex.Cost says. Use it with cel.CostTracking in every
// program of an environment with Library.
type Cost struct{}

var _ interpreter.ActualCostEstimator = Cost{}

// CallCost returns the cost of a call.
func (Cost) CallCost(function, overloadID string, args []ref.Val, result ref.Val) *uint64 {
	if c := (celregex.Cost{}).CallCost(function, overloadID, args, result); c != nil {
		return c
	}
	switch function {
	case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot, operators.Conditional,
		operators.NotStrictlyFalse:
		// What cel-go charges: nothing is read or built.
		return nil
	case builtFunction:
		c := 1 + built(args[0])
		return &c
	}
	var text, walked uint64
	passed := false
	for _, a := range args {
		if same(result, a) {
			// Passed through, or appended to in place (a comprehension's
			// result): neither read whole nor built.
			passed = true
			continue
		}
		text += textLen(a)
		walked += elements(a)
	}
	c := 1 + tenth(text)
	switch function {
	case operators.Equals, operators.NotEquals, operators.In:
		c += tenth(walked)
	}
	switch {
	case types.IsError(result):
		// An error may quote its arguments whole, as a failed conversion
		// does.
		c += text
	case !passed:
		c += built(result)
	}
	return &c
}

// same reports whether v is a: the same string bytes, or the same list or
// map.
func same(v, a ref.Val) bool {
	if s, ok := v.(types.String); ok {
		t, ok := a.(types.String)
		return ok && len(s) > 0 && len(s) == len(t) && unsafe.StringData(string(s)) == unsafe.StringData(string(t))
	}
	vv, va := reflect.ValueOf(v), reflect.ValueOf(a)
	return vv.Kind() == reflect.Pointer && va.Kind() == reflect.Pointer && vv.Pointer() == va.Pointer()
}

// estimateBuilt estimates once.built(literal) as Cost charges it, and
// gives the literal's size as its result's.
func estimateBuilt(_ checker.CostEstimator, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if len(args) != 1 {
		return nil
	}
	size := args[0].ComputedSize()
	if size == nil {
		return nil
	}
	return &checker.CallEstimate{
		CostEstimate: checker.CostEstimate{Min: 1 + elementBytes*size.Min, Max: 1 + elementBytes*size.Max},
		ResultSize:   size,
	}
}

// OverLimit is an expression whose estimated cost is over its limit.
type OverLimit struct{ Estimate, Limit uint64 }

func (e *OverLimit) Error() string {
	return fmt.Sprintf("may cost up to %d, more than the limit of %d", e.Estimate, e.Limit)
}

// Program makes the program of an expression a user wrote, checked in an
// environment with Library. It runs these in order:
//
//  1. Prepare.
//  2. cel-go's estimate with sizes, which gives an *OverLimit error past
//     limit.
//  3. A program that Cost charges against limit. It looks at its context
//     at each step of a comprehension, since one step can hold many calls.
func Program(env *cel.Env, checked *cel.Ast, sizes checker.CostEstimator, limit uint64) (cel.Program, error) {
	prepared, err := Prepare(env, checked)
	if err != nil {
		return nil, err
	}
	est, err := env.EstimateCost(prepared, sizes)
	if err != nil {
		return nil, fmt.Errorf("estimating its cost: %w", err)
	}
	if est.Max > limit {
		return nil, &OverLimit{Estimate: est.Max, Limit: limit}
	}
	return env.Program(prepared, cel.CostLimit(limit), cel.CostTracking(Cost{}), cel.InterruptCheckFrequency(1))
}

// builtFunction wraps literals: see Prepare.
const builtFunction = "once.built"

// Prepare rewrites a checked expression for Cost: each list or map literal
// of more than one entry becomes once.built(literal), a call Cost charges
// by what the literal built. cel-go charges a literal 10 or 30 however
// many entries it has, and a literal in a comprehension is built again at
// each step. A literal of one entry, as map() and filter() append, is
// left as it is.
func Prepare(env *cel.Env, a *cel.Ast) (*cel.Ast, error) {
	opt, err := cel.NewStaticOptimizer(literals{})
	if err != nil {
		return nil, err
	}
	out, iss := opt.Optimize(env, a)
	if iss.Err() != nil {
		return nil, iss.Err()
	}
	return out, nil
}

// literals wraps literals in once.built.
type literals struct{}

func (literals) Optimize(ctx *cel.OptimizerContext, a *ast.AST) *ast.AST {
	found := ast.MatchDescendants(ast.NavigateAST(a), func(e ast.NavigableExpr) bool {
		return (e.Kind() == ast.ListKind && e.AsList().Size() > 1) || (e.Kind() == ast.MapKind && e.AsMap().Size() > 1)
	})
	// Innermost first: each wrapper takes its literal's entries as they
	// are then.
	for _, e := range slices.Backward(found) {
		var lit ast.Expr
		if e.Kind() == ast.ListKind {
			l := e.AsList()
			lit = ctx.NewList(l.Elements(), l.OptionalIndices())
		} else {
			// New entries, each with an id of its own.
			entries := make([]ast.EntryExpr, 0, e.AsMap().Size())
			for _, en := range e.AsMap().Entries() {
				me := en.AsMapEntry()
				entries = append(entries, ctx.NewMapEntry(me.Key(), me.Value(), me.IsOptional()))
			}
			lit = ctx.NewMap(entries)
		}
		ctx.UpdateExpr(e, ctx.NewCall(builtFunction, lit))
	}
	return a
}

// JSON writes v as JSON, after values of used bytes. It refuses v first
// when the values may then take more than limit bytes, and returns what
// they may take with v.
func JSON(v ref.Val, used, limit int64) ([]byte, int64, error) {
	n := used + JSONSize(v, limit-used)
	if n > limit {
		return nil, n, fmt.Errorf("the values may take %d bytes or more as JSON, more than the limit of %d", n, limit)
	}
	native, err := v.ConvertToNative(reflect.TypeFor[*structpb.Value]())
	if err != nil {
		return nil, n, fmt.Errorf("not JSON: %w", err)
	}
	out, err := protojson.Marshal(native.(*structpb.Value))
	if err != nil {
		return nil, n, err
	}
	return out, n, nil
}

// JSONSize is at least the bytes of v written as JSON, with every escape
// encoding/json writes (\u003c for <, \ufffd for a byte that is not
// UTF-8), and may be more for text that is not ASCII. It stops counting
// once past limit, so that its own work is bounded too.
func JSONSize(v ref.Val, limit int64) int64 {
	return size(v, limit, asJSON)
}

// measure says how many bytes each kind of value takes at most in one
// way of writing it out.
type measure struct {
	str    func(string) int64
	scalar func(ref.Val) int64
	// item is what a list's element or a map's entry adds: separators.
	item int64
}

// asJSON measures JSON.
var asJSON = measure{str: jsonString, scalar: jsonScalar, item: 2}

// formatted measures what format() writes with any verb: %x doubles a
// string, and %.100f writes a number in up to 411 bytes (precision is at
// most 100).
var formatted = measure{
	str:    func(s string) int64 { return 2 * int64(len(s)) },
	scalar: func(ref.Val) int64 { return 420 },
	item:   4,
}

// size counts v as m measures, and stops once past limit: each element
// counts at least one byte.
func size(v ref.Val, limit int64, m measure) int64 {
	var n int64
	var walk func(ref.Val)
	walk = func(v ref.Val) {
		if n > limit {
			return
		}
		switch x := v.(type) {
		case types.String:
			n += m.str(string(x))
		case types.Bytes:
			// JSON writes bytes in base64, format() as text or hex.
			n += m.str(string(x)) + int64(len(x))/2 + 4
		case traits.Mapper:
			n += 2
			for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
				k := it.Next()
				n += m.item
				walk(k)
				walk(x.Get(k))
			}
		case traits.Lister:
			n += 2
			for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
				n += m.item
				walk(it.Next())
			}
		default:
			n += m.scalar(x)
		}
	}
	walk(v)
	return n
}

// jsonString is the bytes of s as a JSON string as encoding/json writes
// it, escapes included: a control character, <, > and &, U+2028 and
// U+2029, and a byte that is not UTF-8 (as \ufffd) take six.
func jsonString(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r < 0x20, r == '<', r == '>', r == '&', r == 0x2028, r == 0x2029, r == utf8.RuneError && w == 1:
			n += 6
		case r == '"', r == '\\':
			n += 2
		default:
			n += int64(w)
		}
		i += w
	}
	return n
}

// jsonScalar is at least the bytes of a number, a boolean, null, a time or
// a duration as JSON.
func jsonScalar(v ref.Val) int64 {
	switch x := v.(type) {
	case types.Int:
		return int64(len(strconv.FormatInt(int64(x), 10)))
	case types.Uint:
		return int64(len(strconv.FormatUint(uint64(x), 10)))
	case types.Double:
		return 25 // -1.7976931348623157e+308
	case types.Bool:
		return 5
	case types.Null:
		return 4
	}
	return 40 // a time or a duration, quoted
}

// comparisons refuses an ==, != or in whose operands may both be large
// and computed (see the package's comment).
type comparisons struct{}

var _ cel.ASTValidator = comparisons{}

func (comparisons) Name() string { return "once.bounded_comparisons" }

func (comparisons) Validate(_ *cel.Env, _ cel.ValidatorConfig, a *ast.AST, iss *cel.Issues) {
	c := comparer{ast: a}
	c.visit(a.Expr(), map[string]bool{}, iss)
}

// comparer walks an expression, knowing which comprehension variables
// range over values read as they are.
type comparer struct{ ast *ast.AST }

func (c comparer) visit(e ast.Expr, plainVars map[string]bool, iss *cel.Issues) {
	switch e.Kind() {
	case ast.CallKind:
		call := e.AsCall()
		if call.IsMemberFunction() {
			c.visit(call.Target(), plainVars, iss)
		}
		for _, arg := range call.Args() {
			c.visit(arg, plainVars, iss)
		}
		if !c.bounded(call, plainVars) {
			iss.ReportErrorAtID(e.ID(), "%s compares two values that may both be large and computed, "+
				"which may take far longer than its cost says: compare with a literal or a single value, "+
				"or compare values as they are read", operatorName(call.FunctionName()))
		}
	case ast.SelectKind:
		c.visit(e.AsSelect().Operand(), plainVars, iss)
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			c.visit(el, plainVars, iss)
		}
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			c.visit(en.AsMapEntry().Key(), plainVars, iss)
			c.visit(en.AsMapEntry().Value(), plainVars, iss)
		}
	case ast.StructKind:
		for _, f := range e.AsStruct().Fields() {
			c.visit(f.AsStructField().Value(), plainVars, iss)
		}
	case ast.ComprehensionKind:
		comp := e.AsComprehension()
		c.visit(comp.IterRange(), plainVars, iss)
		c.visit(comp.AccuInit(), plainVars, iss)
		inner := make(map[string]bool, len(plainVars)+3)
		maps.Copy(inner, plainVars)
		ranged := c.plain(comp.IterRange(), plainVars)
		inner[comp.IterVar()] = ranged
		if comp.HasIterVar2() {
			inner[comp.IterVar2()] = ranged
		}
		inner[comp.AccuVar()] = false
		c.visit(comp.LoopCondition(), inner, iss)
		c.visit(comp.LoopStep(), inner, iss)
		c.visit(comp.Result(), inner, iss)
	}
}

// bounded reports whether a call compares values of which one is bounded
// by what the expression reads; calls of other functions are.
func (c comparer) bounded(call ast.CallExpr, plainVars map[string]bool) bool {
	args := call.Args()
	if len(args) != 2 {
		return true
	}
	a, b := args[0], args[1]
	switch call.FunctionName() {
	case operators.Equals, operators.NotEquals:
		return c.scalar(a) || c.scalar(b) || literal(a) || literal(b) ||
			(c.plain(a, plainVars) && c.plain(b, plainVars))
	case operators.In:
		// a in b: a compared with each element of b, or looked up among
		// a map's keys. Each comparison takes at most the shorter of the
		// two: b must be written out or read as it is, or a must be a
		// literal. A large computed string compared with each element of
		// a large computed list took 10 s in one call.
		return literal(a) || literal(b) || c.isMap(b) || c.plain(b, plainVars)
	}
	return true
}

// scalar reports whether e's type is one whose comparison takes at most
// its length.
func (c comparer) scalar(e ast.Expr) bool {
	t := c.ast.GetType(e.ID())
	if t == nil {
		return false
	}
	switch t.Kind() {
	case types.BoolKind, types.IntKind, types.UintKind, types.DoubleKind, types.StringKind, types.BytesKind,
		types.NullTypeKind, types.TimestampKind, types.DurationKind, types.TypeKind:
		return true
	}
	return false
}

// isMap reports whether e's type is a map.
func (c comparer) isMap(e ast.Expr) bool {
	t := c.ast.GetType(e.ID())
	return t != nil && t.Kind() == types.MapKind
}

// literal reports whether e is written out whole in the expression.
func literal(e ast.Expr) bool {
	switch e.Kind() {
	case ast.LiteralKind:
		return true
	case ast.ListKind:
		for _, el := range e.AsList().Elements() {
			if !literal(el) {
				return false
			}
		}
		return true
	case ast.MapKind:
		for _, en := range e.AsMap().Entries() {
			if !literal(en.AsMapEntry().Key()) || !literal(en.AsMapEntry().Value()) {
				return false
			}
		}
		return true
	}
	return false
}

// plain reports whether e is a value read as it is, or a part of one:
//
//   - a variable the environment declares, or a field or an element of one;
//   - a comprehension variable that ranges over such a value;
//   - dyn() of one;
//   - either branch of a condition;
//   - a filter() or map() of one whose elements are parts of its elements.
//
// What the expression reads is decoded JSON, which shares nothing. So such
// a value is no larger than the input.
func (c comparer) plain(e ast.Expr, plainVars map[string]bool) bool {
	switch e.Kind() {
	case ast.IdentKind:
		if v, ok := plainVars[e.AsIdent()]; ok {
			return v
		}
		return true
	case ast.SelectKind:
		sel := e.AsSelect()
		return !sel.IsTestOnly() && c.plain(sel.Operand(), plainVars)
	case ast.CallKind:
		call := e.AsCall()
		args := call.Args()
		switch {
		case call.FunctionName() == operators.Index && len(args) == 2:
			return c.plain(args[0], plainVars)
		case call.FunctionName() == "dyn" && len(args) == 1:
			return c.plain(args[0], plainVars)
		case call.FunctionName() == operators.Conditional && len(args) == 3:
			return c.plain(args[1], plainVars) && c.plain(args[2], plainVars)
		}
	case ast.ComprehensionKind:
		return c.plainSelection(e.AsComprehension(), plainVars)
	}
	return false
}

// plainSelection reports whether a comprehension is a filter() or a map()
// of a plain value whose elements are each a part of one element. Then the
// accumulator starts empty, each step appends such a part or nothing, and
// the result is the accumulator.
func (c comparer) plainSelection(comp ast.ComprehensionExpr, plainVars map[string]bool) bool {
	init, result := comp.AccuInit(), comp.Result()
	if init.Kind() != ast.ListKind || init.AsList().Size() != 0 || result.Kind() != ast.IdentKind ||
		result.AsIdent() != comp.AccuVar() || !c.plain(comp.IterRange(), plainVars) {
		return false
	}
	step := comp.LoopStep()
	if step.Kind() == ast.CallKind && step.AsCall().FunctionName() == operators.Conditional {
		args := step.AsCall().Args()
		if len(args) != 3 || !isIdent(args[2], comp.AccuVar()) {
			return false
		}
		step = args[1]
	}
	if step.Kind() != ast.CallKind || step.AsCall().FunctionName() != operators.Add {
		return false
	}
	args := step.AsCall().Args()
	if len(args) != 2 || !isIdent(args[0], comp.AccuVar()) || args[1].Kind() != ast.ListKind ||
		args[1].AsList().Size() != 1 {
		return false
	}
	return partOf(args[1].AsList().Elements()[0], comp.IterVar())
}

// partOf reports whether e is the variable v, or a field or an element of
// it.
func partOf(e ast.Expr, v string) bool {
	switch e.Kind() {
	case ast.IdentKind:
		return e.AsIdent() == v
	case ast.SelectKind:
		return !e.AsSelect().IsTestOnly() && partOf(e.AsSelect().Operand(), v)
	case ast.CallKind:
		call := e.AsCall()
		return call.FunctionName() == operators.Index && len(call.Args()) == 2 && partOf(call.Args()[0], v)
	}
	return false
}

func isIdent(e ast.Expr, name string) bool { return e.Kind() == ast.IdentKind && e.AsIdent() == name }

func operatorName(fn string) string {
	switch fn {
	case operators.Equals:
		return "=="
	case operators.NotEquals:
		return "!="
	}
	return "in"
}
