package core_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// holdWriter takes the store's writer with a transaction of its own, which
// waits until the returned release is called, then runs inTx (nil: nothing)
// and commits: a commit in flight that every later write waits for.
func holdWriter(t *testing.T, st core.Store, inTx func(core.Tx) error) (release func()) {
	t.Helper()
	held, rel, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- st.Update(context.Background(), func(tx core.Tx) error {
			close(held)
			<-rel
			if inTx != nil {
				return inTx(tx)
			}
			return nil
		})
	}()
	<-held
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(rel)
			if err := <-done; err != nil {
				t.Errorf("held transaction: %v", err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// specRig is a started harness whose chief_of_staff tells calls of each run it
// starts (the trigger's text) and answers "reply N" for its Nth run.
type specRig struct {
	h     *harness
	calls chan string
}

func newSpecRig(t *testing.T, opts ...func(*core.Options)) *specRig {
	r := &specRig{h: newHarness(t, core.Limits{}), calls: make(chan string, 16)}
	r.h.opts = func(o *core.Options) {
		for _, f := range opts {
			f(o)
		}
	}
	var mu sync.Mutex
	n := 0
	r.h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		r.calls <- job.Triggers[len(job.Triggers)-1].Text
		return fmt.Sprintf("reply %d", k), nil
	}
	r.h.start()
	r.h.say("warm up")
	r.h.idle()
	if got := <-r.calls; got != "warm up" {
		t.Fatalf("warm-up run for %q", got)
	}
	return r
}

// ingest sends "hello" in its own thread on a goroutine; the result arrives on
// the returned channel.
func (r *specRig) ingest() <-chan error { return r.ingestCtx(context.Background()) }

// ingestCtx is ingest with the ingest's context.
func (r *specRig) ingestCtx(ctx context.Context) <-chan error {
	out := make(chan error, 1)
	in := helloInbound()
	go func() {
		_, err := r.h.eng.Ingest(ctx, in)
		out <- err
	}()
	return out
}

// helloInbound is the "hello" message the speculation tests ingest, in a
// thread of its own.
func helloInbound() core.Inbound {
	return core.Inbound{Account: "console/local", Platform: "console", DedupKey: "console:spec",
		ThreadKey: "console:spec", Conversation: "main", PlatformID: "spec1",
		SenderID: "console:you", SenderName: "you", Text: "hello", StartThread: true}
}

// ingestMissed holds the writer in a transaction that makes change, ingests
// "hello" meanwhile, and checks that its speculative run started and that the
// ingest's transaction abandoned it.
func (r *specRig) ingestMissed(t *testing.T, change func(core.Tx) error) {
	t.Helper()
	release := holdWriter(t, r.h.store, change)
	ingested := r.ingest()
	r.waitCall(t, "speculative run")
	release()
	if err := <-ingested; err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if _, _, missed := r.h.eng.Speculations(); missed != 1 {
		t.Fatalf("%d speculations missed, want 1", missed)
	}
}

func (r *specRig) waitCall(t *testing.T, what string) {
	t.Helper()
	select {
	case got := <-r.calls:
		if got != "hello" {
			t.Fatalf("%s: run for %q, want hello", what, got)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no run started", what)
	}
}

// helloRuns are the settled runs whose trigger is the "hello" message.
func (r *specRig) helloRuns(t *testing.T) []core.Run {
	t.Helper()
	var out []core.Run
	if err := r.h.store.View(context.Background(), func(tx core.ReadTx) error {
		runs, err := tx.RunsBefore(0, 0)
		if err != nil {
			return err
		}
		for _, run := range runs {
			for _, id := range run.Triggers {
				if m, err := tx.Message(id); err == nil && m.Text == "hello" {
					out = append(out, run)
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A message's run starts while an earlier commit is still in flight, and its
// ingest's transaction adopts it: one run, one reply, after the commit. That
// commit may carry other threads' writes, with IDs above the ones the
// speculation reserved.
func TestSpeculativeRunStartsWhileACommitIsInFlight(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(core.Tx) error
	}{
		{"nothing else", nil},
		{"another thread's message in the commit", func(tx core.Tx) error {
			th, err := tx.PutThread(core.Thread{Key: "other"})
			if err != nil {
				return err
			}
			_, err = tx.PutMessage(core.Message{Thread: th.ID, Sender: "console:you", Text: "elsewhere"})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSpecRig(t)
			release := holdWriter(t, r.h.store, c.change)
			ingested := r.ingest()
			r.waitCall(t, "while the writer is held")
			select {
			case err := <-ingested:
				t.Fatalf("Ingest returned (%v) while the writer was held", err)
			default:
			}
			for _, d := range r.h.ad.deliveries() {
				if d.Text == "reply 2" {
					t.Fatal("the run's reply was delivered before its message was stored")
				}
			}
			release()
			if err := <-ingested; err != nil {
				t.Fatalf("Ingest: %v", err)
			}
			r.h.idle()
			if got := r.h.ad.texts(); !slices.Contains(got, "[chief_of_staff] reply 2") || len(got) != 2 {
				t.Fatalf("delivered %q, want the warm-up's reply and reply 2", got)
			}
			runs := r.helloRuns(t)
			if len(runs) != 1 || runs[0].Status != core.RunCompleted {
				t.Fatalf("runs for hello: %+v, want one completed", runs)
			}
			if started, adopted, missed := r.h.eng.Speculations(); started != adopted || missed != 0 || adopted < 1 {
				t.Fatalf("speculations: %d started, %d adopted, %d missed; want every one adopted", started, adopted, missed)
			}
		})
	}
}

// When what the speculative run was started from changes before the ingest's
// transaction, the transaction abandons the run: its reply is never posted
// and nothing of it is stored; the message is handled as any other.
func TestSpeculativeRunAbandonedWhenTheStateChanged(t *testing.T) {
	for _, c := range []struct {
		name string
		// seed runs in a transaction of its own before anything else.
		seed func(tx core.Tx) error
		// change runs in the commit in flight, after the speculative run started.
		change func(h *harness) func(core.Tx) error
		// after runs once Ingest returned; the message's real run follows.
		after func(t *testing.T, h *harness)
		want  string // the thread's messages in the end; "" is hello|reply 3
	}{
		{
			name: "bot paused",
			change: func(*harness) func(core.Tx) error {
				return func(tx core.Tx) error { return tx.SetCursor(core.PausedCursor("chief_of_staff"), "{}") }
			},
			after: func(t *testing.T, h *harness) {
				if runs := h.runs(core.RunRunning); len(runs) != 0 {
					t.Fatalf("running while paused: %+v", runs)
				}
				if err := h.eng.ResumeBot(context.Background(), "chief_of_staff", core.By{}); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "an earlier message of the thread edited", // the same pick, another snapshot
			seed: func(tx core.Tx) error {
				th, err := tx.PutThread(core.Thread{Key: "console:spec"})
				if err != nil {
					return err
				}
				if err := tx.BindThreadKey("console:spec", th.ID); err != nil {
					return err
				}
				_, err = tx.PutMessage(core.Message{Thread: th.ID, Sender: "console:you", SenderName: "you", Text: "before"})
				return err
			},
			change: func(h *harness) func(core.Tx) error {
				return func(tx core.Tx) error {
					id, err := tx.ThreadByKey("console:spec")
					if err != nil {
						return err
					}
					ms, err := tx.Messages(id, 0, 1)
					if err != nil || len(ms) != 1 {
						return fmt.Errorf("seeded message: %v %v", ms, err)
					}
					ms[0].Text = "before (edited)"
					_, err = tx.PutMessage(ms[0])
					return err
				}
			},
			want: "before (edited)|hello|reply 3",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newSpecRig(t)
			if c.seed != nil {
				if err := r.h.store.Update(context.Background(), c.seed); err != nil {
					t.Fatal(err)
				}
			}
			r.ingestMissed(t, c.change(r.h))
			if c.after != nil {
				c.after(t, r.h)
			}
			r.waitCall(t, "the message's run")
			r.h.idle()
			got := r.h.ad.texts()
			if slices.Contains(got, "[chief_of_staff] reply 2") {
				t.Fatalf("the abandoned run's reply was delivered: %q", got)
			}
			if !slices.Contains(got, "[chief_of_staff] reply 3") || len(got) != 2 {
				t.Fatalf("delivered %q, want the warm-up's reply and reply 3", got)
			}
			runs := r.helloRuns(t)
			if len(runs) != 1 || runs[0].Status != core.RunCompleted {
				t.Fatalf("runs for hello: %+v, want one completed (the abandoned one left none)", runs)
			}
			th, err := r.h.eng.ThreadByKey(context.Background(), "console:spec")
			if err != nil {
				t.Fatal(err)
			}
			var texts []string
			for _, m := range r.h.messages(th) {
				texts = append(texts, m.Text)
			}
			want := c.want
			if want == "" {
				want = "hello|reply 3"
			}
			if got := strings.Join(texts, "|"); got != want {
				t.Fatalf("thread holds %q, want %q", got, want)
			}
		})
	}
}

// The same event delivered twice at once (two accounts of a conversation, a
// platform's retry) starts one speculative run, not a second one to abandon.
func TestSpeculationOncePerMessage(t *testing.T) {
	r := newSpecRig(t, func(o *core.Options) { // room for a second run, so only the claim stops one
		o.Bots = slices.Clone(o.Bots)
		o.Bots[0].MaxParallelThreads = 4
	})
	s0, _, _ := r.h.eng.Speculations()
	release := holdWriter(t, r.h.store, nil)
	first := r.ingest()
	r.waitCall(t, "first delivery")
	second := r.ingest() // the same dedup key
	select {
	case got := <-r.calls: // a second run would call at once; its absence can only pass falsely
		t.Fatalf("a second run started for %q", got)
	case <-time.After(200 * time.Millisecond):
	}
	release()
	for _, ch := range []<-chan error{first, second} {
		if err := <-ch; err != nil {
			t.Fatalf("Ingest: %v", err)
		}
	}
	r.h.idle()
	// Which delivery's transaction runs first is a race: the second's may store
	// the message and start its run, and the first's speculation is then missed.
	if started, _, _ := r.h.eng.Speculations(); started-s0 != 1 {
		t.Fatalf("%d speculations started (%d before); want the first delivery's only", started, s0)
	}
	if runs := r.helloRuns(t); len(runs) != 1 {
		t.Fatalf("runs for hello: %+v, want one", runs)
	}
}

// At most a few ingests speculate at once; the others wait for the writer as
// before, and every message gets its run.
func TestSpeculationsBounded(t *testing.T) {
	const n = 6 // more than the bound
	r := newSpecRig(t, func(o *core.Options) {
		o.Bots = slices.Clone(o.Bots)
		o.Bots[0].MaxParallelThreads = 2 * n
		o.Limits.MaxConcurrentRuns = 2 * n
	})
	s0, _, _ := r.h.eng.Speculations()
	release := holdWriter(t, r.h.store, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, n)
	for i := range n {
		in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:bounded%d", i),
			ThreadKey: fmt.Sprintf("console:bounded%d", i), Conversation: "main", PlatformID: fmt.Sprintf("b%d", i),
			SenderID: "console:you", SenderName: "you", Text: "hello", StartThread: true}
		go func() {
			_, err := r.h.eng.Ingest(ctx, in)
			errs <- err
		}()
	}
	r.waitCall(t, "speculative run") // others may start, or find the pick lock taken
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("Ingest: %v", err)
		}
	}
	r.h.idle()
	if started, _, _ := r.h.eng.Speculations(); started-s0 > 4 {
		t.Fatalf("%d speculations started at once, want at most 4", started-s0)
	}
	if runs := r.helloRuns(t); len(runs) != n {
		t.Fatalf("%d runs for %d messages", len(runs), n)
	}
}
