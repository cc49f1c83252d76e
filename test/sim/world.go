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
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/controller"
	"github.com/once-dev/once/internal/protocol"
)

// Options shape a run.
type Options struct {
	// Seed draws the schedule.
	Seed uint64
	// Steps is how many actions the scheduler takes before the world
	// quiets down for the liveness check.
	Steps int
	// Managers is how many managers run side by side. Without Shards each
	// may reconcile every object, as after a split brain.
	Managers int
	// FreezeRate is the chance that a manager freezes at one call (to the
	// API server or a tool); FaultRate the chance that a tool request
	// meets a fault.
	FreezeRate, FaultRate float64
	// FreezeInKernel adds a freeze point after the last check before a
	// request's bytes leave: a process stopped there sends when it wakes.
	FreezeInKernel bool
	// FrozenTimers keeps a frozen pass's timers (the claim's timer among
	// them) from firing until it runs again, as a stopped process's
	// cannot, instead of firing them on time.
	FrozenTimers bool
	// NoFinalizerPolicy runs without the admission policy that adds the
	// record finalizer at create.
	NoFinalizerPolicy bool
	// SecondLifetimes lets a run last longer than a record's retention
	// (24 hours), and people apply a manifest again after its scope was
	// forgotten: the same key in a second lifetime, which tools that
	// remember longer than Once still answer with the first lifetime's
	// effect (docs/simulator.md). Off by default, so that
	// a default run also checks that nothing is forgotten within the
	// retention (I7); TestHunt runs seeds with it as well.
	SecondLifetimes bool
	// ClockSkew bounds how far each manager's clock is from true time,
	// drawn once per run from the seed: NTP keeps nodes within
	// milliseconds to seconds, and the claim's grace (ten seconds here)
	// is the margin Once allows for two managers' clocks: a bound under
	// half of it keeps within what Once promises. A tool's clock is off by up to
	// sixty times as much, a provider's own clock, which the lookups'
	// found allows an hour for. Zero: every clock is true.
	ClockSkew time.Duration `json:",omitempty"`
	// Lies lets a tool break its contract the way real ones do, and adds
	// an operation that allows one attempt alone: a searchable tool's
	// index falls behind its declared lookupDelay for some effects (a
	// reindex, a replica that lags), so a lookup within the delay answers
	// "absent" for an effect that exists. Once cannot know of such an
	// effect (Effect.Hidden) until an answer that names it reaches its
	// record; from then on it must stop saying "no effect" (I11). Off
	// by default: it adds draws to every schedule.
	Lies bool
	// APIFaultRate is the chance that the API server fails a manager's
	// write: a 429, a 500, or an answer lost after the write (apifaults.go).
	APIFaultRate float64 `json:",omitempty"`
	// KeyedDraws draws each decision inside an action at its own site
	// (draws), so that a change to the calls a pass makes leaves the
	// other decisions as they were. Stories saved before it existed lack
	// it, and replay with the single stream they were found with.
	KeyedDraws bool
	// Swarm draws the run's FreezeRate, FaultRate and Weights from its
	// seed (Swarmed), so that a hunt meets worlds of many shapes: few
	// faults and many people, no crashes, freezes everywhere.
	Swarm bool
	// Weights are the scheduler's weights of its kinds of action, by the
	// names in baseWeights; a kind missing here has its base weight. A
	// swarm run keeps what it drew here.
	Weights map[string]int `json:",omitempty"`
	// People enlarges what people do to what a cluster's people do
	// (docs/simulator.md): a name applied again with
	// another manifest (World.others), deletes of any object (a saga's
	// steps and compensations among them), a saga step a person fails
	// and then deletes, and manifests whose records keep a short
	// retention. Stories saved before it existed lack it, and replay in
	// the world they were found in.
	People bool
	// NamespaceByKind deletes a namespace as kube-controller-manager's
	// namespace controller does: it marks the namespace terminating, then
	// deletes its content one resource type at a time, in the order it
	// happens to list them, while every other controller goes on between
	// those calls (a step of the story each, with the garbage collector's
	// passes), and its admission lets creates in for a second after the
	// mark. Without it, everything in the namespace is deleted at once.
	// Stories saved before it existed lack it, and replay as they were
	// found.
	NamespaceByKind bool
	// Callers adds the callers that ask Once for effects through its
	// client code (callers.go): an agent and a model through the MCP
	// gateway, a program through pkg/once, and sagas run through both
	// (sagacallers.go). Stories saved before it existed lack it, and
	// replay without them.
	Callers bool `json:",omitempty"`
	// CallerFaults lets the callers' requests to the API server meet its
	// faults, at APIFaultRate, as a manager's do (callerGate): a caller
	// that was told an error calls again. Stories saved before it existed
	// lack it, and their callers reach the API server without faults.
	CallerFaults bool `json:",omitempty"`
	// Shards splits the objects among the managers in this many shards,
	// held through Leases by the product's shard.Sharder (shards.go): a
	// manager reconciles only the objects of the shards it holds. Shards
	// move when a manager stops, crashes, starts, or is cut off past its
	// Lease, and for a while the old owner's passes in flight, frozen or
	// on a cache that lags, overlap the new owner's. 0: no shards. On in
	// DefaultOptions; a swarm run draws the number, none among them.
	// Stories saved before it existed lack it, and replay without shards.
	Shards int `json:",omitempty"`
	// Stops lets the scheduler tell a manager to stop gracefully, as a
	// rollout or a drained node does (stop.go): its passes in flight end,
	// its stop path writes the answers it holds, and a new process starts
	// later. On in DefaultOptions; a swarm run draws its weight as any
	// other kind of action. Stories saved before it existed lack it.
	Stops bool `json:",omitempty"`
	// Brakes lets people suspend and resume tools and operations, and
	// cancel operations (brakes.go). On in DefaultOptions; a swarm run
	// draws their weights after everything else it draws. Stories saved
	// before it existed lack it, and replay without brakes.
	Brakes bool `json:",omitempty"`

	// probe makes every API call of a pass draw at a site of its own, and
	// tell it (probeMark): the test that draws do not drift.
	probe bool
}

