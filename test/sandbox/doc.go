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

// Package sandbox implements a small HTTP server that behaves like a payment,
// ticketing or e-mail API, so that Once can be tested against real
// side effects, real idempotency semantics and real network failures.
//
// # Collections and modes
//
// Objects live in collections (any name matching [a-z][a-z0-9-]*) under one
// of three idempotency modes, chosen by the first path segment:
//
//   - POST /native/{collection} honours the Idempotency-Key header like
//     Stripe: the first request with a key performs the effect and stores
//     the response; a later request with the same key and the same body
//     (compared by the SHA-256 of its canonical JSON) replays the stored
//     status and body with "Idempotent-Replayed: true"; the same key with a
//     different body answers 422 idempotency_key_reused; the same key while
//     the first request is still being processed answers 409 in_flight.
//     Business rejections are stored and replayed too. Without a key the
//     request behaves like none mode.
//   - POST /lookup/{collection} never dedupes, but records the key on the
//     object; GET /lookup/{collection}?key=K finds the first object created
//     with key K or, if none was, the first object cancelled with key K
//     (404 not_found otherwise). It stands for a search over the client's
//     references that an API keeps on its objects (Stripe's search over
//     metadata): the answer's key and cancelKey say which one matched.
//   - POST /none/{collection} never dedupes and offers no lookup.
//
// Request bodies are JSON objects. Invalid JSON answers 400 invalid_json, a
// body over 1 MiB answers 413, and a string field "reject" turns the request
// into a business rejection (422 rejected, no effect).
//
// # Cancels
//
// In every mode GET /{mode}/{collection}/{id} reads an object (its status,
// and once cancelled its cancelledAt and cancelKey) and
// POST /{mode}/{collection}/{id}/cancel cancels it: a compensation, an
// effect of its own with a key of its own, recorded in the ledger.
//
//   - Native mode dedupes a cancel on its key, apart from the creates' keys
//     (a create and its cancel may share one): the same key replays the
//     first answer, the same key for another object answers 422
//     idempotency_key_reused.
//   - Lookup mode records the key as the object's cancelKey, and the lookup
//     by key finds the cancelled object by it.
//   - None mode neither dedupes nor answers questions.
//
// An object is cancelled once. A cancel of an object already cancelled,
// with another key or in a mode that does not dedupe, answers 409
// already_cancelled and has no effect: it stands for an API whose objects
// have a state machine (an order, a payment intent), which refuses a
// transition from the state an object is already in, whoever made it. A
// client that re-sent its own cancel cannot tell from this answer alone;
// a lookup by its key can. A cancel of an unknown id answers 404 not_found.
// A cancel's body may carry "reject" like a create's: a compensation the
// tool refuses for good (a refund window that closed).
//
// # Validates
//
// In every mode POST /{mode}/{collection}/validate is a dry run of a create
// in the collection, as dry-run and "validate only" endpoints of real APIs
// are (Kubernetes' dryRun=All): it answers 200 {"valid":true} for a body
// the create would accept, 422 {"error":"rejected","reason":R,"message":M}
// for a body it would reject (the "reject" field), and 400 invalid_json or
// 413 as a create would. It has no effect, is never recorded in the ledger,
// and judges the body alone: it neither consults nor claims a native key,
// and nothing it sees is indexed for lookups.
//
// Faults apply to validates as to creates. Those that strike after the
// commit strike after the dry run, which committed nothing: a gateway's
// 500, 502, 503 or 504, a dropped or reset connection, a crash of the
// process, a late answer, each with no effect. Delays last only while the
// client waits. 409-exists answers 409 already_exists when the key has an
// object, as a dry run of a conditional create does; re-send faults strike
// a repeated validate with the same key (validates are counted apart from
// creates and cancels); lookup faults leave validates alone.
//
// # Shapes of real APIs
//
// Four endpoints take requests shaped like real APIs', each in the mode the
// real API has, and record their effects in the ledger like the
// collections above (faults, rules and counts apply to them):
//
//   - POST /stripe/v1/charges, like Stripe's v1 API: a form body (amount,
//     currency, metadata[...]) and an Authorization header; native on the
//     Idempotency-Key header, a re-send replayed with
//     "Idempotent-Replayed: true"; answers a charge object (id ch_…).
//   - POST /github/repos/{owner}/{repo}/issues, like GitHub's: a JSON
//     issue (title, body, labels) and an Authorization header; never
//     deduped; answers 201 with a numeric id and number.
//     GET /github/search/issues?q=label:<name> (repo:<owner>/<name> and
//     is:issue too) lists the issues that carry the label; faults apply to
//     it as to a lookup by key, matched by the Idempotency-Key header.
//   - POST /pagerduty/v2/enqueue, like PagerDuty's Events API v2: a JSON
//     trigger event; deduped on the dedup_key in the body, under which the
//     ledger records it; answers 202 with the dedup_key.
//   - POST /slack/services/{team}/{bot}/{token}, like Slack's incoming
//     webhooks: a JSON message; never deduped, never searchable; answers
//     the text "ok".
//
// Where the real API ignores it, the Idempotency-Key header is recorded
// only so that tests can count effects per key.
//
// # Ledger
//
// Every performed effect is appended to the ledger (with the request as
// received, for the endpoints shaped like real APIs), which is the ground truth
// tests count duplicates against. With Options.LedgerPath set, each entry is
// written as one JSON line and fsynced before the response is sent, and the
// file is replayed on start so objects, ids and native keys survive a
// restart. GET /ledger lists the effects, GET /ledger/summary counts them per
// key, GET /ledger/keys/{key} filters them by key and DELETE /ledger clears
// everything.
//
// # Faults
//
// Faults model the failures an effectively-once client must survive: lost
// responses after a commit, resets, 5xx answers, throttling, slow answers,
// process crashes and refusals the request does not explain (422); and the
// ways real gateways, proxies and tools lie: a gateway's 502, 503 or 504
// (HTML, plain text, foreign JSON) after the upstream committed, a
// conditional create's 409 for a key that already has an object, a re-send
// answered 401, 403 or 404 instead of the replayed first answer, a lookup
// index that lags, an ingress's HTML 404 for a lookup route, and a request
// held in a queue past the tool's declared lookup delay. They strike
// cancels as they strike creates. A fault is chosen per request by the X-Sandbox-Fault
// header, or else by the rules set with PUT /admin/faults (or Options.Rules),
// whose random draws come from a seeded source so that runs are
// reproducible. Every response sent while a fault is active carries the
// X-Sandbox-Fault header. The fault names are the Fault* constants.
//
// A rule can match one kind of request by its action (create, cancel or
// validate), so that a test fails only the dry runs of one collection, or
// only its compensations: {"action":"cancel","fault":"503","count":2}
// fails a cancel twice, then lets it through (a compensation that succeeds
// on a retry); {"action":"cancel","fault":"422"} refuses every cancel (a
// compensation that fails for good).
package sandbox
