package core

import "testing"

// TestFetchPolicyFor: a conversation's policy replaces what it sets of the
// bot's; nil keeps the bot's.
func TestFetchPolicyFor(t *testing.T) {
	bot := FetchPolicy{AllowDomains: []string{"a.example"}, Unlisted: FetchUnlistedAsk}
	if got := FetchPolicyFor(bot, nil); got.Unlisted != "ask" || len(got.AllowDomains) != 1 {
		t.Errorf("no channel policy: %+v", got)
	}
	got := FetchPolicyFor(bot, &FetchPolicy{Unlisted: FetchUnlistedRefuse})
	if got.Unlisted != "refuse" || len(got.AllowDomains) != 1 || got.AllowDomains[0] != "a.example" {
		t.Errorf("channel sets unlisted: %+v", got)
	}
	got = FetchPolicyFor(bot, &FetchPolicy{AllowDomains: []string{}})
	if got.Unlisted != "ask" || len(got.AllowDomains) != 0 {
		t.Errorf("channel empties the list: %+v", got)
	}
}
