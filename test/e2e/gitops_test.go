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
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/cel-go/cel"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/yaml"

	"github.com/once-dev/once/test/sandbox"
)

// The GitOps examples, checked without Flux or Tekton running: what Flux
// computes (kstatus, and the example's health check expressions) over the
// live objects the example creates, and the Tekton step's script run as is
// against the control plane.
var _ = Describe("The GitOps examples", func() {
	It("Flux: the app commits its charge once, and Flux's health checks read it as Current only then", func() {
		ns := newNamespace("flux")
		ks := fluxKustomization(filepath.Join(root, "examples", "flux", "payments.yaml"))

		By("rendering the folder the Kustomization applies, pointed at the sandbox")
		Expect(ks.Spec.Path).To(Equal("./examples/flux/app"))
		rendered := kubectl("", "kustomize", filepath.Join(root, ks.Spec.Path))
		Expect(rendered).To(ContainSubstring("http://127.0.0.1:8090"))
		rendered = strings.ReplaceAll(rendered, "http://127.0.0.1:8090", sb.URL)

		By("checking that the health checks name exactly the objects the app creates")
		var created, checked []string
		for _, o := range decodeAll(rendered) {
			created = append(created, o.GetAPIVersion()+" "+o.GetKind()+" "+ks.Spec.TargetNamespace+"/"+o.GetName())
		}
		for _, c := range ks.Spec.HealthChecks {
			checked = append(checked, c.APIVersion+" "+c.Kind+" "+c.Namespace+"/"+c.Name)
		}
		Expect(checked).To(ConsistOf(created))
		Expect(ks.Spec.HealthCheckExprs).To(HaveLen(1))
		exprs := ks.Spec.HealthCheckExprs[0]
		Expect(exprs.APIVersion + " " + exprs.Kind).To(Equal("effects.once.dev/v1alpha1 SideEffectOperation"))

		By("applying it before any manager runs: kstatus reads the status-less charge as Current, the expressions wait")
		apply(ns, rendered)
		charge := live(ns, "seo/charge-order-2001")
		Expect(kstatusOf(charge)).To(Equal(status.CurrentStatus), "this is why the example has healthCheckExprs")
		Expect(fluxHealth(exprs, charge)).To(Equal(fluxWaiting))

		By("starting the manager: the charge commits, once, and both read Current")
		startManager(ns, manager{holder: "flux"})
		waitState(ns, "charge-order-2001", "Committed")
		charge = live(ns, "seo/charge-order-2001")
		Expect(kstatusOf(charge)).To(Equal(status.CurrentStatus))
		Expect(fluxHealth(exprs, charge)).To(Equal(string(status.CurrentStatus)))
		waitFor(ns, "tool/payments", "Ready")
		Expect(kstatusOf(live(ns, "tool/payments"))).To(Equal(status.CurrentStatus))
		key := toolKey(ns, "Tool:payments", "charge.create", "order-2001")
		Expect(effectsPerKey(ns)).To(Equal(map[string]int{key: 1}))

		By("re-applying it, as Flux does at every interval: no new effect")
		apply(ns, rendered)
		Consistently(func() map[string]int { return effectsPerKey(ns) }).Should(Equal(map[string]int{key: 1}))

		By("applying a charge the tool refuses: both read it as Failed")
		refused := strings.NewReplacer("charge-order-2001", "charge-order-2002", "order-2001", "order-2002",
			"amount: 1500", "reject: card declined").Replace(rendered)
		Expect(refused).To(ContainSubstring("reject: card declined"))
		apply(ns, refused)
		waitState(ns, "charge-order-2002", "FailedFinal")
		charge = live(ns, "seo/charge-order-2002")
		Expect(kstatusOf(charge)).To(Equal(status.FailedStatus))
		Expect(fluxHealth(exprs, charge)).To(Equal(string(status.FailedStatus)))
	})

	It("Tekton: the wait step succeeds for a committed operation and fails naming NeedsReview", func() {
		ns := newNamespace("tekton")
		startManager(ns, manager{holder: "tekton"})
		faults(ns, sandbox.FaultRule{Method: "POST", Fault: sandbox.FaultDropAfterCommit, KeyPrefix: "Tool:mailer/"})
		apply(ns, toolYAML("payments", "Native"))
		apply(ns, toolYAML("mailer", "None"))
		apply(ns, opYAML("charge", "payments", "", `{"amount": 5}`))
		apply(ns, opYAML("mail", "mailer", "", `{"to": "a@example.com"}`))
		script := tektonScript(filepath.Join(root, "examples", "tekton", "wait-for-operation.yaml"))

		out, err := runStep(script, ns, "charge")
		AddReportEntry("the step, for a committed operation", out)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(HavePrefix("seo/charge is Committed: Committed as "))
		Expect(jsonpath(ns, "seo/charge", "{.status.state}")).To(Equal("Committed"))

		out, err = runStep(script, ns, "mail")
		AddReportEntry("the step, for an operation in review", out)
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "the step must fail: %v\n%s", err, out)
		Expect(exit.ExitCode()).To(Equal(1))
		Expect(out).To(ContainSubstring("seo/mail is stalled in NeedsReview (NeedsReview): "))
		Expect(out).To(ContainSubstring("set its spec.resolution"))
		Expect(jsonpath(ns, "seo/mail", "{.status.state}")).To(Equal("NeedsReview"))
	})
})

