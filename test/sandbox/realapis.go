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

package sandbox

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Collections of the endpoints shaped like real APIs. Their effects are
// recorded in the ledger under these collections, in the mode each API
// really has, so that faults, counts and replays work as for any other
// collection.
const (
	// CollectionStripeCharges holds the charges of POST /stripe/v1/charges
	// (native: deduped on the Idempotency-Key header).
	CollectionStripeCharges = "stripe-charges"
	// CollectionGitHubIssues holds the issues of
	// POST /github/repos/{owner}/{repo}/issues (lookup: never deduped,
	// searchable by label).
	CollectionGitHubIssues = "github-issues"
	// CollectionPagerDutyEvents holds the alerts of
	// POST /pagerduty/v2/enqueue (native: deduped on the body's dedup_key).
	CollectionPagerDutyEvents = "pagerduty-events"
	// CollectionSlackMessages holds the messages of
	// POST /slack/services/{a}/{b}/{c} (none: never deduped, never
	// searchable).
	CollectionSlackMessages = "slack-messages"
)

// realAPIRoutes serves the endpoints shaped like real APIs.
func (s *Server) realAPIRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /stripe/v1/charges", s.handleStripeCharge)
	mux.HandleFunc("POST /github/repos/{owner}/{repo}/issues", s.handleGitHubIssue)
	mux.HandleFunc("GET /github/search/issues", s.handleGitHubSearch)
	mux.HandleFunc("POST /pagerduty/v2/enqueue", s.handlePagerDutyEvent)
	mux.HandleFunc("POST /slack/services/{team}/{bot}/{token}", s.handleSlackMessage)
}

// apiRequest is a create of an object with params in mode and collection,
// recorded under key with r and its body data as received.
func apiRequest(r *http.Request, data []byte, mode, collection, key string, params map[string]any) (effectRequest, error) {
	canonical, err := json.Marshal(params)
	if err != nil {
		return effectRequest{}, fmt.Errorf("encode parameters: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return effectRequest{
		mode:       mode,
		collection: collection,
		action:     ActionCreate,
		key:        key,
		params:     canonical,
		bodySHA:    hex.EncodeToString(sum[:]),
		received: &ReceivedRequest{
			Method:      r.Method,
			Path:        r.URL.RequestURI(),
			ContentType: r.Header.Get("Content-Type"),
			Body:        string(data),
		},
	}, nil
}

// readAPIBody reads a request body of at most maxBodyBytes.
func readAPIBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("read body: %w", err)
	}
	return data, nil
}

// created renders the sandbox's answer to a create through render when it
// is a created or replayed object; other answers are returned as they are.
func created(out outcome, render func(Object) outcome) outcome {
	if out.status < 200 || out.status > 299 {
		return out
	}
	var obj Object
	if err := json.Unmarshal(out.body, &obj); err != nil {
		return jsonOutcome(http.StatusInternalServerError, errorBody{Error: CodeLedgerError, Message: err.Error()})
	}
	rendered := render(obj)
	rendered.replayed = out.replayed
	return rendered
}

// objectParams decodes an object's parameters.
func objectParams(obj Object) map[string]any {
	var params map[string]any
	dec := json.NewDecoder(strings.NewReader(string(obj.Parameters)))
	dec.UseNumber()
	_ = dec.Decode(&params)
	if params == nil {
		params = map[string]any{}
	}
	return params
}

// objectSeq is the sequence number an object's id ends with (ch_12 → 12).
func objectSeq(obj Object) int64 {
	_, digits, _ := strings.Cut(obj.ID, "_")
	n, _ := strconv.ParseInt(digits, 10, 64)
	return n
}

// createdUnix is an object's creation time in Unix seconds.
func createdUnix(obj Object) int64 {
	t, err := time.Parse(time.RFC3339Nano, obj.CreatedAt)
	if err != nil {
		return 0
	}
	return t.Unix()
}

