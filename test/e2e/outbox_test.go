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
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/internal/ingress"
	"github.com/once-dev/once/internal/outbox"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/chaos"
	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

// outboxOps is how many operations the outbox proof runs.
const outboxOps = 50

// sinkToolYAML declares the sandbox sink named sink as a Tool of that
// name: its operation events.deliver posts the event there. The sink
// answers an empty body, so the operation's success has none.
func sinkToolYAML(sink string) string {
	return fmt.Sprintf(`apiVersion: effects.once.dev/v1alpha1
kind: Tool
metadata:
  name: %s
spec:
  http:
    url: %s
  idempotency:
    mode: Native
  timeout: 2s
  operations:
  - name: events.deliver
    path: /sink/%s
    sink: true
    response:
      format: None
`, sink, sb.URL, sink)
}

// subscribedOpYAML is opYAML with the sink tool named sink as the
// operation's subscriber.
func subscribedOpYAML(name, tool, params, sink string) string {
	return opYAML(name, tool, "", params) + fmt.Sprintf(`  subscribers:
  - name: audit
    toolRef: {name: %s}
    operation: events.deliver
`, sink)
}

// outboxRecord is what the proof reads of one operation.
type outboxRecord struct {
	Metadata struct {
		Name string `json:"name"`
		UID  string `json:"uid"`
	} `json:"metadata"`
	Spec   v1.SideEffectOperationSpec `json:"spec"`
	Status struct {
		State            string           `json:"state"`
		CommittedTime    time.Time        `json:"committedTime"`
		ExternalObjectID string           `json:"externalObjectID"`
		Outbox           []v1.OutboxEntry `json:"outbox"`
	} `json:"status"`
}

func outboxRecords(ns string) []outboxRecord {
	GinkgoHelper()
	var list struct {
		Items []outboxRecord `json:"items"`
	}
	Expect(json.Unmarshal([]byte(kubectl("", "get", "seo", "-n", ns, "-o", "json")), &list)).To(Succeed())
	return list.Items
}

