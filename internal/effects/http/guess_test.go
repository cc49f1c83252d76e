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
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	nethttp "net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
)

// echoingTool is a tool whose answer is the body it received, with a
// request shape that sends the secret value pin and the parameter note.
func echoingTool(t *testing.T) *v1.Tool {
	t.Helper()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	tool := authTool(srv.URL, nil, nil)
	tool.Spec.HTTP.SecretValues = []v1.SecretValue{{Name: "pin", SecretKeyRef: v1.SecretKeySelector{Name: "card", Key: "pin"}}}
	tool.Spec.Operations[0].Method = "POST"
	tool.Spec.Operations[0].Request = &v1.RequestShape{Body: "{'pin': secrets.pin, 'note': parameters.note}"}
	return tool
}

// view is what the author of an operation learns of it: the connection's
// refusal, or the outcome, messages, ids and result the manager keeps
// (status, events, and what pkg/once reads), with the author's own guess
// written as GUESS.
func view(t *testing.T, c *Connector, tool *v1.Tool, guess string) string {
	t.Helper()
	cl, err := c.Connect(context.Background(), tool)
	if err != nil {
		return "refused: " + err.Error()
	}
	params, _ := json.Marshal(map[string]string{"note": guess})
	r := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Parameters: params, Timeout: 5 * time.Second})
	var result string
	if r.Result != nil {
		result = string(r.Result.Raw)
	}
	// The evidence's body digest covers the parameters: each guess has
	// its own, whatever the secret.
	request, _, _ := strings.Cut(r.Request, " body ")
	return strings.ReplaceAll(fmt.Sprintf("%s|%s|%s|%s|%s", r.Outcome, r.Message, request, r.ExternalObjectID, result), guess, "GUESS")
}

// TestGuessNotTold: an operation's author whose tool echoes its input
// sends a guess of a secret value as a parameter. What they read of the
// operation is the same whether the guess is right or wrong. The scrubber
// replaces a value wherever it shows, so it cannot tell the tool's echo
// of the secret from the echo of a guess: a right guess came back
// "[redacted]", a wrong one as sent. So a value short enough to guess is
// refused before any call.
func TestGuessNotTold(t *testing.T) {
	for _, pin := range []string{"4821", "48213377"} {
		t.Run(pin, func(t *testing.T) {
			c := connector(t, secretsOf(t, map[string]map[string]string{"card": {"pin": pin}}), NewTransport(loopback))
			tool := echoingTool(t)
			right, wrong := view(t, c, tool, pin), view(t, c, tool, strings.Repeat("1", len(pin)))
			if right != wrong {
				t.Errorf("the author tells a right guess from a wrong one:\n right: %s\n wrong: %s", right, wrong)
			}
			if !strings.Contains(right, "refused: secretValues pin: Secret ns/card key \"pin\" holds fewer than 12 bytes") {
				t.Errorf("a short value must be refused, naming the field and the key: %s", right)
			}
			if strings.Contains(right, pin) {
				t.Errorf("the refusal names the value: %s", right)
			}
		})
	}
	// A value of 12 bytes or more is taken.
	c := connector(t, secretsOf(t, map[string]map[string]string{"card": {"pin": "card-pin-4821"}}), NewTransport(loopback))
	if got := view(t, c, echoingTool(t), "a wrong guess"); !strings.HasPrefix(got, "Succeeded|") || strings.Contains(got, "card-pin-4821") {
		t.Errorf("a value of 13 bytes is taken and scrubbed: %s", got)
	}
}

