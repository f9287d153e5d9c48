package bolt

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"openbot/core"
)

// groupProbe records the size of every group the committer starts and can hold
// the first one in flight, so tests arrange who queues during a commit.
type groupProbe struct {
	mu      sync.Mutex
	sizes   []int
	started chan struct{} // closed when the first group starts
	release chan struct{} // the first group waits for this
	first   sync.Once
}

func probe(t *testing.T, s *Store, hold bool) *groupProbe {
	t.Helper()
	p := &groupProbe{started: make(chan struct{}), release: make(chan struct{})}
	if !hold {
		close(p.release)
	}
	s.group.onGroup = func(n int) {
		p.mu.Lock()
		p.sizes = append(p.sizes, n)
		p.mu.Unlock()
		p.first.Do(func() { close(p.started); <-p.release })
	}
	return p
}

func (p *groupProbe) groups() []int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int(nil), p.sizes...)
}

// waitQueued yields until n calls wait in the committer's queue.
func waitQueued(s *Store, n int) {
	for len(s.group.queue) < n {
		runtime.Gosched()
	}
}

func putThread(key string) func(core.Tx) error {
	return func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: key})
		if err != nil {
			return err
		}
		return tx.BindThreadKey(key, th.ID)
	}
}

// A lone Batch starts its commit by itself, before anyone else has called: the
// committer took the one call, found nothing more queued and began the transaction
// (the hook sees a group of 1 with no other caller in existence, so its start
// depends on no later event). Calls that arrive while that commit is in flight form
// the next group, together.
func TestBatchLoneWriteCommitsAtOnce(t *testing.T) {
	s := openTemp(t)
	p := probe(t, s, true)
	ctx := context.Background()
	lone := make(chan error, 1)
	go func() { lone <- s.Batch(ctx, putThread("lone")) }()
	<-p.started // the lone call's group started with nobody else queued
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- s.Batch(ctx, putThread(fmt.Sprint("crowd", i))) }()
	}
	waitQueued(s, 3)
	close(p.release)
	if err := <-lone; err != nil {
		t.Fatalf("lone Batch: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Batch: %v", err)
		}
	}
	if got := p.groups(); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("group sizes = %v, want [1 3]: the lone write alone at once, then the three that queued during its commit together", got)
	}
}

