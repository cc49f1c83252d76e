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
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// The CRDs bound what a tenant writes in each field (docs/threat-model.md,
// "Bounds of every input"). Each case is created at its bound and one
// past it, as a dry run: the API server takes the first and refuses the
// second.
var _ = Describe("The CRDs' bounds", func() {
	It("takes each field at its bound and refuses it one past", func() {
		ns := newNamespace()
		tool := func(n int, set func(s *v1.ToolSpec, n int)) client.Object {
			t := &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bounded"},
				Spec: v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
					Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
					Operations:  []v1.ToolOperation{{Name: "op", Path: "/op"}}}}
			set(&t.Spec, n)
			return t
		}
		saga := func(n int, set func(s *v1.SagaSpec, n int)) client.Object {
			s := &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bounded"},
				Spec: v1.SagaSpec{IdempotencyKey: "k", Steps: []v1.SagaStep{{Name: "s", Operation: "op",
					ToolRef: v1.StepToolReference{Name: "t"}, Irreversible: true}}}}
			set(&s.Spec, n)
			return s
		}
		cases := []struct {
			field string
			bound int
			build func(n int) client.Object
		}{
			{"Tool spec.http.url", 2048, func(n int) client.Object {
				return tool(n, func(s *v1.ToolSpec, n int) { s.HTTP.URL = "https://tool.example/" + strings.Repeat("a", n-21) })
			}},
			{"Tool spec.operations", 64, func(n int) client.Object {
				return tool(n, func(s *v1.ToolSpec, n int) {
					s.Operations = nil
					for i := range n {
						s.Operations = append(s.Operations, v1.ToolOperation{Name: fmt.Sprintf("op%d", i), Path: "/op"})
					}
				})
			}},
			{"Tool spec.operations[].response.outcomes", 32, func(n int) client.Object {
				return tool(n, func(s *v1.ToolSpec, n int) {
					for range n {
						s.Operations[0].Response.Outcomes = append(s.Operations[0].Response.Outcomes,
							v1.OutcomeRule{When: "true", Outcome: v1.OutcomeSucceeded})
					}
				})
			}},
			{"Tool spec.operations[].response.outcomes[].when", 4096, func(n int) client.Object {
				return tool(n, func(s *v1.ToolSpec, n int) {
					s.Operations[0].Response.Outcomes = []v1.OutcomeRule{{When: "true" + strings.Repeat(" ", n-4),
						Outcome: v1.OutcomeSucceeded}}
				})
			}},
			{"Tool spec.http.headers", 32, func(n int) client.Object {
				return tool(n, func(s *v1.ToolSpec, n int) {
					for i := range n {
						s.HTTP.Headers = append(s.HTTP.Headers, v1.HTTPHeader{Name: fmt.Sprintf("X-H%d", i), Value: "v"})
					}
				})
			}},
			{"SideEffectOperation spec.idempotencyKey", 253, func(n int) client.Object {
				op := newOp(ns, "bounded", "t", nil)
				op.Spec.IdempotencyKey = strings.Repeat("k", n)
				return op
			}},
			{"Saga spec.steps", 16, func(n int) client.Object {
				return saga(n, func(s *v1.SagaSpec, n int) {
					s.Steps = nil
					for i := range n {
						s.Steps = append(s.Steps, v1.SagaStep{Name: fmt.Sprintf("s%d", i), Operation: "op",
							ToolRef: v1.StepToolReference{Name: "t"}, Irreversible: true, RetryUntilDone: true})
					}
				})
			}},
			{"Saga spec.steps[].parametersFrom", 32, func(n int) client.Object {
				return saga(n, func(s *v1.SagaSpec, n int) {
					for i := range n {
						s.Steps[0].ParametersFrom = append(s.Steps[0].ParametersFrom,
							v1.ParameterExpression{Name: fmt.Sprintf("p%d", i), Expression: "1"})
					}
				})
			}},
			{"Saga spec.steps[].parametersFrom[].expression", 4096, func(n int) client.Object {
				return saga(n, func(s *v1.SagaSpec, n int) {
					s.Steps[0].ParametersFrom = []v1.ParameterExpression{{Name: "p", Expression: "1" + strings.Repeat(" ", n-1)}}
				})
			}},
			{"Saga spec.idempotencyKey", 200, func(n int) client.Object {
				return saga(n, func(s *v1.SagaSpec, n int) { s.IdempotencyKey = strings.Repeat("k", n) })
			}},
		}
		for _, c := range cases {
			By(c.field)
			Expect(k8sClient.Create(ctx, c.build(c.bound), client.DryRunAll)).To(Succeed(), "%s at %d", c.field, c.bound)
			err := k8sClient.Create(ctx, c.build(c.bound+1), client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s at %d: want Invalid, got %v", c.field, c.bound+1, err)
		}
	})

	It("takes a Tool's and a Saga's expressions at their bound together and refuses one character more", func() {
		ns := newNamespace()
		cases := []struct {
			kind  string
			build func(n int) client.Object
			msg   string
		}{
			{"Tool", func(n int) client.Object {
				return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bounded"}, Spec: everyExpression(n)}
			}, "the CEL expressions of a tool may take 32768 characters together"},
			{"ClusterTool", func(n int) client.Object {
				return &v1.ClusterTool{ObjectMeta: metav1.ObjectMeta{Name: "bounded"},
					Spec: v1.ClusterToolSpec{ToolSpec: everyExpression(n), NamespaceSelector: &metav1.LabelSelector{}}}
			}, "the CEL expressions of a tool may take 32768 characters together"},
			{"Saga", func(n int) client.Object {
				exprs := spread(n, 16)
				step := v1.SagaStep{Name: "s", Operation: "op", ToolRef: v1.StepToolReference{Name: "t"},
					Compensation: &v1.Compensation{Operation: "undo"}}
				for i, e := range exprs {
					pe := v1.ParameterExpression{Name: fmt.Sprintf("p%d", i), Expression: *e}
					if i%2 == 0 {
						step.ParametersFrom = append(step.ParametersFrom, pe)
					} else {
						step.Compensation.ParametersFrom = append(step.Compensation.ParametersFrom, pe)
					}
				}
				return &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bounded"},
					Spec: v1.SagaSpec{IdempotencyKey: "k", Steps: []v1.SagaStep{step}}}
			}, "the parametersFrom expressions of spec.steps, compensations' included, may take 32768 characters together"},
		}
		for _, c := range cases {
			By(c.kind)
			Expect(k8sClient.Create(ctx, c.build(v1.MaxExpressionChars), client.DryRunAll)).To(Succeed())
			err := k8sClient.Create(ctx, c.build(v1.MaxExpressionChars+1), client.DryRunAll)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			Expect(err.Error()).To(ContainSubstring(c.msg))
		}
	})
})

