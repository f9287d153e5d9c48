package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
	"openbot/internal/runtest"
	"openbot/store/bolt"
)

// proc is one openbot process as every end-to-end rig runs it: a bbolt store,
// the engine over it and the adapters under test with their webhook routes,
// run until stop or the test's end. A rig that restarts the process opens a
// new proc over the same database file; the platform fakes outlive it.
type proc struct {
	t      testing.TB
	db     string
	st     core.Store
	eng    *core.Engine
	hook   *httptest.Server // the adapters' webhook routes; nil when none has any
	events *events          // what the engine reported (core.Observer)
	halt   func()           // set by run
	cancel func()           // set by run: stops the engine and adapters without waiting
	closed bool
}

// openProc opens the store at db ("" for a new one in the test's temporary
// folder; opts.Store, when set, instead) and the engine over it, from opts with
// Store set, Bots defaulting to
// e2eTeam and ShutdownGrace to 2 s, and the engine's reports going to p.events
// when opts has no Observer. run starts it; the test's end stops it.
func openProc(t testing.TB, db string, opts core.Options) *proc {
	t.Helper()
	if db == "" {
		db = filepath.Join(t.TempDir(), "openbot.db")
	}
	if opts.Store == nil {
		st, err := bolt.Open(db, bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opts.Store = st
	}
	st := opts.Store
	ev := &events{}
	if opts.Observer == nil {
		opts.Observer = ev
	}
	if opts.Bots == nil {
		opts.Bots = e2eTeam
	}
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = 2 * time.Second
	}
	eng, err := core.New(opts)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	p := &proc{t: t, db: db, st: st, eng: eng, events: ev}
	t.Cleanup(p.stop)
	return p
}

// run adds the adapters to the engine, serves their webhook routes on p.hook,
// and runs the engine and, once it is ready, every adapter that is a
// core.Runner.
func (p *proc) run(ads ...core.Adapter) {
	p.t.Helper()
	mux := http.NewServeMux()
	for _, ad := range ads {
		if err := p.eng.AddAdapter(ad); err != nil {
			p.t.Fatal(err)
		}
		if m, ok := ad.(core.WebhookMounter); ok {
			m.MountHTTP(mux)
			p.hook = httptest.NewServer(mux)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = p.eng.Run(ctx) }()
	<-p.eng.Ready()
	for _, ad := range ads {
		if r, ok := ad.(core.Runner); ok {
			wg.Add(1)
			go func() { defer wg.Done(); _ = r.Run(ctx) }()
		}
	}
	p.halt = func() {
		if p.hook != nil {
			p.hook.Close()
		}
		cancel()
		wg.Wait()
	}
}

// stop stops the adapters and the engine (bounded by the shutdown grace),
// waits for them and closes the store; later calls do nothing.
func (p *proc) stop() {
	if p.closed {
		return
	}
	p.closed = true
	if p.halt != nil {
		p.halt()
	}
	if err := p.st.Close(); err != nil {
		p.t.Error(err)
	}
}

// ctx bounds one wait of the test: 20 s.
func (p *proc) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	p.t.Cleanup(cancel)
	return ctx
}

// idle waits until the engine has nothing left to do.
func (p *proc) idle() {
	p.t.Helper()
	if err := p.eng.WaitIdle(p.ctx()); err != nil {
		p.t.Fatalf("not idle: %v", err)
	}
}

// view reads the store, failing the test on an error.
func (p *proc) view(fn func(tx core.ReadTx) error) {
	p.t.Helper()
	if err := p.st.View(context.Background(), fn); err != nil {
		p.t.Fatal(err)
	}
}

// stored returns every stored message, thread by thread.
func (p *proc) stored() []core.Message {
	var out []core.Message
	p.view(func(tx core.ReadTx) error {
		ths, err := tx.Threads(0)
		for _, th := range ths {
			ms, err := tx.Messages(th.ID, 0, 0)
			if err != nil {
				return err
			}
			out = append(out, ms...)
		}
		return err
	})
	return out
}

