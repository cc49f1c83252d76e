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
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/once-dev/once/test/harness"
	"github.com/once-dev/once/test/sandbox"
)

var _ = Describe("The install", func() {
	It("passes a server-side dry run: config/default, the namespaced overlay and the release manifests", func() {
		// The suite has created the namespace once-system: a dry run
		// creates nothing, so the namespaced objects of a first install
		// would otherwise be refused for a namespace that does not exist.
		By("dry-running config/default")
		out := serverDryRun(kubectl("", "kustomize", filepath.Join(root, "config", "default")))
		Expect(out).To(ContainElements(
			"namespace/once-system configured (server dry run)",
			"deployment.apps/once-controller-manager created (server dry run)",
			"poddisruptionbudget.policy/once-controller-manager created (server dry run)",
			"service/once-controller-manager-metrics-service created (server dry run)",
			"clusterrole.rbac.authorization.k8s.io/once-manager-role created (server dry run)",
			"role.rbac.authorization.k8s.io/once-leader-election-role created (server dry run)",
			"validatingadmissionpolicy.admissionregistration.k8s.io/once-idempotencyrecord-writers created (server dry run)",
			"validatingadmissionpolicy.admissionregistration.k8s.io/once-status-writers created (server dry run)",
			"mutatingadmissionpolicy.admissionregistration.k8s.io/once-operation-finalizer created (server dry run)",
		))

		By("dry-running the namespaced install: the cluster admin's part, then the team's")
		serverDryRun(kubectl("", "kustomize", filepath.Join(root, "config", "namespaced", "cluster")))
		teamA, teamB := newNamespace("team-a"), newNamespace("team-b")
		out = serverDryRun(teams(kubectl("", "kustomize", filepath.Join(root, "config", "namespaced")), teamA, teamB))
		Expect(out).To(ContainElements(
			"deployment.apps/once-controller-manager created (server dry run)",
			"role.rbac.authorization.k8s.io/once-manager-role created (server dry run)",
			"rolebinding.rbac.authorization.k8s.io/once-manager-rolebinding created (server dry run)",
		))
		Expect(out).NotTo(ContainElement(ContainSubstring("clusterrole")))

		By("writing the release manifests with make release and dry-running them")
		dist := GinkgoT().TempDir()
		img := "registry.example.com/once-manager:v0.0.0-e2e"
		cmd := exec.Command("make", "release", "IMG="+img, "DIST="+dist)
		cmd.Dir = root
		made, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(made))
		for _, name := range []string{"install.yaml", "install-namespaced-cluster.yaml", "install-namespaced.yaml"} {
			b, err := os.ReadFile(filepath.Join(dist, name))
			Expect(err).NotTo(HaveOccurred())
			manifest := string(b)
			if name == "install-namespaced.yaml" {
				manifest = teams(manifest, teamA, teamB)
			}
			if name != "install-namespaced-cluster.yaml" {
				Expect(manifest).To(ContainSubstring("image: " + img + "\n"))
				Expect(manifest).NotTo(ContainSubstring("controller:latest"))
			}
			serverDryRun(manifest)
		}
	})

	It("gives a namespaced manager, in each namespace, the cluster-wide rules but the cluster-scoped ones", func() {
		cluster := ruleSet(readRules(filepath.Join(root, "config", "rbac", "role.yaml")))
		tenant := ruleSet(readRules(filepath.Join(root, "config", "namespaced", "tenant", "role.yaml")))
		for rule := range cluster {
			// Namespaces and ClusterTools are cluster-scoped: a
			// namespaced manager neither watches nor reads them.
			if strings.Contains(rule, " namespaces ") || strings.Contains(rule, " clustertools") {
				delete(cluster, rule)
			}
		}
		Expect(slices.Sorted(maps.Keys(tenant))).To(Equal(slices.Sorted(maps.Keys(cluster))),
			"config/namespaced/tenant/role.yaml must follow config/rbac/role.yaml (make manifests)")
	})

	It("lets view read, edit write operations and sagas, admin write Tools, and no one write status or records", func() {
		ns := newNamespace("roles")
		kubectl("", "apply", "-k", filepath.Join(root, "config", "rbac", "users"))

		By("binding each user to what its built-in role aggregates")
		// The local control plane runs no kube-controller-manager, so no
		// aggregation controller fills the built-in view, edit and admin
		// roles (their rules stay empty here). The test does its work:
		// it binds every ClusterRole that carries the aggregation labels
		// the built-in role selects (edit takes view's, admin takes both).
		Expect(kubectl("", "get", "clusterrole", "edit", "-o", "jsonpath={.rules}")).To(BeElementOf("", "null"),
			"the built-in edit role has rules: an aggregation controller runs, and this test could bind edit itself")
		levels := map[string][]string{"view": {"view"}, "edit": {"view", "edit"}, "admin": {"view", "edit", "admin"}}
		aggregated := map[string][]string{}
		for _, level := range []string{"view", "edit", "admin"} {
			aggregated[level] = strings.Fields(kubectl("", "get", "clusterroles", "-o", "name",
				"-l", "rbac.authorization.k8s.io/aggregate-to-"+level+"=true"))
		}
		Expect(aggregated["view"]).To(ContainElements(
			"clusterrole.rbac.authorization.k8s.io/sideeffectoperation-viewer-role",
			"clusterrole.rbac.authorization.k8s.io/saga-viewer-role",
			"clusterrole.rbac.authorization.k8s.io/tool-viewer-role",
			"clusterrole.rbac.authorization.k8s.io/idempotencyrecord-viewer-role",
			"clusterrole.rbac.authorization.k8s.io/clustertool-viewer-role"))
		Expect(aggregated["edit"]).To(ContainElements(
			"clusterrole.rbac.authorization.k8s.io/sideeffectoperation-editor-role",
			"clusterrole.rbac.authorization.k8s.io/saga-editor-role"))
		Expect(aggregated["admin"]).To(ContainElement("clusterrole.rbac.authorization.k8s.io/tool-admin-role"))
		for _, role := range slices.Concat(aggregated["view"], aggregated["edit"], aggregated["admin"]) {
			Expect(role).NotTo(HaveSuffix("/clustertool-admin-role"), "ClusterTools are for cluster admins")
		}
		for user, lv := range levels {
			i := 0
			for _, level := range lv {
				for _, role := range aggregated[level] {
					i++
					kubectl("", "create", "rolebinding", fmt.Sprintf("e2e-%s-%d", user, i), "-n", ns,
						"--clusterrole="+strings.TrimPrefix(role, "clusterrole.rbac.authorization.k8s.io/"),
						"--user=e2e-"+user)
				}
			}
		}

		By("asking the API server what each may do (kubectl auth can-i --as)")
		type ask struct{ verb, resource string }
		reads := []ask{{"get", "sideeffectoperations"}, {"list", "sideeffectoperations"}, {"watch", "sideeffectoperations"},
			{"get", "sagas"}, {"list", "tools"}, {"list", "idempotencyrecords"}}
		opWrites := []ask{{"create", "sideeffectoperations"}, {"update", "sideeffectoperations"},
			{"patch", "sideeffectoperations"}, {"delete", "sideeffectoperations"},
			{"create", "sagas"}, {"patch", "sagas"}, {"delete", "sagas"}}
		toolWrites := []ask{{"create", "tools"}, {"update", "tools"}, {"delete", "tools"}}
		never := []ask{{"create", "idempotencyrecords"}, {"update", "idempotencyrecords"},
			{"delete", "idempotencyrecords"}, {"update", "sideeffectoperations/status"},
			{"patch", "sideeffectoperations/status"}, {"update", "sagas/status"}, {"update", "tools/status"},
			// cluster-scoped: a namespaced binding grants nothing on them
			{"list", "clustertools"}, {"create", "clustertools"}}
		want := map[string]map[ask]bool{}
		for _, user := range []string{"view", "edit", "admin"} {
			want[user] = map[ask]bool{}
			for _, a := range reads {
				want[user][a] = true
			}
			for _, a := range opWrites {
				want[user][a] = user != "view"
			}
			for _, a := range toolWrites {
				want[user][a] = user == "admin"
			}
			for _, a := range never {
				want[user][a] = false
			}
		}
		got := map[string]map[ask]bool{}
		for user, asks := range want {
			got[user] = map[ask]bool{}
			for a := range asks {
				got[user][a] = canI("e2e-"+user, ns, a.verb, a.resource)
			}
		}
		Expect(got).To(Equal(want))

		By("creating a Tool as admin and an operation as edit, and reading its status as edit and view")
		startManager(ns, manager{holder: "roles"})
		as := func(user string, stdin string, args ...string) (string, error) {
			return runKubectl(stdin, append(args, "-n", ns, "--as=e2e-"+user)...)
		}
		_, err := as("admin", "", "get", "clustertools")
		Expect(err).To(MatchError(ContainSubstring("forbidden")), "a RoleBinding granted a cluster-scoped read")
		_, err = as("edit", toolYAML("payments", "Native"), "apply", "-f", "-")
		Expect(err).To(MatchError(ContainSubstring("forbidden")))
		_, err = as("admin", toolYAML("payments", "Native"), "apply", "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		_, err = as("view", opYAML("charge", "payments", "", `{"amount": 1}`), "create", "-f", "-")
		Expect(err).To(MatchError(ContainSubstring("forbidden")))
		_, err = as("edit", opYAML("charge", "payments", "", `{"amount": 1}`), "create", "-f", "-")
		Expect(err).NotTo(HaveOccurred())
		waitState(ns, "charge", "Committed")
		for _, user := range []string{"edit", "view"} {
			state, err := as(user, "", "get", "seo", "charge", "-o", "jsonpath={.status.state}")
			Expect(err).NotTo(HaveOccurred())
			Expect(state).To(Equal("Committed"))
		}

		By("refusing edit and admin a write of status or of a scope record")
		for _, user := range []string{"edit", "admin"} {
			_, err = as(user, "", "patch", "seo", "charge", "--subresource=status", "--type=merge",
				"-p", `{"status":{"state":"FailedFinal"}}`)
			Expect(err).To(MatchError(ContainSubstring("forbidden")))
			_, err = as(user, `{"apiVersion":"effects.once.dev/v1alpha1","kind":"IdempotencyRecord",`+
				`"metadata":{"name":"forged"},"spec":{}}`, "create", "-f", "-")
			Expect(err).To(MatchError(ContainSubstring("forbidden")))
		}
		Expect(jsonpath(ns, "seo/charge", "{.status.state}")).To(Equal("Committed"))
		Expect(effectsFor(ns)).To(HaveLen(1))
	})

	It("runs a manager that watches one namespace as the ServiceAccount of config/namespaced", func() {
		watched, unwatched, other := newNamespace("watched"), newNamespace("unwatched"), newNamespace("other")
		DeferCleanup(discard, watched, unwatched)

		By("applying the namespaced overlay's ServiceAccount and Roles, for the watched namespace and another")
		// No kubelet runs here to start the Deployment: the manager runs
		// as a process, with the ServiceAccount's token and rights.
		rendered := teams(kubectl("", "kustomize", filepath.Join(root, "config", "namespaced")), watched, other)
		identity := selectKinds(rendered, "ServiceAccount", "Role", "RoleBinding")
		kubectl(identity, "apply", "-f", "-")
		DeferCleanup(func() { _, _ = runKubectl(identity, "delete", "--ignore-not-found", "-f", "-") })
		kubeconfig := serviceAccountKubeconfig("once-system", "once-controller-manager")

		By("starting the manager with --watch-namespaces, leader election as in the Deployment, and only those rights")
		p, err := cp.StartManager(harness.ManagerOptions{
			Binary: filepath.Join(root, "bin", "manager"),
			Holder: "namespaced",
			Args: []string{"--kubeconfig=" + kubeconfig, "--watch-namespaces=" + watched,
				"--leader-elect", "--leader-election-namespace=once-system", "--max-claim=2s", "--claim-grace=1s"},
			Log: logFile(watched + "-namespaced"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { p.Stop(15 * time.Second) })

		for _, ns := range []string{watched, unwatched} {
			apply(ns, toolYAML("payments", "Native"))
			apply(ns, opYAML("charge", "payments", "", `{"amount": 1}`))
		}
		apply(watched, `apiVersion: effects.once.dev/v1alpha1
kind: SideEffectOperation
metadata:
  name: shared
spec:
  toolRef:
    kind: ClusterTool
    name: tickets
  operation: ticket.create
`)
		By("committing the operation of the watched namespace, as the leader")
		waitState(watched, "charge", "Committed")
		Expect(effectsFor(watched)).To(HaveLen(1))
		Expect(kubectl("", "get", "lease", "-n", "once-system", "once-manager.once.dev",
			"-o", "jsonpath={.spec.holderIdentity}")).NotTo(BeEmpty())
		Expect(once("version", "--manager-namespace", "once-system")).To(MatchRegexp(`(?m)^  once-system\s+namespaced\s+`),
			"the manager publishes its version with the rights of its Role in its namespace")

		By("running a saga, whose steps are operations it owns, where the API server enforces owner-reference permissions")
		apply(watched, deskYAML("Native"))
		apply(watched, sagaYAML("change", false))
		waitSaga(watched, "change", "Committed")
		Expect(sagaOperations(watched, "change")).To(Equal([]string{"change.config", "change.notify", "change.ticket"}))

		By("leaving a ClusterTool's operation waiting, with a reason that says why")
		waitFor(watched, "seo/shared", "jsonpath={.status.conditions[?(@.type==\"Ready\")].reason}=ToolNotFound")
		Expect(jsonpath(watched, "seo/shared", `{.status.conditions[?(@.type=="Ready")].message}`)).To(
			Equal("ClusterTool tickets is not served by a manager that watches only namespaces " + watched +
				" (--watch-namespaces)"))

		By("ignoring the operation of the other namespace")
		Consistently(func() string { return jsonpath(unwatched, "seo/charge", "{.status}") }).
			WithTimeout(5 * time.Second).Should(BeEmpty())
		Expect(effectsFor(unwatched)).To(BeEmpty())
		Expect(p.Exited()).To(BeFalse())
		log, err := os.ReadFile(p.Log)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(log)).NotTo(ContainSubstring("forbidden"), "the manager met a refusal; log: %s", p.Log)

		By("keeping a manager unready while its informers cannot sync: it has no rights where it watches")
		probeAddr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		q, err := cp.StartManager(harness.ManagerOptions{
			Binary: filepath.Join(root, "bin", "manager"),
			Holder: "unready",
			Args: []string{"--kubeconfig=" + kubeconfig, "--watch-namespaces=" + unwatched,
				"--health-probe-bind-address=" + probeAddr},
			Log: logFile(unwatched + "-unready"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { q.Stop(15 * time.Second) })
		Eventually(func() (string, error) { return httpGet("http://" + probeAddr + "/healthz") }).Should(Equal("ok"))
		Consistently(func() string {
			body, _ := httpGet("http://" + probeAddr + "/readyz?verbose")
			return body
		}).WithTimeout(5 * time.Second).Should(ContainSubstring("[-]informers failed"))
		Expect(jsonpath(unwatched, "seo/charge", "{.status}")).To(BeEmpty())
	})

	It("serves every metric the Grafana dashboard and the alert rules name, and is ready once its caches synced", func() {
		ns := newNamespace("metrics")
		DeferCleanup(discard, ns) // a retrying operation would commit under the next test's manager
		metricsAddr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		probeAddr, err := harness.FreeAddr()
		Expect(err).NotTo(HaveOccurred())
		p, err := cp.StartManager(harness.ManagerOptions{
			Binary: filepath.Join(root, "bin", "manager"), Holder: "metrics", MetricsAddr: metricsAddr,
			Args: []string{"--max-claim=2s", "--claim-grace=1s", "--health-probe-bind-address=" + probeAddr},
			Log:  logFile(ns + "-metrics"),
		})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { p.Stop(15 * time.Second) })

		By("checking that readiness is the check of the informers")
		Eventually(func() (string, error) { return httpGet("http://" + probeAddr + "/readyz?verbose") }).
			Should(ContainSubstring("[+]informers ok"))

		By("driving operations through every path a metric counts")
		faults(ns,
			// an answer lost after the effect: reconciled, then committed
			sandbox.FaultRule{Method: "POST", KeyPrefix: "Tool:native/charge.create/recovered", Fault: sandbox.FaultDropAfterCommit, Count: 1},
			// a tool that neither dedupes nor answers questions: NeedsReview
			sandbox.FaultRule{Method: "POST", KeyPrefix: "Tool:mailer/", Fault: sandbox.FaultDropAfterCommit, Count: 1},
			// a tool that keeps failing: retries, then a spent budget
			sandbox.FaultRule{Method: "POST", KeyPrefix: "Tool:flaky/", Fault: sandbox.Fault503 + "=1"},
		)
		apply(ns, toolYAML("native", "Native"))
		apply(ns, toolYAML("mailer", "None"))
		apply(ns, strings.Replace(toolYAML("flaky", "Native"), "spec:\n", "spec:\n  retryBudget:\n    retriesPerMinute: 1\n", 1))
		apply(ns, opYAML("recovered", "native", "", `{"amount": 1}`))
		apply(ns, opYAML("first", "native", "shared", `{"amount": 1}`))
		apply(ns, opYAML("review", "mailer", "", `{"to": "a@example.com"}`))
		for i := range 3 {
			apply(ns, opYAML(fmt.Sprintf("flaky-%d", i), "flaky", "", `{"amount": 1}`))
		}
		waitState(ns, "first", "Committed")
		apply(ns, opYAML("second", "native", "shared", `{"amount": 2}`))
		waitState(ns, "recovered", "Committed")
		waitState(ns, "review", "NeedsReview")
		waitState(ns, "second", "FailedFinal")

		By("reading the names the dashboard's and the alerts' expressions use")
		var exprs []string
		dashboard, err := os.ReadFile(filepath.Join(root, "config", "grafana", "once-dashboard.json"))
		Expect(err).NotTo(HaveOccurred())
		var doc any
		Expect(json.Unmarshal(dashboard, &doc)).To(Succeed())
		exprs = append(exprs, collectExprs(doc)...)
		alerts, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "alerts.yaml"))
		Expect(err).NotTo(HaveOccurred())
		Expect(yaml.Unmarshal(alerts, &doc)).To(Succeed())
		alertExprs := collectExprs(doc)
		Expect(alertExprs).To(HaveLen(6))
		exprs = append(exprs, alertExprs...)
		names := map[string]bool{}
		for _, e := range exprs {
			for _, n := range promqlMetricNames(e) {
				names[n] = true
			}
		}
		Expect(names).To(HaveKey("once_operations_needs_review"))
		_, _ = fmt.Fprintf(GinkgoWriter, "Metrics named by the dashboard and the alerts: %s\n", strings.Join(slices.Sorted(maps.Keys(names)), " "))

		By("scraping the manager until it serves every one of them")
		Eventually(func() ([]string, error) {
			families, err := scrapeFamilies("http://" + metricsAddr + "/metrics")
			if err != nil {
				return nil, err
			}
			var missing []string
			for n := range names {
				if !served(families, n) {
					missing = append(missing, n)
				}
			}
			slices.Sort(missing)
			return missing, nil
		}).WithTimeout(90 * time.Second).Should(BeEmpty())
		Expect(effectsPerKey(ns)[toolKey(ns, "Tool:native", "charge.create", "recovered")]).To(Equal(1))
	})

	It("stamps the version into the manager", func() {
		out, err := exec.Command(filepath.Join(root, "bin", "manager"), "--version").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(string(out))).NotTo(Or(BeEmpty(), Equal("devel")),
			"bin/manager was built without the version: build it with make build")
		plugin, err := exec.Command(filepath.Join(root, "bin", "kubectl-once"), "version", "--client").Output()
		Expect(err).NotTo(HaveOccurred())
		Expect(string(plugin)).To(Equal("Plugin version: "+string(out)), "make build stamps the plugin as the manager")
	})
})

