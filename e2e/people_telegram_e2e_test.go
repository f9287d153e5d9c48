package e2e

// End-to-end tests of people and policy on Telegram (see people_slack_e2e_test.go).

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

// tgDM is a private message from one person to @engineer_bot; a leading
// "/command" carries its bot_command entity.
func tgDM(msgID int64, from telegramtest.Clicker, text string) []byte {
	msg := map[string]any{"message_id": msgID, "date": 1767225660, "text": text,
		"from": map[string]any{"id": from.ID, "is_bot": false, "first_name": from.FirstName},
		"chat": map[string]any{"id": from.ID, "type": "private"}}
	if strings.HasPrefix(text, "/") {
		cmd, _, _ := strings.Cut(text, " ")
		msg["entities"] = []map[string]any{{"offset": 0, "length": len(cmd), "type": "bot_command"}}
	}
	b, _ := json.Marshal(map[string]any{"message": msg})
	return b
}

// tgPeopleRig is the approval rig with the shipped rules: no self_approve, the
// given owners, dm_policy pairing.
func tgPeopleRig(t *testing.T, owners ...core.ActorID) *tgApprovalRig {
	return startTelegramApproval(t, false, func(r *tgApprovalRig) {
		r.dmPolicy = telegram.DMPairing
		r.policy = func(o *core.Options) { o.Owners, o.SelfApprove = owners, false }
	})
}

// TestTelegramPairing: an unknown person's DM gets a pairing code and no run;
// their own /pair, an owner's wrong code and a reused code are refused and
// change nothing; an owner's /pair lets their next message run.
func TestTelegramPairing(t *testing.T) {
	r := tgPeopleRig(t, telegram.HumanActor(tgAlice.ID))
	r.push(tgDM(301, tgCarol, "ping, hello there"))
	got := r.sentTexts(tgCarol.ID)
	m := pairCode.FindStringSubmatch(strings.Join(got, "\n"))
	if len(got) != 1 || m == nil {
		t.Fatalf("carol got %q, want one message with a pairing code", got)
	}
	code := m[1]
	steps := []struct {
		who  telegramtest.Clicker
		text string
		want string
	}{
		{tgCarol, "/pair " + code, "only an owner"},
		{tgAlice, "/pair ZZZZ9999", "not valid"},
		{tgAlice, "/pair " + code, "Let in Carol"},
		{tgAlice, "/pair " + code, "not valid"},
	}
	for i, s := range steps {
		r.push(tgDM(int64(310+i), s.who, s.text))
		texts := r.sentTexts(s.who.ID)
		if len(texts) == 0 || !strings.Contains(texts[len(texts)-1], s.want) {
			t.Fatalf("%s %q: answered %q, want %q", s.who.FirstName, s.text, texts, s.want)
		}
	}
	if n := len(r.llm.Requests()); n != 0 {
		t.Fatalf("an unknown DM and the commands made %d model requests", n)
	}
	r.push(tgDM(320, tgCarol, "ping again"))
	r.idle()
	if texts := r.sentTexts(tgCarol.ID); len(texts) != 3 || texts[2] != "pong" {
		t.Fatalf("carol's DM after pairing: %q, want the reply pong", texts)
	}
}

// TestTelegramAskerCannotApproveOwnShell: Alice, an approver, asks for the
// shell; her own click is refused and nothing runs; Bob's click runs it once.
func TestTelegramAskerCannotApproveOwnShell(t *testing.T) {
	r := tgPeopleRig(t)
	q, approve, _ := r.asked()
	ack := r.click("cb-self", tgAlice, q.Posts[0].PlatformID, approve)
	if ack["text"] == "Approved" || strings.Contains(ack["text"], ".md") {
		t.Fatalf("the asker's click was answered %v, want a refusal", ack)
	}
	r.idle()
	if n := r.ranTimes(); n != 0 {
		t.Fatalf("the asker's own click ran the tool %d times", n)
	}
	if ack := r.click("cb-bob", tgBob, q.Posts[0].PlatformID, approve); ack["text"] != "Approved" {
		t.Fatalf("bob's click answered %v", ack)
	}
	r.idle()
	if n := r.ranTimes(); n != 1 {
		t.Fatalf("the tool ran %d times, want 1", n)
	}
	r.resolved(q, "Approved by Bob")
}

// tgGroup is a message from one person in a group chat: a leading
// "/command@engineer_bot" carries its bot_command entity, a leading
// "@engineer_bot" its mention entity.
func tgGroup(msgID, chat int64, from telegramtest.Clicker, text string) []byte {
	msg := map[string]any{"message_id": msgID, "date": 1767225660, "text": text,
		"from": map[string]any{"id": from.ID, "is_bot": false, "first_name": from.FirstName},
		"chat": map[string]any{"id": chat, "type": "supergroup"}}
	first, _, _ := strings.Cut(text, " ")
	switch {
	case strings.HasPrefix(text, "/"):
		msg["entities"] = []map[string]any{{"offset": 0, "length": len(first), "type": "bot_command"}}
	case strings.HasPrefix(text, "@"):
		msg["entities"] = []map[string]any{{"offset": 0, "length": len(first), "type": "mention"}}
	}
	b, _ := json.Marshal(map[string]any{"message": msg})
	return b
}

// TestTelegramChannelPolicy: /policy from a non-owner is refused and changes
// nothing; the owner makes the group members: listed and takes shell away in a
// second group. In the first a non-member's two mentions get one notice and
// no run, a listed person's runs with shell offered; in the second shell is
// not offered.
func TestTelegramChannelPolicy(t *testing.T) {
	const other = -1001000000088
	r := tgPeopleRig(t, telegram.HumanActor(tgAlice.ID))
	r.push(tgGroup(401, tgApprovalGroup, tgCarol, "/policy@engineer_bot members=listed"))
	if texts := r.sentTexts(tgApprovalGroup); len(texts) != 1 || !strings.Contains(texts[0], "only an owner") {
		t.Fatalf("carol's /policy answered %q", texts)
	}
	r.push(tgGroup(402, tgApprovalGroup, tgAlice, "/policy@engineer_bot members=listed listed="+string(telegram.HumanActor(tgBob.ID))))
	r.push(tgGroup(403, other, tgAlice, "/policy@engineer_bot tools_removed=shell"))
	r.push(tgGroup(404, tgApprovalGroup, tgCarol, "@engineer_bot ping"))
	r.push(tgGroup(405, tgApprovalGroup, tgCarol, "@engineer_bot ping again"))
	r.idle()
	texts := r.sentTexts(tgApprovalGroup)
	notices := 0
	for _, s := range texts {
		if strings.Contains(s, "only the people an owner has let in") {
			notices++
		}
	}
	if notices != 1 || len(r.llm.Requests()) != 0 {
		t.Fatalf("group texts %q and %d model requests, want one notice and none", texts, len(r.llm.Requests()))
	}
	r.push(tgGroup(406, tgApprovalGroup, tgBob, "@engineer_bot ping from bob"))
	r.idle()
	r.push(tgGroup(407, other, tgCarol, "@engineer_bot ping in the other group"))
	r.idle()
	var one, two []string
	for _, req := range r.llm.Requests() {
		switch u := lastUser(req); {
		case strings.Contains(u, "ping from bob"):
			one = req.ToolNames()
		case strings.Contains(u, "ping in the other group"):
			two = req.ToolNames()
		}
	}
	if !slices.Contains(one, "shell") || two == nil || slices.Contains(two, "shell") {
		t.Fatalf("tools offered %v and %v, want shell only in the first group", one, two)
	}
}
