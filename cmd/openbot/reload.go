package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"openbot/agents"
	"openbot/config"
	"openbot/core"
)

// reloadTimeout bounds one reload: reading and checking the file, storing the new
// bots, and stopping or starting MCP servers.
const reloadTimeout = 30 * time.Second

// swapAgent is the engine's agent: the agents.Agent of the current configuration.
// A run keeps the agent it started with (its providers and limits) to its end; a
// reload swaps in a new one for the runs after it. Safe for concurrent use.
type swapAgent struct{ cur atomic.Pointer[agents.Agent] }

func newSwapAgent(a *agents.Agent) *swapAgent {
	s := &swapAgent{}
	s.cur.Store(a)
	return s
}

// Execute implements core.Agent with the current agent.
func (s *swapAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	return s.cur.Load().Execute(ctx, job)
}

// botSetter is implemented by adapters that know the team (Slack, Telegram,
// Feishu): SetBots gives them the reloaded one. Safe for concurrent use.
type botSetter interface{ SetBots(bots []core.BotProfile) }

// reloader re-reads the configuration file of a running serve or chat (SIGHUP,
// `openbot reload`, POST /admin/reload) and applies it without a restart: bots,
// their tools and approvals, limits, approvers, LLM profiles, MCP servers and
// platform accounts (accountSet). Runs in flight finish with the profile and agent
// they started with. An invalid file is refused with every problem, and the
// running configuration stays. The settings read once at start (reloadRules:
// listener, admin, metrics, store, console accounts, workspace, sandbox,
// memory, files caps...) are not applied: the report names each changed one
// "restart needed" and the log says "restart to apply". Calls are serialized.
type reloader struct {
	path      string
	lookupEnv config.LookupEnv
	// memLimit applies limits.memory_limit_bytes again (nil: the process's
	// limit is not serve's to change).
	memLimit *memoryLimit
	log      *slog.Logger
	eng      *core.Engine
	agent    *swapAgent
	reg      *agents.Registry
	mcp      *mcpSet
	mem      *agents.Memories // the bots' memory, kept across reloads
	chat     bool             // openbot chat: the terminal's person is an owner
	st       core.Store       // the ledger of the reloaded embeddings client
	// accounts are the platform accounts: added, changed and removed at a reload,
	// and given the new team (botSetter) so "@handle" of an added bot is a mention.
	accounts *accountSet

	mu   sync.Mutex
	cur  *config.Config
	last *reloadReport // the last reload's, nil before one
}

// errReloadRefused wraps the problems of a configuration a reload refused.
var errReloadRefused = errors.New("configuration refused; the running one is kept")

// maxReloadSummary bounds the activity log's line about a reload, in runes.
const maxReloadSummary = 500

// reload applies the configuration file on behalf of by and reports every
// changed key (applied or restart needed) and what it did; on a refused file the
// error lists every problem (wrapping errReloadRefused). Either way the
// activity log gets a line naming by and the report's summary or the first
// problem.
func (r *reloader) reload(ctx context.Context, by core.By) (reloadReport, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rep, err := r.apply(ctx)
	who := cmp.Or(by.Name, string(by.Actor), "an operator")
	a := core.Activity{Event: "config.reloaded", Level: "info", Actor: by.Actor, At: time.Now(),
		Summary: firstRunes("config reloaded by "+who+": "+rep.summary(), maxReloadSummary)}
	if err != nil {
		_, problems, _ := strings.Cut(err.Error(), "\n")
		a.Event, a.Level = "config.reload_refused", "warn"
		a.Summary = firstRunes("config reload by "+who+" refused, the running configuration is kept: "+strings.Join(strings.Fields(problems), " "), maxReloadSummary)
	}
	// Recorded even when the asker has gone: the reload happened.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reloadTimeout)
	defer cancel()
	if werr := r.eng.Store().Update(actx, func(tx core.Tx) error { return tx.AppendActivity(a) }); werr != nil {
		r.log.Warn("the reload is not in the activity log", "err", werr)
	}
	return rep, err
}

