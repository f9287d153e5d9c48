package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"openbot/core"
)

// streamAdapter is a recAdapter that streams (core.Streamer) and records each
// Stream call; call n posts "s<n>" when nothing was posted yet.
type streamAdapter struct {
	*recAdapter
	every   time.Duration
	smu     sync.Mutex
	calls   []core.StreamDelivery
	changed chan struct{}
	fail    error // returned once by the next Stream call
	// before, when set, is called at the start of each Stream call.
	before func(core.StreamDelivery)
}

func newStreamAdapter(ad *recAdapter) *streamAdapter {
	return &streamAdapter{recAdapter: ad, every: time.Second, changed: make(chan struct{}, 64)}
}

func (s *streamAdapter) StreamInterval() time.Duration { return s.every }

func (s *streamAdapter) Stream(_ context.Context, d core.StreamDelivery) ([]string, error) {
	if s.before != nil {
		s.before(d)
	}
	s.smu.Lock()
	s.calls = append(s.calls, d)
	n := len(s.calls)
	fail := s.fail
	s.fail = nil
	s.smu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	if fail != nil {
		return d.Posted, fail
	}
	if d.Text == "" {
		return nil, nil
	}
	if len(d.Posted) == 0 {
		return []string{fmt.Sprintf("s%d", n)}, nil
	}
	return d.Posted, nil
}

func (s *streamAdapter) streamCalls() []core.StreamDelivery {
	s.smu.Lock()
	defer s.smu.Unlock()
	return slices.Clone(s.calls)
}

// waitText waits until a Stream call showed text.
func (s *streamAdapter) waitText(ctx context.Context, text string) error {
	for {
		for _, c := range s.streamCalls() {
			if c.Text == text {
				return nil
			}
		}
		select {
		case <-s.changed:
		case <-ctx.Done():
			return fmt.Errorf("no Stream call showed %q: %v", text, s.streamCalls())
		}
	}
}

// firstPost moves clock on by one interval, which makes the stream's first post
// due (it waits one interval after the text began), and waits until a Stream
// call showed text; the clock then stands still, so no edit becomes due.
func (s *streamAdapter) firstPost(ctx context.Context, clock *fakeClock, text string) error {
	clock.advance(s.every)
	return s.waitText(ctx, text)
}

// advanceUntil moves the clock on by step until a Stream call showed text: the
// stream sets its next allowed time only after its call returned.
func (s *streamAdapter) advanceUntil(ctx context.Context, clock *fakeClock, step time.Duration, text string) error {
	for {
		clock.advance(step)
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		err := s.waitText(wctx, text)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
	}
}

func TestStreamThrottledAndFinalDeliveryEditsIt(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h.opts = func(o *core.Options) { o.Clock = clock }
	sa := newStreamAdapter(h.ad)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		ts, ok := job.Env.(core.TextStreamer)
		if !ok {
			return "", errors.New("the run env does not stream")
		}
		ts.StreamText("Hel")
		if err := sa.firstPost(ctx, clock, "Hel"); err != nil {
			return "", err
		}
		// The clock stands still: none of these may reach the platform.
		for _, s := range []string{"Hello", "Hello w", "Hello wor"} {
			ts.StreamText(s)
		}
		ts.StreamWorking("shell")
		ts.StreamText("Hello world")
		if err := sa.advanceUntil(ctx, clock, time.Second, "Hello world"); err != nil {
			return "", err
		}
		return "Hello world, all of it.", nil
	}
	h.start2(sa)
	h.say("hi")
	h.idle()
	calls := sa.streamCalls()
	if len(calls) != 2 || len(calls[1].Posted) != 1 || calls[1].Posted[0] != "s1" {
		t.Fatalf("stream calls = %+v, want the first post and one throttled edit of s1", calls)
	}
	ds := h.ad.deliveries()
	if len(ds) != 1 || ds[0].Text != "Hello world, all of it." || !slices.Equal(ds[0].Streamed, []string{"s1"}) {
		t.Fatalf("deliveries = %+v, want one final reply that edits s1", ds)
	}
}

