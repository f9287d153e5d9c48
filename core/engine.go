package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Limit defaults (seed §4.3, §5, §6): what a zero field of Limits, or a zero
// Settings.ApprovalTimeout, becomes. config reads these, so each is set here only.
const (
	DefaultMaxConcurrentRuns   = 4                // running runs, all bots
	DefaultMaxBotHops          = 20               // bot-to-bot hops before the brake
	DefaultMaxModelCallsPerRun = 40               // model calls in one run
	DefaultHistoryTokenBudget  = 24000            // estimated tokens (chars/4) of history
	DefaultHistoryMaxMessages  = 80               // messages of history
	DefaultRunTimeout          = 10 * time.Minute // wall time of one run
	DefaultApprovalTimeout     = 24 * time.Hour   // a question expires after this (DESIGN.md §5)
)

// Limits bound the runtime (seed §4.3, §5, §6). Zero values take the defaults
// above.
type Limits struct {
	MaxConcurrentRuns   int           // global cap on running runs; default 4
	MaxBotHops          int           // bot-to-bot hops before the brake; default 20
	MaxModelCallsPerRun int           // default 40; a bot's MaxModelCalls overrides it
	HistoryTokenBudget  int           // estimated at chars/4; default 24000
	HistoryMaxMessages  int           // default 80
	RunTimeout          time.Duration // wall time of one run; default 10m
	// MaxTokensPerRun caps input plus output tokens of one run; 0 is no cap. A
	// bot's MaxTokensPerRun overrides it (cost control).
	MaxTokensPerRun int
}

// WithDefaults returns l with every zero or negative field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxConcurrentRuns <= 0 {
		l.MaxConcurrentRuns = DefaultMaxConcurrentRuns
	}
	if l.MaxBotHops <= 0 {
		l.MaxBotHops = DefaultMaxBotHops
	}
	if l.MaxModelCallsPerRun <= 0 {
		l.MaxModelCallsPerRun = DefaultMaxModelCallsPerRun
	}
	if l.HistoryTokenBudget <= 0 {
		l.HistoryTokenBudget = DefaultHistoryTokenBudget
	}
	if l.HistoryMaxMessages <= 0 {
		l.HistoryMaxMessages = DefaultHistoryMaxMessages
	}
	if l.RunTimeout <= 0 {
		l.RunTimeout = DefaultRunTimeout
	}
	return l
}

