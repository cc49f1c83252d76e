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

package mcpgateway

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/ingress"
)

// apiAudience is the API server's own audience (--api-audiences), for
// which every authenticator answers.
const apiAudience = "https://kubernetes.default.svc.cluster.local"

// How an authenticator of the API server answers a TokenReview's
// spec.audiences.
const (
	// audienceAware: as the ServiceAccount authenticator, it accepts the
	// token for the audiences it was issued for (none asked: the API
	// server's).
	audienceAware = iota
	// audienceAgnostic: as the JWT authenticators of
	// --authentication-config (OIDC issuers) in a TokenReview, it answers
	// only a review whose audiences meet the API server's, whatever the
	// token's aud claim says (docs/mcp.md, "Identity and RBAC").
	audienceAgnostic
	// ignoresAudiences: as a webhook authenticator that does not look at
	// audiences, it accepts the token for any review and names the API
	// server's audience.
	ignoresAudiences
)

// stubToken is what the stub API server knows of a token it accepts.
type stubToken struct {
	kind      int
	audiences []string // for audienceAware
	// expires: the token is refused from then on (zero: never).
	expires time.Time
	user    authenticationv1.UserInfo
}

// reviewAPI stands for the API server as the gateway's authenticator
// meets it, at no cost (reviewStub, beside it, stands for a slow one): its
// TokenReviews are answered per token as its authenticators would, each
// review's audiences are recorded, and so are the Impersonate-* headers of
// every other request, which it answers by echoing the object it was sent.
type reviewAPI struct {
	tokens map[string]stubToken
	now    func() time.Time

	mu sync.Mutex
	// reviews are the spec.audiences of each TokenReview, in order.
	reviews [][]string
	// impersonated are the Impersonate-* headers of each other request,
	// their names in lower case.
	impersonated []map[string][]string
}

func (s *reviewAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/tokenreviews") {
		got := map[string][]string{}
		for k, v := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "impersonate-") {
				got[strings.ToLower(k)] = v
			}
		}
		s.mu.Lock()
		s.impersonated = append(s.impersonated, got)
		s.mu.Unlock()
		var obj map[string]any
		_ = json.NewDecoder(r.Body).Decode(&obj)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(obj)
		return
	}
	var tr authenticationv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.reviews = append(s.reviews, tr.Spec.Audiences)
	s.mu.Unlock()
	asked := tr.Spec.Audiences
	if len(asked) == 0 {
		asked = []string{apiAudience}
	}
	t, known := s.tokens[tr.Spec.Token]
	if known && (t.expires.IsZero() || s.now().Before(t.expires)) {
		var auds []string
		switch t.kind {
		case audienceAware:
			auds = slices.DeleteFunc(slices.Clone(asked), func(a string) bool { return !slices.Contains(t.audiences, a) })
		case audienceAgnostic:
			if slices.Contains(asked, apiAudience) {
				auds = []string{apiAudience}
			}
		case ignoresAudiences:
			auds = []string{apiAudience}
		}
		if len(auds) > 0 {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: t.user, Audiences: auds}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(tr)
}

// reviewed is the audiences of each review so far.
func (s *reviewAPI) reviewed() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reviews)
}

// authenticatorOf is the callers' authenticator of a gateway New makes
// against api, for audience and issuers, on now's clock.
func authenticatorOf(t *testing.T, api *reviewAPI, audience string, issuers []string) *authenticator {
	t.Helper()
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000, ContentConfig: rest.ContentConfig{
		ContentType: "application/json", AcceptContentTypes: "application/json"}}
	g, err := New(Config{REST: cfg, Namespace: "shop", Audience: audience, AuthorizationServers: issuers})
	if err != nil {
		t.Fatal(err)
	}
	g.auth.now = api.now
	return g.auth
}

