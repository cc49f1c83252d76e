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

package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// maxSubject is the longest commit subject, in characters, that
// `git log --oneline`, blame and bisect show whole.
const maxSubject = 72

// thisFile is where the check lives: the commits it checks are the one
// that added it and every commit after.
const thisFile = "test/repo/commits_test.go"

// TestCommitMessages: every commit since this check was added has a
// subject of at most maxSubject characters, then a blank line and a body.
// A merge may have no body. Older commits are left as they are.
func TestCommitMessages(t *testing.T) {
	added := strings.Fields(run(t, "git", "log", "--follow", "--diff-filter=A", "--format=%H", "--", thisFile))
	if len(added) == 0 {
		// The file is not committed yet: the check starts with its commit.
		t.Skipf("%s is not in git's history yet", thisFile)
	}
	first := added[len(added)-1]
	// Read the log of HEAD through the os package, so that go test's cache
	// knows this test's result changes with every commit.
	if p := strings.TrimSpace(run(t, "git", "rev-parse", "--git-path", "logs/HEAD")); p != "" {
		_, _ = os.ReadFile(filepath.Join(root, p))
	}
	// The commits reachable from HEAD but not from before the check. In a
	// shallow clone that starts after it, that is every commit there.
	out := run(t, "git", "log", "--format=%H%x00%P%x00%B%x00", "HEAD", "--not", first+"^@")
	fields := strings.Split(out, "\x00")
	n := 0
	for i := 0; i+2 < len(fields); i += 3 {
		hash := strings.TrimSpace(fields[i])
		merge := len(strings.Fields(fields[i+1])) > 1
		if err := messageProblem(fields[i+2], merge); err != nil {
			t.Errorf("commit %.12s: %v", hash, err)
		}
		n++
	}
	if n == 0 {
		t.Fatalf("git log found no commit from %.12s to HEAD", first)
	}
}

// messageProblem says what is wrong with a commit message, or nil.
func messageProblem(msg string, merge bool) error {
	lines := strings.Split(strings.TrimRight(msg, "\n"), "\n")
	subject := lines[0]
	switch {
	case strings.TrimSpace(subject) == "":
		return fmt.Errorf("the subject is empty")
	case utf8.RuneCountInString(subject) > maxSubject:
		return fmt.Errorf("the subject has %d characters, more than %d: %q",
			utf8.RuneCountInString(subject), maxSubject, subject)
	case len(lines) > 1 && strings.TrimSpace(lines[1]) != "":
		return fmt.Errorf("the subject runs on to a second line: leave a blank line before the body")
	case !merge && strings.TrimSpace(strings.Join(lines[1:], "\n")) == "":
		return fmt.Errorf("there is no body: say why, the test that failed before and what was measured")
	}
	return nil
}

func TestMessageProblem(t *testing.T) {
	long := strings.Repeat("é", maxSubject+1)
	cases := map[string]struct {
		reason string
		msg    string
		merge  bool
		want   string // a part of the problem; empty for none
	}{
		"SubjectAndBody": {
			reason: "a short subject, a blank line and a body is the form",
			msg:    "Bind late answers to the object's UID\n\nA late answer was written into another object.\n",
		},
		"SubjectOfMaxLength": {
			reason: "characters are counted, not bytes",
			msg:    strings.Repeat("é", maxSubject) + "\n\nWhy.\n",
		},
		"SubjectTooLong": {
			reason: "a subject over the limit is refused",
			msg:    long + "\n\nWhy.\n",
			want:   "73 characters",
		},
		"NoBlankLine": {
			reason: "git joins a subject's lines: the second line must be blank",
			msg:    "Bind late answers\nto the object's UID\n\nWhy.\n",
			want:   "blank line",
		},
		"NoBody": {
			reason: "a commit says why in its body",
			msg:    "Bind late answers to the object's UID\n",
			want:   "no body",
		},
		"BlankBody": {
			reason: "blank lines are no body",
			msg:    "Bind late answers to the object's UID\n\n  \n",
			want:   "no body",
		},
		"MergeWithoutBody": {
			reason: "a merge's subject says it all",
			msg:    "Merge branch 'keys'\n",
			merge:  true,
		},
		"MergeTooLong": {
			reason: "a merge's subject is bounded too",
			msg:    long + "\n",
			merge:  true,
			want:   "more than 72",
		},
		"EmptySubject": {
			reason: "an empty message has no subject",
			msg:    "\n",
			want:   "empty",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := messageProblem(tc.msg, tc.merge)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("%s: got %v, want no problem", tc.reason, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("%s: got %v, want a problem that says %q", tc.reason, err, tc.want)
			}
		})
	}
}
