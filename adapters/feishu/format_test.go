package feishu

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"openbot/internal/golden"
)

// TestFormatGolden converts every testdata/format/*.md and compares it with the
// .card file next to it (internal/golden; -update rewrites the goldens).
func TestFormatGolden(t *testing.T) {
	golden.Run(t, filepath.Join("testdata", "format"), ".md", ".card", Format)
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
