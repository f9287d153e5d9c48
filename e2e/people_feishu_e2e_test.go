package e2e

// End-to-end tests of people and policy on Feishu (see people_slack_e2e_test.go).

import (
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
