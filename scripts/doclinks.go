//go:build ignore

// Command doclinks checks the front page and the docs: README.md is at most
// 12,000 bytes, and every relative link in README.md and docs/*.md names a
// file of the repository and, after a #, a heading of that file (GitHub's
// anchors). Run it from the repository root: go run scripts/doclinks.go.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

const maxReadme = 12_000

// link matches a markdown link's target: [text](target); span matches an
// inline code span, whose brackets are code.
var (
	link = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	span = regexp.MustCompile("`[^`]*`")
)

func main() {
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		fail(err)
	}
	files = append([]string{"README.md"}, files...)
	var bad []string
	if fi, err := os.Stat("README.md"); err != nil {
		fail(err)
	} else if fi.Size() > maxReadme {
		bad = append(bad, fmt.Sprintf("README.md: %d bytes, more than %d: move detail to docs/", fi.Size(), maxReadme))
	}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			fail(err)
		}
		for _, m := range link.FindAllStringSubmatch(span.ReplaceAllString(stripCode(string(text)), ""), -1) {
			if msg := check(f, m[1]); msg != "" {
				bad = append(bad, f+": "+msg)
			}
		}
	}
	for _, b := range bad {
		fmt.Println(b)
	}
	if len(bad) > 0 {
		os.Exit(1)
	}
}

// check returns why target, a link in file from, is broken, or "".
func check(from, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, _ := strings.Cut(target, "#")
	file := from
	if path != "" {
		file = filepath.Join(filepath.Dir(from), path)
		if _, err := os.Stat(file); err != nil {
			return fmt.Sprintf("link %q: no file %s", target, file)
		}
	}
	if anchor == "" || !strings.HasSuffix(file, ".md") {
		return ""
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("link %q: %v", target, err)
	}
	for _, h := range headings(string(text)) {
		if h == anchor {
			return ""
		}
	}
	return fmt.Sprintf("link %q: %s has no heading #%s", target, file, anchor)
}

// headings returns the anchors GitHub gives the headings of a markdown text:
// lower case, punctuation dropped, spaces as hyphens, "-1", "-2" … for repeats.
func headings(text string) []string {
	seen := map[string]int{}
	var out []string
	for _, line := range strings.Split(stripCode(text), "\n") {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimSpace(strings.TrimLeft(h, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, n))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out
}

// stripCode blanks the fenced code blocks of a markdown text, whose lines
// are neither headings nor links.
func stripCode(text string) string {
	lines := strings.Split(text, "\n")
	in := false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			in = !in
			lines[i] = ""
		} else if in {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "doclinks:", err)
	os.Exit(2)
}
