package core_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/sharedtest"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// TestShared runs the shared-mode suite (core/sharedtest) with engines that
// share one bbolt handle, standing for processes that share a store; the
// PostgreSQL store runs it with one handle per engine (store/postgres).
func TestShared(t *testing.T) {
	sharedtest.Run(t, func(t *testing.T) sharedtest.Opener {
		st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		bus := &sharedtest.HintBus{}
		return func(t *testing.T) (core.Store, core.Hinter) { return nopClose{storetest.RerunFromEnv(st)}, bus }
	})
}

// nopClose keeps the shared handle open until the test's cleanup closes it.
type nopClose struct{ core.Store }

func (nopClose) Close() error { return nil }

// TestSharedProcessIDMustBeUnique: a second engine configured with the id of
// a live one waits for that id's lease and then refuses to run, rather than
// acting on the first one's claims; the id is free again once the first stops.
func TestSharedProcessIDMustBeUnique(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	newEngine := func() *core.Engine {
		e, err := core.New(core.Options{Store: nopClose{storetest.RerunFromEnv(st)}, Agent: nopAgent{}, Bots: team, Shared: true,
			ProcessID: "web-1", LeaseTTL: 300 * time.Millisecond, SweepInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	first := newEngine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- first.Run(ctx) }()
	<-first.Ready()
	err = newEngine().Run(context.Background())
	if !errors.Is(err, core.ErrProcessIDInUse) {
		t.Errorf("second engine with the same id: Run = %v, want ErrProcessIDInUse", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first engine: %v", err)
	}
	again := newEngine()
	ctx2, cancel2 := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- again.Run(ctx2) }()
	select {
	case <-again.Ready():
	case err := <-done2:
		t.Fatalf("the id was not free after its process stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("engine did not start")
	}
	cancel2()
	<-done2
}

type nopAgent struct{}

func (nopAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	return core.Result{Reply: "ok"}, nil
}

// TestSharedProcessIDTakenWhileCutOff: a process cut off from the store past
// its lease time is replaced by a new process with the same id; when the first
// reaches the store again it finds its id taken and stops (Run returns
// ErrProcessIDInUse) instead of acting beside the new one.
func TestSharedProcessIDTakenWhileCutOff(t *testing.T) {
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ss := &sharedtest.FaultStore{Store: storetest.RerunFromEnv(st)}
	newEngine := func(s core.Store) *core.Engine {
		e, err := core.New(core.Options{Store: s, Agent: nopAgent{}, Bots: team, Shared: true,
			ProcessID: "web-1", LeaseTTL: 300 * time.Millisecond, SweepInterval: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	old := newEngine(ss)
	done := make(chan error, 1)
	go func() { done <- old.Run(context.Background()) }()
	<-old.Ready()
	release := ss.Stall()
	// The replacement waits for the old lease to lapse, then runs.
	repl := newEngine(nopClose{st})
	ctx, cancel := context.WithCancel(context.Background())
	done2 := make(chan error, 1)
	go func() { done2 <- repl.Run(ctx) }()
	select {
	case <-repl.Ready():
	case err := <-done2:
		t.Fatalf("replacement: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the replacement did not start")
	}
	release()
	select {
	case err := <-done:
		if !errors.Is(err, core.ErrProcessIDInUse) {
			t.Errorf("the cut-off process's Run = %v, want ErrProcessIDInUse", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cut-off process kept running beside its replacement")
	}
	cancel()
	if err := <-done2; err != nil {
		t.Errorf("replacement: %v", err)
	}
}
