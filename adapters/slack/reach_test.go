package slack

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/slack-go/slack"

	"openbot/core"
)

// TestApprovalShowsReach: an approval's blocks say what the tool can reach.
func TestApprovalShowsReach(t *testing.T) {
	q := core.Question{ID: 1, Kind: core.QuestionApproval, Text: "May I?", Tool: "shell",
		Args: json.RawMessage(`{"command":"ls"}`), Reach: "runs in the sandbox with network off & nothing else"}
	var text string
	for _, b := range questionPages(q, core.Sender{Handle: "engineer"})[0] {
		if s, ok := b.(*slack.SectionBlock); ok && s.Text != nil {
			text += s.Text.Text + "\n"
		}
	}
	if !strings.Contains(text, "*Reach:* runs in the sandbox with network off &amp; nothing else") {
		t.Errorf("blocks lack the reach:\n%s", text)
	}
	q.Reach = ""
	for _, b := range questionPages(q, core.Sender{Handle: "engineer"})[0] {
		if s, ok := b.(*slack.SectionBlock); ok && s.Text != nil && strings.Contains(s.Text.Text, "Reach") {
			t.Errorf("a question without reach shows %q", s.Text.Text)
		}
	}
}
