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
	"net/url"
	"strconv"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/internal/saga"
)

// Key places an object among the shards: 64 bits of a digest of what must
// stay together.
type Key uint64

// Shard is the key's shard among n; n must be positive.
func (k Key) Shard(n int) int {
	return int(uint64(k) % uint64(n))
}

// OperationKey is the key of an operation's scope (namespace, tool,
// operation, effective idempotency key), taken from the scope's record
// name: every operation of a scope, and the scope's IdempotencyRecord,
// fall in one shard.
func OperationKey(op *v1.SideEffectOperation) Key {
	return RecordKey(protocol.OperationScope(op).RecordName())
}

// RecordKey is the key of the IdempotencyRecord named name, the same as
// its operations'.
func RecordKey(name string) Key {
	return digestKey(strings.TrimPrefix(name, "scope-"))
}

// SagaKey is the key of a saga: its namespace and its effective
// idempotency key, so that two sagas with one key fall in one shard.
func SagaKey(s *v1.Saga) Key {
	return digestKey(strings.TrimPrefix(protocol.Digest([]byte(
		url.PathEscape(s.Namespace)+"/"+url.PathEscape(saga.Key(s.Name, &s.Spec)))), "sha256:"))
}

// ObjectKey is the key of a sharded object; false for kinds that are not
// sharded.
func ObjectKey(o client.Object) (Key, bool) {
	switch o := o.(type) {
	case *v1.SideEffectOperation:
		return OperationKey(o), true
	case *v1.Saga:
		return SagaKey(o), true
	case *v1.IdempotencyRecord:
		return RecordKey(o.Name), true
	default:
		return 0, false
	}
}

// digestKey is the first 64 bits of a hex digest; anything else (a record
// named by hand) is digested first.
func digestKey(hex string) Key {
	if len(hex) >= 16 {
		if k, err := strconv.ParseUint(hex[:16], 16, 64); err == nil {
			return Key(k)
		}
	}
	return digestKey(strings.TrimPrefix(protocol.Digest([]byte(hex)), "sha256:"))
}
