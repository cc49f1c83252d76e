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
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/pkg/once"
)

// NamespaceHeader lets an HTTP caller choose the namespace of its
// operations; RBAC decides whether it may use it.
const NamespaceHeader = "Once-Namespace"

// Config shapes a Gateway.
type Config struct {
	// REST is the API server to talk to, with the gateway's credentials.
	// Over HTTP the gateway reviews callers' and ingress senders' tokens
	// for Audience with them, and acts for each by impersonation
	// (config/mcp-gateway grants both). Over stdio, its credentials are the
	// caller's.
	REST *rest.Config
	// Audience is the audience an HTTP caller's or ingress sender's token
	// must be meant for (DefaultAudience by default).
	Audience string
	// ResourceURL is the gateway's MCP endpoint as its clients reach it,
	// the resource of its protected-resource metadata (RFC 9728). Empty: no
	// metadata is served. Without AuthorizationServers, the metadata paths
	// answer 404 and say how to get a token.
	ResourceURL string
	// AuthorizationServers are the issuers (OIDC) whose tokens for Audience
	// the API server accepts, named in the protected-resource metadata.
	// None: callers send Kubernetes tokens meant for Audience.
	AuthorizationServers []string
	// Namespace is where operations are made, unless an HTTP caller asks
	// for another with the Once-Namespace header.
	Namespace string
	// CallTimeout bounds how long a tools/call waits for the outcome before
	// it answers that the operation is still running; at most
	// MaxCallTimeout.
	CallTimeout time.Duration
	// MaxCalls and MaxCallsPerCaller bound the tools/calls that wait at
	// once, in all and per caller (256 and 16 by default); a call beyond
	// them is answered Busy at once, having done nothing.
	MaxCalls, MaxCallsPerCaller int
	// TTLSecondsAfterFinished is how long the operations and sagas the
	// gateway makes are kept after they end (their
	// spec.ttlSecondsAfterFinished): nil is one hour
	// (once.DefaultTTLSecondsAfterFinished), negative keeps them until
	// someone deletes them. A call repeated after its operation went gets
	// the outcome its scope's record keeps, within Retention.
	TTLSecondsAfterFinished *int32
	// Retention is how long an operation's scope record keeps its outcome
	// after it ends (spec.retention); zero is the API server's default, 24
	// hours.
	Retention time.Duration
	// Clock tells the time by which derived keys fall in their slots and
	// recorded outcomes expire; the wall clock by default. A test or a
	// simulator gives its own.
	Clock clock.PassiveClock
	// Logger logs the gateway's work; never tokens or parameters.
	Logger *slog.Logger
	// SDKLogger receives the MCP SDK's own logs; by default only its
	// warnings and errors, to Logger's handler.
	SDKLogger *slog.Logger
}

// Gateway serves the operations of Tools and ClusterTools as MCP tools.
type Gateway struct {
	cfg Config
	// auth reviews the tokens of MCP callers and ingress senders, for the
	// gateway's audience.
	auth    *authenticator
	schemas *httpeffects.Compiler
	server  *mcp.Server
	mux     *http.ServeMux
	self    *caller // the stdio caller, once known
	limit   *limiter
}

// MaxCallTimeout bounds Config.CallTimeout: a call that waits longer holds
// a goroutine for nothing the agent could not get by calling again.
const MaxCallTimeout = 10 * time.Minute

// Version is the gateway's version, as MCP clients see it.
var Version = "v0.1.0"

