package feishu

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/format")

// TestFormatGolden converts every testdata/format/*.md and compares it with the .card
// file next to it. Run with -update to rewrite the goldens after a change.
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
			golden := strings.TrimSuffix(in, ".md") + ".card"
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
		{"# Title", "**Title**"},
		{"### **Bold** title ##", "**Bold** title"},
		{"* a", "- a"},
		{"  + b", "  - b"},
		{"- [ ] todo", "- ☐ todo"},
		{"__b__ and snake__case__x", "**b** and snake__case__x"},
		{"a <b> c", "a &#60;b> c"},
		{"`<b>` <b>", "`<b>` &#60;b>"},
		{"![alt](http://x/y.png)", "[alt](http://x/y.png)"},
		{"___", "---"},
		{"plain text", "plain text"},
		{"unclosed `tick <", "unclosed `tick &#60;"},
	}
	for _, tt := range tests {
		if got := Format(tt.in); got != tt.want {
			t.Errorf("Format(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCard(t *testing.T) {
	var c struct {
		Schema string
		Config struct {
			UpdateMulti bool `json:"update_multi"`
		}
		Body struct {
			Elements []struct{ Tag, Content string }
		}
	}
	if err := json.Unmarshal([]byte(Card("**hi** \"there\"")), &c); err != nil {
		t.Fatal(err)
	}
	if c.Schema != "2.0" || !c.Config.UpdateMulti || len(c.Body.Elements) != 1 ||
		c.Body.Elements[0].Tag != "markdown" || c.Body.Elements[0].Content != "**hi** \"there\"" {
		t.Errorf("Card = %+v", c)
	}
}
