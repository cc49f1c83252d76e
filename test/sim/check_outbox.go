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

package sim

// The outbox: announcements and their deliveries.
//
// I15: the outbox announces each effect under one id, whatever object
// carries it, at least once. Each delivery is checked as the subscriber
// receives it (checkAnnouncement). Once a run settles, every announcement
// a status holds, or ever held, was received, unless the relay gave it up
// or its namespace went (checkDelivered, checkAnnounced).

import (
	"slices"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// checkAnnouncement runs when the subscriber receives an announcement: an
// effect already announced under another id is announced twice.
func (w *World) checkAnnouncement(d Delivery) {
	if d.ExternalObjectID == "" {
		return
	}
	for _, o := range w.deliveries {
		if o.ExternalObjectID == d.ExternalObjectID && o.State == d.State && o.ID != d.ID {
			w.fail(InvOneAnnouncement, d.ExternalObjectID, "%s announced as %s (by %s) and as %s (by %s)",
				d.State, o.ID, o.Name, d.ID, d.Name)
			return
		}
	}
}

// checkDelivered runs once everything has settled: every announcement a
// status says was delivered reached the subscriber, and none is pending.
func (w *World) checkDelivered() {
	received := map[string]bool{}
	for _, d := range w.deliveries {
		received[d.ID] = true
	}
	for _, kind := range []string{kindOperation, kindSaga} {
		for _, o := range w.server.peek(kind) {
			var entries []v1.OutboxEntry
			switch x := o.(type) {
			case *v1.SideEffectOperation:
				entries = x.Status.Outbox
			case *v1.Saga:
				entries = x.Status.Outbox
			}
			for _, e := range entries {
				switch {
				case e.State == v1.DeliveryPending:
					w.fail(InvOneAnnouncement, o.GetName(), "announcement %s still pending after the faults stopped", e.EventID)
				case e.State == v1.DeliveryDelivered && !received[e.EventID]:
					w.fail(InvOneAnnouncement, o.GetName(), "announcement %s recorded as delivered, never received", e.EventID)
				}
			}
		}
	}
}

// checkAnnounced is I15 after the objects are gone: every announcement an
// object held was delivered, or given up by the relay, whether or not
// the object still exists. A namespace a person deleted took its
// subscribers' sink with it (the sink is a Tool of that namespace).
func (w *World) checkAnnounced() {
	received := map[string]bool{}
	for _, d := range w.deliveries {
		received[d.ID] = true
	}
	ids := make([]string, 0, len(w.history.announced))
	for id := range w.history.announced {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		a := w.history.announced[id]
		if received[id] || a.state == v1.DeliveryFailed || w.wiped[a.namespace] {
			continue
		}
		w.fail(InvOneAnnouncement, a.object, "announcement %s was last stored %s, and never received", id, a.state)
	}
}
