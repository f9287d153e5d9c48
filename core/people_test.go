package core_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"openbot/core"
)

// policyHarness is a question harness with the shipped rules: no self_approve.
func policyHarness(t *testing.T, owners, approvers []core.ActorID) *harness {
	h := newHarness(t, core.Limits{})
	h.qad = &questionAdapter{recAdapter: h.ad, resolvedOne: make(chan struct{}, 16)}
	h.opts = func(o *core.Options) { o.Owners, o.Approvers = owners, approvers }
	return h
}

// TestAskerCannotApproveOwnShell: with approvers configured and self_approve
// off, the person who asked (even when listed as an approver) is refused and
// another approver's click runs the tool.
func TestAskerCannotApproveOwnShell(t *testing.T) {
	h := policyHarness(t, nil, []core.ActorID{"console:you", "console:boss"})
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	q := pendingQuestion(t, h)
	for _, who := range []core.ActorID{"console:you", "console:eve", "", "bot:engineer"} {
		if got := answer(t, h, q, who); got != core.AnswerForbidden {
			t.Fatalf("%q: %q, want forbidden", who, got)
		}
	}
	h.idle()
	if *ran != 0 {
		t.Fatal("a refused approval ran the tool")
	}
	if got := answer(t, h, q, "console:boss"); got != core.AnswerAccepted {
		t.Fatalf("another approver: %q, want accepted", got)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("tool ran %d times, want 1", *ran)
	}
}

// TestNoApproverRefusesAtOnce: with nobody who could approve (no owner, the
// only approver is the asker), the call is refused without a prompt and the
// thread says how to add an approver, citing no internal document.
func TestNoApproverRefusesAtOnce(t *testing.T) {
	for _, approvers := range [][]core.ActorID{nil, {"console:you"}} {
		h := policyHarness(t, nil, approvers)
		ran := approvalScript(h)
		h.start()
		res := h.say("@engineer deploy please")
		h.idle()
		if posted, _ := h.qad.snapshot(); len(posted) != 0 {
			t.Fatalf("approvers %v: a question nobody can answer was posted: %+v", approvers, posted)
		}
		if *ran != 0 {
			t.Fatal("the tool ran")
		}
		ms := h.messages(res.Thread)
		var notice, reply string
		for _, m := range ms {
			if m.Kind == core.KindNotice {
				notice = m.Text
			}
			if m.Sender == "bot:engineer" {
				reply = m.Text
			}
		}
		if !strings.Contains(notice, "owner add") || !strings.Contains(notice, "approvers:") || strings.Contains(notice, ".md") {
			t.Fatalf("notice %q, want how to add an approver", notice)
		}
		if !strings.HasPrefix(reply, "not deployed: Rejected by") {
			t.Fatalf("reply %q, want the rejection", reply)
		}
		if qs, _ := h.eng.Questions(context.Background(), true); len(qs) != 0 {
			t.Fatalf("pending questions %+v", qs)
		}
		h.stop()
	}
}

// TestOwnerAlwaysApproves: an owner approves with no approvers configured, and
// an owner may approve their own request; the asker who is not one may not.
func TestOwnerAlwaysApproves(t *testing.T) {
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	q := pendingQuestion(t, h)
	if got := answer(t, h, q, "console:you"); got != core.AnswerForbidden {
		t.Fatalf("asker: %q, want forbidden", got)
	}
	if got := answer(t, h, q, "console:owner"); got != core.AnswerAccepted {
		t.Fatalf("owner: %q, want accepted", got)
	}
	h.idle()
	h.say("@engineer deploy again", func(in *core.Inbound) { in.SenderID, in.SenderName = "console:owner", "Owner" })
	h.idle()
	q = pendingQuestion(t, h)
	if got := answer(t, h, q, "console:owner"); got != core.AnswerAccepted {
		t.Fatalf("owner on their own request: %q, want accepted", got)
	}
	h.idle()
	if *ran != 2 {
		t.Fatalf("tool ran %d times, want 2", *ran)
	}
}