// DefaultOptions are what make test and make sim run with.
func DefaultOptions(seed uint64) Options {
	return Options{Seed: seed, Steps: 2000, Managers: 2, FreezeRate: 0.03, FaultRate: 0.25, FrozenTimers: true,
		KeyedDraws: true, People: true, NamespaceByKind: true, Callers: true, CallerFaults: true, Shards: 4, Stops: true,
		Brakes: true}
}

// The workload's tools and their operations: a charge, and the refund that
// undoes it.
const (
	toolChat = "chat"
	toolDesk = "desk"
	toolPay  = "pay"
	opCharge = "charge"
	opRefund = "refund"
)

// Namespace holds the workload.
const Namespace = "team"

// start is when simulated time begins.
var start = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// World is one simulated cluster: an API server, managers with their
// caches, tools with their ledger, a clock, and the people who apply
// manifests, edit tools and resolve reviews.
type World struct {
	opts     Options
	clock    *Clock
	server   *APIServer
	tools    map[string]*SimTool
	ledger   []*Effect
	managers []*Manager
	// manifests are the operations and sagas the workload applies, by
	// name (no saga shares a name with an operation).
	manifests []client.Object
	// others are, per name, another manifest a person applies under that
	// name once its object is gone (Options.People): another tool,
	// another key, other parameters. live holds the names whose object
	// was last created from the other manifest: what GitOps applies to
	// it, and writes a resolution into, is that one.
	others map[string]*v1.SideEffectOperation
	live   map[string]bool
	// replacing holds the names a person replaces (Replace), each with
	// whether its new object comes from the name's other manifest: the
	// name is created again the moment its object is gone.
	replacing map[string]bool
	// failed holds the saga steps' operations a person failed, by name,
	// with the UID of the object they failed: the one they delete next.
	failed map[string]types.UID
	// expiries hold, per ref, the latest end of a retention seen of its
	// scope (an operation's expiryTime, its record's) in the current
	// lifetime of its key: a scope forgotten after it is forgotten as
	// documented (I7).
	expiries map[string]time.Time

	running *passRun
	yield   chan yieldMsg
	// people is how people reach the API server: kubectl, through no
	// cache and no gate.
	people *Client
	// draws are the decisions inside the current action: where a pass
	// freezes, what a request meets.
	draws *draws

	step   int
	story  []string
	events []recorded
	// deliveries are what the subscriber received.
	deliveries []Delivery
	// held are the answers managers received, until they are recorded.
	held []*heldAnswer
	// epochs count the lifetimes of each ref's key, and began holds when
	// the current one began (the zero time for the first).
	epochs map[string]int
	began  map[string]time.Time
	// refs maps the scopes seen so far to the refs of the workload;
	// committed holds the refs an operation was seen Committed for, since
	// they were last forgotten, per lifetime of the namespace
	// (inNamespace).
	refs      map[string]string
	committed map[string]bool
	// licenses count, per scope and epoch, the effects people allowed
	// with a Retry that were not made yet.
	licenses map[string]int
	// vouched holds, per operation (its UID), the effect it was first seen
	// Committed as, when I10 accepted it then: a commit is true or false
	// when it is made, not when the tool forgets the key later.
	vouched map[types.UID]string
	// stepCommitted holds the saga steps seen Committed, per saga object:
	// its UID and the step's ref.
	stepCommitted map[string]bool
	// answered holds, per operation (its UID), the effects a tool answered
	// its requests with: a replay within the tool's window is the tool's
	// word that the effect is the request's, whenever Once reads it.
	answered map[types.UID][]string
	// namespaces counts the namespace's lifetimes (it is created again
	// after a deletion); wiped holds those a person deleted, forgetting
	// every effect made in them on purpose.
	namespaces int
	wiped      map[int]bool
	// clearing are the resource types the namespace controller has yet
	// to delete in the terminating namespace, in its order
	// (Options.NamespaceByKind).
	clearing []string
	// callers ask for effects through the gateway and pkg/once
	// (Options.Callers).
	callers    *callers
	violations []Violation
	effects    int
	// stopWrites counts the answers stopping managers wrote (stop.go).
	stopWrites int
	history    history
}

