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

package sim

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
)

// The API server's own faults, as a manager meets them on a write
// (Options.APIFaultRate):
//   - 429 Too Many Requests: API Priority and Fairness sheds the request
//     before anything is done;
//   - 500: the request failed in the server (a webhook, etcd's leader
//     lost) and nothing was written;
//   - an answer lost after the write: etcd committed it, then the server
//     answered "etcdserver: request timed out", or the connection reset
//     on the way back. The write stands; the client cannot tell it from
//     one that did not happen, and its object keeps what it sent.
//
// Reads are left alone: a failed read changes nothing, and the freezes
// and partitions already make them fail.
type apiFault int

const (
	apiFaultNone apiFault = iota
	apiFaultThrottled
	apiFaultInternal
	apiFaultAnswerLost
)

// errAnswerLost is what a client sees when a write's answer is lost.
var errAnswerLost = errors.New("http2: client connection lost")

// verbDelete is the gate's name of a delete.
const verbDelete = "delete"

// writeVerbs are the verbs that change something.
var writeVerbs = map[string]bool{"create": true, "update": true, "patch": true, verbDelete: true,
	"update status": true, "patch status": true}

// drawAPIFault decides what the API server does with a manager's write,
// at the call's own site: a fault on one write moves no other draw.
func (w *World) drawAPIFault(pr *passRun, verb, call string) apiFault {
	if pr == nil || !writeVerbs[verb] {
		return apiFaultNone
	}
	return w.drawAPIFaultAt(pr.site()+"|"+call, 3)
}

// drawAPIFaultAt draws a fault at site among the first kinds of apiFault.
func (w *World) drawAPIFaultAt(site string, kinds int) apiFault {
	if w.opts.APIFaultRate <= 0 || w.draws.Float64("api fault|"+site) >= w.opts.APIFaultRate {
		return apiFaultNone
	}
	return apiFault(1 + w.draws.IntN("api fault kind|"+site, kinds))
}

// callerGate is the callers' way to the API server (Options.CallerFaults).
// A caller reaches it as kubectl does: no cache, no freeze, no partition.
// But a throttled or failing API server fails a caller's requests too:
//   - a write meets what a manager's write meets: a 429, a 500, or an
//     answer lost after the write landed;
//   - a read meets a 429 or a 500. API Priority and Fairness sheds reads
//     as it sheds writes, and a caller has no freezes or partitions that
//     already fail its reads.
//
// Each draw has a site of the call's request and the API call, so a
// call's faults move no other draw.
type callerGate struct{ w *World }

// calling is the request whose call runs now, in the sites of its draws.
func (g callerGate) calling() string {
	if g.w.callers == nil || g.w.callers.calling == "" {
		return ""
	}
	return "caller " + g.w.callers.calling
}

func (g callerGate) API(verb, name string, obj runtime.Object) error {
	who := g.calling()
	if who == "" {
		return nil
	}
	call := verb + " " + kindOf(obj) + " " + name
	kinds := 2
	if writeVerbs[verb] {
		kinds = 3
	}
	switch f := g.w.drawAPIFaultAt(who+"|"+call, kinds); f {
	case apiFaultNone:
	case apiFaultAnswerLost:
		g.w.callers.lost = call
	default:
		err := apiError(f, call)
		g.w.note("the API server answers the %s's %s: %v", who, call, err)
		return err
	}
	return nil
}

func (g callerGate) Read(runtime.Object) {}

func (g callerGate) AnswerLost(verb, name string, obj runtime.Object) bool {
	call := verb + " " + kindOf(obj) + " " + name
	if g.calling() == "" || g.w.callers.lost != call {
		return false
	}
	g.w.callers.lost = ""
	g.w.note("the API server applies the %s's %s, and its answer is lost", g.calling(), call)
	return true
}

// apiError is the error a manager gets for a fault drawn before the write.
func apiError(f apiFault, call string) error {
	switch f {
	case apiFaultThrottled:
		return apierrors.NewTooManyRequests(fmt.Sprintf("too many requests: %s", call), 1)
	case apiFaultInternal:
		return apierrors.NewInternalError(errors.New("etcdserver: leader changed"))
	}
	return nil
}
