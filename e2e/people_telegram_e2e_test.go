package e2e

// End-to-end tests of people and policy on Telegram (see people_slack_e2e_test.go).

import (
	"encoding/json"
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