// Manager is one manager process: its cache, its reconcilers, its work
// queue, and the passes it has frozen.
type Manager struct {
	w           *World
	Name        string
	incarnation int
	// skew is how far the manager's node clock is from true time; a
	// restart keeps it (the node's clock, not the process's).
	skew   time.Duration
	cache  *Cache
	client *Client
	op     *controller.SideEffectOperationReconciler
	rec    *controller.IdempotencyRecordReconciler
	saga   *controller.SagaReconciler
	relays map[string]*controller.OutboxReconciler
	queue  map[request]time.Time
	// retries is how long a pass that returned an error waits to be
	// retried: the rate limiter Build gives every controller, one for all
	// of them here, since a request names its controller.
	retries workqueue.TypedRateLimiter[request]
	parked  map[request]*passRun
	cutOff  bool
	// sharder holds the incarnation's shards (Options.Shards); stop is
	// set while the manager stops, and once it is gone (Options.Stops).
	sharder *sharder
	stop    *stopping
}

func (m *Manager) holder() string { return m.holderOf(m.incarnation) }

// holderOf is the claim holder of one of the manager's incarnations.
func (m *Manager) holderOf(incarnation int) string { return fmt.Sprintf("%s-%d", m.Name, incarnation) }

// request is one item of a manager's work queue.
type request struct {
	ctrl string // ctrlOperation, ctrlRecord or ctrlSaga
	types.NamespacedName
}

// The controllers of a manager, as work queue items and schedules name
// them.
const (
	ctrlOperation      = "op"
	ctrlRecord         = "record"
	ctrlSaga           = "saga"
	ctrlRelayOperation = "relay"
	ctrlRelaySaga      = "relay-saga"
)

func (r request) String() string {
	if r.ctrl == ctrlOperation {
		return r.Name
	}
	return r.ctrl + " " + r.Name
}

// passRun is one reconcile pass, which may be frozen between its calls.
type passRun struct {
	m           *Manager
	incarnation int
	req         request
	resume      chan struct{}
	point       string
	parkedAt    int
	// holdUntil is when the freeze ends at the soonest: a stopped process
	// or a stalled node stays so while the others go on.
	holdUntil time.Time
	apiErr    bool
	// lost names the write whose answer the API server will lose.
	lost string
	// timers are the pass's timers that came due while it was frozen
	// (Options.FrozenTimers).
	timers []func()
	uid    types.UID
	// after, if set, ends the pass in place of a queue's bookkeeping.
	after func()
	// tools are what each read of a tool in the pass showed of its
	// suspend, by kind and name (check_brakes.go).
	tools map[string]toolRead
}

func (p *passRun) dead() bool { return p.incarnation != p.m.incarnation }

// site names the pass in the sites of its draws: its manager and its
// request (not the incarnation: a crash does not rename what is drawn).
func (p *passRun) site() string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%s|%s %s", p.m.Name, p.req.ctrl, p.req.NamespacedName)
}

type yieldMsg struct {
	pr   *passRun
	done bool
	res  reconcile.Result
	err  error
}

type recorded struct {
	regarding types.NamespacedName
	reason    string
	note      string
}

type heldAnswer struct {
	effect      *Effect
	m           *Manager
	incarnation int
	op          types.NamespacedName
	uid         types.UID
	step        int
}

func init() {
	// The reconcilers log through controller-runtime's logger; the story
	// says what happened.
	logf.SetLogger(logr.Discard())
}