// New returns a Gateway.
func New(cfg Config) (*Gateway, error) {
	if cfg.REST == nil {
		return nil, errors.New("mcpgateway: Config.REST is required")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = time.Minute
	}
	if cfg.CallTimeout > MaxCallTimeout {
		return nil, fmt.Errorf("mcpgateway: the call timeout %s is over the most, %s: an agent that needs longer "+
			"calls again with the same key", cfg.CallTimeout, MaxCallTimeout)
	}
	cfg.MaxCalls, cfg.MaxCallsPerCaller = cmp.Or(cfg.MaxCalls, 256), cmp.Or(cfg.MaxCallsPerCaller, 16)
	if cfg.TTLSecondsAfterFinished == nil {
		d := once.DefaultTTLSecondsAfterFinished
		cfg.TTLSecondsAfterFinished = &d
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SDKLogger == nil {
		cfg.SDKLogger = slog.New(minLevel{Handler: cfg.Logger.Handler(), min: slog.LevelWarn})
	}
	compiler, err := httpeffects.NewCompiler()
	if err != nil {
		return nil, err
	}
	cfg.Audience = cmp.Or(cfg.Audience, DefaultAudience)
	reviewer, err := client.New(cfg.REST, client.Options{Scheme: Scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("mcpgateway: %w", err)
	}
	g := &Gateway{cfg: cfg, schemas: compiler,
		limit: &limiter{total: cfg.MaxCalls, perCaller: cfg.MaxCallsPerCaller},
		auth: &authenticator{reviewer: reviewer, base: cfg.REST, audience: cfg.Audience,
			issuers: cfg.AuthorizationServers, now: time.Now,
			reviews: &limiter{total: maxReviews, perCaller: reviewShare}}}
	g.server = mcp.NewServer(&mcp.Implementation{Name: "once-mcp", Version: Version}, &mcp.ServerOptions{
		Instructions: "Each tool here has a side effect that Once makes effectively once. Give every call an " +
			"idempotencyKey that names the request, and retry a call that timed out or failed with the same key: " +
			"it returns the first outcome and never makes a second effect.",
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}},
		Logger:       cfg.SDKLogger,
	})
	g.server.AddReceivingMiddleware(g.middleware)
	g.mux = http.NewServeMux()
	// A caller that hangs up ends its call's wait (for the protocol
	// versions where the POST is the whole call). How a call is answered
	// decides how soon its client learns that the gateway died: keepalive.go.
	opts := mcp.StreamableHTTPOptions{Stateless: true, Logger: cfg.SDKLogger, PropagateRequestCancellation: true,
		MaxRequestBodyBytes: MaxRequestBodyBytes}
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &opts)
	opts.JSONResponse = true
	single := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return g.server }, &opts)
	// The token is checked before anything reads the body.
	g.mux.Handle("/mcp", g.requireToken(responseMode(stream, single)))
	if cfg.ResourceURL != "" {
		if err := g.mountMetadata(); err != nil {
			return nil, err
		}
	}
	g.mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	return g, nil
}

// Handle mounts another handler on the gateway's HTTP server (for example
// an ingress of events), before it serves.
func (g *Gateway) Handle(pattern string, h http.Handler) {
	g.mux.Handle(pattern, h)
}

// Handler is the gateway's HTTP handler: MCP over streamable HTTP at /mcp,
// /healthz, and whatever Handle mounted.
func (g *Gateway) Handler() http.Handler { return g.mux }

// RunStdio serves one MCP client over stdin and stdout, as the user of
// Config.REST, until the client goes or ctx ends.
func (g *Gateway) RunStdio(ctx context.Context) error {
	return g.Run(ctx, &mcp.StdioTransport{})
}

// Run serves one MCP client over t, as the user of Config.REST, until the
// client goes or ctx ends: RunStdio over stdin and stdout, a test over an
// in-memory transport.
func (g *Gateway) Run(ctx context.Context, t mcp.Transport) error {
	self, err := newCaller(ctx, g.cfg.REST)
	if err != nil {
		return err
	}
	g.self = self
	return g.server.Run(ctx, t)
}

