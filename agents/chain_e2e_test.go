package agents

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents/anthropictest"
	"openbot/agents/openaitest"
	"openbot/core"
)

// chainBot is a bot whose chain is primary, then backup.
var chainBot = core.BotProfile{Handle: "engineer", Name: "Engineer", LLM: "primary", Fallbacks: []string{"backup"}}

// TestFallbackOnRateLimit: a 429 on the first profile (OpenAI) is answered by
// the second (Anthropic) within the same run, without retrying the first; the
// ledger says which profile, provider and model served and that it was a
// fallback; the first is skipped for its Retry-After, then asked again.
func TestFallbackOnRateLimit(t *testing.T) {
	primary := openaitest.New(t)
	backup := anthropictest.New(t)
	limited := openaitest.Error(http.StatusTooManyRequests, "rate limited")
	limited.Header = map[string]string{"Retry-After": "120"}
	primary.Enqueue(limited, openaitest.Text("the primary again"))
	backup.Enqueue(anthropictest.Text("the backup answers"), anthropictest.Text("the backup again"))
	clock := &setClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	rig := startTeamWith(t, Options{Cooldowns: NewCooldowns(clock), Providers: map[string]Provider{
		"primary": {BaseURL: primary.URL(), APIKey: testKey, Model: "gpt-test"},
		"backup":  {API: APIAnthropic, BaseURL: backup.URL(), APIKey: anthropicKey, Model: "claude-test"},
	}}, chainBot)

	if got := rig.say(t, "@engineer first"); got != "the backup answers" {
		t.Fatalf("first answer = %q", got)
	}
	if n := len(primary.Requests()); n != 1 {
		t.Errorf("the primary got %d requests, want 1 (no retry while a backup may answer)", n)
	}
	if got := rig.say(t, "@engineer second"); got != "the backup again" {
		t.Fatalf("second answer = %q", got)
	}
	if n := len(primary.Requests()); n != 1 {
		t.Errorf("the primary was asked during its cooldown: %d requests", n)
	}
	clock.set(clock.Now().Add(121 * time.Second))
	if got := rig.say(t, "@engineer third"); got != "the primary again" {
		t.Fatalf("third answer = %q", got)
	}
	es := rig.ledger(t)
	if len(es) != 3 {
		t.Fatalf("ledger = %+v", es)
	}
	for i, want := range []struct {
		profile, provider, model string
		fallback                 bool
	}{{"backup", "anthropic", "claude-test", true}, {"backup", "anthropic", "claude-test", true}, {"primary", "openai", "gpt-test", false}} {
		e := es[i]
		if e.Profile != want.profile || e.Provider != want.provider || e.Model != want.model || e.Fallback != want.fallback {
			t.Errorf("ledger entry %d = %+v, want %+v", i, e, want)
		}
	}
	if !strings.Contains(rig.logs.String(), "trying the next llm profile") {
		t.Errorf("the fallback was not logged:\n%s", rig.logs.String())
	}
}

// TestChainDownOneNotice: every profile of the chain fails: the first once,
// the last with its retries, and the thread gets one notice naming both.
func TestChainDownOneNotice(t *testing.T) {
	primary := openaitest.New(t)
	backup := openaitest.New(t)
	for _, s := range []*openaitest.Server{primary, backup} {
		s.Handle(func(openaitest.Request) openaitest.Reply {
			return openaitest.Error(http.StatusBadGateway, "upstream down")
		})
	}
	rig := startTeam(t, map[string]Provider{
		"primary": {BaseURL: primary.URL(), APIKey: testKey, Model: "m1"},
		"backup":  {BaseURL: backup.URL(), APIKey: testKey, Model: "m2"},
	}, chainBot)
	got := rig.say(t, "@engineer hello")
	for _, want := range []string{"no model answered", `llm profile "primary" (HTTP 502)`, `llm profile "backup" (HTTP 502)`} {
		if !strings.Contains(got, want) {
			t.Errorf("notice = %q, want %q in it", got, want)
		}
	}
	if a, b := len(primary.Requests()), len(backup.Requests()); a != 1 || b != 1+DefaultModelRetries {
		t.Errorf("requests: primary %d, backup %d; want 1 and %d", a, b, 1+DefaultModelRetries)
	}
	if err := rig.eng.WaitIdle(rig.ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case more := <-rig.got:
		t.Errorf("a second delivery: %q", more)
	default:
	}
}

