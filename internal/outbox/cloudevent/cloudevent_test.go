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

package cloudevent

import (
	"bytes"
	"encoding/json"
	nethttp "net/http"
	"testing"
	"time"

	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/internal/outbox"
)

// TestBinaryReadsBack: what Binary writes, sent as a request, is read by
// the CloudEvents SDK as a subscriber reads it, in binary content mode,
// with every attribute and the data as they were.
func TestBinaryReadsBack(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	e := outbox.Event{ID: "scope-1/Committed/ch_1/audit", Type: "dev.once.operation.committed",
		Source: "/apis/effects.once.dev/v1alpha1/namespaces/shop/sideeffectoperations/charge-1", Subject: "charge-1",
		Time: at, Data: outbox.Data{Kind: "SideEffectOperation", Namespace: "shop", Name: "charge-1",
			State: v1.StateCommitted, ExternalObjectID: "ch_1"}}
	headers, body, err := Binary(e)
	if err != nil {
		t.Fatalf("Binary: %v", err)
	}
	if got := headers["Ce-Id"]; got != e.ID {
		t.Errorf("ce-id header: got %q, want %q (binary content mode)", got, e.ID)
	}
	req, err := nethttp.NewRequest(nethttp.MethodPost, "http://sink.invalid/", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	got, err := cehttp.NewEventFromHTTPRequest(req)
	if err != nil {
		t.Fatalf("the SDK cannot read the event back: %v", err)
	}
	if got.ID() != e.ID || got.Type() != e.Type || got.Source() != e.Source || got.Subject() != e.Subject ||
		!got.Time().Equal(at) || got.SpecVersion() != "1.0" || got.DataContentType() != "application/json" {
		t.Errorf("attributes read back: %s", got)
	}
	var data outbox.Data
	if err := json.Unmarshal(got.Data(), &data); err != nil {
		t.Fatalf("data: %v", err)
	}
	if data.Name != "charge-1" || data.State != v1.StateCommitted || data.ExternalObjectID != "ch_1" {
		t.Errorf("data read back: %+v", data)
	}
}

// TestBinaryRefusesAnInvalidEvent: an event without an id is no
// CloudEvent, and nothing is written.
func TestBinaryRefusesAnInvalidEvent(t *testing.T) {
	if _, _, err := Binary(outbox.Event{Type: "dev.once.operation.committed", Source: "/x"}); err == nil {
		t.Error("an event without an id was written")
	}
}
