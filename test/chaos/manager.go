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

package chaos

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/once-dev/once/internal/failpoint"
	"github.com/once-dev/once/test/harness"
)

// supervisor runs the manager as a process of its own and kills it: with
// SIGKILL at random moments, or by arming a failpoint with return("kill")
// through gofail's HTTP endpoint, so that the manager kills itself inside a
// protocol window. After each death it starts a new manager, with a new
// holder identity, within a second. On request it also stalls a manager
// while its successor runs (see stall), or stops it gracefully as a
// rolling update does (see terminate).
type supervisor struct {
	cp     *harness.ControlPlane
	args   []string
	seed   int64
	logDir string
	log    func(format string, args ...any)
	rng    *rand.Rand

	// proc is the running manager and fpAddr its gofail endpoint; only the
	// supervising goroutine touches them while it runs.
	proc   *harness.Process
	fpAddr string

	mu sync.Mutex
	kills
}

// kills counts what the supervisor did.
type kills struct {
	starts, killsRandom, killsFailpoint, misses, stalls int
	fpKills                                             map[string]int
	// unexpected holds the log tail of every manager that exited on its
	// own.
	unexpected []string
	// terms counts graceful stops, termTimeouts those of them that had to
	// be finished with SIGKILL, and termLongest is the longest time a
	// manager took to exit after SIGTERM. termIssues describe the stops
	// that timed out or exited with an error.
	terms, termTimeouts int
	termLongest         time.Duration
	termIssues          []string
}

// counts returns a copy of the counters.
func (s *supervisor) counts() kills {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.kills
	k.fpKills = maps.Clone(s.fpKills)
	k.unexpected = slices.Clone(s.unexpected)
	k.termIssues = slices.Clone(s.termIssues)
	return k
}

// count changes the counters under the lock.
func (s *supervisor) count(f func(k *kills)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.kills)
}

func newSupervisor(cp *harness.ControlPlane, c Config, logDir string, log func(string, ...any)) *supervisor {
	return &supervisor{
		cp:   cp,
		seed: c.Seed,
		args: []string{"--max-claim=3s", "--claim-grace=1s",
			fmt.Sprintf("--max-concurrent-reconciles=%d", c.MaxConcurrentReconciles)},
		logDir: logDir,
		log:    log,
		rng:    rand.New(rand.NewPCG(uint64(c.Seed), 0x4b111)),
		kills:  kills{fpKills: map[string]int{}},
	}
}

// start runs a new manager with its own holder identity, failpoint
// endpoint and log file.
func (s *supervisor) start() error {
	addr, err := harness.FreeAddr()
	if err != nil {
		return err
	}
	var n int
	s.count(func(k *kills) { k.starts++; n = k.starts })
	p, err := s.cp.StartManager(harness.ManagerOptions{
		Holder:        fmt.Sprintf("chaos-%d-m%03d", s.seed, n),
		FailpointAddr: addr,
		Args:          s.args,
		Log:           filepath.Join(s.logDir, fmt.Sprintf("manager-%03d.log", n)),
	})
	if err != nil {
		return fmt.Errorf("starting manager %d: %w", n, err)
	}
	s.proc, s.fpAddr = p, addr
	return nil
}

// supervise kills and restarts the manager every interval on average
// until calm is asked for, then keeps one manager running (restarting it
// should it exit on its own) until ctx is done. Of the kills, fpShare are
// made by a failpoint, stallShare are stalls instead and termShare are
// graceful stops. calmed is closed once the chaos has stopped and a
// manager without an armed failpoint runs.
func (s *supervisor) supervise(ctx context.Context, interval time.Duration, fpShare, stallShare, termShare float64,
	calm <-chan struct{}, calmed chan<- struct{}) {
	chaos := interval > 0
	signalled := false
	for {
		if !chaos && !signalled {
			close(calmed)
			signalled = true
		}
		var next <-chan time.Time
		if chaos {
			next = time.After(time.Duration((0.5 + s.rng.Float64()) * float64(interval)))
		}
		select {
		case <-ctx.Done():
			return
		case <-calm:
			calm = nil
			chaos = false
			continue
		case <-s.proc.Done():
			s.exitedOnItsOwn()
		case <-next:
			switch x := s.rng.Float64(); {
			case x < stallShare:
				s.stall(ctx)
				continue // the successor runs already
			case x < stallShare+fpShare:
				s.killByFailpoint(ctx, interval)
			case x < stallShare+fpShare+termShare:
				s.terminate()
			default:
				s.log("SIGKILL %s (pid %d)", s.name(), s.proc.Pid())
				s.proc.Kill()
				s.count(func(k *kills) { k.killsRandom++ })
			}
		}
		// A new process, a new holder, within a second.
		select {
		case <-time.After(time.Duration(100+s.rng.IntN(900)) * time.Millisecond):
		case <-ctx.Done():
			return
		}
		if !s.restart() {
			return
		}
	}
}

// restart starts a new manager, trying twice.
func (s *supervisor) restart() bool {
	if err := s.start(); err != nil {
		s.log("%v; retrying", err)
		time.Sleep(time.Second)
		if err := s.start(); err != nil {
			s.log("%v; giving up", err)
			return false
		}
	}
	return true
}

// stallFor is how long a stall freezes a manager's calls: longer than the
// Lookup tool's lookupDelay, so that a successor can look the stalled
// attempt up, find it absent and retry before the stalled call is sent.
const stallFor = lookupDelay + 3*time.Second