// jwt is an unsigned JWT with these claims: the stub API server looks its
// tokens up whole, so a signature would prove nothing here.
func jwt(t *testing.T, iss string, aud []string, exp time.Time) string {
	t.Helper()
	c := map[string]any{"iss": iss, "aud": aud, "sub": "agent-app"}
	if !exp.IsZero() {
		c["exp"] = exp.Unix()
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return "eyJhbGciOiJSUzI1NiJ9." + base64.RawURLEncoding.EncodeToString(b) + ".c2ln"
}

// TestReviewAudiences: which tokens the gateway takes for its audience,
// and the reviews it asks for each. An OIDC issuer's JWT for the audience
// is refused by the first review (its authenticator is audience-agnostic)
// and reviewed again without audiences only when its issuer is one of the
// gateway's authorization servers; no other authenticator's word stands in
// for that check.
func TestReviewAudiences(t *testing.T) {
	const issuer, other = "https://issuer.example", "https://elsewhere.example"
	const publicURL = "https://mcp.example.com/mcp"
	exp := time.Now().Add(time.Hour)
	serviceAccount := authenticationv1.UserInfo{Username: "system:serviceaccount:shop:agent",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"}}
	oidcUser := authenticationv1.UserInfo{Username: "oidc:agent-app", Groups: []string{"system:authenticated"}}
	cases := map[string]struct {
		reason   string
		audience string // the gateway's; DefaultAudience when empty
		token    func(t *testing.T) (string, stubToken)
		// wantUser is the caller's name; empty: the token is refused.
		wantUser    string
		wantReviews [][]string
	}{
		"ServiceAccountForTheGateway": {
			reason: "a ServiceAccount's token for the gateway's audience is taken at the first review",
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, apiAudience, []string{DefaultAudience}, exp),
					stubToken{kind: audienceAware, audiences: []string{DefaultAudience}, user: serviceAccount}
			},
			wantUser: serviceAccount.Username, wantReviews: [][]string{{DefaultAudience}},
		},
		"ServiceAccountForTheAPIServer": {
			reason: "a ServiceAccount's token for the API server is refused, and not reviewed again",
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, apiAudience, []string{apiAudience}, exp),
					stubToken{kind: audienceAware, audiences: []string{apiAudience}, user: serviceAccount}
			},
			wantReviews: [][]string{{DefaultAudience}},
		},
		"ListedIssuer": {
			reason: "a JWT of a listed issuer for the gateway's audience, refused by the first review, is taken at " +
				"the second, without audiences",
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, issuer, []string{DefaultAudience}, exp), stubToken{kind: audienceAgnostic, user: oidcUser}
			},
			wantUser: oidcUser.Username, wantReviews: [][]string{{DefaultAudience}, nil},
		},
		"ListedIssuerForTheGatewaysURL": {
			reason: "an issuer that honours RFC 8707's resource names the gateway's public URL in aud: a gateway " +
				"whose --audience is that URL takes it (docs/mcp.md, \"A host that connects through OAuth\")",
			audience: publicURL,
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, issuer, []string{publicURL}, exp), stubToken{kind: audienceAgnostic, user: oidcUser}
			},
			wantUser: oidcUser.Username, wantReviews: [][]string{{publicURL}, nil},
		},
		"ListedIssuerForTheGatewaysURLAtOnceMCP": {
			reason: "the same token is refused by a gateway whose audience is once-mcp, and not reviewed again",
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, issuer, []string{publicURL}, exp), stubToken{kind: audienceAgnostic, user: oidcUser}
			},
			wantReviews: [][]string{{DefaultAudience}},
		},
		"IssuerNotListed": {
			reason: "a JWT for the gateway's audience of an issuer the gateway does not name is refused, although " +
				"an authenticator that ignores audiences (a webhook) would take it without them",
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, other, []string{DefaultAudience}, exp), stubToken{kind: ignoresAudiences, user: oidcUser}
			},
			wantReviews: [][]string{{DefaultAudience}},
		},
		"IgnoresAudiences": {
			reason: "an opaque token that an authenticator takes for the API server's audience only is refused",
			token: func(*testing.T) (string, stubToken) {
				return "opaque-token", stubToken{kind: ignoresAudiences, user: oidcUser}
			},
			wantReviews: [][]string{{DefaultAudience}},
		},
		"Unknown": {
			reason: "a token no authenticator takes is refused",
			token: func(t *testing.T) (string, stubToken) {
				return jwt(t, issuer, []string{DefaultAudience}, exp), stubToken{kind: -1}
			},
			wantReviews: [][]string{{DefaultAudience}, nil},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			token, known := tc.token(t)
			api := &reviewAPI{tokens: map[string]stubToken{token: known}, now: time.Now}
			a := authenticatorOf(t, api, tc.audience, []string{issuer})
			c, _, err := a.authenticate(context.Background(), "client", token)
			switch {
			case tc.wantUser == "" && !errors.Is(err, errInvalidToken):
				t.Errorf("%s: got %v, want errInvalidToken", tc.reason, err)
			case tc.wantUser != "" && err != nil:
				t.Errorf("%s: got %v, want the caller %s", tc.reason, err, tc.wantUser)
			case tc.wantUser != "" && c.user != tc.wantUser:
				t.Errorf("%s: the caller is %s, want %s", tc.reason, c.user, tc.wantUser)
			}
			if diff := cmp.Diff(tc.wantReviews, api.reviewed()); diff != "" {
				t.Errorf("%s: the reviews' audiences, -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestVerdictKeptUntilTheTokenExpires: an accepted token's verdict is kept
// for acceptedTTL, or until the token's own exp when that comes first; the
// token is asked about again then, and an expired one is refused, however
// recently it was accepted.
func TestVerdictKeptUntilTheTokenExpires(t *testing.T) {
	start := time.Unix(1_900_000_000, 0) // exp is in whole seconds
	user := authenticationv1.UserInfo{Username: "system:serviceaccount:shop:agent",
		Groups: []string{"system:serviceaccounts"}}
	cases := map[string]struct {
		reason string
		// expiresIn is the token's exp from the first review; zero: an
		// opaque token that says none.
		expiresIn time.Duration
		keptFor   time.Duration
	}{
		"ExpiresFirst": {reason: "a token that expires in 10 s is believed for 10 s, not a minute",
			expiresIn: 10 * time.Second, keptFor: 10 * time.Second},
		"ExpiresLater": {reason: "a token that expires in an hour is believed for acceptedTTL",
			expiresIn: time.Hour, keptFor: acceptedTTL},
		"NoExpiry": {reason: "a token that says no expiry is believed for acceptedTTL", keptFor: acceptedTTL},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			now := start
			clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
			set := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = start.Add(d) }
			token, expires := "opaque-token", time.Time{}
			if tc.expiresIn > 0 {
				expires = start.Add(tc.expiresIn)
				token = jwt(t, apiAudience, []string{DefaultAudience}, expires)
			}
			api := &reviewAPI{now: clock, tokens: map[string]stubToken{token: {kind: audienceAware,
				audiences: []string{DefaultAudience}, expires: expires, user: user}}}
			a := authenticatorOf(t, api, "", nil)
			check := func(at time.Duration, wantReviews int, wantErr error) {
				t.Helper()
				set(at)
				c, exp, err := a.authenticate(context.Background(), "client", token)
				if !errors.Is(err, wantErr) {
					t.Fatalf("%s: at %s, got %v, want %v", tc.reason, at, err, wantErr)
				}
				if err == nil && (c.user != user.Username || !exp.Equal(expires)) {
					t.Errorf("%s: at %s, got %s until %s, want %s until %s", tc.reason, at, c.user, exp,
						user.Username, expires)
				}
				if got := len(api.reviewed()); got != wantReviews {
					t.Errorf("%s: at %s, %d reviews in all, want %d", tc.reason, at, got, wantReviews)
				}
			}
			check(0, 1, nil)
			check(tc.keptFor-time.Second, 1, nil)
			wantErr := error(nil)
			if tc.keptFor == tc.expiresIn {
				wantErr = errInvalidToken
			}
			check(tc.keptFor, 2, wantErr)
		})
	}
}

