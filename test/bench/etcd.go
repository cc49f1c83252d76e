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

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What the cluster's objects cost etcd. etcd keeps every revision of every
// key until a compaction; after one, what remains is the objects as they
// are now. etcd_mvcc_db_total_size_in_use_in_bytes is the database's pages
// in use (the file, etcd_mvcc_db_total_size_in_bytes, shrinks only on a
// defragmentation, and the quota counts the file). The local control
// plane's etcd (envtest's) serves its metrics and its gRPC gateway on its
// client URL, plain HTTP on loopback.

// EtcdQuotaBytes is etcd's default backend quota (2 GiB): past it, etcd
// raises its NOSPACE alarm and refuses every write.
const EtcdQuotaBytes = 2 << 30

// EtcdSize is etcd's database size as its metrics say.
type EtcdSize struct {
	// InUseBytes is etcd_mvcc_db_total_size_in_use_in_bytes, FileBytes
	// etcd_mvcc_db_total_size_in_bytes.
	InUseBytes float64 `json:"in_use_bytes"`
	FileBytes  float64 `json:"file_bytes"`
}

// etcdClient talks to one etcd over its client URL.
type etcdClient struct {
	url string
}

// etcdOf finds the etcd of the control plane whose state folder is dir,
// and its client URL (its --advertise-client-urls, else
// --listen-client-urls).
func etcdOf(dir string) (*etcdClient, error) {
	procs, err := findControlPlane(dir)
	if err != nil {
		return nil, err
	}
	args, err := procs.etcd.CmdLine()
	if err != nil {
		return nil, fmt.Errorf("reading etcd's command line: %w", err)
	}
	url := clientURL(args)
	if url == "" {
		return nil, fmt.Errorf("etcd's command line names no client URL: %q", args)
	}
	return &etcdClient{url: url}, nil
}

// clientURL is the first URL of --advertise-client-urls, else of
// --listen-client-urls, in etcd's arguments args.
func clientURL(args []string) string {
	for _, flag := range []string{"--advertise-client-urls", "--listen-client-urls"} {
		for i, a := range args {
			v, ok := strings.CutPrefix(a, flag+"=")
			if !ok && a == flag && i+1 < len(args) {
				v, ok = args[i+1], true
			}
			if ok && v != "" {
				return strings.TrimSuffix(strings.Split(v, ",")[0], "/")
			}
		}
	}
	return ""
}

// size reads etcd's database sizes from its metrics.
func (c *etcdClient) size(ctx context.Context) (EtcdSize, error) {
	fams, err := scrapeAll(ctx, c.url+"/metrics")
	if err != nil {
		return EtcdSize{}, fmt.Errorf("reading etcd's metrics: %w", err)
	}
	if _, ok := fams["etcd_mvcc_db_total_size_in_use_in_bytes"]; !ok {
		return EtcdSize{}, fmt.Errorf("etcd's metrics at %s have no etcd_mvcc_db_total_size_in_use_in_bytes", c.url)
	}
	return EtcdSize{InUseBytes: sumOf(fams, "etcd_mvcc_db_total_size_in_use_in_bytes", "", ""),
		FileBytes: sumOf(fams, "etcd_mvcc_db_total_size_in_bytes", "", "")}, nil
}

// post sends a request to etcd's gRPC gateway and decodes its answer.
func (c *etcdClient) post(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
	}
	return json.Unmarshal(data, out)
}

// revision is etcd's current revision.
func (c *etcdClient) revision(ctx context.Context) (int64, error) {
	var st struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	if err := c.post(ctx, "/v3/maintenance/status", struct{}{}, &st); err != nil {
		return 0, fmt.Errorf("reading etcd's status: %w", err)
	}
	return strconv.ParseInt(st.Header.Revision, 10, 64)
}

// compactedSize compacts etcd's history and reads its size once the
// freed pages show. It compacts to the revision of two seconds before,
// not the current one, so that the API server's own watch of etcd, a
// moment behind under load, is never cut off (a watcher behind the
// compacted revision has to list everything again, and so would the
// manager's informers): what remains is every key's latest value and at
// most two seconds of history. The API server compacts by itself too; a
// revision it has already compacted is no error. The in-use figure is
// taken at etcd's commits of its backend (every 100 ms while anything
// writes; the API server's and the shards' leases do), so it is read
// until two readings a second apart agree, five at most.
func (c *etcdClient) compactedSize(ctx context.Context) (EtcdSize, error) {
	rev, err := c.revision(ctx)
	if err != nil {
		return EtcdSize{}, err
	}
	select {
	case <-ctx.Done():
		return EtcdSize{}, ctx.Err()
	case <-time.After(2 * time.Second):
	}
	return c.compactTo(ctx, rev)
}

// compactTo compacts etcd's history up to rev and reads its size once the
// in-use bytes have settled.
func (c *etcdClient) compactTo(ctx context.Context, rev int64) (EtcdSize, error) {
	var out struct{}
	err := c.post(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, &out)
	if err != nil && !strings.Contains(err.Error(), "compacted") {
		return EtcdSize{}, fmt.Errorf("compacting etcd to revision %d: %w", rev, err)
	}
	var last EtcdSize
	for i := range 5 {
		select {
		case <-ctx.Done():
			return EtcdSize{}, ctx.Err()
		case <-time.After(time.Second):
		}
		s, err := c.size(ctx)
		if err != nil {
			return EtcdSize{}, err
		}
		if i > 0 && s.InUseBytes == last.InUseBytes {
			return s, nil
		}
		last = s
	}
	return last, nil
}

// HoursToQuota is how long etcd takes to reach its default quota when
// every operation keeps bytesPerOp in use and operations come at
// opsPerSecond; 0 unless both are positive.
func HoursToQuota(bytesPerOp, opsPerSecond float64) float64 {
	if bytesPerOp <= 0 || opsPerSecond <= 0 {
		return 0
	}
	return EtcdQuotaBytes / bytesPerOp / opsPerSecond / 3600
}
