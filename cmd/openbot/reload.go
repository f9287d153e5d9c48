package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"slices"
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
// running configuration stays. Console accounts and the settings read once at
// start (listener, store, admin token, workspace, sandbox, fetch_allow_hosts,
// shell_network, shell_limits, schedules, retention) are not applied: the log says "restart to apply". Calls are
// serialized.
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

	mu  sync.Mutex
	cur *config.Config
}

// errReloadRefused wraps the problems of a configuration a reload refused.
var errReloadRefused = errors.New("configuration refused; the running one is kept")

// reload applies the configuration file and returns what changed, in words; on a
// refused file the error lists every problem (wrapping errReloadRefused).
func (r *reloader) reload(ctx context.Context) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, reloadTimeout)
	defer cancel()
	var problems bytes.Buffer
	cfg := loadConfig(r.path, &problems, r.lookupEnv)
	if cfg == nil {
		return nil, r.refused(strings.TrimSpace(problems.String()))
	}
	if msg := missingKey(cfg); msg != "" {
		return nil, r.refused(r.path + ": " + msg)
	}
	agent, err := newAgent(cfg, r.reg, r.log, r.mem)
	if err != nil {
		return nil, r.refused(fmt.Sprintf("%s: llm: %v", r.path, err))
	}
	set := core.Settings{Bots: botProfiles(cfg), DefaultBot: cfg.DefaultBot, Limits: coreLimits(cfg.Limits),
		Approvers: actorIDs(cfg.Approvers), Owners: owners(cfg, r.chat), SelfApprove: cfg.SelfApprove, Policies: cfg.CorePolicies(), ApprovalTimeout: cfg.ApprovalTimeout,
		Cost: coreCost(cfg), AlwaysReply: alwaysReply(cfg)}
	// The new agent first: a run picked with a new profile must find its LLM profile.
	old := r.agent.cur.Swap(agent)
	if err := r.eng.Reload(ctx, set); err != nil {
		r.agent.cur.Store(old)
		return nil, r.refused(fmt.Sprintf("%s: %v", r.path, err))
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
	changes := appliedChanges(r.cur, cfg)
	mc, err := r.mcp.Apply(ctx, cfg.MCPServers)
	changes = append(changes, mc...)
	if err != nil {
		r.log.Warn("mcp servers not reloaded", "err", err)
	}
	ac, err := r.accounts.Apply(ctx, cfg)
	changes = append(changes, ac...)
	if err != nil {
		r.log.Warn("accounts not reloaded", "err", err)
	}
	if !reflect.DeepEqual(r.cur.Console, cfg.Console) {
		r.log.Warn("console accounts changed: restart to apply")
		changes = append(changes, "console accounts changed: restart to apply")
	}
	if keys := restartKeys(r.cur, cfg); len(keys) > 0 {
		r.log.Warn("settings changed that apply at the next start: restart to apply", "keys", strings.Join(keys, ", "))
		changes = append(changes, strings.Join(keys, ", ")+" changed: restart to apply")
	}
	r.cur = cfg
	if len(changes) == 0 {
		changes = []string{"nothing changed"}
	}
	r.log.Info("config reloaded", "path", r.path, "changes", strings.Join(changes, "; "))
	return changes, nil
}

func (r *reloader) refused(problems string) error {
	r.log.Error("config reload refused; the running configuration is kept", "problems", problems)
	return fmt.Errorf("%w:\n%s", errReloadRefused, problems)
}

