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
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzParse reads any request as a message, as ServeHTTP does after the
// body is read and the signature checked. A message it takes has an id of
// at most MaxIDLength bytes, a signed one the signed id, data that is a
// JSON object, and a name that is a DNS label; reading the request again
// gives the same message. A refusal is a 400 or a 415.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"amount":42}`), "application/json", "", "", "key-1", "", false)
	f.Add([]byte(``), "", "", "", "", "msg-1", true)
	f.Add([]byte(`{"amount":42}`), "application/json", "1.0", "evt-1", "", "evt-1", true)
	f.Add([]byte(`{"specversion":"1.0","id":"e","source":"/s","type":"t","data":{"a":1}}`),
		"application/cloudevents+json", "", "", "", "", false)
	f.Add([]byte(`{"specversion":"1.0","id":"e","source":"/s","type":"t","data_base64":"e30="}`),
		"application/cloudevents+json; charset=utf-8", "", "", "", "", false)
	f.Add([]byte(`[1,2]`), "text/plain", "", "", "k", "", false)
	f.Fuzz(func(t *testing.T, body []byte, contentType, specVersion, ceID, key, messageID string, signed bool) {
		if signed && messageID == "" {
			// ServeHTTP parses a signed message only after verify, which
			// refuses one without an id and sets Message-Id to it.
			return
		}
		r := func() *http.Request {
			r, err := http.NewRequest(http.MethodPost, "http://gateway/orders", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			set := func(name, value string) {
				if value != "" {
					r.Header.Set(name, value)
				}
			}
			set("Content-Type", contentType)
			set("Ce-Specversion", specVersion)
			set("Ce-Id", ceID)
			set("Ce-Source", "/shop")
			set("Ce-Type", "order.placed")
			set(HeaderIdempotencyKey, key)
			set(HeaderMessageID, messageID)
			return r
		}
		m, status, err := parse(r(), body, signed)
		if err != nil {
			if status != http.StatusBadRequest && status != http.StatusUnsupportedMediaType {
				t.Fatalf("refused with status %d: %v", status, err)
			}
			return
		}
		if status != 0 {
			t.Fatalf("taken with status %d", status)
		}
		if m.id == "" || len(m.id) > MaxIDLength {
			t.Fatalf("taken with an id of %d bytes", len(m.id))
		}
		if m.signed != signed || (signed && m.id != messageID) {
			t.Fatalf("signed %t, id %q: taken as signed %t with id %q", signed, messageID, m.signed, m.id)
		}
		var obj map[string]any
		if err := json.Unmarshal(m.params, &obj); err != nil || obj == nil {
			t.Fatalf("taken with data that is no JSON object: %q", m.params)
		}
		if name := m.name("orders"); len(validation.IsDNS1123Label(name)) > 0 {
			t.Fatalf("name %q is no DNS label", name)
		}
		again, _, err := parse(r(), body, signed)
		if err != nil {
			t.Fatalf("taken once, refused again: %v", err)
		}
		if diff := cmp.Diff(m, again, cmp.AllowUnexported(message{})); diff != "" {
			t.Fatalf("read again differently (-first, +again):\n%s", diff)
		}
	})
}

// FuzzVerify signs a message as a sender does and changes one bit of what
// the signature covers, the id, the timestamp or the body, or of the key:
// the message as signed is taken with its id, the changed one never.
func FuzzVerify(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), "msg_1", int64(0), []byte(`{"amount":42}`), uint8(0), uint16(0))
	f.Add([]byte("whsec-key-of-32-bytes-long-00000"), "evt.1", int64(-299), []byte(`{}`), uint8(1), uint16(3))
	f.Add([]byte("0123456789abcdef"), "a", int64(299), []byte(``), uint8(2), uint16(7))
	f.Add([]byte("0123456789abcdef"), "msg_2", int64(60), []byte(`{"a":"b"}`), uint8(3), uint16(100))
	now := time.Unix(1_767_225_600, 0)
	f.Fuzz(func(t *testing.T, key []byte, id string, skew int64, body []byte, part uint8, bit uint16) {
		if len(key) < 16 || id == "" || skew < -299 || skew > 299 {
			return
		}
		s := &Signing{key: key}
		h := Sign(key, id, now.Add(time.Duration(skew)*time.Second), body)
		got, err := s.verify(h, body, now)
		if err != nil || got != id {
			t.Fatalf("a message as signed: id %q, %v", got, err)
		}
		ts := h.Get(HeaderWebhookTimestamp)
		flip := func(b []byte) []byte {
			b = bytes.Clone(b)
			if len(b) > 0 {
				i := int(bit/8) % len(b)
				b[i] ^= 1 << (bit % 8)
			}
			return b
		}
		changed := h.Clone()
		changedBody, what := body, ""
		switch part % 4 {
		case 0:
			what = "id"
			changed.Set(HeaderWebhookID, string(flip([]byte(id))))
		case 1:
			what = "timestamp"
			changed.Set(HeaderWebhookTimestamp, string(flip([]byte(ts))))
		case 2:
			if len(body) == 0 {
				return
			}
			what = "body"
			changedBody = flip(body)
		case 3:
			what = "key"
			s = &Signing{key: flip(key)}
		}
		if _, err := s.verify(changed, changedBody, now); err == nil {
			t.Fatalf("taken with one bit of its %s changed", what)
		}
		// Outside the tolerance, the message as signed is refused.
		late := Sign(key, id, now.Add(DefaultSignatureTolerance+time.Second), body)
		if _, err := (&Signing{key: key}).verify(late, body, now); err == nil {
			t.Fatalf("taken with a timestamp %s off", DefaultSignatureTolerance+time.Second)
		}
		if _, err := strconv.ParseInt(ts, 10, 64); err != nil {
			t.Fatalf("signed with a timestamp that is no number: %q", ts)
		}
	})
}