// Clock is the time source, so scheduler, retry and expiry tests need not sleep.
type Clock interface {
	Now() time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// Options configures an Engine. Store, Agent and at least one bot are required.
type Options struct {
	Store Store
	Agent Agent
	Bots  []BotProfile
	// DefaultBot is the handle that answers unmentioned human messages (seed §4.1);
	// defaults to "chief_of_staff" when configured, else the first bot.
	DefaultBot string
	Limits     Limits
	Logger     *slog.Logger
	Clock      Clock // defaults to the system clock
	// ShutdownGrace is how long Run lets in-flight runs finish after its context is
	// done before cancelling them; default 10s. Delivery lanes get the same bound
	// to flush.
	ShutdownGrace time.Duration
	// Approvers may answer any bot's questions unless the bot or the tool lists its
	// own (BotProfile.Approvers, ToolApprovers); with none, only the person who
	// asked for the work may approve (DESIGN.md §5).
	Approvers []ActorID
	// Owners may change policy and approve anything, their own requests included
	// (ActorIDs, like Approvers); the dashboard's operator is one. People paired
	// or added as owners at run time are stored (core/people.go) and count too.
	Owners []ActorID
	// SelfApprove lets the person who asked for the work approve its dangerous
	// tool calls; default false: an approval needs someone else (an approver or
	// an owner), and with nobody who could, the call is refused at once.
	SelfApprove bool
	// Policies are the configured channel policies by PolicyKey (core/policy.go);
	// stored ones replace them channel by channel.
	Policies map[string]ChannelPolicy
	// ApprovalTimeout is how long a question waits before it expires (an expired
	// approval is a rejection); default 24h.
	ApprovalTimeout time.Duration
	// ExpiryInterval is how often pending questions are checked for expiry;
	// default a tenth of ApprovalTimeout, at most 30s. An answer that arrives past
	// the deadline is refused either way.
	ExpiryInterval time.Duration
	// Observer receives operational events for metrics (core/observe.go); nil ignores them.
	Observer Observer
	// AlwaysReply lists the accounts whose reply_to_unaddressed is "always":
	// in their conversations an unaddressed human message wakes the default bot
	// even when the thread has several people (core/quiet.go).
	AlwaysReply []AccountID
	// Cost prices the usage ledger and sets budgets (core/budget.go); nil
	// prices nothing and limits nothing.
	Cost *Cost
	// Reflections, when set, gets each completed run of a bot with Memory on as
	// a persisted PendingReflection (seed §9, G7; core/memory.go); nil queues none.
	Reflections Reflections
	// Files configures inbound attachments: where they are saved, size caps
	// and the download queue (core/files.go).
	Files FileLimits
	// Notify are the conversations bots' notify tool posts into (core/notify.go).
	Notify []NotifyTarget

	// Shared says other openbot processes use the same store (PostgreSQL,
	// DESIGN.md §7): running runs, outbox lanes and long-lived ingress are then
	// leased (core/lease.go), and the work of a process that died is recovered
	// once its leases lapse, by whichever process sees it first. A store only
	// one process can open (bbolt) leaves it false: every run in flight at start
	// is then recovered at once.
	Shared bool
	// ProcessID names this process in leases; default "<host>-<pid>-<random>".
	// It must differ between processes sharing a store.
	ProcessID string
	// LeaseTTL is how long a claim lasts unless renewed (renewed every third of
	// it); default DefaultLeaseTTL. Work of a dead process waits up to this long.
	LeaseTTL time.Duration
	// Hints carries wake-ups between processes (usually the store itself); nil
	// leaves only the periodic sweep (SweepInterval). Used only when Shared.
	Hints Hinter
	// SweepInterval is how often a shared engine looks for work no hint
	// announced and for lapsed claims; default 2s.
	SweepInterval time.Duration
}

// ErrStopped is returned by Ingest once the engine is shutting down or has stopped;
// adapters should not acknowledge the platform event (it will be redelivered).
var ErrStopped = errors.New("engine stopped")

// Engine is the runtime (seed §4 to §8). Create it with New, register adapters
// with AddAdapter, then call Run, which owns every goroutine the engine starts.
//
// It is made of parts, each a small type that owns its state and its methods
// (the design's vocabulary, docs/ARCHITECTURE.md "Core"); Engine wires them,
// holds what they all read (store, clock, logger, the current settings, the
// adapters, the lifecycle) and keeps the public entry points:
//
//	router     ingest and routing: messages in, posts, inbox items, outbox entries (core/ingest.go, core/route.go)
//	sched      mailboxes and the scheduler: one worker per bot, global run slots, the pick (core/scheduler.go)
//	runner     runs and steps: execute and settle, the RunEnv, streams, recovery (core/run.go)
//	questions  questions and approvals: pause, answers, expiry, approvers, outcomes (core/question.go)
//	lanes      outbound lanes: the outbox dispatcher and one entry's delivery (core/outbox.go, core/delivery.go)
//	control    steering: cancel, stop, /stop, pause (core/control.go)
//	budgets    cost control: budgets, the ledger, /usage (core/budget.go)
//	files      inbound files: the download queue (core/files.go)
//	cluster    shared mode: process id, leases, hints, the sweep (core/shared.go)
//
// Schedules are their own runner beside the engine (ScheduleRunner,
// core/schedule.go), feeding it through Ingest.
type Engine struct {
	store    Store
	log      *slog.Logger
	clock    Clock
	grace    time.Duration
	observer Observer // nil: NopObserver (Observe)
	notify   map[string]NotifyTarget

	// cur is the current settings (bots, default bot, limits, approvers, cost);
	// Reload swaps it, reloadMu orders Reload calls.
	cur      atomic.Pointer[settings]
	reloadMu sync.Mutex

	mu       sync.Mutex // guards adapters, running and stopping
	adapters map[AccountID]Adapter
	running  bool
	stopping bool
	ready    chan struct{} // closed once recovery is done and workers run
	// fatal ends Run with an error (fail); set by Run.
	fatalMu  sync.Mutex
	fatalErr error
	fatal    context.CancelFunc

	router    *router
	sched     *scheduler
	runner    *runner
	questions *questions
	lanes     *lanes
	control   *control
	budgets   *budgets
	files     *fileQueue
	cluster   *cluster
}

// New validates opts and returns an Engine. It does no I/O.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("core: Options.Store is required")
	}
	if opts.Agent == nil {
		return nil, errors.New("core: Options.Agent is required")
	}
	if len(opts.Bots) == 0 {
		return nil, errors.New("core: at least one bot is required")
	}
	set, err := newSettings(Settings{Bots: opts.Bots, DefaultBot: opts.DefaultBot, Limits: opts.Limits,
		Approvers: opts.Approvers, Owners: opts.Owners, SelfApprove: opts.SelfApprove, Policies: opts.Policies, ApprovalTimeout: opts.ApprovalTimeout, Cost: opts.Cost, AlwaysReply: opts.AlwaysReply})
	notify, nerr := notifyTargets(opts.Notify)
	if err := errors.Join(err, nerr); err != nil {
		return nil, err
	}
	e := &Engine{
		notify:   notify,
		store:    opts.Store,
		log:      opts.Logger,
		clock:    opts.Clock,
		grace:    opts.ShutdownGrace,
		observer: opts.Observer,
		adapters: map[AccountID]Adapter{},
		ready:    make(chan struct{}),
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.clock == nil {
		e.clock = systemClock{}
	}
	if e.grace <= 0 {
		e.grace = 10 * time.Second
	}
	e.cur.Store(set)
	expiry := opts.ExpiryInterval
	if expiry <= 0 {
		expiry = min(30*time.Second, max(set.approvalTimeout/10, 100*time.Millisecond))
	}
	e.router = &router{e: e}
	e.sched = newScheduler(e, set.limits.MaxConcurrentRuns)
	e.runner = &runner{e: e, agent: opts.Agent, reflections: opts.Reflections}
	e.questions = &questions{e: e, expiryEvery: expiry}
	e.lanes = newLanes(e)
	e.control = &control{e: e}
	e.budgets = &budgets{e: e}
	e.files = newFileQueue(e, opts.Files)
	e.cluster = newCluster(e, opts)
	return e, nil
}

