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
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/once-dev/once/test/chaos"
)

// A smaller chaos run than `make chaos`, so that CI guards it: tool faults,
// manager kills at random moments and at the crash windows, stalled
// workers, duplicate deliveries and conflicting requests, and sagas (300/8)
// whose compensations fail midway, counted at the tool's ledger.
var _ = Describe("A chaos run of a few hundred operations", Serial, func() {
	It("makes no duplicate effect, loses no operation, and violates no invariant", func(ctx SpecContext) {
		rep, err := chaos.Run(ctx, chaos.Config{
			Operations:   300,
			ControlPlane: cp,
			Root:         root,
			Dir:          filepath.Join(workDir, "chaos"),
			StallShare:   0.2,
			Log:          GinkgoWriter,
		})
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(rep.Table())
		Expect(rep.Problems()).To(BeEmpty())
		Expect(rep.Operations).To(Equal(300))
		Expect(rep.DuplicateEffects).To(BeZero())
		Expect(rep.Sagas).To(BeNumerically(">=", 37))
		Expect(rep.SagasCompensatedEarly).To(BeZero())
		Expect(rep.LostSagas).To(BeZero())
		Expect(rep.Passed).To(BeTrue())
	}, SpecTimeout(20*time.Minute))
})
