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
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// Swarmed is o with its FreezeRate, FaultRate, Weights and, if it has
// one, its APIFaultRate drawn from its seed, when o.Swarm asks for that
// and they were not drawn yet: a story saved from a swarm run keeps what
// the run drew, and replays it even if the drawing changes.
//
// Swarm testing: one mix of faults and people for every run leaves
// schedules that need much of one thing and none of another rare. So each
// run draws its own: freezes from rare to frequent, faults from none to
// one request in two, and each kind of action up to four times rarer or
// more frequent than its base weight, some switched off now and then.
func (o Options) Swarmed() Options {
	if !o.Swarm || o.Weights != nil {
		return o
	}
	rng := rand.New(rand.NewPCG(o.Seed, 2))
	o.FreezeRate = thousandths(0.005 * math.Pow(24, rng.Float64()))
	o.FaultRate = thousandths(0.5 * rng.Float64())
	o.Weights = map[string]int{}
	for _, b := range baseWeights {
		o.Weights[b.name] = b.draw(rng)
	}
	if o.APIFaultRate > 0 {
		// Drawn last, so that the draws before it stay as they were.
		o.APIFaultRate = thousandths(0.1 * rng.Float64())
	}
	if o.Shards > 0 {
		// After it: none, one shard for all, or a few or many.
		o.Shards = []int{0, 1, 4, 16}[rng.IntN(4)]
	}
	if o.Brakes {
		// After everything else: a run without brakes draws as before.
		for _, b := range brakeWeights {
			o.Weights[b.name] = b.draw(rng)
		}
	}
	return o
}

// draw is a swarm run's weight of a kind of action: tenfold its base, so
// that a base weight of 1 made four times rarer is still drawn, and zero
// one time in eight unless it is steady.
func (b kindWeight) draw(rng *rand.Rand) int {
	n := max(1, int(math.Round(float64(10*b.weight)*math.Pow(4, 2*rng.Float64()-1))))
	if !b.steady && rng.IntN(8) == 0 {
		n = 0
	}
	return n
}

// thousandths rounds x to three decimals, as Summary prints it: the rate
// a person reads is the rate the run has.
func thousandths(x float64) float64 { return math.Round(x*1000) / 1000 }

// Summary is the seed, the fault rates and, when they were drawn, the
// weights of a run, on one line.
func (o Options) Summary() string {
	line := fmt.Sprintf("seed %d, freeze %g, fault %g", o.Seed, o.FreezeRate, o.FaultRate)
	if o.APIFaultRate > 0 {
		line += fmt.Sprintf(", API faults %g", o.APIFaultRate)
	}
	if o.Callers && o.CallerFaults && o.APIFaultRate > 0 {
		line += ", callers meet them too"
	}
	if o.Lies {
		line += ", lies"
	}
	if o.SecondLifetimes {
		line += ", second lifetimes"
	}
	if o.Shards > 0 {
		line += fmt.Sprintf(", %d shards", o.Shards)
	}
	if o.Stops {
		line += ", graceful stops"
	}
	if o.ClockSkew > 0 {
		line += fmt.Sprintf(", clocks skewed up to %s", o.ClockSkew)
	}
	if o.Brakes {
		line += ", brakes"
	}
	if o.Weights == nil {
		return line
	}
	ws := make([]string, 0, len(baseWeights)+len(brakeWeights))
	for _, b := range append(slices.Clone(baseWeights), brakeWeights...) {
		if n, ok := o.Weights[b.name]; ok {
			ws = append(ws, fmt.Sprintf("%s %d", b.name, n))
		}
	}
	return line + ", weights " + strings.Join(ws, " ")
}
