package slack

import (
	"testing"

	"openbot/core"
)

// TestSetBots: a configuration reload gives the adapter the new team, so the
// "@handle" of an added bot is a mention and a removed one's is not.
func TestSetBots(t *testing.T) {
	a, err := New(Options{Name: "a", BotToken: "xoxb", AppToken: "xapp", Engine: newFakeEngine(),
		Bots: []core.BotProfile{{Handle: "engineer"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !a.mentionsBot("@engineer fix it") || a.mentionsBot("@designer draw it") {
		t.Fatal("the configured team is not what New was given")
	}
	a.SetBots([]core.BotProfile{{Handle: "designer"}})
	if !a.mentionsBot("@designer draw it") || a.mentionsBot("@engineer fix it") {
		t.Fatal("SetBots did not replace the team")
	}
}
