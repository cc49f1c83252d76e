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

package sim

// Graceful stops (Options.Stops): a manager told to stop (SIGTERM) does
// what controller-runtime's manager does, in its order: its Sharder
// leaves, its controllers start no pass and let those in flight end, and
// the operation reconciler's stop path (WriteHeld) writes the answers it
// still holds, within its grace; then the process is gone, and a new one
// starts later with an empty memory (docs/design.md, "The simulator").

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// ctrlStop names a stopping manager's rounds of writing what it holds.
const ctrlStop = "stop"

// stopping is a manager told to stop.
type stopping struct {
	// at is when it was told; restart how long after that a new process
	// starts.
	at      time.Time
	restart time.Duration
	// down: the process is gone.
	down bool
}

// The kinds of action of a graceful stop.
const (
	// Stop: a manager is told to stop (a rollout, a node drained).
	Stop Kind = "stop"
	// WriteHeld: a stopping manager whose passes in flight have ended
	// writes the answers it holds (one round of its heldWriter), and
	// exits once nothing is held or its grace ran out; or the kubelet
	// kills it, its grace over.
	WriteHeld Kind = "write-held"
	// Start: a new process of a manager that stopped starts.
	Start Kind = "start"
)

// halted reports whether the manager starts no pass: it is stopping, or
// gone.
func (m *Manager) halted() bool { return m.stop != nil }

// down reports whether the manager's process is gone.
func (m *Manager) down() bool { return m.stop != nil && m.stop.down }

// deadline is when the kubelet kills a stopping manager: its graceful
// shutdown timeout after it was told.
func (m *Manager) deadline() time.Time {
	return m.stop.at.Add(managerConfig(m.holder()).GracefulShutdownTimeout())
}

// stopChoice is the scheduler's choice of a graceful stop: a manager that
// runs is told to stop, and a new process starts from a second to five
// minutes later.
func (w *World) stopChoice(rng *rand.Rand, a *Action) choice {
	return choice{"stop", func() bool {
		m := rng.IntN(len(w.managers))
		a.Kind, a.Manager, a.N = Stop, m, int64(time.Second)*(1+rng.Int64N(300))
		return w.opts.Stops && !w.managers[m].halted()
	}}
}

// planStops is what must happen to stopping managers: a process gone
// starts again when its time has come; one whose passes in flight ended
// writes what it holds, soon (its heldWriter looks every 100 ms); one
// whose grace ran out is killed.
func (w *World) planStops(rng *rand.Rand, a *Action) bool {
	for i, m := range w.managers {
		switch {
		case !m.halted():
		case m.down() && !w.clock.Now().Before(m.stop.at.Add(m.stop.restart)):
			a.Kind, a.Manager = Start, i
			return true
		case m.down():
		case !w.clock.Now().Before(m.deadline()) || len(m.parked) == 0 && rng.IntN(2) == 0:
			a.Kind, a.Manager = WriteHeld, i
			return true
		}
	}
	return false
}

// describeStop is describe for the kinds of a graceful stop.
func (w *World) describeStop(a Action, m *Manager) string {
	switch a.Kind {
	case Stop:
		if m.halted() {
			return ""
		}
		return fmt.Sprintf("manager %s is told to stop (SIGTERM): it releases its shards, starts no pass, and lets "+
			"those in flight end; a new process starts %s later", m.holder(), time.Duration(a.N))
	case WriteHeld:
		switch {
		case !m.halted() || m.down():
			return ""
		case !w.clock.Now().Before(m.deadline()):
			return fmt.Sprintf("manager %s's grace ran out: the kubelet kills it", m.holder())
		case len(m.parked) > 0:
			return ""
		}
		return fmt.Sprintf("manager %s's passes in flight have ended: it writes the answers it holds", m.holder())
	case Start:
		if !m.down() {
			return ""
		}
		return fmt.Sprintf("manager %s starts again as %s, with an empty cache", m.Name, m.holder())
	}
	return ""
}

