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
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/once-dev/once/internal/worstcase"
)

// TestWorstCases: what a sender writes costs the gateway at its bound,
// measured: a body of 256 KiB of the smallest values, read, signed and
// parsed, then refused for its size; and a signature header of many
// candidates. docs/threat-model.md's table of bounds quotes the figures.
func TestWorstCases(t *testing.T) {
	body := []byte(`{"a":[` + strings.Repeat("0,", (MaxBodyBytes-16)/2) + `0]}`)
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_700_000_000, 0)
	signing := &Signing{key: key}
	h := Sign(key, "msg-1", now, body)
	// Headers are bounded at 64 KiB by the gateway's server: fill them
	// with wrong signatures before the right one.
	h.Set(HeaderWebhookSignature, strings.Repeat("v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= ", 60<<10/48)+
		h.Get(HeaderWebhookSignature))
	var status int
	var err error
	worstcase.Within(t, "a signed body of 256 KiB of small values", 48<<20, func() {
		r := httptest.NewRequest(http.MethodPost, "/orders", bytes.NewReader(body))
		r.Header = h.Clone()
		r.Header.Set("Content-Type", "application/json")
		var got []byte
		if got, status, err = readBody(r); err != nil {
			return
		}
		var id string
		if id, err = signing.verify(r.Header, got, now); err != nil {
			return
		}
		r.Header.Set(HeaderMessageID, id)
		_, status, err = parse(r, got, true)
	})
	if status != http.StatusRequestEntityTooLarge || err == nil {
		t.Errorf("data of 256 KiB must be refused with 413 after their signature is checked: %d %v", status, err)
	}
}
