package telegram

import (
	"context"
	"fmt"
	"testing"
	"time"

	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

const (
	privateConv = core.ConversationRef("100000001")
	topicConv   = core.ConversationRef("-1001000000002:topic:7")
	generalConv = core.ConversationRef("-1001000000002")
)

func work(run core.RunID, conv core.ConversationRef, started bool) core.Work {
	return core.Work{Conversation: conv, ReplyTo: "10", Run: run, Thread: 1,
		Bot: core.Sender{Actor: core.BotActorID("engineer"), Handle: "engineer"}, Started: started}
}

// typingAdapter returns an adapter whose typist repeats every every, capped at
// limit; running says whether Run (and so the typist) is started. Its typist
// reports each round on e.rounds.
func typingAdapter(t *testing.T, every, limit time.Duration, running bool) (*env, *Adapter, func()) {
	t.Helper()
	e := newEnv(t)
	a := e.adapter(t, e.options())
	a.typing.every, a.typing.max = every, limit
	e.rounds = make(chan struct{}, 1024)
	a.typing.afterRound = func() {
		select {
		case e.rounds <- struct{}{}:
		default: // nobody counts rounds this far back
		}
	}
	stop := func() {}
	if running {
		stop = run(t, a)
		started(t, e, a)
	}
	return e, a, stop
}

// waitRounds waits until the typist has finished n more rounds.
func waitRounds(t *testing.T, e *env, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case <-e.rounds:
		case <-timeout:
			t.Fatalf("the typist finished no round for 10s")
		}
	}
}

// drainRounds forgets the rounds finished so far.
func drainRounds(e *env) {
	for {
		select {
		case <-e.rounds:
		default:
			return
		}
	}
}

// typingIn returns the sendChatAction calls for chat (and topic, "" for none),
// checking the action.
func typingIn(t *testing.T, e *env, chat, topic string) []telegramtest.Call {
	t.Helper()
	var out []telegramtest.Call
	for _, c := range e.srv.Calls("sendChatAction") {
		if c.Params["action"] != "typing" {
			t.Errorf("sendChatAction %v", c.Params)
		}
		if c.Params["chat_id"] == chat && c.Params["message_thread_id"] == topic {
			out = append(out, c)
		}
	}
	return out
}

// waitTyping waits until chat/topic had at least n typing actions, woken by
// each call the fake records.
func waitTyping(t *testing.T, e *env, chat, topic string, n int) {
	t.Helper()
	for len(typingIn(t, e, chat, topic)) < n {
		e.waitCalls(t, "sendChatAction", len(e.srv.Calls("sendChatAction"))+1)
	}
}

// quiet checks that chat/topic gets no typing action in two whole rounds of the
// typist, after the round that may have been under way when the work ended.
func quiet(t *testing.T, e *env, chat, topic string) {
	t.Helper()
	drainRounds(e)
	waitRounds(t, e, 1)
	n := len(typingIn(t, e, chat, topic))
	waitRounds(t, e, 2)
	if m := len(typingIn(t, e, chat, topic)); m != n {
		t.Fatalf("%d typing actions in %s/%s after it should have stopped", m-n, chat, topic)
	}
}

// TestTypingWhileWorking: a run's start shows typing at once and it repeats while
// the run works; its end stops it.
func TestTypingWhileWorking(t *testing.T) {
	const every = 40 * time.Millisecond
	e, a, _ := typingAdapter(t, every, time.Hour, true)
	a.Working(t.Context(), work(1, privateConv, true))
	if n := len(typingIn(t, e, "100000001", "")); n != 1 {
		t.Fatalf("%d typing actions right after the start, want 1", n)
	}
	waitTyping(t, e, "100000001", "", 4)
	a.Working(t.Context(), work(1, privateConv, false))
	quiet(t, e, "100000001", "")
}

// TestTypingCountsRuns: typing goes on until the last run working in a
// conversation ends; a second start there sends nothing extra; repeated starts and
// ends of one run count once; conversations (a forum topic, the group's General)
// are separate.
func TestTypingCountsRuns(t *testing.T) {
	e, a, _ := typingAdapter(t, time.Hour, time.Hour, false) // no typist: starts only
	a.Working(t.Context(), work(1, privateConv, true))
	a.Working(t.Context(), work(2, privateConv, true))
	a.Working(t.Context(), work(2, privateConv, true))
	if n := len(typingIn(t, e, "100000001", "")); n != 1 {
		t.Fatalf("%d typing actions for two runs in one chat, want 1", n)
	}
	a.Working(t.Context(), work(1, privateConv, false))
	a.Working(t.Context(), work(1, privateConv, false))
	if !a.stillTyping(Conversation{Chat: 100000001}) {
		t.Fatal("typing stopped while run 2 still works")
	}
	a.Working(t.Context(), work(2, privateConv, false))
	if a.stillTyping(Conversation{Chat: 100000001}) {
		t.Fatal("typing goes on after the last run ended")
	}
	a.Working(t.Context(), work(3, privateConv, true)) // working again: shown again
	if n := len(typingIn(t, e, "100000001", "")); n != 2 {
		t.Fatalf("%d typing actions after a new start, want 2", n)
	}

	a.Working(t.Context(), work(4, topicConv, true))
	a.Working(t.Context(), work(5, generalConv, true))
	a.Working(t.Context(), work(5, generalConv, false))
	if len(typingIn(t, e, "-1001000000002", "7")) != 1 || len(typingIn(t, e, "-1001000000002", "")) != 1 {
		t.Fatalf("typing in topic and General: %v", e.srv.Calls("sendChatAction"))
	}
	if !a.stillTyping(Conversation{Chat: -1001000000002, Topic: 7}) {
		t.Fatal("the end in General stopped the topic")
	}

	a.Working(t.Context(), work(6, "not-a-chat", true))
	a.Working(t.Context(), work(7, privateConv, false)) // never started
	if n := len(e.srv.Calls("sendChatAction")); n != 4 {
		t.Fatalf("%d typing actions, want 4", n)
	}
	a.typing.mu.Lock()
	runs := len(a.typing.runs)
	a.typing.mu.Unlock()
	if runs != 2 { // 3 and 4
		t.Fatalf("%d runs tracked, want 2", runs)
	}
}

