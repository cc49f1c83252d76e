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

package sandbox

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"time"
)

// loggingWriter records what a handler did with its response.
type loggingWriter struct {
	http.ResponseWriter
	status   int
	hijacked bool
}

func (lw *loggingWriter) WriteHeader(status int) {
	if lw.status == 0 {
		lw.status = status
	}
	lw.ResponseWriter.WriteHeader(status)
}

func (lw *loggingWriter) Write(p []byte) (int, error) {
	if lw.status == 0 {
		lw.status = http.StatusOK
	}
	return lw.ResponseWriter.Write(p)
}

// Hijack lets faults take over the connection through the wrapper.
func (lw *loggingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(lw.ResponseWriter).Hijack()
	if err == nil {
		lw.hijacked = true
	}
	return conn, rw, err
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (lw *loggingWriter) Unwrap() http.ResponseWriter {
	return lw.ResponseWriter
}

func (lw *loggingWriter) outcome() string {
	switch {
	case lw.hijacked:
		return "closed"
	case lw.status == 0:
		return "aborted"
	default:
		return strconv.Itoa(lw.status)
	}
}

// logRequests logs one line per request, once the handler is done.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		lw := &loggingWriter{ResponseWriter: w}
		defer func() {
			s.logf("%s %s -> %s in %s key=%q fault=%q replayed=%t",
				r.Method, r.URL.RequestURI(), lw.outcome(), time.Since(start).Round(time.Microsecond),
				r.Header.Get(HeaderIdempotencyKey), w.Header().Get(HeaderFault), w.Header().Get(HeaderReplayed) == "true")
		}()
		next.ServeHTTP(lw, r)
	})
}
