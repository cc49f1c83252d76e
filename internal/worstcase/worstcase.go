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

// Package worstcase measures what the worst case of an input's bound
// costs: the bytes the heap gives out and the CPU the process spends. The
// tests of each bound use it, and docs/threat-model.md's table of bounds
// quotes their figures.
package worstcase

import (
	"fmt"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Cost is what running a worst case took.
type Cost struct {
	// Bytes is what the heap gave out meanwhile, freed or not.
	Bytes uint64
	// CPU is the CPU time of the whole process meanwhile, user and
	// system, its garbage collector included.
	CPU time.Duration
	// Wall is the time that passed.
	Wall time.Duration
}

// String is the cost as the table of bounds writes it.
func (c Cost) String() string {
	return fmt.Sprintf("%.1f MiB, %.3f s CPU (%.3f s wall)", float64(c.Bytes)/(1<<20), c.CPU.Seconds(),
		c.Wall.Seconds())
}

// Of runs f once and returns what it cost.
func Of(f func()) Cost {
	runtime.GC()
	cpu := cpuTime()
	bytes, wall := Allocated(f)
	return Cost{Bytes: bytes, CPU: cpuTime() - cpu, Wall: wall}
}

// Allocated runs f, and returns what the heap gave out meanwhile and how
// long it took. It collects nothing first, so it is cheap enough to run
// on every input of a fuzz target.
func Allocated(f func()) (uint64, time.Duration) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	f()
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, took
}

// Within runs f once, logs its cost under name, and fails t when it
// allocated more than ceiling bytes. Time is logged, never asserted: the
// machine that runs the tests may be shared.
func Within(t testing.TB, name string, ceiling uint64, f func()) Cost {
	t.Helper()
	c := Of(f)
	t.Logf("worst case %s: %s; ceiling %.1f MiB", name, c, float64(ceiling)/(1<<20))
	if c.Bytes > ceiling {
		t.Errorf("worst case %s allocated %d bytes, more than its ceiling of %d", name, c.Bytes, ceiling)
	}
	return c
}

// cpuTime is the CPU time the process has spent so far, or 0 where the
// system does not say.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// Expression is the costliest CEL expression to compile of those tried,
// of n characters, distinct for each i (a compiler that caches by text
// compiles each). It is a list of `-0 in {}`: after a unary minus, the
// parser's prediction looks far ahead for each element, and the work grows
// faster than the length. Compiling one of 4096 characters takes about
// 180 MiB.
func Expression(i, n int) string {
	const term = ",-0 in {}"
	head := fmt.Sprintf("[%d", i)
	terms := (n - len(head) - 1) / len(term)
	pad := n - len(head) - 1 - terms*len(term)
	return head + strings.Repeat(term, terms) + strings.Repeat(" ", pad) + "]"
}
