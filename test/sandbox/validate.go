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
	"context"
	"fmt"
	"net/http"
)

// validAnswer is the body of a dry run that a create would pass.
type validAnswer struct {
	Valid bool `json:"valid"`
}

// handleValidate serves POST /{mode}/{collection}/validate, a dry run of a
// create in the collection: it answers what the create would, as far as
// the body decides it, with no effect and nothing in the ledger. Faults
// apply to it as to a create; those that strike after the commit strike
// after the dry run, which committed nothing.
func (s *Server) handleValidate(w http.ResponseWriter, r *http.Request) {
	s.serveEffect(w, r, ActionValidate)
}

// dryRun judges req as a create would, committing nothing. The delays of a
// slow tool delay the answer, but only while the client waits: a dry run
// has nothing to finish once its client has gone.
func (s *Server) dryRun(ctx context.Context, req effectRequest, f *fault) outcome {
	sleepContext(ctx, f.holdDelay()+f.beforeCommitDelay())
	if f.existingOnly() && req.key != "" {
		s.mu.Lock()
		_, exists := s.state.lookup(req.mode, req.collection, req.key)
		s.mu.Unlock()
		if exists {
			return alreadyExists(req.key)
		}
	}
	if req.reject != "" {
		return jsonOutcome(http.StatusUnprocessableEntity, errorBody{Error: CodeRejected, Reason: req.reject,
			Message: fmt.Sprintf("the create would be rejected: %s", req.reject)})
	}
	return jsonOutcome(http.StatusOK, validAnswer{Valid: true})
}
