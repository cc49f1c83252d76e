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
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The ceilings of TestCommentProse only go down: never raise them. The
// first rewrite of the comments brought every count to none, so a new long
// or chained sentence fails the test.
const (
	maxCommentLong     = 0
	maxCommentOverlong = 0
	maxCommentChained  = 0
)

// worstShown is how many of the worst sentences of each kind the test logs.
const worstShown = 15

// TestCommentProse measures the comments of the Go code under internal/
// against the prose standard of docs/README.md, Plain prose. It counts
// the sentences over 40 words, those over 80, and the chained ones. It
// logs the figures, each file's counts and the worst sentences, and fails
// when a count passes its ceiling.
//
// A comment sentence is counted so:
//
//   - The files are the .go files under internal/, tests and generated
//     files (zz_generated*) aside. The license header is left out.
//   - A directive line is left out: //go:, //nolint, a marker such as
//     // +kubebuilder, or any //word:word line.
//   - In a comment group, a blank line ends a paragraph. A line that
//     starts with a list mark starts an item; indented lines after it
//     continue it. Other indented lines are code and are left out.
//   - Paragraphs and items split into sentences as TestProse splits a
//     unit, but a sentence may also start with a small letter: a comment
//     may start one with a name. An inline code span is one word.
//   - A sentence is chained when it holds two semicolons or more, a colon
//     and a semicolon, or three colons or more. A colon counts only before
//     a space or at the sentence's end, so that a URL's does not.
func TestCommentProse(t *testing.T) {
	var all []commentSentence
	for _, f := range commentFiles(t) {
		all = append(all, fileSentences(t, f, nil)...)
	}
	lens := make([]int, len(all))
	var long, overlong, chained []commentSentence
	perFile := map[string][3]int{}
	for i, s := range all {
		lens[i] = s.words
		c := perFile[s.file]
		if s.words > longWords {
			long = append(long, s)
			c[0]++
		}
		if s.words > maxWords {
			overlong = append(overlong, s)
			c[1]++
		}
		if s.chained() {
			chained = append(chained, s)
			c[2]++
		}
		if c != [3]int{} {
			perFile[s.file] = c
		}
	}
	fig := measure(lens)
	t.Logf("%d sentences, median %.1f words; over %d words: %d; over %d: %d; chained: %d",
		len(all), fig.median, longWords, len(long), maxWords, len(overlong), len(chained))
	for _, f := range slices.Sorted(maps.Keys(perFile)) {
		c := perFile[f]
		t.Logf("  %-48s over %d: %2d, over %d: %2d, chained: %2d", f, longWords, c[0], maxWords, c[1], c[2])
	}
	logWorst(t, "longest", long, func(a, b commentSentence) int { return cmp.Compare(b.words, a.words) })
	logWorst(t, "most chained", chained, func(a, b commentSentence) int {
		return cmp.Or(cmp.Compare(b.colons+b.semicolons, a.colons+a.semicolons), cmp.Compare(b.words, a.words))
	})

	for _, c := range []struct {
		what    string
		n, most int
	}{
		{fmt.Sprintf("sentences over %d words", longWords), len(long), maxCommentLong},
		{fmt.Sprintf("sentences over %d words", maxWords), len(overlong), maxCommentOverlong},
		{"chained sentences", len(chained), maxCommentChained},
	} {
		switch {
		case c.n > c.most:
			t.Errorf("%d %s in the comments of internal/, above the ceiling of %d: split them (docs/README.md, Plain prose)", c.n, c.what, c.most)
		case c.n < c.most:
			t.Logf("%d %s, below the ceiling of %d: lower it", c.n, c.what, c.most)
		}
	}
}

// logWorst logs the first sentences of a kind, in the order cmp gives.
func logWorst(t *testing.T, kind string, ss []commentSentence, order func(a, b commentSentence) int) {
	t.Helper()
	ss = slices.SortedStableFunc(slices.Values(ss), order)
	if len(ss) > worstShown {
		ss = ss[:worstShown]
	}
	for _, s := range ss {
		t.Logf("%s: %s:%d (%d words, %d colons, %d semicolons): %.70s…", kind, s.file, s.line, s.words, s.colons, s.semicolons, s.text)
	}
}

// commentFiles are the .go files under internal/ whose comments count,
// relative to the root.
func commentFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") || strings.HasPrefix(name, "zz_generated") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go file under internal/")
	}
	return files
}

// commentSentence is one sentence of a comment and what it holds.
type commentSentence struct {
	file       string
	line       int
	text       string
	words      int
	colons     int
	semicolons int
}

// chained reports whether a sentence chains clauses with its marks.
func (s commentSentence) chained() bool {
	return s.semicolons >= 2 || (s.colons >= 1 && s.semicolons >= 1) || s.colons >= 3
}

var (
	// directive is a comment line meant for a tool, from its text after
	// the //: a //word:word line (Go's rule) or //nolint.
	directive = regexp.MustCompile(`^(?:[a-z0-9]+:[a-z0-9]|nolint\b|line )`)
	// marker is a comment line that holds a marker such as +kubebuilder.
	marker = regexp.MustCompile(`^\+[a-zA-Z]`)
	// commentSentenceEnd is sentenceEnd with a small letter too: a
	// comment's sentence may start with a name, such as a parameter's.
	commentSentenceEnd = regexp.MustCompile("[.?!][)\"'*_]*\\s+[A-Za-z0-9`\\[(*_\"]")
	// clauseColon is a colon that joins clauses: a space or the end follows.
	clauseColon = regexp.MustCompile(`:(?:\s|$)`)
)

