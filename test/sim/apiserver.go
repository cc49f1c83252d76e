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

package sim

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// Scheme holds the kinds the simulated API server serves.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// The kinds the simulator reads by name.
const (
	kindOperation = "SideEffectOperation"
	kindRecord    = "IdempotencyRecord"
	kindSaga      = "Saga"
	kindTool      = "Tool"
	kindNamespace = "Namespace"
)

// objKey names a stored object.
type objKey struct {
	Kind string
	types.NamespacedName
}

func (k objKey) String() string {
	if k.Namespace == "" {
		return strings.ToLower(k.Kind) + "/" + k.Name
	}
	return strings.ToLower(k.Kind) + "/" + k.Namespace + "/" + k.Name
}

// change is one write the API server made: the object as it is after it,
// nil when it was removed. Caches follow the server by applying changes.
type change struct {
	key objKey
	obj client.Object
}

// APIServer models what Once relies on of the Kubernetes API server:
// resourceVersion compare-and-swap on every write, generateName, the
// status subresource (a status write leaves spec and metadata alone, a
// spec write leaves the status alone and bumps the generation), spec
// immutability and a cancel that cannot be taken back (the CRD's CEL
// rules), finalizers and deletion timestamps,
// preconditions on delete, owner-reference garbage collection (what an
// owner owned, and what was created after it went, when the collector next
// looks), namespace
// deletion, and the finalizer the admission policy adds to an operation at
// create (config/policy). Each behaviour it models has a test against a
// real API server (apiserver_test.go).
type APIServer struct {
	now     func() metav1.Time
	rv      int64
	uids    int64
	objects map[objKey]client.Object
	log     []change
	// NoFinalizerPolicy leaves out the admission policy that adds the
	// record finalizer at create, as on a cluster without it.
	NoFinalizerPolicy bool
	// AdmissionLag is how long after a namespace is marked terminating
	// its admission still lets creates in: the NamespaceLifecycle plugin
	// decides from an informer's view of the namespace, which lags, and
	// the namespace controller sweeps again for what got in.
	AdmissionLag time.Duration
	// Observe, if set, sees every stored write as it lands: the object
	// as it was and as it is (nil when absent).
	Observe func(old, cur client.Object)
	// Landed, if set, runs after every stored write, once it is visible.
	Landed func()
	// Wrote, if set, counts every stored write by the key it wrote.
	Wrote func(k objKey)
}

// NewAPIServer starts an empty API server on the clock's time.
func NewAPIServer(now func() metav1.Time) *APIServer {
	return &APIServer{now: now, objects: map[objKey]client.Object{}}
}

func kindOf(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, Scheme)
	if err != nil {
		panic(fmt.Sprintf("sim: unknown kind %T: %v", obj, err))
	}
	return gvk.Kind
}

