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

package saga

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/worstcase"
)

// sagaAllocBound is what computing one step's parameters may allocate:
// TestWorkBounded's bound, for the cost limit of a million.
const sagaAllocBound = 48 << 20

// FuzzParameters compiles a saga whose second step computes a parameter
// by an expression over the inputs and the first step's outcome, and
// computes it, as the saga controller does. Either Compile refuses it,
// or Parameters returns canonical JSON holding the parameter, or it
// refuses with the cost limit's error, the time limit's, a guard's or
// CEL's own; it allocates at most sagaAllocBound bytes, and takes at most
// five times its time limit.
func FuzzParameters(f *testing.F) {
	inputs := `{"service":"web","replicas":3,"tags":["a","b"],"items":[{"q":1},{"q":2}]}`
	result := `{"id":"t-1","number":7}`
	for _, expr := range []string{
		"'Scale ' + inputs.service + ' to ' + string(inputs.replicas)",
		"inputs.tags.join(',')",
		"steps.ticket.result.number + 1",
		"steps.ticket.externalObjectID.replace('t', steps.ticket.externalObjectID)",
		"inputs.items.filter(i, i.q > 1).map(i, i.q)",
		"inputs.service.matches('^[a-z]{1,40}$')",
		"{'a': inputs.tags, 'b': [inputs.service, inputs.service]}",
		"inputs.items.map(a, inputs.items.map(b, inputs.items.map(c, string(a.q) + string(b.q))))",
		"'%s/%d'.format([inputs.service, inputs.replicas])",
	} {
		f.Add(expr, inputs, result)
	}
	f.Fuzz(func(t *testing.T, expr, inputs, result string) {
		if len(expr) > 4096 {
			return
		}
		spec := &v1.SagaSpec{Inputs: &k8sruntime.RawExtension{Raw: []byte(inputs)}, Steps: []v1.SagaStep{
			exprStep("ticket", nil, nil), exprStep("order", from("p", expr), nil)}}
		if inputs == "" {
			spec.Inputs = nil
		}
		plan, err := Compile(spec)
		if err != nil {
			return
		}
		data := map[string]StepData{"ticket": {Result: []byte(result), ExternalObjectID: "t-1"}}
		var out []byte
		n, took := worstcase.Allocated(func() { out, err = plan.Parameters(context.Background(), 1, false, []byte(inputs), data) })
		if n > sagaAllocBound {
			t.Fatalf("%q allocated %d bytes, more than %d", expr, n, sagaAllocBound)
		}
		if took > 5*DefaultEvalTimeout {
			t.Fatalf("%q ran for %s, past its time limit of %s", expr, took, DefaultEvalTimeout)
		}
		if err != nil {
			if strings.Contains(err.Error(), "cost") &&
				!strings.Contains(err.Error(), fmt.Sprintf("stopped at the cost limit of %d", costLimit)) &&
				!strings.Contains(err.Error(), "would") {
				t.Fatalf("%q refused about its cost, not at the limit: %v", expr, err)
			}
			if errors.Is(err, ErrTimeLimit) && took < DefaultEvalTimeout {
				t.Fatalf("%q stopped by the time limit after %s only", expr, took)
			}
			return
		}
		canonical, err := protocol.Canonical(out)
		if err != nil || !bytes.Equal(canonical, out) {
			t.Fatalf("%q: parameters %q are not canonical JSON (%v)", expr, out, err)
		}
		if !bytes.Contains(out, []byte(`"p":`)) {
			t.Fatalf("%q: parameters %q lack the computed p", expr, out)
		}
	})
}