// AddAdapter registers an account for outbound delivery, before Run or, for an
// account added by a configuration reload, while it runs; a second adapter with
// the same Account is an error.
func (e *Engine) AddAdapter(a Adapter) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.adapters[a.Account()]; dup {
		return fmt.Errorf("core: account %q registered twice", a.Account())
	}
	e.adapters[a.Account()] = a
	return nil
}

// RemoveAdapter forgets an account removed by a configuration reload and reports
// whether it was registered. Deliveries already under way finish; outbox entries
// for it that are still pending fail with "no adapter for account", and replies
// take another account of the conversation when there is one. Safe for
// concurrent use.
func (e *Engine) RemoveAdapter(id AccountID) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.adapters[id]
	delete(e.adapters, id)
	return ok
}

// Ready is closed once Run has recovered the store and started every worker.
func (e *Engine) Ready() <-chan struct{} { return e.ready }

// Store returns the engine's store, for read-only views in commands.
func (e *Engine) Store() Store { return e.store }

// Bots returns the configured bots in configuration order.
func (e *Engine) Bots() []BotProfile { return append([]BotProfile(nil), e.cfg().order...) }

// DefaultBot returns the handle of the global default bot.
func (e *Engine) DefaultBot() string { return e.cfg().defaultBot }

// bot returns the current profile of a configured bot.
func (e *Engine) bot(handle string) (BotProfile, bool) {
	b, ok := e.cfg().bots[handle]
	return b, ok
}

