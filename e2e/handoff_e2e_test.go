package e2e

// End-to-end tests of /handoff to Slack and Feishu: a person moves a channel
// thread to their DM with the bots on the same platform; later replies reach
// both exactly once, and their next DM continues the thread.

import (
	"context"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

// threadOf is the thread a platform thread key is bound to now.
func threadOf(t *testing.T, eng *core.Engine, key string) core.ThreadID {
	t.Helper()
	id, err := eng.ThreadByKey(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// TestSlackHandoffToDM: "@app handoff slack" in a channel thread opens Alice's
// DM with conversations.open and binds the thread to it; Bob's next request in
// the channel thread is answered in the thread and in her DM once each, and her
// next top-level DM continues the same thread. Bob, whom the fake cannot open a
// DM with (a bot user), is told so and nothing changes.
func TestSlackHandoffToDM(t *testing.T) {
	r := slackPeopleRig(t, []core.ActorID{slackActor(slackAlice)}, nil)
	const dm = "D0TEST001" // the fake's DM channel of U0TEST001
	self := "<@" + slacktest.DefaultBotUser + "> "
	r.say(t, slackAlice, slackRoot, "", "@engineer hello there")
	r.idle()
	r.post(t, "C0TEST001", slackAlice, "1767226101.000100", slackRoot, self+"handoff slack")
	if notes := r.ephemerals(t, slackAlice, 1); len(notes) != 1 || !strings.Contains(notes[0], "Handed off") {
		t.Fatalf("alice's notices %q", notes)
	}
	r.idle()
	opens := r.fake.CallsTo("conversations.open")
	if len(opens) != 1 || opens[0].Form.Get("users") != slackAlice {
		t.Fatalf("conversations.open calls %+v, want one for %s", opens, slackAlice)
	}
	if got := r.postedTo(t, dm, 1); len(got) != 1 || !strings.Contains(got[0], "continues in") {
		t.Fatalf("the DM got %q, want the hand-off notice once", got)
	}

	r.say(t, slackBob, "1767226102.000100", slackRoot, "@engineer anything new?")
	r.idle()
	inThread, inDM := 0, 0
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if c.Form.Get("text") != "engineer: nothing to run here" {
			continue
		}
		switch {
		case c.Form.Get("channel") == dm:
			inDM++
		case c.Form.Get("thread_ts") == slackRoot:
			inThread++
		}
	}
	if inThread != 2 || inDM != 1 {
		t.Fatalf("replies in the thread %d (want 2: before and after) and in the DM %d (want 1)", inThread, inDM)
	}

	root := threadOf(t, r.eng, slack.ThreadKey(slacktest.DefaultTeam, "C0TEST001", slackRoot, "", false))
	if got := threadOf(t, r.eng, slack.ThreadKey(slacktest.DefaultTeam, dm, "", "", true)); got != root || root == 0 {
		t.Fatalf("the DM's thread key is bound to thread %d, want the channel thread %d", got, root)
	}
	r.dm(t, slackAlice, dm, "1767226103.000100", "and one more thing")
	r.idle()
	if !r.replied(slackRoot, "and one more thing") {
		t.Fatal("alice's next DM did not continue the thread (not mirrored to the channel thread)")
	}

	r.fake.AddUser(slacktest.User{ID: "U0TESTCI1", Name: "ci", IsBot: true})
	r.post(t, "C0TEST001", "U0TESTCI1", "1767226104.000100", slackRoot, self+"handoff slack")
	if notes := r.ephemerals(t, "U0TESTCI1", 1); len(notes) != 1 || !strings.Contains(notes[0], "cannot reach you") {
		t.Fatalf("a DM Slack refuses: notices %q, want the refusal", notes)
	}
}

// TestFeishuHandoffToDM: "@bot /handoff feishu" in a group topic sends Alice
// one line by open_id (receive_id_type=open_id), whose answer names her p2p
// chat, and binds the thread there; Bob's next request in the topic is
// answered in the topic and in her chat once each, and her next message in the
// chat continues the same thread.
func TestFeishuHandoffToDM(t *testing.T) {
	r := fsPeopleRig(t, feishu.ActorID(feishutest.AliceOpenID))
	r.fsGroup("om_hand_01", feishutest.GroupChat, feishutest.AliceOpenID, "hello there")
	r.idle()
	r.event(feishutest.MessageEvent{MessageID: "om_hand_02", ChatID: feishutest.GroupChat, Sender: feishutest.AliceOpenID, RootID: "om_hand_01",
		ParentID: "om_hand_01", Text: "@_user_1 /handoff feishu", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
	if got := r.waitMessage("the answer", func(m feishutest.Message) bool { return m.ReplyTo == "om_hand_02" }).Text(); !strings.Contains(got, "Handed off") {
		t.Fatalf("alice's /handoff answered %q", got)
	}
	r.idle()
	var byOpenID, notices int
	for _, m := range r.fake.Messages() {
		switch {
		case m.IDType == "open_id" && m.ReceiveID == feishutest.AliceOpenID:
			byOpenID++
		case m.ReceiveID == feishutest.P2PChat && strings.Contains(m.Text(), "continues in"):
			notices++
		}
	}
	if byOpenID != 1 || notices != 1 {
		t.Fatalf("%d messages by open_id and %d notices in her chat, want one each", byOpenID, notices)
	}

	r.event(feishutest.MessageEvent{MessageID: "om_hand_03", ChatID: feishutest.GroupChat, Sender: feishutest.BobOpenID, RootID: "om_hand_01",
		ParentID: "om_hand_01", Text: "@_user_1 please check the logs", Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
	r.idle()
	inTopic, inDM := 0, 0
	for _, m := range r.fake.Messages() {
		if m.Text() != "logs look fine" {
			continue
		}
		switch {
		case m.ReceiveID == feishutest.P2PChat:
			inDM++
		case m.Kind == "reply":
			inTopic++
		}
	}
	if inTopic != 1 || inDM != 1 {
		t.Fatalf("the reply reached the topic %d and the DM %d times, want once each", inTopic, inDM)
	}

	root := threadOf(t, r.eng, feishu.ThreadKey(feishutest.GroupChat, "om_hand_01", ""))
	if got := threadOf(t, r.eng, feishu.DialogKey(feishutest.P2PChat)); got != root || root == 0 {
		t.Fatalf("her chat's thread key is bound to thread %d, want the topic's %d", got, root)
	}
	r.event(feishutest.MessageEvent{MessageID: "om_hand_04", ChatType: "p2p", ChatID: feishutest.P2PChat, Sender: feishutest.AliceOpenID, Text: "and one more thing"})
	r.idle()
	if got := threadOf(t, r.eng, feishu.DialogKey(feishutest.P2PChat)); got != root {
		t.Fatalf("her next DM went to thread %d, want %d", got, root)
	}
	r.waitMessage("her DM mirrored to the topic", func(m feishutest.Message) bool {
		return m.Kind == "reply" && strings.Contains(m.Text(), "and one more thing")
	})
}
