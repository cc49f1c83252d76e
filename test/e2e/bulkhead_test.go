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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/sandbox"
)

// Figures of the bulkhead test: each phase commits ratedOps operations of
// a tool that answers; hangingOps operations of a tool whose token endpoint
// never answers are outstanding in the second, more than the manager's 10
// workers; minRatio is the least share of the first phase's rate the second
// keeps.
const (
	ratedOps   = 60
	hangingOps = 12
	minRatio   = 0.8
)

// silentEndpoint is a token endpoint whose server hangs (sandbox.Silent):
// an authorization server that is stuck, or a proxy or load balancer that
// holds the connection open without an upstream. It returns the token URL.
func silentEndpoint() string {
	GinkgoHelper()
	s, err := sandbox.NewSilent()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(s.Close)
	return s.URL("/token")
}

// batchYAML is n charge.create operations on tool, labelled batch=batch;
// extra is appended to each spec.
func batchYAML(batch, tool string, n int, extra string) string {
	var docs []string
	for i := range n {
		name := fmt.Sprintf("%s-%02d", batch, i)
		doc := strings.Replace(opYAML(name, tool, "", fmt.Sprintf(`{"amount": %d}`, i+1)),
			"  name: "+name+"\n", "  name: "+name+"\n  labels:\n    batch: "+batch+"\n", 1)
		docs = append(docs, doc+extra)
	}
	return strings.Join(docs, "---\n")
}

// commitRate applies a batch of the answering tool's operations and
// returns how many commit per second, from the apply to the last commit.
func commitRate(ns, batch string) float64 {
	GinkgoHelper()
	start := time.Now()
	apply(ns, batchYAML(batch, "payments", ratedOps, ""))
	waitFor(ns, "seo -l batch="+batch, "jsonpath={.status.state}=Committed")
	return ratedOps / time.Since(start).Seconds()
}

var _ = Describe("A tool whose token endpoint never answers", func() {
	It("leaves the other tools' operations committing at 80% of their rate without it", func() {
		ns := newNamespace("bulkhead")
		startManager(ns, manager{holder: "alpha"})
		apply(ns, toolYAML("payments", "Native"))
		apply(ns, `apiVersion: v1
kind: Secret
metadata:
  name: oauth
stringData:
  clientID: once
  clientSecret: s3cr3t-client
---
`+strings.Replace(strings.Replace(toolYAML("hanging", "Native"), "timeout: 2s", "timeout: 5s", 1),
			"  http:\n", fmt.Sprintf("  http:\n    auth:\n      oauth2:\n        tokenURL: %s\n        secretName: oauth\n",
				silentEndpoint()), 1))

		By("measuring the rate without the hanging tool")
		commitRate(ns, "warmup")
		without := commitRate(ns, "without")

		By("measuring it again with the hanging tool's operations outstanding")
		apply(ns, batchYAML("stuck", "hanging", hangingOps, "  retryPolicy:\n    maxAttempts: 100\n"))
		// Long enough for every worker of a manager without deadlines to
		// have taken one of them.
		time.Sleep(3 * time.Second)
		with := commitRate(ns, "with")
		AddReportEntry("commit rates (operations/s)", fmt.Sprintf("without the hanging tool %.2f, with it %.2f, ratio %.2f",
			without, with, with/without))
		_, _ = fmt.Fprintf(GinkgoWriter, "commit rate without the hanging tool: %.2f/s; with it: %.2f/s; ratio %.2f\n",
			without, with, with/without)
		Expect(with/without).To(BeNumerically(">=", minRatio),
			"with the hanging tool %.2f/s, without it %.2f/s", with, without)

		By("ending each of the hanging tool's calls at its 5s timeout as one that never left: retryable, never final")
		row := `{range .items[*]}{.metadata.name}{"\t"}{.status.state}{"\t"}{.status.errorMessage}{"\n"}{end}`
		Eventually(func(g Gomega) {
			out, err := runKubectl("", "get", "-n", ns, "seo", "-l", "batch=stuck", "-o", "jsonpath="+row)
			g.Expect(err).NotTo(HaveOccurred())
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			g.Expect(lines).To(HaveLen(hangingOps))
			started := 0
			for _, line := range lines {
				f := strings.SplitN(line, "\t", 3)
				g.Expect(f).To(HaveLen(3), line)
				Expect(f[1]).To(BeElementOf("", "Planned", "Started", "FailedRetryable"),
					"%s: a call that never left is retryable, never final nor unknown", line)
				g.Expect(f[1]).NotTo(BeElementOf("", "Planned"), "%s: not yet attempted", line)
				if f[1] == "Started" {
					// In its call again, after its backoff.
					started++
					continue
				}
				Expect(f[2]).To(And(ContainSubstring("request never left"), ContainSubstring("auth.oauth2: getting a token"),
					ContainSubstring("deadline exceeded"), Not(ContainSubstring("s3cr3t-client"))), line)
			}
			Expect(started).To(BeNumerically("<=", 2), "a quarter of the 10 workers at most in the hanging tool's calls")
		}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())

		By("deleting the hanging tool's operations, which would retry for good, while the manager runs to release them")
		kubectl("", "delete", "seo", "-n", ns, "-l", "batch=stuck", "--timeout=120s")
		Expect(jsonpath(ns, "seo", `{range .items[?(@.metadata.labels.batch=="stuck")]}{.metadata.name}{end}`)).
			To(BeEmpty(), "the later specs count on every other namespace's operations at rest")
	})
})
