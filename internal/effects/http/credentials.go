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
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	nethttp "net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// credentials are what a tool's requests carry beyond its spec: header
// values, the transport, and every secret value read, for the scrubber.
type credentials struct {
	headers   nethttp.Header
	transport nethttp.RoundTripper
	// values are the tool's secretValues by name.
	values  map[string]string
	secrets []string
	// token is the OAuth2 token source of a tool whose token is fetched
	// with each call, or nil.
	token *tokenSource
}

// secretReader reads the keys of the tool's Secrets, in the namespace its
// Secrets live in, and remembers each value as a secret.
type secretReader struct {
	ctx       context.Context
	reader    client.Reader
	namespace string
	secrets   []string
	errs      []error
	// overSaid notes that errs already say the values are too many.
	overSaid bool
}

// read returns the value of a key of a Secret, or records why not.
func (r *secretReader) read(what, name, key string) (string, bool) {
	var s corev1.Secret
	if err := r.reader.Get(r.ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, &s); err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: reading Secret %s/%s: %w", what, r.namespace, name, err))
		return "", false
	}
	v, ok := s.Data[key]
	if !ok {
		r.errs = append(r.errs, fmt.Errorf("%s: Secret %s/%s has no key %q", what, r.namespace, name, key))
		return "", false
	}
	return string(v), true
}

// get reads a secret, which requests carry and the scrubber removes from
// what Once keeps: within the bounds of checkSecret.
func (r *secretReader) get(what, name, key string) string {
	v, ok := r.read(what, name, key)
	if !ok {
		return ""
	}
	if err := checkSecret(v); err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: Secret %s/%s key %q %w", what, r.namespace, name, key, err))
	}
	r.secrets = append(r.secrets, v)
	return v
}

// public reads a key that no request carries (a CA, a client certificate
// and its key, which the TLS handshake uses): it is not scrubbed, and has
// no bound of a secret's.
func (r *secretReader) public(what, name, key string) string {
	v, _ := r.read(what, name, key)
	return v
}

// minIdentifier is the shortest identifier read from a Secret (a Basic
// username, an OAuth2 client id) that is scrubbed. An identifier grants
// nothing without the password or secret that goes with it, which is
// always scrubbed. A short one is often a word ("api", "admin", "deploy")
// that shows in every answer. Scrubbing it would garble ids, paths and
// messages. Longer ones are usually generated (account and client
// ids), and those a tenant need not read.
const minIdentifier = 8

// identifier reads an identifier, remembered as a secret only from
// minIdentifier bytes on. It has a secret's upper bound, not its lower.
func (r *secretReader) identifier(what, name, key string) string {
	v, ok := r.read(what, name, key)
	if !ok || len(v) < minIdentifier {
		return v
	}
	if len(v) > maxSecret {
		r.errs = append(r.errs, fmt.Errorf("%s: Secret %s/%s key %q holds more than %d bytes", what, r.namespace, name, key, maxSecret))
	}
	r.secrets = append(r.secrets, v)
	return v
}

// maxSecretValue bounds a secret value that expressions read: their cost
// is estimated with each at most this long. A Secret's value may be 1 MiB.
const maxSecretValue = 4096

// credentials resolves a tool's headers, auth and TLS; an OAuth2 token only
// if fetch is set, else the source a Client fetches it from.
func (c *Connector) credentials(ctx context.Context, tool v1.GenericTool, fetch bool) (credentials, error) {
	namespace := tool.GetNamespace()
	if tool.Kind() == v1.ToolKindClusterTool {
		namespace = c.ClusterResourceNamespace
	}
	r := &secretReader{ctx: ctx, reader: c.Secrets, namespace: namespace}
	spec := tool.GetSpec().HTTP
	h := nethttp.Header{}
	for _, hd := range spec.Headers {
		if hd.ValueFrom == nil {
			h.Set(hd.Name, hd.Value)
			continue
		}
		ref := hd.ValueFrom.SecretKeyRef
		h.Set(hd.Name, r.get("header "+hd.Name, ref.Name, ref.Key))
	}
	values := map[string]string{}
	for _, sv := range spec.SecretValues {
		v := r.get("secretValues "+sv.Name, sv.SecretKeyRef.Name, sv.SecretKeyRef.Key)
		if len(v) > maxSecretValue {
			r.errs = append(r.errs, fmt.Errorf("secretValues %s: Secret %s/%s key %q holds %d bytes, "+
				"more than the %d that expressions are estimated with", sv.Name, namespace, sv.SecretKeyRef.Name,
				sv.SecretKeyRef.Key, len(v), maxSecretValue))
		}
		values[sv.Name] = v
	}
	transport, err := c.transport(r, spec.TLS)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	var ts *tokenSource
	if a := spec.Auth; a != nil && len(r.errs) == 0 {
		ts = c.authorize(ctx, r, tool, a, transport, h, fetch)
		if len(r.errs) == 0 {
			// The whole header value too, and so its encodings: a tool
			// that echoes "Basic dXNlcjpwYXNz" names no part of it as it
			// was read. (With a credential missing, it is a bare scheme,
			// a word that the error names.)
			r.secrets = append(r.secrets, h.Get("Authorization"))
		}
	}
	r.overTotal()
	cr := credentials{headers: h, transport: transport, values: values, secrets: r.secrets, token: ts}
	if err := errors.Join(r.errs...); err != nil {
		// What a token endpoint answered may echo a secret.
		return credentials{}, errors.New(scrubRefusal(r.secrets, err.Error()))
	}
	return cr, nil
}