// fileSentences parses one file and returns the sentences of its comments.
// The source is src, or the file's content when src is nil.
func fileSentences(t *testing.T, file string, src []byte) []commentSentence {
	t.Helper()
	fset := token.NewFileSet()
	var in any
	if src != nil {
		in = src
	}
	f, err := parser.ParseFile(fset, filepath.Join(root, file), in, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []commentSentence
	for _, g := range f.Comments {
		for _, u := range commentUnits(fset, g) {
			out = append(out, u.sentences(file)...)
		}
	}
	return out
}

// commentLine is one line of a comment's text, markers removed.
type commentLine struct {
	line int
	text string
}

// groupLines returns the lines of a comment group, without the comment
// marks and the first space after //, and without directives. A license
// header gives no line.
func groupLines(fset *token.FileSet, g *ast.CommentGroup) []commentLine {
	var out []commentLine
	for _, c := range g.List {
		line := fset.Position(c.Pos()).Line
		if text, ok := strings.CutPrefix(c.Text, "//"); ok {
			if directive.MatchString(text) || marker.MatchString(strings.TrimSpace(text)) {
				continue
			}
			out = append(out, commentLine{line, strings.TrimPrefix(text, " ")})
			continue
		}
		text := strings.TrimSuffix(strings.TrimPrefix(c.Text, "/*"), "*/")
		if strings.Contains(text, "Licensed under the Apache License") {
			continue
		}
		for i, l := range strings.Split(text, "\n") {
			out = append(out, commentLine{line + i, l})
		}
	}
	return out
}

// commentUnit is a paragraph or a list item of a comment, its lines joined.
type commentUnit struct {
	text string
	// starts holds where each line starts in text.
	starts []lineStart
}

// lineStart is the offset in a unit's text where a line starts, and the
// line's number in its file.
type lineStart struct {
	offset, line int
}

// commentUnits splits a comment group into paragraphs and list items,
// code left out.
func commentUnits(fset *token.FileSet, g *ast.CommentGroup) []commentUnit {
	var (
		units  []commentUnit
		cur    commentUnit
		inItem bool
	)
	flush := func() {
		if cur.text != "" {
			units = append(units, cur)
		}
		cur, inItem = commentUnit{}, false
	}
	add := func(l commentLine, text string) {
		if cur.text != "" {
			cur.text += " "
		}
		cur.starts = append(cur.starts, lineStart{len(cur.text), l.line})
		cur.text += text
	}
	for _, l := range groupLines(fset, g) {
		text := strings.TrimSpace(l.text)
		indented := text != "" && strings.IndexFunc(l.text, func(r rune) bool { return r != ' ' && r != '\t' }) > 0
		switch m := listItem.FindString(l.text); {
		case text == "":
			flush()
		case m != "":
			flush()
			inItem = true
			add(l, strings.TrimSpace(l.text[len(m):]))
		case indented && inItem:
			add(l, text)
		case indented:
			// Code: an indented line outside a list item.
			flush()
		default:
			if inItem {
				flush()
			}
			add(l, text)
		}
	}
	flush()
	return units
}

// sentences splits a unit into sentences and measures them.
func (u commentUnit) sentences(file string) []commentSentence {
	// An inline code span becomes one word of the same length, so that the
	// offsets still find the lines.
	masked := inlineCode.ReplaceAllStringFunc(u.text, func(s string) string {
		return "`" + strings.Repeat("x", len(s)-2) + "`"
	})
	var out []commentSentence
	for _, b := range sentenceBounds(masked, commentSentenceEnd) {
		s := masked[b[0]:b[1]]
		n := countWords(s)
		if n == 0 {
			continue
		}
		// The sentence's line is that of its first word.
		first := b[0] + len(s) - len(strings.TrimLeft(s, " "))
		line := u.starts[0].line
		for _, st := range u.starts {
			if st.offset <= first {
				line = st.line
			}
		}
		out = append(out, commentSentence{
			file:       file,
			line:       line,
			text:       strings.TrimSpace(u.text[b[0]:b[1]]),
			words:      n,
			colons:     len(clauseColon.FindAllStringIndex(s, -1)),
			semicolons: strings.Count(s, ";"),
		})
	}
	return out
}

// TestCommentSentences holds the comment rule to examples.
func TestCommentSentences(t *testing.T) {
	type sentence struct {
		line, words int
		chained     bool
	}
	tests := map[string]struct {
		src  string
		want []sentence
	}{
		"directives and license left out": {
			src: "//go:build linux\n\n/*\nLicensed under the Apache License, Version 2.0; x: y.\n*/\n\n" +
				"// Package p does one thing.\n//\n// +kubebuilder:rbac:groups=x\npackage p\n\nvar x = 1 //nolint:gosec // one; two; three\n",
			want: []sentence{{7, 5, false}},
		},
		"lines joined, a small letter starts a sentence": {
			src:  "package p\n\n// F does\n// two things. x is the first one.\nfunc F(x int) {}\n",
			want: []sentence{{3, 4, false}, {4, 5, false}},
		},
		"list items apart, code left out": {
			src:  "package p\n\n// F decides:\n//\n//   - one case; of\n//     two lines: here\n//   - another\n//\n//     code()\nfunc F() {}\n",
			want: []sentence{{3, 2, false}, {5, 6, true}, {7, 1, false}},
		},
		"chains": {
			src:  "package p\n\n// A; b; c. D: e: f: g. H: i; j. K: l: m. See https://x.y/z; b.\nvar x int\n",
			want: []sentence{{3, 3, true}, {3, 4, true}, {3, 3, true}, {3, 3, false}, {3, 3, false}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []sentence
			for _, s := range fileSentences(t, "p.go", []byte(tc.src)) {
				got = append(got, sentence{s.line, s.words, s.chained()})
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
