package e2e

// End-to-end tests of the terminal channel, the core engine, the bbolt
// store, the real agent loop on go-openai and a fake OpenAI-compatible server on
// 127.0.0.1 speaking SSE with tool-call deltas.

import (
	"io"
	"strings"
	"sync"
	"testing"

	"openbot/adapters/console"
	"openbot/agents/openaitest"
	"openbot/core"
)

type e2e struct {
	*proc
	srv *openaitest.Server
	in  *io.PipeWriter
	out *syncBuffer
}

var e2eTeam = []core.BotProfile{
	{Handle: "chief_of_staff", Name: "Chief of Staff", Description: "coordinates and delegates"},
	{Handle: "engineer", Name: "Engineer", Description: "writes code"},
	{Handle: "reviewer", Name: "Reviewer", Description: "reviews code"},
	{Handle: "qa", Name: "QA", Description: "tests"},
}

func startE2E(t *testing.T, limits core.Limits, handle func(r openaitest.Request) openaitest.Reply) *e2e {
	t.Helper()
	srv := openaitest.New(t)
	srv.Handle(handle)
	x := startConsole(t, core.Options{Agent: llmAgent(t, srv, nil, limits), Limits: limits})
	x.srv = srv
	return x
}

// startConsole runs the engine from opts with the terminal channel on a pipe.
func startConsole(t *testing.T, opts core.Options) *e2e {
	t.Helper()
	x := &e2e{out: &syncBuffer{}}
	x.proc = openProc(t, "", opts)
	pr, pw := io.Pipe()
	x.in = pw
	t.Cleanup(func() { pw.Close() })
	con, err := console.New(console.Options{Engine: x.eng, In: pr, Out: x.out})
	if err != nil {
		t.Fatal(err)
	}
	x.run(con)
	return x
}

// say types a line and waits until the engine has stored it.
func (x *e2e) say(line string) {
	x.t.Helper()
	before := x.events.now().ingested
	if _, err := io.WriteString(x.in, line+"\n"); err != nil {
		x.t.Fatal(err)
	}
	x.events.wait(x.t, "line "+line+" to be stored", func(n counts) bool { return n.ingested > before })
}

// asked waits until the model handler closed asked: the first model call is in
// flight.
func (x *e2e) asked(asked <-chan struct{}) {
	x.t.Helper()
	select {
	case <-asked:
	case <-x.ctx().Done():
		x.t.Fatal("the model was never called")
	}
}

func (x *e2e) requestsFor(bot string) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range x.srv.Requests() {
		if botOf(r) == bot {
			out = append(out, r)
		}
	}
	return out
}

func TestE2EDefaultBotReplies(t *testing.T) {
	x := startE2E(t, core.Limits{}, func(r openaitest.Request) openaitest.Reply {
		return openaitest.Text("Hello! How can the team help?")
	})
	x.say("hello")
	x.idle()
	if got := blocks(x.out); len(got) != 1 || got[0] != "[chief_of_staff] Hello! How can the team help?" {
		t.Fatalf("printed %q", got)
	}
}

func TestE2EHandoffScopedView(t *testing.T) {
	x := startE2E(t, core.Limits{}, func(r openaitest.Request) openaitest.Reply {
		switch botOf(r) {
		case "chief_of_staff":
			if strings.Contains(lastUser(r), "[Engineer] (new)") {
				return openaitest.Text("The login page is done.")
			}
			return openaitest.Text("@engineer build the login page in web/login.html; done when it posts to /login; report back to me.")
		case "engineer":
			return openaitest.Text("@chief_of_staff done: web/login.html posts to /login.")
		}
		return openaitest.Error(500, "unexpected")
	})
	x.say("secret-planning-note: we need a login page")
	x.idle()
	want := []string{
		"[chief_of_staff] @engineer build the login page in web/login.html; done when it posts to /login; report back to me.",
		"[engineer] @chief_of_staff done: web/login.html posts to /login.",
		"[chief_of_staff] The login page is done.",
	}
	if got := blocks(x.out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	eng := x.requestsFor("engineer")
	if len(eng) != 1 {
		t.Fatalf("engineer requests = %d, want 1", len(eng))
	}
	raw := string(eng[0].Raw)
	if strings.Contains(raw, "secret-planning-note") {
		t.Error("the delegate's scoped view must not contain the human message addressed to the chief")
	}
	if !strings.Contains(raw, "1 other message exists but is not shown") {
		t.Errorf("the delegate's prompt must count the hidden message; request: %s", raw)
	}
	if !strings.Contains(raw, "build the login page") {
		t.Error("the delegate must see the hand-off")
	}
}

func TestE2EHopLimitOneNotice(t *testing.T) {
	x := startE2E(t, core.Limits{MaxBotHops: 4}, func(r openaitest.Request) openaitest.Reply {
		if botOf(r) == "engineer" {
			return openaitest.Text("@reviewer please look again")
		}
		return openaitest.Text("@engineer please change it again")
	})
	x.say("@engineer start the loop")
	x.idle()
	notices := 0
	for _, b := range blocks(x.out) {
		if strings.HasPrefix(b, "[system]") {
			notices++
			if !strings.Contains(b, "4 hops") {
				t.Errorf("notice %q should name the limit", b)
			}
		}
	}
	if notices != 1 {
		t.Fatalf("system notices = %d, want exactly 1; printed:\n%s", notices, x.out.String())
	}
	if n := len(x.srv.Requests()); n != 4 {
		t.Fatalf("model calls = %d, want 4 (one per hop)", n)
	}
}

func TestE2EMessagesWhileBusyMakeOneRun(t *testing.T) {
	asked, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	calls := 0
	x := startE2E(t, core.Limits{}, func(r openaitest.Request) openaitest.Reply {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			close(asked)
			return openaitest.Reply{Text: "first answer", Wait: release}
		}
		return openaitest.Text("answered all three")
	})
	x.say("one")
	x.asked(asked)
	x.say("two")
	x.say("three")
	x.say("four")
	close(release)
	x.idle()
	reqs := x.requestsFor("chief_of_staff")
	if len(reqs) != 2 {
		t.Fatalf("chief model calls = %d, want 2 (three queued messages coalesce into one run)", len(reqs))
	}
	if n := strings.Count(string(reqs[1].Raw), "(new)"); n < 3 {
		t.Fatalf("second run marks %d messages (new), want the three triggers", n)
	}
}

