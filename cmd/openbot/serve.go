package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/term"

	"openbot/adapters/console"
	"openbot/adapters/feishu"
	"openbot/adapters/slack"
	"openbot/adapters/telegram"
	"openbot/admin"
	"openbot/admin/web"
	"openbot/agents/tools"
	"openbot/config"
	"openbot/core"
	"openbot/internal/waitctx"
	"openbot/store/bolt"
)

// app is one `serve` or `chat` invocation.
type app struct {
	chat bool
	cfg  *config.Config
	// configPath is the config file, masked inside the shell sandbox ("" when
	// not known, as in tests that build the app directly).
	configPath string
	log        *slog.Logger
	stdin      io.Reader
	stdout     io.Writer
	stderr     io.Writer
	terminal   bool // stdin is a terminal (chat reads it interactively)
	// failures records failed runs in piped chat, which then exits non-zero.
	failures *runFailures
	// onListen, when set, is told the HTTP listener's address (tests listen on :0).
	onListen func(addr string)
	// onStore, when set, is given the store serve opened (the bench reads its
	// commit totals).
	onStore func(core.Store)
	// onEngine, when set, is given the engine serve built (tests wait for it
	// to be idle).
	onEngine func(*core.Engine)
	// onRequest, when set, sees each HTTP request as it reaches the listener's
	// handler, before routing (the bench times events from there).
	onRequest func(r *http.Request)
	// lookupEnv expands ${VAR} when the config is read again at a reload.
	lookupEnv config.LookupEnv
	// memLimit, when set, is the soft memory limit serve applies at start and at
	// every reload and puts back when it stops (memlimit.go); nil leaves the
	// process's limit alone (tests that build the app directly).
	memLimit *memoryLimit
	// peers tells the team's Telegram bot accounts from people in mentions; one
	// directory for every Telegram account, kept across reloads.
	peers     *telegram.Peers
	peersOnce sync.Once
}

// runServe is `openbot serve` and `openbot chat`.
func runServe(ctx context.Context, mode string, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags(mode, stderr)
	level := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "openbot: --log-level %q: use debug, info, warn or error\n", *level)
		return exitUsage
	}
	if mode == "chat" && !flagSet(fs, "config") {
		if _, err := os.Stat(*path); errors.Is(err, os.ErrNotExist) {
			*path = builtinConfig
			fmt.Fprintf(stderr, "openbot: no %s here, so chat runs the example team on the built-in config; `openbot config example > config.yaml` writes it out to change\n", fs.Lookup("config").DefValue)
		}
	}
	cfg := loadConfig(*path, stderr, lookupEnv)
	if cfg == nil {
		return exitFail
	}
	if msg := missingKey(cfg); msg != "" {
		fmt.Fprintln(stderr, "openbot: "+msg)
		return exitFail
	}

	a := &app{chat: mode == "chat", cfg: cfg, configPath: *path, stdin: stdin, stdout: stdout, stderr: stderr,
		lookupEnv: lookupEnv}
	if f, ok := stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		a.terminal = true
	}
	logOut := stderr
	if a.chat {
		// The conversation owns the terminal; the log goes next to the store.
		lf, err := openLogFile(cfg.Store.Path)
		if err != nil {
			fmt.Fprintf(stderr, "openbot: %v\n", err)
			return exitFail
		}
		defer lf.Close()
		logOut = lf
	}
	a.log = slog.New(newRedactHandler(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: lvl}), cfg.Secrets()))
	a.memLimit = serveMemoryLimit(lookupEnv, a.log)
	return a.serve(ctx)
}

// logFilePath is chat mode's log file: openbot.log in the directory of the
// store file.
func logFilePath(storePath string) string {
	return filepath.Join(filepath.Dir(storePath), "openbot.log")
}

// openLogFile opens (appending) logFilePath(storePath).
func openLogFile(storePath string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(storePath), 0o700); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	f, err := os.OpenFile(logFilePath(storePath), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	return f, nil
}

// fail logs err and prints it as one line for the person who started openbot.
func (a *app) fail(msg string, err error) int {
	a.log.Error(msg, "err", err)
	fmt.Fprintf(a.stderr, "openbot: %s: %v\n", msg, err)
	return exitFail
}

