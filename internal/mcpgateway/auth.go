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
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DefaultAudience is the audience a token must be meant for, unless the
// gateway is told another (Config.Audience). once-mcp tells it its
// --public-url when given.
const DefaultAudience = "once-mcp"

// errInvalidToken: the API server does not accept the token for the
// gateway's audience (unknown, expired, revoked, or meant for another
// audience).
var errInvalidToken = errors.New("the token is not valid for this gateway: it is unknown, expired or revoked, " +
	"or meant for another audience")

// Times of the token cache (docs/mcp.md, "Identity and RBAC").
const (
	// acceptedTTL bounds how long an accepted token is believed without
	// asking the API server again: a revoked token works at most this long.
	acceptedTTL = time.Minute
	// refusedTTL is how long a refused token is refused without asking
	// again.
	refusedTTL = 5 * time.Second
	// reviewTimeout bounds one TokenReview.
	reviewTimeout = 10 * time.Second
	// maxTokens bounds the cache; beyond it, expired entries go first, then
	// refused ones, then as few others as make room.
	maxTokens = 1024
	// maxReviews bounds the TokenReviews in flight, whatever their tokens:
	// a flood of distinct made-up tokens is answered 503 beyond it, and
	// costs the API server no more.
	maxReviews = 32
	// reviewShare is how many of them one client (clientOf) may hold: a
	// client's flood leaves the other places to other clients.
	reviewShare = max(maxReviews/4, 1)
	// busyRetryAfter is the Retry-After, in seconds, of a request answered
	// 503 because the reviews are bounded.
	busyRetryAfter = "1"
)

// errBusy: too many tokens are being reviewed now, in all or for the
// client.
var errBusy = errors.New("too many tokens are being checked now")

// clientOf is who sent a request, for the share of TokenReviews: its
// remote IP address, an IPv6 address by its /64, which a single host may
// hold whole. Behind a proxy every client is the proxy's address: the
// share then bounds the proxy, and the bound in all still holds.
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// authenticator turns bearer tokens into callers: it asks the API server,
// with the gateway's own credentials, whether a token is valid for the
// gateway's audience (a TokenReview), and acts for the caller by
// impersonation, never by passing the token on.
type authenticator struct {
	// reviewer makes TokenReviews, as the gateway.
	reviewer client.Client
	// base is the gateway's own configuration, which the callers' clients
	// extend with impersonation.
	base *rest.Config
	// audience is the one a token must be meant for.
	audience string
	// issuers are the authorization servers whose JWTs may be reviewed
	// again without audiences (Config.AuthorizationServers).
	issuers []string
	now     func() time.Time

	flight singleflight.Group
	// reviews holds a place per TokenReview in flight, maxReviews in all
	// and reviewShare per client, for callers and senders together.
	reviews *limiter

	mu    sync.Mutex
	known map[[32]byte]verdict
}

// verdict is what the API server said of a token, until expires.
type verdict struct {
	c *caller
	// tokenExpiry is the token's own expiry, when it says.
	tokenExpiry time.Time
	expires     time.Time
	refused     bool
}

// authenticate returns the caller a token authenticates for the gateway's
// audience, and the token's expiry when it carries one. It returns:
//
//   - errInvalidToken when the API server does not accept the token.
//   - errBusy when the reviews in flight are at their bound, in all or for
//     the asking client, from.
//
// At most one review per token is in flight. It holds a place of the
// client that asked first. Its verdict is kept. An accepted token is kept
// until it expires or for acceptedTTL. A refused one is kept for
// refusedTTL.
func (a *authenticator) authenticate(ctx context.Context, from, token string) (*caller, time.Time, error) {
	id := sha256.Sum256([]byte(token))
	if v, ok := a.cached(id); ok {
		return v.result()
	}
	ch := a.flight.DoChan(hex.EncodeToString(id[:]), func() (any, error) {
		if v, ok := a.cached(id); ok {
			return v, nil
		}
		// One review serves every request waiting for it: none of their
		// contexts may end it.
		if !a.reviews.acquire(from) {
			return verdict{}, errBusy
		}
		defer a.reviews.release(from)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		v, err := a.review(rctx, token)
		if err != nil {
			return verdict{}, err
		}
		a.keep(id, v)
		return v, nil
	})
	select {
	case <-ctx.Done():
		return nil, time.Time{}, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, time.Time{}, r.Err
		}
		return r.Val.(verdict).result()
	}
}

func (v verdict) result() (*caller, time.Time, error) {
	if v.refused {
		return nil, time.Time{}, errInvalidToken
	}
	return v.c, v.tokenExpiry, nil
}

