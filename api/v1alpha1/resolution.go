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

package v1alpha1

import "fmt"

// Attribution names who made the resolution, for messages and events: the
// person the writer claims (by) and, when Once's admission policy set
// a different authenticated user, that user too.
func (r *Resolution) Attribution() string {
	if r.User == "" || r.User == r.By {
		return r.By
	}
	return fmt.Sprintf("%s (authenticated as %s)", r.By, r.User)
}

// Record is what an operation's record keeps of the applied resolution its
// outcome rests on; nil for none.
func (a *AppliedResolution) Record() *RecordResolution {
	if a == nil {
		return nil
	}
	return &RecordResolution{Action: a.Action, By: a.By, User: a.User, Reason: a.Reason, Time: a.Time}
}
