package core_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// scriptAgent answers runs with a per-bot function; it records every job.
type scriptAgent struct {
	mu    sync.Mutex
	jobs  []*core.Job
	reply map[string]func(ctx context.Context, job *core.Job) (string, error)
	// pause, when set and returning true, decides the whole result (questions).
	pause func(job *core.Job) (core.Result, bool)
}

func (a *scriptAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	a.mu.Lock()
	a.jobs = append(a.jobs, job)
	f := a.reply[job.Bot.Handle]
	p := a.pause
	a.mu.Unlock()
	if p != nil {
		if res, ok := p(job); ok {
			return res, nil
		}
	}
	if f == nil {
		return core.Result{Reply: "ok from " + job.Bot.Handle, Usage: core.Usage{ModelCalls: 1}}, nil
	}
	text, err := f(ctx, job)
	return core.Result{Reply: text, Usage: core.Usage{ModelCalls: 1}}, err
}

func (a *scriptAgent) jobsFor(handle string) []*core.Job {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []*core.Job
	for _, j := range a.jobs {
		if j.Bot.Handle == handle {
			out = append(out, j)
		}
	}
	return out
}

// recAdapter records deliveries; fail, when set, decides an error per try.
type recAdapter struct {
	id   core.AccountID
	bot  string
	mu   sync.Mutex
	got  []core.Delivery
	at   []time.Time
	n    int
	fail func(n int, d core.Delivery) error
}

func (r *recAdapter) Account() core.AccountID { return r.id }
func (r *recAdapter) Bot() string             { return r.bot }
func (r *recAdapter) Deliver(ctx context.Context, d core.Delivery) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.fail != nil {
		if err := r.fail(r.n, d); err != nil {
			return "", err
		}
	}
	r.got = append(r.got, d)
	r.at = append(r.at, time.Now())
	return fmt.Sprintf("p%d", r.n), nil
}

func (r *recAdapter) deliveries() []core.Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]core.Delivery(nil), r.got...)
}

// texts renders deliveries as "[handle] text" lines, "[system] ..." for notices.
func (r *recAdapter) texts() []string {
	var out []string
	for _, d := range r.deliveries() {
		who := d.Sender.Handle
		if who == "" {
			who = d.Sender.Name
		}
		out = append(out, "["+who+"] "+d.Text)
	}
	return out
}

var team = []core.BotProfile{
	{Handle: "chief_of_staff", Name: "Chief", Description: "coordinates"},
	{Handle: "engineer", Name: "Engineer", Description: "builds"},
	{Handle: "reviewer", Name: "Reviewer", Description: "reviews"},
	{Handle: "qa", Name: "QA", Description: "tests"},
}

type harness struct {
	t      *testing.T
	path   string
	store  *bolt.Store
	agent  *scriptAgent
	ad     *recAdapter
	qad    *questionAdapter // when set, registered instead of ad (it wraps ad)
	eng    *core.Engine
	cancel context.CancelFunc
	done   chan error
	seq    int
	limits core.Limits
	// opts, when set, adjusts the engine options before New.
	opts func(*core.Options)
	// keyer registers the adapter as a core.MessageKeyer ("tg:<platform id>").
	keyer bool
}

func newHarness(t *testing.T, limits core.Limits) *harness {
	t.Helper()
	h := &harness{t: t, path: filepath.Join(t.TempDir(), "openbot.db"), limits: limits,
		agent: &scriptAgent{reply: map[string]func(context.Context, *core.Job) (string, error){}},
		ad:    &recAdapter{id: "console/local", bot: "*"}}
	return h
}

// stopMidRun runs the engine with agent a, says "hello", and once started is
// closed (a's run is under way) stops the engine and reopens the store to read
// what the shutdown left.
func (h *harness) stopMidRun(a core.Agent, started <-chan struct{}) {
	h.t.Helper()
	h.opts = func(o *core.Options) { o.Agent = a }
	h.start()
	h.say("hello")
	<-started
	h.stop()
	h.reopen()
}

// reopen opens the store file again after stop, to read what the engine left;
// it is closed when the test ends.
func (h *harness) reopen() {
	h.t.Helper()
	st, err := bolt.Open(h.path, bolt.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { st.Close() })
	h.store = st
}

// start opens the store and runs the engine until the test ends or stop is called.
func (h *harness) start() { h.t.Helper(); h.start2(nil) }

// start2 is start with a given adapter registered instead of the default one.
func (h *harness) start2(custom core.Adapter) {
	h.t.Helper()
	st, err := bolt.Open(h.path, bolt.Options{})
	if err != nil {
		h.t.Fatal(err)
	}
	h.store = st
	o := core.Options{Store: storetest.RerunFromEnv(st), Agent: h.agent, Bots: team, Limits: h.limits, ShutdownGrace: 2 * time.Second}
	if h.opts != nil {
		h.opts(&o)
	}
	eng, err := core.New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	var ad core.Adapter = h.ad
	if h.qad != nil {
		ad = h.qad
	}
	if h.keyer {
		ad = keyAdapter{h.ad}
	}
	if custom != nil {
		ad = custom
	}
	if err := eng.AddAdapter(ad); err != nil {
		h.t.Fatal(err)
	}
	h.eng = eng
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	h.done = make(chan error, 1)
	go func() { h.done <- eng.Run(ctx) }()
	h.t.Cleanup(h.stop)
}

func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("engine Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Error("engine did not stop within 10s")
	}
	h.cancel = nil
	if err := h.store.Close(); err != nil {
		h.t.Errorf("close store: %v", err)
	}
}

// say ingests a human message in the console conversation "main".
func (h *harness) say(text string, mod ...func(*core.Inbound)) core.IngestResult {
	h.t.Helper()
	h.seq++
	in := core.Inbound{Account: "console/local", Platform: "console", DedupKey: fmt.Sprintf("console:%d", h.seq),
		ThreadKey: "console:main", Conversation: "main", PlatformID: fmt.Sprintf("in%d", h.seq),
		SenderID: "console:you", SenderName: "you", Text: text, StartThread: true}
	for _, f := range mod {
		f(&in)
	}
	res, err := h.eng.Ingest(context.Background(), in)
	if err != nil {
		h.t.Fatalf("ingest %q: %v", text, err)
	}
	return res
}

func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.eng.WaitIdle(ctx); err != nil {
		h.t.Fatalf("WaitIdle: %v\ndelivered so far:\n%s", err, strings.Join(h.ad.texts(), "\n"))
	}
}

// messages returns every message of a thread, oldest first.
func (h *harness) messages(id core.ThreadID) []core.Message {
	h.t.Helper()
	return storetest.Read(h.t, h.store, func(tx core.ReadTx) ([]core.Message, error) { return tx.Messages(id, 0, 0) })
}

func (h *harness) runs(status core.RunStatus) []core.Run {
	h.t.Helper()
	return storetest.Read(h.t, h.store, func(tx core.ReadTx) ([]core.Run, error) { return tx.RunsByStatus(status) })
}

func countKind(ms []core.Message, k core.MessageKind) int {
	n := 0
	for _, m := range ms {
		if m.Kind == k {
			n++
		}
	}
	return n
}