// cached is the verdict kept for a token, while it holds.
func (a *authenticator) cached(id [32]byte) (verdict, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.known[id]
	if !ok || !a.now().Before(v.expires) {
		return verdict{}, false
	}
	return v, true
}

// keep stores a verdict, making room in a full cache.
func (a *authenticator) keep(id [32]byte, v verdict) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.known == nil {
		a.known = map[[32]byte]verdict{}
	}
	if len(a.known) >= maxTokens {
		now := a.now()
		for k, e := range a.known {
			if !now.Before(e.expires) || e.refused {
				delete(a.known, k)
			}
		}
		// Still full of live callers. One of them, drawn by the map's
		// random order, is asked about again at its next call. The others
		// keep their verdicts.
		for k := range a.known {
			if len(a.known) < maxTokens {
				break
			}
			delete(a.known, k)
		}
	}
	a.known[id] = v
}

// review asks the API server whether token is valid for the gateway's
// audience. An audience-aware authenticator (ServiceAccount tokens) checks
// the audience itself. The API server's JWT authenticators (OIDC issuers of
// --authentication-config) are audience-agnostic in a TokenReview. They
// answer only for the API server's own audiences (--api-audiences). So a
// JWT that names the gateway's audience in its aud claim is reviewed again
// without audiences. Then the claim decides, which the issuer signed and
// the API server verified (docs/mcp.md, "Identity and RBAC").
func (a *authenticator) review(ctx context.Context, token string) (verdict, error) {
	claims := unverifiedClaims(token)
	if a.audience == "" {
		return verdict{}, errors.New("the gateway has no audience to check tokens for")
	}
	tr := &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token,
		Audiences: []string{a.audience}}}
	if err := a.reviewer.Create(ctx, tr); err != nil {
		return verdict{}, fmt.Errorf("asking the API server about the token (TokenReview): %w", err)
	}
	ok := tr.Status.Authenticated && slices.Contains(tr.Status.Audiences, a.audience)
	// Only a JWT of an issuer the gateway names as its authorization
	// server: the claim is that issuer's, and no other authenticator's
	// answer (a webhook's, which ignores audiences too) stands in for it.
	if !ok && slices.Contains(claims.Audiences, a.audience) && slices.Contains(a.issuers, claims.Issuer) {
		tr = &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}
		if err := a.reviewer.Create(ctx, tr); err != nil {
			return verdict{}, fmt.Errorf("asking the API server about the token (TokenReview): %w", err)
		}
		ok = tr.Status.Authenticated
	}
	now := a.now()
	if !ok || tr.Status.User.Username == "" {
		return verdict{refused: true, expires: now.Add(refusedTTL)}, nil
	}
	c, err := a.impersonating(tr.Status.User)
	if err != nil {
		return verdict{}, err
	}
	v := verdict{c: c, tokenExpiry: claims.Expiry, expires: now.Add(acceptedTTL)}
	if !claims.Expiry.IsZero() && claims.Expiry.Before(v.expires) {
		v.expires = claims.Expiry
	}
	return v, nil
}

// impersonating is a caller whose client acts as u, by impersonation with
// the gateway's own credentials. A ServiceAccount is impersonated by name
// alone (the API server adds its groups), which is what the constrained
// impersonation verbs of config/mcp-gateway allow for it; any other user
// with its UID, groups and extra, as the TokenReview named them.
func (a *authenticator) impersonating(u authenticationv1.UserInfo) (*caller, error) {
	cfg := rest.CopyConfig(a.base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: u.Username}
	// A ServiceAccount as the API server's ServiceAccount authenticator
	// names one: a user of another authenticator whose name only looks so
	// keeps its own groups, and gains none.
	serviceAccount := strings.HasPrefix(u.Username, "system:serviceaccount:") &&
		slices.Contains(u.Groups, "system:serviceaccounts")
	if !serviceAccount {
		cfg.Impersonate.UID = u.UID
		cfg.Impersonate.Groups = slices.DeleteFunc(slices.Clone(u.Groups), func(g string) bool {
			return g == "system:authenticated" // added by the API server to every impersonated user
		})
		if len(u.Extra) > 0 {
			cfg.Impersonate.Extra = map[string][]string{}
			for k, v := range u.Extra {
				cfg.Impersonate.Extra[k] = v
			}
		}
	}
	kube, err := client.New(cfg, client.Options{Scheme: Scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("making a client: %w", err)
	}
	return &caller{user: u.Username, kube: kube}, nil
}

// claims are what a JWT says of itself, unverified: only read after the
// API server accepted the token, or to decide whether to ask it.
type claims struct {
	Issuer    string
	Audiences []string
	Expiry    time.Time
}

// unverifiedClaims reads the aud and exp claims of a JWT; nothing from a
// token that is not one.
func unverifiedClaims(token string) claims {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return claims{}
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return claims{}
	}
	var raw struct {
		Iss string          `json:"iss"`
		Aud json.RawMessage `json:"aud"`
		Exp *json.Number    `json:"exp"`
	}
	if json.Unmarshal(b, &raw) != nil {
		return claims{}
	}
	c := claims{Issuer: raw.Iss}
	var one string
	if json.Unmarshal(raw.Aud, &one) == nil {
		c.Audiences = []string{one}
	} else {
		_ = json.Unmarshal(raw.Aud, &c.Audiences)
	}
	if raw.Exp != nil {
		if f, err := raw.Exp.Float64(); err == nil && f > 0 {
			c.Expiry = time.Unix(int64(f), 0)
		}
	}
	return c
}

