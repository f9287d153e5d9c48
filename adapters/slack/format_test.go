package slack

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/format")

// TestFormatGolden converts every testdata/format/*.md and compares it with the
// .mrkdwn file next to it. Run with -update to rewrite the goldens after a change.
func TestFormatGolden(t *testing.T) {
	inputs, err := filepath.Glob(filepath.Join("testdata", "format", "*.md"))
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no golden inputs: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".md")
		t.Run(name, func(t *testing.T) {
			md, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			got := Format(string(md))
			golden := strings.TrimSuffix(in, ".md") + ".mrkdwn"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("Format(%s) mismatch\n--- got ---\n%s\n--- want ---\n%s", in, got, want)
			}
		})
	}
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