func keyOf(obj client.Object) objKey {
	return objKey{Kind: kindOf(obj), NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
}

func gr(kind string) schema.GroupResource {
	return schema.GroupResource{Group: v1.GroupVersion.Group, Resource: strings.ToLower(kind) + "s"}
}

// copyInto sets dst, a pointer to a typed object, to a deep copy of src.
func copyInto(dst, src runtime.Object) {
	reflect.ValueOf(dst).Elem().Set(reflect.ValueOf(src.DeepCopyObject()).Elem())
}

func (s *APIServer) nextRV() string {
	s.rv++
	return fmt.Sprint(s.rv)
}

func (s *APIServer) put(k objKey, obj client.Object) {
	if s.Observe != nil {
		s.Observe(s.objects[k], obj)
	}
	if obj == nil {
		delete(s.objects, k)
		if k.Kind != kindLease {
			s.log = append(s.log, change{key: k})
		}
	} else {
		s.objects[k] = obj
		// No manager watches Leases: the Sharder reads them past its cache.
		if k.Kind != kindLease {
			s.log = append(s.log, change{key: k, obj: obj.DeepCopyObject().(client.Object)})
		}
	}
	if k.Kind == kindLease {
		// A Lease's renewals are the Sharder's heartbeat, not Once's
		// writes: they neither count at rest nor change what is kept.
		return
	}
	if s.Wrote != nil {
		s.Wrote(k)
	}
	if s.Landed != nil {
		s.Landed()
	}
}

// Get reads an object.
func (s *APIServer) Get(k objKey, into client.Object) error {
	o, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	copyInto(into, o)
	return nil
}

// List returns copies of the objects of a kind, by name.
func (s *APIServer) List(kind, namespace string) []client.Object {
	return listOf(s.objects, kind, namespace, true)
}

// peek returns the stored objects of a kind in the world's namespace
// themselves, by name: for the checker, which reads them after every step
// and never writes them.
func (s *APIServer) peek(kind string) []client.Object {
	return listOf(s.objects, kind, Namespace, false)
}

func listOf(objects map[objKey]client.Object, kind, namespace string, copied bool) []client.Object {
	var out []client.Object
	for k, o := range objects {
		if k.Kind == kind && (namespace == "" || k.Namespace == namespace) {
			if copied {
				o = o.DeepCopyObject().(client.Object)
			}
			out = append(out, o)
		}
	}
	slices.SortFunc(out, func(a, b client.Object) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
	return out
}

// Create stores a new object, as the API server does: a generated name if
// asked, a uid, resourceVersion 1-up, generation 1, no status (the status
// subresource), and the record finalizer on an operation.
func (s *APIServer) Create(obj client.Object) error {
	if obj.GetName() == "" && obj.GetGenerateName() != "" {
		s.uids++
		obj.SetName(fmt.Sprintf("%s%05d", obj.GetGenerateName(), s.uids))
	}
	k := keyOf(obj)
	if obj.GetResourceVersion() != "" {
		// The real API server answers a bare 500, with no reason.
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: 500,
			Message: "resourceVersion should not be set on objects to be created"}}
	}
	// Admission (the namespace's lifecycle) comes before the name.
	if k.Namespace != "" {
		ns, ok := s.objects[namespaceKey(k.Namespace)]
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, k.Namespace)
		}
		if since := ns.GetDeletionTimestamp(); !since.IsZero() && !s.now().Time.Before(since.Add(s.AdmissionLag)) {
			err := apierrors.NewForbidden(gr(k.Kind), k.Name,
				fmt.Errorf("unable to create new content in namespace %s because it is being terminated", k.Namespace))
			err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
				Type: corev1.NamespaceTerminatingCause, Message: "namespace " + k.Namespace + " is being terminated"})
			return err
		}
	}
	if _, ok := s.objects[k]; ok {
		return apierrors.NewAlreadyExists(gr(k.Kind), k.Name)
	}
	stored := obj.DeepCopyObject().(client.Object)
	s.uids++
	stored.SetUID(types.UID(fmt.Sprintf("uid-%05d", s.uids)))
	stored.SetResourceVersion(s.nextRV())
	stored.SetGeneration(1)
	stored.SetCreationTimestamp(s.now())
	stored.SetDeletionTimestamp(nil)
	if kindGroup(stored) == v1.GroupVersion.Group {
		// Once's kinds have a status subresource: a create sets none.
		setField(stored, reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object), "Status")
	}
	if op, ok := stored.(*v1.SideEffectOperation); ok {
		if !s.NoFinalizerPolicy {
			controllerutil.AddFinalizer(op, v1.FinalizerRecord)
		}
	}
	s.put(k, stored)
	copyInto(obj, stored)
	return nil
}

// Orphans are the objects whose owners are all gone: what a deleted owner
// owned, and what was created after its owner went (a saga's pass that read
// its saga before a person deleted it creates the next step after), by
// name, in order. The garbage collector deletes them when it next looks
// (CollectOrphans), not at once: until then a manager may reconcile them.
func (s *APIServer) Orphans() []objKey {
	var out []objKey
	for k, o := range s.objects {
		if s.orphan(o) {
			out = append(out, k)
		}
	}
	sortKeys(out)
	return out
}

