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

package http

import (
	"context"
	"io"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
	"github.com/once-dev/once/test/sandbox"
)

// silentListener is a token endpoint whose server hangs (sandbox.Silent),
// closed when the test ends.
func silentListener(t *testing.T) string {
	t.Helper()
	s, err := sandbox.NewSilent()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.URL("/token")
}

// executeWithin runs Connect and Execute for tool, and fails the test if
// they have not returned after limit.
func executeWithin(t *testing.T, c *Connector, tool *v1.Tool, timeout, limit time.Duration) protocol.CallResult {
	t.Helper()
	done := make(chan protocol.CallResult, 1)
	go func() {
		cl, err := c.Connect(context.Background(), tool)
		if err != nil {
			done <- protocol.CallResult{Message: "connect: " + err.Error()}
			return
		}
		done <- cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: timeout})
	}()
	select {
	case r := <-done:
		return r
	case <-time.After(limit):
		t.Fatalf("a call whose token endpoint never answers was still waiting after %s (its timeout: %s)", limit, timeout)
		return protocol.CallResult{}
	}
}

func TestTokenEndpointThatNeverAnswers(t *testing.T) {
	var reached atomic.Int32
	api := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		reached.Add(1)
	}))
	t.Cleanup(api.Close)
	secrets := secretsOf(t, map[string]map[string]string{
		"oauth": {"clientID": "once-client", "clientSecret": "s3cr3t-client"}})
	c := connector(t, secrets, NewTransport(loopback))
	tool := authTool(api.URL, &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{
		TokenURL: silentListener(t), SecretName: "oauth"}}, nil)

	t.Run("a call gives up at its timeout, and never left", func(t *testing.T) {
		start := time.Now()
		r := executeWithin(t, c, tool, 500*time.Millisecond, 10*time.Second)
		if r.Outcome != v1.OutcomeRetryable || !strings.Contains(r.Message, "request never left") ||
			!strings.Contains(r.Message, "deadline exceeded") {
			t.Errorf("want a retryable call that never left, at its deadline; got %s %q", r.Outcome, r.Message)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the call took %s, with a timeout of 500ms", took)
		}
	})

	t.Run("a call waiting for another's token gives up at its own timeout", func(t *testing.T) {
		// The first call fetches the token for 20 s; the second waits for
		// it no longer than its own half second.
		first := make(chan protocol.CallResult, 1)
		go func() {
			cl, err := c.Connect(context.Background(), tool)
			if err != nil {
				first <- protocol.CallResult{Message: err.Error()}
				return
			}
			first <- cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k1", Timeout: 20 * time.Second})
		}()
		time.Sleep(200 * time.Millisecond)
		start := time.Now()
		r := executeWithin(t, c, tool, 500*time.Millisecond, 10*time.Second)
		if r.Outcome != v1.OutcomeRetryable || !strings.Contains(r.Message, "waiting for another request's token") {
			t.Errorf("want a retryable call that gave up waiting; got %s %q", r.Outcome, r.Message)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("the waiting call took %s, with a timeout of 500ms", took)
		}
		select {
		case r := <-first:
			t.Errorf("the first call returned before its 20s timeout: %s %q", r.Outcome, r.Message)
		default:
		}
	})

	t.Run("a tool's check gives up with its context", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := c.Headers(ctx, tool)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "auth.oauth2: getting a token") {
				t.Errorf("want the token's failure; got %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the check of a tool whose token endpoint never answers was still waiting after 10s")
		}
	})
	if n := reached.Load(); n != 0 {
		t.Errorf("the tool was called %d times without a token", n)
	}
}

func TestTokenRequestIsNotRedirected(t *testing.T) {
	// elsewhere stands for a server the token endpoint sends the client
	// elsewhere to: a compromised or misconfigured authorization server.
	var stolen atomic.Int32
	elsewhere := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		stolen.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"elsewhere-token-0123456789","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(elsewhere.Close)
	tokenSrv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		nethttp.Redirect(w, r, elsewhere.URL+"/token", nethttp.StatusTemporaryRedirect)
	}))
	t.Cleanup(tokenSrv.Close)
	api := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {}))
	t.Cleanup(api.Close)
	secrets := secretsOf(t, map[string]map[string]string{
		"oauth": {"clientID": "once-client", "clientSecret": "s3cr3t-client"}})
	c := connector(t, secrets, NewTransport(loopback))
	tool := authTool(api.URL, &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{
		TokenURL: tokenSrv.URL + "/token", SecretName: "oauth"}}, nil)
	r := executeWithin(t, c, tool, 5*time.Second, 10*time.Second)
	if n := stolen.Load(); n != 0 {
		t.Errorf("the token request followed a redirect: %d requests elsewhere", n)
	}
	if r.Outcome != v1.OutcomeRetryable || !strings.Contains(r.Message, "redirected") {
		t.Errorf("want a retryable call that says the token endpoint redirected; got %s %q", r.Outcome, r.Message)
	}
}

func TestTokenURLForm(t *testing.T) {
	var reached atomic.Int32
	tokenSrv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		reached.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"elsewhere-token-0123456789","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokenSrv.Close)
	secrets := secretsOf(t, map[string]map[string]string{
		"oauth": {"clientID": "once-client", "clientSecret": "s3cr3t-client"}})
	c := connector(t, secrets, NewTransport(loopback))
	host := strings.TrimPrefix(tokenSrv.URL, "http://")
	_, port, _ := net.SplitHostPort(host)
	cases := map[string]struct {
		url     string
		refused string
	}{
		"http to a loopback address": {url: tokenSrv.URL + "/token"},
		"http to localhost":          {url: "http://localhost:" + port + "/token"},
		"user information":           {url: "http://user:pass@" + host + "/token", refused: "credentials in the URL are refused"},
		"http elsewhere":             {url: "http://auth.example.invalid/token", refused: "only over https"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			before := reached.Load()
			tool := authTool("http://127.0.0.1:1", &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{
				TokenURL: tc.url, SecretName: "oauth"}}, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := c.Headers(ctx, tool)
			if tc.refused == "" {
				if err != nil {
					t.Errorf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("want %q; got %v", tc.refused, err)
			}
			if err != nil && strings.Contains(err.Error(), "pass@") {
				t.Errorf("the error shows the URL's credentials: %v", err)
			}
			if reached.Load() != before {
				t.Error("the token endpoint was reached")
			}
		})
	}
}
