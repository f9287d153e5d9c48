package core_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"openbot/core"
	"openbot/core/storetest"
)

// meterCalls makes the scripted agent of bot record one model call per entry
// of tokens (input, output, cached) through the run's core.Meter, asking
// BeforeModelCall before each, as agents/loop.go does.
func meterCalls(h *harness, bot string, calls ...[3]int64) {
	h.agent.reply[bot] = func(ctx context.Context, job *core.Job) (string, error) {
		m := job.Env.(core.Meter)
		for i, c := range calls {
			if err := m.BeforeModelCall(ctx, core.ModelCall{Call: i + 1, Model: "gpt-test", InputTokens: 1}); err != nil {
				return "", err
			}
			if err := m.RecordModelCall(ctx, core.ModelCall{Call: i + 1, Profile: "default", Model: "gpt-test",
				InputTokens: c[0], OutputTokens: c[1], CachedTokens: c[2]}); err != nil {
				return "", err
			}
		}
		return "done", nil
	}
}

func (h *harness) ledger() []core.UsageEntry {
	h.t.Helper()
	return storetest.Read(h.t, h.store, func(tx core.ReadTx) ([]core.UsageEntry, error) { return tx.UsageEntries(0, 0) })
}

func noticesWith(ms []core.Message, sub string) []string {
	var out []string
	for _, m := range ms {
		if m.Kind == core.KindNotice && strings.Contains(m.Text, sub) {
			out = append(out, m.Text)
		}
	}
	return out
}

// TestLedgerPricesScriptedRun: a scripted run's model calls become ledger
// entries whose cost is the model's price in micro-units, with the thread's
// account and platform; recording a call again (a retry or replay) adds nothing.
func TestLedgerPricesScriptedRun(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Cost = &core.Cost{Prices: map[string]core.Price{
			// 2.50 in, 10.00 out, 1.25 cached input per million tokens.
			"gpt-test": {Input: 2_500_000, Output: 10_000_000, Cached: 1_250_000},
		}}
	}
	meterCalls(h, "chief_of_staff", [3]int64{1000, 200, 400}, [3]int64{3, 1, 0})
	h.agent.reply["chief_of_staff"] = func(f func(context.Context, *core.Job) (string, error)) func(context.Context, *core.Job) (string, error) {
		return func(ctx context.Context, job *core.Job) (string, error) {
			out, err := f(ctx, job)
			// The same call recorded again: counted once.
			_ = job.Env.(core.Meter).RecordModelCall(ctx, core.ModelCall{Call: 1, Model: "gpt-test", InputTokens: 1000, OutputTokens: 200})
			return out, err
		}
	}(h.agent.reply["chief_of_staff"])
	h.start()
	res := h.say("hello")
	h.idle()
	got := h.ledger()
	if len(got) != 2 {
		t.Fatalf("ledger has %d entries, want 2: %+v", len(got), got)
	}
	// (600*2.5 + 400*1.25 + 200*10) = 1500+500+2000 = 4000 micro-units.
	// (3*2.5 + 1*10) = 17.5 -> 18 (rounded to the nearest micro-unit).
	want := []int64{4000, 18}
	for i, e := range got {
		if e.CostMicros != want[i] {
			t.Errorf("entry %d cost = %d micro-units, want %d", i+1, e.CostMicros, want[i])
		}
		if e.Key != core.UsageKey(e.Run, i+1) || e.Bot != "chief_of_staff" || e.Thread != res.Thread ||
			e.Platform != "console" || e.Account != "console/local" || e.Model != "gpt-test" || e.Profile != "default" {
			t.Errorf("entry %d = %+v", i+1, e)
		}
	}
	if got[0].InputTokens != 1000 || got[0].OutputTokens != 200 || got[0].CachedTokens != 400 {
		t.Errorf("entry 1 tokens = %+v", got[0])
	}
}

// TestBotOverDailyBudgetRefused: once a bot's daily budget is spent, its next
// run is refused before the agent runs, with a notice naming the budget, the
// spend and who can raise it.
func TestBotOverDailyBudgetRefused(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Cost = &core.Cost{Bots: map[string]core.BotBudget{"chief_of_staff": {Daily: core.Limit{Tokens: 100}}},
			Owner: "@alice"}
	}
	meterCalls(h, "chief_of_staff", [3]int64{120, 30, 0})
	h.start()
	res := h.say("first")
	h.idle()
	h.say("second")
	h.idle()
	if n := len(h.agent.jobsFor("chief_of_staff")); n != 1 {
		t.Fatalf("agent ran %d times, want 1 (the second run refused)", n)
	}
	got := noticesWith(h.messages(res.Thread), "is spent")
	if len(got) != 1 {
		t.Fatalf("refusal notices = %q, want one", got)
	}
	for _, want := range []string{"the daily budget of @chief_of_staff is spent", "150 of 100 tokens", "@alice can raise it"} {
		if !strings.Contains(got[0], want) {
			t.Errorf("notice %q lacks %q", got[0], want)
		}
	}
}