// TestTypingOverlapRepeats: with two runs in a chat, the first one's end does not
// stop the repeats; the second's does.
func TestTypingOverlapRepeats(t *testing.T) {
	const every = 40 * time.Millisecond
	e, a, _ := typingAdapter(t, every, time.Hour, true)
	a.Working(t.Context(), work(1, topicConv, true))
	a.Working(t.Context(), work(2, topicConv, true))
	a.Working(t.Context(), work(1, topicConv, false))
	n := len(typingIn(t, e, "-1001000000002", "7"))
	waitTyping(t, e, "-1001000000002", "7", n+3)
	a.Working(t.Context(), work(2, topicConv, false))
	quiet(t, e, "-1001000000002", "7")
}

// TestTypingCap: a conversation shows typing at most max after its latest start,
// even when no end comes; a new start there shows it again.
func TestTypingCap(t *testing.T) {
	const every = 20 * time.Millisecond
	e, a, _ := typingAdapter(t, every, 150*time.Millisecond, true)
	a.Working(t.Context(), work(1, privateConv, true))
	waitTyping(t, e, "100000001", "", 3)
	for a.stillTyping(Conversation{Chat: 100000001}) { // until a round finds the cap passed
		waitRounds(t, e, 1)
	}
	quiet(t, e, "100000001", "")
	n := len(typingIn(t, e, "100000001", ""))
	a.Working(t.Context(), work(2, privateConv, true))
	waitTyping(t, e, "100000001", "", n+2)
}

// TestTypingStopsAtShutdown: once Run returned nothing is sent, even for a start.
func TestTypingStopsAtShutdown(t *testing.T) {
	const every = 20 * time.Millisecond
	e, a, stop := typingAdapter(t, every, time.Hour, true)
	a.Working(t.Context(), work(1, privateConv, true))
	waitTyping(t, e, "100000001", "", 3)
	stop()
	n := len(e.srv.Calls("sendChatAction"))
	a.Working(t.Context(), work(2, topicConv, true)) // would send at once, before it returns
	if m := len(e.srv.Calls("sendChatAction")); m != n {
		t.Fatalf("%d typing actions after Run returned", m-n)
	}
	// Run waited for its typist, so no round can send anything later either.
}

// TestTypingReleasedAfterCap: a run whose end never comes holds nothing once the
// cap has passed: its chat and the run are forgotten, a late end changes nothing,
// and a new start tracks the chat afresh.
func TestTypingReleasedAfterCap(t *testing.T) {
	_, a, _ := typingAdapter(t, time.Hour, time.Minute, false)
	for run := range core.RunID(50) {
		a.Working(t.Context(), work(run+1, core.ConversationRef(fmt.Sprint(100000001+int(run))), true))
	}
	if got := len(a.typingChats(time.Now())); got != 50 {
		t.Fatalf("%d chats shown, want 50", got)
	}
	if got := a.typingChats(time.Now().Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("%d chats shown past the cap, want 0", len(got))
	}
	a.typing.mu.Lock()
	chats, runs := len(a.typing.chats), len(a.typing.runs)
	a.typing.mu.Unlock()
	if chats != 0 || runs != 0 {
		t.Fatalf("past the cap %d chats and %d runs are still tracked, want none", chats, runs)
	}
	a.Working(t.Context(), work(1, privateConv, false)) // a late end
	a.Working(t.Context(), work(99, privateConv, true))
	if got := a.typingChats(time.Now()); len(got) != 1 || got[0].Chat != 100000001 {
		t.Fatalf("after a new start chats shown %v, want the private chat", got)
	}
}

// TestTypingWithoutRun: a process that does not hold the account's polling
// (its Run is not running, DESIGN.md §7) repeats typing through RunTypist; with
// Run running too, each repeat is sent once, not twice.
func TestTypingWithoutRun(t *testing.T) {
	const every = 40 * time.Millisecond
	e, a, _ := typingAdapter(t, every, time.Hour, false)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); _ = a.RunTypist(ctx) }()
	a.Working(t.Context(), work(1, privateConv, true))
	waitTyping(t, e, "100000001", "", 4)
	a.Working(t.Context(), work(1, privateConv, false))
	quiet(t, e, "100000001", "")
	cancel()
	<-done

	// Both typists at once: still one repeat per round.
	e2, b, _ := typingAdapter(t, every, time.Hour, true)
	ctx2, cancel2 := context.WithCancel(t.Context())
	done2 := make(chan struct{})
	go func() { defer close(done2); _ = b.RunTypist(ctx2) }()
	defer func() { cancel2(); <-done2 }()
	drainRounds(e2)
	b.Working(t.Context(), work(1, privateConv, true)) // one action at once
	waitRounds(t, e2, 5)
	// Each round sent one repeat; a sixth round may be under way.
	if n := len(typingIn(t, e2, "100000001", "")); n > 1+5+1 {
		t.Errorf("%d typing actions in 5 rounds (6 at most): repeats sent twice", n)
	}
	b.Working(t.Context(), work(1, privateConv, false))
}
