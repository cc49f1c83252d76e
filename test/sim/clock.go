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

import (
	"container/heap"
	"time"

	"k8s.io/utils/clock"
)

// Clock is simulated time: it moves only when the scheduler moves it, and
// a timer's function runs in the scheduler's goroutine when its time comes,
// so that nothing happens between two steps.
type Clock struct {
	now time.Time
	// until is where the current Advance ends; zero outside one.
	until  time.Time
	seq    int
	timers timerHeap
}

var _ clock.WithTickerAndDelayedExecution = (*Clock)(nil)

// NewClock starts simulated time at start.
func NewClock(start time.Time) *Clock {
	return &Clock{now: start}
}

// Now is the simulated time.
func (c *Clock) Now() time.Time { return c.now }

// Since is the simulated time since t.
func (c *Clock) Since(t time.Time) time.Duration { return c.now.Sub(t) }

// Advance moves the clock by d, firing every timer that comes due, in the
// order of their times.
func (c *Clock) Advance(d time.Duration) {
	end := c.now.Add(d)
	c.until = end
	defer func() { c.until = time.Time{} }()
	for len(c.timers) > 0 && !c.timers[0].at.After(end) {
		t := heap.Pop(&c.timers).(*timer)
		if t.at.After(c.now) {
			c.now = t.at
		}
		t.fire()
	}
	c.now = end
}

// Next is the time of the earliest timer but the background ones, and
// whether there is one.
func (c *Clock) Next() (time.Time, bool) { return c.next(false) }

// NextAny is Next counting the background timers too.
func (c *Clock) NextAny() (time.Time, bool) { return c.next(true) }

func (c *Clock) next(background bool) (time.Time, bool) {
	var at time.Time
	found := false
	for _, t := range c.timers {
		if (background || !t.background) && (!found || t.at.Before(at)) {
			at, found = t.at, true
		}
	}
	return at, found
}

// AfterFunc runs f in the scheduler's goroutine once d has passed.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, f: f}
	t.Reset(d)
	return t
}

// Background is AfterFunc for a process's own loop (a Sharder's
// renewals): Next leaves it out, so that the scheduler's moves to the next
// due time are not cut to its period.
func (c *Clock) Background(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, f: f, background: true}
	t.Reset(d)
	return t
}

// NewTimer is a timer whose channel receives the time once d has passed.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	ch := make(chan time.Time, 1)
	t := &timer{c: c, ch: ch}
	t.Reset(d)
	return t
}

// After is NewTimer's channel.
func (c *Clock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTicker ticks every d of simulated time.
func (c *Clock) NewTicker(d time.Duration) clock.Ticker {
	ch := make(chan time.Time, 1)
	t := &timer{c: c, ch: ch, period: d}
	t.Reset(d)
	return ticker{t}
}

// Tick is NewTicker's channel.
func (c *Clock) Tick(d time.Duration) <-chan time.Time { return c.NewTicker(d).C() }

// Sleep cannot be simulated: a sleeping pass would stop the world.
func (c *Clock) Sleep(time.Duration) { panic("sim: Sleep on the simulated clock") }

type timer struct {
	c      *Clock
	at     time.Time
	seq    int
	index  int // in the heap; -1 when not armed
	f      func()
	ch     chan time.Time
	period time.Duration
	// background timers are left out of Next.
	background bool
}

func (t *timer) fire() {
	t.index = -1
	switch {
	case t.f != nil:
		t.f()
	default:
		select {
		case t.ch <- t.c.now:
		default:
		}
		if t.period > 0 {
			t.Reset(t.period)
		}
	}
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	if t.index < 0 || t.index >= len(t.c.timers) || t.c.timers[t.index] != t {
		return false
	}
	heap.Remove(&t.c.timers, t.index)
	t.index = -1
	return true
}

func (t *timer) Reset(d time.Duration) bool {
	armed := t.Stop()
	t.c.seq++
	t.at, t.seq = t.c.now.Add(d), t.c.seq
	heap.Push(&t.c.timers, t)
	return armed
}

type ticker struct{ t *timer }

func (k ticker) C() <-chan time.Time { return k.t.ch }
func (k ticker) Stop()               { k.t.Stop() }

// timerHeap orders timers by time, then by when they were armed.
type timerHeap []*timer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}
