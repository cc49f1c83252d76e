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
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

var nsSeq int

// newNamespace makes a namespace for one test: keys sent to the tool start
// with it, so each test counts only its own effects.
func newNamespace() string {
	nsSeq++
	ns := fmt.Sprintf("t%d-%d", nsSeq, time.Now().UnixNano()%100000)
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	return ns
}

// newDirect returns a client that reads, writes and watches the API
// server itself, past any cache.
func newDirect() client.WithWatch {
	GinkgoHelper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	return c
}

// newTool creates a Tool for the sandbox's charges in the given mode, with
// a timeout, and returns it.
func newTool(ns, name string, mode v1.IdempotencyMode, mutate ...func(*v1.ToolSpec)) *v1.Tool {
	prefix := "/" + strings.ToLower(string(mode))
	t := &v1.Tool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.ToolSpec{
			HTTP:        v1.HTTPBackend{URL: toolURL},
			Idempotency: v1.ToolIdempotency{Mode: mode, LookupDelay: &metav1.Duration{Duration: 0}},
			Timeout:     &metav1.Duration{Duration: time.Second},
			Operations: []v1.ToolOperation{{
				Name: "charge.create", Path: prefix + "/charges",
				Lookup: &v1.LookupRequest{Path: prefix + "/charges?key={idempotencyKey}",
					Found: sandboxFound, Absent: sandboxAbsent},
				Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"},
			}},
		},
	}
	for _, m := range mutate {
		m(&t.Spec)
	}
	Expect(k8sClient.Create(ctx, t)).To(Succeed())
	return t
}

// sandboxAbsent proves absence only by the sandbox's own "not found"
// answer, never by a bare 404 from something in front of it.
// sandboxFound is the sandbox's record of the key: its lookup answers the
// object made with it.
const sandboxFound = "response.status == 200 && type(response.body) == map && " +
	"'key' in response.body && response.body.key == key"

const sandboxAbsent = "response.status == 404 && type(response.body) == map && " +
	"'error' in response.body && response.body.error == 'not_found'"

// newOp builds (without creating) an operation on a tool.
func newOp(ns, name, tool string, params map[string]any) *v1.SideEffectOperation {
	raw, err := json.Marshal(params)
	Expect(err).NotTo(HaveOccurred())
	return &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:     v1.ToolReference{Name: tool},
			Operation:   "charge.create",
			Parameters:  &runtime.RawExtension{Raw: raw},
			RetryPolicy: &v1.RetryPolicy{InitialBackoff: &metav1.Duration{Duration: 100 * time.Millisecond}},
		},
	}
}

func create(op *v1.SideEffectOperation) *v1.SideEffectOperation {
	Expect(k8sClient.Create(ctx, op)).To(Succeed())
	return op
}

// remove deletes an operation and waits until it is gone: a running
// manager first keeps its outcome in its scope's record and then lets the
// finalizer go.
func remove(op *v1.SideEffectOperation) {
	GinkgoHelper()
	Expect(k8sClient.Delete(ctx, op)).To(Succeed())
	Eventually(func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(op), &v1.SideEffectOperation{}))
	}, 20*time.Second).Should(BeTrue(), "%s/%s is still there", op.Namespace, op.Name)
}

// record reads a scope's record, nil if there is none.
func record(ns, name string) *v1.IdempotencyRecord {
	GinkgoHelper()
	rec := &v1.IdempotencyRecord{}
	err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rec)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return rec
}

// get reads an operation from the API server.
func get(ns, name string) *v1.SideEffectOperation {
	op := &v1.SideEffectOperation{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, op)).To(Succeed())
	return op
}

// state reads an operation's state, for Eventually.
func state(ns, name string) func() v1.OperationState {
	return func() v1.OperationState { return get(ns, name).Status.State }
}

// waitFor waits until the operation reaches the state and returns it.
func waitFor(ns, name string, s v1.OperationState, timeout ...time.Duration) *v1.SideEffectOperation {
	GinkgoHelper()
	t := 30 * time.Second
	if len(timeout) > 0 {
		t = timeout[0]
	}
	Eventually(state(ns, name), t, 100*time.Millisecond).Should(Equal(s),
		func() string { return describe(get(ns, name)) })
	return get(ns, name)
}

// describe renders an operation's status for failure messages.
func describe(op *v1.SideEffectOperation) string {
	b, _ := json.MarshalIndent(op.Status, "", "  ")
	return string(b)
}

// condition returns an operation's condition of the given type.
func condition(op *v1.SideEffectOperation, typ string) metav1.Condition {
	return conditionIn(op.Status.Conditions, typ)
}

// conditionIn returns the condition of the given type, or none.
func conditionIn(conds []metav1.Condition, typ string) metav1.Condition {
	c := meta.FindStatusCondition(conds, typ)
	if c == nil {
		return metav1.Condition{}
	}
	return *c
}

// effectsOf counts the effects the tool performed for a key of a namespace
// (mode is the tool's mode), from its ledger, whichever tool of the
// namespace sent it.
func effectsOf(mode v1.IdempotencyMode, ns, key string) int {
	GinkgoHelper()
	sum, err := ledger.Summary(ctx)
	Expect(err).NotTo(HaveOccurred())
	prefix := fmt.Sprintf("%s/charges/create/%s/", strings.ToLower(string(mode)), ns)
	n := 0
	for k, c := range sum.Keys {
		if strings.HasPrefix(k, prefix) && strings.HasSuffix(k, "/charge.create/"+key) {
			n += c
		}
	}
	return n
}

// effectsIn counts every effect whose key belongs to a namespace.
func effectsIn(ns string) int {
	GinkgoHelper()
	all, err := ledger.Effects(ctx)
	Expect(err).NotTo(HaveOccurred())
	n := 0
	for _, e := range all {
		if strings.HasPrefix(e.Key, ns+"/") {
			n++
		}
	}
	return n
}

// faults makes the sandbox fail the namespace's requests as the rules say.
func faults(ns string, rules ...sandbox.FaultRule) {
	GinkgoHelper()
	for i := range rules {
		if !strings.HasPrefix(rules[i].KeyPrefix, ns+"/") {
			rules[i].KeyPrefix = ns + "/" + rules[i].KeyPrefix
		}
	}
	Expect(ledger.SetFaults(ctx, 1, rules)).To(Succeed())
	DeferCleanup(func() { Expect(ledger.ClearFaults(ctx)).To(Succeed()) })
}

// resolve sets spec.resolution, as a person would with kubectl.
func resolve(ns, name string, res v1.Resolution) {
	GinkgoHelper()
	op := get(ns, name)
	patch := client.MergeFrom(op.DeepCopy())
	op.Spec.Resolution = &res
	Expect(k8sClient.Patch(ctx, op, patch)).To(Succeed())
}

// recordNameOf is the name of an operation's scope record, derived from
// its spec as the manager derives it: an ended operation's status does not
// keep it.
func recordNameOf(op *v1.SideEffectOperation) string {
	return protocol.OperationScope(op).RecordName()
}

func observationKinds(op *v1.SideEffectOperation) []v1.ObservationKind {
	var kinds []v1.ObservationKind
	for _, o := range op.Status.Observations {
		kinds = append(kinds, o.Kind)
	}
	return kinds
}
