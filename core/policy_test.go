package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"openbot/core"
)

// in is a message in console conversation conv (its own thread and channel).
func in(conv string) func(*core.Inbound) {
	return func(i *core.Inbound) { i.ThreadKey, i.Conversation = "console:"+conv, core.ConversationRef(conv) }
}

// TestChannelPolicyToolsAndInstructions: a policy removing shell in one channel
// leaves it in another; added tools and instructions reach the bot's job; the
// stored policy survives a restart.
func TestChannelPolicyToolsAndInstructions(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.opts = func(o *core.Options) {
		o.Owners = []core.ActorID{"console:owner"}
		o.Bots = slices.Clone(team)
		o.Bots[1].Tools = []string{"shell", "workspace_read"}
	}
	h.start()
	owner := core.By{Actor: "console:owner", Name: "Owner"}
	if _, err := h.eng.SetPolicy(ctx, "console/local", "random", core.ChannelPolicy{ToolsRemoved: []string{"shell"}, ToolsAdded: []string{"http_fetch"},
		Instructions: "Be brief here."}, core.By{Actor: "console:you"}); err == nil {
		t.Fatal("a non-owner set a policy")
	}
	if _, err := h.eng.SetPolicy(ctx, "console/local", "random", core.ChannelPolicy{ToolsRemoved: []string{"shell"}, ToolsAdded: []string{"http_fetch"},
		Instructions: "Be brief here.", Fetch: &core.FetchPolicy{Unlisted: core.FetchUnlistedRefuse}}, owner); err != nil {
		t.Fatal(err)
	}
	h.stop()
	h.start() // stored, so it survives
	h.say("@engineer in ops", in("ops"))
	h.say("@engineer in random", in("random"))
	h.idle()
	tools := map[string][]string{}
	instr := map[string]string{}
	fetch := map[string]string{}
	for _, j := range h.agent.jobsFor("engineer") {
		tools[j.Triggers[0].Text] = j.Bot.Tools
		instr[j.Triggers[0].Text] = j.Bot.Instructions
		fetch[j.Triggers[0].Text] = j.Bot.Fetch.Unlisted
	}
	if fetch["@engineer in random"] != core.FetchUnlistedRefuse || fetch["@engineer in ops"] != "" {
		t.Errorf("fetch policies %q, want refuse only in random", fetch)
	}
	if got := tools["@engineer in ops"]; !slices.Equal(got, []string{"shell", "workspace_read"}) {
		t.Errorf("tools in ops %v, want shell kept", got)
	}
	if got := tools["@engineer in random"]; !slices.Equal(got, []string{"workspace_read", "http_fetch"}) {
		t.Errorf("tools in random %v, want shell removed and http_fetch added", got)
	}
	if !strings.HasSuffix(instr["@engineer in random"], "Be brief here.") || strings.Contains(instr["@engineer in ops"], "brief") {
		t.Errorf("instructions %q", instr)
	}
	pols, _ := h.eng.Policies(ctx)
	if p := pols["console/local random"]; p.SetBy != "console:owner" {
		t.Errorf("stored %+v", pols)
	}
}

