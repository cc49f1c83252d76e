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

package controller

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/test/sandbox"
)

// managerUsername is the manager's ServiceAccount as config/default deploys
// it, which the IdempotencyRecord policy admits.
const managerUsername = "system:serviceaccount:once-system:once-controller-manager"

// installPolicies applies the admission policies of config/policy, which
// config/default deploys with the manager, and waits until the API server
// enforces them. envtest installs CRDs only. The test managers run as
// envtest's admin, a member of system:masters, which the policies admit.
func installPolicies() {
	GinkgoHelper()
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "policy", "*.yaml"))
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, name := range files {
		if strings.HasPrefix(filepath.Base(name), "kustomi") {
			continue
		}
		f, err := os.Open(name)
		Expect(err).NotTo(HaveOccurred())
		dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			Expect(err).NotTo(HaveOccurred(), name)
			if len(u.Object) == 0 {
				continue
			}
			Expect(k8sClient.Create(ctx, u)).To(Succeed(), name)
			n++
		}
		Expect(f.Close()).To(Succeed())
	}
	Expect(n).To(BeNumerically(">=", 12), "the policies and their bindings")

	By("waiting until the API server enforces the policies")
	probe := userClient("policy-probe")
	grant("", "policy-probe", "idempotencyrecords", "create")
	grant("", "policy-probe", "sideeffectoperations", "create")
	Eventually(func() error {
		return probe.Create(ctx, forgedRecord("default", "policy-probe"), client.DryRunAll)
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("written only by the Once manager")))
	Eventually(func() (string, error) {
		op := newOp("default", "policy-probe", "none", map[string]any{})
		op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionFail, By: "someone"}
		if err := probe.Create(ctx, op, client.DryRunAll); err != nil {
			return "", err
		}
		return op.Spec.Resolution.User, nil
	}, 30*time.Second, 200*time.Millisecond).Should(Equal("policy-probe"))
	grant("", "policy-probe", "sideeffectoperations/status", "update")
	op := create(newOp("default", "policy-probe-status", "none", map[string]any{}))
	Eventually(func() error {
		return probe.Status().Update(ctx, op, client.DryRunAll)
	}, 30*time.Second, 200*time.Millisecond).Should(MatchError(ContainSubstring("is written only by the Once manager")))
	// Gone before any manager starts, which would otherwise pass over it:
	// without its finalizer, which the mutating policy added.
	Expect(k8sClient.Patch(ctx, op, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	Expect(k8sClient.Delete(ctx, op)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(op), &v1.SideEffectOperation{}))
	}, 30*time.Second, 200*time.Millisecond).Should(BeTrue())
	grant("", "policy-probe", "sagas", "create")
	Eventually(func() (string, error) {
		s := newSaga("default", "policy-probe", changeSteps())
		s.Spec.Steps[1].RequiresApproval = true
		s.Spec.Approvals = []v1.SagaApproval{{Step: "config", By: "someone"}}
		if err := probe.Create(ctx, s, client.DryRunAll); err != nil {
			return "", err
		}
		return s.Spec.Approvals[0].User, nil
	}, 30*time.Second, 200*time.Millisecond).Should(Equal("policy-probe"))
}

// userClient is a client authenticated as a user of its own (a client
// certificate), not as envtest's admin.
func userClient(name string, groups ...string) client.Client {
	GinkgoHelper()
	u, err := apiServer.Env.AddUser(envtest.User{Name: name, Groups: groups}, nil)
	Expect(err).NotTo(HaveOccurred())
	c, err := client.New(u.Config(), client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// grant lets a user use verbs on a resource of Once's group, in a namespace
// or, with namespace "", in all of them.
func grant(namespace, user, resource string, verbs ...string) {
	GinkgoHelper()
	name := strings.NewReplacer(":", "-", "/", "-").Replace(user + "-" + resource)
	rules := []rbacv1.PolicyRule{{APIGroups: []string{v1.GroupVersion.Group}, Resources: []string{resource}, Verbs: verbs}}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	if namespace == "" {
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules})).To(Succeed())
		Expect(k8sClient.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: subjects})).To(Succeed())
		return
	}
	meta := metav1.ObjectMeta{Namespace: namespace, Name: name}
	Expect(k8sClient.Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: rules})).To(Succeed())
	Expect(k8sClient.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: subjects})).To(Succeed())
}

