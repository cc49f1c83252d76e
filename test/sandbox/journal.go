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

package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Record types in the ledger file. Effect lines carry no "record" field.
const (
	// recordRejection stores a native-mode business rejection for replay;
	// it is not an effect.
	recordRejection = "rejection"
	// recordReset marks DELETE /ledger and carries the sequence reached,
	// so ids stay unique after a reset and a restart.
	recordReset = "reset"
)

// record is one line of the ledger file.
type record struct {
	Record string `json:"record,omitempty"`
	Effect
}

// resetLine is how a reset record is written.
type resetLine struct {
	Record string `json:"record"`
	Seq    int64  `json:"seq"`
}

// journal appends ledger records to a file, fsyncing each one.
type journal struct {
	path   string
	file   *os.File
	closed bool
}

// openJournal reads the records in path and opens it for appending,
// creating it if needed. A last line without a newline that does not parse
// is a write torn by a crash; it is cut off.
func openJournal(path string) (*journal, []record, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("read ledger %s: %w", path, err)
	}
	records, valid, err := decodeRecords(data)
	if err != nil {
		return nil, nil, fmt.Errorf("read ledger %s: %w", path, err)
	}
	if valid < len(data) {
		if err := os.Truncate(path, int64(valid)); err != nil {
			return nil, nil, fmt.Errorf("cut torn ledger tail: %w", err)
		}
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open ledger: %w", err)
	}
	j := &journal{path: path, file: file}
	if valid > 0 && data[valid-1] != '\n' {
		if err := j.write([]byte{'\n'}); err != nil {
			_ = file.Close()
			return nil, nil, err
		}
	}
	return j, records, nil
}

// decodeRecords parses newline-separated JSON records and returns how many
// leading bytes of data are intact.
func decodeRecords(data []byte) (records []record, valid int, err error) {
	for line := 1; valid < len(data); line++ {
		rest := data[valid:]
		end := bytes.IndexByte(rest, '\n')
		torn := end < 0
		if torn {
			end = len(rest)
		}
		text := bytes.TrimSpace(rest[:end])
		if len(text) > 0 {
			var rec record
			if err := json.Unmarshal(text, &rec); err != nil {
				if torn {
					return records, valid, nil
				}
				return nil, 0, fmt.Errorf("line %d: %w", line, err)
			}
			records = append(records, rec)
		}
		valid += min(end+1, len(rest))
	}
	return records, valid, nil
}

// append writes rec as one line and fsyncs the file.
func (j *journal) append(rec record) error {
	var v any = rec
	if rec.Record == recordReset {
		v = resetLine{Record: rec.Record, Seq: rec.Seq}
	}
	line, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode ledger record: %w", err)
	}
	return j.write(append(line, '\n'))
}

func (j *journal) write(data []byte) error {
	if j.closed {
		return fmt.Errorf("write ledger %s: %w", j.path, os.ErrClosed)
	}
	if _, err := j.file.Write(data); err != nil {
		return fmt.Errorf("write ledger: %w", err)
	}
	if err := j.file.Sync(); err != nil {
		return fmt.Errorf("sync ledger: %w", err)
	}
	return nil
}

// truncate empties the file and writes rec as its only line.
func (j *journal) truncate(rec record) error {
	if j.closed {
		return fmt.Errorf("truncate ledger %s: %w", j.path, os.ErrClosed)
	}
	if err := j.file.Truncate(0); err != nil {
		return fmt.Errorf("truncate ledger: %w", err)
	}
	return j.append(rec)
}

func (j *journal) close() error {
	if j.closed {
		return nil
	}
	j.closed = true
	if err := j.file.Close(); err != nil {
		return fmt.Errorf("close ledger: %w", err)
	}
	return nil
}