// TestContextLengthIsNoFallback: a prompt too long for the first profile is
// not sent to the backup (a smaller window is no cure): with nothing to trim,
// the thread hears that the request is too long.
func TestContextLengthIsNoFallback(t *testing.T) {
	primary := openaitest.New(t)
	backup := openaitest.New(t)
	primary.Enqueue(openaitest.ContextLengthError())
	rig := startTeam(t, map[string]Provider{
		"primary": {BaseURL: primary.URL(), APIKey: testKey, Model: "m1"},
		"backup":  {BaseURL: backup.URL(), APIKey: testKey, Model: "m2"},
	}, chainBot)
	if got := rig.say(t, "@engineer hello"); !strings.Contains(got, "too long for the model's context window") {
		t.Fatalf("answer = %q", got)
	}
	if n := len(backup.Requests()); n != 0 {
		t.Errorf("the backup got %d requests", n)
	}
}

// TestKeysRotateAndRefusedKeySetAside: calls rotate between a profile's two
// keys; a key the server refuses (401) gives way to the other at once, is set
// aside (logged by its label, never its value) and not sent again, and the
// ledger records the label of the key that served.
func TestKeysRotateAndRefusedKeySetAside(t *testing.T) {
	const good, bad = "sk-good-key-0001", "sk-bad-key-0002"
	srv := openaitest.New(t)
	var mu sync.Mutex
	seen := map[string]int{}
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		seen[key]++
		mu.Unlock()
		if key != good {
			return openaitest.Error(http.StatusUnauthorized, "invalid api key")
		}
		return openaitest.Text("answered")
	})
	rig := startTeam(t, map[string]Provider{
		"default": {BaseURL: srv.URL(), Model: "m", Keys: []APIKey{{Label: "team-a", Value: bad}, {Label: "team-b", Value: good}}},
	}, core.BotProfile{Handle: "engineer"})
	for range 3 {
		if got := rig.say(t, "@engineer hi"); got != "answered" {
			t.Fatalf("answer = %q", got)
		}
	}
	mu.Lock()
	if seen[bad] != 1 || seen[good] != 3 {
		t.Errorf("requests by key: bad %d, good %d; want 1 and 3", seen[bad], seen[good])
	}
	mu.Unlock()
	for _, e := range rig.ledger(t) {
		if e.KeyLabel != "team-b" {
			t.Errorf("ledger entry %+v, want key team-b", e)
		}
	}
	logs := rig.logs.String()
	if !strings.Contains(logs, "api key set aside") || !strings.Contains(logs, "key=team-a") || strings.Contains(logs, bad) || strings.Contains(logs, good) {
		t.Errorf("log:\n%s", logs)
	}

	// Two good keys take turns.
	two := openaitest.New(t)
	var labels []string
	two.Handle(func(r openaitest.Request) openaitest.Reply {
		mu.Lock()
		labels = append(labels, r.Header.Get("Authorization"))
		mu.Unlock()
		return openaitest.Text("ok")
	})
	rig = startTeam(t, map[string]Provider{
		"default": {BaseURL: two.URL(), Model: "m", Keys: []APIKey{{Label: "a", Value: "sk-one-1234"}, {Label: "b", Value: "sk-two-1234"}}},
	}, core.BotProfile{Handle: "engineer"})
	rig.say(t, "@engineer one")
	rig.say(t, "@engineer two")
	mu.Lock()
	defer mu.Unlock()
	if len(labels) != 2 || labels[0] == labels[1] {
		t.Errorf("keys sent = %q, want both in turn", labels)
	}
}

