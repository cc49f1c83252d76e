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
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// short are timeouts a test waits out.
var short = timeouts{readHeader: 300 * time.Millisecond, read: 300 * time.Millisecond, idle: 300 * time.Millisecond}

// serveShort serves h with the short timeouts on loopback, and returns its
// address.
func serveShort(t *testing.T, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(h, short)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// closedWithin reports whether the server closes conn within d.
func closedWithin(t *testing.T, conn net.Conn, r *bufio.Reader, d time.Duration) bool {
	t.Helper()
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		t.Fatal(err)
	}
	_, err := io.Copy(io.Discard, r)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestIdleConnectionClosed: a keep-alive connection that sends nothing
// after its answer is closed after the idle timeout. The gateway's server
// had none, and kept such a connection open for ever.
func TestIdleConnectionClosed(t *testing.T) {
	addr := serveShort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.Close {
		t.Fatal("the answer closes the connection: nothing is left to test")
	}
	start := time.Now()
	if !closedWithin(t, conn, r, 10*short.idle) {
		t.Errorf("an idle keep-alive connection is still open after %s; the idle timeout is %s", 10*short.idle, short.idle)
	} else if took := time.Since(start); took < short.idle/2 {
		t.Errorf("an idle connection was closed after %s, before the idle timeout, %s", took, short.idle)
	}
}

// TestSlowBodyCut: a request whose body trickles in is cut after the read
// timeout, whatever the handler. The server had none: a body of a byte a
// second held its connection and handler for as long as it came.
func TestSlowBodyCut(t *testing.T) {
	addr := serveShort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, "cut", http.StatusRequestTimeout)
			return
		}
		_, _ = w.Write([]byte("read"))
	}))
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprint(conn, "POST /mcp HTTP/1.1\r\nHost: gateway\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for range 200 {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				if _, err := conn.Write([]byte("x")); err != nil {
					return
				}
			}
		}
	}()
	start := time.Now()
	if !closedWithin(t, conn, bufio.NewReader(conn), 10*short.read) {
		t.Errorf("a body of a byte each 50 ms is still read after %s; the read timeout is %s", 10*short.read, short.read)
	} else if took := time.Since(start); took < short.read/2 {
		t.Errorf("a slow body was cut after %s, before the read timeout, %s", took, short.read)
	}
}

// TestLongAnswerNotCut: a call that waits longer than the read and idle
// timeouts after reading its body, as a tools/call waits for its outcome,
// is neither cancelled nor cut. With ReadTimeout alone, net/http's read of
// the idle connection passes the deadline while the handler runs, and
// cancels the request's context.
func TestLongAnswerNotCut(t *testing.T) {
	wait := 5 * max(short.read, short.idle)
	addr := serveShort(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		// A streamed answer's first bytes, as the SDK sends its headers.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
			_, _ = w.Write([]byte("cancelled"))
		case <-time.After(wait):
			_, _ = w.Write([]byte("done"))
		}
	}))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`
	resp, err := http.Post("http://"+addr+"/mcp", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	got, err := io.ReadAll(resp.Body)
	if err != nil || string(got) != "done" {
		t.Errorf("a call that waits %s answered %q (error %v), want \"done\"", wait, got, err)
	}
}

// TestHeadersBounded: a request whose headers pass 64 KiB is answered 431
// before any handler sees it; one just under is served. The server took
// net/http's default of 1 MiB, which a made-up token could fill, and
// which a TokenReview then carried.
func TestHeadersBounded(t *testing.T) {
	served := 0
	addr := serveShort(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served++
		_, _ = w.Write([]byte("ok"))
	}))
	for _, tc := range []struct {
		token int
		want  int
	}{{maxHeaderBytes - 1024, http.StatusOK}, {maxHeaderBytes + 4096, http.StatusRequestHeaderFieldsTooLarge},
		{1 << 20, http.StatusRequestHeaderFieldsTooLarge}} {
		req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/mcp", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("t", tc.token))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("a token of %d bytes: %v", tc.token, err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a token of %d bytes: got %d, want %d", tc.token, resp.StatusCode, tc.want)
		}
	}
	if served != 1 {
		t.Errorf("the handler served %d requests, want 1: headers over the bound reach no handler", served)
	}
}
