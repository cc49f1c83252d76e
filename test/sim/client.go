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
	"context"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/once-dev/once/internal/controller"
)

// Cache is one manager's informer cache: a copy of the server's objects
// as of some point of its change log, which the scheduler moves forward a
// change at a time (a lagging watch), and which a restart rebuilds from a
// fresh list.
type Cache struct {
	server  *APIServer
	applied int
	objects map[objKey]client.Object
	indexes map[string]map[string]client.IndexerFunc // kind → field → func
	// changed is told of every change the cache applies, with the object
	// before and after it (nil when absent).
	changed func(k objKey, old, cur client.Object)
}

// NewCache lists the server's objects as they are now.
func NewCache(s *APIServer, changed func(k objKey, old, cur client.Object)) *Cache {
	c := &Cache{server: s, objects: map[objKey]client.Object{}, indexes: map[string]map[string]client.IndexerFunc{},
		changed: changed}
	for k, o := range s.objects {
		if k.Kind != kindLease {
			c.objects[k] = kept(o)
		}
	}
	c.applied = len(s.log)
	return c
}

// kept is what a manager's cache keeps of an object: a copy, through the
// manager's own transform (controller.StripUnread), so that the
// reconcilers and their watches see what they see in a cluster (an ended
// operation without its parameters and result, for one).
func kept(o client.Object) client.Object {
	out, err := controller.StripUnread(o.DeepCopyObject())
	must(err)
	return out.(client.Object)
}

// Behind is how many changes the cache has not applied.
func (c *Cache) Behind() int { return len(c.server.log) - c.applied }

// Sync applies up to n changes of the server's log.
func (c *Cache) Sync(n int) {
	for ; n > 0 && c.applied < len(c.server.log); n-- {
		ch := c.server.log[c.applied]
		c.applied++
		old, cur := c.objects[ch.key], client.Object(nil)
		if ch.obj == nil {
			delete(c.objects, ch.key)
		} else {
			cur = kept(ch.obj)
			c.objects[ch.key] = cur
		}
		if c.changed != nil {
			c.changed(ch.key, old, cur)
		}
	}
}

// Relist brings the cache to the server's objects as they are now, as an
// informer's list after its watch expired does: one event per object
// that differs, from what the cache had to what the server has; nothing
// for an object that came and went in between.
func (c *Cache) Relist() {
	var touched []objKey
	for _, ch := range c.server.log[c.applied:] {
		if !slices.Contains(touched, ch.key) {
			touched = append(touched, ch.key)
		}
	}
	c.applied = len(c.server.log)
	sortKeys(touched)
	for _, k := range touched {
		old, now := c.objects[k], c.server.objects[k]
		var cur client.Object
		switch {
		case now == nil && old == nil:
			continue
		case now == nil:
			delete(c.objects, k)
		case old != nil && old.GetResourceVersion() == now.GetResourceVersion():
			continue
		default:
			cur = kept(now)
			c.objects[k] = cur
		}
		if c.changed != nil {
			c.changed(k, old, cur)
		}
	}
}

// IndexField registers a field index, as a manager's cache does.
func (c *Cache) IndexField(_ context.Context, obj client.Object, field string, f client.IndexerFunc) error {
	kind := kindOf(obj)
	if c.indexes[kind] == nil {
		c.indexes[kind] = map[string]client.IndexerFunc{}
	}
	c.indexes[kind][field] = f
	return nil
}

func (c *Cache) get(key client.ObjectKey, obj client.Object) error {
	k := objKey{Kind: kindOf(obj), NamespacedName: key}
	o, ok := c.objects[k]
	if !ok {
		return apierrors.NewNotFound(gr(k.Kind), k.Name)
	}
	copyInto(obj, o)
	return nil
}

func (c *Cache) list(list client.ObjectList, opts ...client.ListOption) error {
	return listInto(c.objects, c.indexes, list, opts...)
}

// listInto fills list with the objects of its kind that match opts.
func listInto(objects map[objKey]client.Object, indexes map[string]map[string]client.IndexerFunc,
	list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	kind := itemKind(list)
	var items []runtime.Object
	for _, obj := range listOf(objects, kind, o.Namespace, false) {
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		if o.FieldSelector != nil && !o.FieldSelector.Empty() {
			ok, err := matchFields(indexes[kind], obj, o)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
		}
		items = append(items, obj.DeepCopyObject())
	}
	return meta.SetList(list, items)
}

func matchFields(idx map[string]client.IndexerFunc, obj client.Object, o *client.ListOptions) (bool, error) {
	for _, r := range o.FieldSelector.Requirements() {
		f, ok := idx[r.Field]
		if !ok {
			if r.Field == "metadata.name" {
				if obj.GetName() != r.Value {
					return false, nil
				}
				continue
			}
			return false, fmt.Errorf("sim: no index for field %q", r.Field)
		}
		found := false
		for _, v := range f(obj) {
			if v == r.Value {
				found = true
			}
		}
		if !found {
			return false, nil
		}
	}
	return true, nil
}

// Gate stands between a manager and the API server: it may refuse a call
// (the manager is cut off, or dead) or stop the caller there (a freeze).
type Gate interface {
	API(verb, name string, obj runtime.Object) error
	// Read sees what a read returned.
	Read(obj runtime.Object)
	// AnswerLost reports whether the answer to a write the server applied
	// is lost on its way back.
	AnswerLost(verb, name string, obj runtime.Object) bool
}

