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

// Package e2e runs Once the way its users do: a local control plane
// (hack/controlplane.sh), the manager binaries and the sandbox tool as
// processes of their own, kubectl as the only client of the API server,
// and the sandbox's ledger as the ground truth that counts effects.
//
//	make test-e2e
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

var (
	// root is the repository's root folder.
	root string
	// workDir holds the control plane's state, the ledger and every log.
	workDir string
	// logDir holds the log of every process the suite starts.
	logDir string
	cp     *harness.ControlPlane
	// sb is the running sandbox tool; scenario 8 replaces it.
	sb *harness.Sandbox
	// sandboxAddr is the sandbox's fixed address, so that a restarted
	// sandbox keeps the URL the tools point at.
	sandboxAddr string
	ledgerPath  string
	// ledger reads the sandbox's ledger and sets its faults.
	ledger *sandbox.Client
	// ca signs the certificates of the OIDC issuer and of HTTPS gateways.
	ca *testCA
	// issuer is the OIDC issuer the control plane's API server trusts.
	issuer *oidcIssuer
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	_, _ = fmt.Fprintln(GinkgoWriter, "Starting the Once end-to-end suite")
	RunSpecs(t, "e2e suite")
}

var _ = BeforeSuite(func() {
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(250 * time.Millisecond)

	var err error
	root, err = harness.Root()
	Expect(err).NotTo(HaveOccurred())
	// Not GinkgoT().TempDir(): the logs must outlive a failed run.
	workDir, err = os.MkdirTemp("", "once-e2e-")
	Expect(err).NotTo(HaveOccurred())
	logDir = filepath.Join(workDir, "logs")
	Expect(os.MkdirAll(logDir, 0o755)).To(Succeed())
	_, _ = fmt.Fprintf(GinkgoWriter, "State and logs: %s\n", workDir)

	By("starting an OIDC issuer, which the control plane's API server trusts for the MCP gateway's audience")
	ca, err = newTestCA(workDir)
	Expect(err).NotTo(HaveOccurred())
	issuer, err = startIssuer(ca, workDir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(issuer.Close)
	authnConfig, err := issuer.authenticationConfig(ca, workDir)
	Expect(err).NotTo(HaveOccurred())

	By("starting a control plane of the suite's own (never .local/controlplane)")
	cpDir := filepath.Join(workDir, "controlplane")
	cp, err = harness.StartControlPlaneWith(root, cpDir, harness.ControlPlaneOptions{AuthenticationConfig: authnConfig})
	if err != nil {
		// Stop what a failed start may have left running.
		_ = (&harness.ControlPlane{Root: root, Dir: cpDir}).Stop()
	}
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		By("stopping the control plane")
		Expect(cp.Stop()).To(Succeed())
	})
	kubectl("", "create", "namespace", "once-system")

	By("starting the sandbox tool on a fixed free port")
	sandboxAddr, err = harness.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	ledgerPath = filepath.Join(workDir, "ledger.jsonl")
	startSandbox()
	DeferCleanup(func() {
		By("stopping the sandbox tool")
		if sb != nil {
			sb.Stop(10 * time.Second)
		}
	})
})

// After a failure, or with ONCE_E2E_KEEP=1, the logs stay for a
// post-mortem; after a success the folder goes (the control plane has
// removed its state by then).
var _ = ReportAfterSuite("where the logs are", func(r Report) {
	if workDir == "" {
		return
	}
	if !r.SuiteSucceeded || os.Getenv("ONCE_E2E_KEEP") != "" {
		_, _ = fmt.Fprintf(GinkgoWriter, "Every process's log is in %s\n", logDir)
		return
	}
	_ = os.RemoveAll(workDir)
})

var sandboxStarts int

// startSandbox starts the sandbox tool on sandboxAddr with the suite's
// ledger file, each time with a log file of its own.
func startSandbox() {
	GinkgoHelper()
	sandboxStarts++
	log := logFile(fmt.Sprintf("sandbox-%d", sandboxStarts))
	var err error
	sb, err = harness.StartSandbox(root, sandboxAddr, ledgerPath, log)
	Expect(err).NotTo(HaveOccurred())
	Expect(sb.URL).To(Equal("http://" + sandboxAddr))
	ledger = &sandbox.Client{BaseURL: sb.URL}
	Eventually(func() error { _, err := ledger.Summary(context.Background()); return err }).Should(Succeed())
}
