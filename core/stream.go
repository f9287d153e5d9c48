package core

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// TextStreamer is an optional capability of the RunEnv core provides: an agent
// shows its answer while the model writes it (DESIGN.md §6 streaming replies). Both
// methods only record what to show and return at once (no I/O); a goroutine of
// the run pushes it to every binding whose account implements Streamer, at that
// platform's rate. Nothing is stored: the reply is still the one message the run
// returns. Safe for concurrent use.
type TextStreamer interface {
	// StreamText shows text, the whole answer of the current model turn so far.
	StreamText(text string)
	// StreamWorking shows a short "working: <tools>" status during a tool-call
	// round; the next StreamText replaces it.
	StreamWorking(tools ...string)
}

// streamStopHook, when set (tests only, before the engine starts), is called by
// finish once the stream's loop was told to stop.
var streamStopHook func()

// streamPassHook, when set (tests only, before the engine starts), is called
// by the stream's loop after each pass over its targets with the seq of the
// text that pass looked at: by then every target due was shown that text.
var streamPassHook func(seq uint64)

// Stream limits.
const (
	streamCallTimeout = 10 * time.Second // one Streamer.Stream call
	streamMaxFails    = 3                // consecutive failures before a conversation stops streaming
	// streamRecheck bounds one wait of the loop, so a Clock that jumps (tests)
	// is noticed.
	streamRecheck = time.Second
)

// stream pushes one run's streamed text to its conversations. Its goroutine is
// started by startStream and owned by execute, which stops it with finish before
// settling the run.
type stream struct {
	e     *Engine
	run   RunID
	mu    sync.Mutex
	text  string
	seq   uint64        // bumped whenever text changes
	since time.Time     // Clock time text was first set (zero: not yet)
	wake  chan struct{} // cap 1
	stop  chan struct{}
	done  chan struct{}
	// ready is called by loop before its first Stream call: it stores the run's
	// held first checkpoint (runEnv.storeHeld), so the run is resumable before
	// it is seen; when it fails, nothing is shown.
	ready func(context.Context) error
	// Touched only by loop until done is closed: targets, and readied (ready
	// was called).
	targets []*streamTarget
	readied bool
}

// streamTarget is one conversation a run streams into, through one account.
type streamTarget struct {
	key     laneKey
	ad      Streamer
	every   time.Duration
	replyTo string
	sender  Sender
	ids     []string  // the stream's messages so far
	saved   []string  // ids as last recorded on the run (Run.Streamed)
	shown   uint64    // seq last shown
	text    string    // text last shown
	next    time.Time // no update before this (Clock time)
	fails   int
	off     bool
}

// startStream starts streaming job's answer into every binding whose account
// would post the reply and streams (Streamer with a non-zero interval); ready is
// called once before the first Stream call (stream.ready). It returns nil, which
// ignores everything, when there is none.
//
// A conversation's first post waits until the run has been writing for one
// StreamInterval: an answer finished sooner is posted once, formatted, by its
// delivery (one platform call instead of a post and an edit, and nothing
// half-written flashes), and a run that shows nothing before its first step never
// stores its first checkpoint (CheckpointHolder).
//
// The messages an earlier process streamed this run into before it was killed
// (Run.Streamed, DESIGN.md §8) are taken over: the stream goes on in them, so
// the reply's delivery edits them into the answer, or discard removes them;
// those of a conversation the run no longer streams into are removed here.
func (rn *runner) startStream(ctx context.Context, job *Job, ready func(context.Context) error) *stream {
	spec := botReply(job, "")
	sender := Sender{Actor: job.Bot.ID(), Handle: job.Bot.Handle, Name: displayName(job.Bot)}
	s := &stream{e: rn.e, run: job.Run.ID, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), ready: ready}
	left := map[laneKey][]string{}
	for _, m := range job.Run.Streamed {
		if len(m.IDs) > 0 {
			left[laneKey{m.Account, m.Conversation}] = m.IDs
		}
	}
	for _, ba := range rn.replyAdapters(job) {
		st, ok := ba.ad.(Streamer)
		if !ok || st.StreamInterval() <= 0 {
			continue
		}
		b := ba.b
		k := laneKey{ba.acct, b.Conversation}
		ids := left[k]
		delete(left, k)
		s.targets = append(s.targets, &streamTarget{key: k, ad: st, every: st.StreamInterval(),
			replyTo: spec.replyTo[b.Conversation], sender: sender, ids: ids, saved: ids})
	}
	if len(left) > 0 {
		rn.removeStreamed(ctx, sender, left)
		s.record(ctx) // only what the targets took over stays recorded
	}
	if len(s.targets) == 0 {
		return nil
	}
	go s.loop(context.WithoutCancel(ctx))
	return s
}

