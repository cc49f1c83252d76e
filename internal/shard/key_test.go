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

package shard

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
)

func op(ns, name, kind, tool, operation, key string) *v1.SideEffectOperation {
	return &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Kind: v1.ToolKind(kind), Name: tool},
			Operation: operation, IdempotencyKey: key}}
}

func sagaObj(ns, name, key string) *v1.Saga {
	return &v1.Saga{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1.SagaSpec{IdempotencyKey: key}}
}

func TestOperationKey(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   *v1.SideEffectOperation
		same   bool
	}{
		"OneScopeTwoNames": {reason: "Two operations of one scope fall in one shard, whatever their names.",
			a: op("ns", "a", "", "pay", "charge", "k"), b: op("ns", "b", "", "pay", "charge", "k"), same: true},
		"NameIsTheKey": {reason: "An operation without a key is scoped by its name, like one whose key is that name.",
			a: op("ns", "k", "", "pay", "charge", ""), b: op("ns", "other", "", "pay", "charge", "k"), same: true},
		"DefaultKind": {reason: "A tool reference without a kind is a Tool.",
			a: op("ns", "a", "", "pay", "charge", "k"), b: op("ns", "a", "Tool", "pay", "charge", "k"), same: true},
		"OtherNamespace": {reason: "Scopes in two namespaces are two keys.",
			a: op("ns1", "a", "", "pay", "charge", "k"), b: op("ns2", "a", "", "pay", "charge", "k")},
		"OtherKey": {reason: "Two idempotency keys are two scopes.",
			a: op("ns", "a", "", "pay", "charge", "k1"), b: op("ns", "a", "", "pay", "charge", "k2")},
		"OtherTool": {reason: "Two tools are two scopes.",
			a: op("ns", "a", "", "pay", "charge", "k"), b: op("ns", "a", "ClusterTool", "pay", "charge", "k")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := OperationKey(tc.a) == OperationKey(tc.b); got != tc.same {
				t.Errorf("%s: same key: want %t, got %t", tc.reason, tc.same, got)
			}
		})
	}
}

func TestRecordKeyIsItsOperationsKey(t *testing.T) {
	o := op("ns", "a", "", "pay", "charge", "k")
	if got, want := RecordKey(protocol.OperationScope(o).RecordName()), OperationKey(o); got != want {
		t.Errorf("A scope's record must fall in its operations' shard: want %d, got %d", want, got)
	}
	rec := &v1.IdempotencyRecord{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: protocol.OperationScope(o).RecordName()}}
	if got, ok := ObjectKey(rec); !ok || got != OperationKey(o) {
		t.Errorf("ObjectKey of the record: want %d, got %d (sharded %t)", OperationKey(o), got, ok)
	}
	if RecordKey("by-hand-1") == RecordKey("by-hand-2") {
		t.Error("Records named by hand must be spread by their names' digests")
	}
}

func TestSagaKey(t *testing.T) {
	cases := map[string]struct {
		reason string
		a, b   *v1.Saga
		same   bool
	}{
		"OneKeyTwoNames": {reason: "Two sagas with one key fall in one shard.",
			a: sagaObj("ns", "a", "k"), b: sagaObj("ns", "b", "k"), same: true},
		"NameIsTheKey": {reason: "A saga without a key is keyed by its name.",
			a: sagaObj("ns", "k", ""), b: sagaObj("ns", "b", "k"), same: true},
		"OtherNamespace": {reason: "Sagas in two namespaces are two keys.",
			a: sagaObj("ns1", "a", "k"), b: sagaObj("ns2", "a", "k")},
		"NoEscapeForgery": {reason: "A slash in a namespace cannot forge another saga's key.",
			a: sagaObj("a", "b/c", ""), b: sagaObj("a/b", "c", "")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := SagaKey(tc.a) == SagaKey(tc.b); got != tc.same {
				t.Errorf("%s: same key: want %t, got %t", tc.reason, tc.same, got)
			}
		})
	}
}

func TestObjectKeyUnsharded(t *testing.T) {
	if _, ok := ObjectKey(&v1.Tool{}); ok {
		t.Error("Tools are not sharded")
	}
	var s *Sharder
	if !s.OwnsObject(op("ns", "a", "", "pay", "charge", "")) {
		t.Error("A nil Sharder must own every object: sharding is off")
	}
}

func TestKeysSpread(t *testing.T) {
	const n, objects = 16, 16_000
	counts := make([]int, n)
	for i := range objects {
		counts[OperationKey(op("ns", fmt.Sprintf("op-%d", i), "", "pay", "charge", "")).Shard(n)]++
	}
	fair := objects / n
	for i, c := range counts {
		// Within a tenth of the fair share: over six binomial deviations.
		if c < fair*9/10 || c > fair*11/10 {
			t.Errorf("Shard %d holds %d of %d operations, fair is %d", i, c, objects, fair)
		}
	}
}
