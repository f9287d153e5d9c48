package openbot_test

import (
	"encoding/json"
	"testing"
)

// slackEvent is an Events API callback for one message event, as Slack sends it.
func slackEvent(t *testing.T, typ, channel, channelType, user, ts, threadTS, text string) []byte {
	t.Helper()
	ev := map[string]any{"type": typ, "channel": channel, "user": user, "ts": ts, "text": text, "team": "T0TEST", "event_ts": ts}
	if channelType != "" {
		ev["channel_type"] = channelType
	}
	if threadTS != "" {
		ev["thread_ts"] = threadTS
	}
	b, err := json.Marshal(map[string]any{
		"token": "TESTverificationTOKEN000", "team_id": "T0TEST", "api_app_id": "A0TESTAPP",
		"type": "event_callback", "event_id": "Ev" + ts, "event_time": 1767225600, "event": ev,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSlackAppMentionIsTransport: on a whole-team app, "@app @engineer fix X" wakes
// the engineer alone (the app mention is how the message came in), in both the
// app_mention and the message copy Slack sends; "@app fix X" wakes the default bot.
func TestSlackAppMentionIsTransport(t *testing.T) {
	r := startSlack(t, nil)
	for _, typ := range []string{"app_mention", "message"} {
		if code := r.post(t, slackEvent(t, typ, "C0TEST001", "channel", "U0TEST001", "1767225800.000100", "", "<@U0TESTBOT> @engineer fix the build")); code != 200 {
			t.Fatalf("POST = %d", code)
		}
	}
	r.idle(t)
	if n := len(r.agent.runs("chief_of_staff")); n != 0 {
		t.Errorf("the default bot ran %d times for a message naming @engineer, want 0", n)
	}
	if n := len(r.agent.runs("engineer")); n != 1 {
		t.Errorf("engineer ran %d times, want 1", n)
	}
	r.post(t, slackEvent(t, "app_mention", "C0TEST001", "channel", "U0TEST001", "1767225900.000100", "", "<@U0TESTBOT> fix the build"))
	r.idle(t)
	if n := len(r.agent.runs("chief_of_staff")); n != 1 {
		t.Errorf("the app mention alone ran the default bot %d times, want 1", n)
	}
}