// NewWorld builds the world of a seed: a namespace, three tools (one of
// each mode), the managers, and the workload's manifests.
func NewWorld(opts Options) *World {
	opts = opts.Swarmed()
	clk := NewClock(start)
	w := &World{opts: opts, clock: clk, tools: map[string]*SimTool{}, yield: make(chan yieldMsg),
		epochs: map[string]int{}, began: map[string]time.Time{}, refs: map[string]string{}, committed: map[string]bool{},
		licenses: map[string]int{}, vouched: map[types.UID]string{}, stepCommitted: map[string]bool{}, answered: map[types.UID][]string{}, wiped: map[int]bool{}, draws: newDraws(opts.Seed, opts.KeyedDraws),
		others: map[string]*v1.SideEffectOperation{}, live: map[string]bool{}, failed: map[string]types.UID{},
		replacing: map[string]bool{},
		expiries:  map[string]time.Time{}}
	w.server = NewAPIServer(func() metav1.Time { return metav1.NewTime(clk.Now().Truncate(time.Second)) })
	w.server.NoFinalizerPolicy = opts.NoFinalizerPolicy
	if opts.NamespaceByKind {
		w.server.AdmissionLag = time.Second
	}
	w.history = history{claims: map[claimKey]bool{}, announced: map[string]announcement{}}
	w.server.Observe = w.observe
	// A scope is forgotten the moment nothing remembers it, not only at
	// the end of a step: a pass may write its record's outcome already
	// expired (its clock read before a freeze), then make the key's next
	// first effect.
	w.server.Landed = w.forget
	w.people = NewClient(w.server, nil, gate{})
	must(w.server.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}))
	skews := rand.New(rand.NewPCG(opts.Seed, 4))
	skew := func(bound time.Duration) time.Duration {
		if bound <= 0 {
			return 0
		}
		return time.Duration(skews.Int64N(int64(2*bound)+1)) - bound
	}
	for _, t := range []*SimTool{
		{Name: "pay", Window: 24 * time.Hour, Lookup: true, MaxLag: 20 * time.Second},
		{Name: "desk", Lookup: true, MaxLag: 20 * time.Second},
		{Name: toolChat},
	} {
		t.Skew = skew(60 * opts.ClockSkew)
		if opts.Callers && t.Name == toolChat {
			t.Derived = derivedWindow
		}
		w.tools[t.Name] = t
		must(w.server.Create(toolCR(t)))
	}
	must(w.server.Create(sinkCR()))
	for _, op := range workload(opts.Lies, opts.People) {
		w.manifests = append(w.manifests, op)
	}
	if opts.People {
		for _, op := range renamed() {
			w.others[op.Name] = op
		}
	}
	for _, s := range sagas() {
		w.manifests = append(w.manifests, s)
	}
	if opts.Callers {
		w.callers = newCallers(w)
	}
	w.createShardNamespace()
	for i := range max(1, opts.Managers) {
		m := &Manager{w: w, Name: string(rune('A' + i)), incarnation: 1, skew: skew(opts.ClockSkew)}
		w.managers = append(w.managers, m)
		m.boot()
	}
	return w
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// toolCR describes a simulated tool as its Tool object does at first.
func toolCR(t *SimTool) *v1.Tool {
	mode := v1.IdempotencyNone
	switch {
	case t.Window > 0:
		mode = v1.IdempotencyNative
	case t.Lookup:
		mode = v1.IdempotencyLookup
	}
	spec := v1.ToolSpec{
		HTTP:        v1.HTTPBackend{URL: "http://" + t.host()},
		Timeout:     &metav1.Duration{Duration: 30 * time.Second},
		Idempotency: v1.ToolIdempotency{Mode: mode},
		Operations: []v1.ToolOperation{
			{Name: opCharge, Path: "/v1/charges", Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}},
			{Name: opRefund, Path: "/v1/charges/{id}/refund",
				Request:  &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "id", Value: "parameters.charge"}}},
				Response: v1.ResponseMapping{ExternalObjectID: "response.body.id"}},
		},
	}
	if t.Derived > 0 {
		spec.Operations[0].DerivedKey = &v1.DerivedKey{Window: metav1.Duration{Duration: t.Derived}}
	}
	if t.Window > 0 {
		spec.Idempotency.DedupeWindow = &metav1.Duration{Duration: t.Window}
		spec.Idempotency.Replayed = "response.headers['idempotent-replayed'] == 'true'"
	}
	if t.Lookup {
		spec.Idempotency.LookupDelay = &metav1.Duration{Duration: t.MaxLag}
		// An effect made before this lifetime of the key began is an
		// earlier lifetime's (the hour allows for the tool's clock, and
		// is far shorter than the retention); a refund found by its key
		// is this one only if it refunds this charge (a namespace deleted
		// and created again uses its keys again at once).
		thisLifetime := "response.status == 200 && type(response.body) == map && 'id' in response.body && " +
			fmt.Sprintf("timestamp(response.body.created) >= since - duration('%s')", clockMargin)
		lookups := []struct{ path, found string }{
			{"/v1/charges?key={idempotencyKey}", thisLifetime},
			{"/v1/refunds?key={idempotencyKey}",
				thisLifetime + " && 'charge' in response.body && response.body.charge == parameters.charge"},
		}
		for i, l := range lookups {
			spec.Operations[i].Lookup = &v1.LookupRequest{Path: l.path, Found: l.found,
				Absent: "response.status == 404 && type(response.body) == map && 'error' in response.body && response.body.error == 'not_found'"}
		}
	}
	return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: t.Name}, Spec: spec}
}

// sinkCR is the subscribers' sink as its Tool declares it: a Native tool,
// whose idempotency key is the event's id.
func sinkCR() *v1.Tool {
	return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: sinkTool}, Spec: v1.ToolSpec{
		HTTP:        v1.HTTPBackend{URL: "http://" + sinkHost},
		Timeout:     &metav1.Duration{Duration: 30 * time.Second},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
		Operations:  []v1.ToolOperation{{Name: opDeliver, Path: "/events", Sink: true}},
	}}
}

// workload is what the people apply: operations on each tool, keyed by
// name and by shared keys (a duplicate, and a key reused with other
// parameters).
func workload(lies, people bool) []*v1.SideEffectOperation {
	audited := func(o *v1.SideEffectOperation) *v1.SideEffectOperation {
		o.Spec.Subscribers = []v1.Subscriber{{Name: "audit", ToolRef: v1.SinkToolReference{Name: sinkTool}, Operation: opDeliver}}
		return o
	}
	// Some go when they are done, as what the MCP gateway, the ingress and
	// pkg/once make: the manager deletes them, their records stay, and an
	// apply of the same manifest meets the record.
	kept := func(seconds int32, o *v1.SideEffectOperation) *v1.SideEffectOperation {
		o.Spec.TTLSecondsAfterFinished = &seconds
		return o
	}
	// A team that keeps its records a short while (spec.retention, fixed
	// at create; Options.People): they expire within a run, and the
	// manifest applied again after that is a second lifetime of its key.
	// Only tools without a replay window take one: a retention shorter
	// than a window is refused.
	short := func(d time.Duration, o *v1.SideEffectOperation) *v1.SideEffectOperation {
		if people {
			o.Spec.Retention = &metav1.Duration{Duration: d}
		}
		return o
	}
	ops := []*v1.SideEffectOperation{
		op("pay-1", "pay", "", 100),
		kept(3600, audited(op("pay-2", "pay", "order-7", 250))),
		audited(op("pay-3", "pay", "order-7", 250)),
		short(2*time.Minute, op("desk-1", "desk", "", 1)),
		kept(60, op("desk-2", "desk", "ticket-9", 2)),
		op("desk-3", "desk", "ticket-9", 3),
		kept(0, op("chat-1", toolChat, "", 1)),
		short(10*time.Minute, audited(op("chat-2", toolChat, "msg-4", 1))),
	}
	if lies {
		// One attempt alone: a lookup's "absent" fails it for good.
		single := op("desk-4", "desk", "", 4)
		single.Spec.RetryPolicy = &v1.RetryPolicy{MaxAttempts: 1}
		ops = append(ops, single)
	}
	return ops
}

