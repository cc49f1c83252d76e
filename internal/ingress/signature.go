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

package ingress

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A route that names a signing secret takes only messages its sender
// signed, as the Standard Webhooks specification (standardwebhooks.com)
// says. The message carries the webhook-id, webhook-timestamp and
// webhook-signature headers. The signature is an HMAC-SHA256, with the
// secret, of the id, the timestamp and the body joined by dots. The id is
// the message's id. It is signed, so nobody without the secret can name a
// message, take an id the sender will use, or learn the outcome of one it
// sent. A signed message is taken
// within Tolerance of its timestamp; a delivery captured and posted again
// within it names the same operation, and makes no second effect.

// Headers of a signed message.
const (
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// DefaultSignatureTolerance is how far a signed message's timestamp may be
// from the gateway's clock, either way, by default: the specification's
// five minutes.
const DefaultSignatureTolerance = 5 * time.Minute

// secretPrefix starts a Standard Webhooks secret: the key follows in
// base64.
const secretPrefix = "whsec_"

// Signing is how a route authenticates the messages posted to it.
type Signing struct {
	// SecretFile holds the route's signing secret: "whsec_" and the key in
	// base64, as Standard Webhooks senders give it, or else the key itself
	// (surrounding white space is ignored). Mount a Secret there. It is
	// read when the gateway starts.
	SecretFile string `json:"secretFile"`
	// Tolerance is how far a message's timestamp may be from now, either
	// way: DefaultSignatureTolerance if unset.
	Tolerance *metav1.Duration `json:"tolerance,omitempty"`

	key []byte
}

// load reads the signing secret.
func (s *Signing) load() error {
	if s.SecretFile == "" {
		return errors.New("signing.secretFile is required")
	}
	if s.Tolerance != nil && s.Tolerance.Duration <= 0 {
		return errors.New("signing.tolerance must be positive")
	}
	b, err := os.ReadFile(s.SecretFile)
	if err != nil {
		return fmt.Errorf("reading signing.secretFile: %w", err)
	}
	secret := strings.TrimSpace(string(b))
	if rest, ok := strings.CutPrefix(secret, secretPrefix); ok {
		key, err := base64.StdEncoding.DecodeString(rest)
		if err != nil {
			return fmt.Errorf("signing.secretFile %s: the key after %q is not base64", s.SecretFile, secretPrefix)
		}
		secret = string(key)
	}
	if len(secret) < 16 {
		return fmt.Errorf("signing.secretFile %s: the key is shorter than 16 bytes", s.SecretFile)
	}
	s.key = []byte(secret)
	return nil
}

// tolerance is Tolerance or its default.
func (s *Signing) tolerance() time.Duration {
	if s.Tolerance != nil {
		return s.Tolerance.Duration
	}
	return DefaultSignatureTolerance
}

// errUnsigned is a message a signed route cannot take; its text says what
// is missing or wrong, never what the signature should have been.
type errUnsigned struct{ msg string }

func (e errUnsigned) Error() string { return e.msg }

// verify checks a message's signature and timestamp, and returns its
// signed id.
func (s *Signing) verify(h http.Header, body []byte, now time.Time) (string, error) {
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return "", errUnsigned{fmt.Sprintf("this route takes signed messages only: %s, %s and %s are required",
			HeaderWebhookID, HeaderWebhookTimestamp, HeaderWebhookSignature)}
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", errUnsigned{HeaderWebhookTimestamp + " must be the seconds since the Unix epoch"}
	}
	if d := now.Sub(time.Unix(secs, 0)).Abs(); d > s.tolerance() {
		return "", errUnsigned{fmt.Sprintf("the message's timestamp is more than %s from the gateway's clock", s.tolerance())}
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for sig := range strings.FieldsSeq(sigs) {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err == nil && hmac.Equal(got, want) {
			return id, nil
		}
	}
	return "", errUnsigned{"the message's signature does not match the route's secret"}
}

// Sign returns the headers that sign a message for a route with key, as a
// Standard Webhooks sender does: for tests and tools that post to a signed
// route.
func Sign(key []byte, id string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	h := http.Header{}
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, ts)
	h.Set(HeaderWebhookSignature, "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}
