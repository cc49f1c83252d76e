//go:build e2e

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

package e2e

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/internal/failpoint"
)

// A process stopped with SIGSTOP (a stalled node, a debugger, a frozen VM)
// keeps its timers: when it is continued, the timer that ends its call at
// the claim's expiry and the goroutine that writes the request race. The
// claim's fence is asked at the last moment before the write instead, and
// compares the clock: whoever runs first, a request whose claim expired
// stays unsent.
var _ = Describe("A manager stopped with SIGSTOP just before its request is written", func() {
	It("sends nothing when continued after a successor proved the attempt absent and made it", func() {
		ns := newNamespace("sigstop")
		expectOthersAtRest(ns)
		apply(ns, toolYAML("tool", "Lookup"))

		By("running a manager that stops itself with the request's connection open")
		frozen := startManager(ns, manager{holder: "frozen", failpoints: failpoint.BeforeWrite + `=1*return("stop")`})
		apply(ns, opYAML("op", "tool", "", `{"amount": 5}`))
		Eventually(func() string { return processState(frozen.Pid()) }, 2*time.Minute, 100*time.Millisecond).
			Should(Equal("T"), "the manager stops itself; log: %s", frozen.Log)
		Expect(jsonpath(ns, "seo/op", "{.status.claim.holder}")).To(Equal("frozen"))
		Expect(effectsFor(ns)).To(BeEmpty())

		By("letting a successor take the expired claim over, prove the attempt absent and make it again")
		startManager(ns, manager{holder: "successor"})
		waitState(ns, "op", "Committed")
		Expect(jsonpath(ns, "seo/op", "{.status.observations[*].kind}")).To(ContainSubstring("ClaimExpired"))
		Expect(effectsFor(ns)).To(HaveLen(1))

		By("continuing the stopped manager: its fence stops the request it was about to write")
		Expect(syscall.Kill(frozen.Pid(), syscall.SIGCONT)).To(Succeed())
		stale := func() string {
			return jsonpath(ns, "seo/op", `{range .status.observations[?(@.holder=="frozen")]}{.kind}: {.message}{"\n"}{end}`)
		}
		Eventually(stale, time.Minute, 250*time.Millisecond).Should(ContainSubstring("StaleCall: "),
			"the stopped manager goes on, and its late answer is kept as evidence")
		Expect(effectsFor(ns)).To(HaveLen(1), "the request of the expired claim must not reach the tool")
		Expect(stale()).To(ContainSubstring("StaleCall: request never left"))
		Expect(jsonpath(ns, "seo/op", "{.status.state}")).To(Equal("Committed"))
	})
})

// processState is the state letter /proc gives a process: T when stopped.
func processState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces, so read after its ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}
