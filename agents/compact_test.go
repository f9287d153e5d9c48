package agents

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/openaitest"
	"openbot/core"
)

var launchCode = regexp.MustCompile(`ZEBRA-\d+`)

// isCompaction reports whether r is a compaction call.
func isCompaction(r openaitest.Request) bool {
	return strings.HasPrefix(r.Body.Messages[0].Content, compactionMarker)
}

// summarise is the fake model's summary: the launch codes of its input, kept
// verbatim, and nothing else of the thread.
func summarise(r openaitest.Request) openaitest.Reply {
	codes := launchCode.FindAllString(openaitest.LastUserText(r), -1)
	return openaitest.Text("The thread discussed the launch. Launch codes: " + strings.Join(codes, ", ") + ".")
}

// fiveWindowThread is a thread whose history is about five times an 8k-token
// window: an early message holds the launch code, another the ticket id.
func fiveWindowThread() (*fakeEnv, core.BotProfile) {
	env := &fakeEnv{}
	bot := chief
	env.add(alice, "Alice", "The launch code is ZEBRA-42; keep it.")
	env.add(alice, "Alice", "The ticket for the outage is TKT-777.")
	for i := range 80 {
		env.add(alice, "Alice", fmt.Sprintf("point %d: %s", i, strings.Repeat("background ", 120)))
		env.add(bot.ID(), "Chief", fmt.Sprintf("answer %d: %s", i, strings.Repeat("noted ", 100)))
	}
	return env, bot
}

func windowAgent(t *testing.T, srv *openaitest.Server, reg *Registry, window int) *Agent {
	return newAgent(t, srv, reg, func(o *Options) {
		p := o.Providers["default"]
		p.ContextWindow = window
		o.Providers["default"] = p
		o.sleep = noWait
	})
}

// TestLongThreadAnswersFromSummaryAndHistory: a thread five times the
// window. (a) The launch code, only in the summary by now, answers a
// question; (b) the ticket id, fetched with read_history and then edited out
// of the run's context by later big tool results, is fetched again with
// read_history as the stub says. No request passes the window.
func TestLongThreadAnswersFromSummaryAndHistory(t *testing.T) {
	const window = 8000
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if len(r.Raw)/4 > window {
			return openaitest.ContextLengthError()
		}
		if isCompaction(r) {
			return summarise(r)
		}
		msgs := r.Body.Messages
		all := string(r.Raw)
		if strings.Contains(openaitest.LastUserText(r), "launch code") {
			if c := launchCode.FindString(all); c != "" {
				return openaitest.Text("The launch code is " + c + ".")
			}
			return openaitest.Text("I do not know.")
		}
		// The ticket question: read the history, read three big files, then
		// answer from the history (fetching it again if it was edited away).
		var reads, files int
		var lastHistoryArgs string
		for _, m := range msgs {
			for _, c := range m.ToolCalls {
				switch c.Function.Name {
				case "read_history":
					reads++
					lastHistoryArgs = c.Function.Arguments
				case "read_file":
					files++
				}
			}
		}
		switch {
		case reads == 0:
			return openaitest.Calls(openaitest.Call("read_history", `{"after_id":1,"limit":5}`))
		case files < 3:
			return openaitest.Calls(openaitest.Call("read_file", fmt.Sprintf(`{"path":"/work/big%d.txt"}`, files)))
		}
		for _, m := range msgs {
			if m.Role == openai.ChatMessageRoleTool && !strings.HasPrefix(m.Content, stubPrefix) && strings.Contains(m.Content, "TKT-777") {
				return openaitest.Text("The ticket is TKT-777.")
			}
		}
		if reads > 1 {
			return openaitest.Text("I lost the ticket id.")
		}
		return openaitest.Calls(openaitest.Call("read_history", lastHistoryArgs))
	})
	reg := NewRegistry()
	if err := reg.Add(&FuncTool{ToolName: "read_file", Repeatable: true, Fn: func(context.Context, ToolCall) (string, error) {
		return strings.Repeat("a big file line\n", 900), nil
	}}); err != nil {
		t.Fatal(err)
	}
	a := windowAgent(t, srv, reg, window)
	env, bot := fiveWindowThread()
	bot.Tools = []string{"read_file"}
	ask := func(q string) string {
		t.Helper()
		trig := env.add(alice, "Alice", q)
		job := newJob(env, bot, false, trig)
		job.Env = sumEnv{env, bot.ID()}
		res, err := execute(t, a, job)
		if err != nil {
			t.Fatal(err)
		}
		env.add(bot.ID(), "Chief", res.Reply)
		return res.Reply
	}
	if got := ask("What is the launch code?"); got != "The launch code is ZEBRA-42." {
		t.Errorf("launch code answer = %q", got)
	}
	sums := env.summaries()
	if len(sums) != 1 || !strings.Contains(sums[0].Text, "ZEBRA-42") {
		t.Fatalf("summaries = %+v, want one that keeps the code", sums)
	}
	if got := ask("Which ticket was the outage?"); got != "The ticket is TKT-777." {
		t.Errorf("ticket answer = %q", got)
	}
	stubbed := false
	for _, r := range srv.Requests() {
		if len(r.Raw)/4 > window {
			t.Errorf("a request of %d tokens was sent for a window of %d", len(r.Raw)/4, window)
		}
		for _, m := range r.Body.Messages {
			if m.Role == openai.ChatMessageRoleTool && strings.HasPrefix(m.Content, stubPrefix+"read_history") {
				stubbed = true
			}
		}
	}
	if !stubbed {
		t.Error("the read_history result was never edited away; the test proves nothing")
	}
}

