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
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// CacheOptions are the manager's cache options, for cmd/main.go and the
// test suites alike: the cache keeps, of every object it holds, only what
// some controller reads. A manager keeps every SideEffectOperation and
// IdempotencyRecord of the cluster, committed ones included, for as long
// as they exist; what it keeps of each is multiplied by their number
// (docs/performance.md).
func CacheOptions() cache.Options {
	return cache.Options{DefaultTransform: StripUnread}
}

// StripUnread removes from an object, before the cache stores it, what no
// controller reads and no write sends back:
//
//   - metadata.managedFields, of every object. No code reads them, and the
//     API server keeps an object's managed fields when an update carries
//     none (it takes them from the stored object; a status update ignores
//     the ones it is sent in any case).
//   - the annotation kubectl.kubernetes.io/last-applied-configuration,
//     which kubectl apply writes and which is as large as the spec, of
//     the kinds whose main resource the manager never updates whole
//     (SideEffectOperation, Saga, Tool, ClusterTool): it writes their
//     status subresource, which ignores every metadata change, and it
//     adds and removes an operation's finalizer with a merge patch, which
//     sends the finalizers alone. So the stripped annotation is never
//     written back. IdempotencyRecords keep theirs: the manager updates
//     their spec, and an update of the main resource would erase it.
//
// Status is never stripped: every status write sends the status of the
// object it read, and the decision core reads all of it.
func StripUnread(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		// Not an object (a tombstone): leave it as it is.
		return in, nil
	}
	if obj.GetManagedFields() != nil {
		obj.SetManagedFields(nil)
	}
	switch in.(type) {
	case *v1.SideEffectOperation, *v1.Saga, *v1.Tool, *v1.ClusterTool:
		if a := obj.GetAnnotations(); a != nil {
			if _, ok := a[corev1.LastAppliedConfigAnnotation]; ok {
				delete(a, corev1.LastAppliedConfigAnnotation)
				if len(a) == 0 {
					obj.SetAnnotations(nil)
				}
			}
		}
	}
	return in, nil
}

// WatchOnly restricts the cache of o to namespaces, when there are any:
// the manager then lists and watches operations, sagas, Tools and scope
// records there alone, and needs rights there alone. Config.WatchNamespaces
// must name the same namespaces, so that no controller asks the cache for a
// cluster-scoped kind.
func WatchOnly(o cache.Options, namespaces []string) cache.Options {
	if len(namespaces) == 0 {
		return o
	}
	o.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
	for _, ns := range namespaces {
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	return o
}
