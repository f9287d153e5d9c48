package slack

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkChunks asserts the invariants every Split result keeps: no chunk above limit,
// every chunk with balanced ``` fences, and the text (ignoring whitespace and the
// fences Split may add) intact and in order.
func checkChunks(t *testing.T, text string, limit int, chunks []string) {
	t.Helper()
	for i, c := range chunks {
		if n := utf8.RuneCountInString(c); n > limit {
			t.Errorf("chunk %d has %d runes, limit %d", i, n, limit)
		}
		if strings.Count(c, "```")%2 != 0 {
			t.Errorf("chunk %d has unbalanced fences:\n%s", i, c)
		}
		if strings.TrimSpace(c) == "" {
			t.Errorf("chunk %d is blank", i)
		}
	}
	squash := func(s string) string {
		s = strings.ReplaceAll(s, "```", "")
		return strings.Join(strings.Fields(s), "")
	}
	if got, want := squash(strings.Join(chunks, "\n")), squash(text); got != want {
		t.Errorf("joined chunks lost or reordered text: got %d chars, want %d", len(got), len(want))
	}
}

func words(rng *rand.Rand, n int) string {
	vocab := []string{"build", "failed", "on", "main", "the", "migration", "test", "*bold*", "_it_", "`code`", "<https://e.com|link>", "αβγ", "日本語", "&amp;"}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(vocab[rng.IntN(len(vocab))])
	}
	return b.String()
}

func TestSplitShortTextUnchanged(t *testing.T) {
	in := "hello\n\n```\ncode\n```"
	got := Split(in, MaxChunk)
	if len(got) != 1 || got[0] != in {
		t.Fatalf("Split(short) = %q, want [%q]", got, in)
	}
}

// TestSplitNineThousandWithCodeBlock: a 9,000-character reply with a code block
// becomes several messages, none cut inside the block.
func TestSplitNineThousandWithCodeBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var code strings.Builder
	code.WriteString("```\n")
	for i := 0; code.Len() < 2500; i++ {
		fmt.Fprintf(&code, "line %03d: if a &lt; b { return err }\n", i)
	}
	code.WriteString("```")
	var parts []string
	for len(strings.Join(parts, "\n\n")) < 3000 {
		parts = append(parts, words(rng, 40))
	}
	parts = append(parts, code.String())
	for len(strings.Join(parts, "\n\n")) < 9000 {
		parts = append(parts, words(rng, 40))
	}
	text := strings.Join(parts, "\n\n")

	chunks := Split(text, MaxChunk)
	if len(chunks) < 3 {
		t.Fatalf("got %d chunks for %d chars, want at least 3", len(chunks), len(text))
	}
	checkChunks(t, text, MaxChunk, chunks)
	holding := 0
	for _, c := range chunks {
		if strings.Contains(c, code.String()) {
			holding++
		}
	}
	if holding != 1 {
		t.Errorf("code block appears whole in %d chunks, want 1", holding)
	}
}

func TestSplitOversizedCodeBlockReopensFences(t *testing.T) {
	var b strings.Builder
	b.WriteString("intro\n\n```\n")
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&b, "row %04d some code here\n", i)
	}
	b.WriteString("```\n\noutro")
	text := b.String()
	chunks := Split(text, 1000)
	if len(chunks) < 9 {
		t.Fatalf("got %d chunks, want at least 9", len(chunks))
	}
	checkChunks(t, text, 1000, chunks)
	for i, c := range chunks[1 : len(chunks)-1] {
		if !strings.HasPrefix(c, "```") || !strings.HasSuffix(c, "```") {
			t.Errorf("middle chunk %d is not a closed code block: %.40q…", i+1, c)
		}
	}
}

func TestSplitLongLineAndLongWord(t *testing.T) {
	text := strings.Repeat("word ", 900) + strings.Repeat("x", 5000) + " tail"
	chunks := Split(text, 1000)
	checkChunks(t, text, 1000, chunks)
}

func TestSplitProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for iter := 0; iter < 300; iter++ {
		var parts []string
		for n := rng.IntN(12) + 1; n > 0; n-- {
			switch rng.IntN(4) {
			case 0:
				var lines []string
				for k := rng.IntN(60) + 1; k > 0; k-- {
					lines = append(lines, words(rng, rng.IntN(12)))
				}
				parts = append(parts, "```\n"+strings.Join(lines, "\n")+"\n```")
			case 1:
				parts = append(parts, strings.Repeat("y", rng.IntN(700)+1))
			default:
				var lines []string
				for k := rng.IntN(5) + 1; k > 0; k-- {
					lines = append(lines, words(rng, rng.IntN(80)+1))
				}
				parts = append(parts, strings.Join(lines, "\n"))
			}
		}
		sep := []string{"\n", "\n\n", "\n\n\n"}[rng.IntN(3)]
		text := strings.Join(parts, sep)
		limit := 100 + rng.IntN(1500)
		chunks := Split(text, limit)
		checkChunks(t, text, limit, chunks)
		// every code block that fits is whole in one chunk
		for _, p := range parts {
			if strings.HasPrefix(p, "```") && utf8.RuneCountInString(p) <= limit {
				found := false
				for _, c := range chunks {
					if strings.Contains(c, p) {
						found = true
					}
				}
				if !found {
					t.Fatalf("iter %d: a %d-rune code block fitting limit %d was cut", iter, utf8.RuneCountInString(p), limit)
				}
			}
		}
		if t.Failed() {
			t.Fatalf("iter %d failed (limit %d)", iter, limit)
		}
	}
}
