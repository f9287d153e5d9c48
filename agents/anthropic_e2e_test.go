package agents

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/agents/anthropictest"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// teamRig is a one-bot team on the real engine, bolt store and agent, with a
// console account that hands each delivery to a channel.
type teamRig struct {
	eng  *core.Engine
	st   *bolt.Store
	ctx  context.Context
	got  chan string
	logs *syncBuffer
	n    int // messages sent
}

type chanAdapter chan string

func (c chanAdapter) Account() core.AccountID { return "console/local" }
func (c chanAdapter) Bot() string             { return "*" }
func (c chanAdapter) Deliver(_ context.Context, d core.Delivery) (string, error) {
	c <- d.Text
	return "p", nil
}

// startTeam runs bot on the profiles provs until the test ends; retry waits
// take no time.
func startTeam(t *testing.T, provs map[string]Provider, bot core.BotProfile) *teamRig {
	t.Helper()
	return startTeamWith(t, Options{Providers: provs}, bot)
}

// startTeamWith is startTeam on opts (Providers set), with the rig's logger
// and retry waits that take no time; ad, when given, is the account instead of
// the one that hands deliveries to the rig's channel.
func startTeamWith(t *testing.T, opts Options, bot core.BotProfile, ad ...core.Adapter) *teamRig {
	t.Helper()
	r := &teamRig{got: make(chan string, 16), logs: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Logger, opts.sleep = log, noWait
	agent, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.st, err = bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.st.Close() })
	r.eng, err = core.New(core.Options{Store: storetest.RerunFromEnv(r.st), Agent: agent, Bots: []core.BotProfile{bot}, Logger: log, ShutdownGrace: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ad = append(ad, chanAdapter(r.got))
	if err := r.eng.AddAdapter(ad[0]); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.ctx = ctx
	done := make(chan error, 1)
	go func() { done <- r.eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("engine did not stop")
		}
	})
	return r
}

// say posts a person's message in the one thread and returns what the team
// delivered in answer (one delivery).
func (r *teamRig) say(t *testing.T, text string) string {
	t.Helper()
	r.n++
	if _, err := r.eng.Ingest(r.ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:%d", r.n),
		ThreadKey: "console:main", Conversation: "main", PlatformID: fmt.Sprintf("in%d", r.n),
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}); err != nil {
		t.Fatal(err)
	}
	select {
	case d := <-r.got:
		return d
	case <-time.After(30 * time.Second):
		t.Fatalf("no delivery for %q; log:\n%s", text, r.logs.String())
		return ""
	}
}

// ledger is every usage entry in the store.
func (r *teamRig) ledger(t *testing.T) []core.UsageEntry {
	t.Helper()
	if err := r.eng.WaitIdle(r.ctx); err != nil {
		t.Fatal(err)
	}
	return storetest.Read(t, r.st, func(tx core.ReadTx) ([]core.UsageEntry, error) { return tx.UsageEntries(0, 0) })
}

