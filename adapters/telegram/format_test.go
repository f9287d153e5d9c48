package telegram

import (
	"path/filepath"
	"testing"

	"openbot/internal/golden"
)

// TestFormatGolden converts every testdata/format/*.md and compares it with the
// .html file next to it (internal/golden; -update rewrites the goldens).
func TestFormatGolden(t *testing.T) {
	golden.Run(t, filepath.Join("testdata", "format"), ".md", ".html", Format, assertBalanced)
}

func TestFormat(t *testing.T) {
	tests := []struct{ in, want string }{
		{"**bold**", "<b>bold</b>"},
		{"__bold__", "<b>bold</b>"},
		{"*it*", "<i>it</i>"},
		{"_it_", "<i>it</i>"},
		{"***both***", "<b><i>both</i></b>"},
		{"~~gone~~", "<s>gone</s>"},
		{"snake_case_name", "snake_case_name"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{"`**x** <y>`", "<code>**x** &lt;y&gt;</code>"},
		{"a < b & c > d", "a &lt; b &amp; c &gt; d"},
		{"<b>raw</b>", "&lt;b&gt;raw&lt;/b&gt;"},
		{"[x](https://e.com/?a=1&b=2)", `<a href="https://e.com/?a=1&amp;b=2">x</a>`},
		{`[x](https://e.com/"onclick)`, `<a href="https://e.com/&quot;onclick">x</a>`},
		{"[**b**](https://e.com)", `<a href="https://e.com"><b>b</b></a>`},
		{"<https://e.com>", `<a href="https://e.com">https://e.com</a>`},
		{"# Title", "<b>Title</b>"},
		{"- item", "• item"},
		{"> quote", "<blockquote>quote</blockquote>"},
		{"```go\nx := 1 < 2\n```", `<pre><code class="language-go">x := 1 &lt; 2</code></pre>`},
		{"```\nplain\n```", "<pre>plain</pre>"},
		{"```\nunclosed", "<pre>unclosed</pre>"},
		{"unclosed **bold", "unclosed **bold"},
		{"bad \xff byte", "bad \uFFFD byte"},
		{"", ""},
	}
	for _, tt := range tests {
		got := Format(tt.in)
		if got != tt.want {
			t.Errorf("Format(%q) = %q, want %q", tt.in, got, tt.want)
		}
		assertBalanced(t, got)
	}
}

func TestPlainText(t *testing.T) {
	got := PlainText(`<b>a &lt; b</b> &amp; <a href="https://e.com/?a=1&amp;b=2">"c"</a> &quot;`)
	if want := `a < b & "c" "`; got != want {
		t.Errorf("PlainText = %q, want %q", got, want)
	}
}

// assertBalanced fails unless every tag in html is closed in order.
func assertBalanced(t *testing.T, html string) {
	t.Helper()
	var stack []string
	for _, tok := range tokenize(html) {
		if tok.kind != tokTag {
			continue
		}
		name, closing := tagName(tok.s)
		if !closing {
			stack = append(stack, name)
			continue
		}
		if len(stack) == 0 || stack[len(stack)-1] != name {
			t.Errorf("unbalanced </%s> in %q", name, html)
			return
		}
		stack = stack[:len(stack)-1]
	}
	if len(stack) > 0 {
		t.Errorf("unclosed %v in %q", stack, html)
	}
}
