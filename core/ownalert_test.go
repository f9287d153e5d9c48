package core_test

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"testing"

	"openbot/core"
)

// dmAdapter records deliveries and opens a DM ("dm:<actor>") with the people
// in reach; anyone else is an error, as a platform refusing the DM.
type dmAdapter struct {
	*recAdapter
	reach []core.ActorID
}

func (d dmAdapter) DirectConversation(_ context.Context, actor core.ActorID, _ string) (core.ConversationRef, string, error) {
	if !slices.Contains(d.reach, actor) {
		return "", "", errors.New("cannot reach " + string(actor))
	}
	return core.ConversationRef("dm:" + actor), "dm:" + string(actor), nil
}

// TestTellOwners: each owner, configured or stored, is told once, in the DM of
// the first of their identities (linked ones included) that an account other
// than the avoided ones reaches; an account that cannot reach them is passed
// over for the next of that platform, and an owner no account reaches is not
// counted.
func TestTellOwners(t *testing.T) {
	ctx := context.Background()
	h := policyHarness(t, []core.ActorID{"telegram:88", "slack:T:OWN"}, nil)
	h.start()
	if _, err := h.eng.AddOwner(ctx, "slack:T:OWN", "Own", core.By{Actor: "console:you"}); err != nil {
		t.Fatal(err)
	}
	link, err := h.eng.Command(ctx, core.Command{Name: "link", Actor: "slack:T:OWN", Direct: true})
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile(`/link ([A-Z0-9]{8}) `).FindStringSubmatch(link)
	if code == nil {
		t.Fatalf("/link: %q", link)
	}
	if got, err := h.eng.Command(ctx, core.Command{Name: "link", Args: code[1], Actor: "telegram:77", Direct: true}); err != nil || got == "" {
		t.Fatalf("/link CODE: %q %v", got, err)
	}
	slack := dmAdapter{&recAdapter{id: "slack/acme", bot: "*"}, []core.ActorID{"slack:T:OWN"}}
	tgMain := dmAdapter{&recAdapter{id: "telegram/main", bot: "*"}, []core.ActorID{"telegram:77", "telegram:88"}}
	tgOps := dmAdapter{&recAdapter{id: "telegram/ops", bot: "*"}, []core.ActorID{"telegram:77"}}
	for _, ad := range []core.Adapter{slack, tgMain, tgOps} {
		if err := h.eng.AddAdapter(ad); err != nil {
			t.Fatal(err)
		}
	}
	dms := func(ad dmAdapter) []string {
		var out []string
		for _, d := range ad.deliveries() {
			out = append(out, string(d.Conversation)+" "+d.Text)
		}
		ad.mu.Lock()
		ad.got = nil
		ad.mu.Unlock()
		return out
	}
	for _, tc := range []struct {
		avoid            []core.AccountID
		told             int
		slack, main, ops []string
	}{
		// Telegram silent: Own on Slack; 88 has no other identity.
		{[]core.AccountID{"telegram/main", "telegram/ops"}, 1, []string{"dm:slack:T:OWN down"}, nil, nil},
		// Slack silent: Own through the linked telegram:77, 88 directly.
		{[]core.AccountID{"slack/acme"}, 2, nil, []string{"dm:telegram:88 down", "dm:telegram:77 down"}, nil},
		// telegram/main silent: telegram/ops cannot reach 88.
		{[]core.AccountID{"telegram/main"}, 1, []string{"dm:slack:T:OWN down"}, nil, nil},
	} {
		told, err := h.eng.TellOwners(ctx, "down", tc.avoid)
		if err != nil || told != tc.told {
			t.Errorf("avoiding %v: told %d, %v; want %d", tc.avoid, told, err, tc.told)
		}
		for _, c := range []struct {
			ad   dmAdapter
			want []string
		}{{slack, tc.slack}, {tgMain, tc.main}, {tgOps, tc.ops}} {
			got := dms(c.ad)
			slices.Sort(got)
			slices.Sort(c.want)
			if !slices.Equal(got, c.want) {
				t.Errorf("avoiding %v: %s got %q, want %q", tc.avoid, c.ad.id, got, c.want)
			}
		}
	}
	if told, err := h.eng.TellOwners(ctx, "down", []core.AccountID{"slack/acme", "telegram/main", "telegram/ops"}); err != nil || told != 0 {
		t.Errorf("every account avoided: told %d, %v; want 0", told, err)
	}
}
