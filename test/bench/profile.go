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

package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// profiler takes CPU profiles of the first manager and of the API server
// while a phase runs, and the manager's heap at its end. Profiles are
// written to the phase's folder, for `go tool pprof`.
type profiler struct {
	e       *env
	manager string // the manager's pprof address; empty for none
	wg      sync.WaitGroup
	mu      sync.Mutex
	errs    []error
}

// cpu starts both CPU profiles, each lasting d.
func (p *profiler) cpu(ctx context.Context, d time.Duration) {
	secs := strconv.Itoa(max(1, int(d.Seconds())))
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		p.keep(p.fromManager(ctx, "/debug/pprof/profile?seconds="+secs, "manager-1.cpu.pprof"))
	}()
	go func() {
		defer p.wg.Done()
		data, err := p.e.metrics.Get().AbsPath("/debug/pprof/profile").Param("seconds", secs).
			Timeout(d + time.Minute).DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(p.e.dir, "apiserver.cpu.pprof"), data, 0o644)
		}
		p.keep(err)
	}()
}

// heap saves the manager's heap profile now.
func (p *profiler) heap(ctx context.Context) {
	p.keep(p.fromManager(ctx, "/debug/pprof/heap", "manager-1.heap.pprof"))
}

// wait waits for the CPU profiles and returns what failed.
func (p *profiler) wait() error {
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.errs) > 0 {
		return fmt.Errorf("profiling: %v", p.errs)
	}
	return nil
}

func (p *profiler) keep(err error) {
	if err != nil {
		p.mu.Lock()
		p.errs = append(p.errs, err)
		p.mu.Unlock()
	}
}

func (p *profiler) fromManager(ctx context.Context, path, file string) error {
	body, err := get(ctx, "http://"+p.manager+path)
	if err != nil {
		return err
	}
	defer func() { _ = body.Close() }()
	f, err := os.Create(filepath.Join(p.e.dir, file))
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
