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

package controller

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// req is the request "ns/name".
func req(s string) reconcile.Request {
	ns, name, _ := strings.Cut(s, "/")
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}
}

func TestNamespaceFair(t *testing.T) {
	// A step pushes the requests of a comma-separated list ("+a/1,b/1"),
	// or pops n of them ("-3").
	cases := map[string]struct {
		reason string
		steps  []string
		want   string
	}{
		"OneNamespace": {reason: "One namespace's requests come out in the order they came in.",
			steps: []string{"+a/1,a/2,a/3", "-3"}, want: "a/1 a/2 a/3"},
		"Flood": {reason: "A namespace's backlog does not hold back another's request: it comes second.",
			steps: []string{"+a/1,a/2,a/3,a/4,a/5,b/1", "-6"}, want: "a/1 b/1 a/2 a/3 a/4 a/5"},
		"Turns": {reason: "Namespaces take turns, one request each.",
			steps: []string{"+a/1,a/2,a/3,b/1,b/2,c/1", "-6"}, want: "a/1 b/1 c/1 a/2 b/2 a/3"},
		"LateComer": {reason: "A namespace that had nothing waiting takes its turn after every other's in the round.",
			steps: []string{"+a/1,a/2,b/1,b/2", "-1", "+c/1", "-4"}, want: "a/1 b/1 a/2 c/1 b/2"},
		"EmptiedAndBack": {reason: "A namespace that ran out and comes back waits for the others' turns.",
			steps: []string{"+a/1,b/1,b/2,b/3", "-2", "+a/2", "-3"}, want: "a/1 b/1 b/2 a/2 b/3"},
		"Drained": {reason: "A queue emptied and filled again starts over.",
			steps: []string{"+a/1,b/1", "-2", "+b/2,a/2", "-2"}, want: "a/1 b/1 b/2 a/2"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			q := &namespaceFair{queues: map[string][]reconcile.Request{}}
			var got []string
			for _, s := range tc.steps {
				if rest, ok := strings.CutPrefix(s, "+"); ok {
					for r := range strings.SplitSeq(rest, ",") {
						q.Push(req(r))
					}
					continue
				}
				n := 0
				for _, c := range strings.TrimPrefix(s, "-") {
					n = n*10 + int(c-'0')
				}
				for range n {
					got = append(got, q.Pop().String())
				}
			}
			if diff := cmp.Diff(tc.want, strings.Join(got, " ")); diff != "" {
				t.Errorf("%s\norder: -want +got:\n%s", tc.reason, diff)
			}
			if q.Len() != 0 || len(q.turns) != 0 || len(q.queues) != 0 {
				t.Errorf("%s\nafter popping every request: Len %d, turns %v, queues %v", tc.reason, q.Len(), q.turns, q.queues)
			}
		})
	}
}

// The queue a controller gets keeps client-go's rules (a request queued
// twice is handed out once; one in progress is not handed out again until
// done) and hands out the ready ones namespace by namespace.
func TestFairQueue(t *testing.T) {
	q := newFairQueue("test-fair-queue", ErrorBackoff{}.rateLimiter())
	defer q.ShutDown()
	for _, r := range []string{"a/1", "a/2", "a/1", "a/3", "b/1"} {
		q.Add(req(r))
	}
	if q.Len() != 4 {
		t.Fatalf("Len after queueing a/1 twice: want 4, got %d", q.Len())
	}
	first, _ := q.Get()
	// Queued again while in progress: handed out once it is done, after
	// the others that wait.
	q.Add(first)
	var got []string
	for range 3 {
		r, _ := q.Get()
		got = append(got, r.String())
		q.Done(r)
	}
	q.Done(first)
	r, _ := q.Get()
	got = append(got, r.String())
	q.Done(r)
	if diff := cmp.Diff("b/1 a/2 a/3 a/1", strings.Join(got, " ")); diff != "" {
		t.Errorf("order after a/1: -want +got:\n%s", diff)
	}

	q.AddAfter(req("c/1"), 20*time.Millisecond)
	q.Add(req("d/1"))
	r, _ = q.Get()
	if r != req("d/1") {
		t.Errorf("a request due later waits: want d/1 first, got %s", r)
	}
	q.Done(r)
	r, _ = q.Get()
	if r != req("c/1") {
		t.Errorf("the delayed request once due: want c/1, got %s", r)
	}
	q.Done(r)
}