// ErrUnreachable is what a manager cut off from the API server gets.
var ErrUnreachable = errors.New("dial tcp 10.96.0.1:443: connect: connection refused")

// Client is a manager's client: reads from its cache, writes to the
// server, every call through the gate. Reader reads past the cache.
type Client struct {
	server *APIServer
	cache  *Cache
	gate   Gate
}

var _ client.Client = (*Client)(nil)

// NewClient is a manager's client over its cache; with no cache, it reads
// from the server, as kubectl does.
func NewClient(s *APIServer, c *Cache, g Gate) *Client {
	return &Client{server: s, cache: c, gate: g}
}

// Reader reads from the server, as a manager's APIReader does.
func (c *Client) Reader() client.Reader { return apiReader{c} }

type apiReader struct{ c *Client }

func (r apiReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if err := r.c.gate.API("get", key.Name, obj); err != nil {
		return err
	}
	if err := r.c.server.Get(objKey{Kind: kindOf(obj), NamespacedName: key}, obj); err != nil {
		return err
	}
	r.c.gate.Read(obj)
	return nil
}

func (r apiReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.c.gate.API("list", listSubject(opts), list); err != nil {
		return err
	}
	var indexes map[string]map[string]client.IndexerFunc
	if r.c.cache != nil {
		indexes = r.c.cache.indexes
	}
	return listInto(r.c.server.objects, indexes, list, opts...)
}

// listSubject names what a list asks for, in the sites of the draws: two
// lists of one kind with other selectors are other calls.
func listSubject(opts []client.ListOption) string {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	return fmt.Sprintf("%s %v %v", o.Namespace, o.LabelSelector, o.FieldSelector)
}

func (c *Client) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if c.cache == nil {
		return c.Reader().Get(context.Background(), key, obj)
	}
	if err := c.gate.API("get (cache)", key.Name, obj); err != nil {
		return err
	}
	if err := c.cache.get(key, obj); err != nil {
		return err
	}
	c.gate.Read(obj)
	return nil
}

func (c *Client) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if c.cache == nil {
		return c.Reader().List(context.Background(), list, opts...)
	}
	if err := c.gate.API("list (cache)", listSubject(opts), list); err != nil {
		return err
	}
	return c.cache.list(list, opts...)
}

func (c *Client) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	return c.write("create", obj, func() error { return c.server.Create(obj) })
}

// write is one write through the gate: it may fail before it is done, or
// be done and its answer lost, when the object keeps what was sent.
func (c *Client) write(verb string, obj client.Object, do func() error) error {
	if err := c.gate.API(verb, obj.GetName(), obj); err != nil {
		return err
	}
	sent := obj.DeepCopyObject().(client.Object)
	err := do()
	if err == nil && c.gate.AnswerLost(verb, sent.GetName(), obj) {
		copyInto(obj, sent)
		return errAnswerLost
	}
	return err
}

func (c *Client) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := (&client.DeleteOptions{}).ApplyOptions(opts)
	return c.write(verbDelete, obj, func() error { return c.server.Delete(obj, o.Preconditions) })
}

func (c *Client) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return c.write("update", obj, func() error { return c.server.Update(obj, false) })
}

func (c *Client) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.PatchOption) error {
	return c.write("patch", obj, func() error { return c.server.Patch(obj, patch, false) })
}

func (c *Client) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errors.New("sim: server-side apply is not modelled")
}

func (c *Client) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errors.New("sim: deletecollection is not modelled")
}

func (c *Client) Status() client.SubResourceWriter { return statusWriter{c} }

func (c *Client) SubResource(name string) client.SubResourceClient {
	if name != "status" {
		panic("sim: subresource " + name + " is not modelled")
	}
	return statusWriter{c}
}

func (c *Client) Scheme() *runtime.Scheme     { return Scheme }
func (c *Client) RESTMapper() meta.RESTMapper { return nil }
func (c *Client) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	return kindOf(obj) != kindNamespace && kindOf(obj) != "ClusterTool", nil
}
func (c *Client) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	gvk, err := schema.GroupVersionKind{}, error(nil)
	gvks, _, err := Scheme.ObjectKinds(obj)
	if err == nil && len(gvks) > 0 {
		gvk = gvks[0]
	}
	return gvk, err
}

type statusWriter struct{ c *Client }

func (s statusWriter) Get(ctx context.Context, obj client.Object, sub client.Object, _ ...client.SubResourceGetOption) error {
	return s.c.Get(ctx, client.ObjectKeyFromObject(obj), sub)
}

func (s statusWriter) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errors.New("sim: status create is not modelled")
}

func (s statusWriter) Update(_ context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return s.c.write("update status", obj, func() error { return s.c.server.Update(obj, true) })
}

func (s statusWriter) Patch(_ context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	return s.c.write("patch status", obj, func() error { return s.c.server.Patch(obj, patch, true) })
}

func (s statusWriter) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errors.New("sim: server-side apply is not modelled")
}

var (
	_ = types.UID("")
	_ = metav1.Time{}
)