// TestAnthropicEndToEnd: a bot on an Anthropic profile answers with a tool
// call and then text; the second call of the thread (and the next run's) sends
// cache_control at the end of the stable prefix, the tool result goes back in
// the tool_use's id, and the ledger records the cache reads and writes the
// server reports, with the profile and the model.
func TestAnthropicEndToEnd(t *testing.T) {
	srv := anthropictest.New(t)
	srv.RequireKey(anthropicKey)
	srv.Handle(func(r anthropictest.Request) anthropictest.Reply {
		last := r.Body.Messages[len(r.Body.Messages)-1]
		switch {
		case last.Content[0].Type == "tool_result":
			return anthropictest.Reply{Text: "parser done, commit abc123",
				Usage: anthropictest.Usage{InputTokens: 50, OutputTokens: 9, CacheReadTokens: 1500, CacheWriteTokens: 120}}
		case strings.Contains(r.LastUserText(), "and the tests?"):
			return anthropictest.Reply{Text: "they pass",
				Usage: anthropictest.Usage{InputTokens: 40, OutputTokens: 3, CacheReadTokens: 1600}}
		}
		return anthropictest.Reply{ToolCalls: []anthropictest.ToolCall{anthropictest.Call(ReadHistoryName, `{"limit":5}`)},
			Usage: anthropictest.Usage{InputTokens: 1700, OutputTokens: 12, CacheWriteTokens: 1500}}
	})
	rig := startTeam(t, map[string]Provider{"claude": {API: APIAnthropic, BaseURL: srv.URL(), APIKey: anthropicKey, Model: "claude-test"}},
		core.BotProfile{Handle: "engineer", Name: "Engineer", LLM: "claude"})

	if got := rig.say(t, "@engineer write the parser"); got != "parser done, commit abc123" {
		t.Fatalf("first answer = %q", got)
	}
	if got := rig.say(t, "@engineer and the tests?"); got != "they pass" {
		t.Fatalf("second answer = %q", got)
	}

	reqs := srv.Requests()
	if len(reqs) != 3 {
		t.Fatalf("model requests = %d, want 3", len(reqs))
	}
	for i, r := range reqs {
		n := len(r.Body.Messages)
		bp := r.Breakpoints()
		if len(bp) > 4 || !slices.Contains(bp, "system[0]") || !strings.HasPrefix(bp[len(bp)-1], fmt.Sprintf("messages[%d]", n-1)) {
			t.Errorf("request %d: breakpoints %v over %d messages", i, bp, n)
		}
		if !strings.Contains(r.SystemText(), "(@engineer)") || r.Body.Model != "claude-test" {
			t.Errorf("request %d: model %q, system %q", i, r.Body.Model, r.SystemText())
		}
	}
	// The second call of the thread: the stable prefix (tools, system, the
	// question) is marked, and so is the model's tool_use before the result.
	second := reqs[1]
	n := len(second.Body.Messages)
	if bp := second.Breakpoints(); !slices.Equal(bp, []string{"system[0]", fmt.Sprintf("messages[%d].content[0]", n-2), fmt.Sprintf("messages[%d].content[0]", n-1)}) {
		t.Errorf("second call breakpoints = %v", bp)
	}
	use, result := second.Body.Messages[n-2].Content[0], second.Body.Messages[n-1].Content[0]
	if use.Type != "tool_use" || use.Name != ReadHistoryName || result.Type != "tool_result" || result.ToolUseID != use.ID ||
		!strings.Contains(result.ResultText(), "write the parser") {
		t.Errorf("tool exchange = %+v / %+v", use, result)
	}
	// The next run's request starts with the same prefix as the first run's.
	if a, b := reqs[0], reqs[2]; fmt.Sprint(a.Body.Tools) != fmt.Sprint(b.Body.Tools) || a.SystemText() != b.SystemText() {
		t.Errorf("the second run's prefix differs:\n%s\n%s", a.SystemText(), b.SystemText())
	}

	es := rig.ledger(t)
	if len(es) != 3 {
		t.Fatalf("ledger = %+v, want 3 entries", es)
	}
	want := []struct{ in, out, read, write int64 }{{3200, 12, 0, 1500}, {1670, 9, 1500, 120}, {1640, 3, 1600, 0}}
	for i, e := range es {
		w := want[i]
		if e.Profile != "claude" || e.Model != "claude-test" || e.Bot != "engineer" ||
			e.InputTokens != w.in || e.OutputTokens != w.out || e.CachedTokens != w.read || e.CacheWriteTokens != w.write {
			t.Errorf("ledger entry %d = %+v, want in %d (read %d, write %d) out %d", i, e, w.in, w.read, w.write, w.out)
		}
	}
}

