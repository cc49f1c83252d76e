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
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/sandbox"
)

// sampleTool is a Tool of config/samples/tools and how the test uses it.
type sampleTool struct {
	file, name, operation string
	// realURL is replaced by the sandbox's URL and prefix.
	realURL, prefix string
	// collection is where the sandbox records its effects.
	collection string
	// params are valid parameters, as YAML.
	params string
	// state is what an operation whose first answer is lost ends in.
	state string
	// path is the path of the operation's request.
	path string
}

var sampleTools = []sampleTool{{
	file: "stripe.yaml", name: "stripe", operation: "charge.create",
	realURL: "https://api.stripe.com", prefix: "/stripe", collection: sandbox.CollectionStripeCharges,
	params: `{amount: 4200, currency: eur, source: tok_visa, metadata: {order: "1001"}}`,
	state:  "Committed", path: "/stripe/v1/charges",
}, {
	file: "github.yaml", name: "github", operation: "issue.create",
	realURL: "https://api.github.com", prefix: "/github", collection: sandbox.CollectionGitHubIssues,
	params: `{owner: acme, repo: shop, ref: order-1001, title: "Refund order 1001"}`,
	state:  "Committed", path: "/github/repos/acme/shop/issues",
}, {
	file: "pagerduty.yaml", name: "pagerduty", operation: "alert.trigger",
	realURL: "https://events.pagerduty.com", prefix: "/pagerduty", collection: sandbox.CollectionPagerDutyEvents,
	params: `{summary: "Disk full on node-7", source: node-7, severity: critical}`,
	state:  "Committed", path: "/pagerduty/v2/enqueue",
}, {
	file: "slack.yaml", name: "slack", operation: "message.post",
	realURL: "https://hooks.slack.com", prefix: "/slack", collection: sandbox.CollectionSlackMessages,
	params: `{text: "Deployed shop 1.2.3"}`,
	// The webhook's token is its credential: the evidence shows it
	// scrubbed, and the ids before it as they are.
	state: "NeedsReview", path: "/slack/services/T0ONCE0001/B0ONCE0002/[redacted]",
}}

// sampleToolYAML renders a Tool of config/samples/tools against the
// sandbox, with a lookup delay short enough for a test.
func sampleToolYAML(t sampleTool) string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "tools", t.file))
	Expect(err).NotTo(HaveOccurred())
	doc := string(data)
	Expect(doc).To(ContainSubstring("url: " + t.realURL + "\n"))
	doc = strings.Replace(doc, "url: "+t.realURL+"\n", "url: "+sb.URL+t.prefix+"\n", 1)
	doc = strings.Replace(doc, "lookupDelay: 90s", "lookupDelay: 2s", 1)
	doc = strings.Replace(doc, "timeout: 30s", "timeout: 5s", 1)
	return doc
}