// CallAs answers a tools/call as user, whose requests kube makes, in the
// gateway's namespace: what a call over stdio or HTTP does once the
// gateway knows its caller. asks says whether the caller's host shows the
// user a form (an input request), as a session of protocol 2026-07-28
// that takes forms does. An answer that asks is returned with its
// InputRequests and RequestState. The simulator calls tools this way,
// each call within one step of its world.
func (g *Gateway) CallAs(ctx context.Context, user string, kube client.Client, asks bool,
	req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	ctx = context.WithValue(ctx, asksKey{}, asks)
	res, err := g.callTool(ctx, req, &caller{user: user, kube: kube}, g.cfg.Namespace)
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r, err
	case inputRequired:
		return r.CallToolResult, err
	}
	return nil, err
}

// asksKey holds CallAs's word on whether the caller's host asks its user.
type asksKey struct{}

// onceClient is a pkg/once client over kube, on the gateway's clock.
func (g *Gateway) onceClient(kube client.Client) *once.Client {
	oc := once.New(kube)
	oc.Clock = g.cfg.Clock
	return oc
}

// minLevel passes on only the records at or above min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}

// MaxRequestBodyBytes bounds the body of an MCP request, read only after
// its token is accepted: a call's parameters are at most
// v1.MaxParametersBytes, a saga's steps a few of them.
const MaxRequestBodyBytes = 1 << 20

// middleware answers tools/list and tools/call for the caller of each
// request; everything else is the SDK's.
func (g *Gateway) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch r := req.(type) {
		case *mcp.ListToolsRequest:
			res, err := g.listTools(ctx, r)
			if err != nil {
				return nil, err
			}
			return res, nil
		case *mcp.CallToolRequest:
			res, err := g.call(ctx, r)
			if err != nil {
				return nil, err
			}
			return typed(r.ProtocolVersion(), res), nil
		}
		return next(ctx, method, req)
	}
}

// call answers a tools/call, within the bounds of calls that wait.
func (g *Gateway) call(ctx context.Context, r *mcp.CallToolRequest) (mcp.Result, error) {
	c, ns, err := g.callerOf(r.Extra)
	if err != nil {
		return nil, err
	}
	if !g.limit.acquire(c.user) {
		return toolError(codeBusy, "the gateway waits for too many calls now (of yours, or in all); "+
			"nothing was done for this call: call again later with the same idempotency key", nil), nil
	}
	defer g.limit.release(c.user)
	return g.callTool(ctx, r, c, ns)
}

// callerOf is the caller of a request, and the namespace it works in.
func (g *Gateway) callerOf(extra *mcp.RequestExtra) (*caller, string, error) {
	if extra == nil || extra.Header == nil {
		if g.self == nil {
			return nil, "", errUnauthenticated
		}
		return g.self, g.cfg.Namespace, nil
	}
	// requireToken accepted the token and named its caller.
	c := callerFromToken(extra.TokenInfo)
	if c == nil {
		return nil, "", errUnauthenticated
	}
	ns := extra.Header.Get(NamespaceHeader)
	if ns == "" {
		ns = g.cfg.Namespace
	}
	return c, ns, nil
}

