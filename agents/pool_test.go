package agents

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// TestModelConnectionsReused: after 8 runs made their model calls at once, the
// next 8 at once reuse those connections instead of opening new ones (the default
// transport kept 2 idle per host and dialled again for the other 6).
func TestModelConnectionsReused(t *testing.T) {
	const n = 8
	srv := openaitest.New(t)
	var (
		mu      sync.Mutex
		waiting int
		all     = make(chan struct{})
	)
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		mu.Lock()
		waiting++
		if waiting == n { // every call of the round holds its connection until now
			close(all)
		}
		ch := all
		mu.Unlock()
		<-ch
		return openaitest.Text("ok")
	})
	a := newAgent(t, srv, NewRegistry(), nil)
	round := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				env := &fakeEnv{}
				trig := env.add(alice, "Alice", fmt.Sprintf("@engineer call %d", i), "engineer")
				job := newJob(env, engineer, false, trig)
				if _, err := a.Execute(context.Background(), job); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	round()
	if got := srv.Conns(); got != n {
		t.Fatalf("first round: %d connections, want %d", got, n)
	}
	mu.Lock()
	waiting, all = 0, make(chan struct{})
	mu.Unlock()
	round()
	// A connection goes back to the pool just after its call returns, so one may
	// not be back yet when the next round starts; keeping 2 reuses at most 2.
	if reused := n - (srv.Conns() - n); reused <= 2 {
		t.Fatalf("a second round of %d calls at once reused %d of the first round's %d connections, want more than 2", n, reused, n)
	}
}

var _ core.RunEnv = (*fakeEnv)(nil)