var _ = Describe("The outbox under kill -9", func() {
	It("delivers every outcome at least once, with ids stable across redeliveries, and none is lost", func() {
		ns := newNamespace("outbox-kill")
		sink := ns
		apply(ns, toolYAML("pay", "Native"))
		apply(ns, sinkToolYAML(sink))

		By("running a manager that dies right after its first delivery, before recording it")
		first := startManager(ns, manager{holder: "deliver-then-die",
			failpoints: failpoint.OutboxAfterDeliver + `=return("kill")`})
		var ops strings.Builder
		for i := range outboxOps {
			ops.WriteString("---\n" + subscribedOpYAML(fmt.Sprintf("op-%02d", i), "pay", fmt.Sprintf(`{"amount": %d}`, i+1), sink))
		}
		apply(ns, ops.String())
		expectKilled(first)
		committedAtFirstKill := countState(outboxRecords(ns), "Committed")
		atFirstKill, err := ledger.Sink(context.Background(), sink)
		Expect(err).NotTo(HaveOccurred())
		Expect(atFirstKill.Deliveries).To(BeNumerically(">=", 1), "the first manager delivered before it died")

		By("running a manager that dies between the commits and their delivery")
		second := startManager(ns, manager{holder: "commit-then-die",
			failpoints: failpoint.OutboxBeforeDeliver + `=return("kill")`})
		expectKilled(second)
		committedAtSecondKill := countState(outboxRecords(ns), "Committed")
		atSecondKill, err := ledger.Sink(context.Background(), sink)
		Expect(err).NotTo(HaveOccurred())
		Expect(atSecondKill.Deliveries).To(Equal(atFirstKill.Deliveries), "the second manager died before delivering")

		By("running a manager without failpoints to the end")
		startManager(ns, manager{holder: "successor"})
		waitFor(ns, "seo --all", "jsonpath={.status.state}=Committed")
		waitFor(ns, "seo --all", "jsonpath={.status.outbox[0].state}=Delivered")

		records := outboxRecords(ns)
		Expect(records).To(HaveLen(outboxOps))
		st, err := ledger.Sink(context.Background(), sink)
		Expect(err).NotTo(HaveOccurred())

		By("checking every outcome was delivered under the id its commit recorded, and consumed once")
		bySource := map[string][]sandbox.SinkEvent{}
		for _, e := range st.Events {
			bySource[e.Source] = append(bySource[e.Source], e)
		}
		var perEvent []int
		var delays []time.Duration
		for _, r := range records {
			Expect(r.Status.Outbox).To(HaveLen(1))
			entry := r.Status.Outbox[0]
			// Named by the operation's scope (its record's name) and
			// effect, not by the object.
			scope := protocol.OperationScope(&v1.SideEffectOperation{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: r.Metadata.Name}, Spec: r.Spec}).RecordName()
			Expect(entry.EventID).To(Equal(outbox.EventID(
				outbox.Identity{Scope: scope, Effect: r.Status.ExternalObjectID}, v1.StateCommitted, "audit")))
			Expect(entry.EventID).NotTo(ContainSubstring(r.Metadata.UID))
			seen := bySource["/apis/effects.once.dev/v1alpha1/namespaces/"+ns+"/sideeffectoperations/"+r.Metadata.Name]
			Expect(seen).To(HaveLen(1), "%s: one id across every delivery (ids stable), and one delivered (none lost)", r.Metadata.Name)
			Expect(seen[0].ID).To(Equal(entry.EventID))
			Expect(seen[0].Consumed).To(Equal(1))
			Expect(seen[0].DataDigests).To(HaveLen(1), "%s: every delivery carried the same event", r.Metadata.Name)
			perEvent = append(perEvent, seen[0].Deliveries)
			delays = append(delays, seen[0].First.Sub(r.Status.CommittedTime))
		}
		Expect(st.Consumed).To(Equal(outboxOps))
		Expect(st.Invalid).To(BeZero())
		Expect(st.Deliveries-outboxOps).To(BeNumerically(">=", 1),
			"the event the first manager delivered without recording it was delivered again")
		Expect(effectsPerKey(ns)).To(HaveLen(outboxOps), "one effect per operation")
		for key, n := range effectsPerKey(ns) {
			Expect(n).To(Equal(1), key)
		}

		slices.Sort(perEvent)
		slices.Sort(delays)
		sum := 0
		for _, n := range perEvent {
			sum += n
		}
		figures := fmt.Sprintf(`Outbox under kill -9: %d operations, 2 managers killed (after a delivery before its record; after commits before any delivery), 1 successor
  committed when the 1st manager died: %d; when the 2nd died: %d
  events delivered: %d of %d outcomes (lost: %d); ids per operation: 1 (stable)
  deliveries: %d in all; per event min %d, max %d, mean %.2f; redeliveries %d
  consumed by the sink (dedupe by id): %d
  commit to first delivery (committedTime has whole seconds): p50 %s, p95 %s, max %s
`, outboxOps, committedAtFirstKill, committedAtSecondKill, len(st.Events), outboxOps, outboxOps-len(st.Events),
			st.Deliveries, perEvent[0], perEvent[len(perEvent)-1], float64(sum)/float64(len(perEvent)),
			st.Deliveries-outboxOps, st.Consumed,
			chaos.Percentile(delays, 50).Round(time.Millisecond), chaos.Percentile(delays, 95).Round(time.Millisecond),
			delays[len(delays)-1].Round(time.Millisecond))
		_, _ = fmt.Fprint(GinkgoWriter, figures)
		_, _ = fmt.Fprintf(GinkgoWriter, "  commit to first delivery, every operation, sorted: %v\n", delays)
		AddReportEntry("outbox figures", figures)
		Expect(os.WriteFile(logFile("outbox-figures"), []byte(figures), 0o644)).To(Succeed())
	})
})

func countState(records []outboxRecord, state string) int {
	n := 0
	for _, r := range records {
		if r.Status.State == state {
			n++
		}
	}
	return n
}