// spread is n characters of expressions in fields of at most 4096, count
// of them, each at least one: a digit and spaces, and in the first, a
// string of 'é' (two bytes, one character each, as the API server counts).
func spread(n, count int) []*string {
	out := make([]*string, count)
	for i := range out {
		size := n / count
		if i == 0 {
			size += n % count
		}
		e := "0" + strings.Repeat(" ", size-1)
		if i == 0 {
			e = "'" + strings.Repeat("é", size-2) + "'"
		}
		out[i] = &e
	}
	return out
}

// everyExpression is a Tool with an expression in each field that holds
// one, n characters together: each is counted, or the Tool one character
// over would be taken.
func everyExpression(n int) v1.ToolSpec {
	named := func(name string) []v1.NamedValue { return []v1.NamedValue{{Name: name}} }
	shape := func() *v1.RequestShape {
		return &v1.RequestShape{PathValues: named("a"), Query: named("q"), Headers: named("h")}
	}
	op := v1.ToolOperation{Name: "op", Path: "/op/{a}", Request: shape(),
		Lookup:   &v1.LookupRequest{Path: "/op/{a}", Request: shape()},
		Validate: &v1.ValidateRequest{Path: "/op/{a}", Request: shape()},
		Response: v1.ResponseMapping{Outcomes: []v1.OutcomeRule{{Outcome: v1.OutcomeSucceeded}}}}
	spec := v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative}, Operations: []v1.ToolOperation{op}}
	o := &spec.Operations[0]
	var fields []*string
	for _, sh := range []*v1.RequestShape{o.Request, o.Lookup.Request, o.Validate.Request} {
		fields = append(fields, &sh.PathValues[0].Value, &sh.Query[0].Value, &sh.Headers[0].Value, &sh.Body)
	}
	fields = append(fields, &spec.Idempotency.Replayed, &o.Lookup.Found, &o.Lookup.Absent, &o.Validate.Valid,
		&o.Validate.Invalid, &o.Validate.Message, &o.Response.Outcomes[0].When, &o.Response.ExternalObjectID,
		&o.Response.ExternalRequestID, &o.Response.Result)
	for i, e := range spread(n, len(fields)) {
		*fields[i] = *e
	}
	return spec
}