// TestAnthropicRateLimitThenAnswer: a 429 with retry-after is waited for
// and the same call answers, within the run: one ledger entry, as on the
// OpenAI path.
func TestAnthropicRateLimitThenAnswer(t *testing.T) {
	srv := anthropictest.New(t)
	limited := anthropictest.Error(429, "rate limited")
	limited.Header = map[string]string{"retry-after": "1"}
	srv.Enqueue(limited, anthropictest.Text("after the wait"))
	rig := startTeam(t, map[string]Provider{"default": {API: APIAnthropic, BaseURL: srv.URL(), APIKey: anthropicKey, Model: "claude-test"}},
		core.BotProfile{Handle: "chief_of_staff"})
	if got := rig.say(t, "hello"); got != "after the wait" {
		t.Fatalf("answer = %q", got)
	}
	if n, es := len(srv.Requests()), rig.ledger(t); n != 2 || len(es) != 1 {
		t.Errorf("requests = %d, ledger = %+v; want 2 requests, 1 entry", n, es)
	}
	if !strings.Contains(rig.logs.String(), "status=429") {
		t.Errorf("the retry was not logged:\n%s", rig.logs.String())
	}
}

// TestAnthropicHTTPErrorNotice: a model server answering 500 on every attempt,
// with an address in its message: retried and logged with the status, then
// one notice in the thread with the status and no address, as on the OpenAI
// path (TestModelHTTPErrorNotice); a refused key is one notice and no retry.
func TestAnthropicHTTPErrorNotice(t *testing.T) {
	srv := anthropictest.New(t)
	srv.Handle(func(anthropictest.Request) anthropictest.Reply {
		return anthropictest.Error(500, "upstream 10.1.2.3:8000 is down")
	})
	got := runToFailure(t, Provider{API: APIAnthropic, BaseURL: srv.URL(), APIKey: anthropicKey, Model: "claude-test"})
	if !strings.Contains(got.notice, "HTTP 500") || strings.Contains(got.notice, "10.1.2.3") || strings.Contains(got.notice, "127.0.0.1") {
		t.Errorf("notice = %q", got.notice)
	}
	if n := len(srv.Requests()); n != 1+DefaultModelRetries {
		t.Errorf("requests = %d, want %d", n, 1+DefaultModelRetries)
	}
	for _, l := range strings.Split(got.log, "\n") {
		if strings.Contains(l, "retrying") && (!strings.Contains(l, "status=500") || strings.Count(l, "is down") != 1) {
			t.Errorf("retry log line lacks the status or the error text, or repeats it: %s", l)
		}
	}
	if strings.Contains(got.log+got.stored+got.notice, anthropicKey) {
		t.Error("the api key leaked")
	}

	denied := anthropictest.New(t)
	denied.RequireKey("sk-ant-the-right-one")
	got = runToFailure(t, Provider{API: APIAnthropic, BaseURL: denied.URL(), APIKey: anthropicKey, Model: "claude-test"})
	if !strings.HasSuffix(got.notice, "the model service answered HTTP 401: invalid x-api-key") || len(denied.Requests()) != 1 {
		t.Errorf("notice = %q after %d requests", got.notice, len(denied.Requests()))
	}
}

// TestAnthropicStalledStreamNotice: a stream that stops mid-answer on every
// attempt is asked again within the retry budget, then the thread hears that
// the model stopped responding, as on the OpenAI path (TestStalledModelNotice).
func TestAnthropicStalledStreamNotice(t *testing.T) {
	srv := anthropictest.New(t)
	block := make(chan struct{})
	defer close(block)
	srv.Handle(func(anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{Text: "half an answer", StallMidStream: block}
	})
	got := runToFailure(t, Provider{API: APIAnthropic, BaseURL: srv.URL(), APIKey: anthropicKey, Model: "claude-test", IdleTimeout: 200 * time.Millisecond})
	if !strings.Contains(got.notice, "the model stopped responding") {
		t.Errorf("notice = %q", got.notice)
	}
	if n := len(srv.Requests()); n != 1+DefaultModelRetries {
		t.Errorf("requests = %d, want %d", n, 1+DefaultModelRetries)
	}
}