// serve wires store, agent, engine, adapters and the HTTP listener, runs them until
// ctx is done (or, in chat mode, the terminal input ends and the team is idle), then
// shuts down in order within shutdownBound: HTTP and adapters stop taking input, the
// engine finishes or fails in-flight runs and flushes delivery, the store closes.
func (a *app) serve(ctx context.Context) int {
	log := a.log
	if a.memLimit != nil {
		a.memLimit.apply(a.cfg.Limits)
		defer a.memLimit.restore()
	}
	st, err := openStore(ctx, a.cfg, log, 0)
	if err != nil {
		return a.fail("open store", err)
	}
	storeOpen := true
	defer func() {
		if storeOpen {
			if err := st.Close(); err != nil {
				log.Error("close store", "err", err)
			}
		}
	}()
	removePid, err := writePidFile(a.cfg.Store.Path, a.configPath)
	if err != nil {
		log.Warn("openbot reload will not find this process", "err", err)
	}
	defer removePid()
	// SIGHUP re-reads the config (reloader); registered before anything listens,
	// so an early one never kills the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	hide := ownFiles(a.configPath, a.cfg)
	reg, err := newRegistry(a.cfg, log, hide...)
	if err != nil {
		return a.fail("tools", err)
	}
	sandboxOpts := toolOptions(a.cfg, log, hide)
	if a.chat {
		a.reportSandbox(ctx, sandboxOpts) // on the terminal before the conversation starts
	}
	// A shell command the previous process left running would race the runs
	// that resume now.
	if _, err := tools.KillOrphans(ctx, shellStateDir(a.cfg), log); err != nil {
		return a.fail("shell", err)
	}
	// The console's event streams and the message index wake on every commit
	// of the engine.
	commits := admin.NewNotifier()
	mem, err := newMemory(a.cfg, st, log, commits.Wait)
	if err != nil {
		return a.fail("memory", err)
	}
	agent, err := newAgent(a.cfg, reg, log, mem)
	if err != nil {
		return a.fail("agents", err)
	}
	swap := newSwapAgent(agent)
	refl, err := newReflector(a.cfg, st, swap, mem, log)
	if err != nil {
		return a.fail("memory", err)
	}
	if a.chat && !a.terminal {
		if a.failures, err = newRunFailures(ctx, st); err != nil {
			return a.fail("store", err)
		}
	}
	mtr := newMetrics(a.cfg, log)
	if bs, ok := st.(*bolt.Store); ok && mtr != nil {
		bs.OnCommit(mtr.StoreCommit) // the disk's syncs, where every ingest waits
	}
	if a.onStore != nil {
		a.onStore(st)
	}
	files := fileLimits(a.cfg)
	if files.Transcribe, err = transcriber(a.cfg); err != nil {
		return a.fail("transcription", err)
	}
	engOpts := core.Options{
		Store:           admin.Notify(st, commits),
		Agent:           swap,
		Bots:            botProfiles(a.cfg),
		DefaultBot:      a.cfg.DefaultBot,
		Limits:          coreLimits(a.cfg.Limits),
		Logger:          log,
		ShutdownGrace:   engineGrace,
		Approvers:       actorIDs(a.cfg.Approvers),
		Owners:          owners(a.cfg, a.chat),
		SelfApprove:     a.cfg.SelfApprove,
		Policies:        a.cfg.CorePolicies(),
		ApprovalTimeout: a.cfg.ApprovalTimeout,
		Observer:        observer(mtr),
		Cost:            coreCost(a.cfg),
		AlwaysReply:     alwaysReply(a.cfg),
		Reflections:     refl,
		Files:           files,
	}
	if engOpts.Notify, err = notifyTargets(a.cfg); err != nil {
		return a.fail("notify", err)
	}
	engineShared(&engOpts, a.cfg, st)
	eng, err := core.New(engOpts)
	if err != nil {
		return a.fail("engine", err)
	}
	if a.onEngine != nil {
		a.onEngine(eng)
	}

	var pruner *core.Pruner
	if pst, ok := st.(core.Pruning); ok {
		pruner, err = newPruner(a.cfg, pst, log)
		if err != nil {
			return a.fail("retention", err)
		}
	} else {
		log.Warn("retention: this store driver does not prune; records are kept", "driver", a.cfg.Store.Driver)
	}

	sched, err := newScheduleRunner(a.cfg, eng, log)
	if err != nil {
		return a.fail("schedules", err)
	}
	hks, err := newHooks(a.cfg, eng, log)
	if err != nil {
		return a.fail("triggers", err)
	}
	hl := newHealth(eng.Ready())
	accounts, con, err := a.adapters(eng, hl)
	if err != nil {
		return a.fail("adapters", err)
	}
	var say func(string)
	if con != nil {
		say = con.Notice // chat: the log is in a file, so failures show here
	}
	mcps := newMCPSet(a.cfg, reg, log, say)
	mcps.metrics = mtr
	var platform []core.Adapter
	for _, ad := range accounts {
		if con == nil || ad != core.Adapter(con) {
			platform = append(platform, ad)
		}
	}
	accts := newAccountSet(a, eng, hl, a.cfg, platform)
	hl.dog = dogOptions{log: log, metrics: mtr, alert: accts.alert(a.cfg.Alerts), now: time.Now}
	rl := &reloader{path: a.configPath, lookupEnv: a.lookupEnv, memLimit: a.memLimit, log: log, eng: eng, agent: swap, reg: reg, mcp: mcps, mem: mem, st: st, accounts: accts, cur: a.cfg, chat: a.chat}
	if len(accounts) == 0 {
		log.Warn("no channel is configured")
		fmt.Fprintln(a.stderr, "openbot: no channel is configured: add slack, telegram or feishu accounts to the config (their setup guides are linked from README.md), or use `openbot chat`")
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", hl)
	// The web dashboard at / (admin/web); its bearer door guards every admin
	// endpoint, and its session cookie also opens /api/v1.
	dopts := web.Options{Token: a.cfg.Admin.Token, SecureCookie: a.cfg.Admin.SecureCookie, Logger: log}
	if mtr != nil {
		dopts.OnRefused = mtr.AdminRefused
	}
	dash := web.New(dopts)
	mountMetrics(mux, a.cfg, mtr, eng, dash, log)
	if bst, ok := st.(*bolt.Store); ok && mtr != nil {
		registerStoreStats(mtr.Registry(), bst, log)
	}
	// Admin endpoints: the bearer token or nothing (DESIGN.md §9).
	mux.Handle("GET /approvals", dash.Bearer(approvalsHandler(eng, a.cfg.Store.Path, log)))
	mux.Handle("POST /admin/reload", dash.Bearer(reloadHandler(rl, admin.ConsoleBy(core.ActorID(a.cfg.Admin.Identity), a.cfg.Admin.Name))))
	api, err := a.consoleAPI(eng, commits, rl, hl, accts, func(b core.BotProfile) int { return swap.cur.Load().FixedPromptTokens(b, eng.Bots()) })
	if err != nil {
		return a.fail("admin api", err)
	}
	dash.Mount(mux)
	mux.Handle("/api/v1/", dash.Guard(dash.Bearer(api), api))
	if a.cfg.Admin.Token == "" {
		log.Info("admin endpoints are off: set admin.token to serve them", "endpoints", "/ (dashboard) /approvals /admin/reload /api/v1/")
	}
	for _, ad := range accounts {
		if err := eng.AddAdapter(ad); err != nil {
			return a.fail("adapters", err)
		}
		if r, ok := ad.(ingressReadier); ok {
			hl.watch(string(ad.Account()), r)
		}
	}
	// Inbound webhooks of the triggers (POST /hooks/<name>).
	hks.Mount(mux)
	// Platform webhook routes follow the accounts a reload adds or removes.
	mux.Handle("/", accts)
	ln, err := net.Listen("tcp", a.cfg.HTTP.Listen)
	if err != nil && !a.chat {
		return a.fail("http listener", err)
	}
	if err != nil {
		// chat is usable without webhooks: say so once and go on.
		log.Warn("http listener not started", "addr", a.cfg.HTTP.Listen, "err", err)
		fmt.Fprintf(a.stderr, "openbot: no HTTP listener on %s (%v): webhooks and /healthz are off; set http.listen to another port to have them\n", a.cfg.HTTP.Listen, err)
		ln = nil
	}
	var handler http.Handler = mux
	if a.onRequest != nil {
		handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			a.onRequest(r)
			mux.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	srv.RegisterOnShutdown(api.Shutdown) // event streams end, so Shutdown need not wait for them
	if ln != nil {
		log.Info("http listening", "addr", ln.Addr().String())
		if a.cfg.Admin.Token != "" {
			log.Info("dashboard", "url", "http://"+ln.Addr().String()+"/")
		}
		if a.onListen != nil {
			a.onListen(ln.Addr().String())
		}
	}

	// Intake (HTTP and adapters) runs on gctx; the engine on its own context, which
	// is cancelled only after intake has stopped, so nothing is taken in that the
	// engine cannot store.
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	engCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	defer stopEngine()
	var intake sync.WaitGroup

	// MCP servers outlive the engine, so runs finishing during shutdown keep their tools.
	mcpCtx, stopMCP := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMCP()
	g.Go(func() error {
		if err := mcps.Run(mcpCtx); err != nil && mcpCtx.Err() == nil {
			return fmt.Errorf("mcp: %w", err)
		}
		return nil
	})
	if a.configPath != "" {
		g.Go(func() error {
			for {
				select {
				case <-gctx.Done():
					return nil
				case <-hup:
				}
				select { // reload once the engine took over its state
				case <-eng.Ready():
				case <-gctx.Done():
					return nil
				}
				if _, err := rl.reload(gctx, core.By{Name: "SIGHUP"}); err != nil && a.chat && say != nil {
					say("The configuration was not reloaded (details in openbot.log); the running one is kept.")
				}
			}
		})
	}
	if !a.chat {
		// The probe runs bwrap (tens of milliseconds); readiness does not wait for
		// it, since it only reports: the shell tool checks the sandbox on every call.
		g.Go(func() error {
			a.reportSandbox(gctx, sandboxOpts)
			return nil
		})
	}
	g.Go(func() error {
		defer stopMCP()
		if err := eng.Run(engCtx); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		if engCtx.Err() == nil {
			return errors.New("engine stopped unexpectedly")
		}
		return nil
	})
	if pruner != nil {
		g.Go(func() error { // the pruner stops with the engine, within one small transaction
			return eng.HoldLease(engCtx, core.LeaseKeyWorker("prune"), pruner.Run, nil)
		})
	}
	// Background workers that process the whole store run in one process at a
	// time when several share it (HoldLease; unshared it just runs them).
	g.Go(func() error { // reflection stops with the engine, flushing within memory.flush_timeout
		return eng.HoldLease(engCtx, core.LeaseKeyWorker("reflect"), refl.Run, nil)
	})
	if ix := mem.MessageIndex(); ix != nil {
		g.Go(func() error { // the message index stops with the engine, within one embeddings request
			return eng.HoldLease(engCtx, core.LeaseKeyWorker("index"), ix.Run, nil)
		})
	}
	if ln != nil {
		intake.Add(1)
		g.Go(func() error {
			defer intake.Done()
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http: %w", err)
			}
			return nil
		})
	}
	intake.Add(1)
	g.Go(func() error {
		defer intake.Done()
		return accts.Run(gctx)
	})
	g.Go(func() error { return hl.watchdog(gctx) }) // stops with ctx; an alert within alertTimeout
	intake.Add(1)
	g.Go(func() error { // schedules are intake: they stop before the engine does
		defer intake.Done()
		return sched.Run(gctx)
	})
	if con != nil {
		acc := string(con.Account())
		intake.Add(1)
		g.Go(func() error {
			defer intake.Done()
			select { // the terminal takes input only once recovery is done
			case <-eng.Ready():
			case <-gctx.Done():
				return nil
			}
			hl.set(acc, "started")
			log.Info("account started", "account", acc)
			return a.consoleDone(gctx, eng, con.Run(gctx), stop)
		})
	}

	<-gctx.Done()
	log.Info("shutting down", "bound", shutdownBound)
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownBound)
	defer cancel()
	stop()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("http shutdown", "err", err)
	}
	if !waitCtx(shutCtx, intake.Wait) {
		log.Error("adapters did not stop in time")
	}
	stopEngine()
	var runErr error
	if !waitCtx(shutCtx, func() { runErr = g.Wait() }) {
		log.Error("shutdown did not finish in time; exiting without closing the store", "bound", shutdownBound)
		storeOpen = false // bbolt Close would wait for the stuck transaction
		fmt.Fprintf(a.stderr, "openbot: shutdown did not finish within %s\n", shutdownBound)
		return exitFail
	}
	storeOpen = false
	if err := st.Close(); err != nil {
		return a.fail("close store", err)
	}
	if errors.Is(runErr, errRunsFailed) {
		return a.fail("chat", runErr)
	}
	if runErr != nil {
		return a.fail("stopped", runErr)
	}
	log.Info("stopped")
	return exitOK
}

