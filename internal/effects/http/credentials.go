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
	"strings"
	"sync"

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
}

// secretReader reads the keys of the tool's Secrets, in the namespace its
// Secrets live in, and remembers each value as a secret.
type secretReader struct {
	ctx       context.Context
	reader    client.Reader
	namespace string
	secrets   []string
	errs      []error
}

func (r *secretReader) get(what, name, key string) string {
	var s corev1.Secret
	if err := r.reader.Get(r.ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, &s); err != nil {
		r.errs = append(r.errs, fmt.Errorf("%s: reading Secret %s/%s: %w", what, r.namespace, name, err))
		return ""
	}
	v, ok := s.Data[key]
	if !ok {
		r.errs = append(r.errs, fmt.Errorf("%s: Secret %s/%s has no key %q", what, r.namespace, name, key))
		return ""
	}
	r.secrets = append(r.secrets, string(v))
	return string(v)
}

// minIdentifier is the shortest identifier read from a Secret (a Basic
// username, an OAuth2 client id) that is scrubbed. An identifier grants
// nothing without the password or secret that goes with it, which is
// always scrubbed; a short one is often a word ("api", "admin", "deploy")
// that shows in every answer, where scrubbing it would garble ids, paths
// and messages. Longer ones are usually generated (account and client
// ids), and those a tenant need not read.
const minIdentifier = 8

// identifier reads an identifier, remembered as a secret only from
// minIdentifier bytes on.
func (r *secretReader) identifier(what, name, key string) string {
	n := len(r.secrets)
	v := r.get(what, name, key)
	if len(v) < minIdentifier {
		r.secrets = r.secrets[:n]
	}
	return v
}

// credentials resolves a tool's headers, auth and TLS.
func (c *Connector) credentials(ctx context.Context, tool v1.GenericTool) (credentials, error) {
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
		values[sv.Name] = r.get("secretValues "+sv.Name, sv.SecretKeyRef.Name, sv.SecretKeyRef.Key)
	}
	transport, err := c.transport(r, spec.TLS)
	if err != nil {
		r.errs = append(r.errs, err)
	}
	if a := spec.Auth; a != nil && len(r.errs) == 0 {
		c.authorize(r, tool, a, transport, h)
		if len(r.errs) == 0 {
			// The whole header value too, and so its encodings: a tool
			// that echoes "Basic dXNlcjpwYXNz" names no part of it as it
			// was read. (With a credential missing, it is a bare scheme,
			// a word that the error names.)
			r.secrets = append(r.secrets, h.Get("Authorization"))
		}
	}
	cr := credentials{headers: h, transport: transport, values: values, secrets: r.secrets}
	if err := errors.Join(r.errs...); err != nil {
		// What a token endpoint answered may echo a secret.
		return credentials{}, errors.New(newScrubber(r.secrets).string(err.Error()))
	}
	return cr, nil
}

// authorize sets the Authorization header.
func (c *Connector) authorize(r *secretReader, tool v1.GenericTool, a *v1.HTTPAuth,
	transport nethttp.RoundTripper, h nethttp.Header) {
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
			return
		}
		ts := c.tokens.source(tool, o, id, secret, transport)
		tok, err := ts.Token()
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("auth.oauth2: getting a token from %s: %w", o.TokenURL, err))
			return
		}
		r.secrets = append(r.secrets, tok.AccessToken)
		tok.SetAuthHeader(&nethttp.Request{Header: h})
	}
}

// tokens keeps a token source per tool and credentials, so that a token
// is reused until shortly before it expires.
type tokens struct {
	mu      sync.Mutex
	sources map[string]oauth2.TokenSource
}

// maxTokenSources bounds the token sources kept; past it they are dropped
// and made again.
const maxTokenSources = 1024

func (t *tokens) source(tool v1.GenericTool, o *v1.OAuth2ClientCredentials, id, secret string,
	transport nethttp.RoundTripper) oauth2.TokenSource {
	sum := sha256.Sum256([]byte(strings.Join(append([]string{string(tool.Kind()), tool.GetNamespace(),
		tool.GetName(), o.TokenURL, id, secret}, o.Scopes...), "\x00")))
	key := hex.EncodeToString(sum[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	if ts, ok := t.sources[key]; ok {
		return ts
	}
	if t.sources == nil || len(t.sources) >= maxTokenSources {
		t.sources = map[string]oauth2.TokenSource{}
	}
	cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: o.TokenURL, Scopes: o.Scopes}
	// The token request goes through the tool's transport: the same
	// egress policy, the same TLS.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, &nethttp.Client{Transport: transport})
	ts := cc.TokenSource(ctx)
	t.sources[key] = ts
	return ts
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
		if pem := r.get("tls.caSecretName", t.CASecretName, "ca.crt"); pem != "" && !pool.AppendCertsFromPEM([]byte(pem)) {
			return nil, fmt.Errorf("tls: Secret %s/%s key ca.crt holds no PEM certificate", r.namespace, t.CASecretName)
		}
		cfg.RootCAs = pool
	}
	if name := t.ClientCertificateSecretName; name != "" {
		crt := r.get("tls.clientCertificateSecretName", name, corev1.TLSCertKey)
		key := r.get("tls.clientCertificateSecretName", name, corev1.TLSPrivateKeyKey)
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