// TestThreadBudgetStopsRunAtNextModelCall: a run that spends its thread's
// budget stops at its next model call with the budget notice.
func TestThreadBudgetStopsRunAtNextModelCall(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Cost = &core.Cost{Thread: core.Limit{CostMicros: 1_000}, Currency: "USD",
			Prices: map[string]core.Price{"gpt-test": {Input: 1_000_000, Output: 1_000_000}}}
	}
	var stopErr error
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		m := job.Env.(core.Meter)
		for i := 1; i <= 3; i++ {
			if err := m.BeforeModelCall(ctx, core.ModelCall{Call: i, Model: "gpt-test", InputTokens: 1}); err != nil {
				stopErr = err
				return "", err
			}
			if err := m.RecordModelCall(ctx, core.ModelCall{Call: i, Model: "gpt-test", InputTokens: 900, OutputTokens: 300}); err != nil {
				return "", err
			}
		}
		return "all three calls made", nil
	}
	h.start()
	res := h.say("work")
	h.idle()
	if !errors.Is(stopErr, core.ErrBudget) {
		t.Fatalf("second model call: err %v, want a budget error", stopErr)
	}
	if n := len(h.ledger()); n != 1 {
		t.Errorf("ledger entries = %d, want 1", n)
	}
	got := noticesWith(h.messages(res.Thread), "is spent")
	if len(got) != 1 || !strings.Contains(got[0], "the budget of this thread is spent (0.0012 of 0.001 USD)") {
		t.Errorf("notices = %q", got)
	}
}

// TestBudgetWarningPostedOnce: crossing warn_at posts one notice, later calls
// over it post none.
func TestBudgetWarningPostedOnce(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Cost = &core.Cost{Bots: map[string]core.BotBudget{"*": {Monthly: core.Limit{Tokens: 1000}}}}
	}
	meterCalls(h, "chief_of_staff", [3]int64{500, 100, 0}, [3]int64{200, 50, 0}, [3]int64{50, 10, 0})
	h.start()
	res := h.say("one")
	h.idle()
	got := noticesWith(h.messages(res.Thread), "% used")
	if len(got) != 1 || !strings.Contains(got[0], "The monthly budget of @chief_of_staff is 85% used (850 of 1000 tokens)") {
		t.Fatalf("warnings = %q, want one at 85%%", got)
	}
}

// TestUsageReport: /usage shows this thread, the bot today and this month and
// all bots today, with the budget left.
func TestUsageReport(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Cost = &core.Cost{Currency: "USD", Prices: map[string]core.Price{"gpt-test": {Input: 1_000_000, Output: 2_000_000}},
			Bots: map[string]core.BotBudget{"*": {Daily: core.Limit{CostMicros: 5_000_000}}}, Thread: core.Limit{Tokens: 10_000}}
	}
	meterCalls(h, "chief_of_staff", [3]int64{1000, 500, 0})
	h.start()
	h.say("hello")
	h.idle()
	got, err := h.eng.UsageReport(context.Background(), "console:main", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"This thread: 1500 tokens, 0.002 USD in 1 calls; budget 10000 tokens, 8500 left",
		"@chief_of_staff today: 1500 tokens, 0.002 USD in 1 calls; budget 5.00 USD, 4.998 USD left",
		"@chief_of_staff this month: 1500 tokens",
		"All bots today: 1500 tokens",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}

// TestBudgetAppliesAfterReload: a budget added by a reload refuses the next run.
func TestBudgetAppliesAfterReload(t *testing.T) {
	h := newHarness(t, core.Limits{})
	meterCalls(h, "chief_of_staff", [3]int64{10, 5, 0})
	h.start()
	res := h.say("first")
	h.idle()
	err := h.eng.Reload(context.Background(), core.Settings{Bots: team,
		Cost: &core.Cost{Bots: map[string]core.BotBudget{"*": {Daily: core.Limit{Tokens: 15}}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.say("second")
	h.idle()
	if n := len(h.agent.jobsFor("chief_of_staff")); n != 1 {
		t.Errorf("agent ran %d times, want 1", n)
	}
	if got := noticesWith(h.messages(res.Thread), "the daily budget of @chief_of_staff is spent (15 of 15 tokens)"); len(got) != 1 {
		t.Errorf("refusal notices = %q", got)
	}
}

// TestChannelDailyBudgetRefused: a daily channel budget set under the
// account's default gives each channel its own; once one channel's is spent,
// the next run there (in another thread too) is refused with a notice naming
// it, while another channel of the same account still runs.
func TestChannelDailyBudgetRefused(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"console:owner"}, nil)
	h.opts = func(o *core.Options) {
		o.Owners = []core.ActorID{"console:owner"}
		o.Cost = &core.Cost{Owner: "@alice"}
	}
	meterCalls(h, "chief_of_staff", [3]int64{120, 30, 0})
	h.start()
	if _, err := h.eng.SetPolicy(ctx, "console/local", core.AccountDefault, core.ChannelPolicy{Budget: core.Limit{Tokens: 100}},
		core.By{Actor: "console:owner"}); err != nil {
		t.Fatal(err)
	}
	h.say("first", in("ops"))
	h.idle()
	res := h.say("second", func(i *core.Inbound) { i.ThreadKey, i.Conversation = "console:ops-2", "ops" })
	h.idle()
	other := h.say("third", in("random"))
	h.idle()
	ran := map[string]bool{}
	for _, j := range h.agent.jobsFor("chief_of_staff") {
		ran[j.Triggers[0].Text] = true
	}
	if !ran["first"] || ran["second"] || !ran["third"] {
		t.Fatalf("runs %v, want first and third (second refused by the channel budget)", ran)
	}
	got := noticesWith(h.messages(res.Thread), "is spent")
	if len(got) != 1 || !strings.Contains(got[0], "the channel budget for today is spent (150 of 100 tokens). @alice can raise it.") {
		t.Errorf("refusal notices = %q", got)
	}
	if got := noticesWith(h.messages(other.Thread), "is spent"); len(got) != 0 {
		t.Errorf("the other channel got %q", got)
	}
	var chans []string
	for _, e := range h.ledger() {
		chans = append(chans, e.Channel)
	}
	if !slices.Equal(chans, []string{"ops", "random"}) {
		t.Errorf("ledger channels %q, want ops and random", chans)
	}
}