func TestStreamOfAFailedRunIsRemoved(t *testing.T) {
	h := newHarness(t, core.Limits{})
	sa := newStreamAdapter(h.ad)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		job.Env.(core.TextStreamer).StreamText("half an ans")
		if err := sa.waitText(ctx, "half an ans"); err != nil {
			return "", err
		}
		return "", errors.New("model went away")
	}
	h.start2(sa)
	h.say("hi")
	h.idle()
	calls := sa.streamCalls()
	if len(calls) != 2 || calls[1].Text != "" || !slices.Equal(calls[1].Posted, []string{"s1"}) {
		t.Fatalf("stream calls = %+v, want the post and then its removal", calls)
	}
	for _, d := range h.ad.deliveries() {
		if len(d.Streamed) > 0 {
			t.Fatalf("a delivery took over the failed stream: %+v", d)
		}
	}
}

func TestStreamRateLimitedUpdateRetried(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h.opts = func(o *core.Options) { o.Clock = clock }
	sa := newStreamAdapter(h.ad)
	sa.every = time.Millisecond
	limited := rateLimited{wait: time.Minute}
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		ts := job.Env.(core.TextStreamer)
		ts.StreamText("one")
		if err := sa.firstPost(ctx, clock, "one"); err != nil {
			return "", err
		}
		sa.smu.Lock()
		sa.fail = limited
		sa.smu.Unlock()
		ts.StreamText("one two")
		if err := sa.advanceUntil(ctx, clock, time.Millisecond, "one two"); err != nil { // refused with a 429
			return "", err
		}
		ts.StreamText("one two three") // waits for the minute the platform asked for
		if err := sa.advanceUntil(ctx, clock, 20*time.Second, "one two three"); err != nil {
			return "", err
		}
		return "one two three four", nil
	}
	h.start2(sa)
	h.say("hi")
	h.idle()
	ds := h.ad.deliveries()
	if len(ds) != 1 || !slices.Equal(ds[0].Streamed, []string{"s1"}) {
		t.Fatalf("deliveries = %+v, want one reply editing s1", ds)
	}
	if calls := sa.streamCalls(); len(calls) != 3 {
		t.Fatalf("stream calls = %+v, want post, refused edit, edit after the wait", calls)
	}
}

func TestStreamWorkingStatusReplacedByAnswer(t *testing.T) {
	h := newHarness(t, core.Limits{})
	clock := &fakeClock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}
	h.opts = func(o *core.Options) { o.Clock = clock }
	sa := newStreamAdapter(h.ad)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		ts := job.Env.(core.TextStreamer)
		ts.StreamWorking("shell", "http_fetch")
		if err := sa.firstPost(ctx, clock, "_working: shell, http_fetch_"); err != nil {
			return "", err
		}
		ts.StreamText("The build is green.")
		if err := sa.advanceUntil(ctx, clock, time.Second, "The build is green."); err != nil {
			return "", err
		}
		return "The build is green.", nil
	}
	h.start2(sa)
	h.say("hi")
	h.idle()
	calls := sa.streamCalls()
	if len(calls) != 2 || !slices.Equal(calls[1].Posted, []string{"s1"}) || calls[1].Shown != "_working: shell, http_fetch_" {
		t.Fatalf("stream calls = %+v, want the status posted, then replaced in s1 by the answer", calls)
	}
	if ds := h.ad.deliveries(); len(ds) != 1 || !slices.Equal(ds[0].Streamed, []string{"s1"}) {
		t.Fatalf("deliveries = %+v", ds)
	}
}

// updateCounter counts Store.Update calls: writes that commit alone.
type updateCounter struct {
	core.Store
	n atomic.Int32
}

func (u *updateCounter) Update(ctx context.Context, fn func(core.Tx) error) error {
	u.n.Add(1)
	return u.Store.Update(ctx, fn)
}

// TestStreamedRunWritesShareCommits: every write of a run that streams its
// answer, the record of what it streamed included, goes through group commit
// (Store.Batch, DESIGN.md §7), so none of them costs a commit of its own.
func TestStreamedRunWritesShareCommits(t *testing.T) {
	h := newHarness(t, core.Limits{})
	var uc *updateCounter
	h.opts = func(o *core.Options) {
		uc = &updateCounter{Store: o.Store}
		o.Store = uc
	}
	sa := newStreamAdapter(h.ad)
	h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
		if job.Triggers[0].Text == "warm up" {
			return "ok", nil
		}
		job.Env.(core.TextStreamer).StreamText("Hel")
		if err := sa.waitText(ctx, "Hel"); err != nil {
			return "", err
		}
		return "Hello.", nil
	}
	h.start2(sa)
	h.say("warm up")
	h.idle()
	uc.n.Store(0)
	h.say("hi")
	h.idle()
	if n := uc.n.Load(); n != 0 {
		t.Fatalf("%d writes of a streamed run committed alone (Store.Update), want all through Batch", n)
	}
	if ds := h.ad.deliveries(); len(ds) == 0 || len(ds[len(ds)-1].Streamed) != 1 {
		t.Fatalf("deliveries = %+v, want the reply to edit the streamed message", ds)
	}
}