// CollectOrphans is the garbage collector's pass over the orphans: it
// deletes each (one with finalizers is marked deleted), in the background
// propagation's order: the owner first, then what it owned.
func (s *APIServer) CollectOrphans() {
	for _, k := range s.Orphans() {
		if o, ok := s.objects[k]; ok && o.GetDeletionTimestamp().IsZero() {
			_ = s.Delete(o, nil)
		}
	}
}

func (s *APIServer) orphan(o client.Object) bool {
	refs := o.GetOwnerReferences()
	if len(refs) == 0 || !o.GetDeletionTimestamp().IsZero() {
		return false
	}
	for _, ref := range refs {
		for _, owner := range s.objects {
			if owner.GetUID() == ref.UID {
				return false
			}
		}
	}
	return true
}

// Update replaces an object's spec and metadata (status false) or its
// status (status true), conditional on its resourceVersion.
func (s *APIServer) Update(obj client.Object, status bool) error {
	k := keyOf(obj)
	cur, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	if obj.GetResourceVersion() == "" {
		// Custom resources allow no unconditional update.
		return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: k.Kind}, k.Name, field.ErrorList{
			field.Invalid(field.NewPath("metadata", "resourceVersion"), "", "must be specified for an update")})
	}
	if rv := obj.GetResourceVersion(); rv != cur.GetResourceVersion() {
		return apierrors.NewConflict(gr(k.Kind), k.Name,
			fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
	}
	if obj.GetUID() != "" && obj.GetUID() != cur.GetUID() {
		return apierrors.NewConflict(gr(k.Kind), k.Name, fmt.Errorf("precondition failed: UID in object meta"))
	}
	next := cur.DeepCopyObject().(client.Object)
	if status {
		setField(next, obj, "Status")
	} else {
		if err := checkImmutable(cur, obj); err != nil {
			return err
		}
		// A Lease keeps no generation (its strategy sets none).
		specChanged := hasField(obj, "Spec") && k.Kind != kindLease && !sameJSON(fieldOf(cur, "Spec"), fieldOf(obj, "Spec"))
		setField(next, obj, "Spec")
		// Metadata a client may change; the rest is the server's.
		next.SetLabels(obj.GetLabels())
		next.SetAnnotations(obj.GetAnnotations())
		next.SetOwnerReferences(obj.GetOwnerReferences())
		if !cur.GetDeletionTimestamp().IsZero() && addsFinalizer(cur.GetFinalizers(), obj.GetFinalizers()) {
			return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: k.Kind}, k.Name, field.ErrorList{
				field.Forbidden(field.NewPath("metadata", "finalizers"), "no new finalizers can be added if the object is being deleted")})
		}
		next.SetFinalizers(obj.GetFinalizers())
		if specChanged {
			next.SetGeneration(cur.GetGeneration() + 1)
		}
		if !cur.GetDeletionTimestamp().IsZero() && len(next.GetFinalizers()) == 0 {
			s.remove(k, cur)
			copyInto(obj, next)
			return nil
		}
	}
	if equality.Semantic.DeepEqual(next, cur) {
		// A write that changes nothing is not a write: the version stays.
		copyInto(obj, cur)
		return nil
	}
	next.SetResourceVersion(s.nextRV())
	s.put(k, next)
	copyInto(obj, next)
	return nil
}

// Patch applies a JSON merge patch, as a client's MergeFrom makes it; with
// MergeFromWithOptimisticLock the patch carries the resourceVersion, which
// must match.
func (s *APIServer) Patch(obj client.Object, patch client.Patch, status bool) error {
	k := keyOf(obj)
	cur, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	if patch.Type() != types.MergePatchType {
		return apierrors.NewBadRequest("sim: only merge patches are modelled, got " + string(patch.Type()))
	}
	data, err := patch.Data(obj)
	if err != nil {
		return err
	}
	curJSON, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	merged, err := jsonpatch.MergePatch(curJSON, data)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	next := cur.DeepCopyObject().(client.Object)
	copyInto(next, reflect.New(reflect.TypeOf(cur).Elem()).Interface().(runtime.Object))
	if err := json.Unmarshal(merged, next); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	// A patch without a resourceVersion applies to the current one.
	var probe struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(data, &probe)
	if probe.Metadata.ResourceVersion == "" {
		next.SetResourceVersion(cur.GetResourceVersion())
	}
	if err := s.Update(next, status); err != nil {
		return err
	}
	copyInto(obj, next)
	return nil
}

