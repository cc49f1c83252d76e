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

package mcpgateway

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/once-dev/once/internal/ingress"
)

// IngressPath is where the gateway serves the ingress: POST
// /ingress/<route>.
const IngressPath = "/ingress/"

// MountIngress serves the ingress of messages at IngressPath. A sender
// authenticates as an MCP caller does, with its own Kubernetes bearer
// token, and the operation is created as that sender: RBAC decides which
// routes' namespaces it may post to, and the gateway needs no rights of its
// own.
func (g *Gateway) MountIngress(routes map[string]ingress.Route) error {
	if err := (&ingress.Handler{Routes: routes}).Validate(); err != nil {
		return err
	}
	g.Handle(IngressPath, requireBearer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := g.callers.forToken(r.Context(), bearer(r.Header))
		if err != nil {
			refuse(w, http.StatusUnauthorized, err.Error())
			return
		}
		h := &ingress.Handler{Client: c.kube, Routes: routes}
		http.StripPrefix(strings.TrimSuffix(IngressPath, "/"), h).ServeHTTP(w, r)
	})))
	return nil
}

// refuse answers a sender the gateway could not authenticate, in the
// ingress's own shape.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ingress.Answer{Error: "Unauthenticated", Message: msg})
}
