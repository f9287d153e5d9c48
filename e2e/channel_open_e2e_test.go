package e2e

// End-to-end tests of channel mode open: in a channel whose policy says open
// the bots answer messages that mention none of them, on each platform, through
// the real engine, agents, store and adapter against the platform's fake; bots'
// messages are never answered.

import (
	"encoding/json"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram"
	"openbot/core"
)

// TestSlackOpenChannel: after an owner's /policy mode=open, a top-level post
// that mentions no bot starts a thread the channel's default bot answers, and
// another person's unaddressed reply in it is answered too; the same post in a
// mention_only channel, another app's bot_message and this app's own message
// start nothing.
func TestSlackOpenChannel(t *testing.T) {
	r := slackPeopleRig(t, []core.ActorID{slackActor(slackAlice)}, nil)
	self := "<@" + slacktest.DefaultBotUser + "> "
	r.post(t, "C0TEST001", slackAlice, "1767226000.000100", "", self+"/policy mode=open default_bot=engineer")
	if notes := r.ephemerals(t, slackAlice, 1); len(notes) != 1 || !strings.Contains(notes[0], "mode=open") {
		t.Fatalf("alice's /policy: %q", notes)
	}
	const root = "1767226001.000100"
	r.post(t, "C0TEST001", slackCarol, root, "", "the build is red, any idea?")
	r.idle()
	if !r.replied(root, "engineer: nothing to run here") {
		t.Fatal("no reply in the open channel's new thread")
	}
	r.post(t, "C0TEST001", slackBob, "1767226002.000100", root, "I see it too")
	r.idle()
	if n := len(engineerRequests(r.model)); n != 2 {
		t.Fatalf("the engineer ran %d times, want 2 (the post and the second person's reply)", n)
	}

	r.post(t, "C0TEST002", slackCarol, "1767226003.000100", "", "the build is red, any idea?")
	for _, ev := range []map[string]any{
		// events_api_bot_message_subtype.json: another app's bot posts.
		{"type": "message", "subtype": "bot_message", "text": "Build #1287 on main failed (3 tests)", "ts": "1767226004.000500",
			"username": "ci-notifier", "bot_id": "B0OTHERBOT", "channel": "C0TEST001", "event_ts": "1767226004.000500", "channel_type": "channel"},
		// events_api_message_from_own_bot.json: this app's own reply, top level.
		{"user": slacktest.DefaultBotUser, "type": "message", "ts": "1767226005.000300", "bot_id": "B0TESTBOT", "app_id": slacktest.DefaultAppID,
			"text": "Looking at the build now.", "team": slacktest.DefaultTeam, "channel": "C0TEST001", "event_ts": "1767226005.000300", "channel_type": "channel"},
	} {
		body, _ := json.Marshal(map[string]any{"token": "TESTverificationTOKEN000", "team_id": slacktest.DefaultTeam, "api_app_id": slacktest.DefaultAppID,
			"type": "event_callback", "event_id": "Ev" + ev["ts"].(string), "event_time": 1767226004, "event": ev})
		if code := slackPost(t, r.hook.URL+"/slack/acme/events", body); code != 200 {
			t.Fatalf("events POST = %d", code)
		}
	}
	r.idle()
	if n := len(r.model.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2: a mention_only channel's post or a bot's message was answered", n)
	}
}

// TestTelegramOpenGroup: after an owner's /policy mode=open, a group message
// that addresses no bot gets a reply, and so does another person's after it
// (the group's dialog has two people now); the same message in a mention_only
// group and a bot's message in the open group get none.
func TestTelegramOpenGroup(t *testing.T) {
	const other = -1001000000088
	r := tgPeopleRig(t, telegram.HumanActor(tgAlice.ID))
	r.push(tgGroup(501, tgApprovalGroup, tgAlice, "/policy@engineer_bot mode=open"))
	if texts := r.sentTexts(tgApprovalGroup); len(texts) != 1 || !strings.Contains(texts[0], "mode=open") {
		t.Fatalf("alice's /policy answered %q", texts)
	}
	r.push(tgGroup(502, tgApprovalGroup, tgCarol, "ping, anyone around?"))
	r.idle()
	r.push(tgGroup(503, tgApprovalGroup, tgBob, "ping, me too"))
	r.idle()
	if texts := r.sentTexts(tgApprovalGroup); len(texts) != 3 || texts[1] != "pong" || texts[2] != "pong" {
		t.Fatalf("open group texts %q, want the /policy answer and two replies", texts)
	}
	r.push(tgGroup(504, other, tgCarol, "ping, anyone around?"))
	bot, _ := json.Marshal(map[string]any{"message": map[string]any{"message_id": 505, "date": 1767225660, "text": "ping from a bot",
		"from": map[string]any{"id": 777, "is_bot": true, "first_name": "CI", "username": "ci_bot"},
		"chat": map[string]any{"id": tgApprovalGroup, "type": "supergroup"}}})
	r.push(bot)
	r.idle()
	if n := len(r.llm.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2: a mention_only group's message or a bot's was answered", n)
	}
}

// TestFeishuOpenGroup: after an owner's /policy mode=open, a top-level group
// message that mentions no bot (the shape of Feishu's "group_no_mention" event,
// delivered to apps with im:message.group_msg) starts a topic the bot answers,
// and another person's unaddressed message in that topic is answered too; the
// same in a mention_only group, and an app's message in the open group, get
// nothing.
func TestFeishuOpenGroup(t *testing.T) {
	const other = "oc_0ther0000000000000000000000000000"
	r := fsPeopleRig(t, feishu.ActorID(feishutest.AliceOpenID))
	r.fsGroup("om_open_01", feishutest.GroupChat, feishutest.AliceOpenID, "/policy mode=open")
	if got := r.waitMessage("alice's answer", func(m feishutest.Message) bool { return m.ReplyTo == "om_open_01" }).Text(); !strings.Contains(got, "mode=open") {
		t.Fatalf("alice's /policy answered %q", got)
	}
	r.event(feishutest.MessageEvent{MessageID: "om_open_02", ChatID: feishutest.GroupChat, Sender: feishutest.BobOpenID, Text: "lunch at noon?"})
	r.idle()
	r.waitMessage("the answer in the new topic", func(m feishutest.Message) bool { return m.ReplyTo == "om_open_02" && m.Text() == "noted" })
	r.event(feishutest.MessageEvent{MessageID: "om_open_03", ChatID: feishutest.GroupChat, Sender: fsCarolOpenID, Text: "count me in",
		RootID: "om_open_02", ParentID: "om_open_02"})
	r.idle()
	r.event(feishutest.MessageEvent{MessageID: "om_open_04", ChatID: other, Sender: feishutest.BobOpenID, Text: "lunch at noon?"})
	r.event(feishutest.MessageEvent{MessageID: "om_open_05", ChatID: feishutest.GroupChat, Sender: "ou_0ther0bot000000000000000000000", SenderType: "app", Text: "deploy finished"})
	r.idle()
	if n := len(r.llm.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2 (the new topic and the second person's message in it)", n)
	}
}