// appliedChanges names what the engine's Reload applied between two
// configurations: bots, limits, approvers, LLM profiles, cost (prices and
// budgets) and reply_to_unaddressed, so the reload answer and log never say
// "nothing changed" about a change that took effect.
func appliedChanges(old, cfg *config.Config) []string {
	changes := botChanges(old, cfg)
	if !reflect.DeepEqual(old.Limits, cfg.Limits) {
		changes = append(changes, "limits changed")
	}
	if !slices.Equal(old.Approvers, cfg.Approvers) || old.ApprovalTimeout != cfg.ApprovalTimeout ||
		!slices.Equal(old.Owners, cfg.Owners) || old.SelfApprove != cfg.SelfApprove || !reflect.DeepEqual(old.Policies, cfg.Policies) {
		changes = append(changes, "approvers changed")
	}
	if !reflect.DeepEqual(old.LLM, cfg.LLM) {
		changes = append(changes, "llm profiles changed")
	}
	if !reflect.DeepEqual(old.Cost, cfg.Cost) {
		changes = append(changes, "cost (prices and budgets) changed")
	}
	if !slices.Equal(alwaysReply(old), alwaysReply(cfg)) {
		changes = append(changes, "reply_to_unaddressed changed")
	}
	return changes
}

// botChanges names the bots added, removed and changed between two configurations.
func botChanges(old, cfg *config.Config) []string {
	was := map[string]config.Bot{}
	for _, b := range old.Bots {
		was[b.Handle] = b
	}
	var out []string
	for _, b := range cfg.Bots {
		o, ok := was[b.Handle]
		switch {
		case !ok:
			out = append(out, "bot "+b.Handle+" added")
		case !reflect.DeepEqual(o, b):
			out = append(out, "bot "+b.Handle+" changed")
		}
		delete(was, b.Handle)
	}
	for _, b := range old.Bots {
		if _, gone := was[b.Handle]; gone {
			out = append(out, "bot "+b.Handle+" removed")
		}
	}
	if old.DefaultBot != cfg.DefaultBot {
		out = append(out, "default_bot changed")
	}
	return out
}

// restartKeys names the other changed keys that are read only at start
// (including schedules and retention: the schedule runner and the pruner are
// built once by serve).
func restartKeys(old, cfg *config.Config) []string {
	var out []string
	add := func(key string, changed bool) {
		if changed {
			out = append(out, key)
		}
	}
	add("http", !reflect.DeepEqual(old.HTTP, cfg.HTTP))
	add("admin", old.Admin != cfg.Admin)
	add("store", old.Store != cfg.Store)
	add("workspace", old.Workspace != cfg.Workspace)
	add("sandbox", old.Sandbox != cfg.Sandbox)
	add("fetch_allow_hosts", !slices.Equal(old.FetchAllowHosts, cfg.FetchAllowHosts))
	// The schedule runner and the pruner are built once at start.
	add("schedules", !reflect.DeepEqual(old.Schedules, cfg.Schedules))
	add("triggers", !reflect.DeepEqual(old.Triggers, cfg.Triggers))
	add("notify", !reflect.DeepEqual(old.Notify, cfg.Notify))
	add("retention", !reflect.DeepEqual(old.Retention, cfg.Retention))
	net := func(c *config.Config) []string {
		var hs []string
		for _, b := range c.Bots {
			if b.ShellNetwork {
				hs = append(hs, b.Handle)
			}
		}
		slices.Sort(hs)
		return hs
	}
	add("bots[].shell_network", !slices.Equal(net(old), net(cfg)))
	lims := func(c *config.Config) map[string]config.ShellLimits {
		m := map[string]config.ShellLimits{"": c.ShellLimits}
		for _, b := range c.Bots {
			m[b.Handle] = b.ShellLimits
		}
		return m
	}
	add("shell_limits", !reflect.DeepEqual(lims(old), lims(cfg)))
	return out
}

// reloadHandler is POST /admin/reload (behind web.Dashboard.Bearer): 200 with
// the changes, one per line, or 422 with every problem of a refused
// configuration.
func reloadHandler(r *reloader) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		changes, err := r.reload(req.Context())
		if err != nil {
			w.WriteHeader(http.StatusUnprocessableEntity)
			fmt.Fprintln(w, err)
			return
		}
		fmt.Fprintln(w, "reloaded")
		for _, c := range changes {
			fmt.Fprintln(w, c)
		}
	})
}