// StreamText implements TextStreamer.
func (s *stream) StreamText(text string) {
	if s == nil {
		return
	}
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	s.mu.Lock()
	changed := text != s.text
	if changed {
		if s.since.IsZero() {
			s.since = s.e.clock.Now()
		}
		s.text = text
		s.seq++
	}
	s.mu.Unlock()
	if changed {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// StreamWorking implements TextStreamer.
func (s *stream) StreamWorking(tools ...string) {
	if len(tools) == 0 {
		return
	}
	s.StreamText("_working: " + strings.Join(tools, ", ") + "_")
}

// loop pushes the newest text to each target when its interval allows, until stop.
func (s *stream) loop(ctx context.Context) {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		case <-timer.C:
		}
		s.mu.Lock()
		text, seq, since := s.text, s.seq, s.since
		s.mu.Unlock()
		for _, t := range s.targets {
			if t.off || t.shown == seq || s.e.clock.Now().Before(t.due(since)) {
				continue
			}
			if !s.readied {
				s.readied = true
				if !s.whenReady(ctx) {
					return
				}
				if t.off {
					continue // nothing is shown
				}
			}
			s.push(ctx, t, text, seq)
			select {
			case <-s.stop:
				return
			default:
			}
		}
		if streamPassHook != nil {
			streamPassHook(seq)
		}
		// Come back when the first target that is behind may be updated again.
		var wait time.Duration
		now := s.e.clock.Now()
		for _, t := range s.targets {
			if t.off || t.shown == seq {
				continue
			}
			if d := min(max(t.due(since).Sub(now), time.Millisecond), streamRecheck); wait == 0 || d < wait {
				wait = d
			}
		}
		if wait > 0 {
			timer.Reset(wait)
		}
	}
}

// due is the Clock time t may next be shown: after its interval since its last
// call and, before its first post, one interval after the run's text began
// (since; startStream).
func (t *streamTarget) due(since time.Time) time.Time {
	if len(t.ids) == 0 {
		if first := since.Add(t.every); first.After(t.next) {
			return first
		}
	}
	return t.next
}

// whenReady calls ready before the stream's first Stream call, with a context
// that ends when stop is closed: ready writes to the store, and finish must not
// wait for that. When ready fails every target is turned off (nothing is shown)
// and the failure logged, unless the stream was stopped meanwhile. It reports
// whether the loop goes on: false once stop is closed.
func (s *stream) whenReady(ctx context.Context) bool {
	if s.ready != nil {
		rctx, cancel := context.WithCancel(ctx)
		over := make(chan struct{})
		go func() { // ends when ready returns
			select {
			case <-s.stop:
				cancel()
			case <-over:
			}
		}()
		err := s.ready(rctx)
		close(over)
		cancel()
		if err != nil {
			for _, t := range s.targets {
				t.off = true
			}
			if !s.stopped() {
				s.e.log.Warn("streaming stopped: the run's first checkpoint was not stored", "run", s.run, "err", Redact(err.Error()))
			}
		}
	}
	return !s.stopped()
}

// stopped reports whether stop is closed.
func (s *stream) stopped() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

// push makes one Stream call for t. It is not cancelled by the run's end: a post
// whose id were lost would leave a stray message.
func (s *stream) push(ctx context.Context, t *streamTarget, text string, seq uint64) {
	cctx, cancel := context.WithTimeout(ctx, streamCallTimeout)
	ids, err := t.ad.Stream(cctx, StreamDelivery{Conversation: t.key.conv, ReplyTo: t.replyTo, Sender: t.sender,
		Text: text, Posted: t.ids, Shown: t.text})
	cancel()
	if ids != nil || err == nil {
		t.ids = ids
	}
	if !slices.Equal(t.ids, t.saved) && !s.settling() {
		s.record(ctx)
	}
	now := s.e.clock.Now()
	t.next = now.Add(t.every)
	if err == nil {
		t.shown, t.text, t.fails = seq, text, 0
		return
	}
	t.fails++
	var de DeliveryError
	if errors.As(err, &de) {
		if de.RetryAfter() > 0 {
			t.next = now.Add(de.RetryAfter())
		}
		if de.Permanent() {
			t.off = true
		}
	}
	if t.fails >= streamMaxFails {
		t.off = true
	}
	s.e.log.Warn("streaming update failed", "account", t.key.account, "conversation", t.key.conv,
		"fails", t.fails, "stopped", t.off, "err", Redact(err.Error()))
}

