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
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/printers"

	"github.com/once-dev/once/internal/presence"
)

// Version is what version -o json|yaml prints.
type Version struct {
	// Plugin is the plugin's version.
	Plugin string `json:"pluginVersion"`
	// Managers are the managers running now: those whose presence Lease
	// was renewed within its duration.
	Managers []presence.Manager `json:"managers"`
}

func newVersionCommand(o *Options) *cobra.Command {
	var output, managerNS string
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version [-o json|yaml] [--manager-namespace NAMESPACE] [--client]",
		Short: "Print the plugin's version and the running managers'",
		Long: `Print the plugin's version and the version of every running manager, and
warn (on stderr) about each manager whose version differs from the
plugin's.

Every manager keeps a Lease of its own in its namespace, labelled
once.dev/manager=true, with its holder identity and its version in the
annotation once.dev/version, renewed every 30 seconds and deleted when it
stops; the plugin lists them (in all namespaces, or in --manager-namespace)
and shows those renewed within their duration, so several managers (two
replicas, shards) show one line each. When none is found it says so and
still exits 0. Listing needs list on leases in coordination.k8s.io there.
With --client it prints the plugin's version only, and asks no cluster.`,
		Example: `  kubectl once version
  kubectl once version -o json
  kubectl once version --manager-namespace once-system`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.version(cmd.Context(), output, managerNS, clientOnly)
		},
	}
	addOutputFlag(cmd, &output, "text")
	cmd.Flags().StringVar(&managerNS, "manager-namespace", "",
		"the namespace of the managers' Leases (default: all namespaces)")
	_ = cmd.RegisterFlagCompletionFunc("manager-namespace", o.completeNamespaces)
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print the plugin's version only, without asking the cluster")
	return cmd
}

func (o *Options) version(ctx context.Context, output, managerNS string, clientOnly bool) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	if output == "" {
		if _, err := fmt.Fprintf(o.Streams.Out, "Plugin version: %s\n", o.Version); err != nil {
			return err
		}
	}
	if clientOnly && output != "" {
		return printDoc(o.Streams.Out, struct {
			Plugin string `json:"pluginVersion"`
		}{o.Version}, output)
	}
	if clientOnly {
		return nil
	}
	c, err := o.client()
	if err != nil {
		return err
	}
	now := o.now()
	managers, err := presence.List(ctx, c, managerNS, now)
	if err != nil {
		return leaseError(err, managerNS)
	}
	v := Version{Plugin: o.Version, Managers: managers}
	if output != "" {
		err = printDoc(o.Streams.Out, v, output)
	} else {
		err = writeVersion(o.Streams.Out, v, managerNS, now)
	}
	if err != nil {
		return err
	}
	if len(managers) == 0 && output != "" {
		_, _ = fmt.Fprintln(o.Streams.ErrOut, noManager(managerNS))
	}
	for _, w := range versionWarnings(v) {
		_, _ = fmt.Fprintln(o.Streams.ErrOut, "warning: "+printable(w))
	}
	return nil
}

// writeVersion prints the versions as text: the plugin's was printed
// first, the managers' follow as a table, or a line that says none runs.
func writeVersion(out io.Writer, v Version, managerNS string, now time.Time) error {
	if len(v.Managers) == 0 {
		_, err := fmt.Fprintln(out, noManager(managerNS))
		return err
	}
	_, _ = fmt.Fprintln(out, "Managers:")
	w := printers.GetNewTabWriter(out)
	_, _ = fmt.Fprintln(w, "  NAMESPACE\tHOLDER\tVERSION\tRENEWED")
	for _, m := range v.Managers {
		_, _ = fmt.Fprintf(w, "  %s\t%s\t%s\t%s ago\n", printable(m.Namespace), printable(m.Holder), printable(m.Version),
			age(now, m.RenewTime))
	}
	return w.Flush()
}

// noManager is the line that says no manager was found, and where it was
// looked for.
func noManager(managerNS string) string {
	where := anyNamespace
	if managerNS != "" {
		where = "in namespace " + managerNS
	}
	return fmt.Sprintf("Manager version: unknown: no running manager found %s (none renewed a Lease labelled "+
		"%s=true within its duration)", where, presence.LabelManager)
}

// versionWarnings says which managers run a version other than the
// plugin's.
func versionWarnings(v Version) []string {
	var out []string
	for _, m := range v.Managers {
		if m.Version != v.Plugin {
			out = append(out, fmt.Sprintf("manager %s in namespace %s runs version %s, and this plugin is version %s",
				m.Holder, m.Namespace, m.Version, v.Plugin))
		}
	}
	return out
}

// leaseError words an error met listing the managers' Leases.
func leaseError(err error, ns string) error {
	switch {
	case apierrors.IsForbidden(err) && ns == "":
		return fmt.Errorf("you may not list leases.coordination.k8s.io in all namespaces: "+
			"name the managers' namespace with --manager-namespace (%w)", err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not list leases.coordination.k8s.io in namespace %s (%w)", ns, err)
	}
	return fmt.Errorf("listing the managers' Leases: %w", err)
}
