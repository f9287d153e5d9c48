package agents_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// memClock is a settable clock for the reflector.
type memClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *memClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *memClock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
func (c *memClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// memRig is the real engine, bolt store, agent with memory and reflector, on
// the fake model. The reflector does not run by itself: tests call ReflectDue
// with its clock moved, so no test waits for the delay.
type memRig struct {
	t     *testing.T
	srv   *openaitest.Server
	path  string
	st    *bolt.Store
	mem   *agents.Memories
	refl  *agents.Reflector
	clock *memClock
	eng   *core.Engine
	stop  func()
	n     int
	// asked gets each delay the reflector's Run waits for; fire ends the wait.
	asked chan time.Duration
	fire  chan time.Time
	// cur is the reflector's current agent (ReflectorOptions.Current): a test
	// stores another to model a configuration reload.
	cur *atomic.Pointer[agents.Agent]
}

// isReflection reports whether a request is a reflection call.
func isReflection(r openaitest.Request) bool {
	return len(r.Body.Messages) > 0 && strings.HasPrefix(r.Body.Messages[0].Content, "You maintain the long-term memory of @")
}

func newMemRig(t *testing.T, srv *openaitest.Server, path string, embeddings bool, bots ...core.BotProfile) *memRig {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "openbot.db")
	}
	st := openStore(t, path)
	mo := agents.MemoryOptions{Store: storetest.RerunFromEnv(st)}
	if embeddings {
		var err error
		if mo.Embedder, err = newAgent(t, srv, agents.Options{}).Embedder("default", "embed-m"); err != nil {
			t.Fatal(err)
		}
	}
	mem, err := agents.NewMemories(mo)
	if err != nil {
		t.Fatal(err)
	}
	agent := newAgent(t, srv, agents.Options{Memory: mem})
	clock := &memClock{t: time.Now()}
	asked, fire := make(chan time.Duration, 16), make(chan time.Time)
	cur := &atomic.Pointer[agents.Agent]{}
	cur.Store(agent)
	refl, err := agents.NewReflector(agents.ReflectorOptions{Store: storetest.RerunFromEnv(st), Agent: agent, Current: cur.Load, Memories: mem, Clock: clock,
		Prices: map[string]core.Price{"m": {Input: 1_000_000, Output: 2_000_000}},
		After:  func(d time.Duration) <-chan time.Time { asked <- d; return fire }})
	if err != nil {
		t.Fatal(err)
	}
	eng, _, stop := runStore(t, st, core.Options{Agent: agent, Bots: bots, Reflections: refl})
	r := &memRig{t: t, srv: srv, path: path, st: st, mem: mem, refl: refl, clock: clock, eng: eng, asked: asked, fire: fire, cur: cur, stop: stop}
	return r
}

// say posts a person's message in thread key and waits until the team is idle.
func (r *memRig) say(key, text string) {
	r.t.Helper()
	r.n++
	ctx := context.Background()
	_, err := r.eng.Ingest(ctx, core.Inbound{Account: "console/local", Platform: "console", DedupKey: key + ":" + text,
		ThreadKey: key, Conversation: core.ConversationRef(key), PlatformID: text,
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true})
	if err != nil {
		r.t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := r.eng.WaitIdle(wctx); err != nil {
		r.t.Fatalf("WaitIdle: %v", err)
	}
}

// reflect moves the reflector's clock past the delay and reflects what is due.
func (r *memRig) reflect() {
	r.t.Helper()
	r.clock.Add(time.Hour)
	if _, err := r.refl.ReflectDue(context.Background(), false); err != nil {
		r.t.Fatalf("ReflectDue: %v", err)
	}
}

func (r *memRig) pending() []core.PendingReflection {
	r.t.Helper()
	return storetest.Read(r.t, r.st, func(tx core.ReadTx) ([]core.PendingReflection, error) { return tx.PendingReflections() })
}

func (r *memRig) memories(bot string) []core.Memory {
	r.t.Helper()
	out, err := r.mem.List(context.Background(), bot)
	if err != nil {
		r.t.Fatal(err)
	}
	return out
}

// chatRequests are the requests of runs (not reflections) whose last user
// message contains text.
func chatRequests(srv *openaitest.Server, text string) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range srv.Requests() {
		if !isReflection(r) && strings.Contains(openaitest.LastUserText(r), text) {
			out = append(out, r)
		}
	}
	return out
}

func reflections(srv *openaitest.Server) []openaitest.Request {
	var out []openaitest.Request
	for _, r := range srv.Requests() {
		if isReflection(r) {
			out = append(out, r)
		}
	}
	return out
}

// promptText is the text of a request's prompt that the bot's rules and the
// turn's context are in: the system prompt and the newest user message.
func promptText(r openaitest.Request) string {
	var parts []string
	for _, m := range r.Body.Messages {
		if m.Role == "system" {
			parts = append(parts, m.Content)
		}
	}
	return strings.Join(append(parts, openaitest.LastUserText(r)), "\n")
}
