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

package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

// Labels the driver puts on its objects, for a person reading the cluster.
const (
	labelRole    = "chaos.once.dev/role"
	labelLogical = "chaos.once.dev/logical"
)

// toolDef is one of the three tools of a run, one per idempotency mode,
// each a collection of the sandbox tool.
type toolDef struct {
	mode       v1.IdempotencyMode
	name       string
	collection string
	operation  string
	// cancel is the operation that undoes operation's effect, the
	// sandbox's POST /{mode}/{collection}/{id}/cancel, for the
	// compensations of sagas.
	cancel string
}

// tools are the run's tools: a payment API that dedupes natively, a ticket
// system that can be asked by key, and a mailer that can do neither. Each
// can undo its effect: a refund deduped on its own key, a ticket closed
// and found again by the key of the close, a recall that can be neither.
var tools = []toolDef{
	{mode: v1.IdempotencyNative, name: "payments", collection: "charges", operation: "charge.create", cancel: "charge.refund"},
	{mode: v1.IdempotencyLookup, name: "tickets", collection: "tickets", operation: "ticket.create", cancel: "ticket.close"},
	{mode: v1.IdempotencyNone, name: "mailer", collection: "emails", operation: "email.send", cancel: "email.recall"},
}

// Timing of the tools. Every injected delay (faultDelay) is longer than the
// call's timeout, so that the caller gives up while the tool still works;
// a lookup waits lookupDelay after the attempt was sent, longer than any
// injected delay plus the injected index lag (lookupLag), so that an absent
// answer proves absence: the Lookup tool keeps the promise it declares.
const (
	toolTimeout = time.Second
	faultDelay  = 2 * time.Second
	lookupDelay = 5 * time.Second
	// lookupLag is the lag of the lookup index that lookup-lag injects: an
	// effect commits at most faultDelay after its request was sent, and
	// must show in lookups lookupDelay after it, so the lag stays below
	// lookupDelay − faultDelay.
	lookupLag = lookupDelay - faultDelay - time.Second
)

// Expressions of the tools' manifests, CEL over `response`.
const (
	// absentExpr proves absence only with the sandbox's own not-found
	// answer, {"error":"not_found"}: an ingress's HTML 404 for a route, or
	// any other 404, proves nothing. The body is the decoded JSON, or the
	// text when it is not JSON, hence the type guard.
	absentExpr = "response.status == 404 && type(response.body) == map && " +
		"'error' in response.body && response.body.error == '" + sandbox.CodeNotFound + "'"
	// foundExpr: the sandbox's record of the key, made or cancelled with
	// it; a 200 alone (a proxy's page) proves nothing.
	foundExpr = "response.status == 200 && type(response.body) == map && " +
		"(('key' in response.body && response.body.key == key) || " +
		"('cancelKey' in response.body && response.body.cancelKey == key))"
	// replayedExpr marks the Native tool's replays, as Stripe marks them.
	replayedExpr = "response.headers['idempotent-replayed'] == 'true'"
)

// sandboxMode is the first path segment of the tool's collection.
func (t toolDef) sandboxMode() string { return strings.ToLower(string(t.mode)) }

// path is the collection's path at the sandbox.
func (t toolDef) path() string { return "/" + t.sandboxMode() + "/" + t.collection }

// NativeTool is the run's Native tool, "payments" with its operation
// "charge.create" on the sandbox's /native/charges, as the run creates it
// in namespace ns for a sandbox at url: for other runs against the
// sandbox, such as the benchmark's.
func NativeTool(ns, url string) *v1.Tool { return tools[0].object(ns, url) }

// object is the Tool the run creates in namespace ns for a sandbox at url.
func (t toolDef) object(ns, url string) *v1.Tool {
	op := v1.ToolOperation{
		Name:     t.operation,
		Method:   http.MethodPost,
		Path:     t.path(),
		Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"},
	}
	// The cancel names the object in its path, from the parameter id.
	cancel := v1.ToolOperation{
		Name:     t.cancel,
		Method:   http.MethodPost,
		Path:     t.path() + "/{id}/cancel",
		Request:  &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "id", Value: "parameters.id"}}},
		Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"},
	}
	idem := v1.ToolIdempotency{Mode: t.mode, ReconcileLimit: 20}
	switch t.mode {
	case v1.IdempotencyLookup:
		// The sandbox finds an object by the key it was created with, or
		// else by the key it was cancelled with: one lookup serves both.
		op.Lookup = &v1.LookupRequest{Path: t.path() + "?key={idempotencyKey}",
			Found: foundExpr, Absent: absentExpr}
		cancel.Lookup = op.Lookup.DeepCopy()
		idem.LookupDelay = &metav1.Duration{Duration: lookupDelay}
	case v1.IdempotencyNative:
		idem.ReplayWindow = &metav1.Duration{Duration: time.Hour}
		idem.Replayed = replayedExpr
	}
	return &v1.Tool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: t.name},
		Spec: v1.ToolSpec{
			HTTP:        v1.HTTPBackend{URL: url},
			Idempotency: idem,
			Timeout:     &metav1.Duration{Duration: toolTimeout},
			Operations:  []v1.ToolOperation{op, cancel},
			// High enough that the budget never throttles the run: the
			// run measures the protocol, not the budget.
			RetryBudget: &v1.RetryBudget{RetriesPerMinute: 60000},
		},
	}
}

