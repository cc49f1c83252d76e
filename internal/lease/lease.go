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

// Package lease holds what Once's per-manager Leases have in common. The
// sharder's membership (internal/shard) and the presence the plugin reads
// (internal/presence) are each one coordination.k8s.io Lease per manager
// process. Each is named after its holder and renewed every period. It is
// deleted when the manager stops, and collected by the others once long
// expired.
package lease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Name is the name of a manager's Lease: prefix and its holder identity,
// or prefix and the identity's digest when that does not make a valid name.
func Name(prefix, holder string) string {
	name := prefix + holder
	if len(validation.IsDNS1123Subdomain(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(holder))
	return prefix + hex.EncodeToString(sum[:8])
}

// Alive reports whether l is held and was renewed within its duration at
// now.
func Alive(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" || l.Spec.RenewTime == nil ||
		l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// DeleteDeparted deletes the Lease of a manager gone for a while,
// conditionally on the version listed: a manager that came back has
// renewed it, and keeps it. Gone already or renewed is no error.
func DeleteDeparted(ctx context.Context, c client.Client, l *coordinationv1.Lease) error {
	rv := l.ResourceVersion
	err := c.Delete(ctx, l, client.Preconditions{ResourceVersion: &rv})
	if apierrors.IsConflict(err) {
		return nil
	}
	return client.IgnoreNotFound(err)
}

// Keep runs tick at once and then every period until ctx ends, and then
// leave, with a context that is not cancelled: a manager's Lease is renewed
// while it runs and let go when it stops.
func Keep(ctx context.Context, clk clock.WithTicker, period time.Duration, tick, leave func(context.Context)) {
	t := clk.NewTicker(period)
	defer t.Stop()
	for {
		tick(ctx)
		select {
		case <-ctx.Done():
			leave(context.WithoutCancel(ctx))
			return
		case <-t.C():
		}
	}
}

// Own is a manager's own Lease as it writes it.
type Own struct {
	Namespace, Name, Holder string
	// Seconds is the Lease's duration.
	Seconds int32
	// Labels and Annotations are set on the Lease, over what it has.
	Labels, Annotations map[string]string
}

// Renew creates the Lease (listed, the Lease as listed, is nil) or renews
// it, conditionally on the version listed, and returns it as written.
func (o Own) Renew(ctx context.Context, c client.Client, listed *coordinationv1.Lease,
	now time.Time) (*coordinationv1.Lease, error) {
	t := metav1.NewMicroTime(now)
	if listed == nil {
		l := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, Labels: maps.Clone(o.Labels),
				Annotations: maps.Clone(o.Annotations)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &o.Holder, LeaseDurationSeconds: &o.Seconds,
				AcquireTime: &t, RenewTime: &t},
		}
		return l, c.Create(ctx, l)
	}
	l := listed.DeepCopy()
	if len(o.Labels) > 0 && l.Labels == nil {
		l.Labels = map[string]string{}
	}
	maps.Copy(l.Labels, o.Labels)
	if len(o.Annotations) > 0 && l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	maps.Copy(l.Annotations, o.Annotations)
	l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &o.Holder, &t, &o.Seconds
	return l, c.Update(ctx, l)
}
