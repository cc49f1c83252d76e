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

// Package celbound bounds the values that users' CEL expressions build,
// before they are built.
//
// cel-go charges a call's cost after the call returns. Most functions
// build a result no larger than their arguments, so the charge comes in
// time. Three build far more:
//   - replace() multiplies: 'a'*12 000 with each 'a' replaced by the same
//     12 000 characters is 144 MB;
//   - join() of a list that holds one large string many times (a map()
//     over a long list makes one cheaply);
//   - format() of such a list.
//
// Library redefines these three so that each refuses, before it
// allocates, a result over MaxValueBytes. Size does the same for a value
// about to be turned into JSON.
//
// Add Library after ext.Strings, with the same options, in every
// environment that users' expressions compile in.
package celbound

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/functions"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
)

// MaxValueBytes bounds one value that an expression builds: a string from
// replace(), join() or format(), or a result as JSON. It is sixteen times
// the largest input (64 KiB), and near what the cost limit of one million
// allows at one unit per byte built.
const MaxValueBytes = 1 << 20

// The worst cases Size counts for what it cannot measure without
// building it: a string or bytes quoted (control characters escaped as
// \u0000), and a number, time or duration written out (a double's %f has
// up to 309 digits before its point).
const (
	quoted  = 6
	scalar  = 350
	element = 4 // brackets, ", " and ": "
)

// Library redefines replace(), join() and format() of ext.Strings so that
// each refuses a result over MaxValueBytes before building it. Each then
// calls ext.Strings' own binding.
func Library() cel.EnvOption {
	return cel.Lib(library{})
}

type library struct{}

func (library) LibraryName() string { return "once.celbound" }

func (library) ProgramOptions() []cel.ProgramOption { return nil }

func (library) CompileOptions() []cel.EnvOption {
	s, l := cel.StringType, cel.ListType(cel.StringType)
	return []cel.EnvOption{
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
	}
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
		var k int64
		if old == "" {
			k = int64(utf8.RuneCountInString(string(str))) + 1
		} else {
			k = int64(strings.Count(string(str), string(old)))
		}
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

// guardJoin refuses a join() whose result passes the bound.
func guardJoin(next functions.FunctionOp) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		var sep types.String
		if len(args) == 2 {
			sep, _ = args[1].(types.String)
		}
		if err := joined(args[0], string(sep)); err != nil {
			return err
		}
		return next(args...)
	}
}

// joined refuses a join() of list with sep whose result passes the
// bound; it stops counting there.
func joined(list ref.Val, sep string) ref.Val {
	l, ok := list.(traits.Lister)
	if !ok {
		return nil
	}
	var n int64
	for it := l.Iterator(); it.HasNext() == types.True; {
		s, _ := it.Next().(types.String)
		n += int64(len(s)) + int64(len(sep))
		if n > MaxValueBytes {
			return tooLarge("join()", n)
		}
	}
	return nil
}

// guardFormat refuses a format() whose result may pass the bound: its
// text and what Size counts of its arguments.
func guardFormat(next functions.FunctionOp) functions.FunctionOp {
	return func(args ...ref.Val) ref.Val {
		f, _ := args[0].(types.String)
		if n := int64(len(f)) + Size(args[1], MaxValueBytes); n > MaxValueBytes {
			return tooLarge("format()", n)
		}
		return next(args...)
	}
}

// Size is at least the number of bytes v takes written out, as JSON or by
// format(), counted without writing it. It stops counting once past
// limit, so that its own work is bounded too: each element counts at
// least one byte.
func Size(v ref.Val, limit int64) int64 {
	var n int64
	var walk func(ref.Val)
	walk = func(v ref.Val) {
		if n > limit {
			return
		}
		switch x := v.(type) {
		case types.String:
			n += quoted*int64(len(x)) + 2
		case types.Bytes:
			n += quoted*int64(len(x)) + 2
		case traits.Mapper:
			n += element
			for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
				k := it.Next()
				n += element
				walk(k)
				walk(x.Get(k))
			}
		case traits.Lister:
			n += element
			for it := x.Iterator(); it.HasNext() == types.True && n <= limit; {
				n += element
				walk(it.Next())
			}
		default:
			n += scalar
		}
	}
	walk(v)
	return n
}