// logicalOp is one business operation of the plan: its scope and the
// objects that request it.
type logicalOp struct {
	index   int
	tool    toolDef
	key     string
	objects []plannedObject
	// reapply re-applies the original, unchanged, reapplyAfter after it
	// was created.
	reapply      bool
	reapplyAfter time.Duration
}

// plannedObject is one object of a logical operation.
type plannedObject struct {
	name   string
	role   Role
	params []byte
}

// makePlan draws the workload from the seed: the tool of each operation,
// its parameters, and whether it gets a duplicate, a conflict or a
// re-apply.
func makePlan(c Config) []logicalOp {
	rng := rand.New(rand.NewPCG(uint64(c.Seed), 0xc4a05))
	plan := make([]logicalOp, c.Operations)
	for i := range plan {
		t := tools[2]
		switch x := rng.Float64(); {
		case x < c.NativeShare:
			t = tools[0]
		case x < c.NativeShare+c.LookupShare:
			t = tools[1]
		}
		name := fmt.Sprintf("op-%05d", i)
		key := fmt.Sprintf("order-%05d", i)
		amount := 100 + rng.IntN(10000)
		op := logicalOp{index: i, tool: t, key: key,
			objects: []plannedObject{{name: name, role: RoleOriginal, params: params(key, amount)}}}
		if rng.Float64() < c.DuplicateShare {
			op.objects = append(op.objects, plannedObject{name: name + "-dup", role: RoleDuplicate, params: params(key, amount)})
		}
		if rng.Float64() < c.ConflictShare {
			op.objects = append(op.objects, plannedObject{name: name + "-conflict", role: RoleConflict,
				params: params(key, amount+1+rng.IntN(100))})
		}
		if rng.Float64() < c.ReapplyShare {
			op.reapply = true
			op.reapplyAfter = time.Duration(rng.Int64N(int64(5 * time.Second)))
		}
		plan[i] = op
	}
	return plan
}

// params is the request body of an operation.
func params(key string, amount int) []byte {
	b, _ := json.Marshal(map[string]any{"order": key, "amount": amount, "currency": "eur"})
	return b
}

// object is the SideEffectOperation of po in namespace ns.
func (op logicalOp) object(ns string, po plannedObject) *v1.SideEffectOperation {
	return &v1.SideEffectOperation{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: po.name, Labels: map[string]string{
			labelRole: string(po.role), labelLogical: strconv.Itoa(op.index)}},
		Spec: v1.SideEffectOperationSpec{
			ToolRef:        op.ref(),
			Operation:      op.tool.operation,
			IdempotencyKey: op.key,
			Parameters:     &runtime.RawExtension{Raw: po.params},
			RetryPolicy:    retryPolicy(),
		},
	}
}

// scopeKey is the ledger key of the operation's effects: the sandbox
// counts them by mode, collection, action and the key Once sends to the
// tool. toolKey is that key as an object's status.toolIdempotencyKey
// reports it; when no object reports one yet, it is what the operator
// would send (protocol.Scope.ToolKey).
func (op logicalOp) scopeKey(ns, toolKey string) string {
	if toolKey == "" {
		toolKey = protocol.Scope{Namespace: ns, Tool: op.ref(), Operation: op.tool.operation, Key: op.key}.ToolKey()
	}
	return sandbox.SummaryKey(op.tool.sandboxMode(), op.tool.collection, sandbox.ActionCreate, toolKey)
}

// ref is the reference to the tool in its run's namespace.
func (t toolDef) ref() v1.ToolReference {
	return v1.ToolReference{Kind: v1.ToolKindTool, Name: t.name}
}

// ref is the operation's tool reference.
func (op logicalOp) ref() v1.ToolReference { return op.tool.ref() }

// bodySHA is the hex SHA-256 of a JSON object canonicalised the way the
// sandbox does it (sorted keys, numbers as written, no spaces): what its
// ledger records as an effect's BodySHA256 for this request.
func bodySHA(raw []byte) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return "invalid:" + err.Error()
	}
	canonical, _ := json.Marshal(fields)
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// driver creates and re-applies the run's objects, as clients and GitOps
// tools do.
type driver struct {
	c   client.Client
	ns  string
	log func(format string, args ...any)

	mu sync.Mutex
	// created names the objects that exist; failed those that could not be
	// created, with the reason.
	created map[string]bool
	failed  map[string]string
	// reapplies and sagaReapplies count the re-applies of operations and
	// of sagas the API server accepted; refusedReapply those it refused,
	// with the reason.
	reapplies, sagaReapplies atomic.Int64
	refusedReapply           map[string]string
	// later runs the re-applies.
	later sync.WaitGroup
}

