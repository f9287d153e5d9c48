package slack

import (
	"testing"
)

// TestWorkingReaction: a message that woke a bot gets :eyes:, a duplicate or a
// message that woke nobody gets nothing, and the next reply delivered to that
// conversation takes the reaction off.
func TestWorkingReaction(t *testing.T) {
	e := newEnv(t, nil)
	e.engine.woken = []string{"engineer"}
	e.postEvent(t, "events_api_app_mention_channel.json")
	e.postEvent(t, "events_api_message_channel_twin_of_mention.json") // duplicate
	adds := e.slack.CallsTo("reactions.add")
	if len(adds) != 1 {
		t.Fatalf("%d reactions.add, want 1", len(adds))
	}
	f := adds[0].Form
	if f.Get("name") != WorkingReaction || f.Get("channel") != "C0TEST001" || f.Get("timestamp") != "1767225600.000100" {
		t.Errorf("reactions.add form %v", f)
	}

	if _, err := e.a.Deliver(t.Context(), delivery("done")); err != nil {
		t.Fatal(err)
	}
	removes := e.slack.CallsTo("reactions.remove")
	if len(removes) != 1 || removes[0].Form.Get("timestamp") != "1767225600.000100" || removes[0].Form.Get("name") != WorkingReaction {
		t.Fatalf("reactions.remove calls %+v", removes)
	}
	if _, err := e.a.Deliver(t.Context(), delivery("again")); err != nil {
		t.Fatal(err)
	}
	if n := len(e.slack.CallsTo("reactions.remove")); n != 1 {
		t.Errorf("%d reactions.remove after a second reply, want still 1", n)
	}

	e2 := newEnv(t, nil) // woken nobody
	e2.postEvent(t, "events_api_message_thread_reply.json")
	if n := len(e2.slack.CallsTo("reactions.add")); n != 0 {
		t.Errorf("%d reactions.add for a message that woke nobody", n)
	}
}

func TestWorkingBounded(t *testing.T) {
	w := newWorking(2)
	w.add("a", reacted{"C", "1"})
	w.add("b", reacted{"C", "2"})
	w.add("a", reacted{"C", "3"})
	w.add("c", reacted{"C", "4"})
	if got := w.take("a"); got != nil {
		t.Errorf("oldest conversation kept: %v", got)
	}
	if got := w.take("b"); len(got) != 1 {
		t.Errorf("b = %v", got)
	}
	if got := w.take("c"); len(got) != 1 {
		t.Errorf("c = %v", got)
	}
}