// forgedRecord is a scope record that claims an effect that never
// happened: an operation of its scope would adopt it and make no call.
func forgedRecord(ns, key string) *v1.IdempotencyRecord {
	now := metav1.Now()
	return &v1.IdempotencyRecord{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged-" + key},
		Spec: v1.IdempotencyRecordSpec{
			ToolRef:        v1.ToolReference{Kind: v1.ToolKindTool, Name: "payments"},
			Operation:      "charge.create",
			IdempotencyKey: key,
			RequestHash:    "sha256:" + strings.Repeat("0", 64),
			Owner:          v1.RecordOwner{Name: key, UID: "forged"},
			Retention:      metav1.Duration{Duration: 24 * time.Hour},
			Outcome: &v1.RecordOutcome{State: v1.StateCommitted, ExternalObjectID: "ch_forged",
				CompletionTime: now, ExpiryTime: metav1.NewTime(now.Add(24 * time.Hour))},
		},
	}
}

var _ = Describe("Admission policies", func() {
	var ns string
	BeforeEach(func() { ns = newNamespace() })

	Context("on IdempotencyRecords", func() {
		It("refuses a record written by a user whom RBAC lets edit records", func() {
			grant(ns, "mallory", "idempotencyrecords", "get", "create", "update", "patch", "delete")
			mallory := userClient("mallory", "dev")

			By("refusing a forged record")
			err := mallory.Create(ctx, forgedRecord(ns, "charge-1"))
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err).To(MatchError(ContainSubstring(
				"IdempotencyRecords are written only by the Once manager (" + managerUsername + "): mallory may not create one")))

			By("letting the manager (here a member of system:masters) write them")
			DeferCleanup(startManager(managerOptions{}))
			newTool(ns, "payments", v1.IdempotencyNative)
			op := waitFor(ns, create(newOp(ns, "charge-1", "payments", map[string]any{"amount": 1})).Name, v1.StateCommitted)
			remove(op)
			rec := record(ns, recordNameOf(op))
			Expect(rec.Spec.Outcome).NotTo(BeNil())

			By("refusing to change or delete the manager's record")
			patch := client.MergeFrom(rec.DeepCopy())
			rec.Spec.Outcome.ExternalObjectID = "ch_other"
			err = mallory.Patch(ctx, rec, patch)
			Expect(err).To(MatchError(ContainSubstring("mallory may not update one")))
			err = mallory.Delete(ctx, rec)
			Expect(err).To(MatchError(ContainSubstring("mallory may not delete one")))
			Expect(effectsOf(v1.IdempotencyNative, ns, "charge-1")).To(Equal(1))
		})

		It("lets the manager's ServiceAccount write records", func() {
			grant(ns, managerUsername, "idempotencyrecords", "create", "delete")
			manager := userClient(managerUsername, "system:serviceaccounts", "system:serviceaccounts:once-system")
			rec := forgedRecord(ns, "charge-1")
			Expect(manager.Create(ctx, rec)).To(Succeed())
			Expect(manager.Delete(ctx, rec)).To(Succeed())
		})
	})

	Context("on the status of operations and sagas", func() {
		It("refuses a status written by a user whom RBAC lets write it, and the manager goes on", func() {
			// A status grant as wildcard roles ('*' on resources) and
			// aggregated roles hand it out.
			grant(ns, "mallory", "sideeffectoperations/status", "get", "update", "patch")
			grant(ns, "mallory", "sagas/status", "get", "update", "patch")
			mallory := userClient("mallory", "dev")
			DeferCleanup(startManager(managerOptions{}))
			newTool(ns, "payments", v1.IdempotencyNative)

			By("refusing a forged Committed status on an operation the manager has not taken yet")
			op := newOp(ns, "charge-1", "payments", map[string]any{"amount": 1})
			op.Spec.ToolRef.Name = "absent" // no such tool: the manager makes no call
			create(op)
			// Merge patches, which carry no resourceVersion: the manager
			// writes the status meanwhile, and a conflict is no refusal.
			forged := get(ns, "charge-1")
			patch := client.MergeFrom(forged.DeepCopy())
			forged.Status.State = v1.StateCommitted
			forged.Status.ExternalObjectID = "ch_forged"
			err := mallory.Status().Patch(ctx, forged, patch)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err).To(MatchError(ContainSubstring(
				"The status of sideeffectoperations is written only by the Once manager (" + managerUsername +
					"): mallory may not write it")))
			Expect(get(ns, "charge-1").Status.State).NotTo(Equal(v1.StateCommitted))

			By("refusing to reset a committed operation's status, so that it would run again")
			create(newOp(ns, "charge-2", "payments", map[string]any{"amount": 2}))
			done := waitFor(ns, "charge-2", v1.StateCommitted)
			patch = client.MergeFrom(done.DeepCopy())
			done.Status = v1.SideEffectOperationStatus{}
			err = mallory.Status().Patch(ctx, done, patch)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Consistently(state(ns, "charge-2"), 2*time.Second).Should(Equal(v1.StateCommitted))
			Expect(effectsOf(v1.IdempotencyNative, ns, "charge-2")).To(Equal(1))

			By("refusing a saga's status the same way")
			s := newSaga(ns, "change", changeSteps())
			Expect(k8sClient.Create(ctx, s)).To(Succeed())
			Eventually(func() v1.OperationState { return getSaga(ns, "change").Status.State }).ShouldNot(BeEmpty())
			s = getSaga(ns, "change")
			sagaPatch := client.MergeFrom(s.DeepCopy())
			s.Status.State = v1.StateCommitted
			err = mallory.Status().Patch(ctx, s, sagaPatch)
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
			Expect(err).To(MatchError(ContainSubstring("The status of sagas is written only by the Once manager")))

			By("letting the manager (here a member of system:masters) go on")
			create(newOp(ns, "charge-3", "payments", map[string]any{"amount": 3}))
			waitFor(ns, "charge-3", v1.StateCommitted)
			Expect(effectsOf(v1.IdempotencyNative, ns, "charge-3")).To(Equal(1))
		})

		It("lets the manager's ServiceAccount write the status", func() {
			grant(ns, managerUsername, "sideeffectoperations/status", "get", "patch")
			manager := userClient(managerUsername, "system:serviceaccounts", "system:serviceaccounts:once-system")
			op := create(newOp(ns, "charge-1", "absent", map[string]any{"amount": 1}))
			patch := client.MergeFrom(op.DeepCopy())
			op.Status.ErrorMessage = "written by the manager's ServiceAccount"
			Expect(manager.Status().Patch(ctx, op, patch)).To(Succeed())
			Expect(get(ns, "charge-1").Status.ErrorMessage).To(Equal("written by the manager's ServiceAccount"))
		})
	})

	Context("on resolutions", func() {
		BeforeEach(func() {
			DeferCleanup(startManager(managerOptions{}))
			faults(ns, sandbox.FaultRule{Method: "POST", Fault: "500-before-commit", Count: 1})
			newTool(ns, "mailer", v1.IdempotencyNone)
		})

		It("records the authenticated writer next to the person the writer claims", func() {
			create(newOp(ns, "op", "mailer", map[string]any{}))
			waitFor(ns, "op", v1.StateNeedsReview)
			grant(ns, "alice-real", "sideeffectoperations", "get", "patch")
			alice := userClient("alice-real", "reviewers")

			By("patching a resolution that claims to be bob's, user included")
			op := get(ns, "op")
			patch := client.MergeFrom(op.DeepCopy())
			op.Spec.Resolution = &v1.Resolution{Action: v1.ResolutionFail, By: "bob", User: "bob", Reason: "duplicate order"}
			Expect(alice.Patch(ctx, op, patch)).To(Succeed())
			Expect(get(ns, "op").Spec.Resolution.User).To(Equal("alice-real"))
			Expect(get(ns, "op").Spec.Resolution.By).To(Equal("bob"))

			By("keeping both in the applied resolution and its record")
			op = waitFor(ns, "op", v1.StateFailedFinal)
			Expect(op.Status.Resolution.By).To(Equal("bob"))
			Expect(op.Status.Resolution.User).To(Equal("alice-real"))
			var messages []string
			for _, o := range op.Status.Observations {
				messages = append(messages, o.Message)
			}
			Expect(messages).To(ContainElement("Resolved by bob (authenticated as alice-real): duplicate order"))
		})
	})
})