func newDriver(c client.Client, ns string, log func(string, ...any)) *driver {
	return &driver{c: c, ns: ns, log: log, created: map[string]bool{}, failed: map[string]string{},
		refusedReapply: map[string]string{}}
}

// run creates the plan's operations in waves of rate per second with
// creators concurrent creators, and the sagas spread evenly over the same
// waves, and re-applies those the plans say. It returns when every object
// is created and every re-apply done.
func (d *driver) run(ctx context.Context, plan []logicalOp, sagas []plannedSaga, rate float64, creators int) {
	jobs := make(chan func())
	var wg sync.WaitGroup
	for range creators {
		wg.Go(func() {
			for job := range jobs {
				job()
			}
		})
	}
	wave := max(1, int(rate+0.5))
	waves := max(1, (len(plan)+wave-1)/wave)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	nextSaga := 0
feed:
	for w := range waves {
		start := w * wave
		var batch []func()
		for _, op := range plan[min(start, len(plan)):min(start+wave, len(plan))] {
			batch = append(batch, func() { d.createAll(ctx, op) })
		}
		// Saga i goes with wave i·waves/sagas.
		for ; nextSaga < len(sagas) && nextSaga*waves/len(sagas) <= w; nextSaga++ {
			ps := sagas[nextSaga]
			batch = append(batch, func() { d.createSagas(ctx, ps) })
		}
		for _, job := range batch {
			select {
			case jobs <- job:
			case <-ctx.Done():
				break feed
			}
		}
		if end := min(start+wave, len(plan)); (w+1)%10 == 0 || w == waves-1 {
			d.log("created %d/%d operations, %d/%d sagas", end, len(plan), nextSaga, len(sagas))
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	d.later.Wait()
}

// createAll creates the objects of one logical operation in order, and
// schedules its re-apply.
func (d *driver) createAll(ctx context.Context, op logicalOp) {
	for _, po := range op.objects {
		d.create(ctx, op.object(d.ns, po))
	}
	if !op.reapply || !d.isCreated(op.objects[0].name) {
		return
	}
	d.later.Go(func() {
		select {
		case <-time.After(op.reapplyAfter):
		case <-ctx.Done():
			return
		}
		d.reapply(ctx, op.object(d.ns, op.objects[0]), &d.reapplies)
	})
}

func (d *driver) isCreated(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.created[name]
}

// create creates obj, retrying errors that may be transient. An
// AlreadyExists after a retry means an earlier try went through.
func (d *driver) create(ctx context.Context, obj client.Object) {
	var last error
	for try := range 10 {
		err := d.c.Create(ctx, obj.DeepCopyObject().(client.Object))
		if err == nil || (try > 0 && apierrors.IsAlreadyExists(err)) {
			d.mu.Lock()
			d.created[obj.GetName()] = true
			d.mu.Unlock()
			return
		}
		last = err
		if apierrors.IsAlreadyExists(err) || apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Duration(try+1) * 200 * time.Millisecond)
	}
	d.log("could not create %s: %v", obj.GetName(), last)
	d.mu.Lock()
	d.failed[obj.GetName()] = last.Error()
	d.mu.Unlock()
}

// reapply updates the object with the spec it was created with, as a
// GitOps tool re-applying its manifest does, and counts it in n. The API
// server must accept it: the spec is unchanged.
func (d *driver) reapply(ctx context.Context, desired client.Object, n *atomic.Int64) {
	backoff := wait.Backoff{Steps: 20, Duration: 50 * time.Millisecond, Factor: 1.5, Jitter: 0.5, Cap: 2 * time.Second}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		cur := desired.DeepCopyObject().(client.Object)
		if err := d.c.Get(ctx, client.ObjectKeyFromObject(desired), cur); err != nil {
			return false, nil
		}
		obj := desired.DeepCopyObject().(client.Object)
		obj.SetResourceVersion(cur.GetResourceVersion())
		err := d.c.Update(ctx, obj)
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsConflict(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
			apierrors.IsTooManyRequests(err), apierrors.IsInternalError(err):
			return false, nil
		default:
			return false, err
		}
	})
	if err != nil {
		d.log("re-apply of %s refused: %v", desired.GetName(), err)
		d.mu.Lock()
		d.refusedReapply[desired.GetName()] = err.Error()
		d.mu.Unlock()
		return
	}
	n.Add(1)
}

// writeCounter counts the requests the driver sends that write
// SideEffectOperations or IdempotencyRecords (in ops), and Sagas (in
// sagas), so that the operator's own writes can be told from the driver's
// in the API server's counts.
type writeCounter struct {
	next       http.RoundTripper
	ops, sagas *atomic.Int64
}

func (w *writeCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	if err != nil || !isWrite(req.Method) {
		return resp, err
	}
	switch p := req.URL.Path; {
	case strings.Contains(p, "/sideeffectoperations"), strings.Contains(p, "/idempotencyrecords"):
		w.ops.Add(1)
	case strings.Contains(p, "/sagas"):
		w.sagas.Add(1)
	}
	return resp, err
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}
