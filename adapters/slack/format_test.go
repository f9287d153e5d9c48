package slack

import (
	"path/filepath"
	"testing"

	"openbot/internal/golden"
)

// TestFormatGolden converts every testdata/format/*.md and compares it with the
// .mrkdwn file next to it (internal/golden; -update rewrites the goldens).
func TestFormatGolden(t *testing.T) {
	golden.Run(t, filepath.Join("testdata", "format"), ".md", ".mrkdwn", Format)
}

func TestFormatInline(t *testing.T) {
	tests := []struct{ in, want string }{
		{"**bold**", "*bold*"},
		{"__bold__", "*bold*"},
		{"*it*", "_it_"},
		{"_it_", "_it_"},
		{"***both***", "*_both_*"},
		{"~~gone~~", "~gone~"},
		{"snake_case_name", "snake_case_name"},
		{"2 * 3 * 4", "2 * 3 * 4"},
		{"`**x**`", "`**x**`"},
		{"a < b & c > d", "a &lt; b &amp; c &gt; d"},
		{"[x](https://e.com/?a=1&b=2)", "<https://e.com/?a=1&amp;b=2|x>"},
		{"[**b**](https://e.com)", "<https://e.com|*b*>"},
		{"<https://e.com>", "<https://e.com>"},
		{"<@U123>", "&lt;@U123&gt;"},
		{"# Title", "*Title*"},
		{"## **Bold** title", "*Bold title*"},
		{"- item", "• item"},
		{"> quote", "> quote"},
		{"unclosed **bold", "unclosed **bold"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