// listTools lists the operations of the tools the caller may use in its
// namespace. It lists none when the caller may not create operations
// there. It leaves out a Tool or ClusterTool the caller may not list, or
// whose definition is not valid. It leaves out a ClusterTool that does not
// serve the namespace too.
func (g *Gateway) listTools(ctx context.Context, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	c, ns, err := g.callerOf(req.Extra)
	if err != nil {
		return nil, err
	}
	res := &mcp.ListToolsResult{Tools: []*mcp.Tool{}, Cacheable: toolsCacheable}
	sagas, err := c.canCreate(ctx, ns, "sagas")
	if err != nil {
		return nil, err
	}
	if sagas {
		res.Tools = append(res.Tools, sagaTool())
	}
	allowed, err := c.canCreate(ctx, ns, "sideeffectoperations")
	if err != nil {
		return nil, err
	}
	if !allowed {
		g.cfg.Logger.Info("caller may not create operations; listing no tools", "user", c.user, "namespace", ns)
		return res, nil
	}
	var tools []v1.GenericTool
	var local v1.ToolList
	if err := c.kube.List(ctx, &local, client.InNamespace(ns)); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing tools: %w", err)
	}
	for i := range local.Items {
		tools = append(tools, &local.Items[i])
	}
	var cluster v1.ClusterToolList
	if err := c.kube.List(ctx, &cluster); err != nil && !apierrors.IsForbidden(err) {
		return nil, fmt.Errorf("listing cluster tools: %w", err)
	}
	nsLabels := namespaceLabels(ctx, c, ns)
	for i := range cluster.Items {
		if serves(&cluster.Items[i], nsLabels) {
			tools = append(tools, &cluster.Items[i])
		}
	}
	for _, t := range tools {
		if notReady(t) != nil {
			continue
		}
		ref := refOf(t)
		spec := t.GetSpec()
		for i := range spec.Operations {
			op := &spec.Operations[i]
			name, ok := ToolName(ref, op.Name)
			if !ok {
				continue
			}
			schema, err := InputSchema(op)
			if err != nil {
				continue
			}
			res.Tools = append(res.Tools, &mcp.Tool{
				Name:        name,
				Title:       fmt.Sprintf("%s %s", ref.Name, op.Name),
				Description: Description(ref, spec, op),
				InputSchema: schema,
				Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: new(true)},
			})
		}
	}
	slices.SortFunc(res.Tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
	return res, nil
}

// toolsCacheable is how long a host may keep a tools/list answer, and for
// whom. The list is the caller's own: RBAC decides it, so no one else may
// be served it. It may change at any time (a Tool made, a Role bound), so
// it is stale at once. The SDK's own handlers set these fields; the
// gateway answers tools/list itself, so it sets them.
var toolsCacheable = mcp.Cacheable{TTLMs: 0, CacheScope: "private"}

// serves reports whether a ClusterTool serves the namespace whose labels
// nsLabels reads, as the manager decides it; when the caller may not read
// the namespace, it is listed and the manager decides at call time.
func serves(ct *v1.ClusterTool, nsLabels func() (labels.Set, bool)) bool {
	if ct.Spec.NamespaceSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(ct.Spec.NamespaceSelector)
	if err != nil {
		return false
	}
	set, ok := nsLabels()
	if !ok {
		return true
	}
	return sel.Matches(set)
}

// namespaceLabels reads the labels of namespace as the caller, once, on
// the first call of what it returns; ok is false when it cannot be read.
func namespaceLabels(ctx context.Context, c *caller, namespace string) func() (labels.Set, bool) {
	return sync.OnceValues(func() (labels.Set, bool) {
		ns := &corev1.Namespace{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
			return nil, false
		}
		return labels.Set(ns.Labels), true
	})
}

// notReady is a tool's Ready condition when it is False: its definition
// is not valid.
func notReady(t v1.GenericTool) *metav1.Condition {
	if ready := meta.FindStatusCondition(t.GetStatus().Conditions, v1.ConditionReady); ready != nil &&
		ready.Status == metav1.ConditionFalse {
		return ready
	}
	return nil
}

func refOf(t v1.GenericTool) v1.ToolReference {
	return v1.ToolReference{Kind: t.Kind(), Name: t.GetName()}
}

