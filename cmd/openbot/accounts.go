package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"openbot/config"
	"openbot/core"
)

// accountSet runs the platform accounts (Slack, Telegram, Feishu; the terminal's
// console account is the caller's) and lets a reload add, change or remove them
// without touching the others: a removed account stops taking input and leaves
// the engine, a changed one restarts with its new settings, a new one starts. It
// serves the accounts' webhook routes as an http.Handler that follows the changes.
type accountSet struct {
	a   *app
	eng *core.Engine
	hl  *health
	log *slog.Logger

	hooks atomic.Pointer[http.ServeMux] // webhook routes of the current accounts
	apply chan acctApply                // served by Run
	quit  chan struct{}                 // closed when Run returns
	once  sync.Once

	// Owned by the constructor until Run starts, then by Run's goroutine.
	accts map[string]*account
	known map[string]bool // every platform account id of the current config, running or skipped
}

// account is one running platform account.
type account struct {
	id   string
	cfg  any // its config entry (config.Slack, config.Telegram, config.Feishu)
	ad   core.Adapter
	stop context.CancelFunc
	done chan struct{} // closed when its Run returned
}

type acctApply struct {
	cfg  *config.Config
	done chan []string
}

// accountStopBound bounds waiting for a removed or changed account to stop.
const accountStopBound = 10 * time.Second

// accountEntries maps the platform account ids of cfg to their config entries.
func accountEntries(cfg *config.Config) map[string]any {
	out := map[string]any{}
	for _, s := range cfg.Slack {
		out["slack/"+s.Name] = s
	}
	for _, t := range cfg.Telegram {
		out["telegram/"+t.Name] = t
	}
	for _, f := range cfg.Feishu {
		out["feishu/"+f.Name] = f
	}
	return out
}

// newAccountSet takes the platform adapters built at start (already registered
// with the engine by the caller).
func newAccountSet(a *app, eng *core.Engine, hl *health, cfg *config.Config, ads []core.Adapter) *accountSet {
	s := &accountSet{a: a, eng: eng, hl: hl, log: a.log, apply: make(chan acctApply), quit: make(chan struct{}),
		accts: map[string]*account{}, known: map[string]bool{}}
	entries := accountEntries(cfg)
	for id := range entries {
		s.known[id] = true
	}
	for _, ad := range ads {
		id := string(ad.Account())
		s.accts[id] = &account{id: id, cfg: entries[id], ad: ad}
	}
	s.mount()
	return s
}

// ServeHTTP routes a request to the webhook of the account it is for (404 when
// none has the route).
func (s *accountSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.hooks.Load().ServeHTTP(w, r)
}

func (s *accountSet) mount() {
	mux := http.NewServeMux()
	for _, ac := range s.accts {
		if m, ok := ac.ad.(core.WebhookMounter); ok {
			m.MountHTTP(mux)
		}
	}
	s.hooks.Store(mux)
}

// Run starts the accounts once the engine is ready and keeps them running until
// ctx is done, applying the configurations Apply hands it; it returns once every
// account has stopped. An account that stops for good is logged and shown on
// /healthz; the others keep running.
func (s *accountSet) Run(ctx context.Context) error {
	defer s.once.Do(func() { close(s.quit) })
	var wg sync.WaitGroup
	defer wg.Wait()
	select { // accounts take input only once recovery is done
	case <-s.eng.Ready():
	case <-ctx.Done():
		return nil
	}
	for _, ac := range s.accts {
		s.start(ctx, &wg, ac)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case req := <-s.apply:
			req.done <- s.applyConfig(ctx, &wg, req.cfg)
		}
	}
}

func (s *accountSet) start(ctx context.Context, wg *sync.WaitGroup, ac *account) {
	r, ok := ac.ad.(core.Runner)
	if !ok {
		s.hl.set(ac.id, "started")
		return
	}
	run, leased := s.leasedRun(ac, r)
	actx, cancel := context.WithCancel(ctx)
	ac.stop, ac.done = cancel, make(chan struct{})
	wg.Add(1)
	go func() { // owned by Run: joined before it returns
		defer wg.Done()
		defer close(ac.done)
		if leased {
			s.hl.set(ac.id, leasingState)
		} else {
			s.hl.set(ac.id, "started")
		}
		s.log.Info("account started", "account", ac.id, "ingress_lease", leased)
		err := run(actx)
		if err != nil && actx.Err() == nil {
			// One account failing for good (a revoked token) must not stop the
			// others: say so, show it on /healthz, and keep serving.
			s.log.Error("account stopped", "account", ac.id, "err", core.Redact(err.Error()))
			s.hl.set(ac.id, "failed: "+core.ForPeople(err.Error()))
			fmt.Fprintf(s.a.stderr, "openbot: %s stopped: %s; the other accounts keep running\n", ac.id, core.Redact(err.Error()))
		}
	}()
}

// applyConfig makes the running accounts match cfg and returns what changed.
func (s *accountSet) applyConfig(ctx context.Context, wg *sync.WaitGroup, cfg *config.Config) []string {
	entries := accountEntries(cfg)
	bots := botProfiles(cfg)
	var changes []string
	restarted := map[string]bool{}
	for id, ac := range s.accts {
		e, keep := entries[id]
		if keep && reflect.DeepEqual(e, ac.cfg) {
			if bs, ok := ac.ad.(botSetter); ok {
				bs.SetBots(bots)
			}
			continue
		}
		if ac.stop != nil {
			ac.stop()
			select {
			case <-ac.done:
			case <-time.After(accountStopBound):
				s.log.Warn("account did not stop in time", "account", id)
			}
		}
		s.eng.RemoveAdapter(core.AccountID(id))
		delete(s.accts, id)
		if keep {
			restarted[id] = true
			changes = append(changes, "account "+id+" changed: restarted")
		} else {
			changes = append(changes, "account "+id+" removed")
		}
	}
	for id := range s.known {
		if _, ok := entries[id]; !ok {
			s.hl.remove(id)
		}
	}
	s.known = map[string]bool{}
	for id := range entries {
		s.known[id] = true
	}
	ads, err := s.a.platformAdapters(cfg, s.eng, s.hl, func(id string) bool { _, running := s.accts[id]; return !running })
	if err != nil {
		s.log.Error("accounts not started", "err", err)
		changes = append(changes, "accounts not started: "+err.Error())
	}
	for _, ad := range ads {
		id := string(ad.Account())
		if err := s.eng.AddAdapter(ad); err != nil {
			s.log.Error("account not added", "account", id, "err", err)
			continue
		}
		if r, ok := ad.(ingressReadier); ok {
			s.hl.watch(id, r)
		}
		ac := &account{id: id, cfg: entries[id], ad: ad}
		s.accts[id] = ac
		s.start(ctx, wg, ac)
		if !restarted[id] {
			changes = append(changes, "account "+id+" added")
		}
	}
	s.mount()
	sort.Strings(changes)
	return changes
}

// Apply makes the running platform accounts match cfg (see accountSet) and
// returns the changes in words. It blocks until that is done or ctx ends.
func (s *accountSet) Apply(ctx context.Context, cfg *config.Config) ([]string, error) {
	req := acctApply{cfg: cfg, done: make(chan []string, 1)}
	select {
	case s.apply <- req:
	case <-s.quit:
		return nil, errAccountsStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case ch := <-req.done:
		return ch, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("accounts: %w", ctx.Err())
	}
}

// errAccountsStopped is returned by Apply once Run has returned.
var errAccountsStopped = fmt.Errorf("accounts are shutting down")