// Stripe's v1 API: a form-encoded POST with the key in the Idempotency-Key
// header. The first request with a key performs the charge and stores the
// answer; a re-send replays it with Idempotent-Replayed: true.

// stripeError is the body of Stripe's error answers.
type stripeError struct {
	Error stripeErrorDetail `json:"error"`
}

type stripeErrorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

func stripeRefusal(status int, typ, message, param string) outcome {
	return jsonOutcome(status, stripeError{Error: stripeErrorDetail{Type: typ, Message: message, Param: param}})
}

// stripeCharge is a charge as Stripe answers it.
type stripeCharge struct {
	ID          string         `json:"id"`
	Object      string         `json:"object"`
	Amount      json.Number    `json:"amount"`
	Currency    string         `json:"currency"`
	Description any            `json:"description"`
	Metadata    map[string]any `json:"metadata"`
	Paid        bool           `json:"paid"`
	Captured    bool           `json:"captured"`
	Status      string         `json:"status"`
	Created     int64          `json:"created"`
}

var currencyPattern = regexp.MustCompile(`^[a-z]{3}$`)

// handleStripeCharge serves POST /stripe/v1/charges.
func (s *Server) handleStripeCharge(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		writeOutcome(w, stripeRefusal(http.StatusUnauthorized, "invalid_request_error",
			"You did not provide an API key", ""))
		return
	}
	params, data, refusal := stripeParams(w, r)
	if refusal != nil {
		writeOutcome(w, *refusal)
		return
	}
	req, err := apiRequest(r, data, ModeNative, CollectionStripeCharges, r.Header.Get(HeaderIdempotencyKey), params)
	if err != nil {
		writeOutcome(w, stripeRefusal(http.StatusBadRequest, "invalid_request_error", err.Error(), ""))
		return
	}
	req.idPrefix = "ch_"
	f, ok := s.chooseFault(w, r, s.matchEffect(req))
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	out := s.execute(req, f)
	switch out.status {
	case http.StatusConflict:
		out = stripeRefusal(http.StatusConflict, "idempotency_error",
			"There is currently another in-progress request using this Idempotent Key", "")
	case http.StatusUnprocessableEntity:
		out = stripeRefusal(http.StatusBadRequest, "idempotency_error",
			"Keys for idempotent requests can only be used with the same parameters they were first used with", "")
	default:
		out = created(out, renderStripeCharge)
	}
	s.respond(w, r, f, out)
}

// stripeParams reads a form body into nested parameters (metadata[order]
// becomes metadata.order) and checks amount and currency. On a bad request
// it returns the refusal to answer.
func stripeParams(w http.ResponseWriter, r *http.Request) (params map[string]any, data []byte, refusal *outcome) {
	refuse := func(message, param string) *outcome {
		out := stripeRefusal(http.StatusBadRequest, "invalid_request_error", message, param)
		return &out
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return nil, nil, refuse("Invalid request: the body must be application/x-www-form-urlencoded", "")
	}
	data, err := readAPIBody(w, r)
	if err != nil {
		return nil, nil, refuse(err.Error(), "")
	}
	form, err := url.ParseQuery(string(data))
	if err != nil {
		return nil, nil, refuse("Invalid request: "+err.Error(), "")
	}
	params = map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(form)) {
		if err := setBracketed(params, name, form.Get(name)); err != nil {
			return nil, nil, refuse("Invalid request: "+err.Error(), name)
		}
	}
	amount, _ := params["amount"].(string)
	if amount == "" {
		return nil, nil, refuse("Missing required param: amount.", "amount")
	}
	n, err := strconv.ParseInt(amount, 10, 64)
	if err != nil || n < 1 {
		return nil, nil, refuse("Invalid positive integer", "amount")
	}
	params["amount"] = json.Number(strconv.FormatInt(n, 10))
	currency, _ := params["currency"].(string)
	if currency == "" {
		return nil, nil, refuse("Missing required param: currency.", "currency")
	}
	if !currencyPattern.MatchString(currency) {
		return nil, nil, refuse(fmt.Sprintf("Invalid currency: %s", currency), "currency")
	}
	return params, data, nil
}

