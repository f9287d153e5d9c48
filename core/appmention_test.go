package core_test

import (
	"testing"

	"openbot/core"
)

// TestAppMentionIsTransport: on a whole-team account ("*") the mention of the app
// itself (native "*") is how the message reached openbot, not a target: with a bot
// named in the text only that bot wakes; alone it means the thread's default bot.
// The rule is in core, so it holds for every platform's "*" account.
func TestAppMentionIsTransport(t *testing.T) {
	for _, c := range []struct {
		name   string
		text   string
		native []string
		want   []string
	}{
		{"app and a bot", "@engineer fix the build", []string{"*"}, []string{"engineer"}},
		{"app and two bots", "@engineer and @qa fix the build", []string{"*"}, []string{"engineer", "qa"}},
		{"app and a native bot", "fix the build", []string{"*", "reviewer"}, []string{"reviewer"}},
		{"app alone", "fix the build", []string{"*"}, []string{"chief_of_staff"}},
		{"app and an unknown handle", "ask @nobody to fix it", []string{"*"}, []string{"chief_of_staff"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, core.Limits{})
			h.start()
			res := h.say(c.text, func(in *core.Inbound) { in.Mentions = c.native })
			if !equalStrings(res.Woken, c.want) {
				t.Errorf("woken %v, want %v", res.Woken, c.want)
			}
			h.idle()
			for _, bot := range []string{"chief_of_staff", "engineer", "reviewer", "qa"} {
				ran := len(h.agent.jobsFor(bot)) > 0
				if ran != contains(c.want, bot) {
					t.Errorf("@%s ran = %v, want %v", bot, ran, !ran)
				}
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// TestAppMentionIsTransportOnRedelivery: the same message seen again through a
// whole-team account (native "*") wakes nobody more, whether it names a bot (the
// app is transport) or not (the first delivery already gave it to the default bot).
func TestAppMentionIsTransportOnRedelivery(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"names a bot", "@engineer fix the build", []string{"engineer"}},
		{"names no bot", "fix the build", []string{"chief_of_staff"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, core.Limits{})
			h.start()
			first := h.say(c.text, func(in *core.Inbound) { in.DedupKey = "tg:-100:7" })
			if !equalStrings(first.Woken, c.want) {
				t.Fatalf("first delivery woke %v, want %v", first.Woken, c.want)
			}
			again := h.say(c.text, func(in *core.Inbound) {
				in.DedupKey, in.Account, in.Mentions = "tg:-100:7", "console/team", []string{"*"}
			})
			if !again.Duplicate || len(again.Woken) != 0 {
				t.Errorf("redelivery through the team account: duplicate %v, woke %v, want nobody", again.Duplicate, again.Woken)
			}
			h.idle()
			for _, bot := range []string{"chief_of_staff", "engineer"} {
				if n, want := len(h.agent.jobsFor(bot)), map[bool]int{true: 1}[contains(c.want, bot)]; n != want {
					t.Errorf("@%s ran %d times, want %d", bot, n, want)
				}
			}
		})
	}
}
