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

// Package sender delivers the outbox's announcements as CloudEvents over
// HTTP, in binary content mode, with the CloudEvents SDK for Go
// (github.com/cloudevents/sdk-go/v2): the SDK writes the ce-* headers and
// validates the event, so the wire format is the specification's and not
// Once's reading of it.
package sender

import (
	"context"
	"errors"
	"fmt"
	nethttp "net/http"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	ceclient "github.com/cloudevents/sdk-go/v2/client"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	httpeffects "github.com/once-dev/once/internal/effects/http"
	"github.com/once-dev/once/internal/outbox"
)

// Sender posts events to subscribers through one transport.
type Sender struct {
	client cloudevents.Client
	egress *httpeffects.Egress
}

// New is a Sender whose requests go through rt: the manager passes the
// effect transport, so subscribers are dialled under the same egress
// policy as tools (no proxy, the address dialled checked). egress checks a
// subscriber's URL before any dial; nil applies the built-in refusals.
func New(rt nethttp.RoundTripper, egress *httpeffects.Egress) (*Sender, error) {
	p, err := cehttp.New(cehttp.WithClient(nethttp.Client{Transport: rt,
		// A redirect is an answer, never followed: the check must see
		// every address the event goes to.
		CheckRedirect: func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse },
	}))
	if err != nil {
		return nil, fmt.Errorf("creating the CloudEvents HTTP protocol: %w", err)
	}
	c, err := cloudevents.NewClient(p, ceclient.WithForceBinary())
	if err != nil {
		return nil, fmt.Errorf("creating the CloudEvents client: %w", err)
	}
	return &Sender{client: c, egress: egress}, nil
}

// Send delivers e to url once and says what came of it. ctx bounds the
// delivery.
func (s *Sender) Send(ctx context.Context, url string, e outbox.Event) outbox.Answer {
	if err := s.egress.CheckURL(url); err != nil {
		return outbox.Answer{Refused: true, Message: "Delivery never left: " + err.Error()}
	}
	ev := cloudevents.NewEvent()
	ev.SetID(e.ID)
	ev.SetType(e.Type)
	ev.SetSource(e.Source)
	ev.SetSubject(e.Subject)
	if !e.Time.IsZero() {
		ev.SetTime(e.Time)
	}
	if err := ev.SetData(cloudevents.ApplicationJSON, e.Data); err != nil {
		return outbox.Answer{Refused: true, Message: fmt.Sprintf("event cannot be encoded: %v", err)}
	}
	res := s.client.Send(cloudevents.ContextWithTarget(ctx, url), ev)
	var hr *cehttp.Result
	switch {
	case errors.Is(res, httpeffects.ErrEgressRefused):
		return outbox.Answer{Refused: true, Message: "Delivery never left: " + res.Error()}
	case cloudevents.ResultAs(res, &hr):
		a := outbox.Answer{HTTPStatus: int32(hr.StatusCode)}
		if a.Acknowledged() {
			a.Message = fmt.Sprintf("Delivered (HTTP %d)", hr.StatusCode)
		} else {
			a.Message = fmt.Sprintf("Subscriber answered HTTP %d", hr.StatusCode)
		}
		return a
	case cloudevents.IsACK(res):
		return outbox.Answer{HTTPStatus: nethttp.StatusOK, Message: "Delivered"}
	default:
		return outbox.Answer{Message: fmt.Sprintf("No answer: %v", res)}
	}
}