// setBracketed sets a form field named like a[b][c] in nested maps.
func setBracketed(params map[string]any, name, value string) error {
	base, rest, nested := strings.Cut(name, "[")
	if base == "" {
		return fmt.Errorf("malformed field name %q", name)
	}
	path := []string{base}
	if nested {
		if !strings.HasSuffix(rest, "]") {
			return fmt.Errorf("malformed field name %q", name)
		}
		path = append(path, strings.Split(strings.TrimSuffix(rest, "]"), "][")...)
	}
	m := params
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			if _, taken := m[p]; taken {
				return fmt.Errorf("field %q is both a value and an object", name)
			}
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	leaf := path[len(path)-1]
	if _, taken := m[leaf]; taken {
		return fmt.Errorf("field %q is both a value and an object", name)
	}
	m[leaf] = value
	return nil
}

func renderStripeCharge(obj Object) outcome {
	params := objectParams(obj)
	charge := stripeCharge{
		ID:          obj.ID,
		Object:      "charge",
		Description: params["description"],
		Metadata:    map[string]any{},
		Paid:        true,
		Captured:    true,
		Status:      "succeeded",
		Created:     createdUnix(obj),
	}
	charge.Amount, _ = params["amount"].(json.Number)
	charge.Currency, _ = params["currency"].(string)
	if md, ok := params["metadata"].(map[string]any); ok {
		charge.Metadata = md
	}
	return jsonOutcome(http.StatusOK, charge)
}

// GitHub's issues: POST /repos/{owner}/{repo}/issues creates an issue every
// time (it does not dedupe), and GET /search/issues?q=label:<name> lists the
// issues that carry a label. The sandbox records the Idempotency-Key header
// Once sends with each issue, only to count effects per key; GitHub ignores
// it.

// gitHubError is the body of GitHub's error answers.
type gitHubError struct {
	Message          string `json:"message"`
	DocumentationURL string `json:"documentation_url,omitempty"`
}

// gitHubIssue is an issue as GitHub answers it.
type gitHubIssue struct {
	ID            int64         `json:"id"`
	NodeID        string        `json:"node_id"`
	Number        int64         `json:"number"`
	Title         any           `json:"title"`
	Body          any           `json:"body"`
	State         string        `json:"state"`
	Labels        []gitHubLabel `json:"labels"`
	URL           string        `json:"url"`
	HTMLURL       string        `json:"html_url"`
	RepositoryURL string        `json:"repository_url"`
	CreatedAt     string        `json:"created_at"`
}

type gitHubLabel struct {
	Name string `json:"name"`
}

// gitHubSearch is the answer of GET /search/issues.
type gitHubSearch struct {
	TotalCount        int           `json:"total_count"`
	IncompleteResults bool          `json:"incomplete_results"`
	Items             []gitHubIssue `json:"items"`
}

const gitHubDocs = "https://docs.github.com/rest"

func gitHubRefusal(status int, message string) outcome {
	return jsonOutcome(status, gitHubError{Message: message, DocumentationURL: gitHubDocs})
}

