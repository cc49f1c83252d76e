//go:build e2e

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

package e2e

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// testCA is a certificate authority of the suite's own: it signs the
// certificates of the OIDC issuer and of the gateways that serve HTTPS.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is its certificate, as the API server, Go and Node.js clients
	// are told to trust it.
	PEM []byte
	// File holds PEM.
	File string
}

func newTestCA(dir string) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "once e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &testCA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		File: filepath.Join(dir, "ca.crt")}
	return ca, os.WriteFile(ca.File, ca.PEM, 0o600)
}

var serials atomic.Int64

// issue makes a serving certificate for 127.0.0.1 and localhost, and
// writes it and its key to dir/name.crt and dir/name.key.
func (ca *testCA) issue(dir, name string) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(100 + serials.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
}

// client is an HTTP client that trusts the CA.
func (ca *testCA) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: t, Timeout: time.Minute}
}

// gatewayAudience is the audience the suite's gateways take tokens for
// (their default), and the one the API server accepts the issuer's tokens
// for.
const gatewayAudience = "once-mcp"

// oidcIssuer is the small OIDC issuer the suite runs, which the control
// plane's API server trusts (--authentication-config): discovery
// documents, a JWKS, and a token endpoint for the client_credentials grant
// of the clients registered with it. It stands for a company's identity
// provider (Dex, Keycloak, Entra ID) that hands machine clients tokens for
// the gateway's audience.
type oidcIssuer struct {
	URL string
	key *rsa.PrivateKey
	kid string
	srv *httptest.Server

	mu      sync.Mutex
	clients map[string]string // client id -> secret
	// Issued counts the tokens the token endpoint gave out.
	Issued atomic.Int64
	// resources are the resource parameters (RFC 8707) of the token
	// requests, which this issuer records and ignores.
	resources []string
}

// startIssuer starts the issuer on a free loopback port, serving HTTPS
// with a certificate of ca.
func startIssuer(ca *testCA, dir string) (*oidcIssuer, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	certFile, keyFile, err := ca.issue(dir, "issuer")
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	is := &oidcIssuer{key: key, kid: "e2e-1", clients: map[string]string{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.discovery)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", is.discovery)
	mux.HandleFunc("GET /jwks", is.jwks)
	mux.HandleFunc("POST /token", is.token)
	is.srv = httptest.NewUnstartedServer(mux)
	is.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	is.srv.StartTLS()
	is.URL = is.srv.URL
	return is, nil
}

func (is *oidcIssuer) Close() { is.srv.Close() }

// register lets a client get tokens with its id and secret.
func (is *oidcIssuer) register(id, secret string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.clients[id] = secret
}

// resourcesAsked returns the resource parameters of the token requests
// since it was last called, and forgets them.
func (is *oidcIssuer) resourcesAsked() []string {
	is.mu.Lock()
	defer is.mu.Unlock()
	r := is.resources
	is.resources = nil
	return r
}

func (is *oidcIssuer) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer": is.URL, "jwks_uri": is.URL + "/jwks", "token_endpoint": is.URL + "/token",
		"authorization_endpoint": is.URL + "/authorize", "response_types_supported": []string{"code"},
		"grant_types_supported":                 []string{"client_credentials"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
	})
}

func (is *oidcIssuer) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := is.key.PublicKey
	writeJSON(w, map[string]any{"keys": []any{map[string]any{
		"kty": "RSA", "alg": "RS256", "use": "sig", "kid": is.kid,
		"n": base64.RawURLEncoding.EncodeToString(pub.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// token answers the client_credentials grant of a registered client
// (secret in Basic auth or in the form) with a token for the gateway's
// audience whose subject is the client, whatever resource (RFC 8707) the
// request names, as an issuer does that has no resource indicators (or
// maps every resource to one audience).
func (is *oidcIssuer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "client_credentials" {
		w.WriteHeader(http.StatusBadRequest)
		writeJSON(w, map[string]string{"error": "unsupported_grant_type"})
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	is.mu.Lock()
	want, known := is.clients[id]
	is.mu.Unlock()
	if !known || secret != want {
		w.WriteHeader(http.StatusUnauthorized)
		writeJSON(w, map[string]string{"error": "invalid_client"})
		return
	}
	is.mu.Lock()
	is.resources = append(is.resources, r.PostForm["resource"]...)
	is.mu.Unlock()
	is.Issued.Add(1)
	tok := is.mint(id, gatewayAudience, 10*time.Minute)
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 600})
}

// mint signs a token for subject and audience that expires after ttl
// (negative: already expired).
func (is *oidcIssuer) mint(subject, audience string, ttl time.Duration) string {
	now := time.Now()
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": is.kid})
	payload, _ := json.Marshal(map[string]any{
		"iss": is.URL, "sub": subject, "aud": []string{audience}, "iat": now.Add(-time.Minute).Unix(),
		"nbf": now.Add(-time.Minute).Unix(), "exp": now.Add(ttl).Unix(), "jti": fmt.Sprintf("%d", now.UnixNano()),
	})
	signed := base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(payload)
	digest := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, is.key, crypto.SHA256, digest[:])
	Expect(err).NotTo(HaveOccurred())
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// oidcUserPrefix prefixes the API server's names of the issuer's subjects.
const oidcUserPrefix = "oidc:"

// authenticationConfig writes the API server's AuthenticationConfiguration:
// it trusts the issuer's tokens for the gateway's audience, and names
// their subjects oidc:<sub>.
func (is *oidcIssuer) authenticationConfig(ca *testCA, dir string) (string, error) {
	indented := "      " + strings.ReplaceAll(strings.TrimSpace(string(ca.PEM)), "\n", "\n      ")
	cfg := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: AuthenticationConfiguration
jwt:
- issuer:
    url: %s
    audiences: [%s]
    certificateAuthority: |
%s
  claimMappings:
    username:
      claim: sub
      prefix: %q
`, is.URL, gatewayAudience, indented, oidcUserPrefix)
	path := filepath.Join(dir, "authentication-config.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

var (
	gatewayKubeconfigOnce sync.Once
	gatewayKubeconfigPath string
)

// gatewayKubeconfig is a kubeconfig of the ServiceAccount
// once-system/once-mcp-gateway with the rights of config/mcp-gateway, as a
// deployed gateway has, made on first use.
func gatewayKubeconfig() string {
	gatewayKubeconfigOnce.Do(func() {
		kubectl("", "apply", "-k", filepath.Join(root, "config", "mcp-gateway"))
		token := strings.TrimSpace(kubectl("", "create", "token", "once-mcp-gateway", "-n", "once-system",
			"--duration=6h"))
		admin, err := clientcmd.LoadFromFile(cp.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		ctx := admin.Contexts[admin.CurrentContext]
		Expect(ctx).NotTo(BeNil())
		cfg := clientcmdapi.NewConfig()
		cfg.Clusters["e2e"] = admin.Clusters[ctx.Cluster]
		cfg.AuthInfos["gateway"] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts["gateway"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "gateway", Namespace: "default"}
		cfg.CurrentContext = "gateway"
		gatewayKubeconfigPath = filepath.Join(workDir, "gateway.kubeconfig")
		Expect(clientcmd.WriteToFile(*cfg, gatewayKubeconfigPath)).To(Succeed())
	})
	return gatewayKubeconfigPath
}