// sampleOpYAML is an operation on a sample tool.
func sampleOpYAML(name string, t sampleTool, params string) string {
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: SideEffectOperation
metadata:
  name: %s
spec:
  toolRef:
    name: %s
  operation: %s
  parameters: %s
  retention: 24h
  retryPolicy:
    initialBackoff: 200ms
    maxBackoff: 2s
`, name, t.name, t.operation, params)
}

var _ = Describe("The tools for real APIs", func() {
	It("perform one effect per key when the first answer is lost, and refuse parameters that break a schema", func() {
		ns := newNamespace("tools")
		startManager(ns, manager{holder: "tools"})
		var rules []sandbox.FaultRule
		for _, t := range sampleTools {
			rules = append(rules, sandbox.FaultRule{Collection: t.collection, Method: "POST",
				Fault: sandbox.FaultDropAfterCommit, Count: 1})
		}
		faults(ns, rules...)

		By("creating the Secrets the tools name, with dummy values")
		kubectl("", "create", "secret", "generic", "stripe-api-key", "-n", ns,
			"--from-literal=authorization=Bearer sk_test_dummy")
		kubectl("", "create", "secret", "generic", "github-token", "-n", ns,
			"--from-literal=authorization=Bearer github_pat_dummy")
		kubectl("", "create", "secret", "generic", "pagerduty-routing-key", "-n", ns,
			"--from-literal=routingKey=R0123456789abcdef0123456789abcde")
		kubectl("", "create", "secret", "generic", "slack-webhook", "-n", ns,
			"--from-literal=token=XoNcEdUmMyToKeN0000000003")

		By("applying the sample tools, pointed at the sandbox")
		for _, t := range sampleTools {
			apply(ns, sampleToolYAML(t))
		}
		for _, t := range sampleTools {
			waitFor(ns, "tool/"+t.name, "Ready")
		}

		By("creating one operation per tool while the sandbox drops the first answer of each")
		for _, t := range sampleTools {
			apply(ns, sampleOpYAML(t.name+"-1", t, t.params))
		}
		want := map[string]int{}
		for _, t := range sampleTools {
			waitState(ns, t.name+"-1", t.state)
			want[toolKey(ns, "Tool:"+t.name, t.operation, t.name+"-1")] = 1
			Expect(jsonpath(ns, "seo/"+t.name+"-1", `{.status.observations[0].request}`)).
				To(MatchRegexp(`^POST ` + regexp.QuoteMeta(t.path) + ` body [0-9a-f]{12}$`))
		}
		Expect(effectsPerKey(ns)).To(Equal(want))
		waitFor(ns, "seo/slack-1", "Stalled")

		By("reading the requests as the sandbox received them")
		for _, e := range effectsFor(ns) {
			Expect(e.Request).NotTo(BeNil())
			_, _ = fmt.Fprintf(GinkgoWriter, "%s received: %s %s\n  Content-Type: %s\n  %s\n",
				e.Collection, e.Request.Method, e.Request.Path, e.Request.ContentType, e.Request.Body)
			switch e.Collection {
			case sandbox.CollectionStripeCharges:
				Expect(e.Request.ContentType).To(Equal("application/x-www-form-urlencoded"))
				Expect(e.Request.Body).To(Equal("amount=4200&currency=eur&metadata%5Border%5D=1001&source=tok_visa"))
			case sandbox.CollectionPagerDutyEvents:
				Expect(e.Request.Body).To(ContainSubstring(`"dedup_key":"` + e.Key + `"`))
				Expect(e.Request.Body).To(ContainSubstring(`"routing_key":"R0123456789abcdef0123456789abcde"`),
					"the routing key read from its Secret")
			case sandbox.CollectionSlackMessages:
				Expect(e.Request.Path).To(Equal("/slack/services/T0ONCE0001/B0ONCE0002/XoNcEdUmMyToKeN0000000003"))
			case sandbox.CollectionGitHubIssues:
				Expect(e.Request.Body).To(ContainSubstring(`"labels":["once-order-1001"]`))
			}
		}
		for _, t := range sampleTools {
			_, _ = fmt.Fprintf(GinkgoWriter, "%s recorded: %s\n", t.name,
				jsonpath(ns, "seo/"+t.name+"-1", `{.status.observations[0].request}`))
		}

		By("refusing, with no call, parameters that break an operation's schema")
		apply(ns, sampleOpYAML("stripe-bad", sampleTools[0], `{amount: "42", currency: eur, source: tok_visa}`))
		waitState(ns, "stripe-bad", "FailedFinal")
		Expect(jsonpath(ns, "seo/stripe-bad", `{.status.conditions[?(@.type=="Ready")].reason}`)).
			To(Equal("ParametersInvalid"))
		Expect(jsonpath(ns, "seo/stripe-bad", "{.status.errorMessage}")).
			To(ContainSubstring("at /amount: got string, want integer"))
		Expect(jsonpath(ns, "seo/stripe-bad", "{.status.attempts}")).To(BeElementOf("", "0"))
		Expect(jsonpath(ns, "seo/stripe-bad", "{.status.observations}")).To(BeEmpty(), "no call was made")
		Expect(effectsPerKey(ns)).To(Equal(want))
	})
})
