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
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The manager's roles as the installs bind them, on an API server that
// enforces owner-reference permissions (test/apiserver turns the admission
// plugin OwnerReferencesPermissionEnforcement on, as OpenShift does). The
// manager runs as its ServiceAccount, with those rights and no others.

// managerSubject is the manager's ServiceAccount (managerUsername) as a
// binding names it.
var managerSubject = rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "once-system",
	Name: "once-controller-manager"}

// readManifest decodes a manifest of the repository's config folder, one
// object, into obj.
func readManifest(path string, obj client.Object) {
	GinkgoHelper()
	b, err := os.ReadFile(filepath.Join("..", "..", "config", path))
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.UnmarshalStrict(b, obj)).To(Succeed(), path)
}

// createForSpec creates objects as envtest's admin, and deletes them when
// the spec ends.
func createForSpec(objs ...client.Object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(k8sClient.Create(ctx, o)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, o))).To(Succeed()) })
	}
}

// bindClusterRole binds the manager's ServiceAccount to the ClusterRole of
// config/rbac/role.yaml, generated from the RBAC markers, named and bound
// as config/default does.
func bindClusterRole(string) {
	GinkgoHelper()
	role := &rbacv1.ClusterRole{}
	readManifest(filepath.Join("rbac", "role.yaml"), role)
	role.Name = "once-" + role.Name
	createForSpec(role, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name + "binding"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{managerSubject}})
}

// bindTenantRole binds the manager's ServiceAccount, in namespace ns only,
// to the Role of config/namespaced/tenant/role.yaml, as the namespaced
// install does in each watched namespace.
func bindTenantRole(ns string) {
	GinkgoHelper()
	role := &rbacv1.Role{}
	readManifest(filepath.Join("namespaced", "tenant", "role.yaml"), role)
	role.Namespace, role.Name = ns, "once-"+role.Name
	createForSpec(role, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name + "binding"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{managerSubject}})
}

var _ = Describe("The manager's roles", func() {
	DescribeTable("let a saga create and run its steps where the API server enforces owner-reference permissions",
		func(bind func(ns string), namespaced bool) {
			ns := newNamespace()
			newDesk(ns)
			bind(ns)
			as := rest.CopyConfig(cfg)
			as.Impersonate = rest.ImpersonationConfig{UserName: managerUsername}
			manager, err := client.New(as, client.Options{Scheme: scheme})
			Expect(err).NotTo(HaveOccurred())

			By("checking that the manager's identity has its role's rights, not an admin's")
			Eventually(func() error {
				return manager.List(ctx, &v1.SagaList{}, client.InNamespace(ns))
			}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
			Expect(manager.List(ctx, &corev1.SecretList{}, client.InNamespace(ns))).To(Satisfy(apierrors.IsForbidden))
			if namespaced {
				// Also proves that no binding of another entry is left.
				Eventually(func() error { return manager.List(ctx, &corev1.NamespaceList{}) },
					10*time.Second, 100*time.Millisecond).Should(Satisfy(apierrors.IsForbidden))
			}

			By("running the manager as its ServiceAccount")
			opts := managerOptions{config: as}
			if namespaced {
				opts.watch = []string{ns}
			}
			DeferCleanup(startManager(opts))
			Expect(k8sClient.Create(ctx, newSaga(ns, "scale", changeSteps()))).To(Succeed())

			By("waiting for the first step's operation, controlled by the saga")
			Eventually(func() []string { return operationsOf(ns, "scale") }, 30*time.Second, 100*time.Millisecond).
				Should(ContainElement("scale.ticket"), func() string { return whyNoStep(manager, ns, "scale") })
			s := waitSaga(ns, "scale", v1.StateCommitted)
			Expect(sagaEffects(ns)).To(Equal([]string{"create tickets", "create configs", "create notices"}))
			ref := metav1.GetControllerOf(get(ns, "scale.ticket"))
			Expect(ref).NotTo(BeNil())
			Expect(ref.UID).To(Equal(s.UID))
			Expect(ref.BlockOwnerDeletion).To(HaveValue(BeTrue()))
		},
		Entry("the ClusterRole of config/rbac, bound cluster-wide", bindClusterRole, false),
		Entry("the Role of config/namespaced/tenant, in the watched namespace", bindTenantRole, true),
	)
})

// whyNoStep explains a saga that made no step: its status, and what the
// API server answers the manager's identity that creates, in a dry run,
// an operation controlled by the saga, as the saga does for each step.
func whyNoStep(manager client.Client, ns, name string) string {
	s := getSaga(ns, name)
	st, _ := json.Marshal(s.Status)
	op := newOp(ns, name+".probe", "desk", map[string]any{})
	if err := controllerutil.SetControllerReference(s, op, scheme); err != nil {
		return err.Error()
	}
	return fmt.Sprintf("saga status: %s\nthe manager's dry-run create of a step's operation: %v",
		st, manager.Create(ctx, op, client.DryRunAll))
}