// TestCompactionFailureLeavesThreadUsable: a compaction call that fails
// leaves no summary, the run still answers from the history it had, and the
// next run tries the compaction again.
func TestCompactionFailureLeavesThreadUsable(t *testing.T) {
	srv := openaitest.New(t)
	failing := true
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isCompaction(r) {
			if failing {
				return openaitest.Error(http.StatusBadRequest, "the summariser is broken")
			}
			return summarise(r)
		}
		return openaitest.Text("answered")
	})
	a := windowAgent(t, srv, nil, 8000)
	env, bot := fiveWindowThread()
	run := func() {
		t.Helper()
		trig := env.add(alice, "Alice", "next question")
		job := newJob(env, bot, false, trig)
		job.Env = sumEnv{env, bot.ID()}
		res, err := execute(t, a, job)
		if err != nil || res.Reply != "answered" {
			t.Fatalf("reply %q, err %v", res.Reply, err)
		}
		env.add(bot.ID(), "Chief", res.Reply)
	}
	run()
	if n := len(env.summaries()); n != 0 {
		t.Fatalf("summaries after a failed compaction = %d", n)
	}
	compactions := func() int {
		n := 0
		for _, r := range srv.Requests() {
			if isCompaction(r) {
				n++
			}
		}
		return n
	}
	if compactions() != 1 {
		t.Fatalf("compaction calls = %d, want 1", compactions())
	}
	failing = false
	run()
	if compactions() < 2 || len(env.summaries()) != 1 {
		t.Errorf("compactions %d, summaries %d: the next run should have compacted", compactions(), len(env.summaries()))
	}
}