// Delete deletes an object under its preconditions: at once if it has no
// finalizers, else by setting its deletion timestamp. Objects it owns are
// collected with it (background propagation, at once).
func (s *APIServer) Delete(obj client.Object, pre *metav1.Preconditions) error {
	k := keyOf(obj)
	cur, ok := s.objects[k]
	if !ok {
		return apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	if pre != nil {
		if pre.UID != nil && *pre.UID != cur.GetUID() {
			return apierrors.NewConflict(gr(k.Kind), k.Name, fmt.Errorf("precondition failed: UID"))
		}
		if pre.ResourceVersion != nil && *pre.ResourceVersion != cur.GetResourceVersion() {
			return apierrors.NewConflict(gr(k.Kind), k.Name, fmt.Errorf("precondition failed: ResourceVersion"))
		}
	}
	if k.Kind == kindNamespace {
		return s.deleteNamespace(k, cur)
	}
	if len(cur.GetFinalizers()) == 0 {
		s.remove(k, cur)
		return nil
	}
	if cur.GetDeletionTimestamp().IsZero() {
		next := cur.DeepCopyObject().(client.Object)
		now := s.now()
		next.SetDeletionTimestamp(&now)
		next.SetResourceVersion(s.nextRV())
		s.put(k, next)
	}
	return nil
}

// remove takes an object out of the store. What it owned is left to the
// garbage collector, which deletes it when it next looks (CollectOrphans).
func (s *APIServer) remove(k objKey, _ client.Object) {
	s.put(k, nil)
	s.finishNamespace(k.Namespace)
}

// deleteNamespace marks a namespace terminating and deletes what it holds;
// the namespace goes when the last object has gone (finalizers honoured).
func (s *APIServer) deleteNamespace(k objKey, cur client.Object) error {
	s.markTerminating(k, cur)
	s.DeleteKind(k.Name, "")
	return nil
}

// markTerminating marks a namespace deleted: it takes no new content, and
// goes once it holds nothing.
func (s *APIServer) markTerminating(k objKey, cur client.Object) {
	if cur.GetDeletionTimestamp().IsZero() {
		next := cur.DeepCopyObject().(client.Object)
		now := s.now()
		next.SetDeletionTimestamp(&now)
		next.SetResourceVersion(s.nextRV())
		s.put(k, next)
	}
}

// Terminate marks the namespace deleted without deleting what it holds:
// the first call of the namespace controller (Options.NamespaceByKind).
func (s *APIServer) Terminate(name string) {
	k := namespaceKey(name)
	if cur, ok := s.objects[k]; ok {
		s.markTerminating(k, cur)
		s.finishNamespace(name)
	}
}

// DeleteKind deletes every object of kind (every kind, if empty) in the
// namespace, one with finalizers marked deleted, as the namespace
// controller's delete of one resource type does; the namespace goes if
// nothing is left in it.
func (s *APIServer) DeleteKind(namespace, kind string) {
	var inside []objKey
	for ok := range s.objects {
		if ok.Namespace == namespace && (kind == "" || ok.Kind == kind) {
			inside = append(inside, ok)
		}
	}
	sortKeys(inside)
	for _, ok := range inside {
		if o, still := s.objects[ok]; still {
			_ = s.Delete(o, nil)
		}
	}
	s.finishNamespace(namespace)
}

// Kinds are the kinds of the objects in the namespace, sorted.
func (s *APIServer) Kinds(namespace string) []string {
	var out []string
	for ok := range s.objects {
		if ok.Namespace == namespace && !slices.Contains(out, ok.Kind) {
			out = append(out, ok.Kind)
		}
	}
	slices.Sort(out)
	return out
}

// sortKeys orders keys by name, so that what follows from them is the same
// on every run.
func sortKeys(keys []objKey) {
	slices.SortFunc(keys, func(a, b objKey) int { return cmp.Compare(a.String(), b.String()) })
}

// namespaceKey is the key of the namespace name.
func namespaceKey(name string) objKey {
	return objKey{Kind: kindNamespace, NamespacedName: types.NamespacedName{Name: name}}
}

// finishNamespace removes a terminating namespace that holds nothing.
func (s *APIServer) finishNamespace(name string) {
	if name == "" {
		return
	}
	nk := namespaceKey(name)
	ns, ok := s.objects[nk]
	if !ok || ns.GetDeletionTimestamp().IsZero() {
		return
	}
	for ok := range s.objects {
		if ok.Namespace == name {
			return
		}
	}
	s.put(nk, nil)
}

// sameJSON reports whether a and b are the same as JSON documents: the
// API server stores what a client wrote as JSON, whatever its spacing.
func sameJSON(a, b any) bool {
	ja, erra := json.Marshal(a)
	jb, errb := json.Marshal(b)
	if erra != nil || errb != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}

// addsFinalizer reports whether next holds a finalizer that cur does not.
func addsFinalizer(cur, next []string) bool {
	for _, f := range next {
		if !slices.Contains(cur, f) {
			return true
		}
	}
	return false
}

// checkImmutable enforces the CRD's CEL rules that make an operation's
// spec immutable but for a few fields:
//
//   - spec.resolution may change only while the operation is in
//     NeedsReview;
//   - spec.ttlSecondsAfterFinished and spec.suspend may change at any time;
//   - spec.cancel may be set at any time, and never taken back.
//
// Parameters compare as JSON, not as bytes.
func checkImmutable(cur, obj client.Object) error {
	o, ok := cur.(*v1.SideEffectOperation)
	if !ok {
		return nil
	}
	n := obj.(*v1.SideEffectOperation)
	a, b := o.Spec.DeepCopy(), n.Spec.DeepCopy()
	if b.Resolution != nil && !equality.Semantic.DeepEqual(a.Resolution, b.Resolution) && o.Status.State != v1.StateNeedsReview {
		return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: kindOperation},
			o.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "resolution"), "",
				"spec.resolution can be set only while the operation is in NeedsReview")})
	}
	if a.Cancel && !b.Cancel {
		return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: kindOperation},
			o.Name, field.ErrorList{field.Invalid(field.NewPath("spec"), "",
				"spec.cancel cannot be taken back")})
	}
	a.Resolution, b.Resolution = nil, nil
	a.TTLSecondsAfterFinished, b.TTLSecondsAfterFinished = nil, nil
	a.Suspend, b.Suspend = false, false
	a.Cancel, b.Cancel = false, false
	for _, s := range []*v1.SideEffectOperationSpec{a, b} {
		if s.Parameters != nil {
			var c bytes.Buffer
			if json.Compact(&c, s.Parameters.Raw) == nil {
				s.Parameters.Raw = c.Bytes()
			}
		}
	}
	if !equality.Semantic.DeepEqual(a, b) {
		return apierrors.NewInvalid(schema.GroupKind{Group: v1.GroupVersion.Group, Kind: kindOperation},
			o.Name, nil)
	}
	return nil
}

func hasField(obj runtime.Object, name string) bool {
	return reflect.ValueOf(obj).Elem().FieldByName(name).IsValid()
}

func fieldOf(obj runtime.Object, name string) any {
	f := reflect.ValueOf(obj).Elem().FieldByName(name)
	if !f.IsValid() {
		return nil
	}
	return f.Interface()
}

// setField copies a top-level field (Spec, Status, Data) from src to dst.
func setField(dst, src runtime.Object, name string) {
	d := reflect.ValueOf(dst).Elem().FieldByName(name)
	if !d.IsValid() {
		return
	}
	v := reflect.ValueOf(src.DeepCopyObject()).Elem().FieldByName(name)
	d.Set(v)
}

// kindGroup is the API group of an object's kind.
func kindGroup(obj runtime.Object) string {
	gvk, err := apiutil.GVKForObject(obj, Scheme)
	if err != nil {
		return ""
	}
	return gvk.Group
}

// itemKind is the kind of a list's items.
func itemKind(list client.ObjectList) string {
	return strings.TrimSuffix(kindOf(list), "List")
}
