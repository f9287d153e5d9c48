package core_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// Tests of Engine.HoldLease (DESIGN.md §7, core/lease.go): engines standing for
// processes that share one store object. Waits are on channels with generous
// bounds; nothing asserts how long anything took.

const leaseWait = 30 * time.Second // bound of every wait below; never reached when correct

// deadStore stands for a store a process has lost: once dead is closed every
// Update hangs until its context ends, as a write to an unreachable database.
type deadStore struct {
	core.Store
	dead chan struct{}
}

func (s *deadStore) Update(ctx context.Context, fn func(core.Tx) error) error {
	select {
	case <-s.dead:
		<-ctx.Done()
		return ctx.Err()
	default:
		return s.Store.Update(ctx, fn)
	}
}

// boltStore opens a bbolt store in the test's directory, closed when the
// test ends.
func boltStore(t *testing.T) *bolt.Store {
	t.Helper()
	st, err := bolt.Open(filepath.Join(t.TempDir(), "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func leaseEngine(t *testing.T, st core.Store, shared bool, id string, ttl time.Duration) *core.Engine {
	t.Helper()
	eng, err := core.New(core.Options{Store: storetest.RerunFromEnv(st), Agent: &scriptAgent{}, Bots: team,
		Shared: shared, ProcessID: id, LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// holder runs one engine's HoldLease on a key and reports what happens.
type holder struct {
	started  chan struct{} // closed when fn starts
	stopped  chan struct{} // closed when fn returned
	standby  chan string   // the holders standby was called with (buffered, lossy)
	returned chan error    // HoldLease's result
	cancel   context.CancelFunc
	running  *atomic.Int32 // fns running now, across holders
	overlap  *atomic.Bool  // set when a fn started while another ran
}

func hold(eng *core.Engine, key string, running *atomic.Int32, overlap *atomic.Bool) *holder {
	ctx, cancel := context.WithCancel(context.Background())
	h := &holder{started: make(chan struct{}), stopped: make(chan struct{}), standby: make(chan string, 64),
		returned: make(chan error, 1), cancel: cancel, running: running, overlap: overlap}
	go func() { // owned by the test: joined through returned
		h.returned <- eng.HoldLease(ctx, key, func(ctx context.Context) error {
			if h.running.Add(1) > 1 {
				h.overlap.Store(true)
			}
			close(h.started)
			<-ctx.Done()
			h.running.Add(-1)
			close(h.stopped)
			return nil
		}, func(who string) {
			select {
			case h.standby <- who:
			default:
			}
		})
	}()
	return h
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(leaseWait):
		t.Fatalf("timed out waiting until %s", what)
	}
}

func waitStandby(t *testing.T, h *holder, want string) {
	t.Helper()
	select {
	case who := <-h.standby:
		if id, _, _ := strings.Cut(who, "#"); id != want { // owners are "<process id>#<per-start part>"
			t.Fatalf("standby named %q, want %q", who, want)
		}
	case <-time.After(leaseWait):
		t.Fatal("timed out waiting for standby")
	}
}

func (h *holder) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	select {
	case err := <-h.returned:
		if err != nil {
			t.Errorf("HoldLease after cancel = %v, want nil", err)
		}
	case <-time.After(leaseWait):
		t.Error("HoldLease did not return after cancel")
	}
}

// TestHoldLeaseOneHolderAtATime: of two shared engines on one store only the
// first runs fn; the second stands by naming the first, and runs fn once the
// first stops and releases the lease.
func TestHoldLeaseOneHolderAtATime(t *testing.T) {
	st := boltStore(t)
	var running atomic.Int32
	var overlap atomic.Bool
	key := core.LeaseKeyIngress("telegram/chief")
	a := hold(leaseEngine(t, st, true, "proc-a", 3*time.Second), key, &running, &overlap)
	waitClosed(t, a.started, "the first engine runs fn")
	b := hold(leaseEngine(t, st, true, "proc-b", 3*time.Second), key, &running, &overlap)
	defer b.stop(t)
	waitStandby(t, b, "proc-a")
	waitStandby(t, b, "proc-a") // still standing by at its next attempt
	select {
	case <-b.started:
		t.Fatal("the second engine runs fn while the first holds the lease")
	default:
	}
	a.stop(t)
	waitClosed(t, a.stopped, "the first engine's fn stops")
	waitClosed(t, b.started, "the second engine takes the lease over")
	if overlap.Load() {
		t.Error("two engines ran fn at once")
	}
}

// TestHoldLeaseTakeoverAfterHolderDies: the holder loses its store (writes
// hang, nothing is released); it stops its fn before its lease lapses, and the
// other engine takes the lease over once it has lapsed, never running fn while
// the first still does.
func TestHoldLeaseTakeoverAfterHolderDies(t *testing.T) {
	st := boltStore(t)
	var running atomic.Int32
	var overlap atomic.Bool
	key := core.LeaseKeyIngress("telegram/chief")
	ttl := 1500 * time.Millisecond
	lost := &deadStore{Store: st, dead: make(chan struct{})}
	a := hold(leaseEngine(t, lost, true, "proc-a", ttl), key, &running, &overlap)
	defer a.stop(t)
	waitClosed(t, a.started, "the first engine runs fn")
	b := hold(leaseEngine(t, st, true, "proc-b", ttl), key, &running, &overlap)
	defer b.stop(t)
	waitStandby(t, b, "proc-a")

	close(lost.dead)
	waitClosed(t, a.stopped, "the engine that cannot renew stops its fn")
	waitClosed(t, b.started, "the other engine takes the lapsed lease over")
	if overlap.Load() {
		t.Error("the second engine ran fn while the first still did")
	}
	var l core.Lease
	if err := st.View(context.Background(), func(tx core.ReadTx) error {
		var err error
		l, err = tx.Lease(key)
		return err
	}); err != nil || !strings.HasPrefix(l.Owner, "proc-b#") {
		t.Errorf("lease after the takeover = %+v, %v; want held by proc-b", l, err)
	}
}

// TestHoldLeaseUnsharedRunsFn: an engine that does not share its store runs fn
// at once, whatever lease records say, and returns fn's error.
func TestHoldLeaseUnsharedRunsFn(t *testing.T) {
	st := boltStore(t)
	key := core.LeaseKeyIngress("telegram/chief")
	if err := st.Update(context.Background(), func(tx core.Tx) error {
		_, err := core.TakeLeaseTx(tx, key, "someone-else", time.Now(), time.Hour)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	eng := leaseEngine(t, st, false, "", 0)
	boom := errors.New("account failed")
	ran := false
	err := eng.HoldLease(context.Background(), key, func(context.Context) error { ran = true; return boom },
		func(string) { t.Error("an unshared engine stood by") })
	if !ran || !errors.Is(err, boom) {
		t.Errorf("HoldLease unshared: ran %v, err %v; want fn run and its error", ran, err)
	}
}

// TestLeaseSince: a lease records when its owner took it; renewals keep that
// time, and another owner taking the lapsed lease starts a new one.
func TestLeaseSince(t *testing.T) {
	st := boltStore(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	take := func(owner string, now time.Time) core.Lease {
		t.Helper()
		var l core.Lease
		if err := st.Update(t.Context(), func(tx core.Tx) (err error) {
			l, err = core.TakeLeaseTx(tx, "ingress/telegram/chief", owner, now, 10*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return l
	}
	take("a#1", t0)
	if l := take("a#1", t0.Add(5*time.Second)); !l.Since.Equal(t0) || !l.Until.Equal(t0.Add(15*time.Second)) {
		t.Errorf("renewed: %+v, want since %s", l, t0)
	}
	later := t0.Add(time.Minute)
	take("b#1", later)
	var got core.Lease
	if err := st.View(t.Context(), func(tx core.ReadTx) (err error) { got, err = tx.Lease("ingress/telegram/chief"); return err }); err != nil {
		t.Fatal(err)
	}
	if got.Owner != "b#1" || !got.Since.Equal(later) {
		t.Errorf("taken over: %+v, want b#1 since %s", got, later)
	}
}