// stall is docs/design.md's fault matrix's "worker double execution": it makes the running
// manager's next claimed attempt (and every other attempt it claims
// meanwhile) wait stallFor between the claim and the call, as a long GC
// pause or a frozen node would; starts a successor next to it at once;
// and kills the stalled manager a while after its calls went out, so that
// its stale calls and its fenced writes happen while the successor runs.
func (s *supervisor) stall(ctx context.Context) {
	old := s.proc
	terms := fmt.Sprintf("1*sleep(%d)", stallFor.Milliseconds())
	if err := s.arm(ctx, failpoint.ExecuteAfterClaim, terms); err != nil {
		s.log("stalling %s: %v; SIGKILL instead", s.name(), err)
		old.Kill()
		s.count(func(k *kills) { k.killsRandom++ })
		s.restart()
		return
	}
	stalled := s.name()
	s.count(func(k *kills) { k.stalls++ })
	if !s.restart() {
		return
	}
	s.log("%s stalls its calls for %s; %s runs next to it", stalled, stallFor, s.name())
	select {
	case <-time.After(stallFor + 3*time.Second):
	case <-ctx.Done():
	}
	s.log("SIGKILL the stalled %s (pid %d)", stalled, old.Pid())
	old.Kill()
}

// termGrace bounds a graceful stop. The manager drains its in-flight
// calls within their claims (--max-claim) and then exits; this leaves that
// ample room, as a pod's terminationGracePeriodSeconds would.
const termGrace = 30 * time.Second

// terminate stops the manager as a rolling update does: SIGTERM, then a
// wait for it to exit on its own, finished with SIGKILL after termGrace.
// The successor starts only after it exited, as with a Recreate strategy or
// a leader that hands over on exit.
func (s *supervisor) terminate() {
	p, name := s.proc, s.name()
	s.log("SIGTERM %s (pid %d): a rolling update", name, p.Pid())
	began := time.Now()
	p.Stop(termGrace)
	took := time.Since(began)
	code, _ := p.Wait(time.Second)
	var issue string
	sig, signalled := p.Signaled()
	timedOut := signalled && sig == syscall.SIGKILL
	switch {
	case timedOut:
		issue = fmt.Sprintf("%s did not exit within %s of SIGTERM and was killed; log %s ends:\n%s",
			name, termGrace, p.Log, lastLines(readFile(p.Log), 20))
	case signalled:
		issue = fmt.Sprintf("%s was ended by %s instead of exiting; log %s", name, sig, p.Log)
	case code != 0:
		issue = fmt.Sprintf("%s exited with code %d after SIGTERM; log %s ends:\n%s",
			name, code, p.Log, lastLines(readFile(p.Log), 20))
	}
	if issue != "" {
		s.log("%s", issue)
	} else {
		s.log("%s exited %s after SIGTERM", name, took.Round(time.Millisecond))
	}
	s.count(func(k *kills) {
		k.terms++
		k.termLongest = max(k.termLongest, took)
		if issue != "" {
			k.termIssues = append(k.termIssues, issue)
		}
		if timedOut {
			k.termTimeouts++
		}
	})
}

// killByFailpoint arms a random failpoint with return("kill") and waits
// for the manager to reach it; if it does not within interval, it sends
// SIGKILL.
func (s *supervisor) killByFailpoint(ctx context.Context, interval time.Duration) {
	point := failpoint.Points[s.rng.IntN(len(failpoint.Points))]
	if err := s.arm(ctx, point, `return("kill")`); err != nil {
		s.log("arming %s: %v; SIGKILL instead", point, err)
		s.proc.Kill()
		s.count(func(k *kills) { k.killsRandom++ })
		return
	}
	select {
	case <-s.proc.Done():
		if strings.Contains(readFile(s.proc.Log), "failpoint "+point+": killing the process") {
			s.log("%s killed itself at %s", s.name(), point)
			s.count(func(k *kills) { k.killsFailpoint++; k.fpKills[point]++ })
		} else {
			s.exitedOnItsOwn()
		}
	case <-time.After(interval):
		s.log("%s did not reach %s within %s; SIGKILL", s.name(), point, interval)
		s.proc.Kill()
		s.count(func(k *kills) { k.misses++; k.killsRandom++ })
	case <-ctx.Done():
		s.proc.Kill()
	}
}

// arm sets point to terms through the manager's gofail endpoint, which
// may take a moment to listen after a start.
func (s *supervisor) arm(ctx context.Context, point, terms string) error {
	url := "http://" + s.fpAddr + "/" + point
	var last error
	for range 50 {
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(terms))
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusOK {
				s.log("armed %s=%s in %s", point, terms, s.name())
				return nil
			}
			err = fmt.Errorf("gofail answered %s", resp.Status)
		}
		last = err
		if s.proc.Exited() {
			return fmt.Errorf("the manager exited: %w", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return last
}

// exitedOnItsOwn records a manager that exited without being killed.
func (s *supervisor) exitedOnItsOwn() {
	code, _ := s.proc.Wait(time.Second)
	tail := lastLines(readFile(s.proc.Log), 20)
	s.log("%s exited on its own (code %d); log %s", s.name(), code, s.proc.Log)
	u := fmt.Sprintf("%s exited with code %d; log %s ends:\n%s", s.name(), code, s.proc.Log, tail)
	s.count(func(k *kills) { k.unexpected = append(k.unexpected, u) })
}

// name names the running manager by its log file.
func (s *supervisor) name() string {
	return strings.TrimSuffix(filepath.Base(s.proc.Log), ".log")
}

// stop ends the running manager gracefully.
func (s *supervisor) stop() {
	if s.proc != nil && !s.proc.Exited() {
		s.proc.Stop(15 * time.Second)
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