// serverDryRun applies manifests with a server-side dry run, expects every
// object to pass, and returns kubectl's lines.
func serverDryRun(manifests string) []string {
	GinkgoHelper()
	out := kubectl(manifests, "apply", "--dry-run=server", "-f", "-")
	_, _ = fmt.Fprint(GinkgoWriter, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	Expect(lines).NotTo(BeEmpty())
	for _, l := range lines {
		Expect(l).To(HaveSuffix(" (server dry run)"))
	}
	return lines
}

// teams points the namespaced overlay's example namespaces at the test's.
func teams(manifests, a, b string) string {
	return strings.ReplaceAll(strings.ReplaceAll(manifests, "team-a", a), "team-b", b)
}

// selectKinds keeps the documents of a multi-document YAML whose kind is
// one of kinds.
func selectKinds(manifests string, kinds ...string) string {
	GinkgoHelper()
	var kept []string
	for doc := range strings.SplitSeq(manifests, "\n---\n") {
		var meta struct {
			Kind string `json:"kind"`
		}
		Expect(yaml.Unmarshal([]byte(doc), &meta)).To(Succeed())
		if slices.Contains(kinds, meta.Kind) {
			kept = append(kept, doc)
		}
	}
	Expect(kept).NotTo(BeEmpty())
	return strings.Join(kept, "\n---\n")
}

// serviceAccountKubeconfig writes a kubeconfig for the control plane that
// authenticates as a ServiceAccount, with a token from the TokenRequest API.
func serviceAccountKubeconfig(ns, name string) string {
	GinkgoHelper()
	token := strings.TrimSpace(kubectl("", "create", "token", name, "-n", ns, "--duration=1h"))
	server := kubectl("", "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server}")
	ca := kubectl("", "config", "view", "--raw", "--minify",
		"-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	Expect(server).NotTo(BeEmpty())
	Expect(ca).NotTo(BeEmpty())
	path := filepath.Join(GinkgoT().TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: %s}
current-context: local
`, server, ca, name, token, name)
	Expect(os.WriteFile(path, []byte(cfg), 0o600)).To(Succeed())
	return path
}

// canI asks the API server whether user may verb resource ("sagas",
// "sideeffectoperations/status") in ns, or for ClusterTools, which are
// cluster-scoped, at all.
func canI(user, ns, verb, resource string) bool {
	GinkgoHelper()
	args := []string{"auth", "can-i", verb}
	if r, sub, ok := strings.Cut(resource, "/"); ok {
		args = append(args, r, "--subresource="+sub)
	} else {
		args = append(args, resource)
	}
	// A request for a cluster-scoped resource names no namespace; can-i
	// with one would ask the RoleBindings of that namespace, which the
	// API server never consults for such a request.
	if !strings.HasPrefix(resource, "clustertools") {
		args = append(args, "-n", ns)
	}
	// can-i exits 1 for "no": the answer is the output.
	out, _ := runKubectl("", append(args, "--as="+user)...)
	answer := strings.TrimSpace(out)
	Expect(answer).To(BeElementOf("yes", "no"), "kubectl auth can-i %s %s --as=%s", verb, resource, user)
	return answer == "yes"
}

// readRules reads the rules of the Role or ClusterRole in a file.
func readRules(path string) []rbacv1.PolicyRule {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var role rbacv1.ClusterRole
	Expect(yaml.Unmarshal(b, &role)).To(Succeed())
	Expect(role.Rules).NotTo(BeEmpty(), path)
	return role.Rules
}

// ruleSet expands rules into "group resource verb" entries.
func ruleSet(rules []rbacv1.PolicyRule) map[string]bool {
	set := map[string]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					set[fmt.Sprintf("%q %s %s", g, res, v)] = true
				}
			}
		}
	}
	return set
}

// collectExprs returns every string under a key "expr" in a decoded JSON
// or YAML document: a Grafana panel's queries, a rule's expression.
func collectExprs(v any) []string {
	var out []string
	switch t := v.(type) {
	case map[string]any:
		for k, child := range t {
			if s, ok := child.(string); ok && k == "expr" {
				out = append(out, s)
				continue
			}
			out = append(out, collectExprs(child)...)
		}
	case []any:
		for _, child := range t {
			out = append(out, collectExprs(child)...)
		}
	}
	return out
}

// httpGet returns the body of a successful GET.
func httpGet(url string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(b), nil
}

// scrapeFamilies reads a metrics endpoint in the Prometheus text format.
func scrapeFamilies(url string) (map[string]*dto.MetricFamily, error) {
	body, err := httpGet(url)
	if err != nil {
		return nil, err
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(strings.NewReader(body))
}

// served reports whether families hold the series name: a family of that
// name with at least one sample, or a histogram's or summary's _bucket,
// _sum or _count.
func served(families map[string]*dto.MetricFamily, name string) bool {
	if f, ok := families[name]; ok {
		return len(f.GetMetric()) > 0
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		f, ok := families[base]
		if !ok || len(f.GetMetric()) == 0 {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			return true
		case dto.MetricType_SUMMARY:
			return suffix != "_bucket"
		}
	}
	return false
}

// discard deletes the operations of namespaces that no manager serves after
// this test, and takes their finalizer off as an administrator may: left
// behind, they would wait for the next test's manager, which serves every
// namespace and would call their tool.
func discard(namespaces ...string) {
	for _, ns := range namespaces {
		_, _ = runKubectl("", "delete", "seo", "--all", "-n", ns, "--wait=false")
		for name := range strings.FieldsSeq(kubectl("", "get", "seo", "-n", ns, "-o", "name")) {
			_, _ = runKubectl("", "patch", "-n", ns, name, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`)
		}
		Eventually(func() string { return kubectl("", "get", "seo", "-n", ns, "-o", "name") }).Should(BeEmpty())
	}
}
