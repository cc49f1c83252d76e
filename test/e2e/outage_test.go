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
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// Outage figures: the API server stays down for outage (from its kill to
// its restart); the operations' answers come in during it, the first
// firstAnswer after its call and then one every answerStep, so that each
// operation starts failing its write at its own moment of the outage;
// maxLateness is the longest an operation may take to commit after the API
// server's return, outageTimeout the longest the test waits for them all.
const (
	outage        = time.Minute
	outageOps     = 14
	firstAnswer   = 8 * time.Second
	answerStep    = 3 * time.Second
	maxLateness   = 30 * time.Second
	outageTimeout = 2 * time.Minute
)

// While the API server is down, a pass that holds a tool's answer cannot
// write it: it keeps the answer and returns an error, and the controller
// retries it after a wait that grows with each failure. With waits that
// double up to 1000s, an operation that started failing early in the
// outage found its next retry up to the outage's length after the API
// server's return (a minute's outage: p50 13s, max 39s); with the cap
// (--max-error-backoff), every operation commits within seconds of the
// return. The answers are spread over the outage so that some operation
// is always at the worst point of the doubling, whatever the outage's
// exact length. The test has a control plane of its own, so that the
// others never see the outage.
var _ = Describe("Operations waiting through an API server outage", Serial, func() {
	It("commit within seconds of the API server's return", func(ctx SpecContext) {
		By("starting a control plane of this test's own, whose API server it stops")
		own, err := harness.StartControlPlane(root, filepath.Join(workDir, "outage-controlplane"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(own.Stop()).To(Succeed()) })
		k := func(stdin string, args ...string) string {
			GinkgoHelper()
			cctx, cancel := context.WithTimeout(ctx, kubectlTimeout)
			defer cancel()
			out, err := own.Kubectl(cctx, stdin, args...)
			Expect(err).NotTo(HaveOccurred())
			return out
		}
		nsSeq++
		ns := fmt.Sprintf("e2e-%02d-outage", nsSeq)
		k("", "create", "namespace", ns)
		DeferCleanup(func() {
			if CurrentSpecReport().Failed() {
				out, _ := own.Kubectl(context.Background(), "", "get", "seo", "-n", ns, "-o", "yaml")
				_, _ = fmt.Fprintf(GinkgoWriter, "Operations of %s:\n%s\nLogs: %s, %s\n", ns, out,
					filepath.Join(own.Dir, "controlplane.log"), logDir)
			}
		})

		By("making the tool answer each operation's call at its own moment of the outage")
		tool := strings.Replace(toolYAML("slow", "Native"), "timeout: 2s", "timeout: 2m", 1)
		k(tool, "apply", "-n", ns, "-f", "-")
		var rules []sandbox.FaultRule
		var ops []string
		for i := range outageOps {
			name := fmt.Sprintf("op-%02d", i)
			rules = append(rules, sandbox.FaultRule{KeyPrefix: "Tool:slow/charge.create/" + name,
				Fault: fmt.Sprintf("%s=%s", sandbox.FaultDelayBeforeCommit, firstAnswer+time.Duration(i)*answerStep)})
			ops = append(ops, opYAML(name, "slow", "", fmt.Sprintf(`{"amount": %d}`, i+1)))
		}
		faults(ns, rules...)

		By("running a manager whose claims outlast the outage, with a worker for every call")
		m, err := own.StartManager(harness.ManagerOptions{
			Binary: filepath.Join(root, "bin", "manager"), Holder: "outage",
			Args: []string{"--max-claim=3m", "--claim-grace=10s",
				fmt.Sprintf("--max-concurrent-reconciles=%d", outageOps+4),
				fmt.Sprintf("--max-workers-per-tool=%d", outageOps+4),
				fmt.Sprintf("--max-workers-per-namespace=%d", outageOps+4)},
			Log: logFile(ns + "-manager"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { m.Stop(15 * time.Second) })
		k(strings.Join(ops, "---\n"), "apply", "-n", ns, "-f", "-")
		k("", "wait", "-n", ns, "seo", "--all", "--for=jsonpath={.status.state}=Started", "--timeout=60s")

		By("killing the API server while every call is in flight")
		restart, err := own.KillAPIServer()
		Expect(err).NotTo(HaveOccurred())
		stopped := time.Now()
		Expect(effectsFor(ns)).To(BeEmpty(), "the API server was stopped after an answer had come in")
		Eventually(func() []sandbox.Effect { return effectsFor(ns) }).WithTimeout(outage).
			Should(HaveLen(outageOps), "every call is answered during the outage, and its write fails")
		time.Sleep(time.Until(stopped.Add(outage)))

		By("starting the API server again")
		apiserver, err := restart(logFile("outage-kube-apiserver"))
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { apiserver.Stop(20 * time.Second) })
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		Expect(own.WaitAPIServerReady(rctx, 100*time.Millisecond)).To(Succeed())
		back := time.Now()

		By("measuring how long after its return each operation commits")
		k("", "wait", "-n", ns, "seo", "--all", "--for=jsonpath={.status.state}=Committed",
			fmt.Sprintf("--timeout=%ds", int(outageTimeout.Seconds())))
		out := k("", "get", "seo", "-n", ns, "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.committedTime}{"\n"}{end}`)
		var late []time.Duration
		var lines []string
		for line := range strings.Lines(out) {
			f := strings.Fields(line)
			Expect(f).To(HaveLen(2), "an operation without its commit time: %q", line)
			at, err := time.Parse(time.RFC3339, f[1])
			Expect(err).NotTo(HaveOccurred())
			// The commit time is kept to the second: one within the second
			// of the return reads as up to a second before it.
			d := max(at.Sub(back.Truncate(time.Second)), 0)
			late = append(late, d)
			lines = append(lines, fmt.Sprintf("%s committed %s after the return", f[0], d))
		}
		Expect(late).To(HaveLen(outageOps))
		slices.Sort(late)
		p50, worst := late[len(late)/2], late[len(late)-1]
		summary := fmt.Sprintf("API server down %s (killed to ready); %d operations commit after its return: p50 %s, max %s",
			back.Sub(stopped).Round(100*time.Millisecond), len(late), p50, worst)
		_, _ = fmt.Fprintf(GinkgoWriter, "%s\n%s\n", summary, strings.Join(lines, "\n"))
		AddReportEntry("API server outage", summary)
		Expect(worst).To(BeNumerically("<", maxLateness),
			"an operation resumed long after the API server's return: %s", summary)
		for key, n := range effectsPerKey(ns) {
			Expect(n).To(Equal(1), "key %s", key)
		}
	}, SpecTimeout(6*time.Minute))
})
