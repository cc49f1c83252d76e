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

// Command sandbox-tool serves the sandbox API: a payment/ticket-like HTTP
// service with native, lookup and no idempotency, a ledger of every
// performed effect, and fault injection. See package sandbox.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/once-dev/once/test/sandbox"
)

const shutdownTimeout = 10 * time.Second

type config struct {
	listen      string
	ledger      string
	seed        int64
	faults      string
	probability float64
	quiet       bool
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "sandbox-tool: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("sandbox-tool", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.listen, "listen", "127.0.0.1:8090", "address to listen on; port 0 picks a free port")
	fs.StringVar(&cfg.ledger, "ledger", "", "ledger file (JSON lines, replayed on start); empty keeps it in memory")
	fs.Int64Var(&cfg.seed, "seed", 0, "seed for probabilistic faults")
	fs.StringVar(&cfg.faults, "faults", "", "comma-separated faults to inject, e.g. drop-after-commit,503=2")
	fs.Float64Var(&cfg.probability, "fault-probability", 0, "probability of each fault in --faults; 0 means always")
	fs.BoolVar(&cfg.quiet, "quiet", false, "log nothing to stderr")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return cfg, nil
}

// faultRules turns --faults into one rule per fault.
func faultRules(faults string, probability float64) []sandbox.FaultRule {
	var rules []sandbox.FaultRule
	for spec := range strings.SplitSeq(faults, ",") {
		if spec = strings.TrimSpace(spec); spec != "" {
			rules = append(rules, sandbox.FaultRule{Fault: spec, Probability: probability})
		}
	}
	return rules
}

func run(args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	logOutput := stderr
	if cfg.quiet {
		logOutput = io.Discard
	}
	logger := log.New(logOutput, "", log.LstdFlags|log.Lmicroseconds)
	opts := sandbox.Options{
		LedgerPath: cfg.ledger,
		Seed:       cfg.seed,
		Rules:      faultRules(cfg.faults, cfg.probability),
	}
	if !cfg.quiet {
		opts.Logf = logger.Printf
	}
	sb, err := sandbox.New(opts)
	if err != nil {
		return err
	}
	defer func() { _ = sb.Close() }()

	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if _, err := fmt.Fprintf(stdout, "sandbox-tool listening on http://%s\n", ln.Addr()); err != nil {
		return fmt.Errorf("announce address: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, ln, sb, logger)
}

// serve answers requests on ln until ctx is done, then shuts down
// gracefully and closes the ledger.
func serve(ctx context.Context, ln net.Listener, sb *sandbox.Server, logger *log.Logger) error {
	srv := &http.Server{Handler: sb.Handler(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Printf("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := sb.Close(); err != nil {
		return fmt.Errorf("close sandbox: %w", err)
	}
	return nil
}