// callerKey is where a request's caller is kept, in its context before
// MCP sees it and in its TokenInfo after.
type callerKey struct{}

// requireToken answers 401 to a request without a token that the API
// server accepts for the gateway's audience, before anything reads its
// body: with WWW-Authenticate naming the protected-resource metadata
// (RFC 9728), and error="invalid_token" for a token that was sent. An
// accepted request goes on with its caller, handed to MCP as the SDK's
// TokenInfo.
func (g *Gateway) requireToken(next http.Handler) http.Handler {
	verifier := func(_ context.Context, _ string, r *http.Request) (*auth.TokenInfo, error) {
		c, _ := r.Context().Value(callerKey{}).(*caller)
		if c == nil {
			return nil, auth.ErrInvalidToken
		}
		exp, _ := r.Context().Value(expiryKey{}).(time.Time)
		return &auth.TokenInfo{UserID: c.user, Expiration: exp, Extra: map[string]any{callerExtra: c}}, nil
	}
	sdk := auth.RequireBearerToken(verifier, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: g.metadataURL(), AllowMissingExpiration: true,
	})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r.Header)
		if token == "" {
			g.challenge(w, r, "", errUnauthenticated.Error())
			return
		}
		c, exp, err := g.auth.authenticate(r.Context(), clientOf(r), token)
		switch {
		case errors.Is(err, errInvalidToken):
			g.challenge(w, r, "invalid_token", errInvalidToken.Error())
			return
		case errors.Is(err, errBusy):
			busy(w, r)
			http.Error(w, "the gateway cannot check tokens now; try again later", http.StatusServiceUnavailable)
			return
		case err != nil:
			g.cfg.Logger.Error("checking a token", "error", err)
			unread(w, r)
			http.Error(w, "the gateway cannot check tokens now; try again later", http.StatusServiceUnavailable)
			return
		}
		ctx := context.WithValue(r.Context(), callerKey{}, c)
		ctx = context.WithValue(ctx, expiryKey{}, exp)
		sdk.ServeHTTP(w, r.WithContext(ctx))
	})
}

type expiryKey struct{}

// callerExtra is the key of the caller in a TokenInfo's Extra.
const callerExtra = "once.dev/caller"

// challenge answers 401 with a Bearer challenge that names the
// protected-resource metadata, and the error code when a token was sent.
// A gateway without metadata names none, and says how to get a token.
func (g *Gateway) challenge(w http.ResponseWriter, r *http.Request, code, msg string) {
	unread(w, r)
	params := []string{}
	if code != "" {
		params = append(params, fmt.Sprintf("error=%q", code))
	}
	if u := g.metadataURL(); u != "" {
		params = append(params, fmt.Sprintf("resource_metadata=%q", u))
	} else {
		msg += "; " + g.noIssuer()
	}
	w.Header().Set("WWW-Authenticate", strings.TrimSpace("Bearer "+strings.Join(params, ", ")))
	http.Error(w, msg, http.StatusUnauthorized)
}

// busy readies the 503 of a request whose token waits for a review
// place: no log, since a flood of made-up tokens would fill it, and a
// Retry-After.
func busy(w http.ResponseWriter, r *http.Request) {
	unread(w, r)
	w.Header().Set("Retry-After", busyRetryAfter)
}

// unread answers a request whose body the gateway does not read: over
// HTTP/1, the connection closes after the answer, or else net/http would
// read up to 256 KiB of the body, before answering, to keep it open.
func unread(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// callerFromToken is the caller the authentication middleware put in a
// request's TokenInfo.
func callerFromToken(ti *auth.TokenInfo) *caller {
	if ti == nil {
		return nil
	}
	c, _ := ti.Extra[callerExtra].(*caller)
	return c
}