func TestE2EHeldHandoffDeliveredAfterQueuedMail(t *testing.T) {
	asked, release := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	engCalls := 0
	x := startE2E(t, core.Limits{}, func(r openaitest.Request) openaitest.Reply {
		switch botOf(r) {
		case "engineer":
			mu.Lock()
			engCalls++
			n := engCalls
			mu.Unlock()
			if n == 1 {
				close(asked)
				return openaitest.Reply{Text: "PR #7 opened. @reviewer please review PR #7.", Wait: release}
			}
			return openaitest.Text("Typo fixed in PR #7.")
		case "reviewer":
			return openaitest.Text("PR #7 approved.")
		}
		return openaitest.Text("noted")
	})
	x.say("@engineer open a PR for the parser")
	x.asked(asked)
	x.say("@engineer also fix the typo in the README")
	close(release)
	x.idle()
	if n := len(x.requestsFor("reviewer")); n != 1 {
		t.Fatalf("reviewer model calls = %d, want 1", n)
	}
	got := blocks(x.out)
	iHeld, iFix, iRev := -1, -1, -1
	for i, b := range got {
		switch {
		case strings.HasPrefix(b, "[system]") && strings.Contains(b, "held"):
			iHeld = i
		case b == "[engineer] Typo fixed in PR #7.":
			iFix = i
		case b == "[reviewer] PR #7 approved.":
			iRev = i
		}
	}
	if iHeld < 0 || iFix < 0 || iRev < 0 || !(iHeld < iFix && iFix < iRev) {
		t.Fatalf("want held notice, then the engineer's queued work, then the review; printed:\n%s", strings.Join(got, "\n"))
	}
}

func TestE2EToolCallRoundTrip(t *testing.T) {
	x := startE2E(t, core.Limits{}, func(r openaitest.Request) openaitest.Reply {
		ms := r.Body.Messages
		if last := ms[len(ms)-1]; last.Role == "tool" {
			return openaitest.Text("The thread so far: " + strings.TrimSpace(last.Content))
		}
		return openaitest.Calls(openaitest.Call("read_history", `{"limit":10}`))
	})
	x.say("what did I say?")
	x.idle()
	got := blocks(x.out)
	if len(got) != 1 || !strings.Contains(got[0], "what did I say?") {
		t.Fatalf("printed %q, want the tool result quoted in the reply", got)
	}
	reqs := x.srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model calls = %d, want 2", len(reqs))
	}
	second := reqs[1].Messages()
	var sawCall, sawResult bool
	for _, m := range second {
		if m["role"] == "assistant" && m["tool_calls"] != nil {
			sawCall = true
			if _, ok := m["content"]; !ok {
				t.Error(`assistant tool-call message sent without a "content" field`)
			}
		}
		if m["role"] == "tool" {
			sawResult = true
		}
	}
	if !sawCall || !sawResult {
		t.Fatalf("second request lacks the tool call (%v) or its result (%v)", sawCall, sawResult)
	}
}

func TestE2ELLMErrorBecomesNotice(t *testing.T) {
	x := startE2E(t, core.Limits{}, func(r openaitest.Request) openaitest.Reply {
		return openaitest.Error(500, "the model server is on fire")
	})
	x.say("hello?")
	x.idle()
	got := blocks(x.out)
	if len(got) != 1 || !strings.HasPrefix(got[0], "[system]") || !strings.Contains(got[0], "500") {
		t.Fatalf("printed %q, want one system notice naming the 500", got)
	}
	if strings.Contains(x.out.String(), "test-key") {
		t.Fatal("the API key leaked into the thread")
	}
}