// storedWith returns the stored messages whose text contains text.
func (p *proc) storedWith(text string) []core.Message {
	var out []core.Message
	for _, m := range p.stored() {
		if strings.Contains(m.Text, text) {
			out = append(out, m)
		}
	}
	return out
}

// threadOf returns the thread of the stored message whose text contains text
// (the last one); there must be one.
func (p *proc) threadOf(text string) core.ThreadID {
	p.t.Helper()
	ms := p.storedWith(text)
	if len(ms) == 0 {
		p.t.Fatalf("no stored message contains %q", text)
	}
	return ms[len(ms)-1].Thread
}

// waitStore waits until cond holds in the store, checking it now and after
// every event the engine reports (a run settled, an entry delivered, a question
// decided: what changes the store), failing the test after 20 s.
func (p *proc) waitStore(what string, cond func(tx core.ReadTx) bool) {
	p.t.Helper()
	p.events.wait(p.t, what, func(counts) bool {
		ok := false
		p.view(func(tx core.ReadTx) error { ok = cond(tx); return nil })
		return ok
	})
}

// counts are the events an engine reported so far.
type counts struct {
	ingested  int // messages stored and routed
	started   int // runs picked up
	ended     int // runs settled
	delivered int // outbox entries delivered
	answered  int // question decisions (answers and expiries)
}

// events counts what the engine reports through core.Observer, so that a test
// waits for "the message is stored" or "a run settled" instead of for time.
type events struct {
	core.NopObserver
	mu      sync.Mutex
	n       counts
	changed chan struct{} // closed and replaced on every event
}

func (e *events) add(f func(*counts)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	f(&e.n)
	if e.changed != nil {
		close(e.changed)
	}
	e.changed = make(chan struct{})
}

func (e *events) Inbound(_, outcome string) {
	if outcome == core.InboundIngested {
		e.add(func(c *counts) { c.ingested++ })
	}
}
func (e *events) RunStarted(string) { e.add(func(c *counts) { c.started++ }) }
func (e *events) RunEnded(string, core.RunStatus, time.Duration) {
	e.add(func(c *counts) { c.ended++ })
}
func (e *events) Delivery(_, outcome string) {
	if outcome == "delivered" {
		e.add(func(c *counts) { c.delivered++ })
	}
}

func (e *events) Answer(string) { e.add(func(c *counts) { c.answered++ }) }

// now returns the counts so far.
func (e *events) now() counts {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// wait blocks until cond holds for the counts, failing t after 20 s.
func (e *events) wait(t testing.TB, what string, cond func(counts) bool) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		e.mu.Lock()
		n, ch := e.n, e.changed
		if ch == nil {
			e.changed = make(chan struct{})
			ch = e.changed
		}
		e.mu.Unlock()
		if cond(n) {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("timed out waiting for %s (events so far %+v)", what, n)
		}
	}
}

// waitFor checks cond every few milliseconds until it holds, failing the test
// after 10 s. It is for states nothing signals (an adapter learning its bot's
// id from the platform); where an event exists, wait on that.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	runtest.Poll(t, what, 10*time.Second, cond)
}

// llmAgent is the real agent loop on go-openai against llm, with reg's tools
// (nil: none).
func llmAgent(t testing.TB, llm *openaitest.Server, reg *agents.Registry, limits core.Limits) core.Agent {
	t.Helper()
	if reg == nil {
		reg = agents.NewRegistry()
	}
	ag, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: llm.URL(), APIKey: "test-key", Model: "test-model"}},
		Registry:  reg,
		Limits:    limits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return ag
}

// builtins registers the built-in tools of opts that are named (all when none
// is).
func builtins(t testing.TB, opts tools.Options, names ...string) *agents.Registry {
	t.Helper()
	all, err := tools.Builtins(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := agents.NewRegistry()
	for _, tl := range all {
		if len(names) > 0 && !slices.Contains(names, tl.Name()) {
			continue
		}
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}
