package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"openbot/adapters/slack"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

// handOff is a script where the chief hands the human's message to the engineer,
// whose run blocks until release is closed (or 30 s pass); started is closed when
// the engineer's run begins.
func handOff(started, release chan struct{}) map[string]func(*core.Job) string {
	var once sync.Once
	return map[string]func(*core.Job) string{
		"chief_of_staff": func(*core.Job) string { return "@engineer please check the failing build on main." },
		"engineer": func(*core.Job) string {
			once.Do(func() { close(started) })
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
			return "The build fails in step 3; fixed."
		},
	}
}

func waitClosed(t *testing.T, ch chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestSlackWorkingReactionAcrossHandOff: on the real engine, the human's message
// gets :eyes: when the chief starts, keeps it while the engineer the chief handed
// off to works (also after the chief's reply was posted), and loses it only after
// the engineer's reply: reactions.add before the first reply, reactions.remove
// after the last, once each.
func TestSlackWorkingReactionAcrossHandOff(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the reaction's linger")
	}
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	r := startSlack(t, handOff(started, release))
	if code := r.post(t, slackFixture(t, "events_api_app_mention_channel.json")); code != 200 {
		t.Fatalf("events POST = %d", code)
	}
	waitClosed(t, started, "the engineer's run")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := r.fake.WaitCalls(ctx, "chat.postMessage", 1); err != nil {
		t.Fatal("the chief's reply was not posted")
	}
	const root = "1767225600.000100" // the mention, the trigger
	reactions := func() []string {
		var out []string
		for _, c := range r.fake.Calls() {
			if c.Method == "reactions.add" || c.Method == "reactions.remove" {
				if c.Form.Get("name") != slack.WorkingReaction || c.Form.Get("channel") != "C0TEST001" {
					t.Errorf("%s %v", c.Method, c.Form)
				}
				out = append(out, c.Method+" "+c.Form.Get("timestamp"))
			}
		}
		return out
	}
	// The chief is done and its reply is out; the engineer still works: the
	// reaction stays, well past the linger. What is checked is that nothing
	// happens during the adapter's real-time linger, which no event can show.
	time.Sleep(3 * time.Second) // past the adapter's real linger, which no event shows
	if got := reactions(); !slices.Equal(got, []string{"reactions.add " + root}) {
		t.Fatalf("while the engineer works: reaction calls %q, want just the add", got)
	}
	releaseOnce.Do(func() { close(release) })
	r.idle()
	if _, err := r.fake.WaitCalls(ctx, "reactions.remove", 1); err != nil {
		t.Fatalf("the reaction was not removed after the engineer's run: %q", reactions())
	}
	time.Sleep(100 * time.Millisecond) // a stray second remove would follow at once: give it the chance to show
	if got := reactions(); !slices.Equal(got, []string{"reactions.add " + root, "reactions.remove " + root}) {
		t.Fatalf("reaction calls %q, want one add and one remove on the trigger", got)
	}
	var add, remove int
	var posts []int
	for i, c := range r.fake.Calls() {
		switch c.Method {
		case "reactions.add":
			add = i
		case "reactions.remove":
			remove = i
		case "chat.postMessage":
			posts = append(posts, i)
		}
	}
	if len(posts) != 2 {
		t.Fatalf("%d replies, want 2 (chief, engineer)", len(posts))
	}
	if add > posts[0] || remove < posts[1] {
		t.Fatalf("call order: add #%d, replies %v, remove #%d; want the add before the first reply and the remove after the last", add, posts, remove)
	}
}

// startTelegramScripted is startTelegram with a scripted agent and one account,
// the chief's, through which the engineer's replies (and work) go too.
func startTelegramScripted(t *testing.T, script map[string]func(*core.Job) string) *tgRig {
	t.Helper()
	return startTelegramWith(t, newTgFake(t, "chief_of_staff"), "", core.Options{Agent: &scripted{fn: script, calls: map[string][]*core.Job{}}},
		nil, tgAccounts("chief_of_staff")...)
}

// TestTelegramTypingAcrossHandOff: on the real engine, the chat shows "typing…"
// while the chief works and, after its hand-off, while the engineer works (the
// action repeated), and no typing action is sent once the engineer's run ended.
func TestTelegramTypingAcrossHandOff(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the 4 s typing repeats")
	}
	started, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })
	r := startTelegramScripted(t, handOff(started, release))
	if _, err := r.fake.PushUpdate("tok-chief_of_staff", privateUpdate(1, 10, 5, "please get the build fixed")); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, started, "the engineer's run")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sends, err := r.fake.WaitCalls(ctx, "sendMessage", 1)
	if err != nil {
		t.Fatal("the chief's reply was not sent")
	}
	chiefReply := sends[0].At
	typing := func() []telegramtest.Call { return r.fake.Calls("sendChatAction") }
	for _, c := range typing() {
		if c.Params["chat_id"] != "5" || c.Params["action"] != "typing" {
			t.Fatalf("sendChatAction %v, want typing in chat 5", c.Params)
		}
	}
	if c := typing(); len(c) == 0 || !c[0].At.Before(chiefReply) {
		t.Fatalf("no typing while the chief worked: %d actions", len(c))
	}
	// The engineer works: typing is shown and repeated after the chief's reply.
	afterReply := func() int {
		n := 0
		for _, c := range typing() {
			if c.At.After(chiefReply) {
				n++
			}
		}
		return n
	}
	if err := r.fake.Wait(ctx, func(*telegramtest.Server) bool { return afterReply() >= 2 }); err != nil {
		t.Fatalf("%d typing actions while the engineer worked, want at least 2", afterReply())
	}
	releaseOnce.Do(func() { close(release) })
	if _, err := r.fake.WaitCalls(ctx, "sendMessage", 2); err != nil {
		t.Fatal("the engineer's reply was not sent")
	}
	ictx, icancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer icancel()
	if err := r.eng.WaitIdle(ictx); err != nil {
		t.Fatal(err)
	}
	// Nothing signals the end of typing (the adapter just stops repeating), so
	// the test watches the wall clock: the end is reported right after the run
	// is settled, and then no action may follow for more than one repeat
	// interval (the adapter's real 4 s timer).
	time.Sleep(300 * time.Millisecond) // let an action already under way land before counting
	n := len(typing())
	time.Sleep(5 * time.Second) // more than one repeat interval (the adapter's real 4 s timer)
	if m := len(typing()); m != n {
		t.Fatalf("%d typing actions after the engineer's run ended", m-n)
	}
}
