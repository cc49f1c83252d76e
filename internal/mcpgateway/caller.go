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

package mcpgateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Scheme holds the kinds the gateway reads and writes.
var Scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(v1.AddToScheme(Scheme))
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(authenticationv1.AddToScheme(Scheme))
	utilruntime.Must(authorizationv1.AddToScheme(Scheme))
}

// mapper maps the gateway's kinds without discovery, so that a caller's
// client costs no request before its first real one.
var mapper = func() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	add := func(gv schema.GroupVersion, kind string, scope meta.RESTScope) {
		m.Add(gv.WithKind(kind), scope)
	}
	for _, k := range []string{"SideEffectOperation", "Saga", "Tool", "IdempotencyRecord"} {
		add(v1.GroupVersion, k, meta.RESTScopeNamespace)
	}
	add(v1.GroupVersion, "ClusterTool", meta.RESTScopeRoot)
	add(corev1.SchemeGroupVersion, "Namespace", meta.RESTScopeRoot)
	add(authenticationv1.SchemeGroupVersion, "SelfSubjectReview", meta.RESTScopeRoot)
	add(authenticationv1.SchemeGroupVersion, "TokenReview", meta.RESTScopeRoot)
	add(authorizationv1.SchemeGroupVersion, "SelfSubjectAccessReview", meta.RESTScopeRoot)
	return m
}()

// caller is who makes a request, with a client that acts as them.
type caller struct {
	// user is the name the API server knows the caller by.
	user string
	kube client.Client
}

// errUnauthenticated: the request carries no bearer token.
var errUnauthenticated = errors.New("the request carries no bearer token: send the caller's Kubernetes token " +
	"as Authorization: Bearer <token>")

// newCaller makes a client with cfg and asks the API server whose
// credentials they are (a SelfSubjectReview, which every authenticated
// user may make).
func newCaller(ctx context.Context, cfg *rest.Config) (*caller, error) {
	kube, err := client.New(cfg, client.Options{Scheme: Scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("making a client: %w", err)
	}
	review := &authenticationv1.SelfSubjectReview{}
	if err := kube.Create(ctx, review); err != nil {
		return nil, fmt.Errorf("asking the API server who the caller is: %w", err)
	}
	user := review.Status.UserInfo.Username
	if user == "" {
		return nil, errors.New("the API server did not name the caller")
	}
	return &caller{user: user, kube: kube}, nil
}

// bearer is the token of an Authorization: Bearer header.
func bearer(h http.Header) string {
	v := h.Get("Authorization")
	scheme, token, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// canCreate asks the API server whether the caller may create resource
// (sideeffectoperations, sagas) in namespace.
func (c *caller) canCreate(ctx context.Context, namespace, resource string) (bool, error) {
	return c.may(ctx, namespace, "create", resource)
}

// may asks the API server whether the caller may verb resource (of Once's
// group) in namespace.
func (c *caller) may(ctx context.Context, namespace, verb, resource string) (bool, error) {
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: namespace, Verb: verb, Group: v1.GroupVersion.Group, Resource: resource,
		},
	}}
	if err := c.kube.Create(ctx, r); err != nil {
		return false, fmt.Errorf("asking the API server what the caller may do: %w", err)
	}
	return r.Status.Allowed, nil
}

// operationExists reports whether the caller's namespace holds an
// operation of that name. A caller that may not read it gets a Forbidden
// error, not "none": the operation may exist and may have run, so the
// gateway cannot say that nothing was done under the key.
func (c *caller) operationExists(ctx context.Context, namespace, name string) (bool, error) {
	err := c.kube.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &v1.SideEffectOperation{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	case apierrors.IsForbidden(err):
		return false, fmt.Errorf("%s may not get sideeffectoperations.%s in namespace %s, so the gateway cannot tell "+
			"whether this key was used before; it did nothing for this call: %w", c.user, v1.GroupVersion.Group,
			namespace, err)
	}
	return false, fmt.Errorf("reading operation %s/%s: %w", namespace, name, err)
}
