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

package protocol

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "github.com/once-dev/once/api/v1alpha1"
)

func TestCheckNumbers(t *testing.T) {
	cases := map[string]struct {
		reason  string
		params  string
		refused string // the number named, or "" when the parameters pass
	}{
		"Small":          {reason: "an amount in cents", params: `{"amount": 4200}`},
		"LargestExact":   {reason: "2^53 - 1 is a double", params: `{"id": 9007199254740991}`},
		"TwoTo53":        {reason: "2^53 is a double", params: `{"id": 9007199254740992}`},
		"PastTwoTo53":    {reason: "2^53 + 1 reads back as 2^53", params: `{"id": 9007199254740993}`, refused: "9007199254740993"},
		"AccountNumber":  {reason: "a 17-digit account number", params: `{"account": 12345678901234567}`, refused: "12345678901234567"},
		"Decimal":        {reason: "0.1 is its own canonical form", params: `{"rate": 0.1}`},
		"TrailingZero":   {reason: "1.0 is the number 1", params: `{"n": 1.0}`},
		"Exponent":       {reason: "1e2 is the number 100", params: `{"n": 1e2, "m": -2.5E-3}`},
		"TooPrecise":     {reason: "more digits than a double keeps", params: `{"rate": 0.1000000000000000000001}`, refused: "0.1000000000000000000001"},
		"Overflow":       {reason: "beyond a double's range", params: `{"n": 1e400}`, refused: "1e400"},
		"HugeExponent":   {reason: "refused before any big arithmetic", params: `{"n": 1e-999999999}`, refused: "1e-999999999"},
		"Nested":         {reason: "numbers in arrays and objects count", params: `{"a": [1, {"b": [12345678901234567]}]}`, refused: "12345678901234567"},
		"InAString":      {reason: "a string is compared as written", params: `{"account": "12345678901234567"}`},
		"NotAnObject":    {reason: "a bare number is checked too", params: `12345678901234567`, refused: "12345678901234567"},
		"Empty":          {reason: "no parameters", params: ``},
		"NegativeLarge":  {reason: "the sign does not help", params: `{"n": -12345678901234567}`, refused: "-12345678901234567"},
		"ZeroFractional": {reason: "0.0 is 0", params: `{"n": 0.0, "m": -0}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			no := CheckNumbers([]byte(tc.params))
			var got string
			if no != nil {
				if no.Reason != v1.ReasonParametersInvalid || no.Class != v1.ErrorInvalid {
					t.Errorf("%s\nrefused as %s/%s, want Invalid/ParametersInvalid", tc.reason, no.Class, no.Reason)
				}
				got = no.Message
			}
			want := ""
			if tc.refused != "" {
				want = "spec.parameters hold the number " + tc.refused + ", which has more precision than a double: " +
					"the request hash could not tell it from a nearby number; send it as a string"
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nrefusal: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
