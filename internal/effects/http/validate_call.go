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

package http

import (
	"context"

	"github.com/once-dev/once/internal/effects"
)

// Validate asks the tool whether it would accept req, with no effect.
func (c *Client) Validate(_ context.Context, _ effects.Request) effects.ValidateResult {
	// The HTTP mapping of spec.operations[].validate lands with its tests.
	return effects.ValidateResult{Verdict: effects.ValidateNotOffered}
}