// settling reports whether the run has ended and is being settled (finish was
// called): its settling then takes the stream's messages over in its own
// transaction (the reply's delivery edits them, or discard removes them), so
// recording them on the run first would be a commit for nothing. A shared store
// records them still: a run whose claim moved leaves them to the process that
// took it over, which knows them only from the record (core/shared.go).
func (s *stream) settling() bool {
	return !s.e.cluster.shared && s.stopped()
}

// finish stops the loop (after an update in flight returns) and returns, per
// (account, conversation), the messages the reply was streamed into.
func (s *stream) finish() map[laneKey][]string {
	if s == nil {
		return nil
	}
	close(s.stop)
	if streamStopHook != nil {
		streamStopHook()
	}
	<-s.done
	out := map[laneKey][]string{}
	for _, t := range s.targets {
		if len(t.ids) > 0 {
			out[t.key] = t.ids
		}
	}
	return out
}

// discard removes the streamed messages no delivery took over (the run failed,
// paused, or posted no reply), so no partial answer is left behind.
func (s *stream) discard(ctx context.Context, left map[laneKey][]string) {
	if s == nil {
		return
	}
	for _, t := range s.targets {
		ids := left[t.key]
		if len(ids) == 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), streamCallTimeout)
		if _, err := t.ad.Stream(cctx, StreamDelivery{Conversation: t.key.conv, Sender: t.sender, Posted: ids}); err != nil {
			s.e.log.Warn("removing a streamed partial reply failed", "account", t.key.account,
				"conversation", t.key.conv, "err", Redact(err.Error()))
		}
		cancel()
	}
}

// forget clears the record of the stream's messages on its run after discard
// removed them, for a run that stays running (a shutdown stopped it).
func (s *stream) forget(ctx context.Context) {
	if s == nil {
		return
	}
	saved := false
	for _, t := range s.targets {
		saved = saved || len(t.saved) > 0
		t.ids = nil
	}
	if saved {
		s.record(ctx)
	}
}

// streamedCopy is a fresh copy of streamed for one settle transaction attempt.
func streamedCopy(m map[laneKey][]string) map[laneKey][]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

// record stores the stream's messages on its run (Run.Streamed) while the run
// is running, so a process that is killed leaves their ids to the run resumed
// after it (startStream). Called by loop when a target's messages changed (a
// first post, a further part), never per edit; a failed write is logged and
// tried again at the next change.
func (s *stream) record(ctx context.Context) {
	var out []StreamedMessages
	for _, t := range s.targets {
		if len(t.ids) > 0 {
			out = append(out, StreamedMessages{Account: t.key.account, Conversation: t.key.conv, IDs: slices.Clone(t.ids)})
		}
	}
	cctx, cancel := context.WithTimeout(ctx, streamCallTimeout)
	defer cancel()
	// Batch (group commit, DESIGN.md §7): the record shares a commit with the
	// run's own writes in flight (its model call's ledger entry, event and
	// checkpoint); fn reads the run inside tx, so a re-run decides afresh.
	err := s.e.store.Batch(cctx, func(tx Tx) error {
		r, err := tx.Run(s.run)
		if err != nil || r.Status != RunRunning {
			return err // settled meanwhile: its settling took care of them
		}
		r.Streamed = out
		_, err = tx.PutRun(r)
		return err
	})
	if err != nil {
		s.e.log.Warn("recording the streamed messages of a run failed", "run", s.run, "err", Redact(err.Error()))
		return
	}
	for _, t := range s.targets {
		t.saved = t.ids
	}
}

// removeStreamed removes streamed messages through their accounts, for
// conversations a run no longer streams into.
func (rn *runner) removeStreamed(ctx context.Context, sender Sender, left map[laneKey][]string) {
	for k, ids := range left {
		ad, ok := rn.e.adapter(k.account)
		st, ok2 := ad.(Streamer)
		if !ok || !ok2 {
			continue
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), streamCallTimeout)
		if _, err := st.Stream(cctx, StreamDelivery{Conversation: k.conv, Sender: sender, Posted: ids}); err != nil {
			rn.e.log.Warn("removing a streamed partial reply failed", "account", k.account, "conversation", k.conv, "err", Redact(err.Error()))
		}
		cancel()
	}
}