// callTool makes or finds the operation of a call by caller c in
// namespace ns, and answers its outcome.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest, c *caller, ns string) (
	mcp.Result, error) {
	if req.Params.Name == SagaToolName {
		return g.callSaga(ctx, req, c, ns)
	}
	ref, operation, ok := ParseToolName(req.Params.Name)
	if !ok {
		return nil, fmt.Errorf("unknown tool %q: tools are named <tool>__<operation> or cluster_<tool>__<operation>",
			req.Params.Name)
	}
	key, params, err := SplitArguments(req.Params.Arguments, req.Params.Meta)
	if err == nil {
		err = boundSize("the arguments", params, v1.MaxParametersBytes)
	}
	if err != nil {
		return toolError(codeInvalidArguments, err.Error(), nil), nil
	}
	// The tool, read once as the caller: for its rule of keys, and for a
	// new key's checks.
	tool, toolErr := readTool(ctx, c, ref, ns)
	key, derived, answer := g.callKey(ctx, c, ns, ref, operation, key, params, req.Params.Name, answeredOperation(req),
		tool, toolErr)
	if answer != nil {
		return answer, nil
	}
	scoped := ScopedKey(c.user, key)
	r := g.operationRequest(ns, ref, operation, scoped, params, c.user)
	derived.mark(&r)
	oc := g.onceClient(c.kube)
	// A retry goes straight to its operation: the tool may have changed or
	// gone since, and the operation's outcome is the answer all the same.
	name := once.ObjectName(ref, operation, scoped)
	found, err := c.operationExists(ctx, ns, name)
	if err != nil {
		return errorAnswer(err), nil
	}
	if !found {
		if answer := g.refusal(ctx, c, ref, ns, operation, params, req.Params.Name, tool, toolErr); answer != nil {
			// The operation may be gone (its TTL ran out after it ended)
			// while its scope's record keeps the outcome: that is the
			// answer, for as long as the record keeps it, even when the
			// tool has changed or gone since. Asked only here: Do reads
			// the record itself before it creates anything.
			if res, ok, err := oc.Recorded(ctx, r); ok {
				g.cfg.Logger.Info("tools/call answered from the record", "tool", req.Params.Name, "user", c.user,
					"namespace", ns, "operation", res.Name)
				return Answer(res, err), nil
			}
			return answer, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	r.Progress = progressNotifier(ctx, req)
	// The host's user may have answered this call's question: within the
	// call's deadline, with its keep-alives running.
	declined := false
	if found && g.asksUser(ctx, req) {
		switch err := decideOperation(ctx, c, ns, name, r, req); {
		case errors.Is(err, errDeclined):
			declined = true
		case err != nil:
			return decisionRefused(err, codeNeedsReview), nil
		}
	}
	g.cfg.Logger.Info("tools/call", "tool", req.Params.Name, "user", c.user, "namespace", ns,
		"operation", once.ObjectName(ref, operation, r.Key))
	res, err := oc.Do(ctx, r)
	if ask := g.askResolution(ctx, req, c, ns, err, declined); ask != nil {
		return ask, nil
	}
	return withDecline(Answer(res, err), declined), nil
}

// operationRequest is the request a tools/call by user makes: kept an hour
// after it ends unless the gateway is told otherwise, since each call makes
// an object.
func (g *Gateway) operationRequest(ns string, ref v1.ToolReference, operation, key string, params json.RawMessage,
	user string) once.Request {
	return once.Request{
		Namespace:               ns,
		Tool:                    ref,
		Operation:               operation,
		Key:                     key,
		Parameters:              params,
		Labels:                  map[string]string{"once.dev/via": "mcp", "once.dev/caller": CallerID(user)},
		Retention:               g.cfg.Retention,
		TTLSecondsAfterFinished: g.cfg.TTLSecondsAfterFinished,
	}
}

// refusal is the answer to a call whose operation does not exist and
// cannot be made now: the tool is gone or unusable, or the arguments do
// not fit its operation's schema. It is nil when the call can go on.
func (g *Gateway) refusal(ctx context.Context, c *caller, ref v1.ToolReference, ns, operation string,
	params json.RawMessage, name string, tool v1.GenericTool, toolErr error) *mcp.CallToolResult {
	if answer := usableTool(ctx, c, ref, ns, operation, tool, toolErr); answer != nil {
		return answer
	}
	if err := g.schemas.CheckParameters(tool.GetSpec(), operation, params); err != nil {
		return toolError(codeInvalidArguments, fmt.Sprintf("the arguments do not fit %s: %v; nothing was done, "+
			"and the key is still free", name, err), nil)
	}
	return nil
}

// readTool reads the tool a call names, as its caller.
func readTool(ctx context.Context, c *caller, ref v1.ToolReference, ns string) (v1.GenericTool, error) {
	tool, key := ref.Object(ns)
	if err := c.kube.Get(ctx, key, tool); err != nil {
		return nil, err
	}
	return tool, nil
}

// usableTool says why a call cannot go on with the tool it names, as
// readTool read it (or failed to), as a tool error; nil when it can.
func usableTool(ctx context.Context, c *caller, ref v1.ToolReference, ns, operation string, tool v1.GenericTool,
	err error) *mcp.CallToolResult {
	switch {
	case apierrors.IsForbidden(err):
		return toolError(codeForbidden, err.Error(), nil)
	case apierrors.IsNotFound(err):
		return toolError(codeUnknownTool, fmt.Sprintf("%s %s does not exist in namespace %s", ref.Kind, ref.Name, ns), nil)
	case err != nil:
		return toolError(codeAPI, err.Error(), nil)
	}
	if tool.GetSpec().Operation(operation) == nil {
		return toolError(codeUnknownTool, fmt.Sprintf("%s %s offers no operation %q", ref.Kind, ref.Name, operation), nil)
	}
	if ready := notReady(tool); ready != nil {
		return toolError(codeUnknownTool, fmt.Sprintf("%s %s is not usable: %s; nothing was done", ref.Kind, ref.Name,
			ready.Message), nil)
	}
	if ct, ok := tool.(*v1.ClusterTool); ok && !serves(ct, namespaceLabels(ctx, c, ns)) {
		return toolError(codeUnknownTool, fmt.Sprintf("ClusterTool %s does not serve namespace %s; nothing was done",
			ref.Name, ns), nil)
	}
	return nil
}

// progressMessage says where an operation or a saga is.
func progressMessage(p once.Progress) string {
	if p.Total > 0 {
		msg := fmt.Sprintf("saga %s is %s: %d of %d steps done", p.Name, p.State, p.Done, p.Total)
		if p.Message != "" {
			msg += ", at step " + p.Message
		}
		return msg
	}
	msg := fmt.Sprintf("operation %s is %s", p.Name, p.State)
	if p.Message != "" {
		msg += ": " + p.Message
	}
	return msg
}

// Codes name the kinds of answers in a tool error's structured content.
const (
	codeKeyRequired        = "IdempotencyKeyRequired"
	codeInvalidArguments   = "InvalidArguments"
	codeMismatch           = v1.ReasonIdempotencyParameterMismatch
	codeFailed             = "FailedFinal"
	codeNeedsReview        = "NeedsReview"
	codePending            = "Pending"
	codeBusy               = "Busy"
	codeWaitingForApproval = "WaitingForApproval"
	codeForbidden          = "Forbidden"
	codeUnknownTool        = "UnknownTool"
	codeAPI                = "APIError"
)

// toolError is an answer the agent reads: isError, a text that says what
// happened and what to do, and the same as structured content.
func toolError(code, msg string, extra map[string]any) *mcp.CallToolResult {
	sc := map[string]any{"error": code, "message": msg}
	maps.Copy(sc, extra)
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: code + ": " + msg}},
		StructuredContent: sc}
}

