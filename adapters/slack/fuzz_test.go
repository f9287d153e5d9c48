package slack

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzSplit(f *testing.F) {
	f.Add("hello\n\n```\ncode\n```\n\nbye", 20)
	f.Add(strings.Repeat("word ", 50)+"\n```\n"+strings.Repeat("x\n", 40)+"```", 30)
	f.Add("```unclosed\nblock", 16)
	f.Fuzz(func(t *testing.T, text string, limit int) {
		if !utf8.ValidString(text) || limit < 16 || limit > 5000 {
			t.Skip()
		}
		chunks := Split(text, limit)
		for i, c := range chunks {
			if n := utf8.RuneCountInString(c); n > limit {
				t.Fatalf("chunk %d has %d runes > %d", i, n, limit)
			}
		}
		squash := func(s string) string {
			return strings.Join(strings.Fields(strings.ReplaceAll(s, "```", "")), "")
		}
		if squash(strings.Join(chunks, "\n")) != squash(text) {
			t.Fatalf("text changed by Split(%q, %d) = %q", text, limit, chunks)
		}
	})
}

func FuzzFormat(f *testing.F) {
	for _, s := range []string{"**b** _i_ `c` [l](u)", "# h\n- a\n> q\n```\nx < y\n```", "| a |\n|---|\n| b |"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, md string) {
		if !utf8.ValidString(md) {
			t.Skip()
		}
		out := Format(md)
		// Every < or > left in the output belongs to a link Format wrote or a quote
		// marker at the start of a line.
		for _, line := range strings.Split(out, "\n") {
			line = strings.TrimPrefix(line, "> ")
			rest := autolinkOrLink().ReplaceAllString(line, "")
			if strings.ContainsAny(rest, "<>") {
				t.Fatalf("Format(%q) left a raw < or > in %q", md, line)
			}
		}
	})
}

func BenchmarkFormat(b *testing.B) {
	md := strings.Repeat("# Title\n\nSome **bold** and _italic_ text with `code` and [a link](https://e.com).\n\n- item one\n- item two\n\n```go\nfunc main() { if a < b {} }\n```\n\n", 40)
	b.SetBytes(int64(len(md)))
	for b.Loop() {
		Format(md)
	}
}

func BenchmarkSplit(b *testing.B) {
	text := Format(strings.Repeat("A paragraph of reasonable length that keeps going for a while.\n\n```\ncode line\ncode line\n```\n\n", 200))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		Split(text, MaxChunk)
	}
}