// consoleDone ends chat mode once the terminal input is over: with piped input it
// first waits until no run is queued or running and every reply is delivered, and
// returns the runs that failed in the session (errRunsFailed), if any.
func (a *app) consoleDone(ctx context.Context, eng *core.Engine, runErr error, stop func()) error {
	if runErr == nil && !a.terminal && ctx.Err() == nil {
		if err := eng.WaitIdle(ctx); err != nil && ctx.Err() == nil {
			runErr = err
		}
	}
	var failed error
	if runErr == nil && a.failures != nil && ctx.Err() == nil {
		failed = a.failures.err(ctx, eng.Store()) // piped chat: a failed run fails the command
	}
	stop()
	if runErr != nil {
		return fmt.Errorf("console: %w", runErr)
	}
	return failed
}

// waitCtx runs wait in a goroutine and reports whether it returned before ctx ended.
// On timeout the goroutine is left to finish on its own; the process is exiting.
func waitCtx(ctx context.Context, wait func()) bool {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	return waitctx.Closed(ctx, done)
}

// adapters builds one adapter per configured account that can run now and records
// the others as skipped on the health check. In chat mode the first enabled console
// account (default "local") is attached to the terminal and returned as con.
func (a *app) adapters(eng *core.Engine, hl *health) ([]core.Adapter, *console.Adapter, error) {
	var out []core.Adapter
	var con *console.Adapter
	skip := func(account, why string) {
		hl.set(account, "skipped: "+why)
		a.log.Warn("account skipped", "account", account, "reason", why)
	}
	consoles := a.cfg.Console
	if a.chat && len(consoles) == 0 {
		consoles = []config.Console{{Name: config.DefaultConsole}}
	}
	for _, c := range consoles {
		acc := "console/" + c.Name
		switch {
		case !a.chat: // not a problem: serve has no terminal
			hl.set(acc, "skipped: the terminal channel runs only in `openbot chat`")
		case !c.On():
			skip(acc, "disabled")
		case con != nil:
			skip(acc, "only one console account is attached to the terminal")
		default:
			opts := console.Options{
				Name: c.Name, Engine: eng, In: a.stdin, Out: a.stdout,
				Interactive: a.terminal, Logger: a.log, Cursors: core.StoreCursors(eng.Store()),
				LogPath: logFilePath(a.cfg.Store.Path),
			}
			if !a.terminal {
				// Scripted input: each line waits until the team is done with the last,
				// so "/approve" follows the question it answers.
				opts.Settle = eng.WaitIdle
			}
			var err error
			con, err = console.New(opts)
			if err != nil {
				return nil, nil, err
			}
			hl.set(acc, "pending")
			out = append(out, con)
		}
	}
	if a.chat && con == nil {
		return nil, nil, errors.New("chat needs an enabled console account (console: [{name: local}])")
	}
	platform, err := a.platformAdapters(a.cfg, eng, hl, nil)
	if err != nil {
		return nil, nil, err
	}
	return append(out, platform...), con, nil
}