// TestCompactionCrashKeepsOneSummary: a run killed after its compaction
// stored the summary but before it answered starts again from the beginning
// (it has no checkpoint yet); it finds the summary, makes no second one, and
// its prompt starts with it. Storing the same summary twice keeps one.
func TestCompactionCrashKeepsOneSummary(t *testing.T) {
	srv := openaitest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	crash := true
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isCompaction(r) {
			return summarise(r)
		}
		if crash {
			cancel() // the process dies during the run's first call
			return openaitest.Reply{Text: "never", Wait: make(chan struct{})}
		}
		return openaitest.Text("answered")
	})
	a := windowAgent(t, srv, nil, 8000)
	env, bot := fiveWindowThread()
	trig := env.add(alice, "Alice", "What is the launch code?")
	job := newJob(env, bot, false, trig)
	job.Env = sumEnv{env, bot.ID()}
	if _, err := a.Execute(ctx, job); err == nil {
		t.Fatal("the killed run did not fail")
	}
	if n := len(env.summaries()); n != 1 {
		t.Fatalf("summaries after the crash = %d, want 1", n)
	}
	crash = false
	srv.Forget()
	res, err := execute(t, a, job)
	if err != nil || res.Reply != "answered" {
		t.Fatalf("reply %q, err %v", res.Reply, err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 || isCompaction(reqs[0]) {
		t.Fatalf("requests after the restart = %d, want just the answer", len(reqs))
	}
	if first := reqs[0].Body.Messages[1].Content; !strings.Contains(first, "Your summary of this thread") || !strings.Contains(first, "ZEBRA-42") {
		t.Errorf("history starts with %.120q, want the summary", first)
	}
	s := env.summaries()[0]
	again, err := sumEnv{env, bot.ID()}.PutSummary(context.Background(), "other text", s.Covers)
	if err != nil || again.ID != s.ID || len(env.summaries()) != 1 {
		t.Errorf("storing the summary again gave %+v (err %v), %d summaries", again, err, len(env.summaries()))
	}
}

// TestCompactWithCheaperProfile: a profile's compact_with sends compaction
// calls to the named profile's model; the bot's own model answers.
func TestCompactWithCheaperProfile(t *testing.T) {
	main, cheap := openaitest.New(t), openaitest.New(t)
	main.Handle(func(r openaitest.Request) openaitest.Reply {
		if isCompaction(r) {
			t.Error("a compaction call reached the bot's own model")
		}
		return openaitest.Text("answered")
	})
	cheap.Handle(summarise)
	a := newAgent(t, main, nil, func(o *Options) {
		o.Providers = map[string]Provider{
			"default": {BaseURL: main.URL(), APIKey: testKey, Model: "big", ContextWindow: 8000, CompactWith: "cheap"},
			"cheap":   {BaseURL: cheap.URL(), APIKey: testKey, Model: "small"},
		}
	})
	env, bot := fiveWindowThread()
	trig := env.add(alice, "Alice", "next question")
	job := newJob(env, bot, false, trig)
	job.Env = sumEnv{env, bot.ID()}
	res, err := execute(t, a, job)
	if err != nil || res.Reply != "answered" {
		t.Fatalf("reply %q, err %v", res.Reply, err)
	}
	reqs := cheap.Requests()
	if len(reqs) == 0 {
		t.Fatal("the cheap profile got no compaction call")
	}
	if reqs[0].Body.Model != "small" || len(env.summaries()) != 1 {
		t.Errorf("compaction model %q, summaries %d; want small and 1", reqs[0].Body.Model, len(env.summaries()))
	}
}

// TestCompactionKeepsASmallTail: a compaction leaves the summary and a small
// tail of the newest messages word for word, at most a fifth of the history
// share, so the requests after it are small; a fact said only in that tail
// (the summary keeps launch codes only) is still answered.
func TestCompactionKeepsASmallTail(t *testing.T) {
	const window = 8000 // history_share 0.5: 4000 tokens
	srv := openaitest.New(t)
	build := regexp.MustCompile(`B-\d+`)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isCompaction(r) {
			return summarise(r)
		}
		if c := build.FindString(string(r.Raw)); c != "" {
			return openaitest.Text("Build " + c + " broke.")
		}
		return openaitest.Text("I do not know.")
	})
	a := windowAgent(t, srv, nil, window)
	env, bot := fiveWindowThread()
	env.add(alice, "Alice", "The build that broke is B-991.")
	env.add(bot.ID(), "Chief", "Noted.")
	trig := env.add(alice, "Alice", "Which build broke?")
	job := newJob(env, bot, false, trig)
	job.Env = sumEnv{env, bot.ID()}
	res, err := execute(t, a, job)
	if err != nil || res.Reply != "Build B-991 broke." {
		t.Fatalf("reply %q, err %v", res.Reply, err)
	}
	sums := env.summaries()
	if len(sums) != 1 {
		t.Fatalf("summaries = %d, want 1", len(sums))
	}
	tail := 0 // tokens of the messages shown word for word, the trigger aside
	for _, m := range env.Msgs {
		if m.ID > sums[0].Covers && m.Kind != core.KindSummary && m.ID != trig.ID {
			tail += messageCost(m) / 4
		}
	}
	if tail == 0 || tail > window/2/5 {
		t.Errorf("the compaction kept %d tokens word for word, want some and at most %d (a fifth of the history share)", tail, window/2/5)
	}
}
