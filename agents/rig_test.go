package agents_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/internal/runtest"
	"openbot/store/bolt"
)

// The rig the agents' end-to-end tests share: a bbolt store, the real agent on
// the fake model, and the engine over them with a recording adapter.

// openStore opens a bbolt store at path ("" for a new one in the test's
// temporary folder) without fsync; the test's end closes it.
func openStore(t testing.TB, path string) *bolt.Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "openbot.db")
	}
	st, err := bolt.Open(path, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// newAgent is the agent on srv's model "m" as the default provider, with the
// rest of opts.
func newAgent(t testing.TB, srv *openaitest.Server, opts agents.Options) *agents.Agent {
	t.Helper()
	opts.Providers = map[string]agents.Provider{"default": {BaseURL: srv.URL(), Model: "m"}}
	agent, err := agents.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return agent
}

// engineRun is one engine over a bolt file, stopped (bounded) by stop.
type engineRun struct {
	eng  *core.Engine
	ad   *recAdapter
	stop func()
}

// runEngine runs an engine from opts over the bolt file at path ("" for a new
// one) with a recording adapter, until stop or the test's end; stop closes the
// store too. opts.ShutdownGrace defaults to 2 s.
func runEngine(t *testing.T, path string, opts core.Options) (*engineRun, *bolt.Store) {
	t.Helper()
	st := openStore(t, path)
	eng, ad, stop := runStore(t, st, opts)
	return &engineRun{eng: eng, ad: ad, stop: stop}, st
}

// runStore is runEngine over an open store; stop closes it.
func runStore(t *testing.T, st *bolt.Store, opts core.Options) (*core.Engine, *recAdapter, func()) {
	t.Helper()
	opts.Store = storetest.RerunFromEnv(st)
	if opts.ShutdownGrace == 0 {
		opts.ShutdownGrace = 2 * time.Second
	}
	if opts.Owners == nil {
		opts.Owners = []core.ActorID{"console:you"} // as in openbot chat: the terminal's person is an owner
	}
	eng, err := core.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ad := &recAdapter{}
	if err := eng.AddAdapter(ad); err != nil {
		t.Fatal(err)
	}
	_, stop := runtest.Start(t, eng.Run)
	return eng, ad, func() { stop(); st.Close() }
}

// startEngine runs an engine over the bolt file at path with the system clock.
func startEngine(t *testing.T, path string, agent core.Agent, bots []core.BotProfile) *engineRun {
	t.Helper()
	run, _ := runEngine(t, path, core.Options{Agent: agent, Bots: bots})
	return run
}

// builtinsAgent is the agent on srv with every built-in tool of opts (the
// workspace root a new temporary folder when unset).
func builtinsAgent(t *testing.T, srv *openaitest.Server, opts tools.Options) *agents.Agent {
	t.Helper()
	if opts.WorkspaceRoot == "" {
		opts.WorkspaceRoot = t.TempDir()
	}
	builtins, err := tools.Builtins(opts)
	if err != nil {
		t.Fatal(err)
	}
	reg := agents.NewRegistry()
	for _, tl := range builtins {
		if err := reg.Add(tl); err != nil {
			t.Fatal(err)
		}
	}
	return newAgent(t, srv, agents.Options{Registry: reg})
}

// consoleIn is a message from the console's person (console:you) starting or
// continuing the console thread "console:"+thread; id makes it distinct.
func consoleIn(thread, id, text string) core.Inbound {
	return core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:" + id,
		ThreadKey: "console:" + thread, Conversation: "main", PlatformID: "in-" + id,
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}
}

// ingest takes in one console message (consoleIn).
func (er *engineRun) ingest(t *testing.T, ctx context.Context, thread, id, text string) {
	t.Helper()
	if _, err := er.eng.Ingest(ctx, consoleIn(thread, id, text)); err != nil {
		t.Fatal(err)
	}
}

// ingestIdle is ingest, then waits until the engine is idle.
func (er *engineRun) ingestIdle(t *testing.T, ctx context.Context, thread, id, text string) {
	t.Helper()
	er.ingest(t, ctx, thread, id, text)
	if err := er.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// firstQuestion waits until a question is pending and returns the first.
func (er *engineRun) firstQuestion(t *testing.T, ctx context.Context) core.Question {
	t.Helper()
	var q core.Question
	waitFor(t, "the question", func() bool {
		qs, err := er.eng.Questions(ctx, true)
		if err != nil || len(qs) == 0 {
			return false
		}
		q = qs[0]
		return true
	})
	return q
}
