package markdown

import "testing"

func TestEmphasis(t *testing.T) {
	for _, tt := range []struct {
		s     string
		c     byte
		run   int
		inner string
		ok    bool
	}{
		{"**bold** rest", '*', 2, "bold", true},
		{"*it* x", '*', 1, "it", true},
		{"_it_", '_', 1, "it", true},
		{"snake_case_name", '_', 0, "", false}, // starts inside a word at i=5
		{"~~gone~~", '~', 2, "gone", true},
		{"~one~", '~', 0, "", false},
		{"** not**", '*', 0, "", false},
		{"*a `*` b*", '*', 1, "a `*` b", true},
	} {
		i := 0
		if tt.s == "snake_case_name" {
			i = 5
		}
		run, inner, _, ok := Emphasis(tt.s, i, tt.c)
		if ok != tt.ok || run != tt.run || inner != tt.inner {
			t.Errorf("Emphasis(%q) = %d %q %v, want %d %q %v", tt.s, run, inner, ok, tt.run, tt.inner, tt.ok)
		}
	}
}

func TestLink(t *testing.T) {
	label, url, n, ok := Link(`[the docs](https://x.io/a "Title") after`)
	if !ok || label != "the docs" || url != "https://x.io/a" || n != len(`[the docs](https://x.io/a "Title")`) {
		t.Errorf("Link = %q %q %d %v", label, url, n, ok)
	}
	for _, s := range []string{"[no target]", "[a](<>)", "[`code`](x)", "[open(x"} {
		if _, _, _, ok := Link(s); ok {
			t.Errorf("Link(%q) matched", s)
		}
	}
}

func TestFencesAndTables(t *testing.T) {
	if f, lang, ok := OpeningFence("```go"); !ok || f != "```" || lang != "go" {
		t.Errorf("OpeningFence(```go) = %q %q %v", f, lang, ok)
	}
	if f, lang, ok := OpeningFence("~~~~ we!rd lang"); !ok || f != "~~~~" || lang != "" {
		t.Errorf("OpeningFence(~~~~) = %q %q %v", f, lang, ok)
	}
	if _, _, ok := OpeningFence("```x```"); ok {
		t.Error("inline ```x``` taken for a fence")
	}
	if !ClosingFence("````  ", "```") || ClosingFence("~~~", "```") || ClosingFence("``` x", "```") {
		t.Error("ClosingFence wrong")
	}
	if !TableLine(" | a | b |") || TableLine("|") || !TableSeparator("|---|:--:|") || TableSeparator("| a |") {
		t.Error("table detection wrong")
	}
}

func TestParseLine(t *testing.T) {
	for _, tt := range []struct {
		in     string
		kind   LineKind
		text   string
		marker string
	}{
		{"---", Rule, "", ""},
		{"## A **bold** title ##", Heading, "A bold title", ""},
		{"  - item", Bullet, "item", "• "},
		{"- [x] done", Bullet, "done", "☑ "},
		{"* [ ] todo", Bullet, "todo", "☐ "},
		{"12) twelfth", Ordered, "twelfth", "12. "},
		{"> quoted", Quote, "quoted", ""},
		{"plain -not a list", Text, "plain -not a list", ""},
	} {
		l := ParseLine(tt.in)
		if l.Kind != tt.kind || l.Text != tt.text || l.Marker() != tt.marker {
			t.Errorf("ParseLine(%q) = %+v marker %q, want kind %d text %q marker %q", tt.in, l, l.Marker(), tt.kind, tt.text, tt.marker)
		}
	}
	if l := ParseLine("  - item"); l.Indent != "  " {
		t.Errorf("indent = %q", l.Indent)
	}
}

func TestBlocks(t *testing.T) {
	md := "intro\r\n```go\nx := 1\n```\n| a | b |\n|---|---|\n| 1 | 2 |\nafter\n~~~\nunclosed"
	bs := Blocks(md)
	want := []struct {
		kind  BlockKind
		lang  string
		lines int
	}{{TextBlock, "", 1}, {CodeBlock, "go", 1}, {TableBlock, "", 3}, {TextBlock, "", 1}, {CodeBlock, "", 1}}
	if len(bs) != len(want) {
		t.Fatalf("blocks = %+v", bs)
	}
	for i, w := range want {
		if bs[i].Kind != w.kind || bs[i].Lang != w.lang || len(bs[i].Lines) != w.lines {
			t.Errorf("block %d = %+v, want %+v", i, bs[i], w)
		}
	}
	if bs[0].Lines[0] != "intro" || bs[1].Lines[0] != "x := 1" || bs[4].Lines[0] != "unclosed" {
		t.Errorf("lines: %q %q %q", bs[0].Lines, bs[1].Lines, bs[4].Lines)
	}
}

// bracket renders spans visibly, to test the walk independently of a platform.
type bracket struct{}

func (bracket) Text(s string) string     { return s }
func (bracket) Code(c string) string     { return "{code:" + c + "}" }
func (bracket) Link(l, u string) string  { return "{link:" + l + "|" + u + "}" }
func (bracket) Autolink(u string) string { return "{auto:" + u + "}" }
func (bracket) Emphasis(k Emph, in string) string {
	return "{" + [...]string{"i", "b", "bi", "s"}[k] + ":" + in + "}"
}

func TestInline(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"a **b _c_** d", "a {b:b {i:c}} d"},
		{"see [the *docs*](https://x.io) or <https://y.io>", "see {link:the {i:docs}|https://x.io} or {auto:https://y.io}"},
		{"`**not bold**` and \\*lit\\*", "{code:**not bold**} and *lit*"},
		{"~~gone~~ ***both***", "{s:gone} {bi:both}"},
		{"snake_case_name stays", "snake_case_name stays"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"``` lone", "``` lone"},
	} {
		if got := Inline(tt.in, bracket{}); got != tt.want {
			t.Errorf("Inline(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
