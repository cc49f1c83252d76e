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

// Package cloudevent writes the outbox's announcements as CloudEvents in
// HTTP binary content mode, with the CloudEvents SDK for Go
// (github.com/cloudevents/sdk-go/v2). The SDK writes the ce-* headers and
// validates the event. So the wire format is the specification's and not
// Once's reading of it. The request itself is the sink tool's: the relay
// sends these headers and this body through the tool's client.
package cloudevent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	nethttp "net/http"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/once-dev/once/internal/outbox"
)

// Binary is e in binary content mode: its attributes as HTTP headers
// (ce-id, ce-type, ce-source, ce-subject, ce-time, ce-specversion and
// Content-Type) and its data as the body.
func Binary(e outbox.Event) (headers map[string]string, body []byte, err error) {
	ev := cloudevents.NewEvent()
	ev.SetID(e.ID)
	ev.SetType(e.Type)
	ev.SetSource(e.Source)
	ev.SetSubject(e.Subject)
	if !e.Time.IsZero() {
		ev.SetTime(e.Time)
	}
	if err := ev.SetData(cloudevents.ApplicationJSON, e.Data); err != nil {
		return nil, nil, fmt.Errorf("the event's data cannot be encoded: %w", err)
	}
	if err := ev.Validate(); err != nil {
		return nil, nil, fmt.Errorf("the event is not a valid CloudEvent: %w", err)
	}
	// The SDK writes onto a request; only its headers and body are kept.
	req, err := nethttp.NewRequest(nethttp.MethodPost, "http://cloudevent.invalid/", nil)
	if err != nil {
		return nil, nil, err
	}
	if err := cehttp.WriteRequest(binding.WithForceBinary(context.Background()), binding.ToMessage(&ev), req); err != nil {
		return nil, nil, fmt.Errorf("writing the event: %w", err)
	}
	if req.Body != nil {
		var buf bytes.Buffer
		if _, err := io.Copy(&buf, req.Body); err != nil {
			return nil, nil, fmt.Errorf("reading the written event: %w", err)
		}
		body = buf.Bytes()
	}
	headers = make(map[string]string, len(req.Header))
	for name := range req.Header {
		headers[name] = req.Header.Get(name)
	}
	return headers, body, nil
}
