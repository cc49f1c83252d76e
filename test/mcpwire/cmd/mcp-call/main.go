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

// Command mcp-call is a minimal MCP client of the official Go SDK that acts
// as an agent: it lists the tools of an MCP server or calls one, and prints
// what it got as JSON, progress notifications on stderr. It talks to
// once-mcp over streamable HTTP with a bearer token, or starts it over
// stdio.
//
//	mcp-call --url http://127.0.0.1:18090/mcp --token "$TOKEN" list
//	mcp-call --url http://127.0.0.1:18090/mcp --token "$TOKEN" call payments__charge.create '{"amount":100,"idempotencyKey":"order-1"}'
//	mcp-call --stdio "once-mcp --stdio" list
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp-call:", err)
		os.Exit(1)
	}
}

func run() error {
	url := flag.String("url", "", "the MCP endpoint (streamable HTTP)")
	token := flag.String("token", os.Getenv("MCP_TOKEN"), "bearer token sent over HTTP (default $MCP_TOKEN)")
	namespace := flag.String("namespace", "", "namespace to ask once-mcp for (the Once-Namespace header)")
	stdio := flag.String("stdio", "", "a command that serves MCP on stdin and stdout, instead of --url")
	timeout := flag.Duration("timeout", 3*time.Minute, "how long to wait for the answer")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: mcp-call (--url URL [--token T] | --stdio CMD) (list | call TOOL [ARGUMENTS_JSON])")
		flag.PrintDefaults()
	}
	flag.Parse()
	args := flag.Args()
	if len(args) == 0 || (*url == "") == (*stdio == "") {
		flag.Usage()
		return errors.New("give a command, and exactly one of --url and --stdio")
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()

	var transport mcp.Transport
	if *url != "" {
		transport = &mcp.StreamableClientTransport{Endpoint: *url,
			HTTPClient: &http.Client{Transport: headers{token: *token, namespace: *namespace}}}
	} else {
		fields := strings.Fields(*stdio)
		cmd := exec.Command(fields[0], fields[1:]...)
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "mcp-call", Version: "v0.1.0"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			fmt.Fprintln(os.Stderr, "progress:", req.Params.Message)
		},
	})
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return fmt.Errorf("connecting: %w", err)
	}
	defer func() { _ = session.Close() }()

	var out any
	switch args[0] {
	case "list":
		res, err := session.ListTools(ctx, nil)
		if err != nil {
			return err
		}
		out = res.Tools
	case "call":
		if len(args) < 2 || len(args) > 3 {
			return errors.New("call needs a tool name and, optionally, its arguments as a JSON object")
		}
		params := &mcp.CallToolParams{Name: args[1]}
		if len(args) == 3 {
			var a map[string]any
			if err := json.Unmarshal([]byte(args[2]), &a); err != nil {
				return fmt.Errorf("the arguments must be a JSON object: %w", err)
			}
			params.Arguments = a
		}
		params.SetProgressToken("mcp-call")
		res, err := session.CallTool(ctx, params)
		if err != nil {
			return err
		}
		// The answer as the agent reads it: isError and the content; the
		// structured content holds the same as the text.
		out = struct {
			IsError           bool   `json:"isError"`
			Text              string `json:"text"`
			StructuredContent any    `json:"structuredContent,omitempty"`
		}{res.IsError, text(res), res.StructuredContent}
	default:
		return fmt.Errorf("unknown command %q: list or call", args[0])
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(b))
	return nil
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// headers adds the caller's token and namespace to every request.
type headers struct{ token, namespace string }

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	if h.namespace != "" {
		r.Header.Set("Once-Namespace", h.namespace)
	}
	return http.DefaultTransport.RoundTrip(r)
}
