package e2e

// End-to-end tests of people and policy on Feishu (see people_slack_e2e_test.go).

import (
	"slices"
	"strings"
	"testing"

	"openbot/adapters/feishu"
	"openbot/adapters/feishu/feishutest"
	"openbot/core"
)

const fsCarolOpenID = "ou_3c0a1e5b9d7f4a2e8c6b0d1f3a5c7e90"

// fsPeopleRig is the approval rig with the shipped rules: no self_approve,
// the given owners, dm_policy pairing.
func fsPeopleRig(t *testing.T, owners ...core.ActorID) *fsRig {
	return newFeishuRigMode(t, feishu.ModeWebhook, func(r *fsRig) {
		r.dmPolicy = feishu.DMPairing
		r.policy = func(o *core.Options) { o.Owners, o.SelfApprove = owners, false }
	})
}

// fsDM sends a p2p message from sender and returns the text of the notice that
// replies to it.
func (r *fsRig) fsDM(id, sender, text string) string {
	r.t.Helper()
	r.event(feishutest.MessageEvent{MessageID: id, ChatType: "p2p", ChatID: "oc_dm_" + sender, Sender: sender, Text: text})
	return r.waitMessage("the answer to "+id, func(m feishutest.Message) bool { return m.ReplyTo == id }).Text()
}

// TestFeishuPairing: an unknown person's DM gets a pairing code and no run;
// their own /pair, an owner's wrong code and a reused code are refused and
// change nothing; an owner's /pair lets their next message run.
func TestFeishuPairing(t *testing.T) {
	r := fsPeopleRig(t, feishu.ActorID(feishutest.AliceOpenID))
	got := r.fsDM("om_people_01", fsCarolOpenID, "hello there")
	m := pairCode.FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("carol got %q, want a pairing code", got)
	}
	code := m[1]
	for i, s := range []struct{ who, text, want string }{
		{fsCarolOpenID, "/pair " + code, "only an owner"},
		{feishutest.AliceOpenID, "/pair ZZZZ9999", "not valid"},
		{feishutest.AliceOpenID, "/pair " + code, "Let in"},
		{feishutest.AliceOpenID, "/pair " + code, "not valid"},
	} {
		id := "om_people_1" + string(rune('0'+i))
		if got := r.fsDM(id, s.who, s.text); !strings.Contains(got, s.want) {
			t.Fatalf("%s %q: answered %q, want %q", s.who, s.text, got, s.want)
		}
	}
	if n := len(r.llm.Requests()); n != 0 {
		t.Fatalf("an unknown DM and the commands made %d model requests", n)
	}
	if got := r.fsDM("om_people_20", fsCarolOpenID, "hello again"); got != "noted" {
		t.Fatalf("carol's DM after pairing answered %q, want the bot's reply", got)
	}
}

// TestFeishuAskerCannotApproveOwnShell: Alice, an approver, asks for the
// shell; her own click is refused and nothing runs; Bob's click runs it once.
func TestFeishuAskerCannotApproveOwnShell(t *testing.T) {
	r := fsPeopleRig(t)
	r.mention()
	card := r.card()
	if toast := r.click(card, "Approve", feishutest.AliceOpenID); toast.Type != feishu.ToastError || strings.Contains(toast.Content, ".md") {
		t.Fatalf("the asker's click: toast %+v, want a refusal", toast)
	}
	r.idle()
	if n := r.ran(); n != 0 {
		t.Fatalf("the asker's own click ran the tool %d times", n)
	}
	r.click(card, "Approve", feishutest.BobOpenID)
	r.checkApprovedOnce(card, "Bob")
}

// fsGroup sends a group message from sender mentioning the bot, as a new topic.
func (r *fsRig) fsGroup(id, chat, sender, text string) {
	r.t.Helper()
	r.event(feishutest.MessageEvent{MessageID: id, ChatID: chat, Sender: sender, Text: "@_user_1 " + text,
		Mentions: []feishutest.Mention{feishutest.BotMention("@_user_1")}})
}

// TestFeishuChannelPolicy: /policy from a non-owner is refused and changes
// nothing; the owner makes the group members: listed and takes shell away in a
// second group. In the first a non-member's two mentions get one notice and no
// run, a listed person's runs with shell offered; in the second shell is not.
func TestFeishuChannelPolicy(t *testing.T) {
	const other = "oc_0ther0000000000000000000000000000"
	r := fsPeopleRig(t, feishu.ActorID(feishutest.AliceOpenID))
	r.fsGroup("om_pol_01", feishutest.GroupChat, fsCarolOpenID, "/policy members=listed")
	if got := r.waitMessage("carol's answer", func(m feishutest.Message) bool { return m.ReplyTo == "om_pol_01" }).Text(); !strings.Contains(got, "only an owner") {
		t.Fatalf("carol's /policy answered %q", got)
	}
	r.fsGroup("om_pol_02", feishutest.GroupChat, feishutest.AliceOpenID, "/policy members=listed listed="+string(feishu.ActorID(feishutest.BobOpenID)))
	r.waitMessage("alice's answer", func(m feishutest.Message) bool { return m.ReplyTo == "om_pol_02" })
	r.fsGroup("om_pol_03", other, feishutest.AliceOpenID, "/policy tools_removed=shell")
	r.waitMessage("alice's second answer", func(m feishutest.Message) bool { return m.ReplyTo == "om_pol_03" })
	r.fsGroup("om_pol_04", feishutest.GroupChat, fsCarolOpenID, "hello")
	r.fsGroup("om_pol_05", feishutest.GroupChat, fsCarolOpenID, "hello again")
	r.idle()
	// The adapter sends notices from one queue, in order: once the answer to
	// Bob's later command has arrived, every notice about Carol's two
	// messages has too.
	r.fsGroup("om_pol_05b", feishutest.GroupChat, feishutest.BobOpenID, "/policy members=everyone")
	r.waitMessage("bob's answer", func(m feishutest.Message) bool { return m.ReplyTo == "om_pol_05b" })
	notices := 0
	for _, m := range r.fake.Messages() {
		if strings.Contains(m.Text(), "only the people an owner has let in") {
			notices++
		}
	}
	if notices != 1 || len(r.llm.Requests()) != 0 {
		t.Fatalf("%d notices and %d model requests, want one and none", notices, len(r.llm.Requests()))
	}
	r.fsGroup("om_pol_06", feishutest.GroupChat, feishutest.BobOpenID, "hello from bob")
	r.idle()
	r.fsGroup("om_pol_07", other, fsCarolOpenID, "hello in the other group")
	r.idle()
	var one, two []string
	for _, req := range r.llm.Requests() {
		switch u := newestTrigger(req); {
		case strings.Contains(u, "hello from bob"):
			one = req.ToolNames()
		case strings.Contains(u, "hello in the other group"):
			two = req.ToolNames()
		}
	}
	if !slices.Contains(one, "shell") || two == nil || slices.Contains(two, "shell") {
		t.Fatalf("tools offered %v and %v, want shell only in the first group", one, two)
	}
}
