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

package sandbox

import (
	"net/http"
	"strings"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	ceclient "github.com/cloudevents/sdk-go/v2/client"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// deliver sends one CloudEvent to the sink and returns the HTTP status,
// zero when no answer came.
func deliver(t *testing.T, h *harness, sink, id string, structured bool) int {
	t.Helper()
	p, err := cehttp.New(cehttp.WithClient(*h.http))
	if err != nil {
		t.Fatal(err)
	}
	var c cloudevents.Client
	if structured {
		c, err = cloudevents.NewClient(p, ceclient.WithForceStructured())
	} else {
		c, err = cloudevents.NewClient(p, ceclient.WithForceBinary())
	}
	if err != nil {
		t.Fatal(err)
	}
	ev := cloudevents.NewEvent()
	ev.SetID(id)
	ev.SetType("dev.once.operation.committed")
	ev.SetSource("/apis/effects.once.dev/v1alpha1/namespaces/t/sideeffectoperations/op")
	if err := ev.SetData(cloudevents.ApplicationJSON, map[string]string{"state": "Committed"}); err != nil {
		t.Fatal(err)
	}
	res := c.Send(cloudevents.ContextWithTarget(t.Context(), h.ts.URL+"/sink/"+sink), ev)
	var hr *cehttp.Result
	if cloudevents.ResultAs(res, &hr) {
		return hr.StatusCode
	}
	return 0
}

func TestSink(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := t.Context()

	if got := deliver(t, h, "audit", "e1", false); got != http.StatusAccepted {
		t.Errorf("first delivery: want 202, got %d", got)
	}
	if got := deliver(t, h, "audit", "e1", true); got != http.StatusOK {
		t.Errorf("redelivery (structured mode): want 200, got %d", got)
	}
	if err := h.client.SetSinkFaults(ctx, "audit", SinkFaults{Unavailable: 1, DropAnswer: 1}); err != nil {
		t.Fatal(err)
	}
	if got := deliver(t, h, "audit", "e2", false); got != http.StatusServiceUnavailable {
		t.Errorf("unavailable: want 503, got %d", got)
	}
	if got := deliver(t, h, "audit", "e2", false); got != 0 {
		t.Errorf("dropped answer: want no answer, got %d", got)
	}
	if got := deliver(t, h, "audit", "e2", false); got != http.StatusOK {
		t.Errorf("after the dropped answer: want 200 (already consumed), got %d", got)
	}
	resp, err := h.http.Post(h.ts.URL+"/sink/audit", "application/json", strings.NewReader(`{"hello":1}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("not a CloudEvent: want 400, got %d", resp.StatusCode)
	}

	st, err := h.client.Sink(ctx, "audit")
	if err != nil {
		t.Fatal(err)
	}
	if st.Deliveries != 4 || st.Consumed != 2 || st.Unavailable != 1 || st.Dropped != 1 || st.Invalid != 1 {
		t.Errorf("totals: want 4 deliveries, 2 consumed, 1 unavailable, 1 dropped, 1 invalid; got %+v", st)
	}
	if len(st.Events) != 2 || st.Events[0].ID != "e1" || st.Events[0].Deliveries != 2 ||
		st.Events[1].ID != "e2" || st.Events[1].Deliveries != 2 || st.Events[1].Consumed != 1 {
		t.Errorf("events: %+v", st.Events)
	}
	if len(st.Events[0].DataDigests) != 1 || st.Events[0].Type != "dev.once.operation.committed" {
		t.Errorf("binary and structured deliveries of one event differ: %+v", st.Events[0])
	}
	if other, err := h.client.Sink(ctx, "other"); err != nil || other.Deliveries != 0 {
		t.Errorf("sinks are separate: %+v, %v", other, err)
	}
	if err := h.client.ResetSink(ctx, "audit"); err != nil {
		t.Fatal(err)
	}
	if st, err := h.client.Sink(ctx, "audit"); err != nil || st.Deliveries != 0 || len(st.Events) != 0 {
		t.Errorf("after reset: %+v, %v", st, err)
	}
}