// platformAdapters builds the Slack, Telegram and Feishu accounts of cfg that can
// run now, as adapters does; with want set, only the accounts it wants (by
// account id, "telegram/chief"), for a reload.
func (a *app) platformAdapters(cfg *config.Config, eng *core.Engine, hl *health, want func(id string) bool) ([]core.Adapter, error) {
	var out []core.Adapter
	skip := func(account, why string) {
		hl.set(account, "skipped: "+why)
		a.log.Warn("account skipped", "account", account, "reason", why)
	}
	bots := botProfiles(cfg)
	for i, s := range cfg.Slack {
		acc := "slack/" + s.Name
		if want != nil && !want(acc) {
			continue
		}
		if missing := slackMissing(cfg, i, s); missing != "" {
			skip(acc, missing)
			continue
		}
		ad, err := slack.New(slack.Options{
			Name: s.Name, Bot: s.Bot, Mode: s.Mode,
			AppToken: s.AppToken, BotToken: s.BotToken, SigningSecret: s.SigningSecret,
			APIURL: s.APIURL, AllowChannels: s.AllowChannels, AllowUsers: s.AllowUsers, DMPolicy: s.DMPolicy,
			Bots: bots, Engine: eng, State: slack.StoreState(eng.Store()), Logger: a.log,
			Streaming: s.Streaming.On(true),
		})
		if err != nil {
			return nil, fmt.Errorf("slack[%d]: %w", i, err)
		}
		if s.Mode == "socket" && s.Watchdog > 0 {
			hl.pulse(acc, ad, s.Watchdog)
		}
		hl.set(acc, "pending")
		out = append(out, ad)
	}
	for i, t := range cfg.Telegram {
		acc := "telegram/" + t.Name
		if want != nil && !want(acc) {
			continue
		}
		if t.Token == "" {
			skip(acc, emptySecrets(cfg, "telegram", i, "token"))
			continue
		}
		if t.Mode == "webhook" && (t.WebhookURL == "" || t.SecretToken == "") {
			skip(acc, fmt.Sprintf("telegram[%d] in webhook mode needs webhook_url and secret_token", i))
			continue
		}
		ad, err := telegram.New(telegram.Options{
			Name: t.Name, Bot: t.Bot, Token: t.Token, Mode: t.Mode,
			WebhookURL: t.WebhookURL, SecretToken: t.SecretToken, APIEndpoint: t.APIEndpoint,
			AllowUsers: t.AllowUsers, DMPolicy: t.DMPolicy,
			Bots: bots, Peers: a.telegramPeers(), Engine: eng, Cursors: telegram.StoreCursors(eng.Store()), Logger: a.log,
			Streaming: t.Streaming.On(true), PollTimeout: t.PollTimeout,
		})
		if err != nil {
			return nil, fmt.Errorf("telegram[%d]: %w", i, err)
		}
		if t.Mode != "webhook" && t.Watchdog > 0 {
			hl.pulse(acc, ad, t.Watchdog)
		}
		hl.set(acc, "pending")
		out = append(out, ad)
	}
	for i, f := range cfg.Feishu {
		acc := "feishu/" + f.Name
		if want != nil && !want(acc) {
			continue
		}
		if f.AppID == "" || f.AppSecret == "" {
			var empty []string
			if f.AppID == "" {
				empty = append(empty, "app_id")
			}
			if f.AppSecret == "" {
				empty = append(empty, "app_secret")
			}
			skip(acc, emptySecrets(cfg, "feishu", i, empty...))
			continue
		}
		if f.Mode == "webhook" && f.VerificationToken == "" && f.EncryptKey == "" {
			skip(acc, fmt.Sprintf("feishu[%d] in webhook mode needs verification_token or encrypt_key", i))
			continue
		}
		ad, err := feishu.New(feishu.Options{
			Name: f.Name, Bot: f.Bot, AppID: f.AppID, AppSecret: f.AppSecret, Mode: f.Mode,
			VerificationToken: f.VerificationToken, EncryptKey: f.EncryptKey, BaseURL: f.BaseURL,
			AllowUsers: f.AllowUsers, DMPolicy: f.DMPolicy, Bots: bots, Engine: eng, Logger: a.log,
			Cursors: core.StoreCursors(eng.Store()), Streaming: f.Streaming.On(true),
		})
		if err != nil {
			return nil, fmt.Errorf("feishu[%d]: %w", i, err)
		}
		if f.Mode == "websocket" && f.Watchdog > 0 {
			hl.pulse(acc, ad, f.Watchdog)
		}
		hl.set(acc, "pending")
		out = append(out, ad)
	}
	return out, nil
}