// TestImpersonation: a caller's requests are made by impersonation of
// the user its review named. A ServiceAccount, as the ServiceAccount
// authenticator names one (its name, and the group system:serviceaccounts),
// by its name alone; any other user with its UID, groups and extra, even
// when its name looks like a ServiceAccount's (another authenticator may
// name users so): it gains no ServiceAccount's groups, and keeps its own.
func TestImpersonation(t *testing.T) {
	const extraKey = "authentication.kubernetes.io/credential-id"
	cases := map[string]struct {
		reason string
		user   authenticationv1.UserInfo
		want   map[string][]string
	}{
		"ServiceAccount": {
			reason: "a ServiceAccount is impersonated by name: the API server adds its groups",
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:shop:agent", UID: "uid-1",
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"},
				Extra:  map[string]authenticationv1.ExtraValue{extraKey: {"JTI=1"}}},
			want: map[string][]string{"impersonate-user": {"system:serviceaccount:shop:agent"}},
		},
		"NamedLikeAServiceAccount": {
			reason: "a user named like a ServiceAccount without the group system:serviceaccounts keeps its UID, " +
				"groups and extra",
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:x:y", UID: "uid-2",
				Groups: []string{"oidc:devs", "system:authenticated"},
				Extra:  map[string]authenticationv1.ExtraValue{extraKey: {"JTI=2"}}},
			want: map[string][]string{
				"impersonate-user":  {"system:serviceaccount:x:y"},
				"impersonate-uid":   {"uid-2"},
				"impersonate-group": {"oidc:devs"},
				"impersonate-extra-authentication.kubernetes.io%2fcredential-id": {"JTI=2"},
			},
		},
		"User": {
			reason: "any other user is impersonated with its UID, groups and extra, system:authenticated left " +
				"to the API server",
			user: authenticationv1.UserInfo{Username: "oidc:alice", UID: "uid-3",
				Groups: []string{"oidc:devs", "oidc:ops", "system:authenticated"}},
			want: map[string][]string{
				"impersonate-user":  {"oidc:alice"},
				"impersonate-uid":   {"uid-3"},
				"impersonate-group": {"oidc:devs", "oidc:ops"},
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			api := &reviewAPI{now: time.Now, tokens: map[string]stubToken{"token": {kind: audienceAware,
				audiences: []string{DefaultAudience}, user: tc.user}}}
			a := authenticatorOf(t, api, "", nil)
			c, _, err := a.authenticate(context.Background(), "client", "token")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.may(context.Background(), "shop", "create", "sideeffectoperations"); err != nil {
				t.Fatal(err)
			}
			api.mu.Lock()
			defer api.mu.Unlock()
			if len(api.impersonated) != 1 {
				t.Fatalf("%d requests as the caller, want 1", len(api.impersonated))
			}
			if diff := cmp.Diff(tc.want, api.impersonated[0]); diff != "" {
				t.Errorf("%s: the Impersonate-* headers, -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestIngressTakesTheGatewaysAudience: the ingress takes a sender's token
// only for the gateway's audience, as /mcp does, and reviews it for that
// audience. It once reviewed tokens without audiences, and so took any
// token the API server accepts for itself: a pod's own token, or one
// stolen from another service.
func TestIngressTakesTheGatewaysAudience(t *testing.T) {
	sender := authenticationv1.UserInfo{Username: "system:serviceaccount:shop:sender",
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shop", "system:authenticated"}}
	api := &reviewAPI{now: time.Now, tokens: map[string]stubToken{
		"for-the-api-server": {kind: audienceAware, audiences: []string{apiAudience}, user: sender},
		"for-the-gateway":    {kind: audienceAware, audiences: []string{DefaultAudience}, user: sender},
	}}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL, QPS: 1000, Burst: 1000, ContentConfig: rest.ContentConfig{
		ContentType: "application/json", AcceptContentTypes: "application/json"}}
	g, err := New(Config{REST: cfg, Namespace: "shop"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.MountIngress(map[string]ingress.Route{
		"orders": {Namespace: "shop", ToolRef: v1.ToolReference{Name: "payments"}, Operation: "charge"},
	}); err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g.Handler())
	t.Cleanup(gw.Close)
	cases := map[string]struct {
		reason string
		token  string
		// wantTaken: the gateway acts as the sender; else 401.
		wantTaken bool
	}{
		"ForTheAPIServer": {reason: "a token for the API server's own audience is refused",
			token: "for-the-api-server"},
		"ForTheGateway": {reason: "a token for the gateway's audience is taken",
			token: "for-the-gateway", wantTaken: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := len(api.reviewed())
			req, _ := http.NewRequest(http.MethodPost, gw.URL+"/ingress/orders", strings.NewReader(`{"amount":1}`))
			req.Header.Set("Authorization", "Bearer "+tc.token)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set(ingress.HeaderIdempotencyKey, "order-1")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if taken := resp.StatusCode != http.StatusUnauthorized; taken != tc.wantTaken {
				t.Errorf("%s: status %d", tc.reason, resp.StatusCode)
			}
			if diff := cmp.Diff([][]string{{DefaultAudience}}, api.reviewed()[before:]); diff != "" {
				t.Errorf("%s: the reviews' audiences, -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
