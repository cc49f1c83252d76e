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
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Output formats of -o: a table or text when empty.
const (
	outputJSON = "json"
	outputYAML = "yaml"
)

// addOutputFlag adds -o to a command, with its completion.
func addOutputFlag(cmd *cobra.Command, output *string, what string) {
	cmd.Flags().StringVarP(output, "output", "o", "", "output format: json or yaml ("+what+" if empty)")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{outputJSON, outputYAML},
		cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an -o other than json or yaml, before anything is
// read or written.
func checkOutput(format string) error {
	switch format {
	case "", outputJSON, outputYAML:
		return nil
	}
	return fmt.Errorf("--output %q: use json or yaml", format)
}

// printDoc prints v as indented JSON or as YAML.
func printDoc(out io.Writer, v any, format string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == outputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = out.Write(b)
	return err
}

// printObject prints an object of Once's API as kubectl get -o prints it:
// with its apiVersion and kind, without its managed fields.
func printObject(out io.Writer, obj client.Object, gvk schema.GroupVersionKind, format string) error {
	obj = obj.DeepCopyObject().(client.Object)
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	obj.SetManagedFields(nil)
	return printDoc(out, obj, format)
}

// Dry runs of --dry-run, as kubectl names them.
const (
	dryRunNone   = "none"
	dryRunClient = "client"
	dryRunServer = "server"
)

// addDryRunFlag adds --dry-run to a command that writes, with its
// completion.
func addDryRunFlag(cmd *cobra.Command, dryRun *string) {
	cmd.Flags().StringVar(dryRun, "dry-run", dryRunNone, `"none" writes; "server" sends the write with dryRun=All, `+
		`so that the API server checks and admits it and stores nothing; "client" sends nothing`)
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{dryRunNone, dryRunClient, dryRunServer},
		cobra.ShellCompDirectiveNoFileComp))
}

// checkDryRun refuses a --dry-run other than none, client or server.
func checkDryRun(dryRun string) error {
	switch dryRun {
	case dryRunNone, dryRunClient, dryRunServer:
		return nil
	}
	return fmt.Errorf("--dry-run %q: use none, client or server", dryRun)
}

// dryRunNote is what a write's message ends with: nothing for a write, the
// dry run otherwise, as kubectl says it.
func dryRunNote(dryRun string) string {
	if !isDryRun(dryRun) {
		return ""
	}
	return " (" + dryRun + " dry run)"
}

// isDryRun reports whether --dry-run asks for a dry run.
func isDryRun(dryRun string) bool {
	return dryRun == dryRunClient || dryRun == dryRunServer
}

// printable is s for a terminal. It escapes, as Go escapes them (\x1b, \n,
// \u202e), every control character (C0, DEL, C1), each bidirectional
// override and each byte that is not UTF-8. A tool or a writer may put
// text in a status, a message or a name. That text then cannot drive the
// terminal: no escape sequences that move the cursor, retitle the window
// or rewrite what was printed. Nor can it forge a line or a column. Text
// in -o json or yaml is printed as it is: its encoders escape what they
// must.
func printable(s string) string {
	if !needsEscape(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case escapedRune(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// needsEscape reports whether printable changes s.
func needsEscape(s string) bool {
	if !utf8.ValidString(s) {
		return true
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || escapedRune(r) {
			return true
		}
	}
	return false
}

// escapedRune reports a rune beyond ASCII that printable escapes: the C1
// controls (0x9b starts a sequence as ESC [ does) and the bidirectional
// marks and overrides, which reorder what a reader sees.
func escapedRune(r rune) bool {
	switch {
	case r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
