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
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const ms = time.Millisecond

// noJitter draws nothing off a wait; mostJitter draws all it may.
func noJitter(time.Duration) time.Duration     { return 0 }
func mostJitter(d time.Duration) time.Duration { return d }

func TestErrorRateLimiterWaits(t *testing.T) {
	cases := map[string]struct {
		reason string
		b      ErrorBackoff
		want   []time.Duration
	}{
		"GrowsToTheDefaultCap": {
			reason: "Waits double from 5ms and stop at DefaultMaxErrorBackoff, as the first errors of an outage come.",
			b:      ErrorBackoff{Jitter: noJitter},
			want: []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms,
				1280 * ms, 2560 * ms, 5 * time.Second, 5 * time.Second, 5 * time.Second},
		},
		"ConfiguredCap": {
			reason: "Max caps the waits.",
			b:      ErrorBackoff{Max: time.Second, Jitter: noJitter},
			want:   []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second},
		},
		"NegativeMaxIsTheDefault": {
			reason: "A cap that is not positive would retry at once, for ever: the default stands in.",
			b:      ErrorBackoff{Max: -time.Second, Jitter: noJitter},
			want: []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms,
				1280 * ms, 2560 * ms, 5 * time.Second},
		},
		"MostJitterHalves": {
			reason: "The most jitter takes half of a wait off, never more.",
			b:      ErrorBackoff{Max: time.Second, Jitter: mostJitter},
			want: []time.Duration{2500 * time.Microsecond, 5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms,
				500 * ms, 500 * ms},
		},
		"JitterOutOfRange": {
			reason: "A jitter that draws past its range is held to it: a wait stays between half of it and all of it.",
			b: ErrorBackoff{Max: 40 * ms, Jitter: func(d time.Duration) time.Duration {
				if d > 5*ms {
					return -d
				}
				return 3 * d
			}},
			want: []time.Duration{2500 * time.Microsecond, 5 * ms, 20 * ms, 40 * ms, 40 * ms},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := NewErrorRateLimiter[string](tc.b)
			var got []time.Duration
			for range tc.want {
				got = append(got, l.When("op"))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nWhen(...) in a row: -want, +got:\n%s", tc.reason, diff)
			}
			if n := l.NumRequeues("op"); n != len(tc.want) {
				t.Errorf("NumRequeues: got %d, want %d", n, len(tc.want))
			}
		})
	}
}

// TestErrorRateLimiterForget: a reconcile that succeeds, or waits on a
// RequeueAfter, makes controller-runtime forget its request: its next
// error waits the first wait again. Other requests keep their count.
func TestErrorRateLimiterForget(t *testing.T) {
	l := NewErrorRateLimiter[string](ErrorBackoff{Jitter: noJitter})
	for range 20 {
		l.When("a")
	}
	l.When("b")
	l.When("b")
	l.Forget("a")
	got := map[string]time.Duration{"a": l.When("a"), "b": l.When("b")}
	want := map[string]time.Duration{"a": 5 * ms, "b": 20 * ms}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the waits after forgetting a: -want, +got:\n%s", diff)
	}
	if n := l.NumRequeues("a"); n != 1 {
		t.Errorf("NumRequeues(a) after Forget and one error: got %d, want 1", n)
	}
}

// TestErrorRateLimiterJitterSpreads draws from a seeded source, as the
// simulator does: every wait lies between half of its unjittered value
// and all of it, and the waits of requests that failed together spread
// over that range instead of coming back at once.
func TestErrorRateLimiterJitterSpreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	jitter := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d) + 1)) }
	l := NewErrorRateLimiter[int](ErrorBackoff{Max: 4 * time.Second, Jitter: jitter})
	unjittered := NewErrorRateLimiter[int](ErrorBackoff{Max: 4 * time.Second, Jitter: noJitter})
	const requests, failures = 200, 14
	for n := range failures {
		full := unjittered.When(0)
		lo, hi := full, time.Duration(0)
		for r := range requests {
			w := l.When(r)
			if w < full/2 || w > full {
				t.Fatalf("error %d of request %d: wait %s outside [%s, %s]", n+1, r, w, full/2, full)
			}
			lo, hi = min(lo, w), max(hi, w)
		}
		// 200 uniform draws leave no tenth of the range empty at either end.
		if lo > full/2+full/20 || hi < full-full/20 {
			t.Errorf("error %d: waits spread over [%s, %s] only, of [%s, %s]", n+1, lo, hi, full/2, full)
		}
	}
}
