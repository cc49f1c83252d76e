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
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The prose standard of docs/README.md, Plain prose. Each of README.md and
// every Markdown file under docs/ (docs/reference.md aside, which is
// generated) holds to it.
const (
	// maxMedian is the most words the median sentence may have.
	maxMedian = 20
	// longWords is where a sentence counts as long.
	longWords = 40
	// maxLongPercent is the largest share of long sentences, in percent.
	maxLongPercent = 8.0
	// maxWords is the most words any one sentence may have.
	maxWords = 80
	// maxStretch is the most prose lines between two headings.
	maxStretch = 30
)

// generatedDocs are left out of the standard: a program writes them.
var generatedDocs = []string{"docs/reference.md"}

// proseBacklog lists the files that do not meet the standard yet.
// This list must only shrink: a file leaves it once it passes, and the
// test fails when a listed file passes, so that it cannot stay listed.
var proseBacklog = []string{}

// TestProse measures the prose sentences of README.md and docs/ and fails
// for a file whose median sentence runs over 20 words, whose sentences
// over 40 words pass 8 %, or that has a sentence over 80 words. It fails
// too where more than 30 prose lines run without a heading (see stretches).
//
// A prose sentence is counted so (the rule docs/README.md states):
//
//   - Left out: fenced code blocks, tables, headings, HTML lines, link
//     reference definitions, and lines that hold only inline code.
//   - A paragraph's lines are joined; a list item is a unit of its own.
//     A blockquote's marks are dropped.
//   - A unit splits into sentences after `.`, `?` or `!` (and any closing
//     bracket, quote or emphasis) followed by a space and a capital, a
//     digit, a backtick, a bracket or emphasis. Its end ends a sentence.
//   - No split after e.g., i.e., vs., cf. or etc., inside a decimal, or
//     inside inline code.
//   - A word is a run of non-space characters with a letter or a digit.
//     An inline code span is one word; a link counts its text only.
func TestProse(t *testing.T) {
	files := proseFiles(t)
	var failed []string
	for _, f := range files {
		text, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		lens := sentenceLengths(string(text))
		fig := measure(lens)
		t.Logf("%-32s %4d sentences, median %4.1f, over %d: %4.1f %%, longest %d",
			f, len(lens), fig.median, longWords, fig.longPercent, fig.longest)
		problems := fig.problems()
		for _, s := range stretches(string(text)) {
			if s.lines > maxStretch {
				problems = append(problems, fmt.Sprintf("line %d: %d prose lines without a heading (at most %d)", s.line, s.lines, maxStretch))
			}
		}
		backlog := slices.Contains(proseBacklog, f)
		switch {
		case len(problems) > 0 && !backlog:
			failed = append(failed, f+": "+strings.Join(problems, "; "))
		case len(problems) == 0 && backlog:
			t.Errorf("%s meets the prose standard: take it off proseBacklog", f)
		}
	}
	for _, f := range proseBacklog {
		if !slices.Contains(files, f) {
			t.Errorf("proseBacklog names %s, which is not a measured file", f)
		}
	}
	for _, f := range failed {
		t.Errorf("%s (docs/README.md, Plain prose)", f)
	}
}

// proseFiles are README.md and every Markdown file under docs/, relative
// to the root, generated ones aside.
func proseFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".md") {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !slices.Contains(generatedDocs, rel) {
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files[1:])
	return files
}

// figures are one file's sentence figures.
type figures struct {
	median      float64
	longPercent float64
	longest     int
}

// measure computes the figures of a file's sentence lengths. The median of
// an even count is the mean of the two middle lengths.
func measure(lens []int) figures {
	if len(lens) == 0 {
		return figures{}
	}
	s := slices.Sorted(slices.Values(lens))
	n := len(s)
	med := float64(s[n/2])
	if n%2 == 0 {
		med = float64(s[n/2-1]+s[n/2]) / 2
	}
	long := 0
	for _, l := range s {
		if l > longWords {
			long++
		}
	}
	return figures{median: med, longPercent: 100 * float64(long) / float64(n), longest: s[n-1]}
}