// TestFailoverMidStream: the first profile's stream stops after some text was
// shown; the answer restarts on the backup, the stream shows it replacing the
// partial one (the whole answer so far, never the partial text followed by
// the new), and the reply is the backup's complete answer, once.
func TestFailoverMidStream(t *testing.T) {
	primary := openaitest.New(t)
	backup := openaitest.New(t)
	block := make(chan struct{})
	defer close(block)
	primary.Enqueue(openaitest.Reply{Text: "Half of an answer that never ends", StallMidStream: block})
	backup.Enqueue(openaitest.Text("The complete answer from the backup."))
	a, err := New(Options{sleep: noWait, Providers: map[string]Provider{
		"primary": {BaseURL: primary.URL(), APIKey: testKey, Model: "m1", IdleTimeout: 200 * time.Millisecond},
		"backup":  {BaseURL: backup.URL(), APIKey: testKey, Model: "m2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	env := &streamEnv{fakeEnv: &fakeEnv{}}
	trig := env.add(alice, "Alice", "@engineer answer?", "engineer")
	bot := engineer
	bot.LLM, bot.Fallbacks = "primary", []string{"backup"}
	job := newJob(env.fakeEnv, bot, false, trig)
	job.Env = env
	res, err := execute(t, a, job)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reply != "The complete answer from the backup." || res.Usage.ModelCalls != 1 {
		t.Fatalf("result = %+v", res)
	}
	if n := len(primary.Requests()); n != 1 {
		t.Errorf("the primary got %d requests, want 1", n)
	}
	env.smu.Lock()
	shown := slices.Clone(env.shown)
	env.smu.Unlock()
	if len(shown) < 2 || !strings.HasPrefix(shown[0], "Half") || shown[len(shown)-1] != res.Reply {
		t.Fatalf("streamed = %q", shown)
	}
	for _, s := range shown {
		if strings.Contains(s, "Half") && strings.Contains(s, "backup") {
			t.Errorf("the partial answer and the new one were shown together: %q", s)
		}
	}
}

// streamAccount is a console account that streams (core.Streamer): it
// records every Stream call and delivery, posting one message "s1".
type streamAccount struct {
	mu        sync.Mutex
	streamed  []string // the text of each Stream call
	delivered []core.Delivery
	onStream  func(text string)
	got       chan core.Delivery
}

func (a *streamAccount) Account() core.AccountID       { return "console/local" }
func (a *streamAccount) Bot() string                   { return "*" }
func (a *streamAccount) StreamInterval() time.Duration { return time.Millisecond }
func (a *streamAccount) Stream(_ context.Context, d core.StreamDelivery) ([]string, error) {
	a.mu.Lock()
	a.streamed = append(a.streamed, d.Text)
	on := a.onStream
	a.mu.Unlock()
	if on != nil {
		on(d.Text)
	}
	return []string{"s1"}, nil
}
func (a *streamAccount) Deliver(_ context.Context, d core.Delivery) (string, error) {
	a.mu.Lock()
	a.delivered = append(a.delivered, d)
	a.mu.Unlock()
	a.got <- d
	return "p1", nil
}

// TestFailoverMidStreamPostsOneAnswer: on the real engine with a streaming
// account, the first profile's answer is shown in part and then its stream
// ends early; the backup answers, the streamed message becomes its complete
// answer (edited in place: the reply's delivery names the streamed message),
// no text shown joins the partial answer to the new one, and nothing else is
// posted.
func TestFailoverMidStreamPostsOneAnswer(t *testing.T) {
	primary := openaitest.New(t)
	backup := openaitest.New(t)
	release := make(chan struct{})
	const partial, complete = "Half of an answer", "The complete answer from the backup."
	primary.Enqueue(openaitest.Reply{Text: partial + " that never ends", StallMidStream: release, NoFinish: true, NoDone: true})
	backup.Enqueue(openaitest.Text(complete))
	acct := &streamAccount{got: make(chan core.Delivery, 8)}
	var once sync.Once
	acct.onStream = func(text string) {
		if strings.HasPrefix(text, "Half") {
			once.Do(func() { close(release) }) // shown: now the primary's stream ends early
		}
	}
	rig := startTeamWith(t, Options{Providers: map[string]Provider{
		"primary": {BaseURL: primary.URL(), APIKey: testKey, Model: "m1"},
		"backup":  {BaseURL: backup.URL(), APIKey: testKey, Model: "m2"},
	}}, chainBot, acct)
	rig.n++
	if _, err := rig.eng.Ingest(rig.ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:mid",
		ThreadKey: "console:main", Conversation: "main", PlatformID: "in-mid",
		SenderID: "console:you", SenderName: "you", Text: "@engineer answer", StartThread: true}); err != nil {
		t.Fatal(err)
	}
	var d core.Delivery
	select {
	case d = <-acct.got:
	case <-time.After(30 * time.Second):
		t.Fatalf("no reply; log:\n%s", rig.logs.String())
	}
	if err := rig.eng.WaitIdle(rig.ctx); err != nil {
		t.Fatal(err)
	}
	acct.mu.Lock()
	defer acct.mu.Unlock()
	if d.Text != complete || !slices.Equal(d.Streamed, []string{"s1"}) || len(acct.delivered) != 1 {
		t.Errorf("deliveries = %+v, want one: the complete answer edited into the streamed message", acct.delivered)
	}
	if len(acct.streamed) == 0 || !strings.HasPrefix(acct.streamed[0], "Half") {
		t.Fatalf("streamed = %q, want the partial answer first", acct.streamed)
	}
	for _, s := range acct.streamed {
		if strings.Contains(s, "Half") && strings.Contains(s, "backup") {
			t.Errorf("the partial answer and the new one were shown together: %q", s)
		}
	}
	if n := len(primary.Requests()); n != 1 {
		t.Errorf("the primary got %d requests, want 1", n)
	}
	if !strings.Contains(rig.logs.String(), "its stream ended early") {
		t.Errorf("the fallback's reason was not logged:\n%s", rig.logs.String())
	}
}

// TestAnthropicKeysRotate: an Anthropic profile's keys go out as x-api-key;
// the refused one gives way to the next within the call.
func TestAnthropicKeysRotate(t *testing.T) {
	srv := anthropictest.New(t)
	srv.RequireKey("sk-ant-good-0001")
	srv.Handle(func(anthropictest.Request) anthropictest.Reply { return anthropictest.Text("hello from claude") })
	rig := startTeam(t, map[string]Provider{"default": {API: APIAnthropic, BaseURL: srv.URL(), Model: "claude-test",
		// A configured window: no model-info read takes the first key.
		ContextWindow: 200000, Keys: []APIKey{{Label: "old", Value: "sk-ant-revoked-01"}, {Label: "new", Value: "sk-ant-good-0001"}}}},
		core.BotProfile{Handle: "engineer"})
	if got := rig.say(t, "@engineer hi"); got != "hello from claude" {
		t.Fatalf("answer = %q", got)
	}
	if es := rig.ledger(t); len(es) != 1 || es[0].KeyLabel != "new" || es[0].Provider != "anthropic" {
		t.Errorf("ledger = %+v", es)
	}
	if logs := rig.logs.String(); !strings.Contains(logs, "key=old") || strings.Contains(logs, "sk-ant-revoked-01") {
		t.Errorf("log:\n%s", logs)
	}
}

// TestWholeChainCoolingDown: while every profile of the chain cools down for
// longer than a call may wait, a run asks no model and the thread hears which
// profiles are skipped and why; once one comes back it is asked again.
func TestWholeChainCoolingDown(t *testing.T) {
	primary := openaitest.New(t)
	backup := openaitest.New(t)
	for _, s := range []*openaitest.Server{primary, backup} {
		limited := openaitest.Error(http.StatusTooManyRequests, "slow down")
		limited.Header = map[string]string{"Retry-After": "600"}
		s.Enqueue(limited, openaitest.Text("back again"))
	}
	clock := &setClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	rig := startTeamWith(t, Options{Cooldowns: NewCooldowns(clock), Providers: map[string]Provider{
		"primary": {BaseURL: primary.URL(), APIKey: testKey, Model: "m1"},
		"backup":  {BaseURL: backup.URL(), APIKey: testKey, Model: "m2"},
	}}, chainBot)
	if got := rig.say(t, "@engineer one"); !strings.Contains(got, "no model answered") {
		t.Fatalf("first = %q", got)
	}
	got := rig.say(t, "@engineer two")
	for _, want := range []string{"no model could be asked", `llm profile "primary" (HTTP 429; skipped for 10m0s more)`, `llm profile "backup" (HTTP 429`} {
		if !strings.Contains(got, want) {
			t.Errorf("second = %q, want %q in it", got, want)
		}
	}
	if a, b := len(primary.Requests()), len(backup.Requests()); a != 1 || b != 1 {
		t.Errorf("requests while cooling: %d and %d, want 1 each", a, b)
	}
	clock.set(clock.Now().Add(10 * time.Minute))
	if got := rig.say(t, "@engineer three"); got != "back again" {
		t.Errorf("third = %q", got)
	}
}

// TestAnthropicOverloadedMidStreamFallsBack: Anthropic's overloaded_error
// event in the middle of a stream moves the call to the backup profile.
func TestAnthropicOverloadedMidStreamFallsBack(t *testing.T) {
	primary := anthropictest.New(t)
	primary.Enqueue(anthropictest.Reply{Text: "I will start and then", StreamError: "overloaded_error"})
	backup := openaitest.New(t)
	backup.Enqueue(openaitest.Text("the backup's answer"))
	rig := startTeam(t, map[string]Provider{
		"primary": {API: APIAnthropic, BaseURL: primary.URL(), APIKey: anthropicKey, Model: "claude-test"},
		"backup":  {BaseURL: backup.URL(), APIKey: testKey, Model: "m2"},
	}, chainBot)
	if got := rig.say(t, "@engineer hi"); got != "the backup's answer" {
		t.Fatalf("answer = %q; log:\n%s", got, rig.logs.String())
	}
	if es := rig.ledger(t); len(es) != 1 || es[0].Profile != "backup" || !es[0].Fallback {
		t.Errorf("ledger = %+v", es)
	}
	if n := len(primary.Requests()); n != 1 {
		t.Errorf("the primary got %d requests, want 1", n)
	}
}