// TestSecretBounds: every value the scrubber takes is bounded, alone and
// together, before the scrubber is built; what it builds and searches at
// the bounds is measured.
func TestSecretBounds(t *testing.T) {
	long := strings.Repeat("k", maxSecret+1)
	headers := func(n, size int) ([]v1.HTTPHeader, map[string]string) {
		var hs []v1.HTTPHeader
		data := map[string]string{}
		for i := range n {
			key := fmt.Sprintf("h%d", i)
			data[key] = fmt.Sprintf("%04d", i) + strings.Repeat("v", size-4)
			hs = append(hs, v1.HTTPHeader{Name: "X-" + key, ValueFrom: &v1.HeaderSource{
				SecretKeyRef: v1.SecretKeySelector{Name: "s", Key: key}}})
		}
		return hs, data
	}
	cases := map[string]struct {
		auth    *v1.HTTPAuth
		headers int
		size    int
		data    map[string]string
		want    string
	}{
		"LongBearer": {auth: &v1.HTTPAuth{Bearer: &v1.SecretKeySelector{Name: "s", Key: "token"}},
			data: map[string]string{"token": long}, want: `auth.bearer: Secret ns/s key "token" holds more than 8192 bytes`},
		"ShortPassword": {auth: &v1.HTTPAuth{Basic: &v1.BasicAuth{SecretName: "s"}},
			data: map[string]string{"username": "once", "password": "hunter2"}, want: `auth.basic: Secret ns/s key "password" holds fewer than 12 bytes`},
		"LongUsername": {auth: &v1.HTTPAuth{Basic: &v1.BasicAuth{SecretName: "s"}},
			data: map[string]string{"username": long, "password": "s3cr3t-password"}, want: `auth.basic: Secret ns/s key "username" holds more than 8192 bytes`},
		"ShortTokenInAHeader": {headers: 1, size: 16, data: map[string]string{"h0": "Bearer abc12345"},
			want: `header X-h0: Secret ns/s key "h0" holds a token or password of fewer than 12 bytes`},
		// A cookie's pairs are no scheme and token: the value is a
		// secret whole, and a short pair in it is no secret of its own.
		"CookieWithAShortPair": {headers: 1, size: 16, data: map[string]string{"h0": "session=0123456789abcdef; lang=en-US"}},
		"HeadersTogether":      {headers: 9, size: maxSecret, want: "the tool's secret values hold 73728 bytes together, more than the 65536"},
		"HeadersWithin":        {headers: 8, size: maxSecret},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			hs, data := headers(tc.headers, max(tc.size, 4))
			maps.Copy(data, tc.data)
			c := connector(t, secretsOf(t, map[string]map[string]string{"s": data}), NewTransport(loopback))
			tool := authTool("http://127.0.0.1:1", tc.auth, nil)
			tool.Spec.HTTP.Headers = hs
			_, err := c.Connect(context.Background(), tool)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("connect: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("want an error with %q, got %v", tc.want, err)
			}
		})
	}

	// The scrubber at the bounds: eight values of 8 KiB that differ in
	// their last bytes alone, searched in a body as long as Once reads,
	// made of what they share: every byte starts eight near matches.
	var values []string
	for i := range maxSecrets / maxSecret {
		values = append(values, strings.Repeat("a", maxSecret-4)+fmt.Sprintf("%04d", i))
	}
	body := []byte(strings.Repeat("a", maxBody+cutSlack))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	s := newScrubber(values)
	built := time.Since(start)
	_ = s.upTo(body, maxBody)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("scrubber of %d bytes of secrets: %d bytes allocated, built in %s, searched %d bytes in %s",
		maxSecrets, allocated, built, len(body), time.Since(start)-built)
	if allocated > 32<<20 {
		t.Errorf("the scrubber allocated %d bytes at the bounds; at most %d", allocated, 32<<20)
	}
}

// TestLongTokenRefused: a token endpoint's answer is a secret the scrubber
// takes; a token of 1 MiB is refused before the scrubber is built of it.
func TestLongTokenRefused(t *testing.T) {
	tokenSrv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token": %q, "token_type": "bearer", "expires_in": 3600}`, strings.Repeat("t", 1<<20-64))
	}))
	t.Cleanup(tokenSrv.Close)
	c := connector(t, secretsOf(t, map[string]map[string]string{
		"oauth": {"clientID": "once-client", "clientSecret": "s3cr3t-client"}}), NewTransport(loopback))
	tool := authTool("http://127.0.0.1:1", &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{TokenURL: tokenSrv.URL, SecretName: "oauth"}}, nil)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msg := call(t, c, tool)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("a call with a token of 1 MiB: %d bytes allocated", allocated)
	if !strings.Contains(msg, "auth.oauth2: the token holds more than 8192 bytes") {
		t.Errorf("a token of 1 MiB must be refused: %q", msg)
	}
	if allocated > 16<<20 {
		t.Errorf("the call allocated %d bytes; at most %d", allocated, 16<<20)
	}
}

// TestOverTotalAsksNoTokenEndpoint: a tool whose secrets are over their
// bound together never asks its token endpoint, whose answer may echo the
// client secret in a form only the full scrubber would find.
func TestOverTotalAsksNoTokenEndpoint(t *testing.T) {
	asked := 0
	tokenSrv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		asked++
		body, _ := io.ReadAll(r.Body)
		// A token endpoint that refuses, echoing the request it got.
		w.WriteHeader(nethttp.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":%q,"authorization":%q}`,
			body, r.Header.Get("Authorization"))
	}))
	t.Cleanup(tokenSrv.Close)
	secret := "s3cr3t/client+secret=" + strings.Repeat("x", 16)
	data := map[string]string{"clientID": "client-id-0001", "clientSecret": secret}
	var hs []v1.HTTPHeader
	for i := range 9 {
		key := fmt.Sprintf("h%d", i)
		data[key] = fmt.Sprintf("%04d", i) + strings.Repeat("v", maxSecret-4)
		hs = append(hs, v1.HTTPHeader{Name: "X-" + key, ValueFrom: &v1.HeaderSource{
			SecretKeyRef: v1.SecretKeySelector{Name: "s", Key: key}}})
	}
	c := connector(t, secretsOf(t, map[string]map[string]string{"s": data}), NewTransport(loopback))
	tool := authTool("http://127.0.0.1:1", &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{
		TokenURL: tokenSrv.URL, SecretName: "s"}}, nil)
	tool.Spec.HTTP.Headers = hs
	// The Tool's check fetches a token now (Headers), as a call does.
	_, err := c.Headers(context.Background(), tool)
	if err == nil || !strings.Contains(err.Error(), "more than the 65536 a tool may send") {
		t.Fatalf("want the values refused together, got %v", err)
	}
	if asked != 0 {
		t.Errorf("the token endpoint was asked %d times with the values over their bound", asked)
	}
	for _, form := range []string{secret, url.QueryEscape(secret), base64.StdEncoding.EncodeToString([]byte("client-id-0001:" + secret))} {
		if strings.Contains(err.Error(), form) {
			t.Errorf("the refusal shows the client secret as %q: %v", form, err)
		}
	}
}
