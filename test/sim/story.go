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

package sim

import (
	"encoding/json"
	"fmt"
	"os"
)

// Story is a shrunk failing schedule as kept in testdata: the options it
// ran with, its actions, what it broke and the story it told when found.
type Story struct {
	Options   Options
	Violation string
	Schedule  []Action
	Told      []string
}

// SaveStory writes a shrunk result to path.
func SaveStory(path string, opts Options, r Result) error {
	s := Story{Options: opts, Schedule: r.Schedule, Told: r.Story}
	if len(r.Violations) > 0 {
		s.Violation = r.Violations[0].String()
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadStory reads a story that SaveStory wrote.
func LoadStory(path string) (Story, error) {
	var s Story
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}
