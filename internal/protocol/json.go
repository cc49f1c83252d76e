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

import "math"

// WholeNumbers makes the whole numbers of decoded JSON int64, in place, so
// that CEL expressions compare them as ints (`response.body.id == 42`,
// `steps.ticket.result.number == 7`); JSON decodes every number as a
// float64.
func WholeNumbers(v any) any {
	switch v := v.(type) {
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1<<53 {
			return int64(v)
		}
		return v
	case map[string]any:
		for k, e := range v {
			v[k] = WholeNumbers(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = WholeNumbers(e)
		}
		return v
	default:
		return v
	}
}