// problems says where the figures break the standard.
func (f figures) problems() []string {
	var out []string
	if f.median > maxMedian {
		out = append(out, fmt.Sprintf("median sentence %.1f words (at most %d)", f.median, maxMedian))
	}
	if f.longPercent > maxLongPercent {
		out = append(out, fmt.Sprintf("%.1f %% of sentences over %d words (at most %.0f %%)", f.longPercent, longWords, maxLongPercent))
	}
	if f.longest > maxWords {
		out = append(out, fmt.Sprintf("a sentence of %d words (at most %d)", f.longest, maxWords))
	}
	return out
}

var (
	// fenceLine opens or closes a fenced code block.
	fenceLine = regexp.MustCompile("^\\s*(```|~~~)")
	// listItem starts a list item: a bullet or a number.
	listItem = regexp.MustCompile(`^\s*(?:[-*+]|\d+[.)])\s+`)
	// linkDef is a link reference definition.
	linkDef = regexp.MustCompile(`^\s*\[[^\]]+\]:\s`)
	// inlineCode is an inline code span, of one or more backticks.
	inlineCode = regexp.MustCompile("(`+)[^`]*?(`+)")
	// codeOnly is a line (its list mark aside) of inline code alone.
	codeOnly = regexp.MustCompile("^(?:`[^`]*`[\\s,;:.]*)+$")
	// link is an inline link or image; its text stays.
	link = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// sentenceEnd is the end of a sentence inside a unit: the mark, any
	// closing characters, a space, and what starts the next one.
	sentenceEnd = regexp.MustCompile("[.?!][)\"'*_]*\\s+[A-Z0-9`\\[(*_\"]")
	// abbreviation ends in a period that ends no sentence.
	abbreviation = regexp.MustCompile(`(?i)(?:^|[\s(])(?:e\.g|i\.e|vs|cf|etc)\.$`)
)

// sentenceLengths returns the word count of every prose sentence of a
// Markdown text, in order.
func sentenceLengths(text string) []int {
	var (
		lens []int
		unit []string
	)
	flush := func() {
		if len(unit) > 0 {
			lens = append(lens, splitSentences(strings.Join(unit, " "))...)
			unit = nil
		}
	}
	for _, t := range outsideCode(text) {
		switch {
		case t == "", strings.HasPrefix(t, "|"), strings.HasPrefix(t, "#"),
			strings.HasPrefix(t, "<"), linkDef.MatchString(t):
			flush()
			continue
		}
		if m := listItem.FindString(t); m != "" {
			flush()
			t = t[len(m):]
		}
		if codeOnly.MatchString(t) {
			flush()
			continue
		}
		unit = append(unit, t)
	}
	flush()
	return lens
}

// outsideCode yields every line of a Markdown text with its number,
// from 1, trimmed and with its blockquote marks dropped. The lines of a
// fenced code block, its fences included, come out empty, as blank lines.
func outsideCode(text string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		n, inCode := 0, false
		for line := range strings.Lines(text) {
			n++
			line = strings.TrimRight(line, "\r\n")
			if fenceLine.MatchString(line) {
				inCode = !inCode
				line = ""
			}
			if inCode {
				line = ""
			}
			t := strings.TrimSpace(line)
			for strings.HasPrefix(t, ">") {
				t = strings.TrimSpace(strings.TrimPrefix(t, ">"))
			}
			if !yield(n, t) {
				return
			}
		}
	}
}

// splitSentences splits one unit into sentences and counts their words.
func splitSentences(unit string) []int {
	// An inline code span becomes one word, with no mark in it to split at.
	unit = inlineCode.ReplaceAllString(unit, "`code`")
	unit = link.ReplaceAllString(unit, "$1")
	var lens []int
	for _, b := range sentenceBounds(unit, sentenceEnd) {
		if n := countWords(unit[b[0]:b[1]]); n > 0 {
			lens = append(lens, n)
		}
	}
	return lens
}

// sentenceBounds returns where each sentence of a unit starts and ends, as
// byte offsets. A sentence ends where ends matches, but for an
// abbreviation. Inline code must hold no mark to split at by then. A
// sentence may hold no word.
func sentenceBounds(unit string, ends *regexp.Regexp) [][2]int {
	var out [][2]int
	start := 0
	for _, m := range ends.FindAllStringIndex(unit, -1) {
		end := m[0] + 1
		if abbreviation.MatchString(unit[start:end]) {
			continue
		}
		out = append(out, [2]int{start, end})
		start = m[1] - 1
	}
	return append(out, [2]int{start, len(unit)})
}

