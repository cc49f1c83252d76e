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

package http

import (
	"context"
	"net"
	"sync/atomic"

	"github.com/once-dev/once/internal/failpoint"
)

// A fence is asked at the last moment before a request's first byte is
// written: on the request's own connection (NewTransport never reuses
// one), in its Write, just before the bytes reach the kernel. A timer that
// cancels the request's context is no such fence. A process that was
// frozen (SIGSTOP, a stalled node) wakes up with its timers and its
// writers racing. A writer that wins sends after the claim it ran under
// expired. The fence compares the clock instead, whoever runs first.
//
// What remains is the time between the check and the bytes leaving the
// host: a process frozen there, with the request already in the kernel's
// buffer, cannot stop it.
type fence struct {
	check func() error
	// connected is set once the request has its connection (after a TLS
	// handshake, whose writes are checked too); the first write after it
	// is the request's, the last one the fence guards.
	connected atomic.Bool
	passed    atomic.Bool
	// stopped is set when the fence stopped the request: nothing of it
	// left, whatever net/http reports of its buffered write.
	stopped atomic.Bool
}

// ask asks the fence, and remembers a refusal.
func (f *fence) ask() error {
	err := f.check()
	if err != nil {
		f.stopped.Store(true)
	}
	return err
}

// stoppedRequest reports whether f, if any, stopped its request.
func (f *fence) stoppedRequest() bool { return f != nil && f.stopped.Load() }

type fenceKey struct{}

// withFence returns ctx carrying check as the fence of the request made
// with it.
func withFence(ctx context.Context, check func() error) (context.Context, *fence) {
	if check == nil {
		return ctx, nil
	}
	f := &fence{check: check}
	return context.WithValue(ctx, fenceKey{}, f), f
}

// CheckFence asks the fence of the request whose context is ctx, if it has
// one; an error means the request must not be written. A transport that
// does not dial (a test's, the simulator's) calls it where it would write
// the request; NewTransport's connections call it themselves.
func CheckFence(ctx context.Context) error {
	if f, ok := ctx.Value(fenceKey{}).(*fence); ok {
		return f.ask()
	}
	return nil
}

// fencedConn asks its request's fence before each write, until the
// request's first write went through.
type fencedConn struct {
	net.Conn
	fence *fence
}

func (c *fencedConn) Write(b []byte) (int, error) {
	if f := c.fence; f != nil && !f.passed.Load() {
		if f.connected.Load() {
			failpoint.Hit(context.Background(), failpoint.BeforeWrite)
		}
		if err := f.ask(); err != nil {
			return 0, err
		}
		if f.connected.Load() {
			f.passed.Store(true)
		}
	}
	return c.Conn.Write(b)
}

// dialFenced wraps dial so that the connections it makes carry the fence
// of the request they are dialled for. The transport hands a connection to
// the request it was dialled for or closes it, since it keeps none alive.
func dialFenced(dial func(ctx context.Context, network, address string) (net.Conn, error)) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		conn, err := dial(ctx, network, address)
		if err != nil {
			return nil, err
		}
		f, _ := ctx.Value(fenceKey{}).(*fence)
		if f == nil {
			return conn, nil
		}
		if err := f.ask(); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return &fencedConn{Conn: conn, fence: f}, nil
	}
}
