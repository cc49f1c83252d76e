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
	"errors"
	"net/http"
	"strings"

	"github.com/once-dev/once/internal/ingress"
)

// IngressPath is where the gateway serves the ingress: POST
// /ingress/<route>.
const IngressPath = "/ingress/"

// MountIngress serves the ingress of messages at IngressPath. A sender
// authenticates with a bearer token meant for the gateway's audience, as an
// MCP caller does. A token the API server accepts for itself alone is
// refused, so that no pod's own token, nor one meant for another service,
// posts here. The gateway reviews it as it does an MCP caller's. It makes
// the operation as the sender by impersonation. So RBAC decides which
// routes' namespaces the sender may post to.
func (g *Gateway) MountIngress(routes map[string]ingress.Route) error {
	if err := (&ingress.Handler{Routes: routes}).Validate(); err != nil {
		return err
	}
	g.Handle(IngressPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearer(r.Header)
		if token == "" {
			refuse(w, r, http.StatusUnauthorized, errUnauthenticated.Error())
			return
		}
		c, _, err := g.auth.authenticate(r.Context(), clientOf(r), token)
		switch {
		case errors.Is(err, errInvalidToken):
			refuse(w, r, http.StatusUnauthorized, "the token is not valid for this gateway: it is unknown, expired or "+
				"revoked, or meant for another audience (give the sender a token for "+g.cfg.Audience+")")
			return
		case errors.Is(err, errBusy):
			busy(w, r)
			refuse(w, r, http.StatusServiceUnavailable, "the gateway cannot check tokens now; try again later")
			return
		case err != nil:
			g.cfg.Logger.Error("checking a sender's token", "error", err)
			refuse(w, r, http.StatusServiceUnavailable, "the gateway cannot check tokens now; try again later")
			return
		}
		h := &ingress.Handler{Client: c.kube, Routes: routes}
		http.StripPrefix(strings.TrimSuffix(IngressPath, "/"), h).ServeHTTP(w, r)
	}))
	return nil
}

// refuse answers a sender the gateway could not authenticate, in the
// ingress's own shape, without reading the message.
func refuse(w http.ResponseWriter, r *http.Request, status int, msg string) {
	unread(w, r)
	code := ingress.CodeUnauthenticated
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="once-ingress"`)
	} else {
		code = ingress.CodeUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(ingress.Answer{Error: code, Message: msg})
}
