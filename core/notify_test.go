package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"openbot/core"
)

// TestNotifyPostsIntoAnotherConversation: a bot's notify posts into the
// configured conversation as a new thread (opened as a platform thread), not
// into its own thread; the same call again posts nothing more; a target it may
// not use, or whose channel policy disables the bots, is refused.
func TestNotifyPostsIntoAnotherConversation(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) {
		o.Notify = []core.NotifyTarget{
			{Name: "ops", Account: "console/local", Platform: "console", Conversation: "ops"},
			{Name: "private", Account: "console/local", Platform: "console", Conversation: "secret", Bots: []string{"qa"}},
			{Name: "quiet", Account: "console/local", Platform: "console", Conversation: "quiet"},
		}
		o.Policies = map[string]core.ChannelPolicy{core.PolicyKey("console/local", "quiet"): {Mode: core.ModeDisabled}}
	}
	var got []string
	var threads []core.ThreadID
	h.agent.reply["engineer"] = func(ctx context.Context, job *core.Job) (string, error) {
		n := job.Env.(core.Notifier)
		got = n.NotifyTargets()
		for range 2 {
			id, err := n.Notify(ctx, "ops", "Daily summary: all green")
			if err != nil {
				return "", err
			}
			threads = append(threads, id)
		}
		if _, err := n.Notify(ctx, "private", "x"); !errors.Is(err, core.ErrUnknownTarget) {
			t.Errorf("a target for qa only: %v, want ErrUnknownTarget", err)
		}
		if _, err := n.Notify(ctx, "quiet", "x"); !errors.Is(err, core.ErrChannelDisabled) {
			t.Errorf("a channel whose policy disables the bots: %v, want ErrChannelDisabled", err)
		}
		return "summary sent", nil
	}
	h.start2(openerAdapter{h.ad})
	res := h.say("@engineer send the summary")
	h.idle()
	if strings.Join(got, ",") != "ops,quiet" {
		t.Errorf("targets %v, want [ops quiet]", got)
	}
	if threads[0] == res.Thread || threads[0] != threads[1] {
		t.Errorf("notify threads %v (the run's is %d), want one new thread for both calls", threads, res.Thread)
	}
	var toOps, reply []core.Delivery
	for _, d := range h.ad.deliveries() {
		switch d.Conversation {
		case "ops":
			toOps = append(toOps, d)
		case "main":
			reply = append(reply, d)
		}
	}
	if len(toOps) != 1 || toOps[0].Text != "Daily summary: all green" || toOps[0].Sender.Handle != "engineer" {
		t.Errorf("posts into ops %+v, want the summary once from engineer", toOps)
	}
	if len(reply) != 1 || reply[0].Text != "summary sent" {
		t.Errorf("in the run's own conversation %+v, want only the reply", reply)
	}
	ms := h.messages(threads[0])
	if len(ms) != 1 || ms[0].Sender != "bot:engineer" {
		t.Errorf("the notify thread holds %+v", ms)
	}
	// The post opened a platform thread, where people's answers join it.
	var th core.Thread
	h.store.View(context.Background(), func(tx core.ReadTx) error { th, _ = tx.Thread(threads[0]); return nil })
	if len(th.Bindings) != 1 || !strings.HasPrefix(string(th.Bindings[0].Conversation), "ops/") {
		t.Errorf("notify thread bindings %+v, want the platform thread under the post", th.Bindings)
	}
}
