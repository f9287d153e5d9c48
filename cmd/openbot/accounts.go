package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
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
	*reloadSet[*config.Config, core.Adapter]
	a   *app
	eng *core.Engine
	hl  *health

	hooks atomic.Pointer[http.ServeMux] // webhook routes of the current accounts
	live  sync.Map                      // account id: its running core.Adapter, for alerts
	// ingressSince maps the account id of a long-lived ingress this process
	// runs on an unshared store to when it started (a shared store's lease
	// says it instead), for the channels answer.
	ingressSince sync.Map
	// Owned by the constructor until Run starts, then by Run's goroutine.
	known map[string]bool // every platform account id of the current config, running or skipped
}

// account is one running platform account; its cfg is its config entry
// (config.Slack, config.Telegram, config.Feishu).
type account = member[core.Adapter]

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
	s := &accountSet{reloadSet: newReloadSet[*config.Config, core.Adapter]("account", "accounts", a.log),
		a: a, eng: eng, hl: hl, known: map[string]bool{}}
	entries := accountEntries(cfg)
	for id := range entries {
		s.known[id] = true
	}
	for _, ad := range ads {
		id := string(ad.Account())
		s.members[id] = &account{name: id, cfg: entries[id], val: ad}
	}
	s.mount()
	return s
}

// ServeHTTP routes a request to the webhook of the account it is for: 404 when
// none has the route, with a WARN line when the path is a platform's
// (/slack/, /telegram/, /feishu/), so a webhook URL naming an account that is
// not configured, or not in webhook mode, shows up in the log.
func (s *accountSet) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mux := s.hooks.Load()
	if _, pattern := mux.Handler(r); pattern == "" && webhookPath(r.URL.Path) {
		p := r.URL.Path
		if len(p) > 200 {
			p = p[:200] + "…"
		}
		s.a.log.Warn("webhook request refused: no configured account serves this path", "method", r.Method, "path", p, "remote", r.RemoteAddr)
	}
	mux.ServeHTTP(w, r)
}

// webhookPath reports whether p is under a platform's webhook prefix.
func webhookPath(p string) bool {
	for _, prefix := range []string{"/slack/", "/telegram/", "/feishu/"} {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

func (s *accountSet) mount() {
	mux := http.NewServeMux()
	for _, ac := range s.members {
		if m, ok := ac.val.(core.WebhookMounter); ok {
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
	defer s.finish()
	select { // accounts take input only once recovery is done
	case <-s.eng.Ready():
	case <-ctx.Done():
		return nil
	}
	for _, ac := range s.members {
		s.start(ctx, ac)
	}
	return s.serve(ctx, s.applyConfig)
}

func (s *accountSet) start(ctx context.Context, ac *account) {
	s.live.Store(ac.name, ac.val)
	r, ok := ac.val.(core.Runner)
	if !ok { // a webhook account: its routes are served from now on
		s.hl.set(ac.name, "started")
		s.log.Info("account started", "account", ac.name)
		return
	}
	run, leased := s.leasedRun(ac, r)
	s.reloadSet.start(ctx, ac, func(actx context.Context) {
		if leased {
			s.hl.set(ac.name, leasingState)
		} else {
			s.hl.set(ac.name, "started")
		}
		s.log.Info("account started", "account", ac.name, "ingress_lease", leased)
		err := run(actx)
		if err != nil && actx.Err() == nil {
			// One account failing for good (a revoked token) must not stop the
			// others: say so, show it on /healthz, and keep serving.
			s.log.Error("account stopped", "account", ac.name, "err", core.Redact(err.Error()))
			s.hl.set(ac.name, "failed: "+core.ForPeople(err.Error()))
			fmt.Fprintf(s.a.stderr, "openbot: %s stopped: %s; the other accounts keep running\n", ac.name, core.Redact(err.Error()))
		}
	})
}

// alert returns the watchdog's way to tell the owners: a notice posted
// through the running account al.Account into al.Conversation when that is
// configured, else a DM to each owner on an account not in avoid
// (core.Engine.TellOwners); an error when no owner was told.
func (s *accountSet) alert(al config.Alerts) func(ctx context.Context, text string, down []core.AccountID) error {
	if al.Account == "" {
		return func(ctx context.Context, text string, avoid []core.AccountID) error {
			told, err := s.eng.TellOwners(ctx, text, avoid)
			if err == nil && told == 0 {
				err = errors.New("no owner could be told in a DM on another account: with no alerts conversation configured, the owners (owners:, openbot owner add) are told in their DMs on a running account other than the silent one, and none was reached (a Telegram owner must have started that bot)")
			}
			return err
		}
	}
	return func(ctx context.Context, text string, _ []core.AccountID) error {
		v, ok := s.live.Load(al.Account)
		if !ok {
			return fmt.Errorf("alerts.account %s is not running", al.Account)
		}
		_, err := v.(core.Adapter).Deliver(ctx, core.Delivery{Conversation: core.ConversationRef(al.Conversation),
			Kind: core.KindNotice, Text: text})
		return err
	}
}

// applyConfig makes the running accounts match cfg and returns what changed.
func (s *accountSet) applyConfig(ctx context.Context, cfg *config.Config) []string {
	entries := accountEntries(cfg)
	c := s.prune(entries, accountStopBound, func(id string) {
		s.live.Delete(id)
		s.eng.RemoveAdapter(core.AccountID(id))
	})
	bots := botProfiles(cfg)
	for _, ac := range s.members { // the unchanged ones
		if bs, ok := ac.val.(botSetter); ok {
			bs.SetBots(bots)
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
	ads, err := s.a.platformAdapters(cfg, s.eng, s.hl, func(id string) bool { _, running := s.members[id]; return !running })
	if err != nil {
		s.log.Error("accounts not started", "err", err)
		c.list = append(c.list, "accounts not started: "+err.Error())
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
		ac := &account{name: id, cfg: entries[id], val: ad}
		s.members[id] = ac
		s.start(ctx, ac)
		c.started(id)
	}
	s.mount()
	sort.Strings(c.list)
	return c.list
}
