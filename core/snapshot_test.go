package core_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// Snapshot isolation (a store that runs write transactions at once, as
// PostgreSQL at REPEATABLE READ does) keeps two overlapping transactions apart
// only when they write a row in common: then the later one rolls back and runs
// again on a fresh snapshot. These tests run two operations from one snapshot,
// each on its own copy of a bbolt file, as two processes would at once, and
// read which rows each wrote (storetest.Writes): an invariant the two could
// break together holds only if they share a row.

// forked is one of two engines over copies of one store file.
type forked struct {
	eng *core.Engine
	w   *storetest.Writes
}

// fork builds a store with setup, then two engines over copies of it, each
// recording what it writes; opts.Store is set here.
func fork(t *testing.T, opts core.Options, setup func(e *core.Engine, st core.Store)) [2]forked {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(dir, "base.db")
	st, err := bolt.Open(base, bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	o := opts
	o.Store = st
	eng, err := core.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if setup != nil {
		setup(eng, st)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var out [2]forked
	for i := range out {
		path := filepath.Join(dir, fmt.Sprintf("fork%d.db", i))
		copyFile(t, base, path)
		st, err := bolt.Open(path, bolt.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		out[i].w = storetest.RecordWrites(st)
		o := opts
		o.Store = out[i].w
		o.ProcessID = fmt.Sprintf("proc-%d", i)
		if out[i].eng, err = core.New(o); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

func snapInbound(dedup, threadKey, text string) core.Inbound {
	return core.Inbound{Account: "console/local", Platform: "console", DedupKey: dedup, ThreadKey: threadKey,
		Conversation: core.ConversationRef(threadKey), PlatformID: dedup, SenderID: "console:you", SenderName: "you",
		Text: text, StartThread: true}
}

func mustIngest(t *testing.T, e *core.Engine, in core.Inbound) core.IngestResult {
	t.Helper()
	res, err := e.Ingest(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestConcurrentWritesConflict: each pair of operations that must not both
// take effect as if alone, run from one snapshot, writes a row in common: the
// row a store with snapshot isolation keeps them apart by.
func TestConcurrentWritesConflict(t *testing.T) {
	ctx := context.Background()
	base := core.Options{Agent: &scriptAgent{}, Bots: team, Owners: []core.ActorID{"console:you"}}
	shared := base
	shared.Shared = true
	pickOne := func(busy core.ThreadID) func(t *testing.T, e *core.Engine) {
		return func(t *testing.T, e *core.Engine) {
			jobs, err := core.PickBusy(ctx, e, "engineer", 1, busy)
			if err != nil || len(jobs) != 1 {
				t.Fatalf("pick: %d jobs, err %v; want 1", len(jobs), err)
			}
		}
	}
	twoThreads := func(t *testing.T, e *core.Engine, _ core.Store) {
		mustIngest(t, e, snapInbound("a1", "console:a", "@engineer look at A"))
		mustIngest(t, e, snapInbound("b1", "console:b", "@engineer look at B"))
	}
	for _, tc := range []struct {
		name     string
		opts     core.Options
		setup    func(t *testing.T, e *core.Engine, st core.Store)
		op1, op2 func(t *testing.T, e *core.Engine)
		want     string // a row both write
	}{{
		// Dedup: the message is stored once.
		name: "one platform message ingested twice", opts: base,
		op1:  func(t *testing.T, e *core.Engine) { mustIngest(t, e, snapInbound("m1", "console:a", "hello")) },
		op2:  func(t *testing.T, e *core.Engine) { mustIngest(t, e, snapInbound("m1", "console:a", "hello")) },
		want: "seen:m1",
	}, {
		// Thread creation by platform key: one thread per platform thread.
		name: "first two messages of a new platform thread", opts: base,
		op1:  func(t *testing.T, e *core.Engine) { mustIngest(t, e, snapInbound("m1", "console:a", "hello")) },
		op2:  func(t *testing.T, e *core.Engine) { mustIngest(t, e, snapInbound("m2", "console:a", "hello again")) },
		want: "threadkey:console:a",
	}, {
		// max_parallel_threads (1) across processes: the second process's
		// worker still counts thread A busy (its run there just ended).
		name: "two picks of one bot in two threads", opts: shared, setup: twoThreads,
		op1: pickOne(0), op2: pickOne(1),
		want: "cursor:core/botlock/engineer",
	}, {
		// A paused bot starts nothing once PauseBot returned.
		name: "a pause and a pick of the bot", opts: base, setup: twoThreads,
		op1: func(t *testing.T, e *core.Engine) {
			if err := e.PauseBot(ctx, "engineer", core.By{Actor: "console:you"}); err != nil {
				t.Fatal(err)
			}
		},
		op2:  pickOne(0),
		want: "cursor:core/botlock/engineer",
	}, {
		// The first answer wins.
		name: "two answers to one question", opts: base,
		setup: func(t *testing.T, e *core.Engine, st core.Store) {
			res := mustIngest(t, e, snapInbound("m1", "console:a", "@engineer deploy?"))
			if err := st.Update(ctx, func(tx core.Tx) error {
				r, err := tx.PutRun(core.Run{Bot: "bot:engineer", Thread: res.Thread, Status: core.RunWaitingHuman, Created: time.Now()})
				if err != nil {
					return err
				}
				_, err = tx.PutQuestion(core.Question{Token: "tok", Kind: core.QuestionAsk, Run: r.ID, Bot: "bot:engineer",
					Thread: res.Thread, Text: "Which environment?", Status: core.QuestionPending, Choice: -1, Created: time.Now(),
					Askers: []core.ActorID{"console:you"}})
				return err
			}); err != nil {
				t.Fatal(err)
			}
		},
		op1:  answerTok("staging"),
		op2:  answerTok("production"),
		want: "question:1",
	}, {
		// One process holds an ingress at a time.
		name: "two processes take one lease", opts: shared,
		op1:  takeLease(core.LeaseKeyIngress("telegram/chief")),
		op2:  takeLease(core.LeaseKeyIngress("telegram/chief")),
		want: "lease:" + core.LeaseKeyIngress("telegram/chief"),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var setup func(e *core.Engine, st core.Store)
			if tc.setup != nil {
				setup = func(e *core.Engine, st core.Store) { tc.setup(t, e, st) }
			}
			f := fork(t, tc.opts, setup)
			tc.op1(t, f[0].eng)
			tc.op2(t, f[1].eng)
			both := storetest.Conflict(f[0].w.Take(), f[1].w.Take())
			if !slices.Contains(both, tc.want) {
				t.Errorf("rows both write: %q; want %q among them", both, tc.want)
			}
		})
	}
}

func answerTok(text string) func(t *testing.T, e *core.Engine) {
	return func(t *testing.T, e *core.Engine) {
		res, err := e.Answer(context.Background(), core.Answer{Token: "tok", Choice: -1, Text: text, Actor: "console:you", Name: "you"})
		if err != nil || res.Outcome != core.AnswerAccepted {
			t.Fatalf("answer: %v, err %v; want accepted", res.Outcome, err)
		}
	}
}

func takeLease(key string) func(t *testing.T, e *core.Engine) {
	return func(t *testing.T, e *core.Engine) {
		if _, holder, err := core.TakeLease(context.Background(), e, key); err != nil || holder != "" {
			t.Fatalf("take lease: holder %q, err %v; want it taken", holder, err)
		}
	}
}
