package feishu_test

import (
	"strings"
	"testing"

	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

// TestCommandsAndReplyKeys covers /help and /new in p2p chats and groups (a group
// command must mention this app's bot, as Telegram's /cmd@this_bot) and the
// ReplyToKey of replies.
func TestCommandsAndReplyKeys(t *testing.T) {
	h := newHarness(t, nil)
	h.run()
	ctx := ctxT(t)
	bot := []feishutest.Mention{feishutest.BotMention("@_user_1")}
	send := func(ev feishutest.MessageEvent) {
		t.Helper()
		if s, b := h.post("events", ev.JSON(), feishutest.EncryptKey); s != 200 {
			t.Fatalf("%s: %d %s", ev.MessageID, s, b)
		}
	}

	send(feishutest.MessageEvent{MessageID: "om_h1", ChatID: feishutest.P2PChat, ChatType: "p2p", Text: "/help"})
	send(feishutest.MessageEvent{MessageID: "om_h2", Text: "@_user_1 /help", Mentions: bot})
	msgs, err := h.srv.WaitMessages(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		text := m.Text()
		if !strings.Contains(text, "@engineer (Engineer)") || !strings.Contains(text, "@reviewer (Reviewer)") || !strings.Contains(text, "/new") {
			t.Errorf("help reply to %s: %q", m.ReplyTo, text)
		}
		if want := m.ReplyTo == "om_h2"; m.InThread != want {
			t.Errorf("help reply to %s: in thread %v, want %v", m.ReplyTo, m.InThread, want)
		}
	}
	if n := len(h.eng.ins.All()); n != 0 {
		t.Fatalf("/help ingested %d messages", n)
	}

	// A group "/help" that does not mention the bot is no command: in a known
	// topic it is an ordinary message.
	send(feishutest.MessageEvent{MessageID: "om_h3", RootID: "om_root", ParentID: "om_root", Text: "/help"})
	// "@Bot /new TEXT" in a group starts a new thread with TEXT now.
	send(feishutest.MessageEvent{MessageID: "om_n1", RootID: "om_root", ParentID: "om_root", Text: "@_user_1 /new fix the build", Mentions: bot})
	// Replies: in a p2p chat the parent counts even when it is the chain's root;
	// in a group topic only a parent other than the topic root does.
	send(feishutest.MessageEvent{MessageID: "om_r1", ChatID: feishutest.P2PChat, ChatType: "p2p", RootID: "om_bot1", ParentID: "om_bot1", Text: "re"})
	send(feishutest.MessageEvent{MessageID: "om_r2", RootID: "om_root", ParentID: "om_bot2", Text: "re"})
	ins := h.eng.ins.Wait(t, 4)
	if in := ins[0]; in.Text != "/help" || in.NewThread || in.ReplyToKey != "" {
		t.Errorf("unaddressed group /help: %+v", in)
	}
	if in := ins[1]; in.Text != "fix the build" || !in.NewThread || len(in.Mentions) != 1 || in.Mentions[0] != "engineer" {
		t.Errorf("group /new TEXT: %+v", in)
	}
	if in := ins[2]; in.ReplyToKey != "feishu:om_bot1" {
		t.Errorf("p2p reply key %q", in.ReplyToKey)
	}
	if in := ins[3]; in.ReplyToKey != "feishu:om_bot2" {
		t.Errorf("group reply key %q", in.ReplyToKey)
	}
	if got := h.a.MessageKey(core.ConversationRef(feishutest.P2PChat), "om_bot1"); got != "feishu:om_bot1" {
		t.Errorf("MessageKey = %q", got)
	}
}
