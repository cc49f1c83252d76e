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
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/review"
)

// kind is one of the kinds the plugin reads and writes.
type kind struct {
	// Name is the kind, SideEffectOperation or Saga.
	Name string
	// Resource is its plural resource name.
	Resource string
}

var (
	operationKind = kind{Name: "SideEffectOperation", Resource: "sideeffectoperations"}
	sagaKind      = kind{Name: "Saga", Resource: "sagas"}
)

// groupResource is the kind's resource in Once's group, as RBAC names it.
func (k kind) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: v1.GroupVersion.Group, Resource: k.Resource}
}

// apiError turns an error of the API server into one a person can act
// on: which verb on which resource they may not use, which object does not
// exist, what the server refused and why. verb is the verb of the request
// (get, list, patch), name is empty for a list and ns empty for a list
// across all namespaces.
func apiError(err error, verb string, k kind, ns, name string) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err):
		res := k.groupResource().String()
		if errors.As(err, &status) {
			if d := status.Status().Details; d != nil && d.Kind != "" {
				res = schema.GroupResource{Group: d.Group, Resource: d.Kind}.String()
			}
		}
		where := "in namespace " + ns
		if ns == "" {
			where = "in all namespaces"
		}
		return fmt.Errorf("you may not %s %s %s", verb, res, where)
	case apierrors.IsNotFound(err) && name != "":
		return fmt.Errorf("no %s %s in namespace %s", k.Name, name, ns)
	case apierrors.IsInvalid(err) && errors.As(err, &status):
		var why []string
		if d := status.Status().Details; d != nil {
			for _, c := range d.Causes {
				if c.Field != "" {
					c.Message = c.Field + ": " + c.Message
				}
				why = append(why, c.Message)
			}
		}
		if len(why) == 0 {
			why = append(why, status.Status().Message)
		}
		return fmt.Errorf("the API server refused to %s %s %s: %s", verb, k.Name, name, strings.Join(why, "; "))
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return fmt.Errorf("the API server does not serve %s: are Once's CRDs installed? (%w)", k.groupResource(), err)
	}
	if name == "" {
		return fmt.Errorf("%s %s: %w", verb, k.groupResource(), err)
	}
	return fmt.Errorf("%s %s %s: %w", verb, k.Name, name, err)
}

// requestError words an error of the API server that internal/review met
// as apiError does, for the request that met it; any other error (a
// refusal, a conflict) is returned as it is.
func requestError(err error) error {
	var re *review.RequestError
	if !errors.As(err, &re) {
		return err
	}
	k := operationKind
	if re.Kind == review.KindSaga {
		k = sagaKind
	}
	return apiError(re.Err, re.Verb, k, re.Namespace, re.Name)
}
