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

package main

import (
	"net/http"
	"time"
)

// timeouts are those of the gateway's HTTP server.
type timeouts struct {
	// readHeader bounds reading a request's headers, from its first byte
	// or the end of the previous request.
	readHeader time.Duration
	// read bounds reading a whole request, headers and body: an MCP body
	// is at most mcpgateway.MaxRequestBodyBytes, a message at most 256 KiB.
	// Once the body is read, net/http lifts it while the handler runs: a
	// tools/call that waits for its outcome is not cancelled.
	read time.Duration
	// idle bounds how long a keep-alive connection waits for its next
	// request. Longer than Go's client default (90 s), so that such a
	// client closes first and never sends a request on a connection the
	// gateway is closing.
	idle time.Duration
}

// defaultTimeouts: 1 MiB in 30 s is 35 KB/s.
var defaultTimeouts = timeouts{readHeader: 10 * time.Second, read: 30 * time.Second, idle: 2 * time.Minute}

// newServer is the gateway's HTTP server for h. It has no write timeout: a
// tools/call streams its answer for up to the call timeout (10 minutes at
// most). The gateway holds no long-lived GET open: its MCP handler is
// stateless, and the SDK answers a GET of /mcp 405.
func newServer(h http.Handler, t timeouts) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, IdleTimeout: t.idle,
		MaxHeaderBytes: maxHeaderBytes}
}

// maxHeaderBytes bounds a request's headers: a bearer token, a message's
// signature and CloudEvent attributes. net/http's default is 1 MiB, which
// each connection may hold and each TokenReview may carry.
const maxHeaderBytes = 64 << 10
