package telegram

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"

	"openbot/adapters/internal/adaptertest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
	"openbot/internal/runtest"
)

// Fixture identities (testdata, copied from the shared fixtures).
const (
	botToken    = "7000000001:TESTtoken"
	botID       = 7000000001
	botUsername = "test_bridge_bot"
	aliceID     = 100000001
	groupChat   = -1001000000001
	forumChat   = -1001000000002
)

var team = []core.BotProfile{
	{Handle: "engineer", Name: "Engineer", Description: "writes and reviews code"},
	{Handle: "writer", Name: "Writer", Description: "drafts release notes"},
}

// fakeEngine records every Inbound and deduplicates by DedupKey as core does.
type fakeEngine struct {
	mu   sync.Mutex
	ins  adaptertest.Log[core.Inbound]
	seen map[string]bool
	// after, when set, runs after an Inbound was recorded (the "commit").
	after func(core.Inbound)
	err   error
	// answers records Answer calls; answer, when set, decides their result
	// (default: accepted).
	answers adaptertest.Log[core.Answer]
	answer  func(core.Answer) (core.AnswerResult, error)
}

func (e *fakeEngine) Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error) {
	if err := ctx.Err(); err != nil {
		return core.AnswerResult{}, err
	}
	e.answers.Add(a)
	e.mu.Lock()
	fn := e.answer
	e.mu.Unlock()
	if fn != nil {
		return fn(a)
	}
	return core.AnswerResult{Outcome: core.AnswerAccepted}, nil
}

func (e *fakeEngine) setAnswer(fn func(core.Answer) (core.AnswerResult, error)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = fn
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{seen: map[string]bool{}}
}

func (e *fakeEngine) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	if err := ctx.Err(); err != nil {
		return core.IngestResult{}, err
	}
	e.mu.Lock()
	if e.err != nil {
		err := e.err
		e.mu.Unlock()
		return core.IngestResult{}, err
	}
	e.ins.Add(in)
	dup := e.seen[in.DedupKey]
	e.seen[in.DedupKey] = true
	after := e.after
	e.mu.Unlock()
	if after != nil {
		after(in)
	}
	res := core.IngestResult{Thread: 1, Message: 1, Duplicate: dup}
	if !dup {
		res.Woken = in.Mentions
		if len(res.Woken) == 0 && in.DefaultBot != "" {
			res.Woken = []string{in.DefaultBot}
		}
	}
	return res, nil
}

// fakeCursors is an in-memory Cursors that honours ctx.
type fakeCursors struct {
	mu   sync.Mutex
	m    map[string]string
	sets int
}

func newFakeCursors() *fakeCursors { return &fakeCursors{m: map[string]string{}} }

func (c *fakeCursors) Cursor(ctx context.Context, name string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name], nil
}

func (c *fakeCursors) SetCursor(ctx context.Context, name, value string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[name] = value
	c.sets++
	return nil
}

func (c *fakeCursors) get(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

type env struct {
	srv     *telegramtest.Server
	eng     *fakeEngine
	cursors *fakeCursors
	rounds  chan struct{} // the typist's finished rounds (typingAdapter)
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Bot{Token: botToken, ID: botID, Username: botUsername, Name: "Bridge Bot"})
	t.Cleanup(srv.Close)
	return &env{srv: srv, eng: newFakeEngine(), cursors: newFakeCursors()}
}

// options returns valid polling Options for the fixture bot speaking as engineer.
func (e *env) options() Options {
	return Options{
		Name:        "main",
		Bot:         "engineer",
		Token:       botToken,
		APIEndpoint: e.srv.URL(),
		AllowUsers:  []string{"@Alice_Example"},
		Bots:        team,
		Engine:      e.eng,
		Cursors:     e.cursors,
		PollTimeout: time.Second,
	}
}

func (e *env) adapter(t *testing.T, opts Options) *Adapter {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// run starts a.Run and returns a stop function that cancels it and waits (bounded)
// for it to return, failing on an error. stop is also registered as cleanup.
func run(t *testing.T, a *Adapter) (stop func()) {
	t.Helper()
	_, stop = runtest.Start(t, a.Run)
	return stop
}

// started waits until Run has learned the bot's identity: Run stores it before
// its first call after getMe (setWebhook in webhook mode, else deleteWebhook).
func started(t *testing.T, e *env, a *Adapter) {
	t.Helper()
	next := "deleteWebhook"
	if a.mode == ModeWebhook {
		next = "setWebhook"
	}
	e.waitCalls(t, next, 1)
	if _, ok := a.Self(); !ok {
		t.Fatalf("Run called %s without having learned the bot's identity", next)
	}
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *env) push(t *testing.T, update []byte) int64 {
	t.Helper()
	id, err := e.srv.PushUpdate(botToken, update)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) waitConfirmed(t *testing.T, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.srv.WaitConfirmed(ctx, botToken, offset); err != nil {
		t.Fatalf("offset %d not confirmed (at %d): %v", offset, e.srv.Confirmed(botToken), err)
	}
}

// topicReply returns the params of the one sendMessage call so far, checking it
// went as HTML into topic 42 of forum chat -1001000000002, replying to message 43.
func (e *env) topicReply(t *testing.T) map[string]string {
	t.Helper()
	calls := e.srv.Calls("sendMessage")
	if len(calls) != 1 {
		t.Fatalf("%d sendMessage calls, want 1", len(calls))
	}
	p := calls[0].Params
	if p["chat_id"] != "-1001000000002" || p["message_thread_id"] != "42" || p["parse_mode"] != "HTML" {
		t.Errorf("params %v; want chat -1001000000002, topic 42, HTML", p)
	}
	if got := telegramtest.ParseReplyTo(calls[0]); got != 43 {
		t.Errorf("reply_parameters.message_id = %d, want 43", got)
	}
	return p
}

func (e *env) waitCalls(t *testing.T, method string, n int) []telegramtest.Call {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	calls, err := e.srv.WaitCalls(ctx, method, n)
	if err != nil {
		t.Fatalf("%d %s calls, want %d", len(calls), method, n)
	}
	return calls
}

// groupMsg builds a supergroup message update from alice.
func groupMsg(id int64, text string, entities ...map[string]any) []byte {
	m := map[string]any{
		"message_id": id,
		"from":       map[string]any{"id": aliceID, "is_bot": false, "first_name": "Alice", "username": "alice_example"},
		"chat":       map[string]any{"id": groupChat, "title": "Test Engineering", "type": "supergroup"},
		"date":       1767225660,
		"text":       text,
	}
	if len(entities) > 0 {
		m["entities"] = entities
	}
	b, _ := json.Marshal(map[string]any{"message": m})
	return b
}

func ent(typ string, off, n int) map[string]any {
	return map[string]any{"type": typ, "offset": off, "length": n}
}

type tgUser = tgbotapi.User

// botUser is a second fixture-style bot, "@writer_bot".
func botUser(token string) telegramtest.Bot {
	return telegramtest.Bot{Token: token, ID: 7000000002, Username: "writer_bot", Name: "Writer Bot"}
}
