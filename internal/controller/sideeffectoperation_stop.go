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

package controller

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// A manager that stops may still hold answers: a call finished, and the
// write of its answer failed (the API server was away). The pass that
// would write it never comes once the work queues stop. So a stopping
// manager writes them itself, after its passes in flight have ended, in
// passes that write what they hold and call no tool (I12). What still
// fails to be written when the grace runs out is lost, as in a crash: the
// attempt stays unknown, and the next manager reconciles it.

// answersOnly marks a pass's context: the pass writes the answer it holds
// and whatever follows from it without a call, and makes no call.
type answersOnly struct{}

// makesNoCall reports whether the pass may make no call to the tool.
func (p *pass) makesNoCall() bool { return p.ctx.Value(answersOnly{}) != nil }

// heldWriter is the manager's runnable that writes, as it stops, the
// answers the operation reconciler still holds.
type heldWriter struct {
	r *SideEffectOperationReconciler
	// grace bounds the writing: the manager's graceful shutdown.
	grace time.Duration
}

// lastRound bounds the round of writes that follows the grace, for what
// the passes ending at its close still hold. It ends before the manager's
// own deadline, which is half of shutdownSlack past the grace.
const lastRound = shutdownSlack / 4

// Start waits for the manager to stop, then writes what is held once no
// pass is in flight, again while passes end and hold more, until nothing
// is held or the grace has run out. A last round, bounded by lastRound,
// writes what is held then, whether passes are in flight or not.
func (h heldWriter) Start(ctx context.Context) error {
	<-ctx.Done()
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.grace)
	defer cancel()
	log := logf.FromContext(ctx)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if h.r.inflight.Load() == 0 {
			if h.r.WriteHeld(stop) == 0 {
				return nil
			}
		}
		select {
		case <-stop.Done():
			last, cancel := context.WithTimeout(context.WithoutCancel(stop), lastRound)
			defer cancel()
			if n := h.r.WriteHeld(last); n > 0 {
				log.Info("Stopped with answers not written; their attempts stay unknown until reconciled", "answers", n)
			}
			return nil
		case <-tick.C:
		}
	}
}

// WriteHeld runs a pass that makes no call for each operation this
// manager holds an answer for, and returns how many answers are still
// held after.
func (r *SideEffectOperationReconciler) WriteHeld(ctx context.Context) int {
	ctx = context.WithValue(ctx, answersOnly{}, true)
	var names []client.ObjectKey
	r.pending.Range(func(_, v any) bool {
		names = append(names, client.ObjectKeyFromObject(v.(*heldAnswer).op))
		return true
	})
	for _, key := range names {
		if ctx.Err() != nil {
			// The bound has run out: what is left stays held.
			break
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: key}); err != nil {
			logf.FromContext(ctx).Error(err, "Writing an answer held as the manager stops", "operation", key)
		}
	}
	held := 0
	r.pending.Range(func(_, _ any) bool {
		held++
		return true
	})
	return held
}
