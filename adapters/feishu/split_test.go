package feishu

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplitShortUnchanged(t *testing.T) {
	in := "hello\n\n\nworld"
	if got := Split(in, 100); len(got) != 1 || got[0] != in {
		t.Errorf("Split = %q", got)
	}
}

func TestSplitParagraphs(t *testing.T) {
	p := strings.Repeat("a", 30)
	got := Split(p+"\n\n"+p+"\n\n"+p, 70)
	want := []string{p + "\n\n" + p, p}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("Split = %q, want %q", got, want)
	}
}

func TestSplitKeepsCodeBlock(t *testing.T) {
	code := "```go\nx := 1\ny := 2\n```"
	in := strings.Repeat("w ", 20) + "\n\n" + code + "\n\nafter"
	got := Split(in, 45)
	found := false
	for _, c := range got {
		if strings.Contains(c, code) {
			found = true
		}
	}
	if !found {
		t.Errorf("code block was cut: %q", got)
	}
}

func TestSplitLongCodeReopensFence(t *testing.T) {
	var lines []string
	for range 30 {
		lines = append(lines, "line of code")
	}
	in := "```sh\n" + strings.Join(lines, "\n") + "\n```"
	got := Split(in, 80)
	if len(got) < 2 {
		t.Fatalf("got %d chunks", len(got))
	}
	total := 0
	for _, c := range got {
		if !strings.HasPrefix(c, "```sh\n") || !strings.HasSuffix(c, "\n```") {
			t.Errorf("chunk not fenced: %q", c)
		}
		total += strings.Count(c, "line of code")
	}
	if total != 30 {
		t.Errorf("lost lines: %d", total)
	}
}

func TestSplitLimits(t *testing.T) {
	in := strings.Repeat("字", 100) + " " + strings.Repeat("word ", 50) + "\n" + strings.Repeat("x", 200)
	for _, limit := range []int{32, 50, 77} {
		got := Split(in, limit)
		joined := strings.ReplaceAll(strings.Join(got, ""), " ", "")
		if want := strings.ReplaceAll(strings.ReplaceAll(in, " ", ""), "\n", ""); strings.ReplaceAll(joined, "\n", "") != want {
			t.Errorf("limit %d: content changed", limit)
		}
		for _, c := range got {
			if n := utf8.RuneCountInString(c); n > limit {
				t.Errorf("limit %d: chunk of %d runes", limit, n)
			}
		}
	}
}