var _ = Describe("The ingress of the gateway", func() {
	It("turns a message delivered twice into one operation and one effect, made as its sender", func() {
		ns := newNamespace("ingress")
		startManager(ns, manager{holder: "ingress"})
		apply(ns, toolYAML("pay", "Native"))
		apply(ns, agentRBAC("sender"))
		token := serviceAccountToken(ns, "sender")
		stranger := serviceAccountToken(ns, "stranger")
		// The sender's token for the API server alone, as its pod is given.
		forAPIServer := strings.TrimSpace(kubectl("", "create", "token", "sender", "-n", ns, "--duration=1h"))

		routes := filepath.Join(GinkgoT().TempDir(), "routes.yaml")
		Expect(os.WriteFile(routes, []byte(fmt.Sprintf(`routes:
  orders:
    namespace: %s
    toolRef: {name: pay}
    operation: charge.create
`, ns)), 0o600)).To(Succeed())
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		p, mcpURL, err := cp.StartGateway(addr, logFile(ns+"-gateway"), "--namespace", ns, "--ingress-routes", routes)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { p.Stop(10 * time.Second) })
		url := strings.TrimSuffix(mcpURL, "/mcp") + "/ingress/orders"

		send := func(token string) (int, ingress.Answer) {
			GinkgoHelper()
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"amount": 77}`))
			Expect(err).NotTo(HaveOccurred())
			for k, v := range map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "order-77", "Ce-Source": "/shop",
				"Ce-Type": "com.example.order.placed", "Content-Type": "application/json"} {
				req.Header.Set(k, v)
			}
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			var a ingress.Answer
			if resp.StatusCode != http.StatusUnauthorized {
				Expect(json.NewDecoder(resp.Body).Decode(&a)).To(Succeed())
			}
			return resp.StatusCode, a
		}
		By("refusing a sender without a token, with a token for the API server, and one whose rights do not cover the route")
		status, _ := send("")
		Expect(status).To(Equal(http.StatusUnauthorized))
		status, _ = send(forAPIServer)
		Expect(status).To(Equal(http.StatusUnauthorized))
		status, refused := send(stranger)
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(refused.Error).To(Equal(ingress.CodeForbidden))
		Expect(refused.Message).To(Equal("The sender may not create sideeffectoperations.effects.once.dev in namespace " + ns))
		Expect(kubectl("", "get", "seo", "-n", ns, "-o", "name")).To(BeEmpty())

		By("delivering the same message three times")
		status, first := send(token)
		Expect(status).To(Equal(http.StatusAccepted))
		status, again := send(token)
		Expect(status).To(BeElementOf(http.StatusAccepted, http.StatusOK))
		Expect(again.Name).To(Equal(first.Name))
		Expect(again.Duplicate).To(BeTrue())

		waitState(ns, first.Name, "Committed")
		status, third := send(token)
		Expect(status).To(Equal(http.StatusOK))
		Expect(third.State).To(Equal(v1.StateCommitted))
		Expect(third.ExternalObjectID).To(Equal(jsonpath(ns, "seo/"+first.Name, "{.status.externalObjectID}")))
		Expect(strings.Fields(kubectl("", "get", "seo", "-n", ns, "-o", "name"))).To(HaveLen(1))
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{toolKey(ns, "Tool:pay", "charge.create", first.Name): 1}))
	})

	// A signed delivery captured on the way (a proxy's log) and posted
	// again within the signature's tolerance, with every header the
	// signature does not cover changed: one operation and one effect.
	It("turns a signed delivery posted again with other unsigned headers into one effect", func() {
		ns := newNamespace("ingress-signed")
		startManager(ns, manager{holder: "ingress-signed"})
		apply(ns, toolYAML("pay", "Native"))
		apply(ns, agentRBAC("sender"))
		token := serviceAccountToken(ns, "sender")

		dir := GinkgoT().TempDir()
		key := []byte("route-signing-key-0123456789abcdef")
		secret := filepath.Join(dir, "orders-secret")
		Expect(os.WriteFile(secret, key, 0o600)).To(Succeed())
		routes := filepath.Join(dir, "routes.yaml")
		Expect(os.WriteFile(routes, []byte(fmt.Sprintf(`routes:
  orders:
    namespace: %s
    toolRef: {name: pay}
    operation: charge.create
    signing: {secretFile: %s}
`, ns, secret)), 0o600)).To(Succeed())
		addr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		p, mcpURL, err := cp.StartGateway(addr, logFile(ns+"-gateway"), "--namespace", ns, "--ingress-routes", routes)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { p.Stop(10 * time.Second) })
		url := strings.TrimSuffix(mcpURL, "/mcp") + "/ingress/orders"

		body := `{"amount": 78}`
		signed := ingress.Sign(key, "order-78", time.Now(), []byte(body))
		send := func(extra map[string]string) ingress.Answer {
			GinkgoHelper()
			req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			maps.Copy(req.Header, signed)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer "+token)
			for k, v := range extra {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			defer func() { _ = resp.Body.Close() }()
			var a ingress.Answer
			Expect(json.NewDecoder(resp.Body).Decode(&a)).To(Succeed())
			Expect(resp.StatusCode).To(BeElementOf(http.StatusAccepted, http.StatusOK), "%+v", a)
			return a
		}
		event := func(source string) map[string]string {
			return map[string]string{"Ce-Specversion": "1.0", "Ce-Id": "order-78", "Ce-Source": source,
				"Ce-Type": "com.example.order.placed"}
		}
		first := send(event("/shop"))
		names := map[string]bool{first.Name: true}
		for _, extra := range []map[string]string{event("/a"), event("/b"), event("/c"), nil,
			{"Idempotency-Key": "another"}} {
			names[send(extra).Name] = true
		}
		Expect(names).To(HaveLen(1))
		waitState(ns, first.Name, "Committed")
		send(event("/d"))
		Expect(strings.Fields(kubectl("", "get", "seo", "-n", ns, "-o", "name"))).To(HaveLen(1))
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{toolKey(ns, "Tool:pay", "charge.create", first.Name): 1}))
	})
})
