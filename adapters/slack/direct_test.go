package slack

import (
	"context"
	"strings"
	"testing"

	"openbot/core"
)

// TestDirectConversation: conversations.open gives the DM channel and its
// thread key; a person of another workspace, a non-Slack id, an unknown user
// and Slack's refusals are errors.
func TestDirectConversation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := context.Background()
	ref, key, err := e.a.DirectConversation(ctx, HumanActor("T0TEST", "U0TEST001"), "hello")
	if err != nil || ref != "T0TEST:D0TEST001" || key != "slack:T0TEST:D0TEST001" {
		t.Fatalf("DirectConversation = %q %q %v, want the DM T0TEST:D0TEST001", ref, key, err)
	}
	if _, _, err := e.a.DirectConversation(ctx, HumanActor("T0TEST", "U0TEST001"), "hello"); err != nil {
		t.Fatalf("an already open DM: %v", err)
	}
	for _, tc := range []struct {
		actor core.ActorID
		want  string
	}{
		{HumanActor("T0OTHER", "U0TEST001"), "not in workspace"},
		{"telegram:1001", "not a Slack user"},
		{"slack:T0TEST", "not a Slack user"},
		{HumanActor("T0TEST", "U0NOBODY"), "user_not_found"},
	} {
		if _, _, err := e.a.DirectConversation(ctx, tc.actor, "hello"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.actor, err, tc.want)
		}
	}
	calls := e.slack.CallsTo("conversations.open")
	if len(calls) != 3 || calls[0].Form.Get("users") != "U0TEST001" {
		t.Fatalf("conversations.open calls %+v, want 3, the first for U0TEST001", calls)
	}
}
