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

package kubectlonce

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/presence"
)

// hostile is what a tool may answer, and the manager copy into a status
// message, an external id or a result: escape sequences that retitle the
// terminal, clear it and colour what follows (ESC and its C1 form 0x9b), a
// carriage return that overwrites the line, a bidirectional override, a
// newline and a tab that forge a line and a column, a byte that is not
// UTF-8.
const hostile = "id\x1b]0;owned\x07\x1b[2J\r\u202e\u009b31m\nforged: line\tcol\xff\x7f"

// fill sets every string the value holds, in structs, pointers, slices
// and maps, to s: what the test cannot forget a field of.
func fill(v reflect.Value, s string) {
	switch v.Kind() {
	case reflect.String:
		if v.CanSet() {
			v.SetString(s)
		}
	case reflect.Pointer:
		if v.IsNil() && v.CanSet() && v.Type().Elem().Kind() == reflect.Struct {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if !v.IsNil() {
			fill(v.Elem(), s)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), s)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 || !v.CanSet() {
			return
		}
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := range v.Len() {
			fill(v.Index(i), s)
		}
	case reflect.Map:
		if v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.String && v.CanSet() {
			v.Set(reflect.MakeMap(v.Type()))
			v.SetMapIndex(reflect.ValueOf(s).Convert(v.Type().Key()), reflect.ValueOf(s).Convert(v.Type().Elem()))
		}
	}
}

// unsafeForTerminal returns what of out a terminal would act on, or
// that forges a line: a control character other than the newlines that
// end lines, a C1 control, a bidirectional override, a byte not UTF-8.
func unsafeForTerminal(out string) []string {
	var found []string
	if !utf8.ValidString(out) {
		found = append(found, "bytes that are not UTF-8")
	}
	for _, r := range out {
		if (r < 0x20 && r != '\n') || r == 0x7f || escapedRune(r) {
			found = append(found, string(r))
		}
	}
	if strings.Contains(out, "\nforged") {
		found = append(found, "a line of the tool's")
	}
	return found
}

// TestHumanOutputEscapesControls: kubectl once's text output, fed
// objects whose every string is hostile, holds no control character, no
// bidirectional override and no line but its own; -o json keeps the
// strings exact.
func TestHumanOutputEscapesControls(t *testing.T) {
	var op v1.SideEffectOperation
	fill(reflect.ValueOf(&op).Elem(), hostile)
	op.Status.State = v1.StateNeedsReview
	var saga v1.Saga
	fill(reflect.ValueOf(&saga).Elem(), hostile)
	var rows []reviewRow
	fill(reflect.ValueOf(&rows).Elem(), hostile)
	var version Version
	version.Managers = []presence.Manager{{}}
	fill(reflect.ValueOf(&version).Elem(), hostile)
	resolution := op.Status.Resolution.Resolution

	writers := map[string]func(*bytes.Buffer) error{
		"why operation": func(b *bytes.Buffer) error { return writeOperation(b, &op, at(1000).Time) },
		"why saga":      func(b *bytes.Buffer) error { return writeSaga(b, &saga, at(1000).Time) },
		"review":        func(b *bytes.Buffer) error { return writeReview(b, rows, true, at(1000).Time) },
		"version":       func(b *bytes.Buffer) error { return writeVersion(b, version, hostile, at(1000).Time) },
		"resolve": func(b *bytes.Buffer) error {
			_, err := b.WriteString(printable(resolutionText(resolution)) + "\n")
			return err
		},
	}
	for name, write := range writers {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := write(&b); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(b.String(), "owned") {
				t.Fatalf("the hostile strings are not printed at all: %s", b.String())
			}
			if found := unsafeForTerminal(b.String()); len(found) > 0 {
				t.Errorf("the output holds %q:\n%q", found, b.String())
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		var b bytes.Buffer
		if err := printDoc(&b, &op, outputJSON); err != nil {
			t.Fatal(err)
		}
		var back v1.SideEffectOperation
		if err := json.Unmarshal(b.Bytes(), &back); err != nil {
			t.Fatal(err)
		}
		// JSON keeps every valid rune; a byte that is not UTF-8 becomes
		// U+FFFD, as encoding/json writes it.
		if want := strings.ToValidUTF8(hostile, "\uFFFD"); back.Status.ErrorMessage != want {
			t.Errorf("-o json changed the message: %q, want %q", back.Status.ErrorMessage, want)
		}
	})
}