// fluxKustomizationSpec is the part of a Flux Kustomization the examples
// rely on.
type fluxKustomizationSpec struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Path            string `json:"path"`
		TargetNamespace string `json:"targetNamespace"`
		Timeout         string `json:"timeout"`
		HealthChecks    []struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Namespace  string `json:"namespace"`
		} `json:"healthChecks"`
		HealthCheckExprs []fluxHealthExprs `json:"healthCheckExprs"`
	} `json:"spec"`
}

// fluxHealthExprs is one entry of a Kustomization's healthCheckExprs.
type fluxHealthExprs struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	InProgress string `json:"inProgress"`
	Failed     string `json:"failed"`
	Current    string `json:"current"`
}

// fluxKustomization reads a Flux Kustomization from a file.
func fluxKustomization(path string) fluxKustomizationSpec {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var ks fluxKustomizationSpec
	Expect(yaml.Unmarshal(b, &ks)).To(Succeed())
	Expect(ks.APIVersion + " " + ks.Kind).To(Equal("kustomize.toolkit.fluxcd.io/v1 Kustomization"))
	Expect(ks.Spec.Timeout).NotTo(BeEmpty(), "a health check needs a bound")
	return ks
}

// fluxWaiting is what fluxHealth returns for an expression that cannot be
// evaluated yet (a field it reads is missing): Flux keeps waiting.
const fluxWaiting = "Waiting"

// fluxHealth evaluates a Kustomization's health check expressions over an
// object in Flux's order: inProgress, then failed, then current; none true
// reads InProgress.
func fluxHealth(e fluxHealthExprs, obj *unstructured.Unstructured) string {
	GinkgoHelper()
	env, err := cel.NewEnv(cel.OptionalTypes(),
		cel.Variable("apiVersion", cel.DynType), cel.Variable("kind", cel.DynType),
		cel.Variable("metadata", cel.DynType), cel.Variable("spec", cel.DynType), cel.Variable("status", cel.DynType))
	Expect(err).NotTo(HaveOccurred())
	for _, c := range []struct {
		expr string
		is   status.Status
	}{{e.InProgress, status.InProgressStatus}, {e.Failed, status.FailedStatus}, {e.Current, status.CurrentStatus}} {
		if c.expr == "" {
			continue
		}
		ast, iss := env.Compile(c.expr)
		Expect(iss.Err()).NotTo(HaveOccurred(), c.expr)
		prg, err := env.Program(ast)
		Expect(err).NotTo(HaveOccurred())
		out, _, err := prg.Eval(obj.Object)
		if err != nil {
			return fluxWaiting
		}
		if out.Value() == true {
			return string(c.is)
		}
	}
	return string(status.InProgressStatus)
}

// live reads an object from the API server.
func live(ns, object string) *unstructured.Unstructured {
	GinkgoHelper()
	u := &unstructured.Unstructured{}
	Expect(u.UnmarshalJSON([]byte(kubectl("", "get", "-n", ns, object, "-o", "json")))).To(Succeed())
	return u
}

// kstatusOf is how kstatus, and so Flux and kubectl wait, read an object.
func kstatusOf(u *unstructured.Unstructured) status.Status {
	GinkgoHelper()
	res, err := status.Compute(u)
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// decodeAll splits rendered manifests into objects.
func decodeAll(manifests string) []*unstructured.Unstructured {
	GinkgoHelper()
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := d.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// tektonScript reads the script of the Task's only step.
func tektonScript(path string) string {
	GinkgoHelper()
	b, err := os.ReadFile(path)
	Expect(err).NotTo(HaveOccurred())
	var task struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Spec       struct {
			Steps []struct {
				Env []struct {
					Name string `json:"name"`
				} `json:"env"`
				Script string `json:"script"`
			} `json:"steps"`
		} `json:"spec"`
	}
	Expect(yaml.Unmarshal(b, &task)).To(Succeed())
	Expect(task.APIVersion + " " + task.Kind).To(Equal("tekton.dev/v1 Task"))
	Expect(task.Spec.Steps).To(HaveLen(1))
	var env []string
	for _, e := range task.Spec.Steps[0].Env {
		env = append(env, e.Name)
	}
	Expect(env).To(ConsistOf("OPERATION", "NAMESPACE", "TIMEOUT_SECONDS"), "the variables runStep sets")
	return task.Spec.Steps[0].Script
}

// runStep runs the step's script with bash, as the step would, with the
// control plane's kubectl, and returns its output.
func runStep(script, ns, operation string) (string, error) {
	GinkgoHelper()
	path := filepath.Join(GinkgoT().TempDir(), "step.sh")
	Expect(os.WriteFile(path, []byte(script), 0o755)).To(Succeed())
	cmd := exec.Command("bash", path)
	cmd.Env = append(os.Environ(), "PATH="+cp.Assets+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+cp.Kubeconfig, "OPERATION="+operation, "NAMESPACE="+ns, "TIMEOUT_SECONDS=180")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