// Answer turns Do's outcome into a call's answer: what an agent is told.
func Answer(res once.Result, err error) *mcp.CallToolResult {
	if err != nil {
		return errorAnswer(err)
	}
	sc := map[string]any{
		fieldNamespace: res.Namespace, fieldOperation: res.Name, fieldState: string(res.State),
		fieldExternalID: res.ExternalObjectID, fieldReplayed: res.Found,
	}
	if len(res.Result) > 0 {
		sc["result"] = res.Result
	}
	if res.DuplicateOf != "" {
		sc["duplicateOf"] = res.DuplicateOf
	}
	if d := res.Resolution; d != nil {
		// The outcome rests on a person's word, not on Once's proof.
		sc[fieldResolution] = map[string]any{"action": string(d.Action), "by": d.Attribution()}
	}
	return structuredAnswer(sc)
}

// Fields of a successful answer's structured content.
const (
	fieldNamespace  = "namespace"
	fieldOperation  = "operation"
	fieldSaga       = "saga"
	fieldState      = "state"
	fieldExternalID = "externalObjectID"
	fieldReplayed   = "replayed"
	// fieldResolution says who decided the outcome, when a person did.
	fieldResolution = "resolution"
	// fieldReason is a failure's reason, in an error's structured content.
	fieldReason = "reason"
)

