package telegram

import (
	"testing"

	"openbot/core"
)

// TestSetBots: a configuration reload gives a whole-team account the new team, so
// its replies from an added bot are attributed to that bot.
func TestSetBots(t *testing.T) {
	a, err := New(Options{Name: "team", Bot: "*", Token: "t", Engine: newFakeEngine(), Cursors: newFakeCursors(),
		Bots: []core.BotProfile{{Handle: "engineer", Name: "Engineer"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := a.speakerOf("Designer\nhere is the logo"); got != "" {
		t.Fatalf("speaker before the reload = %q, want none", got)
	}
	a.SetBots([]core.BotProfile{{Handle: "engineer", Name: "Engineer"}, {Handle: "designer", Name: "Designer"}})
	if got := a.speakerOf("Designer\nhere is the logo"); got != "designer" {
		t.Fatalf("speaker after the reload = %q, want designer", got)
	}
}