// op is an operation's manifest: a charge of amount at tool, keyed by key
// (by its name if empty); its parameters name its scope as its ref
// (refOf), which is unique to the scope.
func op(name, tool, key string, amount int) *v1.SideEffectOperation {
	scopeKey := key
	if scopeKey == "" {
		scopeKey = name
	}
	ref := tool + "/" + scopeKey
	return &v1.SideEffectOperation{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name},
		Spec: v1.SideEffectOperationSpec{ToolRef: v1.ToolReference{Name: tool}, Operation: opCharge,
			IdempotencyKey: key,
			Parameters:     &runtime.RawExtension{Raw: fmt.Appendf(nil, `{"ref":%q,"amount":%d}`, ref, amount)}}}
}

// renamed are the other manifests of some names (Options.People): a
// GitOps repository edited so that a name now stands for another effect,
// or a person at kubectl who reuses a name once its object is gone. The
// ticket desk-2 becomes a chat message; the charge pay-1 another charge,
// under another key and amount; the message chat-1 a ticket. Each carries
// its own ref: a name is not a scope.
func renamed() []*v1.SideEffectOperation {
	return []*v1.SideEffectOperation{
		op("desk-2", toolChat, "", 5),
		op("pay-1", toolPay, "order-9", 300),
		op("chat-1", toolDesk, "", 6),
	}
}

// sagas are the workload's sagas: one that runs through, its charge and
// ticket undone by refunds if it must be, its message last and
// irreversible; and one whose second step the tool declines, so that the
// first is compensated.
func sagas() []*v1.Saga {
	step := sagaStep
	// The saga that is compensated goes ten minutes after it ends, its
	// steps with it.
	sagaTTL := int32(600)
	return []*v1.Saga{
		{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "order-1"}, Spec: v1.SagaSpec{Steps: []v1.SagaStep{
			step("order-1", "charge", "pay", `,"amount":5`), approved(step("order-1", "ticket", "desk", "")),
			step("order-1", "notify", toolChat, "")}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "order-2"}, Spec: v1.SagaSpec{Steps: []v1.SagaStep{
			step("order-2", "charge", "pay", `,"amount":7`), step("order-2", "ticket", "desk", `,"reject":true`)},
			TTLSecondsAfterFinished: &sagaTTL}},
	}
}

// sagaStep is a step of saga: a charge at tool, whose parameters name
// its scope as "<saga>/<step>" (refOf), with extra parameters. A step at
// chat is irreversible; another is undone by a refund of the charge.
func sagaStep(saga, name, tool, extra string) v1.SagaStep {
	raw := func(s string) *runtime.RawExtension { return &runtime.RawExtension{Raw: []byte(s)} }
	st := v1.SagaStep{Name: name, ToolRef: v1.StepToolReference{Name: tool}, Operation: opCharge,
		Parameters: raw(fmt.Sprintf(`{"ref":%q%s}`, saga+"/"+name, extra))}
	if tool != toolChat {
		st.Compensation = &v1.Compensation{Operation: opRefund, Parameters: raw(fmt.Sprintf(`{"ref":%q}`, saga+"/"+name+"/undo")),
			ParametersFrom: []v1.ParameterExpression{{Name: "charge", Expression: "steps." + name + ".externalObjectID"}}}
	} else {
		st.Irreversible = true
	}
	return st
}

// approved is a step that waits for a person's approval.
func approved(s v1.SagaStep) v1.SagaStep {
	s.RequiresApproval = true
	return s
}

// refOf is the scope an operation's parameters name.
func refOf(op *v1.SideEffectOperation) string {
	if op.Spec.Parameters == nil {
		return ""
	}
	_, rest, found := strings.Cut(string(op.Spec.Parameters.Raw), `"ref":"`)
	if !found {
		return ""
	}
	ref, _, _ := strings.Cut(rest, `"`)
	return ref
}

// boot starts a manager's incarnation: a new holder, an empty memory, a
// cache listed from the server now, and every object queued.
func (m *Manager) boot() {
	w := m.w
	m.queue, m.parked, m.stop = map[request]time.Time{}, map[request]*passRun{}, nil
	m.cache = NewCache(w.server, m.changed)
	m.client = NewClient(w.server, m.cache, gate{m})
	m.sharder.end()
	m.sharder = m.startSharder()
	// The same wiring as cmd/main.go's, on the simulated API server,
	// cache, clock and tools.
	rs, err := managerConfig(m.holder()).Build(controller.Deps{Client: m.client, APIReader: m.client.Reader(),
		Recorder: recorder{w}, Clock: processClock{w.clock, w, m.skew}, Transport: transport{w}, Jitter: w.jitter,
		Shards: m.sharder.get()})
	must(err)
	m.op, m.rec, m.saga = rs.Operation, rs.Record, rs.Saga
	m.retries = controller.NewErrorRateLimiter[request](rs.Operation.ErrorBackoff)
	m.relays = map[string]*controller.OutboxReconciler{ctrlRelayOperation: rs.Outbox[0], ctrlRelaySaga: rs.Outbox[1]}
	must(m.op.IndexFields(context.Background(), m.cache))
	for k := range m.cache.objects {
		m.changed(k, nil, m.cache.objects[k])
	}
}