// TestChannelMembersListed: in a members: listed channel a stranger gets no
// entry and one notice at most; owners and listed people get in; a paired
// person gets in only under members: paired.
func TestChannelMembersListed(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.start()
	if _, err := h.eng.SetPolicy(ctx, "console/local", "ops", core.ChannelPolicy{Members: core.MembersListed, Listed: []core.ActorID{"console:ann"}},
		core.By{Actor: "console:owner"}); err != nil {
		t.Fatal(err)
	}
	adm := func(who core.ActorID, conv string) core.Admitted {
		a, err := h.eng.Admit(ctx, core.Admission{Account: "console/local", Actor: who, Conversation: core.ConversationRef(conv)})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := adm("console:eve", "ops"); a.Allow || a.Reply == "" {
		t.Fatalf("stranger first: %+v, want a refusal with a notice", a)
	}
	if a := adm("console:eve", "ops"); a.Allow || a.Reply != "" {
		t.Fatalf("stranger again: %+v, want silence", a)
	}
	for _, who := range []core.ActorID{"console:owner", "console:ann"} {
		if a := adm(who, "ops"); !a.Allow {
			t.Fatalf("%s refused", who)
		}
	}
	if a := adm("console:eve", "random"); !a.Allow {
		t.Fatal("another channel's default refused the stranger")
	}
	if _, err := h.eng.SetPolicy(ctx, "console/local", "ops", core.ChannelPolicy{Mode: core.ModeDisabled}, core.By{Actor: "console:owner"}); err != nil {
		t.Fatal(err)
	}
	if a := adm("console:owner", "ops"); a.Allow || a.Reply != "" {
		t.Fatalf("disabled channel: %+v, want silent refusal", a)
	}
}

// TestPolicyCommand: /policy by an owner sets and shows; by anyone else, or
// with a bad key or value, it is refused and changes nothing; it is audited.
func TestPolicyCommand(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.start()
	cmd := func(who core.ActorID, args string) string {
		name, a, ok := core.ParseCommand("/policy " + args)
		if !ok {
			t.Fatalf("/policy %s does not parse", args)
		}
		r, err := h.eng.Command(ctx, core.Command{Name: name, Args: a, Actor: who, Account: "console/local", Conversation: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	for _, tt := range []struct{ who, args, want string }{
		{"console:you", "tools_removed=shell", "Sorry, only an owner"},
		{"console:owner", "tools_gone=shell", "unknown key"},
		{"console:owner", "mode=sometimes", "mode \"sometimes\""},
		{"console:owner", "default_bot=nobody", "not a configured bot"},
		{"console:owner", "budget_tokens=-5", "budget_tokens \"-5\" is not a whole number"},
		{"console:owner", "budget_cost=lots", "budget_cost \"lots\" is not an amount"},
	} {
		if got := cmd(core.ActorID(tt.who), tt.args); !strings.Contains(got, tt.want) {
			t.Fatalf("%s /policy %s = %q, want %q", tt.who, tt.args, got, tt.want)
		}
	}
	if pols, _ := h.eng.Policies(ctx); len(pols) != 0 {
		t.Fatalf("refusals stored %+v", pols)
	}
	if got := cmd("console:owner", "tools_removed=shell members=paired instructions=Keep it short."); !strings.Contains(got, "tools_removed=shell") || !strings.Contains(got, "instructions=Keep it short.") {
		t.Fatalf("set: %q", got)
	}
	if got := cmd("console:owner", ""); !strings.Contains(got, "members=paired") {
		t.Fatalf("show: %q", got)
	}
	if got := cmd("console:owner", "budget_tokens=50000 budget_cost=2.5"); !strings.Contains(got, "budget_tokens=50000 budget_cost=2.50") {
		t.Fatalf("budget: %q", got)
	}
	if p, _ := h.eng.Policy(ctx, "console/local", "ops"); p.Budget != (core.Limit{Tokens: 50000, CostMicros: 2_500_000}) {
		t.Fatalf("stored budget %+v", p.Budget)
	}
	if _, _, ok := core.ParseCommand("policy is a good word"); ok {
		t.Fatal("a sentence parsed as /policy")
	}
	var found bool
	_ = h.store.View(ctx, func(tx core.ReadTx) error {
		as, err := tx.Activities(0, 0)
		for _, a := range as {
			found = found || (a.Event == "policy.set" && strings.Contains(a.Summary, "console/local ops"))
		}
		return err
	})
	if !found {
		t.Fatal("no policy.set line in the activity log")
	}
}

// TestChannelApprovers: a channel's approvers approve there instead of the
// global ones.
func TestChannelApprovers(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, []core.ActorID{"console:global"})
	ran := approvalScript(h)
	h.start()
	if _, err := h.eng.SetPolicy(ctx, "console/local", "main", core.ChannelPolicy{Approvers: []core.ActorID{"console:ops"}}, core.By{Actor: "console:owner"}); err != nil {
		t.Fatal(err)
	}
	h.say("@engineer deploy please")
	h.idle()
	q := pendingQuestion(t, h)
	if got := answer(t, h, q, "console:global"); got != core.AnswerForbidden {
		t.Fatalf("global approver in a channel with its own: %q", got)
	}
	if got := answer(t, h, q, "console:ops"); got != core.AnswerAccepted {
		t.Fatalf("channel approver: %q", got)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("ran %d", *ran)
	}
}

// TestChannelDefaultBot: a new thread in a channel whose policy names a
// default bot is that bot's; elsewhere the team's default answers.
func TestChannelDefaultBot(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.start()
	if _, err := h.eng.SetPolicy(ctx, "console/local", "ops", core.ChannelPolicy{DefaultBot: "qa"}, core.By{Actor: "console:owner"}); err != nil {
		t.Fatal(err)
	}
	if res := h.say("hello ops", in("ops")); !slices.Equal(res.Woken, []string{"qa"}) {
		t.Fatalf("woken in ops %v, want qa", res.Woken)
	}
	if res := h.say("hello random", in("random")); !slices.Equal(res.Woken, []string{"chief_of_staff"}) {
		t.Fatalf("woken in random %v, want the team's default", res.Woken)
	}
	h.idle()
}

// TestChannelModeOpen: in an open channel an unaddressed message is admitted
// with Open set, and where two people talk it still wakes the default bot
// (the quiet threads rule does not hold there), while the same talk in a
// mention_only channel wakes nobody; a message naming only a person wakes no
// bot even there. An unaddressed non-member gets no notice in a mention_only
// channel and one in an open channel.
func TestChannelModeOpen(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.start()
	owner := core.By{Actor: "console:owner"}
	if _, err := h.eng.SetPolicy(ctx, "console/local", "lobby", core.ChannelPolicy{Mode: core.ModeOpen}, owner); err != nil {
		t.Fatal(err)
	}
	adm := func(who core.ActorID, conv string) core.Admitted {
		a, err := h.eng.Admit(ctx, core.Admission{Account: "console/local", Actor: who, Conversation: core.ConversationRef(conv), Unaddressed: true})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := adm("console:eve", "lobby"); !a.Allow || !a.Open {
		t.Fatalf("open channel: %+v, want allowed and open", a)
	}
	if a := adm("console:eve", "ops"); !a.Allow || a.Open {
		t.Fatalf("mention_only channel: %+v, want allowed and not open", a)
	}

	as := func(who core.ActorID, conv string) func(*core.Inbound) {
		return func(i *core.Inbound) {
			in(conv)(i)
			i.SenderID, i.SenderName = who, string(who)
		}
	}
	for _, conv := range []string{"lobby", "ops"} {
		h.say("@engineer hello", as("console:ann", conv))
		h.idle()
		if res := h.say("what do you all think?", as("console:bob", conv)); (len(res.Woken) == 1) != (conv == "lobby") {
			t.Fatalf("%s: an unaddressed message among two people woke %v", conv, res.Woken)
		}
		h.idle()
	}
	if res := h.say("@ann over to you", as("console:bob", "lobby"), func(i *core.Inbound) { i.MentionsHumans = true }); len(res.Woken) != 0 {
		t.Fatalf("a message naming a person woke %v in the open channel", res.Woken)
	}

	for _, conv := range []string{"lobby", "ops"} {
		if _, err := h.eng.SetPolicy(ctx, "console/local", conv, core.ChannelPolicy{Mode: map[string]string{"lobby": core.ModeOpen, "ops": ""}[conv],
			Members: core.MembersListed}, owner); err != nil {
			t.Fatal(err)
		}
	}
	if a := adm("console:eve", "ops"); a.Allow || a.Reply != "" {
		t.Fatalf("unaddressed non-member in a mention_only channel: %+v, want a silent refusal", a)
	}
	if a, err := h.eng.Admit(ctx, core.Admission{Account: "console/local", Actor: "console:eve", Conversation: "ops"}); err != nil || a.Reply == "" {
		t.Fatalf("addressed non-member after an unaddressed one: %+v %v, want the notice", a, err)
	}
	if a := adm("console:eve", "lobby"); a.Allow || a.Reply == "" || !a.Open {
		t.Fatalf("unaddressed non-member in an open channel: %+v, want the notice", a)
	}
	if a := adm("console:eve", "lobby"); a.Allow || a.Reply != "" {
		t.Fatalf("again: %+v, want silence", a)
	}
}

// TestRemovePolicy: removing a stored policy brings back the configured one of
// its channel and writes an activity line; only an owner may, and a channel
// with nothing stored is ErrNoPolicy.
func TestRemovePolicy(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.opts = func(o *core.Options) {
		o.Owners = []core.ActorID{"console:owner"}
		o.Policies = map[string]core.ChannelPolicy{core.PolicyKey("console/local", "ops"): {Mode: core.ModeDisabled}}
	}
	h.start()
	owner := core.By{Actor: "console:owner", Name: "Owner"}
	if _, err := h.eng.SetPolicy(ctx, "console/local", "ops", core.ChannelPolicy{Mode: core.ModeOpen}, owner); err != nil {
		t.Fatal(err)
	}
	if _, err := h.eng.RemovePolicy(ctx, "console/local", "ops", core.By{Actor: "console:eve"}); !errors.Is(err, core.ErrNotOwner) {
		t.Fatalf("a non-owner removes: %v, want ErrNotOwner", err)
	}
	if p, _ := h.eng.Policy(ctx, "console/local", "ops"); p.Mode != core.ModeOpen {
		t.Fatalf("after a refused removal the policy is %+v", p)
	}
	if old, err := h.eng.RemovePolicy(ctx, "console/local", "ops", owner); err != nil || old.Mode != core.ModeOpen {
		t.Fatalf("remove: %+v, %v", old, err)
	}
	if p, _ := h.eng.Policy(ctx, "console/local", "ops"); p.Mode != core.ModeDisabled {
		t.Fatalf("after removal the policy is %+v, want the configured one", p)
	}
	if _, err := h.eng.RemovePolicy(ctx, "console/local", "ops", owner); !errors.Is(err, core.ErrNoPolicy) {
		t.Fatalf("remove a configured-only policy: %v, want ErrNoPolicy", err)
	}
	var line string
	_ = h.store.View(ctx, func(tx core.ReadTx) error {
		as, err := tx.Activities(0, 0)
		for _, a := range as {
			if a.Event == "policy.removed" {
				line = a.Summary
			}
		}
		return err
	})
	if !strings.Contains(line, "console/local ops removed by Owner (it was: mode=open)") {
		t.Fatalf("activity line %q", line)
	}
}