// scrubRefusal removes the secret values from the message that refuses
// them. The scrubber's work grows with the values, and refused ones may
// be of any size: it takes the values only within its bounds. Beyond
// them, each value is replaced as it was read, which costs no more than
// a search of the message.
func scrubRefusal(secrets []string, msg string) string {
	if secretBytes(secrets) <= maxSecrets && !slices.ContainsFunc(secrets, func(v string) bool { return len(v) > maxSecret }) {
		return newScrubber(secrets).string(msg)
	}
	for _, v := range secrets {
		if v != "" {
			msg = strings.ReplaceAll(msg, v, redacted)
		}
	}
	return msg
}

// overTotal reports whether the secrets read so far hold more than a tool
// may send together, and says so once among the errors.
func (r *secretReader) overTotal() bool {
	n := secretBytes(r.secrets)
	if n <= maxSecrets {
		return false
	}
	if !r.overSaid {
		r.overSaid = true
		r.errs = append(r.errs, fmt.Errorf("the tool's secret values hold %d bytes together, more than the %d a tool may send", n, maxSecrets))
	}
	return true
}

// secretBytes is the size of the values together.
func secretBytes(values []string) int {
	n := 0
	for _, v := range values {
		n += len(v)
	}
	return n
}

// authorize sets the Authorization header of a bearer or basic tool. For
// OAuth2 it makes the tool's token source, and fetches a token now only if
// fetch is set: a Client fetches its token within its call's deadline
// (Client.authorize), a Tool's check within its own.
func (c *Connector) authorize(ctx context.Context, r *secretReader, tool v1.GenericTool, a *v1.HTTPAuth,
	transport nethttp.RoundTripper, h nethttp.Header, fetch bool) *tokenSource {
	switch {
	case a.Bearer != nil:
		h.Set("Authorization", "Bearer "+r.get("auth.bearer", a.Bearer.Name, a.Bearer.Key))
	case a.Basic != nil:
		user := r.identifier("auth.basic", a.Basic.SecretName, "username")
		pass := r.get("auth.basic", a.Basic.SecretName, "password")
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+pass)))
	case a.OAuth2 != nil:
		o := a.OAuth2
		id := r.identifier("auth.oauth2", o.SecretName, "clientID")
		secret := r.get("auth.oauth2", o.SecretName, "clientSecret")
		if len(r.errs) > 0 {
			return nil
		}
		if err := checkTokenURL(o.TokenURL); err != nil {
			r.errs = append(r.errs, fmt.Errorf("auth.oauth2.tokenURL: %w", err))
			return nil
		}
		if r.overTotal() {
			// Before the token endpoint is asked: what it answers may echo
			// a secret, and only values within the bounds are scrubbed
			// in every form.
			return nil
		}
		ts := c.tokens.source(tool, o, id, secret, transport)
		if !fetch {
			return ts
		}
		tok, err := ts.token(ctx)
		if err != nil {
			r.errs = append(r.errs, err)
			return nil
		}
		if err := checkSecret(tok.AccessToken); err != nil {
			r.errs = append(r.errs, fmt.Errorf("auth.oauth2: the token from %s %w", o.TokenURL, err))
			return nil
		}
		r.secrets = append(r.secrets, tok.AccessToken)
		tok.SetAuthHeader(&nethttp.Request{Header: h})
	}
	return nil
}

// checkTokenURL refuses a token endpoint that would expose the client
// secret: credentials in the URL, or plain http to anything but a loopback
// host. A loopback host is a test's or a demo's token server on the
// manager's own host, which the egress policy still has to allow. The
// CRD's rules say the same at admission. This check holds for a Tool
// stored before them. The egress policy
// applies when the endpoint is dialled.
func checkTokenURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return redact(err)
	}
	switch {
	case u.User != nil:
		return errors.New("credentials in the URL are refused")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopbackHost(u.Hostname()):
		return nil
	}
	return errors.New("the client secret is sent only over https (plain http only to a loopback host)")
}

