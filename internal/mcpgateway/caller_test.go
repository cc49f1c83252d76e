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
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

// getError is a client whose every Get answers err; it serves nothing
// else.
type getError struct {
	client.Client
	err error
}

func (g getError) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return g.err
}

func TestOperationExists(t *testing.T) {
	ops := schema.GroupResource{Group: v1.GroupVersion.Group, Resource: "sideeffectoperations"}
	type answer struct {
		Found bool
		// Code is the tool error the call answers, if it cannot go on.
		Code string
	}
	cases := map[string]struct {
		reason string
		err    error
		want   answer
		// text is in the tool error; notText is not.
		text, notText string
	}{
		"Found":    {reason: "the operation exists: a retry", want: answer{Found: true}},
		"NotFound": {reason: "no operation yet: the tool is checked first", err: apierrors.NewNotFound(ops, "op")},
		"Forbidden": {reason: "a caller that may not read operations cannot be told the key is free",
			err:  apierrors.NewForbidden(ops, "op", errors.New("RBAC: access denied")),
			want: answer{Code: codeForbidden}, text: "may not get sideeffectoperations.effects.once.dev in namespace ns",
			notText: "still free"},
		"Unavailable": {reason: "an API server that does not answer says nothing of the key",
			err: apierrors.NewServiceUnavailable("etcd is down"), want: answer{Code: codeAPI}, text: "reading operation ns/op"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &caller{user: "alice", kube: getError{err: tc.err}}
			found, err := c.operationExists(context.Background(), "ns", "op")
			got := answer{Found: found}
			text := ""
			if err != nil {
				a := errorAnswer(err)
				got.Code, _ = a.StructuredContent.(map[string]any)["error"].(string)
				text = a.Content[0].(*mcp.TextContent).Text
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\n-want, +got:\n%s", tc.reason, diff)
			}
			if !strings.Contains(text, tc.text) || (tc.notText != "" && strings.Contains(text, tc.notText)) {
				t.Errorf("%s\ntext %q, want it to contain %q and not %q", tc.reason, text, tc.text, tc.notText)
			}
		})
	}
}
