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
//     with key K (404 not_found otherwise).
//   - POST /none/{collection} never dedupes and offers no lookup.
//
// In every mode GET /{mode}/{collection}/{id} reads an object and
// POST /{mode}/{collection}/{id}/cancel cancels it (a compensation effect,
// deduped on its own key in native mode).
//
// Request bodies are JSON objects. Invalid JSON answers 400 invalid_json, a
// body over 1 MiB answers 413, and a string field "reject" turns the request
// into a business rejection (422 rejected, no effect).
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
// responses after a commit, resets, 5xx answers, throttling, slow answers
// and process crashes; and the ways real gateways, proxies and tools lie:
// a gateway's 502, 503 or 504 (HTML, plain text, foreign JSON) after the
// upstream committed, a conditional create's 409 for a key that already
// has an object, a re-send answered 401, 403 or 404 instead of the replayed
// first answer, a lookup index that lags, an ingress's HTML 404 for a
// lookup route, and a request held in a queue past the tool's declared
// lookup delay. A fault is chosen per request by the X-Sandbox-Fault
// header, or else by the rules set with PUT /admin/faults (or Options.Rules),
// whose random draws come from a seeded source so that runs are
// reproducible. Every response sent while a fault is active carries the
// X-Sandbox-Fault header. The fault names are the Fault* constants.
package sandbox