// handleGitHubIssue serves POST /github/repos/{owner}/{repo}/issues.
func (s *Server) handleGitHubIssue(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") == "" {
		writeOutcome(w, gitHubRefusal(http.StatusUnauthorized, "Requires authentication"))
		return
	}
	data, err := readAPIBody(w, r)
	if err != nil {
		writeOutcome(w, gitHubRefusal(http.StatusBadRequest, "Problems parsing JSON"))
		return
	}
	fields, _, err := canonicalJSON(data)
	if err != nil {
		writeOutcome(w, gitHubRefusal(http.StatusBadRequest, "Problems parsing JSON"))
		return
	}
	if title, ok := fields["title"].(string); !ok || title == "" {
		writeOutcome(w, gitHubRefusal(http.StatusUnprocessableEntity, `Invalid request. "title" wasn't supplied.`))
		return
	}
	if labels, ok := fields["labels"]; ok {
		if _, err := labelNames(labels); err != nil {
			writeOutcome(w, gitHubRefusal(http.StatusUnprocessableEntity, "Invalid request. "+err.Error()))
			return
		}
	}
	fields["owner"], fields["repo"] = r.PathValue("owner"), r.PathValue("repo")
	req, err := apiRequest(r, data, ModeLookup, CollectionGitHubIssues, r.Header.Get(HeaderIdempotencyKey), fields)
	if err != nil {
		writeOutcome(w, gitHubRefusal(http.StatusBadRequest, err.Error()))
		return
	}
	req.idPrefix = "I_"
	f, ok := s.chooseFault(w, r, s.matchEffect(req))
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	s.respond(w, r, f, created(s.execute(req, f), func(obj Object) outcome {
		return jsonOutcome(http.StatusCreated, renderGitHubIssue(obj))
	}))
}

// labelNames reads the labels of an issue request: a list of names.
func labelNames(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New(`"labels" is not an array`)
	}
	names := make([]string, 0, len(list))
	for _, e := range list {
		name, ok := e.(string)
		if !ok || name == "" {
			return nil, fmt.Errorf(`label %v is not a name`, e)
		}
		names = append(names, name)
	}
	return names, nil
}

// renderGitHubIssue shows an issue as GitHub does. Its id and number are
// the ledger sequence number, so numbers count across repositories.
func renderGitHubIssue(obj Object) gitHubIssue {
	params := objectParams(obj)
	owner, _ := params["owner"].(string)
	repo, _ := params["repo"].(string)
	seq := objectSeq(obj)
	names, _ := labelNames(params["labels"])
	labels := make([]gitHubLabel, 0, len(names))
	for _, n := range names {
		labels = append(labels, gitHubLabel{Name: n})
	}
	apiRepo := "https://api.github.com/repos/" + owner + "/" + repo
	return gitHubIssue{
		ID:            seq,
		NodeID:        obj.ID,
		Number:        seq,
		Title:         params["title"],
		Body:          params["body"],
		State:         "open",
		Labels:        labels,
		URL:           fmt.Sprintf("%s/issues/%d", apiRepo, seq),
		HTMLURL:       fmt.Sprintf("https://github.com/%s/%s/issues/%d", owner, repo, seq),
		RepositoryURL: apiRepo,
		CreatedAt:     obj.CreatedAt,
	}
}

// gitHubQuery is a parsed search query: every label must be on the issue,
// and the repository, when given, must be its.
type gitHubQuery struct {
	labels []string
	repo   string
}

// parseGitHubQuery reads the qualifiers label:<name> (quoted when it holds
// spaces), repo:<owner>/<name>, is:issue and is:open; it refuses others.
func parseGitHubQuery(q string) (gitHubQuery, error) {
	var out gitHubQuery
	for _, term := range queryTerms(q) {
		name, value, ok := strings.Cut(term, ":")
		value = strings.Trim(value, `"`)
		switch {
		case ok && name == "label" && value != "":
			out.labels = append(out.labels, value)
		case ok && name == "repo" && strings.Count(value, "/") == 1:
			out.repo = value
		case term == "is:issue", term == "is:open", term == "state:open":
		default:
			return gitHubQuery{}, fmt.Errorf("the sandbox does not search for %q", term)
		}
	}
	if len(out.labels) == 0 && out.repo == "" {
		return gitHubQuery{}, errors.New("a query needs a label or a repo qualifier")
	}
	return out, nil
}