// isLoopbackHost reports whether host is localhost or a loopback address.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// maxTokenWait bounds a token request whose caller set no shorter deadline.
const maxTokenWait = time.Minute

// errTokenRedirect refuses a redirect of the token request: following it
// would post the client secret to wherever the endpoint points.
var errTokenRedirect = errors.New("the token endpoint redirected; the token request is not sent elsewhere")

// tokens keeps a token source per tool and credentials, so that a token
// is reused until shortly before it expires.
type tokens struct {
	mu      sync.Mutex
	sources map[string]*tokenSource
}

// maxTokenSources bounds the token sources kept; past it they are dropped
// and made again.
const maxTokenSources = 1024

// tokenSource fetches and keeps one tool's token. One request at a time
// fetches it; the others wait for it, each no longer than its own context
// allows.
type tokenSource struct {
	// turn is held by the request that reads or fetches the token.
	turn   chan struct{}
	cfg    clientcredentials.Config
	client *nethttp.Client
	// tok is the last token fetched; guarded by turn.
	tok *oauth2.Token
}

func (t *tokens) source(tool v1.GenericTool, o *v1.OAuth2ClientCredentials, id, secret string,
	transport nethttp.RoundTripper) *tokenSource {
	sum := sha256.Sum256([]byte(strings.Join(append([]string{string(tool.Kind()), tool.GetNamespace(),
		tool.GetName(), o.TokenURL, id, secret}, o.Scopes...), "\x00")))
	key := hex.EncodeToString(sum[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts, ok := t.sources[key]; ok {
		return ts
	}
	if t.sources == nil || len(t.sources) >= maxTokenSources {
		t.sources = map[string]*tokenSource{}
	}
	ts := &tokenSource{
		turn: make(chan struct{}, 1),
		cfg:  clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: o.TokenURL, Scopes: o.Scopes},
		// The token request goes through the tool's transport: the same
		// egress policy, the same TLS.
		client: &nethttp.Client{Transport: transport,
			CheckRedirect: func(*nethttp.Request, []*nethttp.Request) error { return errTokenRedirect }},
	}
	t.sources[key] = ts
	return ts
}

// token returns a valid token, fetched within ctx if the one kept has
// expired or is about to.
func (s *tokenSource) token(ctx context.Context) (*oauth2.Token, error) {
	fail := func(err error) (*oauth2.Token, error) {
		return nil, fmt.Errorf("auth.oauth2: getting a token from %s: %w", s.cfg.TokenURL, redact(err))
	}
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return fail(fmt.Errorf("waiting for another request's token: %w", ctx.Err()))
	}
	defer func() { <-s.turn }()
	if s.tok.Valid() {
		return s.tok, nil
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, s.client), maxTokenWait)
	defer cancel()
	tok, err := s.cfg.Token(ctx)
	if err != nil {
		return fail(err)
	}
	s.tok = tok
	return tok, nil
}

// transport is the base transport, or a copy of it with the tool's TLS.
func (c *Connector) transport(r *secretReader, t *v1.TLSConfig) (nethttp.RoundTripper, error) {
	if t == nil {
		return c.Transport, nil
	}
	base, ok := c.Transport.(*nethttp.Transport)
	if !ok {
		return nil, fmt.Errorf("tls: the manager's transport %T cannot take a TLS configuration", c.Transport)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, NextProtos: []string{"http/1.1"}}
	if t.CASecretName != "" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if pem := r.public("tls.caSecretName", t.CASecretName, "ca.crt"); pem != "" && !pool.AppendCertsFromPEM([]byte(pem)) {
			return nil, fmt.Errorf("tls: Secret %s/%s key ca.crt holds no PEM certificate", r.namespace, t.CASecretName)
		}
		cfg.RootCAs = pool
	}
	if name := t.ClientCertificateSecretName; name != "" {
		crt := r.public("tls.clientCertificateSecretName", name, corev1.TLSCertKey)
		key := r.public("tls.clientCertificateSecretName", name, corev1.TLSPrivateKeyKey)
		if crt != "" && key != "" {
			pair, err := tls.X509KeyPair([]byte(crt), []byte(key))
			if err != nil {
				return nil, fmt.Errorf("tls: Secret %s/%s holds no usable certificate and key", r.namespace, name)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
	}
	tr := base.Clone()
	tr.TLSClientConfig = cfg
	return tr, nil
}
