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
// expression can allocate gigabytes or run for hours within its cost
// limit. Library closes each such case that the manager's environments
// have:
//
//   - replace(), join() and format() refuse a result over MaxValueBytes
//     before they build it, and are charged by what they built. cel-go
//     charges format() by its pattern alone, and estimates join() by the
//     length of its list.
//   - strings.quote() is charged by what it built, and indexOf() and
//     lastIndexOf() by the string they search, an empty needle too.
//   - A refusal costs a quarter of the cost limit, so that an || or an &&
//     that swallows it can try again only a few times.
//   - ==, != and in must have an operand whose size is bounded by what the
//     expression reads: a scalar, a literal, or a value read as it is. Two
//     computed lists can share their elements (a + a, doubled twenty
//     times), and comparing them walks every element of both, in one call
//     that nothing interrupts.
//
// JSON writes a value as JSON, refusing it first when it may pass a bound.
package celbound

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
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
)

// MaxValueBytes bounds one string that replace(), join() or format()
// builds, and the JSON of the values an evaluation returns. It is sixteen
// times the largest input (64 KiB).
const MaxValueBytes = 1 << 20

// refusalCost is what a refused call costs: a quarter of the manager's
// cost limit of one million, so that the error is reported when nothing
// swallows it, and an evaluation that swallows refusals stops at the fourth.
const refusalCost = 250_000

// Library adds ext.Strings to an environment with the bounds above. Add it
// instead of ext.Strings: an ext.Strings added before it would keep its
// own bindings of the functions it bounds.
func Library() cel.EnvOption {
	return cel.Lib(library{})
}

type library struct{}

func (library) LibraryName() string { return "once.celbound" }

func (library) CompileOptions() []cel.EnvOption {
	s, l := cel.StringType, cel.ListType(cel.StringType)
	return []cel.EnvOption{
		ext.Strings(),
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
		cel.ASTValidators(comparisons{}),
	}
}

// ProgramOptions charges the calls whose cost cel-go counts by less than
// their work. Added after ext.Strings' own trackers, they replace them.
func (library) ProgramOptions() []cel.ProgramOption {
	return []cel.ProgramOption{cel.CostTrackerOptions(
		interpreter.OverloadCostTracker("string_replace_string_string", chargeReplace),
		interpreter.OverloadCostTracker("string_replace_string_string_int", chargeReplace),
		interpreter.OverloadCostTracker("list_join", chargeBuilt),
		interpreter.OverloadCostTracker("list_join_string", chargeBuilt),
		interpreter.OverloadCostTracker("string_format", chargeBuilt),
		interpreter.OverloadCostTracker(overloads.ExtQuoteString, chargeBuilt),
		interpreter.OverloadCostTracker("string_index_of_string", chargeSearch),
		interpreter.OverloadCostTracker("string_index_of_string_int", chargeSearch),
		interpreter.OverloadCostTracker("string_last_index_of_string", chargeSearch),
		interpreter.OverloadCostTracker("string_last_index_of_string_int", chargeSearch),
	)}
}

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
				if n += int64(len(s)) + int64(len(sep)); n > MaxValueBytes {
					return tooLarge("join()", n)
				}
			}
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

// chargeBuilt charges a call by the bytes it built, and a refusal
// refusalCost.
func chargeBuilt(_ []ref.Val, result ref.Val) *uint64 {
	c := uint64(refusalCost)
	if s, ok := result.(types.String); ok {
		c = 1 + uint64(len(s))
	}
	return &c
}

// chargeReplace charges a replace() as ext.Strings does, the search and
// the result, by bytes; a refusal refusalCost.
func chargeReplace(args []ref.Val, result ref.Val) *uint64 {
	c := uint64(refusalCost)
	if s, ok := result.(types.String); ok {
		c = *chargeSearch(args, result) + uint64(len(s))
	}
	return &c
}

// chargeSearch charges a search a tenth per byte of the string searched
// times the needle's length, at least one: each call also builds the
// string's runes.
func chargeSearch(args []ref.Val, _ ref.Val) *uint64 {
	target, needle := byteLen(args[0]), uint64(1)
	if len(args) > 1 {
		needle = max(1, byteLen(args[1]))
	}
	c := 1 + uint64(math.Ceil(float64(target)*float64(needle)*0.1))
	return &c
}

func byteLen(v ref.Val) uint64 {
	s, _ := v.(types.String)
	return uint64(len(s))
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

// jsonString is at least the bytes of s as a JSON string: a control
// character or <, > and & as \u00XX, " and \ as two, and a byte past ASCII
// as three (a byte that is not UTF-8 becomes \ufffd; U+2028 takes six
// for its three).
func jsonString(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == '<', c == '>', c == '&':
			n += 6
		case c == '"', c == '\\':
			n += 2
		case c >= 0x80:
			n += 3
		default:
			n++
		}
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
		for k, v := range plainVars {
			inner[k] = v
		}
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
		// a in b: a compared with each element of b.
		return c.scalar(a) || literal(a) || literal(b) || (c.plain(a, plainVars) && c.plain(b, plainVars))
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

// plain reports whether e is a value read as it is: a variable the
// environment declares, a field or an element of one, or a comprehension
// variable that ranges over such a value. What the expression reads is
// decoded JSON, which shares nothing, so such a value is no larger than
// the input.
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
		if call.FunctionName() == operators.Index && len(call.Args()) == 2 {
			return c.plain(call.Args()[0], plainVars)
		}
	}
	return false
}

func operatorName(fn string) string {
	switch fn {
	case operators.Equals:
		return "=="
	case operators.NotEquals:
		return "!="
	}
	return "in"
}