func (e *Engine) adapter(id AccountID) (Adapter, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.adapters[id]
	return a, ok
}

// Run recovers state left by an earlier process (seed §7, DESIGN.md §8), starts one
// worker per bot and the delivery lanes, and blocks until ctx is done. Then it stops
// intake, lets in-flight runs finish for up to ShutdownGrace before cancelling them
// (a cancelled run keeps its step checkpoint and resumes at the next start), flushes delivery for up to the same
// bound, and returns. It returns an error if recovery fails or, shared, when another
// live process holds or takes its process id (ErrProcessIDInUse); the caller closes
// the store after Run returns.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("core: Run called twice")
	}
	e.running = true
	e.mu.Unlock()
	ctx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	e.fatalMu.Lock()
	e.fatal = stopAll
	e.fatalMu.Unlock()

	if err := e.syncBots(ctx, e.cfg().order); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("core: storing bots: %w", err)
	}
	if err := e.cluster.claimProcessID(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	if err := e.runner.recover(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("core: recovery: %w", err)
	}

	// runCtx outlives ctx by the grace period so in-flight runs can finish.
	runCtx, cancelRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelRuns()
	// deliverCtx likewise lets lanes flush after the runs end.
	deliverCtx, cancelDeliver := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelDeliver()

	var wg sync.WaitGroup
	wg.Add(3)
	go func() {
		defer wg.Done()
		e.lanes.dispatch(deliverCtx)
	}()
	go func() {
		defer wg.Done()
		e.files.run(ctx)
	}()
	go func() {
		defer wg.Done()
		e.questions.expiryLoop(ctx)
	}()
	// Shared: claims renewed while runs and lanes may still be busy, so until
	// delivery is done (core/shared.go).
	e.cluster.loops(ctx, deliverCtx, &wg)

	e.sched.startWorkers(ctx, runCtx)
	e.lanes.kick()
	close(e.ready)

	<-ctx.Done()
	e.mu.Lock()
	e.stopping = true
	e.mu.Unlock()
	e.sched.stopWorkers()
	e.log.Info("engine stopping", "grace", e.grace)

	if !waitTimeout(&e.sched.running, e.grace) {
		e.log.Warn("runs still in flight after grace; cancelling them")
		cancelRuns()
		e.sched.running.Wait()
	}
	e.lanes.kick()
	flushed := e.lanes.waitIdle(e.grace)
	if !flushed {
		e.log.Warn("delivery not flushed within grace; pending entries are kept for the next start")
	}
	cancelDeliver()
	wg.Wait()
	e.lanes.wait()
	dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	e.fatalMu.Lock()
	ferr := e.fatalErr
	e.fatalMu.Unlock()
	if ferr == nil { // a process that lost its id keeps its hands off the leases
		e.lanes.dropAll(dctx) // shared: another process takes the lanes at once
		e.cluster.dropProcessID(dctx)
	}
	dcancel()
	return ferr
}