// TestPairing: an unknown person gets one code (the same one when they write
// again) and no entry; bad codes, a non-owner's /pair and a reused code change
// nothing; an owner's pairing lets them in until revoked.
func TestPairing(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h := policyHarness(t, []core.ActorID{"telegram:1"}, nil)
	h.opts = func(o *core.Options) { o.Owners, o.Clock = []core.ActorID{"telegram:1"}, clock }
	h.start()
	stranger := core.Admission{Account: "telegram/main", Actor: "telegram:7", Name: "Stranger"}
	a, err := h.eng.Admit(ctx, stranger)
	code := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(a.Reply)
	if err != nil || a.Allow || code == nil {
		t.Fatalf("Admit = %+v, %v; want a code and no entry", a, err)
	}
	if again, _ := h.eng.Admit(ctx, stranger); again.Allow || !strings.Contains(again.Reply, code[1]) {
		t.Fatalf("second Admit = %+v, want the same code", again)
	}
	if _, err := h.eng.Pair(ctx, core.PairRequest{Code: code[1], By: core.By{Actor: "telegram:8"}}); !errors.Is(err, core.ErrNotOwner) {
		t.Fatalf("pair by a non-owner: %v", err)
	}
	if _, err := h.eng.Pair(ctx, core.PairRequest{Code: "ZZZZZZZZ", By: core.By{Actor: "telegram:1"}}); !errors.Is(err, core.ErrPairingCode) {
		t.Fatalf("wrong code: %v", err)
	}
	if a, _ := h.eng.Admit(ctx, stranger); a.Allow {
		t.Fatal("refused pairings let the stranger in")
	}
	p, err := h.eng.Pair(ctx, core.PairRequest{Code: strings.ToLower(code[1]), By: core.By{Actor: "telegram:1"}})
	if err != nil || p.Role != core.RoleMember || p.Identities[0] != "telegram:7" {
		t.Fatalf("Pair = %+v, %v", p, err)
	}
	if _, err := h.eng.Pair(ctx, core.PairRequest{Code: code[1], By: core.By{Actor: "telegram:1"}}); !errors.Is(err, core.ErrPairingCode) {
		t.Fatalf("reused code: %v", err)
	}
	if a, _ := h.eng.Admit(ctx, stranger); !a.Allow {
		t.Fatalf("paired person refused: %+v", a)
	}
	people, pending, _ := h.eng.People(ctx)
	if len(people) != 1 || len(pending) != 0 {
		t.Fatalf("people %+v pending %+v", people, pending)
	}
	if _, err := h.eng.Revoke(ctx, p.ID, core.By{Actor: "telegram:7"}); !errors.Is(err, core.ErrNotOwner) {
		t.Fatalf("revoke by a member: %v", err)
	}
	if _, err := h.eng.Revoke(ctx, p.ID, core.By{Actor: "telegram:1"}); err != nil {
		t.Fatal(err)
	}
	if a, _ := h.eng.Admit(ctx, stranger); a.Allow {
		t.Fatal("a revoked person is still let in")
	}

	// Expiry and the bound on pending codes.
	clock.advance(core.PairingTTL)
	var codes []string
	for i := range core.MaxPendingPairings + 1 {
		a, _ := h.eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: core.ActorID("telegram:" + string(rune('a'+i)))})
		c := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(a.Reply)
		if i < core.MaxPendingPairings && c == nil {
			t.Fatalf("person %d got no code: %q", i, a.Reply)
		}
		if i == core.MaxPendingPairings && (c != nil || !strings.Contains(a.Reply, "try again")) {
			t.Fatalf("past the bound: %q", a.Reply)
		}
		if c != nil {
			codes = append(codes, c[1])
		}
	}
	clock.advance(core.PairingTTL)
	if _, err := h.eng.Pair(ctx, core.PairRequest{Code: codes[0], By: core.By{Actor: "telegram:1"}}); !errors.Is(err, core.ErrPairingCode) {
		t.Fatalf("expired code: %v", err)
	}
	for policy, allow := range map[string]bool{core.DMOpen: true, core.DMDisabled: false, core.DMAllowlist: false} {
		a, _ := h.eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:99", Policy: policy})
		if a.Allow != allow || strings.Contains(a.Reply, "/pair") {
			t.Fatalf("%s: %+v", policy, a)
		}
	}
	if a, _ := h.eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:99", Policy: core.DMAllowlist, Listed: true}); !a.Allow {
		t.Fatal("allowlist refused a listed person")
	}
}

// TestFirstPairingMakesAnOwner: with no owner on a chat platform, the first
// person the operator pairs becomes an owner; the next is a member.
func TestFirstPairingMakesAnOwner(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:operator"}, nil)
	h.start()
	var roles []core.Role
	for _, who := range []core.ActorID{"slack:T:U1", "slack:T:U2"} {
		a, _ := h.eng.Admit(ctx, core.Admission{Account: "slack/acme", Actor: who})
		code := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(a.Reply)
		p, err := h.eng.Pair(ctx, core.PairRequest{Code: code[1], By: core.By{Actor: "console:operator"}})
		if err != nil {
			t.Fatal(err)
		}
		roles = append(roles, p.Role)
	}
	if roles[0] != core.RoleOwner || roles[1] != core.RoleMember {
		t.Fatalf("roles %v, want owner then member", roles)
	}
}

func TestParseCommand(t *testing.T) {
	for _, tt := range []struct{ text, name, args string }{
		{"/pair ABCD1234", "pair", "ABCD1234"},
		{"@ops pair abcd1234", "pair", "abcd1234"},
		{"/pair@team_bot ABCD1234", "pair", "ABCD1234"},
		{"people", "people", ""},
		{"/revoke p3", "revoke", "p3"},
		{"pair programming with Ann today", "", ""},
		{"/pair", "", ""},
		{"/pair ABC", "", ""},
		{"hello", "", ""},
	} {
		name, args, ok := core.ParseCommand(tt.text)
		if name != tt.name || args != tt.args || ok != (tt.name != "") {
			t.Errorf("ParseCommand(%q) = %q, %q, %v", tt.text, name, args, ok)
		}
	}
}