// streamedWatch counts the runs put with streamed messages recorded on them
// (Run.Streamed), by any write.
// recorded is closed after the first such write committed.
type streamedWatch struct {
	core.Store
	n        atomic.Int32
	recorded chan struct{}
	once     sync.Once
}

type streamedWatchTx struct {
	core.Tx
	put *bool
}

func (w streamedWatchTx) PutRun(r core.Run) (core.Run, error) {
	if len(r.Streamed) > 0 {
		*w.put = true
	}
	return w.Tx.PutRun(r)
}

func (s *streamedWatch) watch(err error, put bool) error {
	if err == nil && put {
		s.n.Add(1)
		s.once.Do(func() { close(s.recorded) })
	}
	return err
}

func (s *streamedWatch) Update(ctx context.Context, fn func(core.Tx) error) error {
	put := false
	err := s.Store.Update(ctx, func(tx core.Tx) error { put = false; return fn(streamedWatchTx{tx, &put}) })
	return s.watch(err, put)
}

func (s *streamedWatch) Batch(ctx context.Context, fn func(core.Tx) error) error {
	put := false
	err := s.Store.Batch(ctx, func(tx core.Tx) error { put = false; return fn(streamedWatchTx{tx, &put}) })
	return s.watch(err, put)
}

// blockedStream is a streamAdapter whose first post waits for release.
type blockedStream struct {
	*streamAdapter
	started, release chan struct{}
	once             sync.Once
}

func (b *blockedStream) Stream(ctx context.Context, d core.StreamDelivery) ([]string, error) {
	if len(d.Posted) == 0 && d.Text != "" {
		b.once.Do(func() {
			close(b.started)
			<-b.release
		})
	}
	return b.streamAdapter.Stream(ctx, d)
}

// TestStreamPostedWhileSettlingNotRecorded: a run whose answer is complete
// while its first streamed post is in flight does not record the post on the
// run (a commit for nothing): its settling hands the message to the reply's
// delivery, which edits it into the answer. A post made while the run is still
// running is recorded, so a restart can take it over.
func TestStreamPostedWhileSettlingNotRecorded(t *testing.T) {
	for _, settling := range []bool{true, false} {
		h := newHarness(t, core.Limits{})
		var sw *streamedWatch
		h.opts = func(o *core.Options) {
			sw = &streamedWatch{Store: o.Store, recorded: make(chan struct{})}
			o.Store = sw
		}
		bs := &blockedStream{streamAdapter: newStreamAdapter(h.ad), started: make(chan struct{}), release: make(chan struct{})}
		if settling {
			core.OnStreamStop(func() { close(bs.release) })
			t.Cleanup(func() { core.OnStreamStop(nil) })
		} else {
			close(bs.release)
		}
		h.agent.reply["chief_of_staff"] = func(ctx context.Context, job *core.Job) (string, error) {
			job.Env.(core.TextStreamer).StreamText("Hel")
			select {
			case <-bs.started:
			case <-ctx.Done():
				return "", ctx.Err()
			}
			if !settling {
				select { // the record follows the post's answer
				case <-sw.recorded:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return "Hello.", nil
		}
		h.start2(bs)
		h.say("hi")
		h.idle()
		core.OnStreamStop(nil)
		ds := h.ad.deliveries()
		if len(ds) != 1 || ds[0].Text != "Hello." || !slices.Equal(ds[0].Streamed, []string{"s1"}) {
			t.Fatalf("settling=%v: deliveries = %+v, want the reply editing the streamed s1", settling, ds)
		}
		if n := sw.n.Load(); settling && n != 0 {
			t.Errorf("a post that returned while the run settled was recorded on the run (%d writes)", n)
		} else if !settling && n == 0 {
			t.Errorf("a post made while the run was running was not recorded on the run")
		}
	}
}