// applyStop carries out an action of a graceful stop.
func (w *World) applyStop(a Action, m *Manager) {
	switch a.Kind {
	case Stop:
		m.stop = &stopping{at: w.clock.Now(), restart: time.Duration(a.N)}
		// The Sharder stops first (a runnable that needs no leader), then
		// the controllers: their queues stop handing out work.
		m.sharder.end()
		m.queue = map[request]time.Time{}
	case WriteHeld:
		if !w.clock.Now().Before(m.deadline()) {
			w.exit(m)
			return
		}
		w.writeHeld(m)
	case Start:
		m.boot()
	}
}

// writeHeld is one round of the manager's heldWriter, in a pass of its
// own that may freeze and meet the API server's faults like any other.
func (w *World) writeHeld(m *Manager) {
	pr := &passRun{m: m, incarnation: m.incarnation, req: request{ctrlStop, types.NamespacedName{Namespace: Namespace,
		Name: m.Name}}, resume: make(chan struct{})}
	left := 0
	var owed []*heldAnswer
	var unknown []*Effect
	for _, h := range w.held {
		if h.effect != nil && h.m == m && h.incarnation == m.incarnation {
			owed = append(owed, h)
			if !h.effect.Known {
				unknown = append(unknown, h.effect)
			}
		}
	}
	pr.after = func() { w.heldWritten(pr, owed, unknown, left) }
	w.running = pr
	go func() {
		left = m.op.WriteHeld(context.Background())
		w.yield <- yieldMsg{pr: pr, done: true}
	}()
	w.await(pr)
}

// heldWritten ends a round of the heldWriter: a round that reached the API
// server throughout wrote every answer held (I12), and the manager exits
// once nothing is held or its grace (the reconciler's StopGrace) ran out.
// owed are the answers it held, not yet recorded, as the round began;
// unknown their effects that Once knew of nowhere then.
func (w *World) heldWritten(pr *passRun, owed []*heldAnswer, unknown []*Effect, left int) {
	m := pr.m
	if !pr.apiErr && !m.cutOff {
		checked := map[types.NamespacedName]bool{}
		for _, h := range owed {
			if !checked[h.op] {
				checked[h.op] = true
				w.checkHeld(m, h.op)
			}
		}
	}
	// What a record or a status names now: written in this round.
	w.accountGone()
	if n := len(slices.DeleteFunc(unknown, func(e *Effect) bool { return !e.Known })); n > 0 {
		w.stopWrites += n
		w.note("manager %s wrote %d answers it held as it stops", m.holder(), n)
	}
	if left > 0 && w.clock.Now().Before(m.stop.at.Add(m.op.StopGrace)) {
		w.note("manager %s still holds %d answers: it tries again", m.holder(), left)
		return
	}
	if left > 0 {
		w.note("manager %s's grace for its answers ran out with %d still held: their attempts stay unknown", m.holder(), left)
	}
	w.exit(m)
}

// exit ends a stopping manager's process: what it still holds is lost, as
// in a crash, and its passes still frozen end at their next call.
func (w *World) exit(m *Manager) {
	parked := m.parked
	m.incarnation++
	for _, r := range sortedRequests(parked) {
		w.resume(parked[r])
	}
	m.sharder.end()
	m.queue, m.parked = map[request]time.Time{}, map[request]*passRun{}
	m.stop.down = true
	w.note("manager %s is gone", m.holderOf(m.incarnation-1))
}

// settleStops finishes the stops under way as the quiet phase begins, and
// starts the managers that are gone: line tells each move.
func (w *World) settleStops(line func(string)) {
	for _, m := range w.managers {
		for round := 0; m.halted() && !m.down(); round++ {
			if round == 3 {
				line(fmt.Sprintf("manager %s's grace runs out", m.holder()))
				w.exit(m)
				break
			}
			line(fmt.Sprintf("manager %s writes the answers it holds", m.holder()))
			w.writeHeld(m)
		}
		if m.down() {
			line(fmt.Sprintf("manager %s starts again as %s", m.Name, m.holder()))
			m.boot()
		}
	}
}
