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

package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/once-dev/once/test/sim"
)

// mixed draws a seed's flags from the seed (lies, second lifetimes, the
// API server's faults, skewed clocks, each in one run of two), so that one
// hunt covers every combination and a seed run again with -mix is the same
// run.
func mixed(o sim.Options) sim.Options {
	r := rand.New(rand.NewPCG(o.Seed, 3))
	o.Lies = o.Lies || r.IntN(2) == 0
	o.SecondLifetimes = o.SecondLifetimes || r.IntN(2) == 0
	if r.IntN(2) == 0 && o.APIFaultRate == 0 {
		o.APIFaultRate = 0.03
	}
	if r.IntN(2) == 0 && o.ClockSkew == 0 {
		o.ClockSkew = 4 * time.Second
	}
	return o
}

// hunt runs the seeds base to base+seeds-1 in workers processes of this
// command, each over a share of consecutive seeds, and returns the exit
// code: one simulator per process, since a process's reconcilers share
// global state (their metrics, the logger). Each process's lines carry its
// number.
func hunt(workers int, base, seeds uint64) int {
	share := (seeds + uint64(workers) - 1) / uint64(workers)
	args := childArgs()
	var wg sync.WaitGroup
	var mu sync.Mutex
	code := 0
	for i := range uint64(workers) {
		first := base + i*share
		n := min(share, base+seeds-first)
		if first >= base+seeds {
			break
		}
		cmd := exec.Command(os.Args[0], append(args, "-first", fmt.Sprint(first), "-seeds", fmt.Sprint(n), "-workers", "1")...)
		cmd.Stdout = &prefixed{prefix: fmt.Sprintf("[%d] ", i), mu: &mu}
		cmd.Stderr = cmd.Stdout
		wg.Go(func() {
			if err := cmd.Run(); err != nil {
				mu.Lock()
				code = 1
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return code
}

// childArgs are this command's flags but those hunt sets for each worker.
func childArgs() []string {
	var out []string
	args := os.Args[1:]
	for i := 0; i < len(args); i++ {
		name, _, valued := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		if name == "first" || name == "seeds" || name == "workers" {
			if !valued {
				i++ // its value is the next argument
			}
			continue
		}
		out = append(out, args[i])
	}
	return out
}

// prefixed writes whole lines, each after its prefix.
type prefixed struct {
	prefix string
	mu     *sync.Mutex
	rest   []byte
}

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rest = append(p.rest, b...)
	for {
		i := bytes.IndexByte(p.rest, '\n')
		if i < 0 {
			return len(b), nil
		}
		fmt.Print(p.prefix + string(p.rest[:i+1]))
		p.rest = p.rest[i+1:]
	}
}
