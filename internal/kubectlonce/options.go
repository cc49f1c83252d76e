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

// Package kubectlonce is the `kubectl once` plugin. It lists what needs a
// person (review) and tells an operation's or a saga's story (why). It
// writes the same declarative fields a GitOps user writes (resolve,
// approve). internal/review checks and writes them, and the simulator
// shares it. It sets the brakes, spec.suspend and spec.cancel, on one
// object or many (suspend, resume, cancel). It
// uses cli-runtime's ConfigFlags, so the usual --kubeconfig, --context,
// --namespace and --as flags work, and a controller-runtime client typed on
// api/v1alpha1. It also prints its version and the managers' (version),
// and completes its commands, flags and names in bash and zsh.
package kubectlonce

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Options are what every command shares: the kubeconfig flags, the
// streams, the plugin's version, and a clock.
type Options struct {
	Flags   *genericclioptions.ConfigFlags
	Streams genericiooptions.IOStreams
	// Version is the plugin's version, as its binary was stamped.
	Version string
	// Now is the clock, for ages and plans; time.Now when nil.
	Now func() time.Time
	// Sleep waits d or until ctx ends, for resume --jitter; a timer when
	// nil.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand draws uniformly in [0, n), for resume --jitter; math/rand/v2's
	// when nil.
	Rand func(n int64) int64
}

// NewCommand is `kubectl once` and its subcommands; version is the
// plugin's.
func NewCommand(streams genericiooptions.IOStreams, version string) *cobra.Command {
	return newCommand(&Options{Flags: genericclioptions.NewConfigFlags(true), Streams: streams, Version: version})
}

// newCommand is `kubectl once` on the given options: tests set its clock,
// sleep and random source.
func newCommand(o *Options) *cobra.Command {
	cmd := &cobra.Command{
		// The binary's name, which the completion scripts complete;
		// kubectl runs it as `kubectl once`, and usage says so.
		Use:         "kubectl-once",
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl once"},
		Short:       "Review, explain, resolve and brake Once's operations and sagas",
		Long: `kubectl once helps the person Once waits for: it lists the operations and
sagas that need a decision, tells their story, and writes the decision into
the same spec fields a GitOps repository would (spec.resolution of an
operation, spec.approvals and spec.resolutions of a saga). During an
incident it holds and lifts calls (suspend, resume: spec.suspend of a tool or
an operation) and cancels operations (spec.cancel).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	o.Flags.AddFlags(cmd.PersistentFlags())
	_ = cmd.RegisterFlagCompletionFunc("namespace", o.completeNamespaces)
	cmd.AddCommand(newReviewCommand(o), newWhyCommand(o), newResolveCommand(o), newApproveCommand(o),
		newSuspendCommand(o), newResumeCommand(o), newCancelCommand(o), newVersionCommand(o))
	return cmd
}

// now is the options' clock.
func (o *Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

// client is a client of the cluster the flags name, typed on Once's API.
func (o *Options) client() (client.Client, error) {
	cfg, err := o.Flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, corev1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to the API server: %w", err)
	}
	return c, nil
}

// namespace is the namespace of -n, or of the kubeconfig's context.
func (o *Options) namespace() (string, error) {
	ns, _, err := o.Flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// defaultBy is who a decision is by when --by is not given: the user --as
// impersonates, else the kubeconfig user of the context, else $USER.
func (o *Options) defaultBy() string {
	if f := o.Flags; f.Impersonate != nil && *f.Impersonate != "" {
		return *f.Impersonate
	}
	if f := o.Flags; f.AuthInfoName != nil && *f.AuthInfoName != "" {
		return *f.AuthInfoName
	}
	if raw, err := o.Flags.ToRawKubeConfigLoader().RawConfig(); err == nil {
		name := raw.CurrentContext
		if f := o.Flags; f.Context != nil && *f.Context != "" {
			name = *f.Context
		}
		if c, ok := raw.Contexts[name]; ok && c.AuthInfo != "" {
			return c.AuthInfo
		}
	}
	return os.Getenv("USER")
}

// writer is the client that writes a decision, as --dry-run says: the
// client itself (none), one that sends every write with dryRun=All
// (server), or one that sends no write at all (client).
func (o *Options) writer(dryRun string) (client.Client, error) {
	c, err := o.client()
	if err != nil {
		return nil, err
	}
	switch dryRun {
	case dryRunServer:
		return client.NewDryRunClient(c), nil
	case dryRunClient:
		return noWrites{c}, nil
	}
	return c, nil
}

// noWrites reads through its client and sends no write to an object: a
// write leaves the object as the caller made it. (The plugin writes no
// subresource.)
type noWrites struct{ client.Client }

func (noWrites) Create(context.Context, client.Object, ...client.CreateOption) error { return nil }
func (noWrites) Update(context.Context, client.Object, ...client.UpdateOption) error { return nil }
func (noWrites) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return nil
}
func (noWrites) Delete(context.Context, client.Object, ...client.DeleteOption) error { return nil }
func (noWrites) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return nil
}
func (noWrites) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return nil
}
