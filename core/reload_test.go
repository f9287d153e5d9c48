package core_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"openbot/core"
)

// TestReloadKeepsRunInFlight: Reload adds a bot and changes another's instructions
// while a run of the second is in flight; that run finishes with the profile it
// started with, the next run uses the new one, the added bot works, and an invalid
// reload is refused with every problem named while the running settings stay.
func TestReloadKeepsRunInFlight(t *testing.T) {
	h := newHarness(t, core.Limits{MaxConcurrentRuns: 4})
	old := slices.Clone(team)
	old[0].Instructions = "old instructions"
	h.opts = func(o *core.Options) { o.Bots = old }
	g := newGate(0)
	h.agent.reply["chief_of_staff"] = g.body(func(j *core.Job) string { return "with " + j.Bot.Instructions })
	h.start()

	first := h.say("first task")
	inflight := g.next(t)

	next := slices.Clone(team)
	next[0].Instructions = "new instructions"
	next = append(next, core.BotProfile{Handle: "designer", Name: "Designer", Description: "draws"})
	if err := h.eng.Reload(context.Background(), core.Settings{Bots: next, Limits: core.Limits{MaxConcurrentRuns: 4}}); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if got := h.eng.Bots(); len(got) != 5 || got[4].Handle != "designer" {
		t.Fatalf("bots after reload = %+v", got)
	}
	g.release(first.Thread)
	h.idle()
	if got := inflight.Bot.Instructions; got != "old instructions" {
		t.Fatalf("the run in flight saw instructions %q, want the old ones", got)
	}

	h.say("second task")
	second := g.next(t)
	if got := second.Bot.Instructions; got != "new instructions" {
		t.Fatalf("the next run has instructions %q, want the new ones", got)
	}
	g.release(first.Thread)
	h.idle()
	replies := h.ad.texts()
	if !slices.Contains(replies, "[chief_of_staff] with old instructions") || !slices.Contains(replies, "[chief_of_staff] with new instructions") {
		t.Fatalf("replies = %q", replies)
	}

	// The added bot has a worker and answers its mention.
	h.say("@designer a logo please")
	h.idle()
	if n := len(h.agent.jobsFor("designer")); n != 1 {
		t.Fatalf("designer ran %d times, want 1", n)
	}

	// An invalid reload names every problem and changes nothing.
	bad := []core.BotProfile{{Handle: "qa"}, {Handle: "qa"}, {Handle: ""}}
	err := h.eng.Reload(context.Background(), core.Settings{Bots: bad, DefaultBot: "nobody"})
	if err == nil {
		t.Fatal("an invalid reload was accepted")
	}
	for _, want := range []string{`"qa" is used twice`, "empty handle", `default bot "nobody"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("reload error %q does not say %q", err, want)
		}
	}
	if got := h.eng.Bots(); len(got) != 5 {
		t.Fatalf("bots after a refused reload = %d, want the 5 running ones", len(got))
	}
	h.say("third task")
	third := g.next(t)
	if third.Bot.Instructions != "new instructions" {
		t.Fatalf("after a refused reload the run has instructions %q", third.Bot.Instructions)
	}
	g.release(third.Thread.ID)
	h.idle()
}

// TestReloadRemovesBotAndResizes: a removed bot takes no more work (its mention
// does not wake it), and a larger max_concurrent_runs and max_parallel_threads let
// more runs go at once without a restart.
func TestReloadRemovesBotAndResizes(t *testing.T) {
	h := newHarness(t, core.Limits{MaxConcurrentRuns: 1})
	g := newGate(0)
	h.agent.reply["chief_of_staff"] = g.body(nil)
	h.start()

	a := h.say("task a", inThread(1)).Thread
	h.say("task b", inThread(2))
	g.next(t)
	bots := parallelTeam(2)
	bots = slices.DeleteFunc(bots, func(b core.BotProfile) bool { return b.Handle == "qa" })
	if err := h.eng.Reload(context.Background(), core.Settings{Bots: bots, Limits: core.Limits{MaxConcurrentRuns: 2}}); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	b := g.next(t) // the second thread starts beside the first
	g.release(a)
	g.release(b.Thread.ID)
	h.idle()
	g.check(t)

	// "@qa" is no bot any more: the default bot takes the message.
	res := h.say("@qa please test", inThread(3))
	g.release(g.next(t).Thread.ID)
	h.idle()
	if slices.Contains(res.Woken, "qa") || len(h.agent.jobsFor("qa")) != 0 {
		t.Fatalf("a removed bot was woken: %v", res.Woken)
	}
}
