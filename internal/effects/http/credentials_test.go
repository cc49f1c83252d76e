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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/effects"
	"github.com/once-dev/once/internal/protocol"
)

// secretsOf is a reader of the given Secrets in namespace "ns".
func secretsOf(t *testing.T, data map[string]map[string]string) client.Reader {
	t.Helper()
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s)
	for name, kv := range data {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{}}
		for k, v := range kv {
			sec.Data[k] = []byte(v)
		}
		b = b.WithObjects(sec)
	}
	return b.Build()
}

// echoAuth answers with the Authorization header it got, as a careless
// tool's debug answer would.
func echoAuth(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.WriteHeader(nethttp.StatusUnauthorized)
		_, _ = io.WriteString(w, "you sent "+r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func authTool(url string, auth *v1.HTTPAuth, tlsc *v1.TLSConfig) *v1.Tool {
	return &v1.Tool{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "t"}, Spec: v1.ToolSpec{
		HTTP:        v1.HTTPBackend{URL: url, Auth: auth, TLS: tlsc},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
		Operations:  []v1.ToolOperation{{Name: "op", Path: "/op"}}}}
}

func connector(t *testing.T, secrets client.Reader, transport nethttp.RoundTripper) *Connector {
	t.Helper()
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	return &Connector{Secrets: secrets, Compiler: c, Transport: transport}
}

func call(t *testing.T, c *Connector, tool *v1.Tool) string {
	t.Helper()
	cl, err := c.Connect(context.Background(), tool)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	r := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: 5 * time.Second})
	return r.Message
}

func TestAuthFromSecrets(t *testing.T) {
	srv := echoAuth(t)
	secrets := secretsOf(t, map[string]map[string]string{
		"token": {"token": "s3cr3t-bearer-token"},
		"basic": {"username": "once", "password": "s3cr3t-password"},
	})
	c := connector(t, secrets, NewTransport(loopback))
	cases := map[string]struct {
		auth   *v1.HTTPAuth
		secret []string
	}{
		"Bearer": {&v1.HTTPAuth{Bearer: &v1.SecretKeySelector{Name: "token", Key: "token"}}, []string{"s3cr3t-bearer-token"}},
		"Basic":  {&v1.HTTPAuth{Basic: &v1.BasicAuth{SecretName: "basic"}}, []string{"s3cr3t-password", "b25jZTpzM2NyM3QtcGFzc3dvcmQ="}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			msg := call(t, c, authTool(srv.URL, tc.auth, nil))
			if !strings.Contains(msg, "you sent") {
				t.Fatalf("the tool did not answer: %q", msg)
			}
			for _, s := range tc.secret {
				if strings.Contains(msg, s) {
					t.Errorf("a credential the tool echoed reached the result: %q", msg)
				}
			}
		})
	}
	_, err := c.Connect(context.Background(), authTool(srv.URL,
		&v1.HTTPAuth{Bearer: &v1.SecretKeySelector{Name: "missing", Key: "token"}}, nil))
	if err == nil || !strings.Contains(err.Error(), "auth.bearer: reading Secret ns/missing") {
		t.Errorf("a missing Secret must be named: %v", err)
	}
}

