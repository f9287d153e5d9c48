package e2e

import "testing"

// TestSlackQuietThreadTwoPeopleNoRun: once two people talk in a Slack channel
// thread, their replies that mention no bot start no run (quiet threads); in a
// DM, a message without a mention still starts one.
func TestSlackQuietThreadTwoPeopleNoRun(t *testing.T) {
	r := startSlack(t, nil)
	const root = "1767226000.000100"
	r.post(t, slackEvent(t, "app_mention", "C0TEST001", "channel", "U0TEST001", root, "", "<@U0TESTBOT> let's plan the release"))
	r.idle()
	if n := len(r.agent.runs("chief_of_staff")); n != 1 {
		t.Fatalf("the mention ran the default bot %d times, want 1", n)
	}
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0TEST002", "1767226000.000200", root, "I can take the notes"))
	r.idle()
	r.post(t, slackEvent(t, "message", "C0TEST001", "channel", "U0TEST001", "1767226000.000300", root, "thanks, see you at three"))
	r.idle()
	if n := len(r.agent.runs("chief_of_staff")); n != 1 {
		t.Errorf("two people talking without mentions ran the default bot %d times in all, want 1", n)
	}
	r.dm(t, "1767226100.000100", "", "what is on my plate today?")
	r.dm(t, "1767226100.000200", "", "and tomorrow?")
	if n := len(r.agent.runs("chief_of_staff")); n != 3 {
		t.Errorf("two DM messages without mentions: the default bot ran %d times in all, want 3", n)
	}
}
