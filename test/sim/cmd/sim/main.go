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

// Command sim hunts for schedules that break Once's invariants: it runs
// the real reconcilers in the deterministic simulator (package sim) over
// many seeds, and tells the shortest story of each failure it finds.
//
//	go run ./test/sim/cmd/sim -seeds 1000 -steps 2000     # random seeds
//	go run ./test/sim/cmd/sim -seed 42 -steps 2000        # one seed, again
//	go run ./test/sim/cmd/sim -swarm=false                # every seed with the default rates and weights
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/once-dev/once/test/sim"
)

func main() {
	seeds := flag.Int("seeds", 100, "how many seeds to run")
	steps := flag.Int("steps", 2000, "steps per seed, before the quiet phase")
	seed := flag.Uint64("seed", 0, "run this seed alone (0: draw -seeds random ones)")
	first := flag.Uint64("first", 0, "the first of -seeds consecutive seeds (0: random)")
	again := flag.Bool("second-lifetimes", false, "let a run outlast the records' retention, and people apply a manifest again after its scope was forgotten")
	timers := flag.Bool("frozen-timers", true, "a frozen pass's timers fire only when it runs again, as a stopped process's (false: on time)")
	freezeRate := flag.Float64("freeze-rate", sim.DefaultOptions(0).FreezeRate, "the chance that a manager freezes at each call it makes (given, it holds in swarm runs too)")
	skew := flag.Duration("clock-skew", 0, "how far each manager's clock may be from true time (a tool's, sixty times as far)")
	apiFaults := flag.Float64("api-faults", sim.DefaultOptions(0).APIFaultRate, "the chance that the API server fails a manager's write: a 429, a 500, or an answer lost after the write")
	swarm := flag.Bool("swarm", true, "draw each seed's freeze and fault rates and the weights of its kinds of action from the seed")
	lies := flag.Bool("lies", false, "let a searchable tool's index fall behind its declared lookup delay, and add an operation of one attempt")
	kernel := flag.Bool("freeze-in-kernel", false, "also freeze a manager after its last check, with the request's bytes already leaving")
	keepGoing := flag.Bool("keep-going", false, "count every failing seed instead of stopping at the first")
	save := flag.String("save", "", "write each shrunk failing schedule to this folder, as seed-N.json")
	mix := flag.Bool("mix", false, "draw each seed's flags from the seed: lies, second lifetimes and the API server's faults, each in one run of two")
	workers := flag.Int("workers", 1, "hunt in this many processes side by side, each over its share of the seeds")
	shrink := flag.Bool("shrink", true, "shrink a failing schedule before telling it (false: tell the whole run, at once)")
	flag.Parse()
	freezeGiven := false
	flag.Visit(func(f *flag.Flag) { freezeGiven = freezeGiven || f.Name == "freeze-rate" })

	opts := func(s uint64) sim.Options {
		o := sim.DefaultOptions(s)
		o.Steps, o.FreezeInKernel, o.SecondLifetimes = *steps, *kernel, *again
		o.FrozenTimers, o.Lies, o.FreezeRate, o.Swarm = *timers, *lies, *freezeRate, *swarm
		o.APIFaultRate, o.ClockSkew = *apiFaults, *skew
		if *mix {
			o = mixed(o)
		}
		o = o.Swarmed()
		if freezeGiven {
			o.FreezeRate = *freezeRate
		}
		return o
	}
	list := []uint64{*seed}
	if *seed == 0 {
		list = list[:0]
		base := *first
		if base == 0 {
			base = rand.Uint64() >> 1
		}
		if *workers > 1 {
			os.Exit(hunt(*workers, base, uint64(*seeds)))
		}
		for i := range uint64(*seeds) {
			list = append(list, base+i)
		}
	}
	if len(list) > 1 {
		fmt.Printf("seeds %d to %d, %d steps each and a quiet phase\n", list[0], list[len(list)-1], *steps)
	} else {
		fmt.Println(opts(list[0]).Summary())
	}
	began := time.Now()
	total, failed := 0, 0
	for _, s := range list {
		r := sim.Run(opts(s))
		total += r.Steps
		if !r.Failed() {
			continue
		}
		failed++
		fmt.Printf("%s: fails at step %d (%d steps into the hunt): %s\n", r.Options.Summary(), r.Violations[0].Step,
			total-r.Steps+r.Violations[0].Step, r.Violations[0])
		short := r
		if *shrink {
			short = sim.Shrink(opts(s), r)
		}
		told := "the whole run"
		if *shrink {
			told = fmt.Sprintf("shrunk to %d actions", len(short.Schedule))
		}
		fmt.Printf("%s:\n%s\n", told, short.Tell())
		if *save != "" {
			if err := sim.SaveStory(filepath.Join(*save, fmt.Sprintf("seed-%d.json", s)), opts(s), short); err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
		}
		if !*keepGoing {
			break
		}
	}
	d := time.Since(began)
	fmt.Printf("%d seeds, %d steps in %s: %.0f steps/s; %d failed\n", len(list), total, d.Round(time.Millisecond),
		float64(total)/d.Seconds(), failed)
	if failed > 0 {
		os.Exit(1)
	}
}