// structuredAnswer is a successful answer: sc, as structured content and
// as JSON text.
func structuredAnswer(sc map[string]any) *mcp.CallToolResult {
	text, _ := json.Marshal(sc)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(text)}}, StructuredContent: sc}
}

// failure says what a failure for good means to the agent: "no lasting
// effect" only when nothing leaves the effect open.
func failure(f *once.FailedError) string {
	switch {
	case f.EffectReported:
		return fmt.Sprintf("the %s %s failed, but the tool later reported an effect of it (%s): %s. "+
			"That effect may stand: do not make this request again under a new key; a person should look. "+
			"The same key returns this answer again", kind(f.Kind), f.Name, f.Reason, f.Message)
	case f.Decided:
		return fmt.Sprintf("the %s %s ended on a person's decision (%s): %s. "+
			"Whether an earlier attempt took effect was not established: do not make this request again under a new "+
			"key; the same key returns this answer again", kind(f.Kind), f.Name, f.Reason, f.Message)
	}
	return fmt.Sprintf("the %s %s failed for good and had no lasting effect (%s): %s; "+
		"the same key returns this answer again", kind(f.Kind), f.Name, f.Reason, f.Message)
}

// errorAnswer turns an error of Do or DoSaga into a tool error that says
// what happened and what to do.
func errorAnswer(err error) *mcp.CallToolResult {
	var (
		mismatch *once.MismatchError
		failed   *once.FailedError
		review   *once.NeedsReviewError
		pending  *once.PendingError
		approval *once.WaitingForApprovalError
	)
	switch {
	case errors.As(err, &mismatch):
		return toolError(codeMismatch, fmt.Sprintf("this idempotency key was already used for a request with other "+
			"arguments (%s %s); nothing was done for this call. Use a new key for a new request: %s",
			kind(mismatch.Kind), mismatch.Name, mismatch.Message), map[string]any{kind(mismatch.Kind): mismatch.Name})
	case errors.As(err, &failed):
		return toolError(codeFailed, failure(failed), map[string]any{kind(failed.Kind): failed.Name, fieldReason: failed.Reason})
	case errors.As(err, &review):
		return toolError(codeNeedsReview, fmt.Sprintf("Once cannot tell whether the effect of %s %s happened, "+
			"and will not guess: a person must decide (%s). Do not retry with a new key. Call this tool again later "+
			"with the same idempotency key and arguments to get the decided outcome", kind(review.Kind), review.Name,
			review.Message), map[string]any{kind(review.Kind): review.Name})
	case errors.As(err, &approval):
		return toolError(codeWaitingForApproval, fmt.Sprintf("saga %s waits for a person to approve step %s (%s). "+
			"Call this tool again later with the same idempotency key and arguments to get the outcome",
			approval.Name, approval.Step, approval.Message), map[string]any{fieldSaga: approval.Name, "step": approval.Step})
	case errors.As(err, &pending):
		return toolError(codePending, fmt.Sprintf("%s %s is still running (state %s%s); it goes on without you. "+
			"Call this tool again with the same idempotency key and arguments to get its outcome",
			kind(pending.Kind), pending.Name, pending.State, suffix(pending.Message)),
			map[string]any{kind(pending.Kind): pending.Name})
	case apierrors.IsForbidden(err):
		return toolError(codeForbidden, err.Error(), nil)
	case apierrors.IsInvalid(err):
		return toolError(codeInvalidArguments, err.Error(), nil)
	}
	return toolError(codeAPI, err.Error(), nil)
}

func kind(k string) string {
	if k == "" {
		return fieldOperation
	}
	return k
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
