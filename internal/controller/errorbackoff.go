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
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// DefaultMaxErrorBackoff is the longest a controller waits before it
// retries a reconcile that returned an error (the API server unreachable,
// a write it refused). controller-runtime's default lets the wait double
// up to 1000s: after an outage of the API server, an object that kept
// failing during it waited up to the outage's length again for its next
// try. Capped at a few seconds, every object is back within seconds of the
// API server's return. Waits the reconcilers declare (a lookup delay, the
// backoff between attempts, a claim, a delivery's backoff) are
// RequeueAfter, not errors, and keep their own schedule.
const DefaultMaxErrorBackoff = 5 * time.Second

// errorBackoffBase is the wait after a reconcile's first error in a row,
// as controller-runtime's.
const errorBackoffBase = 5 * time.Millisecond

// ErrorBackoff is how a controller retries the reconciles that returned an
// error. The wait is errorBackoffBase, doubling with every error in a
// row, up to Max. Each wait is drawn between half of it and all of it, so
// that the objects an outage failed together do not all come back at
// once. A reconcile that succeeds or returns a RequeueAfter starts the
// doubling again.
type ErrorBackoff struct {
	// Max caps a wait; DefaultMaxErrorBackoff if not positive.
	Max time.Duration
	// Jitter draws a uniform duration in [0, d]; math/rand if nil.
	Jitter func(d time.Duration) time.Duration
}

// rateLimiter is the rate limiter of one controller's work queue; each
// controller needs its own, since it counts errors per request.
func (b ErrorBackoff) rateLimiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return NewErrorRateLimiter[reconcile.Request](b)
}

// NewErrorRateLimiter is a work queue rate limiter that waits as b says:
// client-go's per-item exponential limiter, which doubles, caps and
// forgets, with each of its waits jittered. The simulator's work queues
// use it too, on their own requests.
func NewErrorRateLimiter[T comparable](b ErrorBackoff) workqueue.TypedRateLimiter[T] {
	maxWait := b.Max
	if maxWait <= 0 {
		maxWait = DefaultMaxErrorBackoff
	}
	jitter := b.Jitter
	if jitter == nil {
		jitter = randomJitter
	}
	return &jitteredLimiter[T]{
		TypedRateLimiter: workqueue.NewTypedItemExponentialFailureRateLimiter[T](errorBackoffBase, maxWait),
		jitter:           jitter,
	}
}

// jitteredLimiter draws each wait of a rate limiter between half of it and
// all of it ("equal jitter"): spread out, never past the limiter's cap.
type jitteredLimiter[T comparable] struct {
	workqueue.TypedRateLimiter[T]
	jitter func(d time.Duration) time.Duration
}

// When is the wait before item's retry.
func (l *jitteredLimiter[T]) When(item T) time.Duration {
	d := l.TypedRateLimiter.When(item)
	return jittered(d, l.jitter)
}

// jittered is d less a draw of jitter over [0, d/2]: in [d/2, d] whatever
// jitter returns.
func jittered(d time.Duration, jitter func(time.Duration) time.Duration) time.Duration {
	half := d / 2
	return d - min(max(jitter(half), 0), half)
}

// randomJitter draws a uniform duration in [0, d]: full jitter.
func randomJitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d + 1)
}