// managerConfig is a manager's configuration.
func managerConfig(holder string) controller.Config {
	return controller.Config{Holder: holder, MaxClaim: 2 * time.Minute, ClaimGrace: 10 * time.Second,
		MaxConcurrentReconciles: 4}
}

// jitter draws backoff jitter from the current action's decisions.
func (w *World) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(w.draws.Int64N("jitter|"+w.running.site(), int64(d)+1))
}

// enqueue adds a request, due after d; an earlier due time stays.
func (m *Manager) enqueue(r request, d time.Duration) {
	at := m.w.clock.Now().Add(d)
	if cur, ok := m.queue[r]; ok && !at.Before(cur) {
		return
	}
	m.queue[r] = at
}

// changed is what a manager's watches do with a change its cache applied:
// the operation controller watches operations (and the duplicates waiting
// for one), tools and namespaces; the record controller watches records
// and deleted operations. With shards, each controller's own kind passes
// only for the shards the manager holds (owns); the other watches are not
// filtered, as in the product.
func (m *Manager) changed(k objKey, old, cur client.Object) {
	own := m.owns(old, cur)
	switch k.Kind {
	case kindSaga:
		if !own {
			break
		}
		m.enqueue(request{ctrlSaga, k.NamespacedName}, 0)
		if pendingOutbox(cur) {
			m.enqueue(request{ctrlRelaySaga, k.NamespacedName}, 0)
		}
	case kindOperation:
		if own && controller.OperationChangeWakes(old, cur) {
			m.enqueue(request{ctrlOperation, k.NamespacedName}, 0)
		}
		if own && pendingOutbox(cur) {
			m.enqueue(request{ctrlRelayOperation, k.NamespacedName}, 0)
		}
		for _, o := range []client.Object{old, cur} {
			if o == nil {
				continue
			}
			for _, ref := range o.GetOwnerReferences() {
				if ref.Kind == kindSaga {
					m.enqueue(request{ctrlSaga, types.NamespacedName{Namespace: k.Namespace, Name: ref.Name}}, 0)
				}
			}
		}
		for _, o := range m.cache.objects {
			if d, ok := o.(*v1.SideEffectOperation); ok && d.Namespace == k.Namespace && d.Status.DuplicateOf == k.Name {
				m.enqueue(request{ctrlOperation, types.NamespacedName{Namespace: d.Namespace, Name: d.Name}}, 0)
			}
		}
		if cur == nil && old != nil {
			rn := protocol.OperationScope(old.(*v1.SideEffectOperation)).RecordName()
			m.enqueue(request{ctrlRecord, types.NamespacedName{Namespace: k.Namespace, Name: rn}}, 0)
		}
	case kindTool, kindNamespace:
		for _, o := range m.cache.objects {
			op, ok := o.(*v1.SideEffectOperation)
			if !ok || op.Status.State.IsTerminal() {
				continue
			}
			if (k.Kind == kindTool && op.Namespace == k.Namespace && op.Spec.ToolRef.Name == k.Name) ||
				(k.Kind == kindNamespace && op.Namespace == k.Name) {
				m.enqueue(request{ctrlOperation, types.NamespacedName{Namespace: op.Namespace, Name: op.Name}}, 0)
			}
		}
	case kindRecord:
		if own {
			m.enqueue(request{ctrlRecord, k.NamespacedName}, 0)
		}
	}
}

// gate is a manager's connection to the API server.
type gate struct{ m *Manager }

func (g gate) API(verb, name string, obj runtime.Object) error {
	if g.m == nil {
		return nil
	}
	w := g.m.w
	pr := w.running
	if pr == nil || pr.m != g.m {
		return nil
	}
	if pr.dead() || g.m.cutOff {
		pr.apiErr = true
		return ErrUnreachable
	}
	kind := kindOf(obj)
	call := verb + " " + kind + " " + name
	if w.opts.probe {
		w.probe(pr, call)
	}
	if w.draws.Float64("freeze|"+pr.site()+"|"+call) < w.opts.FreezeRate {
		w.freezeAt(pr, "before its "+verb+" of a "+kind)
		if pr.dead() || g.m.cutOff {
			pr.apiErr = true
			return ErrUnreachable
		}
	}
	switch f := w.drawAPIFault(pr, verb, call); f {
	case apiFaultNone:
	case apiFaultAnswerLost:
		pr.lost = call
	default:
		pr.apiErr = true
		err := apiError(f, call)
		w.note("the API server answers %s's %s: %v", g.m.Name, call, err)
		return err
	}
	return nil
}

// Read notes what a pass read: the first operation of its own name that an
// operation's pass reads is the object it works on (pr.uid), whichever
// version of the name its cache held then; a later object of the name is
// another.
func (g gate) Read(obj runtime.Object) {
	if g.m == nil {
		return
	}
	pr := g.m.w.running
	if t, ok := obj.(v1.GenericTool); ok && pr != nil && pr.m == g.m {
		pr.readTool(t)
	}
	op, ok := obj.(*v1.SideEffectOperation)
	if pr == nil || pr.m != g.m || !ok || pr.uid != "" || pr.req.ctrl != ctrlOperation || op.Name != pr.req.Name {
		return
	}
	pr.uid = op.UID
}

