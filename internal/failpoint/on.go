//go:build failpoints

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

package failpoint

import (
	"context"
	"fmt"
	"os"
	"syscall"

	gofail "go.etcd.io/gofail/runtime"
)

// Enabled reports whether failpoints are compiled in.
const Enabled = true

var points = func() map[string]*gofail.Failpoint {
	m := map[string]*gofail.Failpoint{}
	for _, name := range Points {
		m[name] = gofail.NewFailpoint(name)
	}
	return m
}()

// Hit evaluates the point and reports whether the pass must be abandoned.
// An abandoned pass first blocks until ctx ends: like a dead process, the
// worker does nothing more with the object, and its claim is left to
// expire.
func Hit(ctx context.Context, name string) bool {
	fp, ok := points[name]
	if !ok {
		panic(fmt.Sprintf("failpoint: unknown point %q", name))
	}
	v, err := fp.Acquire()
	if err != nil {
		return false
	}
	switch v {
	case "kill":
		_, _ = fmt.Fprintf(os.Stderr, "failpoint %s: killing the process\n", name)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	case "stop":
		_, _ = fmt.Fprintf(os.Stderr, "failpoint %s: stopping the process\n", name)
		stopProcess()
		return false
	case "abandon":
		<-ctx.Done()
		return true
	default:
		return false
	}
}

// Enable sets a point's gofail terms, for example `1*return("abandon")`.
func Enable(name, terms string) error { return gofail.Enable(name, terms) }

// Disable clears a point.
func Disable(name string) error { return gofail.Disable(name) }
