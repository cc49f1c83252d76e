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

// Package once is a small client for Go programs that want a side effect to
// happen once: Do creates a SideEffectOperation for an idempotency key, or
// finds the one that already exists for it, waits for its outcome and
// returns it as a Result or a typed error.
//
// # The key rule
//
// The object's name is derived from the tool, the operation and the key
// (ObjectName), unless the Request names it. A retry of Do with the same
// request therefore finds the same object, whatever happened to the first
// call: the program crashed, the answer was lost, the context ran out. Do
// never creates a second object under a new name for the same key.
//
// # Answers
//
//   - a Result: the effect is committed (or, for a saga's step, compensated);
//   - *MismatchError: the key is bound to a different request (other
//     parameters, another tool or operation); nothing was executed for this
//     request. Do detects it itself when the derived name already holds a
//     different spec, and the operator reports it (reason
//     IdempotencyParameterMismatch) when another object holds the key;
//   - *FailedError: the operation failed for good (FailedFinal) and had no
//     effect;
//   - *NeedsReviewError: Once cannot tell whether the effect happened, and a
//     person must decide (spec.resolution); a later Do with the same key
//     returns the decided outcome;
//   - *PendingError: the context ended first; the operation goes on, and a
//     later Do with the same key returns its outcome.
//
// # After the operation went
//
// An operation Do makes is deleted an hour after it ends unless the request
// says otherwise (Request.TTLSecondsAfterFinished); its scope's
// IdempotencyRecord keeps its outcome until completion plus retention. Do
// reads that record first: while it keeps an outcome, Do answers from it,
// as the operation did (Found, with the person's Resolution if one decided),
// or with a *MismatchError for other parameters, and creates nothing
// (Client.Recorded). After the record expired the key starts a new lifetime:
// Do creates the operation and it executes again. DoSaga has no record of
// its own: a saga that went is made again, and its steps report their
// records' outcomes.
//
// Any other error is one Do could not get past: the API server refused the
// request (Forbidden, Invalid) or stayed unreachable.
//
// # Retries inside
//
// Transient answers of the API server (timeouts, 429, 5xx, a refused or
// reset connection) are retried with capped exponential backoff. A create
// the API server answered with a timeout is retried with the same name, so
// that it either creates the object or finds the one the first try
// created; a create whose answer never came is returned as an error, and
// calling Do again with the same request is safe for the same reason.
package once
