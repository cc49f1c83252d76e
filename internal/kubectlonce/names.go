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

package kubectlonce

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// parseName reads NAME, seo/NAME or saga/NAME (and the other spellings of
// the two kinds kubectl accepts). The kind is nil for a bare name; asSaga
// (--saga) makes a bare name a saga's.
func parseName(arg string, asSaga bool) (*kind, string, error) {
	prefix, name, found := strings.Cut(arg, "/")
	if !found {
		if arg == "" {
			return nil, "", fmt.Errorf("a name is required")
		}
		if asSaga {
			return &sagaKind, arg, nil
		}
		return nil, arg, nil
	}
	if name == "" || strings.Contains(name, "/") {
		return nil, "", fmt.Errorf("%q is not a name: say NAME, seo/NAME or saga/NAME", arg)
	}
	var k *kind
	switch strings.TrimSuffix(strings.ToLower(prefix), "."+v1.GroupVersion.Group) {
	case "seo", "seos", "sideeffectoperation", "sideeffectoperations":
		k = &operationKind
	case "saga", "sagas", "sg":
		k = &sagaKind
	default:
		return nil, "", fmt.Errorf("%q is neither a SideEffectOperation (seo/NAME) nor a Saga (saga/NAME)", prefix)
	}
	if asSaga && k != &sagaKind {
		return nil, "", fmt.Errorf("--saga and %s disagree", arg)
	}
	return k, name, nil
}

// found is what a name named: an operation or a saga.
type found struct {
	op   *v1.SideEffectOperation
	saga *v1.Saga
}

// find gets the object a name names. A bare name is looked up as both an
// operation and a saga; a name both have is ambiguous.
func find(ctx context.Context, c client.Client, ns string, k *kind, name string) (found, error) {
	key := client.ObjectKey{Namespace: ns, Name: name}
	var f found
	var opErr, sagaErr error
	if k == nil || k == &operationKind {
		op := &v1.SideEffectOperation{}
		if opErr = c.Get(ctx, key, op); opErr == nil {
			f.op = op
		} else if k != nil || !apierrors.IsNotFound(opErr) {
			return found{}, apiError(opErr, "get", operationKind, ns, name)
		}
	}
	if k == nil || k == &sagaKind {
		s := &v1.Saga{}
		if sagaErr = c.Get(ctx, key, s); sagaErr == nil {
			f.saga = s
		} else if k != nil || !apierrors.IsNotFound(sagaErr) {
			return found{}, apiError(sagaErr, "get", sagaKind, ns, name)
		}
	}
	switch {
	case f.op != nil && f.saga != nil:
		return found{}, fmt.Errorf("both a SideEffectOperation and a Saga are named %s in namespace %s: say seo/%s or saga/%s",
			name, ns, name, name)
	case f.op == nil && f.saga == nil:
		return found{}, fmt.Errorf("no SideEffectOperation or Saga %s in namespace %s", name, ns)
	}
	return f, nil
}