func TestOAuth2ClientCredentials(t *testing.T) {
	var issued atomic.Int32
	tokenSrv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok || id != "once-client" || secret != "s3cr3t-client" || r.FormValue("grant_type") != "client_credentials" {
			w.WriteHeader(nethttp.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"s3cr3t-access-token","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(tokenSrv.Close)
	api := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		got := r.Header.Get("Authorization")
		w.WriteHeader(nethttp.StatusUnauthorized)
		if got == "Bearer s3cr3t-access-token" {
			_, _ = io.WriteString(w, "token accepted; you sent "+got)
			return
		}
		_, _ = io.WriteString(w, "token refused")
	}))
	t.Cleanup(api.Close)
	secrets := secretsOf(t, map[string]map[string]string{
		"oauth": {"clientID": "once-client", "clientSecret": "s3cr3t-client"},
		"wrong": {"clientID": "once-client", "clientSecret": "nope-not-the-secret"},
	})
	c := connector(t, secrets, NewTransport(loopback))
	tool := authTool(api.URL, &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{TokenURL: tokenSrv.URL, SecretName: "oauth"}}, nil)
	for range 2 {
		msg := call(t, c, tool)
		if !strings.Contains(msg, "token accepted") {
			t.Fatalf("the token was not sent: %q", msg)
		}
		if strings.Contains(msg, "s3cr3t-access-token") {
			t.Errorf("the token the tool echoed reached the result: %q", msg)
		}
	}
	if n := issued.Load(); n != 1 {
		t.Errorf("a token is reused until it expires: %d issued for 2 calls", n)
	}
	bad := authTool(api.URL, &v1.HTTPAuth{OAuth2: &v1.OAuth2ClientCredentials{TokenURL: tokenSrv.URL, SecretName: "wrong"}}, nil)
	if _, err := c.Headers(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "auth.oauth2: getting a token") ||
		strings.Contains(err.Error(), "nope") {
		t.Errorf("a refused token request must say so, without the secret: %v", err)
	}
	// A call fetches its token itself: refused, the call never left.
	cl, err := c.Connect(context.Background(), bad)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	r := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: 5 * time.Second})
	if r.Outcome != v1.OutcomeRetryable || !strings.Contains(r.Message, "request never left: auth.oauth2: getting a token") ||
		strings.Contains(r.Message, "nope") {
		t.Errorf("a call whose token request was refused never left, and says so without the secret: %s %q",
			r.Outcome, r.Message)
	}
}

func TestTLSFromSecrets(t *testing.T) {
	ca, caKey := newCert(t, "once test CA", nil, nil, true)
	server, serverKey := newCert(t, "127.0.0.1", ca, caKey, false)
	clientCrt, clientKey := newCert(t, "once", ca, caKey, false)
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	srv := httptest.NewUnstartedServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.WriteHeader(nethttp.StatusCreated)
		_, _ = io.WriteString(w, `{"client":"`+r.TLS.PeerCertificates[0].Subject.CommonName+`"}`)
	}))
	pair, err := tls.X509KeyPair(pemOf("CERTIFICATE", server.Raw), keyPEM(t, serverKey))
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	secrets := secretsOf(t, map[string]map[string]string{
		"ca":     {"ca.crt": string(pemOf("CERTIFICATE", ca.Raw))},
		"client": {"tls.crt": string(pemOf("CERTIFICATE", clientCrt.Raw)), "tls.key": string(keyPEM(t, clientKey))},
	})
	c := connector(t, secrets, NewTransport(loopback))
	if msg := call(t, c, authTool(srv.URL, nil, &v1.TLSConfig{CASecretName: "ca", ClientCertificateSecretName: "client"})); !strings.Contains(msg, `"client":"once"`) {
		t.Errorf("a private CA and a client certificate reach the tool: %q", msg)
	}
	if msg := call(t, c, authTool(srv.URL, nil, &v1.TLSConfig{ClientCertificateSecretName: "client"})); !strings.Contains(msg, "certificate") {
		t.Errorf("without the CA the tool's certificate is not trusted: %q", msg)
	}
}

func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:        isCA, BasicConstraintsValid: true}
	if cn == "127.0.0.1" {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("EC PRIVATE KEY", der)
}

