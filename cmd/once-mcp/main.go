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

// Command once-mcp is Once's MCP gateway: it offers the operations of the
// Tools and ClusterTools a caller may use as MCP tools, and turns each
// tools/call into a SideEffectOperation bound to the caller's idempotency
// key. See docs/mcp.md.
//
//	once-mcp --listen :8443 --tls-cert-file tls.crt --tls-key-file tls.key --namespace shop   # HTTPS at /mcp
//	once-mcp --listen 127.0.0.1:8090 --insecure-http --namespace shop   # plain HTTP, on loopback only
//	once-mcp --stdio --namespace shop                   # one client on stdin/stdout
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/yaml"

	"github.com/once-dev/once/internal/ingress"
	"github.com/once-dev/once/internal/mcpgateway"
	"github.com/once-dev/once/pkg/once"
)

// contextNamespace is the namespace of the kubeconfig's current context
// (the file --kubeconfig or $KUBECONFIG names), "default" when it has none.
func contextNamespace() (string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f := flag.Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		rules.ExplicitPath = f.Value.String()
	}
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).Namespace()
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig's namespace: %w", err)
	}
	return ns, nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "once-mcp:", err)
		os.Exit(1)
	}
}

func run() error {
	listen := flag.String("listen", "",
		"serve MCP over streamable HTTP at https://ADDR/mcp; callers authenticate with a bearer token meant for --audience")
	var web webFlags
	web.register(flag.CommandLine)
	stdio := flag.Bool("stdio", false, "serve one MCP client over stdin and stdout, as the kubeconfig's user")
	namespace := flag.String("namespace", "", "namespace of the operations; by default the kubeconfig context's "+
		"(an HTTP caller may choose another with the Once-Namespace header)")
	callTimeout := flag.Duration("call-timeout", time.Minute,
		"how long a tools/call waits for the outcome before it answers Pending (at most 10m)")
	maxCalls := flag.Int("max-calls", 256, "how many tools/calls may wait at once, in all; more are answered Busy")
	maxCallsPerCaller := flag.Int("max-calls-per-caller", 16,
		"how many tools/calls of one caller may wait at once; more are answered Busy")
	ttl := flag.Int("ttl-seconds-after-finished", int(once.DefaultTTLSecondsAfterFinished),
		"how long the operations and sagas of tools/calls are kept after they end, in seconds "+
			"(their spec.ttlSecondsAfterFinished); -1 keeps them until someone deletes them. Their scope records "+
			"keep the outcomes for --retention after they end, so a call repeated meanwhile makes no second effect")
	retention := flag.Duration("retention", 0,
		"how long the scope record of a tools/call's operation keeps its outcome after it ends "+
			"(spec.retention); 0 is the API server's default, 24h")
	routesFile := flag.String("ingress-routes", "",
		"a YAML or JSON file of ingress routes; with it, messages POSTed to http://ADDR/ingress/<route> "+
			"become operations, made as their sender (docs/outbox.md)")
	flag.Parse() // also --kubeconfig, registered by controller-runtime
	if *ttl < -1 || *ttl > math.MaxInt32 || *retention < 0 {
		return errors.New("--ttl-seconds-after-finished is -1 or from 0 to 2147483647, and --retention is not negative")
	}
	if (*listen == "") == !*stdio {
		return errors.New("give exactly one of --listen ADDR and --stdio")
	}
	// Logs go to stderr: over stdio, stdout is the protocol's. The clients
	// of controller-runtime log there too, rather than complain after 30 s
	// that no logger was set.
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctrl.SetLogger(logr.FromSlogHandler(logger.Handler()))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	if *namespace == "" {
		if *namespace, err = contextNamespace(); err != nil {
			return err
		}
	}
	var l net.Listener
	if *listen != "" {
		if l, err = web.listen(*listen); err != nil {
			return err
		}
		defer func() { _ = l.Close() }()
	}
	g, err := mcpgateway.New(mcpgateway.Config{
		REST: cfg, Namespace: *namespace, CallTimeout: *callTimeout, Logger: logger,
		Audience: web.tokenAudience(), ResourceURL: web.resourceURL(l), AuthorizationServers: web.authorizationServers,
		MaxCalls: *maxCalls, MaxCallsPerCaller: *maxCallsPerCaller,
		TTLSecondsAfterFinished: new(int32(*ttl)), Retention: *retention,
	})
	if err != nil {
		return err
	}
	if *routesFile != "" {
		if *stdio {
			return errors.New("--ingress-routes needs --listen: the ingress is served over HTTP")
		}
		routes, err := readRoutes(*routesFile)
		if err != nil {
			return err
		}
		if err := g.MountIngress(routes); err != nil {
			return fmt.Errorf("%s: %w", *routesFile, err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *stdio {
		return g.RunStdio(ctx)
	}
	srv := newServer(g.Handler(), defaultTimeouts)
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	// The first line says where the gateway listens: the harness and
	// scripts read it.
	fmt.Fprintf(os.Stderr, "once-mcp listening on %s://%s/mcp\n", web.scheme(), l.Addr())
	logger.Info("taking tokens meant for this audience", "audience", web.tokenAudience())
	if err := web.serve(srv, l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// routesFile is the file --ingress-routes names:
//
//	routes:
//	  orders:
//	    namespace: shop
//	    toolRef: {name: payments}
//	    operation: charge.create
//	    subscribers: [{name: ledger, toolRef: {name: ledger}, operation: events.publish}]
//	    signing: {secretFile: /etc/once/ingress/orders-secret}
type routesFile struct {
	Routes map[string]ingress.Route `json:"routes"`
}

// readRoutes reads the ingress's routes, refusing fields it does not know.
func readRoutes(path string) (map[string]ingress.Route, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f routesFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(f.Routes) == 0 {
		return nil, fmt.Errorf("%s names no routes", path)
	}
	return f.Routes, nil
}
