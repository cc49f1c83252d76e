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

package once_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/pkg/once"
)

// The name of an operation follows from its tool, operation and key, so a
// retry finds the object the first try made.
func ExampleObjectName() {
	fmt.Println(once.ObjectName(v1.ToolReference{Name: "payments"}, "charge.create", "order-4711"))
	// Output: payments-charge-create-0ed994e7948e3d3f985b
}

// Charge an order once: however often this runs for order 4711 (a retry
// after a timeout, a second replica, a restart), the card is charged at
// most once, and every run gets the same answer. test/e2e/client_test.go
// runs this code against a real API server, manager and tool.
func ExampleClient_Do() {
	var kube client.Client // a controller-runtime client, e.g. client.New(ctrl.GetConfigOrDie(), ...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := once.New(kube).Do(ctx, once.Request{
		Namespace:  "shop",
		Tool:       v1.ToolReference{Name: "payments"},
		Operation:  "charge.create",
		Key:        "order-4711",
		Parameters: json.RawMessage(`{"amount": 4200, "currency": "eur"}`),
	})
	var (
		mismatch *once.MismatchError
		failed   *once.FailedError
		review   *once.NeedsReviewError
		pending  *once.PendingError
	)
	switch {
	case err == nil:
		fmt.Println("charged", res.ExternalObjectID, "replayed:", res.Found)
	case errors.As(err, &mismatch):
		fmt.Println("order-4711 was charged with other parameters; nothing was done:", mismatch.Message)
	case errors.As(err, &failed):
		fmt.Println("refused for good, no charge:", failed.Message)
	case errors.As(err, &review):
		fmt.Println("a person decides; ask again later with the same key:", review.Name)
	case errors.As(err, &pending):
		fmt.Println("still running; ask again later with the same key:", pending.Name)
	default:
		fmt.Println("could not ask:", err)
	}
}