var _ = Describe("ClusterTool namespaceSelector", func() {
	It("is required, and {} lets every namespace use the tool", func() {
		DeferCleanup(startManager(managerOptions{}))
		ns := newNamespace()
		tool := &v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: "shared-" + ns},
			Spec: v1.ClusterToolSpec{ToolSpec: v1.ToolSpec{
				HTTP:        v1.HTTPBackend{URL: toolURL},
				Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
				Timeout:     &metav1.Duration{Duration: time.Second},
				Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/native/charges",
					Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}}},
			}}}

		By("refusing a ClusterTool without a selector")
		err := k8sClient.Create(ctx, tool)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err).To(MatchError(ContainSubstring("spec.namespaceSelector is required: select the namespaces " +
			"whose operations may use this ClusterTool by their labels, or write namespaceSelector: {} to let every namespace use it")))

		By("serving any namespace with the empty selector")
		tool.Spec.NamespaceSelector = &metav1.LabelSelector{}
		Expect(k8sClient.Create(ctx, tool)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, tool)).To(Succeed()) })
		op := newOp(ns, "charge-1", tool.Name, map[string]any{"amount": 1})
		op.Spec.ToolRef.Kind = v1.ToolKindClusterTool
		create(op)
		waitFor(ns, "charge-1", v1.StateCommitted)
		Expect(effectsIn(ns)).To(Equal(1))

		By("refusing to remove the selector")
		stored := &v1.ClusterTool{}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(tool), stored)).To(Succeed())
		stored.Spec.NamespaceSelector = nil
		Expect(k8sClient.Update(ctx, stored)).To(MatchError(ContainSubstring("spec.namespaceSelector is required")))
	})

	It("serves only the namespaces it selects", func() {
		DeferCleanup(startManager(managerOptions{}))
		allowed, other := newNamespace(), newNamespace()
		label := "payments.example.com/" + allowed
		ns := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: allowed}, ns)).To(Succeed())
		ns.Labels = map[string]string{label: "yes"}
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())

		tool := &v1.ClusterTool{
			ObjectMeta: metav1.ObjectMeta{Name: "payments-" + allowed},
			Spec: v1.ClusterToolSpec{
				ToolSpec: v1.ToolSpec{
					HTTP:        v1.HTTPBackend{URL: toolURL},
					Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
					Timeout:     &metav1.Duration{Duration: time.Second},
					Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/native/charges",
						Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}}},
				},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{label: "yes"}},
			},
		}
		Expect(k8sClient.Create(ctx, tool)).To(Succeed())
		DeferCleanup(func() { Expect(k8sClient.Delete(ctx, tool)).To(Succeed()) })
		onTool := func(ns string) *v1.SideEffectOperation {
			op := newOp(ns, "charge-1", tool.Name, map[string]any{"amount": 1})
			op.Spec.ToolRef.Kind = v1.ToolKindClusterTool
			return create(op)
		}

		By("committing an operation from a selected namespace")
		onTool(allowed)
		waitFor(allowed, "charge-1", v1.StateCommitted)
		Expect(effectsIn(allowed)).To(Equal(1))

		By("stalling an operation from another namespace without a call")
		onTool(other)
		Eventually(func() string {
			return condition(get(other, "charge-1"), v1.ConditionReady).Reason
		}).Should(Equal(v1.ReasonNamespaceNotAllowed))
		op := get(other, "charge-1")
		Expect(condition(op, v1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		Expect(condition(op, v1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		Expect(condition(op, v1.ConditionReady).Message).To(ContainSubstring(
			"ClusterTool " + tool.Name + " does not serve namespace " + other))
		Expect(op.Status.Attempts).To(BeZero())
		Consistently(func() int { return effectsIn(other) }, 2*time.Second).Should(BeZero())

		By("proceeding once the namespace is labelled")
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: other}, ns)).To(Succeed())
		ns.Labels = map[string]string{label: "yes"}
		Expect(k8sClient.Update(ctx, ns)).To(Succeed())
		waitFor(other, "charge-1", v1.StateCommitted)
		Expect(effectsIn(other)).To(Equal(1))
	})
})