// fail stops Run, which then returns err: the engine cannot go on safely.
func (e *Engine) fail(err error) {
	e.fatalMu.Lock()
	defer e.fatalMu.Unlock()
	if e.fatalErr == nil {
		e.fatalErr = err
	}
	if e.fatal != nil {
		e.fatal()
	}
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// syncBots stores every bot as an actor and a profile.
func (e *Engine) syncBots(ctx context.Context, bots []BotProfile) error {
	now := e.clock.Now()
	return e.store.Update(ctx, func(tx Tx) error {
		for _, b := range bots {
			a, err := tx.Actor(b.ID())
			if errors.Is(err, ErrNotFound) {
				a = Actor{ID: b.ID(), Kind: ActorBot, Created: now}
			} else if err != nil {
				return err
			}
			a.Name, a.Handle = displayName(b), b.Handle
			if err := tx.PutActor(a); err != nil {
				return err
			}
			if err := tx.PutBot(b); err != nil {
				return err
			}
		}
		return nil
	})
}

func displayName(b BotProfile) string {
	if b.Name != "" {
		return b.Name
	}
	return b.Handle
}

// Threads lists threads, newest first, at most limit (0 = all).
func (e *Engine) Threads(ctx context.Context, limit int) ([]Thread, error) {
	var out []Thread
	err := e.store.View(ctx, func(tx ReadTx) error {
		var err error
		out, err = tx.Threads(limit)
		return err
	})
	return out, err
}

// WaitIdle blocks until no inbox item is queued or processing, no run is queued or
// running, and no outbox entry is pending; runs waiting for a human, and messages
// queued behind them in their parked threads, do not count, nor the mailbox of a
// paused bot.
// It first waits for Ready, then polls the store every 20ms, and returns ctx.Err()
// if ctx ends first.
func (e *Engine) WaitIdle(ctx context.Context) error {
	select {
	case <-e.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		idle, err := e.idle(ctx)
		if err != nil {
			return err
		}
		if idle {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

func (e *Engine) idle(ctx context.Context) (bool, error) {
	if e.files.busy() {
		return false, nil
	}
	idle := false
	err := e.store.View(ctx, func(tx ReadTx) error {
		for _, st := range []RunStatus{RunQueued, RunRunning} {
			rs, err := tx.RunsByStatus(st)
			if err != nil || len(rs) > 0 {
				return err
			}
		}
		ps, err := tx.ItemsByStatus(ItemProcessing)
		if err != nil || len(ps) > 0 {
			return err
		}
		ob, err := tx.PendingOutbox(0, 1)
		if err != nil || len(ob) > 0 {
			return err
		}
		if n, err := tx.CountQueued(); err != nil || n == 0 {
			idle = err == nil
			return err
		}
		// Queued message items in a thread parked for their bot wait for a person.
		waiting, err := tx.RunsByStatus(RunWaitingHuman)
		if err != nil {
			return err
		}
		parked := map[string]bool{}
		for _, r := range waiting {
			parked[fmt.Sprint(r.Bot, r.Thread)] = true
		}
		queued, err := tx.ItemsByStatus(ItemQueued)
		if err != nil {
			return err
		}
		for _, it := range queued {
			if pausedActorTx(tx, it.Actor) {
				continue // held by a pause (core/pause.go)
			}
			if it.Kind != ItemMessage || !parked[fmt.Sprint(it.Actor, it.Thread)] {
				return nil
			}
		}
		idle = true
		return nil
	})
	return idle, err
}

// activity appends one diagnostic line inside tx; failures are logged, not fatal.
func (e *Engine) activity(tx Tx, a Activity) {
	if a.Level == "" {
		a.Level = "info"
	}
	a.At = e.clock.Now()
	if err := tx.AppendActivity(a); err != nil {
		e.log.Warn("activity log", "err", err)
	}
}

// nudge follows a commit that posted: it wakes the workers of the bots the
// commit woke (woken, bot handles) and the outbox dispatcher for its entries.
func (e *Engine) nudge(woken []string) {
	for _, h := range woken {
		e.sched.wake(h)
	}
	e.lanes.kick()
}

// isStopping reports whether Run is shutting down (intake stopped).
func (e *Engine) isStopping() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopping
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(`{}`)
	}
	return b
}

// statusEventTx appends a "status" run event of run with fields (the new
// status among them) inside tx.
func statusEventTx(tx Tx, run RunID, at time.Time, fields map[string]any) error {
	_, err := tx.AppendRunEvent(RunEvent{Run: run, Type: "status", Payload: mustJSON(fields), At: at})
	return err
}
