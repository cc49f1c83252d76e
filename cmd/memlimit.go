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
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// A manager that starts lists every operation the cluster retains, and
// decoding them leaves many times what its cache keeps as garbage. Go's
// collector lets the heap grow to twice what survived its last collection
// before it collects again; it does not know the container's memory limit,
// so a start can pass the limit and be killed although what it keeps fits
// well (docs/performance.md, "Sizing"). Unless GOMEMLIMIT says otherwise,
// the manager tells the collector the limit: nine tenths of the memory
// limit of its cgroup, the rest for what the runtime does not count.

// cgroupMemoryFiles are where a container sees its memory limit: cgroup v2,
// then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare is the part of the cgroup's limit given to the Go
// runtime.
const memoryLimitShare = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit from the cgroup's,
// unless GOMEMLIMIT is set or no limit is found, and returns what it set
// (0: nothing).
func setMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range cgroupMemoryFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if limit := runtimeLimit(string(b)); limit > 0 {
			debug.SetMemoryLimit(limit)
			return limit
		}
		return 0
	}
	return 0
}

// runtimeLimit is the runtime's limit for a cgroup memory limit as its file
// says it: "max" (v2) or a number of bytes near the largest int64 (v1's
// "unlimited") is none (0).
func runtimeLimit(s string) int64 {
	s = strings.TrimSpace(s)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= 1<<62 {
		return 0
	}
	return int64(float64(n) * memoryLimitShare)
}