// apply is reload without the activity line; r.mu is held.
func (r *reloader) apply(ctx context.Context) (reloadReport, error) {
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	var problems bytes.Buffer
	cfg := loadConfig(r.path, &problems, r.lookupEnv)
	if cfg == nil {
		return reloadReport{}, r.refused(strings.TrimSpace(problems.String()))
	}
	if msg := missingKey(cfg); msg != "" {
		return reloadReport{}, r.refused(r.path + ": " + msg)
	}
	agent, err := newAgent(cfg, r.reg, r.log, r.mem)
	if err != nil {
		return reloadReport{}, r.refused(fmt.Sprintf("%s: llm: %v", r.path, err))
	}
	set := core.Settings{Bots: botProfiles(cfg), DefaultBot: cfg.DefaultBot, Limits: coreLimits(cfg.Limits),
		Approvers: actorIDs(cfg.Approvers), Owners: owners(cfg, r.chat), SelfApprove: cfg.SelfApprove, Policies: cfg.CorePolicies(), ApprovalTimeout: cfg.ApprovalTimeout,
		Cost: coreCost(cfg), AlwaysReply: alwaysReply(cfg)}
	// The new agent first: a run picked with a new profile must find its LLM profile.
	old := r.agent.cur.Swap(agent)
	if err := r.eng.Reload(ctx, set); err != nil {
		r.agent.cur.Store(old)
		return reloadReport{}, r.refused(fmt.Sprintf("%s: %v", r.path, err))
	}
	if r.mem != nil && cfg.Embeddings.On() {
		// The message index and memory ranking embed with the new llm profiles.
		if e, err := newEmbedder(cfg, agent, r.st, r.log); err != nil {
			r.log.Warn("embeddings not reloaded", "err", err)
		} else {
			r.mem.SetEmbedder(e)
		}
	}
	if r.memLimit != nil && r.cur.Limits.MemoryLimitBytes != cfg.Limits.MemoryLimitBytes {
		r.memLimit.apply(cfg.Limits)
	}
	rep := reloadReport{At: time.Now().UTC(), Changes: configChanges(r.cur, cfg)}
	mc, err := r.mcp.Apply(ctx, cfg.MCPServers)
	rep.Done = append(rep.Done, mc...)
	if err != nil {
		r.log.Warn("mcp servers not reloaded", "err", err)
	}
	ac, err := r.accounts.Apply(ctx, cfg)
	rep.Done = append(rep.Done, ac...)
	if err != nil {
		r.log.Warn("accounts not reloaded", "err", err)
	}
	if keys := rep.keys(keyRestart); len(keys) > 0 {
		r.log.Warn("settings changed that apply at the next start: restart to apply", "keys", strings.Join(keys, ", "))
	}
	r.cur = cfg
	r.last = &rep
	r.log.Info("config reloaded", "path", r.path, "applied", strings.Join(rep.keys(keyApplied), ", "), "done", strings.Join(rep.Done, "; "))
	return rep, nil
}

// reloadReport is what one reload did: every changed key with what it did
// with it (applied, or restart needed), and what it did in words (bots,
// accounts and MCP servers added, changed and removed).
type reloadReport struct {
	At      time.Time   `json:"at"`
	Changes []keyChange `json:"changes"`
	Done    []string    `json:"done"`
}

// keys names the changed keys with status.
func (rep reloadReport) keys(status string) []string {
	var out []string
	for _, c := range rep.Changes {
		if c.Status == status {
			out = append(out, c.Key)
		}
	}
	return out
}

// lines is the report in words, one line each: "KEY: applied", "KEY:
// restart needed", then what was done; "nothing changed" when nothing did.
func (rep reloadReport) lines() []string {
	var out []string
	for _, c := range rep.Changes {
		out = append(out, c.Key+": "+c.Status)
	}
	out = append(out, rep.Done...)
	if len(out) == 0 {
		out = []string{"nothing changed"}
	}
	return out
}

// summary is the report in one line, for the activity log: the keys applied,
// those that need a restart, then what was done; "nothing changed" when
// nothing did.
func (rep reloadReport) summary() string {
	var parts []string
	if keys := rep.keys(keyApplied); len(keys) > 0 {
		parts = append(parts, "applied "+strings.Join(keys, ", "))
	}
	if keys := rep.keys(keyRestart); len(keys) > 0 {
		parts = append(parts, "restart needed for "+strings.Join(keys, ", "))
	}
	parts = append(parts, rep.Done...)
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, "; ")
}

// config is the running configuration.
func (r *reloader) config() *config.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// state is the running configuration with its secrets masked and the last
// reload's report (nil before the first), for GET /api/v1/config.
func (r *reloader) state() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return struct {
		Path       string        `json:"path"`
		Config     []configEntry `json:"config"`
		LastReload *reloadReport `json:"last_reload"`
	}{r.path, configView(r.cur), r.last}
}

func (r *reloader) refused(problems string) error {
	r.log.Error("config reload refused; the running configuration is kept", "problems", problems)
	return fmt.Errorf("%w:\n%s", errReloadRefused, problems)
}

// reloadHandler is POST /admin/reload (behind web.Dashboard.Bearer), a reload
// on behalf of by: 200 with the changes, one per line, or 422 with every
// problem of a refused configuration.
func reloadHandler(r *reloader, by core.By) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		rep, err := r.reload(req.Context(), by)
		if err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "reloaded")
		for _, c := range rep.lines() {
			fmt.Fprintln(w, c)
		}
	})
}