// AnswerLost reports whether the answer to a write that the API server
// applied is lost on its way back (drawAPIFault decided it before the
// write).
func (g gate) AnswerLost(verb, name string, obj runtime.Object) bool {
	if g.m == nil {
		return false
	}
	pr := g.m.w.running
	call := verb + " " + kindOf(obj) + " " + name
	if pr == nil || pr.m != g.m || pr.lost != call {
		return false
	}
	pr.lost, pr.apiErr = "", true
	g.m.w.note("the API server applies %s's %s, and its answer is lost", g.m.Name, call)
	return true
}

// toolGate is a manager's way to a tool: a pass may freeze on it; a dead
// process sends nothing.
func (w *World) toolGate(pr *passRun, where string) error {
	if pr == nil {
		return nil
	}
	if pr.dead() {
		return ErrUnreachable
	}
	if w.draws.Float64("freeze|"+pr.site()+"|"+where) < w.opts.FreezeRate {
		w.freezeAt(pr, where)
		if pr.dead() {
			return ErrUnreachable
		}
	}
	return nil
}

// probeMark begins the story's lines of Options.probe.
const probeMark = "probe:"

// probe draws at a site that exists for Options.probe alone, as a call a
// pass did not make before would, and tells the draw.
func (w *World) probe(pr *passRun, call string) {
	site := "probe|" + pr.site() + "|" + call
	w.note("%s %s draws %.3f", probeMark, site, w.draws.Float64(site))
}

// freezeAt stops the running pass until the scheduler resumes it. It runs
// in the pass's goroutine.
func (w *World) freezeAt(pr *passRun, where string) {
	if pr == nil || pr.dead() {
		return
	}
	pr.point = where
	w.yield <- yieldMsg{pr: pr}
	<-pr.resume
}

// drawFault decides what a request meets; what names the request.
func (w *World) drawFault(pr *passRun, what string) fault {
	site := pr.site() + "|" + what
	if pr == nil || w.draws.Float64("fault|"+site) >= w.opts.FaultRate {
		return faultNone
	}
	return fault(1 + w.draws.IntN("fault kind|"+site, 5))
}

// recordEffect adds an effect to the ledger.
func (w *World) recordEffect(t *SimTool, endpoint, key, ref string) *Effect {
	w.effects++
	e := &Effect{ID: fmt.Sprintf("%s_%d", t.Name, w.effects), Tool: t.Name, Endpoint: endpoint, Key: key, Ref: ref,
		At: w.clock.Now(), Stamp: w.clock.Now().Add(t.Skew), Epoch: w.epochs[ref], Namespace: w.namespaces}
	e.Visible = e.At
	if t.Lookup && t.MaxLag > 0 {
		// The effect's own names, not its id: ids count every effect.
		site := t.Name + endpoint + "|" + key + "|" + ref
		e.Visible = e.At.Add(time.Duration(w.draws.Int64N("visible|"+site, int64(t.MaxLag)+1)))
		if w.opts.Lies && w.draws.IntN("hidden|"+site, 4) == 0 {
			e.Hidden = true
			e.Visible = e.At.Add(t.MaxLag*4 + time.Duration(w.draws.Int64N("hidden for|"+site, int64(10*time.Minute))))
		}
	}
	if pr := w.running; pr != nil {
		e.Holder = pr.m.holder()
		if op, ok := w.server.objects[objKey{Kind: kindOperation, NamespacedName: pr.req.NamespacedName}]; ok &&
			pr.req.ctrl == ctrlOperation && op.GetUID() == pr.uid {
			if ref := metav1.GetControllerOfNoCopy(op); ref != nil && ref.Kind == "Saga" {
				e.Saga = ref.UID
			}
		}
	}
	// The first effect after a person's Retry is the one they allowed,
	// whichever object of the scope makes it: the record carries their word
	// to the next object of the key. Any later one is Once's again.
	if scope := inEpoch(ref, e.Epoch); w.licenses[scope] > 0 {
		e.Licensed = true
		w.licenses[scope]--
	}
	w.ledger = append(w.ledger, e)
	w.note("the tool %s makes effect %s for %s", t.Name, e.ID, ref)
	if e.Hidden {
		w.note("its index falls behind its declared delay: its search will not show %s before %s",
			e.ID, e.Visible.Sub(start).Round(time.Second))
	}
	w.checkSagaOrder(e)
	return e
}

// pendingOutbox reports whether an object has an announcement to deliver:
// the relays' watch.
func pendingOutbox(o client.Object) bool {
	var entries []v1.OutboxEntry
	switch x := o.(type) {
	case *v1.SideEffectOperation:
		entries = x.Status.Outbox
	case *v1.Saga:
		entries = x.Status.Outbox
	}
	for _, e := range entries {
		if e.State == v1.DeliveryPending {
			return true
		}
	}
	return false
}

