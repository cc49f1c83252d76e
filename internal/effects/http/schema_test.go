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
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

const chargeSchema = `{
  "type": "object",
  "required": ["amount", "currency"],
  "additionalProperties": false,
  "properties": {
    "amount": {"type": "integer", "minimum": 1},
    "currency": {"type": "string", "pattern": "^[a-z]{3}$"},
    "note": {"type": "string", "maxLength": 20}
  }
}`

func schemaTool(schema string) *v1.ToolSpec {
	return &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example"},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
		Operations: []v1.ToolOperation{{Name: "charge.create", Path: "/charges",
			ParametersSchema: &runtime.RawExtension{Raw: []byte(schema)}}}}
}

func TestCheckParameters(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		params string
		// want are substrings of the message; none means valid.
		want []string
	}{
		"Valid":           {params: `{"amount": 100, "currency": "eur"}`},
		"MissingField":    {params: `{"amount": 100}`, want: []string{"at /:", "currency"}},
		"WrongType":       {params: `{"amount": "100", "currency": "eur"}`, want: []string{"at /amount:", "want integer"}},
		"BelowMinimum":    {params: `{"amount": 0, "currency": "eur"}`, want: []string{"at /amount:", "minimum"}},
		"Pattern":         {params: `{"amount": 1, "currency": "EURO"}`, want: []string{"at /currency:", "match pattern"}},
		"UnknownField":    {params: `{"amount": 1, "currency": "eur", "tip": 5}`, want: []string{"tip"}},
		"EveryViolation":  {params: `{"amount": "x", "currency": 7}`, want: []string{"at /amount:", "at /currency:"}},
		"EmptyIsAnObject": {params: ``, want: []string{"amount", "currency"}},
		"NestedMaxLength": {params: `{"amount": 1, "currency": "eur", "note": "` + strings.Repeat("n", 21) + `"}`, want: []string{"at /note:"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.CheckParameters(schemaTool(chargeSchema), "charge.create", []byte(tc.params))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("valid parameters refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want a refusal naming %q, got none", tc.want)
			}
			t.Log(err)
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("message %q does not name %q", err, w)
				}
			}
		})
	}
	if err := c.CheckParameters(schemaTool(chargeSchema), "refund.create", []byte(`{}`)); err != nil {
		t.Errorf("an operation without a schema takes any parameters: %v", err)
	}
}

func TestParametersSchemaValidated(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"NotASchema": `{"type": "objekt"}`,
		"FileRef":    `{"$ref": "file:///etc/passwd"}`,
		"RemoteRef":  `{"$ref": "https://schemas.example/charge.json"}`,
		"BadPattern": `{"type": "string", "pattern": "("}`,
	}
	for name, schema := range cases {
		t.Run(name, func(t *testing.T) {
			err := c.Validate(schemaTool(schema))
			if err == nil || !strings.Contains(err.Error(), "parametersSchema") {
				t.Errorf("want the tool refused, naming parametersSchema; got %v", err)
			}
		})
	}
	if err := c.Validate(schemaTool(chargeSchema)); err != nil {
		t.Errorf("a good schema refused: %v", err)
	}
	// A pattern's match takes the input's length times its program's
	// size: a schema's patterns have the bound of CEL's matches(). The
	// first compiles to 702 instructions, the second to 2 222.
	bounded := map[string]string{
		"Pattern": `{"type": "object", "properties": {"note": {"type": "string", ` +
			`"pattern": "^([a-z0-9]{1,20}[ ,.]{0,3}){1,10}([A-Z]{1,5}[0-9]{0,4}){0,10}(x|y|z){1,5}$"}}}`,
		"PatternProperties": `{"type": "object", "patternProperties": {"((a{1,10}){1,10}){1,10}b": {"type": "string"}}}`,
	}
	for name, schema := range bounded {
		t.Run(name, func(t *testing.T) {
			err := c.Validate(schemaTool(schema))
			if err == nil || !strings.Contains(err.Error(), "parametersSchema") ||
				!strings.Contains(err.Error(), "more than the limit of 128") {
				t.Errorf("want the tool refused, naming parametersSchema and the bound; got %v", err)
			}
		})
	}
}

// TestCheckParametersBuildsTheRequest: parameters the request cannot be
// built from are refused before any claim, like a schema's refusal.
func TestCheckParametersBuildsTheRequest(t *testing.T) {
	c, err := NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	spec := &v1.ToolSpec{HTTP: v1.HTTPBackend{URL: "https://tool.example",
		SecretValues: []v1.SecretValue{{Name: "token", SecretKeyRef: v1.SecretKeySelector{Name: "s", Key: "k"}}}},
		Idempotency: v1.ToolIdempotency{Mode: v1.IdempotencyNative},
		Operations: []v1.ToolOperation{{Name: "issue.create", Path: "/repos/{repo}/issues",
			Request: &v1.RequestShape{PathValues: []v1.NamedValue{{Name: "repo", Value: "parameters.repo"}},
				Body: "{'title': parameters.title, 'token': secrets.token, 'key': key}"}}}}
	if err := c.CheckParameters(spec, "issue.create", []byte(`{"repo":"shop","title":"t"}`)); err != nil {
		t.Errorf("buildable parameters refused: %v", err)
	}
	err = c.CheckParameters(spec, "issue.create", []byte(`{"title":"t"}`))
	if err == nil || !strings.Contains(err.Error(), "cannot make the operation's request: path value repo") {
		t.Errorf("a missing path value must be refused before any claim, got %v", err)
	}
}
