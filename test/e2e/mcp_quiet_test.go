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
	"os"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
)

var _ = Describe("The MCP gateway's output", func() {
	It("holds its own lines only: no complaint of controller-runtime about a logger never set", func() {
		ns := newNamespace("mcp-quiet")
		apply(ns, mcpToolYAML("payments", "10s"))
		apply(ns, agentRBAC("agent"))
		token := serviceAccountToken(ns, "agent")
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		gw, url := startGateway(ns, addr, "gateway")

		By("serving a first caller after controller-runtime's 30 s, when it complains of a logger never set")
		// controller-runtime complains, with a stack, the first time one of
		// its clients is made more than 30 s after the process started: here
		// the client of the caller's token.
		time.Sleep(32 * time.Second)
		a := connectAgent(url, token)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := a.session.ListTools(ctx, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(list.Tools).To(HaveLen(1))
		gw.Stop(10 * time.Second)

		out, err := os.ReadFile(gw.Log)
		Expect(err).NotTo(HaveOccurred())
		AddReportEntry("the gateway's output", string(out))
		Expect(string(out)).NotTo(ContainSubstring("SetLogger"))
		Expect(string(out)).NotTo(ContainSubstring("goroutine"))
		Expect(string(out)).To(HavePrefix("once-mcp listening on "))
	})
})