// word holds a letter or a digit.
var word = regexp.MustCompile(`[\p{L}\p{N}]`)

// countWords counts the words of a sentence.
func countWords(s string) int {
	n := 0
	for f := range strings.FieldsSeq(s) {
		if word.MatchString(f) {
			n++
		}
	}
	return n
}

// TestSentenceLengths holds the counting rule to examples.
func TestSentenceLengths(t *testing.T) {
	tests := map[string]struct {
		text string
		want []int
	}{
		"two sentences": {
			text: "One two three. Four five.\n",
			want: []int{3, 2},
		},
		"joined lines": {
			text: "One two\nthree. Four\nfive six.\n",
			want: []int{3, 3},
		},
		"list items apart": {
			text: "Intro line:\n\n- first item\n- second item. With more\n  lines here\n",
			want: []int{2, 2, 2, 4},
		},
		"abbreviations and decimals": {
			text: "Use a tool, e.g. the sandbox, at 0.5 seconds vs. one. Done.\n",
			want: []int{11, 1},
		},
		"inline code is one word": {
			text: "Run `make test. Then more` now. Next one.\n",
			want: []int{3, 2},
		},
		"links count their text": {
			text: "See [the design](docs/design.md#a-b-c) here.\n",
			want: []int{4},
		},
		"left out": {
			text: "# Heading words\n\n```sh\necho one. Two three.\n```\n\n| a | b |\n|---|---|\n\n<!-- c -->\n[x]: http://x\n`only code`\n",
			want: nil,
		},
		"question and exclamation": {
			text: "Is it once? Yes! `kubectl` runs.\n",
			want: []int{3, 1, 2},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := sentenceLengths(tc.text)
			if !slices.Equal(got, tc.want) {
				t.Errorf("sentenceLengths() = %v, want %v", got, tc.want)
			}
		})
	}
}

// stretch is a run of prose lines between two headings, or before the
// first, or after the last.
type stretch struct {
	// line is where it starts: its heading's line, or 1 before the first.
	line int
	// lines counts its prose lines.
	lines int
}

// stretches returns the stretches of a Markdown text, in order, with no
// empty one before the first heading. A prose line is any line but a blank
// one, a table row, a heading, or a line of a fenced code block.
func stretches(text string) []stretch {
	out := []stretch{{line: 1}}
	for n, t := range outsideCode(text) {
		switch {
		case strings.HasPrefix(t, "#"):
			out = append(out, stretch{line: n})
		case t != "" && !strings.HasPrefix(t, "|"):
			out[len(out)-1].lines++
		}
	}
	if out[0].lines == 0 {
		out = out[1:]
	}
	return out
}

// TestStretches holds the counting of prose lines between headings to
// examples.
func TestStretches(t *testing.T) {
	tests := map[string]struct {
		text string
		want []stretch
	}{
		"before and under headings": {
			text: "Intro line.\n\n# Title\n\nOne.\nTwo.\n\n## Part\n\nThree.\n",
			want: []stretch{{line: 1, lines: 1}, {line: 3, lines: 2}, {line: 8, lines: 1}},
		},
		"no prose before the first heading": {
			text: "# Title\nOne.\n",
			want: []stretch{{line: 1, lines: 1}},
		},
		"blank lines, tables and code left out": {
			text: "# Title\n\nOne.\n\n| a | b |\n|---|---|\n\n```sh\n# not a heading\necho two\n```\n\nTwo.\n",
			want: []stretch{{line: 1, lines: 2}},
		},
		"list items and quotes count": {
			text: "# Title\n- one\n  more\n> quoted\n>\n<!-- c -->\n",
			want: []stretch{{line: 1, lines: 4}},
		},
		"an indented fence": {
			text: "# Title\n- item:\n\n  ```text\n  # out\n  ```\n- next\n",
			want: []stretch{{line: 1, lines: 2}},
		},
		"no heading": {
			text: "One.\nTwo.\n",
			want: []stretch{{line: 1, lines: 2}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := stretches(tc.text)
			if !slices.Equal(got, tc.want) {
				t.Errorf("stretches() = %v, want %v", got, tc.want)
			}
		})
	}
}