// effectByID is the ledger's effect with that id, or nil.
func (w *World) effectByID(id string) *Effect {
	for _, e := range w.ledger {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// delivered notes an answer naming an effect that reached a manager.
func (w *World) delivered(pr *passRun, e *Effect) {
	if pr.req.ctrl != ctrlOperation {
		return
	}
	w.held = append(w.held, &heldAnswer{effect: e, m: pr.m, incarnation: pr.incarnation, op: pr.req.NamespacedName,
		uid: pr.uid, step: w.step})
	w.answered[pr.uid] = append(w.answered[pr.uid], e.ID)
}

// note adds a line to the current step's story.
func (w *World) note(format string, args ...any) {
	w.story = append(w.story, fmt.Sprintf("    "+format, args...))
}

// recorder keeps the Events the reconcilers emit.
type recorder struct{ w *World }

func (r recorder) Eventf(regarding runtime.Object, _ runtime.Object, _, reason, _, note string, args ...any) {
	o, _ := regarding.(client.Object)
	var nn types.NamespacedName
	if o != nil {
		nn = client.ObjectKeyFromObject(o)
	}
	r.w.events = append(r.w.events, recorded{regarding: nn, reason: reason, note: fmt.Sprintf(note, args...)})
}

// start runs a new pass of a request until it ends or freezes.
func (w *World) start(m *Manager, r request) {
	delete(m.queue, r)
	pr := &passRun{m: m, incarnation: m.incarnation, req: r, resume: make(chan struct{})}
	w.running = pr
	rec := m.op.Reconcile
	switch r.ctrl {
	case ctrlRecord:
		rec = m.rec.Reconcile
	case ctrlSaga:
		rec = m.saga.Reconcile
	case ctrlRelayOperation, ctrlRelaySaga:
		rec = m.relays[r.ctrl].Reconcile
	}
	go func() {
		res, err := rec(context.Background(), ctrl.Request{NamespacedName: r.NamespacedName})
		w.yield <- yieldMsg{pr: pr, done: true, res: res, err: err}
	}()
	w.await(pr)
}

// resume lets a frozen pass go on until it ends or freezes again.
func (w *World) resume(pr *passRun) {
	if pr.m.parked[pr.req] == pr {
		delete(pr.m.parked, pr.req)
	}
	// A frozen process's timers fire when it runs again, racing what the
	// pass does next: the scheduler decides which comes first.
	late := pr.timers
	pr.timers = nil
	first := len(late) > 0 && w.draws.IntN("timers|"+pr.site(), 2) == 0
	if first {
		w.note("the timers of %s's pass of %s fire as it wakes", pr.m.Name, pr.req)
		for _, f := range late {
			f()
		}
	}
	w.running = pr
	pr.resume <- struct{}{}
	w.await(pr)
	if len(late) > 0 && !first {
		w.note("the timers of %s's pass of %s fire after it went on", pr.m.Name, pr.req)
		for _, f := range late {
			f()
		}
	}
}

func (w *World) await(pr *passRun) {
	msg := <-w.yield
	w.running = nil
	if !msg.done {
		pr.parkedAt = w.step
		// Most freezes are short (a GC pause, a slow syscall); one in
		// three lasts minutes (a stopped process, a stalled node), long
		// enough for the others to take over.
		pr.holdUntil = time.Time{}
		site := pr.site() + "|" + pr.point
		if w.draws.IntN("hold|"+site, 3) == 0 {
			pr.holdUntil = w.clock.Now().Add(time.Duration(1+w.draws.IntN("hold for|"+site, 600)) * time.Second)
		}
		pr.m.parked[pr.req] = pr
		w.note("manager %s freezes in its pass of %s, %s", pr.m.Name, pr.req, pr.point)
		return
	}
	if pr.dead() {
		return
	}
	if pr.after != nil {
		pr.after()
		return
	}
	m := pr.m
	switch {
	case msg.err != nil:
		m.enqueue(pr.req, m.retries.When(pr.req))
		w.note("the pass of %s by %s fails: %v", pr.req, m.Name, msg.err)
	case msg.res.RequeueAfter > 0:
		m.retries.Forget(pr.req)
		m.enqueue(pr.req, msg.res.RequeueAfter)
	default:
		m.retries.Forget(pr.req)
	}
	if pr.req.ctrl == ctrlOperation && msg.err == nil && !pr.apiErr && !m.cutOff {
		w.checkHeld(m, pr.req.NamespacedName)
	}
}

// sortedRequests are a queue's requests in a stable order.
func sortedRequests[T any](q map[request]T) []request {
	out := make([]request, 0, len(q))
	for r := range q {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b request) int {
		return cmp.Or(cmp.Compare(a.ctrl, b.ctrl), cmp.Compare(a.NamespacedName.String(), b.NamespacedName.String()))
	})
	return out
}

// processClock is a manager's view of the clock: a timer armed by a pass
// belongs to that pass, and, with Options.FrozenTimers, one that comes due
// while the pass is frozen fires only when the pass runs again.
type processClock struct {
	*Clock
	w *World
	// skew is how far this process's clock is from true time (Options.
	// ClockSkew): NTP keeps a node's clock within a bound, never at zero.
	skew time.Duration
}

// Now is the process's time: true time and its skew.
func (c processClock) Now() time.Time { return c.Clock.Now().Add(c.skew) }

// Since is the process's time since t.
func (c processClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c processClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	pr := c.w.running
	if pr == nil || !c.w.opts.FrozenTimers {
		return c.Clock.AfterFunc(d, f)
	}
	return c.Clock.AfterFunc(d, func() {
		if frozen, ok := pr.m.parked[pr.req]; ok && frozen == pr {
			pr.timers = append(pr.timers, f)
			return
		}
		f()
	})
}
