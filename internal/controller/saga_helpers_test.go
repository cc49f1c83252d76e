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
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/saga"
	"github.com/once-dev/once/test/sandbox"
)

// newDesk creates the Tool "desk", a Native tool over the sandbox with the
// operations a change needs: open and close a ticket, set and revert a
// config, send a notice. Closing and reverting cancel the object made.
func newDesk(ns string, mutate ...func(*v1.ToolSpec)) *v1.Tool {
	create := func(name, collection string) v1.ToolOperation {
		return v1.ToolOperation{Name: name, Path: "/native/" + collection,
			Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}}
	}
	cancel := func(name, collection string) v1.ToolOperation {
		return v1.ToolOperation{Name: name, Path: "/native/" + collection + "/{id}/cancel",
			Request:  &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "id", Value: "parameters.id"}}},
			Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}}
	}
	return newTool(ns, "desk", v1.IdempotencyNative, append([]func(*v1.ToolSpec){func(s *v1.ToolSpec) {
		s.Operations = []v1.ToolOperation{
			create("ticket.open", "tickets"), cancel("ticket.close", "tickets"),
			create("config.set", "configs"), cancel("config.revert", "configs"),
			create("notice.send", "notices"),
		}
	}}, mutate...)...)
}

// raw encodes a JSON object for a spec.
func raw(v map[string]any) *runtime.RawExtension {
	GinkgoHelper()
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return &runtime.RawExtension{Raw: b}
}

// step is a step on the desk, compensated by undo (the id of its effect
// passed as `id`), or irreversible when undo is empty.
func step(name, operation, undo string, params map[string]any, from ...v1.ParameterExpression) v1.SagaStep {
	s := v1.SagaStep{Name: name, ToolRef: v1.StepToolReference{Name: "desk"}, Operation: operation,
		Parameters: raw(params), ParametersFrom: from,
		RetryPolicy: &v1.RetryPolicy{InitialBackoff: &metav1.Duration{Duration: 100 * time.Millisecond}}}
	if undo == "" {
		s.Irreversible = true
		return s
	}
	s.Compensation = &v1.Compensation{Operation: undo,
		ParametersFrom: []v1.ParameterExpression{{Name: "id", Expression: "steps['" + name + "'].externalObjectID"}},
		RetryPolicy:    &v1.RetryPolicy{InitialBackoff: &metav1.Duration{Duration: 100 * time.Millisecond}}}
	return s
}

// changeSteps is the three-step change of the samples: open a ticket, set
// a config that names it, tell the team (irreversible, last).
func changeSteps() []v1.SagaStep {
	return []v1.SagaStep{
		step("ticket", "ticket.open", "ticket.close", map[string]any{"title": "scale checkout"}),
		step("config", "config.set", "config.revert", map[string]any{"replicas": 4},
			v1.ParameterExpression{Name: "ticket", Expression: "steps.ticket.externalObjectID"},
			v1.ParameterExpression{Name: "service", Expression: "inputs.service"}),
		step("notify", "notice.send", "", map[string]any{"channel": "#ops"},
			v1.ParameterExpression{Name: "text", Expression: "'scaled ' + inputs.service + ' under ' + steps.ticket.externalObjectID"}),
	}
}

func newSaga(ns, name string, steps []v1.SagaStep) *v1.Saga {
	return &v1.Saga{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       v1.SagaSpec{Inputs: raw(map[string]any{"service": "checkout"}), Steps: steps},
	}
}

func getSaga(ns, name string) *v1.Saga {
	GinkgoHelper()
	s := &v1.Saga{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

// waitSaga waits until the saga reaches the state and returns it.
func waitSaga(ns, name string, st v1.OperationState) *v1.Saga {
	GinkgoHelper()
	Eventually(func() v1.OperationState { return getSaga(ns, name).Status.State }, 60*time.Second, 100*time.Millisecond).
		Should(Equal(st), func() string {
			b, _ := json.MarshalIndent(getSaga(ns, name).Status, "", "  ")
			return string(b)
		})
	return getSaga(ns, name)
}

// sagaCondition returns a saga's condition of the given type.
func sagaCondition(s *v1.Saga, typ string) metav1.Condition {
	return conditionIn(s.Status.Conditions, typ)
}

// stepStatus returns a step's checkpoint.
func stepStatus(s *v1.Saga, name string) v1.SagaStepStatus {
	for _, ss := range s.Status.Steps {
		if ss.Name == name {
			return ss
		}
	}
	return v1.SagaStepStatus{}
}

// sagaEffects lists, in the order the tool performed them, the effects of
// the namespace's sagas at the tool: "create <collection>" or "cancel
// <collection>".
func sagaEffects(ns string) []string {
	GinkgoHelper()
	all, err := ledger.Effects(ctx)
	Expect(err).NotTo(HaveOccurred())
	slices.SortFunc(all, func(a, b sandbox.Effect) int { return int(a.Seq - b.Seq) })
	var out []string
	for _, e := range all {
		if strings.HasPrefix(e.Key, ns+"/") {
			out = append(out, e.Action+" "+e.Collection)
		}
	}
	return out
}

// operationsOf lists the names of a saga's operations.
func operationsOf(ns, name string) []string {
	GinkgoHelper()
	var list v1.SideEffectOperationList
	Expect(k8sClient.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{saga.LabelSaga: name})).To(Succeed())
	var out []string
	for _, op := range list.Items {
		out = append(out, op.Name)
	}
	slices.Sort(out)
	return out
}
