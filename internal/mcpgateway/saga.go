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
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v1 "github.com/once-dev/once/api/v1alpha1"
	"github.com/once-dev/once/pkg/once"
)

// SagaToolName is the MCP tool that runs a Saga. It holds no "__", so no
// Tool's operation can take its name.
const SagaToolName = "once.saga.run"

// sagaTool describes the saga tool. Its steps are the Saga's own steps
// (docs/sagas.md); the API server validates them.
func sagaTool() *mcp.Tool {
	return &mcp.Tool{
		Name:  SagaToolName,
		Title: "Run a saga",
		Description: "Runs several of the operations listed here as one Saga: in order, each effectively once, and " +
			"if a step fails for good, the compensations of the steps that committed run in reverse. A step names " +
			"a tool and an operation as the other tools here do: payments__charge.create is toolRef {name: " +
			"payments} and operation charge.create; cluster_x__op is toolRef {kind: ClusterTool, name: x}. " +
			"Each step needs a compensation or irreversible: true, and every step after an irreversible one " +
			"retryUntilDone: true. Progress reports each step. " + keyRule + " The key may not hold \"/\".",
		InputSchema: json.RawMessage(fmt.Sprintf(sagaSchema, KeyArgument, MaxSagaKeyLength)),
		Annotations: &mcp.ToolAnnotations{IdempotentHint: true, OpenWorldHint: new(true)},
	}
}

// sagaSchema is the saga tool's input schema: the key, the inputs, and the
// steps as docs/sagas.md describes them (the API server validates them in
// full).
const sagaSchema = `{
  "type": "object",
  "required": [%[1]q, "steps"],
  "properties": {
    %[1]q: {"type": "string", "minLength": 1, "maxLength": %[2]d, "pattern": "^[^/]+$",
      "description": "Names this saga. Send the same key when you retry it."},
    "inputs": {"type": "object", "description": "Data the steps' parametersFrom expressions read as inputs."},
    "steps": {"type": "array", "minItems": 1, "maxItems": 16, "items": {
      "type": "object",
      "required": ["name", "toolRef", "operation"],
      "properties": {
        "name": {"type": "string", "description": "The step's name, unique in the saga."},
        "toolRef": {"type": "object", "required": ["name"], "properties": {
          "kind": {"type": "string", "enum": ["Tool", "ClusterTool"]},
          "name": {"type": "string"}}},
        "operation": {"type": "string"},
        "parameters": {"type": "object", "description": "The operation's parameters."},
        "parametersFrom": {"type": "array", "items": {"type": "object"},
          "description": "Parameters computed with CEL from inputs and earlier steps, e.g. {name: ticket, expression: steps.ticket.externalObjectID}."},
        "compensation": {"type": "object",
          "description": "The operation that undoes this step if a later one fails for good: {operation, parameters, parametersFrom}."},
        "irreversible": {"type": "boolean",
          "description": "The step cannot be undone; a step needs a compensation or irreversible: true."},
        "retryUntilDone": {"type": "boolean",
          "description": "The step is retried until it commits; every step after an irreversible one must be."},
        "requiresApproval": {"type": "boolean",
          "description": "The step waits for a person's approval before it runs."}
      }}}
  }
}`

// MaxSagaKeyLength bounds a caller's saga key, so that the scoped key fits
// the saga's spec.idempotencyKey (200).
const MaxSagaKeyLength = 170

// ScopedSagaKey is the key of a saga made for caller with the caller's
// key; a saga's key holds no "/".
func ScopedSagaKey(user, key string) string {
	return "mcp-" + CallerID(user) + "-" + key
}

// sagaArguments are the saga tool's arguments but the key.
type sagaArguments struct {
	Inputs json.RawMessage `json:"inputs,omitempty"`
	Steps  []v1.SagaStep   `json:"steps"`
}

// callSaga makes or finds the saga of a call by caller c in namespace ns,
// and answers its outcome.
func (g *Gateway) callSaga(ctx context.Context, req *mcp.CallToolRequest, c *caller, ns string) (
	mcp.Result, error) {
	key, params, err := SplitArguments(req.Params.Arguments, req.Params.Meta)
	if err != nil {
		return toolError(codeInvalidArguments, err.Error(), nil), nil
	}
	if key == "" {
		return toolError(codeKeyRequired, missingKey(SagaToolName), nil), nil
	}
	if strings.Contains(key, "/") || len(key) > MaxSagaKeyLength {
		return toolError(codeInvalidArguments, fmt.Sprintf("a saga's idempotency key holds no \"/\" and at most %d bytes",
			MaxSagaKeyLength), nil), nil
	}
	var args sagaArguments
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&args); err != nil {
		return toolError(codeInvalidArguments, fmt.Sprintf("the arguments are not a saga's inputs and steps: %v; "+
			"nothing was done", err), nil), nil
	}
	if err := boundSize("the saga's inputs", args.Inputs, v1.MaxInputsBytes); err != nil {
		return toolError(codeInvalidArguments, err.Error(), nil), nil
	}
	if len(args.Steps) == 0 {
		return toolError(codeInvalidArguments, "a saga needs at least one step; nothing was done", nil), nil
	}
	ctx, cancel := context.WithTimeout(ctx, g.cfg.CallTimeout)
	defer cancel()
	r := once.SagaRequest{
		Namespace: ns,
		Key:       ScopedSagaKey(c.user, key),
		Inputs:    args.Inputs,
		Steps:     args.Steps,
		Labels:    map[string]string{"once.dev/via": "mcp", "once.dev/caller": CallerID(c.user)},
		Progress:  progressNotifier(ctx, req),
		// Kept an hour after it ends unless the gateway is told otherwise.
		TTLSecondsAfterFinished: g.cfg.TTLSecondsAfterFinished,
	}
	g.cfg.Logger.Info("tools/call", "tool", SagaToolName, "user", c.user, "namespace", ns, "saga", once.SagaName(r.Key))
	// The host's user may have answered this call's question.
	declined := false
	switch err := decideSaga(ctx, c, ns, r, req, g.asksUser(ctx, req)); {
	case errors.Is(err, errDeclined):
		declined = true
	case apierrors.IsNotFound(err):
	case err != nil:
		return decisionRefused(err, codeWaitingForApproval), nil
	}
	res, err := g.onceClient(c.kube).DoSaga(ctx, r)
	if ask := g.askApproval(ctx, req, c, ns, err, declined); ask != nil {
		return ask, nil
	}
	if err != nil {
		return withDecline(errorAnswer(err), declined), nil
	}
	steps := []map[string]any{}
	for _, st := range res.Steps {
		steps = append(steps, map[string]any{"name": st.Name, fieldState: string(st.State), fieldOperation: st.Operation,
			fieldExternalID: st.ExternalObjectID})
	}
	return structuredAnswer(map[string]any{fieldNamespace: res.Namespace, fieldSaga: res.Name, fieldState: string(res.State),
		fieldReplayed: res.Found, "steps": steps}), nil
}
