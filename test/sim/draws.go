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
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
)

// draws are the decisions taken inside one action. Each decision is drawn
// at a site: a key that names the decision and its subject ("freeze|A|op
// team/pay-1|update status ..."). A site's n-th draw within the action
// depends on the action's Sub, the site and n alone, so that a pass that
// makes one more call, or one fewer, moves no draw of any other site, and
// a stored story keeps meaning the schedule it was found as.
//
// Stories saved before keyed draws (Options.KeyedDraws false) drew every
// decision of an action from one stream, in the order they were taken;
// stream keeps that, bit for bit, for them.
type draws struct {
	sub    uint64
	stream *rand.Rand
	seen   map[string]uint64
}

// newDraws are the draws of an action whose Sub is sub.
func newDraws(sub uint64, keyed bool) *draws {
	if !keyed {
		return &draws{stream: rand.New(rand.NewPCG(sub, 0))}
	}
	return &draws{sub: sub, seen: map[string]uint64{}}
}

// at is the source of the next draw at site.
func (d *draws) at(site string) *rand.Rand {
	if d.stream != nil {
		return d.stream
	}
	n := d.seen[site]
	d.seen[site] = n + 1
	// FNV-1a is the same on every machine and in every process (unlike
	// hash/maphash); mix spreads its nearby values over the whole seed.
	h := fnv.New64a()
	h.Write([]byte(site))
	h.Write(binary.LittleEndian.AppendUint64(nil, n))
	return rand.New(rand.NewPCG(d.sub, mix(h.Sum64())))
}

// Float64 draws a number in [0, 1) at site.
func (d *draws) Float64(site string) float64 { return d.at(site).Float64() }

// IntN draws a number in [0, n) at site.
func (d *draws) IntN(site string, n int) int { return d.at(site).IntN(n) }

// Int64N draws a number in [0, n) at site.
func (d *draws) Int64N(site string, n int64) int64 { return d.at(site).Int64N(n) }

// mix is SplitMix64's finalizer: every bit of x moves about half of the
// result's.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