// queryTerms splits a query at spaces outside double quotes.
func queryTerms(q string) []string {
	var terms []string
	var cur strings.Builder
	quoted := false
	for _, c := range q {
		switch {
		case c == '"':
			quoted = !quoted
			cur.WriteRune(c)
		case c == ' ' && !quoted:
			if cur.Len() > 0 {
				terms = append(terms, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(c)
		}
	}
	if cur.Len() > 0 {
		terms = append(terms, cur.String())
	}
	return terms
}

func (q gitHubQuery) matches(issue gitHubIssue) bool {
	if q.repo != "" && issue.RepositoryURL != "https://api.github.com/repos/"+q.repo {
		return false
	}
	for _, want := range q.labels {
		if !slices.ContainsFunc(issue.Labels, func(l gitHubLabel) bool { return l.Name == want }) {
			return false
		}
	}
	return true
}

// handleGitHubSearch serves GET /github/search/issues?q=…, the issues that
// match the query, oldest first. Faults apply to it as to a lookup by key,
// matched by the Idempotency-Key header; lookup-lag hides young issues, as
// GitHub's search index lags behind its issues.
func (s *Server) handleGitHubSearch(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query().Get("q")
	if q == "" {
		writeOutcome(w, gitHubRefusal(http.StatusUnprocessableEntity, "Validation Failed: q is missing"))
		return
	}
	query, err := parseGitHubQuery(q)
	if err != nil {
		writeOutcome(w, gitHubRefusal(http.StatusUnprocessableEntity, "Validation Failed: "+err.Error()))
		return
	}
	m := faultMatch{mode: ModeLookup, collection: CollectionGitHubIssues, method: http.MethodGet,
		key: r.Header.Get(HeaderIdempotencyKey), lookup: true}
	f, ok := s.chooseFault(w, r, m)
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	sleepContext(r.Context(), f.lookupDelay())
	found := gitHubSearch{Items: []gitHubIssue{}}
	for _, obj := range s.createdObjects(ModeLookup, CollectionGitHubIssues) {
		if issue := renderGitHubIssue(obj); s.visible(obj.CreatedAt, f.lookupLag()) && query.matches(issue) {
			found.Items = append(found.Items, issue)
		}
	}
	found.TotalCount = len(found.Items)
	s.respond(w, r, f, jsonOutcome(http.StatusOK, found))
}

// createdObjects returns the objects created in mode and collection, in
// the order they were created.
func (s *Server) createdObjects(mode, collection string) []Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	var objs []Object
	for _, e := range s.state.effects {
		if e.Mode != mode || e.Collection != collection || e.Action != ActionCreate {
			continue
		}
		if obj, ok := s.state.object(mode, collection, e.ID); ok {
			objs = append(objs, obj)
		}
	}
	return objs
}

// PagerDuty's Events API v2: POST /v2/enqueue takes a JSON event whose
// dedup_key, in the body, names the alert. A trigger for a dedup_key that
// already has an alert changes nothing and is answered as the first was.

// pagerDutyAnswer is the body of every Events API v2 answer.
type pagerDutyAnswer struct {
	Status   string   `json:"status"`
	Message  string   `json:"message"`
	DedupKey string   `json:"dedup_key,omitempty"`
	Errors   []string `json:"errors,omitempty"`
}

func pagerDutyInvalid(reason string) outcome {
	return jsonOutcome(http.StatusBadRequest, pagerDutyAnswer{
		Status: "invalid event", Message: "Event object is invalid", Errors: []string{reason}})
}

var pagerDutySeverities = []string{"critical", "error", "warning", "info"}

// handlePagerDutyEvent serves POST /pagerduty/v2/enqueue. It takes trigger
// events only. The ledger records each alert under its dedup_key; a trigger
// without one gets a generated key, as PagerDuty gives it.
func (s *Server) handlePagerDutyEvent(w http.ResponseWriter, r *http.Request) {
	data, err := readAPIBody(w, r)
	if err != nil {
		writeOutcome(w, pagerDutyInvalid(err.Error()))
		return
	}
	fields, _, err := canonicalJSON(data)
	if err != nil {
		writeOutcome(w, pagerDutyInvalid("Event object is not valid JSON"))
		return
	}
	if reason := pagerDutyCheck(fields); reason != "" {
		writeOutcome(w, pagerDutyInvalid(reason))
		return
	}
	key, _ := fields["dedup_key"].(string)
	if key == "" {
		key = rand.Text()
		fields["dedup_key"] = key
	}
	req, err := apiRequest(r, data, ModeNative, CollectionPagerDutyEvents, key, fields)
	if err != nil {
		writeOutcome(w, pagerDutyInvalid(err.Error()))
		return
	}
	f, ok := s.chooseFault(w, r, s.matchEffect(req))
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	s.respond(w, r, f, s.triggerAlert(req, f))
}

// pagerDutyCheck returns why an event is invalid, or "".
func pagerDutyCheck(fields map[string]any) string {
	if rk, _ := fields["routing_key"].(string); len(rk) != 32 {
		return "Length of 'routing_key' is incorrect (should be 32 characters)"
	}
	if action, _ := fields["event_action"].(string); action != "trigger" {
		return "'event_action' is invalid (the sandbox takes trigger events only)"
	}
	if k, ok := fields["dedup_key"]; ok {
		if ks, isString := k.(string); !isString || len(ks) > 255 {
			return "'dedup_key' must be a string of at most 255 characters"
		}
	}
	payload, _ := fields["payload"].(map[string]any)
	for _, name := range []string{"summary", "source", "severity"} {
		if v, _ := payload[name].(string); v == "" {
			return fmt.Sprintf("'payload.%s' is missing or blank", name)
		}
	}
	if !slices.Contains(pagerDutySeverities, payload["severity"].(string)) {
		return "'payload.severity' is invalid (should be one of critical, error, warning, info)"
	}
	return ""
}

// triggerAlert creates the alert of req's dedup_key unless it exists, and
// answers 202 either way.
func (s *Server) triggerAlert(req effectRequest, f *fault) outcome {
	time.Sleep(f.holdDelay())
	time.Sleep(f.beforeCommitDelay())
	s.mu.Lock()
	defer s.mu.Unlock()
	accepted := jsonOutcome(http.StatusAccepted, pagerDutyAnswer{
		Status: "success", Message: "Event processed", DedupKey: req.key})
	if _, exists := s.state.lookup(req.mode, req.collection, req.key); exists {
		return accepted
	}
	if out, recorded := s.commitLocked(req); !recorded {
		return out
	}
	return accepted
}

// Slack's incoming webhooks: POST /services/{team}/{bot}/{token} with a
// JSON message posts it every time and answers the text "ok". The sandbox
// records the Idempotency-Key header Once sends, only to count effects per
// key; Slack ignores it.

// handleSlackMessage serves POST /slack/services/{team}/{bot}/{token}.
func (s *Server) handleSlackMessage(w http.ResponseWriter, r *http.Request) {
	slackText := func(status int, text string) outcome {
		return outcome{status: status, body: []byte(text), contentType: contentTypeText}
	}
	data, err := readAPIBody(w, r)
	if err != nil {
		writeOutcome(w, slackText(http.StatusBadRequest, "invalid_payload"))
		return
	}
	fields, _, err := canonicalJSON(data)
	if err != nil {
		writeOutcome(w, slackText(http.StatusBadRequest, "invalid_payload"))
		return
	}
	if text, _ := fields["text"].(string); text == "" {
		if _, blocks := fields["blocks"]; !blocks {
			writeOutcome(w, slackText(http.StatusBadRequest, "no_text"))
			return
		}
	}
	req, err := apiRequest(r, data, ModeNone, CollectionSlackMessages, r.Header.Get(HeaderIdempotencyKey), fields)
	if err != nil {
		writeOutcome(w, slackText(http.StatusBadRequest, "invalid_payload"))
		return
	}
	f, ok := s.chooseFault(w, r, s.matchEffect(req))
	if !ok || s.faultBeforeCommit(w, f) {
		return
	}
	s.respond(w, r, f, created(s.execute(req, f), func(Object) outcome {
		return slackText(http.StatusOK, "ok")
	}))
}