// One call failing or panicking in a group costs the others nothing: they commit,
// the failing caller gets its own error and the panicking caller its own panic.
func TestBatchFailureStaysWithItsCaller(t *testing.T) {
	s := openTemp(t)
	p := probe(t, s, true)
	ctx := context.Background()
	boom := errors.New("boom")
	hold := make(chan error, 1)
	go func() { hold <- s.Batch(ctx, putThread("first")) }()
	<-p.started
	type outcome struct {
		name     string
		err      error
		panicked any
	}
	out := make(chan outcome, 4)
	calls := []struct {
		name string
		fn   func(core.Tx) error
	}{
		{"good1", putThread("good1")},
		{"bad", func(tx core.Tx) error {
			if err := putThread("bad")(tx); err != nil {
				return err
			}
			return boom
		}},
		{"panics", func(tx core.Tx) error {
			_ = putThread("panics")(tx)
			panic("bug in a batch function")
		}},
		{"good2", putThread("good2")},
	}
	for i, c := range calls {
		go func() {
			o := outcome{name: c.name}
			defer func() { o.panicked = recover(); out <- o }()
			o.err = s.Batch(ctx, c.fn)
		}()
		waitQueued(s, i+1) // queue in this order
	}
	close(p.release)
	if err := <-hold; err != nil {
		t.Fatalf("first Batch: %v", err)
	}
	for range calls {
		o := <-out
		switch o.name {
		case "bad":
			if !errors.Is(o.err, boom) || o.panicked != nil {
				t.Errorf("bad: err %v, panic %v; want boom", o.err, o.panicked)
			}
		case "panics":
			if o.panicked == nil {
				t.Errorf("panicking call returned %v, want its panic on its own goroutine", o.err)
			}
		default:
			if o.err != nil || o.panicked != nil {
				t.Errorf("%s: err %v, panic %v; want committed", o.name, o.err, o.panicked)
			}
		}
	}
	if err := s.View(ctx, func(tx core.ReadTx) error {
		for _, k := range []string{"first", "good1", "good2"} {
			if _, err := tx.ThreadByKey(k); err != nil {
				t.Errorf("%s not committed: %v", k, err)
			}
		}
		for _, k := range []string{"bad", "panics"} {
			if _, err := tx.ThreadByKey(k); !errors.Is(err, core.ErrNotFound) {
				t.Errorf("%s: ThreadByKey = %v, want nothing written", k, err)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// first alone; then all four; without bad; without the panicking one.
	if got, want := p.groups(), []int{1, 4, 3, 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("group sizes = %v, want %v", got, want)
	}
}

// Many writers, more than the bounded queue holds and in groups capped by
// MaxBatchSize, all commit exactly once.
func TestBatchManyWritersAllCommit(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "many.db"), Options{NoSync: true, MaxBatchSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := probe(t, s, false)
	const writers, each = 100, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				errs <- s.Batch(context.Background(), putThread(fmt.Sprintf("w%d-%d", w, i)))
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("Batch: %v", err)
		}
	}
	var n int
	if err := s.View(context.Background(), func(tx core.ReadTx) error {
		th, err := tx.Threads(0)
		n = len(th)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != writers*each {
		t.Errorf("threads = %d, want %d", n, writers*each)
	}
	for _, g := range p.groups() {
		if g > 8 {
			t.Errorf("a group of %d calls, over MaxBatchSize 8", g)
		}
	}
}

// Close lets the group in flight commit and answers the calls still queued with
// ErrClosed; nobody hangs.
func TestBatchCloseAnswersQueuedCalls(t *testing.T) {
	s := openTemp(t)
	p := probe(t, s, true)
	ctx := context.Background()
	inFlight := make(chan error, 1)
	go func() { inFlight <- s.Batch(ctx, putThread("in flight")) }()
	<-p.started
	queued := make(chan error, 3)
	for i := range 3 {
		go func() { queued <- s.Batch(ctx, putThread(fmt.Sprint("queued", i))) }()
	}
	waitQueued(s, 3)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	<-s.group.stop // Close has begun: the queued calls will not start
	close(p.release)
	if err := <-inFlight; err != nil {
		t.Errorf("in-flight Batch: %v, want committed", err)
	}
	for range 3 {
		if err := <-queued; !errors.Is(err, ErrClosed) {
			t.Errorf("queued Batch: %v, want ErrClosed", err)
		}
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := s.Batch(ctx, putThread("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Batch after Close: %v, want ErrClosed", err)
	}
}

// A call whose ctx ends while it waits for its group is answered with ctx.Err()
// and its function never runs.
func TestBatchCanceledWhileQueued(t *testing.T) {
	s := openTemp(t)
	p := probe(t, s, true)
	hold := make(chan error, 1)
	go func() { hold <- s.Batch(context.Background(), putThread("hold")) }()
	<-p.started
	ctx, cancel := context.WithCancel(context.Background())
	ran := false
	res := make(chan error, 1)
	go func() { res <- s.Batch(ctx, func(core.Tx) error { ran = true; return nil }) }()
	waitQueued(s, 1)
	cancel()
	close(p.release)
	if err := <-res; !errors.Is(err, context.Canceled) {
		t.Errorf("Batch = %v, want context.Canceled", err)
	}
	if err := <-hold; err != nil {
		t.Fatal(err)
	}
	if ran {
		t.Errorf("fn ran after its ctx was canceled")
	}
}

// Each group commit is counted and observed with the calls it carried: a lone
// write, then three that queued during its commit; a group whose function
// failed is observed for the calls that committed without it.
func TestCommitStatsAndOnCommit(t *testing.T) {
	s := openTemp(t)
	var (
		mu   sync.Mutex
		seen []int
	)
	s.OnCommit(func(writes int, d time.Duration) {
		if d <= 0 {
			t.Errorf("commit of %d writes observed with duration %v", writes, d)
		}
		mu.Lock()
		seen = append(seen, writes)
		mu.Unlock()
	})
	p := probe(t, s, true)
	ctx := context.Background()
	before := s.CommitStats()
	lone := make(chan error, 1)
	go func() { lone <- s.Batch(ctx, putThread("lone")) }()
	<-p.started
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		fn := putThread(fmt.Sprint("crowd", i))
		if i == 1 {
			fn = func(core.Tx) error { return errors.New("refused") }
		}
		go func() { defer wg.Done(); errs <- s.Batch(ctx, fn) }()
	}
	waitQueued(s, 3)
	close(p.release)
	if err := <-lone; err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	s.OnCommit(nil)
	if err := s.Batch(ctx, putThread("unobserved")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != 1 || seen[1] != 2 {
		t.Errorf("observed commits of %v writes, want [1 2] (the failed call runs alone and fails again, uncounted)", seen)
	}
	st := s.CommitStats()
	if c, w := st.Commits-before.Commits, st.Writes-before.Writes; c != 3 || w != 4 || st.Busy <= before.Busy {
		t.Errorf("stats moved by %d commits, %d writes, busy %v -> %v; want 3, 4 and more", c, w, before.Busy, st.Busy)
	}
	// An Update is a commit of one write; a failed one is none.
	if err := s.Update(ctx, putThread("update")); err != nil {
		t.Fatal(err)
	}
	_ = s.Update(ctx, func(core.Tx) error { return errors.New("refused") })
	if after := s.CommitStats(); after.Commits != st.Commits+1 || after.Writes != st.Writes+1 {
		t.Errorf("an Update moved the stats from %+v to %+v, want one commit of one write", st, after)
	}
}
