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

package chaos

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/rest"
)

// writeVerbs are the verbs of apiserver_request_total that write.
var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true, "APPLY": true}

// writeResources are the resources whose writes make up the write budget
// of an operation (docs/design.md, The write budget), and sagas, counted apart.
var writeResources = map[string]bool{"sideeffectoperations": true, "idempotencyrecords": true, sagaResource: true}

// sagaResource is the resource of Sagas.
const sagaResource = "sagas"

// Writes counts writes to the API server by request and response code,
// keyed like "sideeffectoperations/status PUT 409".
type Writes map[string]int64

// Total is the number of writes.
func (w Writes) Total() int64 {
	var n int64
	for _, v := range w {
		n += v
	}
	return n
}

// Of is the number of writes to resource, any subresource.
func (w Writes) Of(resource string) int64 {
	var n int64
	for k, v := range w {
		if r, _, _ := strings.Cut(k, " "); r == resource || strings.HasPrefix(r, resource+"/") {
			n += v
		}
	}
	return n
}

// Sub is w − before, per key.
func (w Writes) Sub(before Writes) Writes {
	d := Writes{}
	for k, v := range w {
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// ByRequest sums the counts over response codes: "resource[/subresource]
// VERB" → writes.
func (w Writes) ByRequest() map[string]int64 {
	m := map[string]int64{}
	for k, v := range w {
		req := k[:strings.LastIndexByte(k, ' ')]
		m[req] += v
	}
	return m
}

// Conflicts counts, by request, the writes answered 409 Conflict: lost
// races, on a stale resourceVersion or an existing name.
func (w Writes) Conflicts() map[string]int64 {
	m := map[string]int64{}
	for k, v := range w {
		if req, ok := strings.CutSuffix(k, " 409"); ok {
			m[req] += v
		}
	}
	return m
}

// ParseWrites reads the API server's metrics in the Prometheus text format
// and sums apiserver_request_total over the write verbs on
// SideEffectOperations, IdempotencyRecords and Sagas, any subresource,
// every response code.
func ParseWrites(in io.Reader) (Writes, error) {
	return ParseResourceWrites(in, writeResources)
}

// ParseResourceWrites is ParseWrites for the writes to resources (plural
// names, any API group), such as "events".
func ParseResourceWrites(in io.Reader, resources map[string]bool) (Writes, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(in)
	if err != nil {
		return nil, fmt.Errorf("parsing the API server's metrics: %w", err)
	}
	w := Writes{}
	fam := families["apiserver_request_total"]
	if fam == nil {
		return w, nil
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if !writeVerbs[labels["verb"]] || !resources[labels["resource"]] {
			continue
		}
		key := labels["resource"]
		if sub := labels["subresource"]; sub != "" {
			key += "/" + sub
		}
		w[key+" "+labels["verb"]+" "+labels["code"]] += int64(m.GetCounter().GetValue())
	}
	return w, nil
}

// apiWrites reads the API server's /metrics through rc.
func apiWrites(ctx context.Context, rc rest.Interface) (Writes, error) {
	return APIWrites(ctx, rc, writeResources)
}

// APIWrites reads the API server's /metrics through rc and counts the
// writes to resources, as ParseResourceWrites does.
func APIWrites(ctx context.Context, rc rest.Interface, resources map[string]bool) (Writes, error) {
	raw, err := rc.Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return ParseResourceWrites(strings.NewReader(string(raw)), resources)
}
