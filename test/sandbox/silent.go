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
	"net"
	"sync"
)

// Silent is an endpoint that accepts TCP connections and never writes to
// them: a server that hangs (a stuck process, or a proxy or load balancer
// that holds the connection open without an upstream). A client without a
// deadline waits on it for good.
type Silent struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// NewSilent listens on a free port of 127.0.0.1.
func NewSilent() (*Silent, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Silent{ln: ln}
	go s.hold()
	return s, nil
}

// hold accepts every connection and keeps it open, unanswered.
func (s *Silent) hold() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			_ = c.Close()
		} else {
			s.conns = append(s.conns, c)
		}
		s.mu.Unlock()
	}
}

// URL is http://, its address and path.
func (s *Silent) URL(path string) string { return "http://" + s.ln.Addr().String() + path }

// Close stops listening and closes every connection held.
func (s *Silent) Close() {
	_ = s.ln.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, c := range s.conns {
		_ = c.Close()
	}
	s.conns = nil
}
