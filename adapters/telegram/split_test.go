package telegram

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// longReply builds about n characters of model output mixing Latin, CJK, emoji
// (surrogate pairs), Markdown emphasis, code blocks and paragraphs.
func longReply(n int) string {
	pieces := []string{
		"The **deploy** is blocked by `test_migrations` < 3 & > 1. ",
		"发布说明已经准备好了，请检查每一个功能和修复。",
		"Emoji 👋🏽🚀🇺🇳 keep their surrogate pairs. ",
		"*Italic with 中文 inside* and a [link](https://example.com/?a=1&b=2). ",
		"\n\n",
		"```go\nfunc f() { return a < b }\n```\n",
		"- bullet with 🎉\n",
		"没有空格的长句子没有空格的长句子没有空格的长句子没有空格的长句子。",
	}
	var b strings.Builder
	for i := 0; utf8.RuneCountInString(b.String()) < n; i++ {
		b.WriteString(pieces[i%len(pieces)])
	}
	return b.String()
}

func TestSplitLongReply(t *testing.T) {
	md := longReply(10000)
	if utf8.RuneCountInString(md) < 10000 {
		t.Fatal("reply too short")
	}
	html := Format(md)
	parts := Split(html, MaxMessageLen)
	if len(parts) < 3 {
		t.Fatalf("got %d parts for %d UTF-16 units; want at least 3", len(parts), UTF16Len(html))
	}
	var joined strings.Builder
	for i, p := range parts {
		if n := UTF16Len(p); n > MaxMessageLen {
			t.Errorf("part %d is %d UTF-16 units, over %d", i, n, MaxMessageLen)
		}
		if !utf8.ValidString(p) {
			t.Errorf("part %d is not valid UTF-8 (a cut inside a rune)", i)
		}
		assertBalanced(t, p)
		assertNoBrokenEntity(t, p)
		joined.WriteString(PlainText(p))
	}
	if got, want := joined.String(), PlainText(html); got != want {
		t.Errorf("joined parts differ from the whole: got %d bytes, want %d", len(got), len(want))
	}
}

func TestSplitCJKWithoutBreaks(t *testing.T) {
	text := strings.Repeat("没有空格", 3000) // 12,000 BMP runes, no break opportunity
	parts := Split(text, MaxMessageLen)
	if len(parts) != 3 {
		t.Fatalf("got %d parts, want 3", len(parts))
	}
	if strings.Join(parts, "") != text {
		t.Error("joined parts differ")
	}
	for i, p := range parts {
		if n := UTF16Len(p); n > MaxMessageLen {
			t.Errorf("part %d is %d units", i, n)
		}
	}
}

func TestSplitEmojiOnly(t *testing.T) {
	text := strings.Repeat("😀", 5000) // 10,000 UTF-16 units
	parts := Split(text, MaxMessageLen)
	if strings.Join(parts, "") != text {
		t.Fatal("joined parts differ")
	}
	for i, p := range parts {
		if n := UTF16Len(p); n > MaxMessageLen || n%2 != 0 {
			t.Errorf("part %d is %d units (want even, <= %d)", i, n, MaxMessageLen)
		}
	}
}

func TestSplitPrefersBreaks(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"fits", "short", []string{"short"}},
		{"paragraph", "aaaaaaaa\nbb\n\ncccc dd", []string{"aaaaaaaa\nbb\n\n", "cccc dd"}},
		{"line", "aaaaaaaa bb\ncccc dd", []string{"aaaaaaaa bb\n", "cccc dd"}},
		{"space", "aaaaaaaa bbbbbb cccc", []string{"aaaaaaaa bbbbbb ", "cccc"}},
		{"cjk clause", "中文中文中文中文，中文中文中文中文", []string{"中文中文中文中文，", "中文中文中文中文"}},
		{"hard", "abcdefghijklmnopqrstuvwxyz", []string{"abcdefghijklmnop", "qrstuvwxyz"}},
		{"entity kept whole", "aaaaaaaaaaaaaa&amp;bb", []string{"aaaaaaaaaaaaaa", "&amp;bb"}},
		{"tag reopened", "<b>aaaaaaa bbbbbbbbbbbbbb</b>", []string{"<b>aaaaaaa </b>", "<b>bbbbbbbbb</b>", "<b>bbbbb</b>"}},
		{"surrogate pair", "aaaaaaaaaaaaaaa😀b", []string{"aaaaaaaaaaaaaaa", "😀b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Split(tt.in, 16)
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("Split(%q, 16) = %q, want %q", tt.in, got, tt.want)
			}
			for _, p := range got {
				if UTF16Len(p) > 16 {
					t.Errorf("part %q over 16 units", p)
				}
			}
		})
	}
}

func TestSplitPreWithLanguage(t *testing.T) {
	code := strings.Repeat("x := a &lt; b\n", 40)
	html := `<pre><code class="language-go">` + code + `</code></pre>`
	parts := Split(html, 200)
	if len(parts) < 3 {
		t.Fatalf("got %d parts", len(parts))
	}
	for i, p := range parts {
		if !strings.HasPrefix(p, `<pre><code class="language-go">`) || !strings.HasSuffix(p, "</code></pre>") {
			t.Errorf("part %d does not reopen and close the code block: %q", i, p)
		}
		if UTF16Len(p) > 200 {
			t.Errorf("part %d too long", i)
		}
		assertBalanced(t, p)
	}
	var joined strings.Builder
	for _, p := range parts {
		joined.WriteString(PlainText(p))
	}
	if joined.String() != PlainText(html) {
		t.Error("code changed by splitting")
	}
}

func assertNoBrokenEntity(t *testing.T, p string) {
	t.Helper()
	for i := 0; i < len(p); i++ {
		if p[i] != '&' {
			continue
		}
		ok := false
		for _, e := range []string{"&lt;", "&gt;", "&amp;", "&quot;"} {
			if strings.HasPrefix(p[i:], e) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("broken entity at %d: %q", i, p[i:min(len(p), i+8)])
		}
	}
}

// UTF16Len reports the length of s in UTF-16 code units, the unit of Telegram's
// message limit and entity offsets.
func UTF16Len(s string) int { return utf16Len(s) }