// TestSecretValues: a credential an API wants in the body or the path is
// read from a Secret, sent, and scrubbed from the evidence.
func TestSecretValues(t *testing.T) {
	var got string
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		b, _ := io.ReadAll(r.Body)
		got = r.URL.EscapedPath() + " " + string(b)
		w.WriteHeader(nethttp.StatusAccepted)
		_, _ = io.WriteString(w, `{"status":"success","echo":`+string(b)+`}`)
	}))
	t.Cleanup(srv.Close)
	secrets := secretsOf(t, map[string]map[string]string{
		"pd": {"routingKey": "R0123456789abcdef0123456789abcde"}, "hook": {"token": "s3cr3tHookToken"}})
	c := connector(t, secrets, NewTransport(loopback))
	tool := authTool(srv.URL, nil, nil)
	tool.Spec.HTTP.SecretValues = []v1.SecretValue{
		{Name: "routingKey", SecretKeyRef: v1.SecretKeySelector{Name: "pd", Key: "routingKey"}},
		{Name: "hookToken", SecretKeyRef: v1.SecretKeySelector{Name: "hook", Key: "token"}}}
	tool.Spec.Operations[0].Path = "/services/{token}"
	tool.Spec.Operations[0].Request = &v1.RequestShape{
		PathValues: []v1.NamedValue{{Name: "token", Value: "secrets.hookToken"}},
		Body:       "{'routing_key': secrets.routingKey, 'dedup_key': key}"}
	cl, err := c.Connect(context.Background(), tool)
	if err != nil {
		t.Fatal(err)
	}
	r := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: 5 * time.Second})
	if want := `/services/s3cr3tHookToken {"dedup_key":"k","routing_key":"R0123456789abcdef0123456789abcde"}`; got != want {
		t.Errorf("the tool received %q, want %q", got, want)
	}
	for _, leak := range []string{"R0123456789abcdef0123456789abcde", "s3cr3tHookToken"} {
		if strings.Contains(r.Request+r.Message+string(r.Result.Raw), leak) {
			t.Errorf("a secret value reached the evidence: %q %q %s", r.Request, r.Message, r.Result.Raw)
		}
	}
	if !strings.HasPrefix(r.Request, "POST /services/[redacted] body ") {
		t.Errorf("evidence %q", r.Request)
	}
}

// TestSecretValueBounded: expressions are estimated with each secret
// value at most maxSecretValue long, and a Secret's value may be 1 MiB: a
// longer one makes the tool unusable before any expression reads it. A
// value of 64 KiB once made one expression allocate 125 MB.
func TestSecretValueBounded(t *testing.T) {
	for _, n := range []int{maxSecretValue, maxSecretValue + 1} {
		secrets := secretsOf(t, map[string]map[string]string{"big": {"v": strings.Repeat("k", n)}})
		c := connector(t, secrets, NewTransport(loopback))
		tool := authTool("http://127.0.0.1:1", nil, nil)
		tool.Spec.HTTP.SecretValues = []v1.SecretValue{{Name: "big", SecretKeyRef: v1.SecretKeySelector{Name: "big", Key: "v"}}}
		_, err := c.Connect(context.Background(), tool)
		switch {
		case n <= maxSecretValue && err != nil:
			t.Errorf("a value of %d bytes: %v", n, err)
		case n > maxSecretValue && (err == nil || !strings.Contains(err.Error(),
			`secretValues big: Secret ns/big key "v" holds 4097 bytes, more than the 4096`)):
			t.Errorf("a value of %d bytes: want it refused, naming the field and the bound; got %v", n, err)
		}
	}
}

