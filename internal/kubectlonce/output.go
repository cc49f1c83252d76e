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
