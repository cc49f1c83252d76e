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
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// resume --jitter: each object gets its own time, drawn uniformly at
// random in the window, so that the calls a suspend held do not all
// start at once. The plan is printed first; then the plugin sleeps until
// each time and writes.

// planned is one write of a spread, and its time from the start.
type planned struct {
	t  target
	at time.Duration
}

// plan draws a time in [0, window) for each target, and sorts them by it.
func plan(targets []target, window time.Duration, draw func(n int64) int64) []planned {
	out := make([]planned, 0, len(targets))
	for _, t := range targets {
		out = append(out, planned{t: t, at: time.Duration(draw(int64(window)))})
	}
	slices.SortStableFunc(out, func(a, b planned) int {
		return cmp.Or(cmp.Compare(a.at, b.at), strings.Compare(a.t.obj.GetNamespace(), b.t.obj.GetNamespace()),
			strings.Compare(a.t.obj.GetName(), b.t.obj.GetName()))
	})
	return out
}

// spread writes the action to each target at its drawn time. A dry run
// prints the plan and does not sleep. An interrupted spread names what
// it left.
func (o *Options) spread(ctx context.Context, c client.Client, a brakeAction, writes []target, f brakeFlags, withNS bool) error {
	start := o.now()
	p := plan(writes, f.jitter, o.draw())
	out := o.Streams.Out
	_, _ = fmt.Fprintf(out, "Plan: %d to %s over %s, each at a time of its own:\n", len(p), a.Verb, f.jitter)
	w := printers.GetNewTabWriter(out)
	for _, e := range p {
		_, _ = fmt.Fprintf(w, "  +%s\t%s\t%s\n", e.at.Round(time.Second), stamp(start.Add(e.at)), printable(e.t.ref(withNS)))
	}
	_ = w.Flush()
	var failed []string
	for i, e := range p {
		if !isDryRun(f.dryRun) {
			if err := o.sleep(ctx, start.Add(e.at).Sub(o.now())); err != nil {
				return fmt.Errorf("interrupted: %d not %s (%s)", len(p)-i, a.Done, refs(p[i:], withNS))
			}
			fresh := e.t.k.newObject()
			if err := c.Get(ctx, client.ObjectKeyFromObject(e.t.obj), fresh); err != nil {
				o.say(e.t.ref(withNS), apiError(err, "get", e.t.k.kind, e.t.obj.GetNamespace(), e.t.obj.GetName()).Error())
				failed = append(failed, e.t.ref(withNS))
				continue
			}
			if fresh.GetUID() == e.t.obj.GetUID() {
				e.t.obj = fresh
			}
			if skip := skipReason(e.t, a); skip != "" {
				o.say(e.t.ref(withNS), skip)
				continue
			}
		}
		if err := o.write(ctx, c, a, e.t, f.dryRun, withNS, stamp(start.Add(e.at))); err != nil {
			o.say(e.t.ref(withNS), err.Error())
			failed = append(failed, e.t.ref(withNS))
		}
	}
	return failedError(a, failed)
}

// refs names the planned writes, in order.
func refs(p []planned, withNS bool) string {
	names := make([]string, 0, len(p))
	for _, e := range p {
		names = append(names, e.t.ref(withNS))
	}
	return strings.Join(names, ", ")
}

// draw is the options' random source: a uniform draw in [0, n).
func (o *Options) draw() func(n int64) int64 {
	if o.Rand != nil {
		return o.Rand
	}
	return rand.Int64N
}

// sleep waits d, or until ctx ends.
func (o *Options) sleep(ctx context.Context, d time.Duration) error {
	if o.Sleep != nil {
		return o.Sleep(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