// TestPairCommand: /pair in chat by an owner, and the refusals a non-owner or
// a bad code get, each changing nothing.
func TestPairCommand(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"slack:T:OWN"}, nil)
	h.start()
	a, _ := h.eng.Admit(ctx, core.Admission{Account: "slack/acme", Actor: "slack:T:NEW", Name: "New"})
	code := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(a.Reply)[1]
	for _, tt := range []struct {
		who  core.ActorID
		args string
		want string
	}{
		{"slack:T:NEW", code, "Sorry, only an owner can do that."},
		{"slack:T:OWN", "AAAAAAAA", "Sorry, that pairing code is not valid"},
		{"slack:T:OWN", code, "Let in New (slack:T:NEW) as member."},
		{"slack:T:OWN", code, "Sorry, that pairing code is not valid"},
	} {
		got, err := h.eng.Command(ctx, core.Command{Name: "pair", Args: tt.args, Actor: tt.who, Account: "slack/acme"})
		if err != nil || !strings.HasPrefix(got, tt.want) {
			t.Fatalf("%s /pair %s = %q, %v; want %q", tt.who, tt.args, got, err, tt.want)
		}
	}
	if got, _ := h.eng.Command(ctx, core.Command{Name: "people", Actor: "slack:T:NEW"}); !strings.HasPrefix(got, "Sorry") {
		t.Fatalf("/people by a member = %q", got)
	}
	if got, _ := h.eng.Command(ctx, core.Command{Name: "people", Actor: "slack:T:OWN"}); !strings.Contains(got, "New (member): slack:T:NEW") {
		t.Fatalf("/people = %q", got)
	}
}

// TestLink: a person joins their Telegram identity to their Slack one with a
// one-time code; an approver list naming the Slack identity then lets the
// Telegram one approve, and a paired person's other identity is let in. A
// stranger cannot start a link, and a wrong or used code changes nothing.
func TestLink(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"slack:T:OWN"}, []core.ActorID{"slack:T:BOSS"})
	ran := approvalScript(h)
	h.start()
	cmd := func(who core.ActorID, text string) string {
		name, args, ok := core.ParseCommand(text)
		if !ok {
			t.Fatalf("%q does not parse", text)
		}
		r, err := h.eng.Command(ctx, core.Command{Name: name, Args: args, Actor: who, Direct: true})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got, _ := h.eng.Command(ctx, core.Command{Name: "link", Actor: "slack:T:OWN"}); !strings.Contains(got, "direct message") {
		t.Fatalf("/link in a group: %q", got)
	}
	if got := cmd("slack:T:STRANGER", "/link"); !strings.Contains(got, "only people who were let in") {
		t.Fatalf("a stranger's /link: %q", got)
	}
	// The boss approves but is no stored person yet: an owner pairs them first.
	a, _ := h.eng.Admit(ctx, core.Admission{Account: "slack/acme", Actor: "slack:T:BOSS", Name: "Boss"})
	pc := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(a.Reply)
	if p, err := h.eng.Pair(ctx, core.PairRequest{Code: pc[1], By: core.By{Actor: "slack:T:OWN"}}); err != nil || p.Role != core.RoleMember {
		t.Fatalf("pair: %+v, %v", p, err)
	}
	got := cmd("slack:T:BOSS", "/link")
	code := regexp.MustCompile(`/link ([A-Z0-9]{8}) `).FindStringSubmatch(got)
	if code == nil {
		t.Fatalf("/link: %q", got)
	}
	if got := cmd("telegram:77", "/link ZZZZ9999"); !strings.Contains(got, "not valid") {
		t.Fatalf("wrong code: %q", got)
	}
	if got := cmd("telegram:77", "/link "+code[1]); !strings.Contains(got, "Linked: slack:T:BOSS, telegram:77") {
		t.Fatalf("link: %q", got)
	}
	if got := cmd("telegram:78", "/link "+code[1]); !strings.Contains(got, "not valid") {
		t.Fatalf("reused code: %q", got)
	}
	if a, _ := h.eng.Admit(ctx, core.Admission{Account: "telegram/main", Actor: "telegram:77"}); !a.Allow {
		t.Fatal("the linked identity is not let in")
	}
	h.say("@engineer deploy please")
	h.idle()
	q := pendingQuestion(t, h)
	if got := answer(t, h, q, "telegram:77"); got != core.AnswerAccepted {
		t.Fatalf("the linked identity's approval: %q", got)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("ran %d", *ran)
	}
}