// TestBasicUsername: a Basic username shorter than minIdentifier is an
// ordinary word, not scrubbed where it appears (a username "api" would
// garble every path); a longer one is scrubbed; the password always is.
func TestBasicUsername(t *testing.T) {
	const password = "s3cr3t-password"
	for name, tc := range map[string]struct {
		user string
		kept bool
	}{
		"Short": {user: "api", kept: true},
		"Long":  {user: "acme-payments-prod", kept: false},
	} {
		t.Run(name, func(t *testing.T) {
			// A tool that says who called and where, and echoes the header.
			srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
				user, pass, _ := r.BasicAuth()
				w.Header().Set("Content-Type", "application/json")
				_, _ = fmt.Fprintf(w, `{"path": "/%s/v1/charges", "user": %q, "auth": %q, "password": %q}`,
					user, user, r.Header.Get("Authorization"), pass)
			}))
			t.Cleanup(srv.Close)
			c := connector(t, secretsOf(t, map[string]map[string]string{
				"basic": {"username": tc.user, "password": password}}), NewTransport(loopback))
			tool := authTool(srv.URL, &v1.HTTPAuth{Basic: &v1.BasicAuth{SecretName: "basic"}}, nil)
			tool.Spec.Operations[0].Response.Result = "response.body"
			cl, err := c.Connect(context.Background(), tool)
			if err != nil {
				t.Fatal(err)
			}
			r := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k", Timeout: 5 * time.Second})
			if r.Outcome != v1.OutcomeSucceeded {
				t.Fatalf("want Succeeded, got %s: %s", r.Outcome, r.Message)
			}
			got := resultOf(r.Result)
			if want := `"path":"/` + tc.user + `/v1/charges"`; strings.Contains(got, want) != tc.kept {
				t.Errorf("username %q: want it kept %t in %s", tc.user, tc.kept, got)
			}
			if strings.Contains(strings.ToLower(got+r.Message), password) {
				t.Errorf("the password is kept: %s", got)
			}
		})
	}
}

// TestEvidenceWithholdsSecrets: the evidence's body digest is derived
// without the secret values a body holds, so that whoever reads the
// operation cannot recover one that has few unknown characters (a PIN an
// API wants in the body, behind a known prefix) by guessing it offline; it still tells attempts with other parameters
// apart.
func TestEvidenceWithholdsSecrets(t *testing.T) {
	var received []byte
	srv := httptest.NewServer(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		received, _ = io.ReadAll(r.Body)
		w.WriteHeader(nethttp.StatusAccepted)
	}))
	t.Cleanup(srv.Close)
	evidence := func(pin, amount string) string {
		c := connector(t, secretsOf(t, map[string]map[string]string{"card": {"pin": pin}}), NewTransport(loopback))
		tool := authTool(srv.URL, nil, nil)
		tool.Spec.HTTP.SecretValues = []v1.SecretValue{{Name: "pin", SecretKeyRef: v1.SecretKeySelector{Name: "card", Key: "pin"}}}
		tool.Spec.Operations[0].Request = &v1.RequestShape{Body: "{'pin': secrets.pin, 'amount': parameters.amount}"}
		tool.Spec.Operations[0].Response.Format = v1.FormatNone
		cl, err := c.Connect(context.Background(), tool)
		if err != nil {
			t.Fatal(err)
		}
		r := cl.Execute(context.Background(), effects.Request{Operation: "op", Key: "k",
			Parameters: []byte(`{"amount": ` + amount + `}`), Timeout: 5 * time.Second})
		if r.Outcome != v1.OutcomeSucceeded {
			t.Fatalf("want Succeeded, got %s: %s", r.Outcome, r.Message)
		}
		return r.Request
	}
	got := evidence("card-pin-4821", "100")
	if want := `{"amount":100,"pin":"card-pin-4821"}`; string(received) != want {
		t.Fatalf("the tool received %s, want %s", received, want)
	}
	_, digest, ok := strings.Cut(got, " body ")
	if !ok {
		t.Fatalf("evidence %q names no body digest", got)
	}
	// What one who reads the operation (its parameters, the tool's
	// shape) would try: every four-digit PIN behind the prefix.
	for pin := range 10000 {
		body := fmt.Sprintf(`{"amount":100,"pin":"card-pin-%04d"}`, pin)
		if strings.HasPrefix(protocol.Digest([]byte(body)), "sha256:"+digest) {
			t.Fatalf("the evidence %q gives the PIN away: %04d", got, pin)
		}
	}
	if other := evidence("card-pin-0000", "100"); other != got {
		t.Errorf("the evidence depends on the secret value: %q and %q", got, other)
	}
	if other := evidence("card-pin-4821", "200"); other == got {
		t.Errorf("the evidence does not tell other parameters apart: %q", got)
	}
}