// slackMissing names the empty credential that makes a Slack account unusable, or
// returns "" when it has what its mode needs (the rule: such an account is
// skipped with one log line naming the variable to set; the rest keeps running).
func slackMissing(cfg *config.Config, i int, s config.Slack) string {
	var missing []string
	if s.BotToken == "" {
		missing = append(missing, "bot_token")
	}
	if s.Mode == "socket" && s.AppToken == "" {
		missing = append(missing, "app_token")
	}
	if s.Mode == "http" && s.SigningSecret == "" {
		missing = append(missing, "signing_secret")
	}
	if len(missing) == 0 {
		return ""
	}
	return emptySecrets(cfg, "slack", i, missing...)
}

// emptySecrets says which fields of account kind[i] are empty and, when the file
// writes them as ${VAR}, which environment variables to set:
// "slack[0].bot_token is empty: set SLACK_BOT_TOKEN".
func emptySecrets(cfg *config.Config, kind string, i int, fields ...string) string {
	var parts, vars []string
	for _, f := range fields {
		parts = append(parts, fmt.Sprintf("%s[%d].%s", kind, i, f))
		vars = append(vars, cfg.EnvVars(kind, i, f)...)
	}
	msg := strings.Join(parts, " and ") + " is empty"
	if len(parts) > 1 {
		msg = strings.Join(parts, " and ") + " are empty"
	}
	if len(vars) > 0 {
		return msg + ": set " + strings.Join(vars, " and ")
	}
	return msg + " in the config"
}

// telegramPeers is the app's one Telegram peer directory, made on first use.
func (a *app) telegramPeers() *telegram.Peers {
	a.peersOnce.Do(func() { a.peers = telegram.NewPeers() })
	return a.peers
}
