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

package shard

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
)

// Assign returns the owner of each of n shards among members: for each
// shard, the member with the highest weight (rendezvous, or
// highest-random-weight, hashing). Every member computes the same answer
// from the same set, whatever its order; when a member leaves, only its
// shards move, and when one joins, it takes only the shards it now weighs
// most for. Empty member names are ignored; with no members every owner is
// empty.
func Assign(n int, members []string) []string {
	owners := make([]string, max(n, 0))
	for i := range owners {
		var best uint64
		for _, m := range members {
			if m == "" {
				continue
			}
			// Ties, which a 64-bit weight makes unlikely, go to the
			// smaller name, so that the order of members never matters.
			if w := weight(m, i); owners[i] == "" || w > best || w == best && m < owners[i] {
				owners[i], best = m, w
			}
		}
	}
	return owners
}

// weight is a member's weight for a shard: the first 64 bits of the
// SHA-256 of both.
func weight(member string, shard int) uint64 {
	sum := sha256.Sum256([]byte(strconv.Itoa(shard) + "/" + member))
	return binary.BigEndian.Uint64(sum[:8])
}
