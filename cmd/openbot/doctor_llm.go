package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"openbot/agents"
	"openbot/agents/mcp"
	"openbot/agents/tools"
	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

// llms shows each bot's fallback chain, then checks each LLM profile:
// reachable, every API key accepted, the model listed by the server's model
// list (where it has one), a one-token completion, and a request with a tool
// definition (tool calling accepted). Every model a bot's chain asks of the
// profile is checked; OpenAI-compatible and Anthropic profiles alike.
func (d *doctor) llms(ctx context.Context) {
	for _, b := range d.cfg.Bots {
		links := make([]string, 0, len(b.LLM))
		for i, n := range b.LLM {
			m := d.cfg.LLM[n].Model
			if i == 0 {
				m = cmp.Or(b.Model, m)
			}
			links = append(links, fmt.Sprintf("%s (%s, %s)", n, cmp.Or(d.cfg.LLM[n].Provider, config.ProviderOpenAI), m))
		}
		d.add(checkOK, "bot/"+b.Handle+" chain", strings.Join(links, " -> "), "")
	}
	for _, e := range d.cfg.UnpricedBudgets() { // cost.unpriced: warn; else the config did not load
		d.add(checkWarn, "cost", e.Error(), "price the model under cost.prices or limit tokens beside the cost")
	}
	names := make([]string, 0, len(d.cfg.LLM))
	for n := range d.cfg.LLM {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := d.cfg.LLM[n]
		models := []string{}
		for _, b := range d.cfg.Bots {
			i := slices.Index(b.LLM, n)
			m := p.Model
			if i == 0 {
				m = cmp.Or(b.Model, p.Model)
			}
			if i >= 0 && !slices.Contains(models, m) {
				models = append(models, m)
			}
		}
		if len(models) == 0 {
			models = append(models, p.Model)
		}
		d.llm(ctx, n, p, models)
	}
}

type openAIError struct {
	Error struct {
		Message string `json:"message"`
	} `json:"error"`
}

// llmAPI is what doctor needs of a profile's wire protocol: where its model
// list and chat endpoint are, how a key is sent, and the bodies of a
// one-token request and of one offering a tool.
type llmAPI struct {
	list, chat string
	auth       func(h http.Header, key string)
	ask        func(model string, tool bool) map[string]any
}

func doctorAPI(p config.LLMProfile) llmAPI {
	base := strings.TrimSuffix(p.BaseURL, "/")
	if !p.OpenAICompatible() {
		base = strings.TrimSuffix(base, "/v1")
		return llmAPI{list: base + "/v1/models", chat: base + "/v1/messages",
			auth: func(h http.Header, key string) {
				h.Set("Anthropic-Version", "2023-06-01")
				if key != "" {
					h.Set("X-Api-Key", key)
				}
			},
			ask: func(model string, tool bool) map[string]any {
				req := map[string]any{"model": model, "max_tokens": 1,
					"messages": []map[string]string{{"role": "user", "content": "Say OK."}}}
				if tool {
					req["max_tokens"] = 16
					req["tools"] = []map[string]any{{"name": "doctor_ping", "description": "Answers pong.",
						"input_schema": map[string]any{"type": "object", "properties": map[string]any{}}}}
				}
				return req
			}}
	}
	return llmAPI{list: base + "/models", chat: base + "/chat/completions",
		auth: func(h http.Header, key string) {
			if key != "" {
				h.Set("Authorization", "Bearer "+key)
			}
		},
		ask: func(model string, tool bool) map[string]any {
			req := map[string]any{"model": model, "max_tokens": 1,
				"messages": []map[string]string{{"role": "user", "content": "Say OK."}}}
			if tool {
				req["max_tokens"] = 16
				req["tools"] = []map[string]any{{"type": "function", "function": map[string]any{
					"name": "doctor_ping", "description": "Answers pong.",
					"parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}
			}
			return req
		}}
}

func (d *doctor) llm(ctx context.Context, name string, p config.LLMProfile, models []string) {
	label := "llm/" + name
	if p.NeedsKey() {
		d.add(checkFail, label, "no api_key for the public OpenAI API", "set OPENAI_API_KEY, or point base_url at a local server")
		return
	}
	api := doctorAPI(p)
	keys := p.Keys()
	if len(keys) == 0 {
		keys = []config.LabelledKey{{}}
	}
	var (
		h       http.Header // with the first key the server accepts
		ids     []string
		listed  bool
		listMsg string
	)
	for _, k := range keys {
		kh := http.Header{}
		for hk, v := range p.Headers {
			kh.Set(hk, v)
		}
		api.auth(kh, k.Value)
		var list struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
			openAIError
		}
		resp, err := d.do(ctx, http.MethodGet, api.list, kh, nil, &list)
		if err != nil {
			d.add(checkFail, label+" reachable", "no answer from base_url: "+netReason(err), "start the model server or correct llm."+name+".base_url")
			return
		}
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			if k.Label == "" {
				d.add(checkFail, label+" reachable", fmt.Sprintf("the API key is refused (HTTP %d)", resp.StatusCode), "set a valid llm."+name+".api_key")
				return
			}
			d.add(checkFail, label+" key "+k.Label, fmt.Sprintf("refused (HTTP %d)", resp.StatusCode), "replace llm."+name+".api_keys."+k.Label)
			continue
		}
		if k.Label != "" {
			d.add(checkOK, label+" key "+k.Label, "accepted", "")
		}
		if h != nil {
			continue
		}
		h = kh
		if resp.StatusCode == http.StatusOK && len(list.Data) > 0 {
			listed, listMsg = true, fmt.Sprintf("%d models served", len(list.Data))
			for _, m := range list.Data {
				ids = append(ids, m.ID)
			}
		} else {
			listMsg = fmt.Sprintf("answers (no model list: HTTP %d)", resp.StatusCode)
		}
	}
	if h == nil {
		return // every key refused, each reported
	}
	d.add(checkOK, label+" reachable", listMsg, "")
	d.contextWindow(name)
	if listed {
		for _, m := range models {
			if slices.Contains(ids, m) {
				d.add(checkOK, label+" model "+m, "served", "")
			} else {
				d.add(checkFail, label+" model "+m, "not in the server's model list", "use one of: "+shortList(ids, 8)+" (llm."+name+".model or the bot's model)")
			}
		}
	}
	for _, m := range models {
		d.completion(ctx, label, name, api, h, m)
	}
}

// contextWindow reports the context window requests on profile name are
// fitted to and where it came from: the profile's context_window, the
// server's model list (read as serve reads it), or unknown.
func (d *doctor) contextWindow(name string) {
	label := "llm/" + name + " context window"
	a, err := agents.New(agents.Options{Providers: map[string]agents.Provider{name: providers(d.cfg)[name]},
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		d.add(checkWarn, label, "not read: "+err.Error(), "")
		return
	}
	switch n, src := a.ContextWindow(name); src {
	case agents.WindowConfig:
		d.add(checkOK, label, fmt.Sprintf("%d tokens, from llm.%s.context_window", n, name), "")
	case agents.WindowDefault:
		d.add(checkOK, label, fmt.Sprintf("unknown (the server does not say it): history is capped at limits.history_token_budget (%d tokens), "+
			"and a request is shortened only after the server says it is too long; set llm.%s.context_window to fit every request before it is sent",
			coreLimits(d.cfg.Limits).WithDefaults().HistoryTokenBudget, name), "")
	default:
		d.add(checkOK, label, fmt.Sprintf("%d tokens, from the %s", n, src), "")
	}
}

// completion asks model for one token, then once more with a tool offered.
func (d *doctor) completion(ctx context.Context, label, profile string, api llmAPI, h http.Header, model string) {
	var ans openAIError
	resp, err := d.do(ctx, http.MethodPost, api.chat, h, api.ask(model, false), &ans)
	if fail := llmFailure(resp, err, ans); fail != "" {
		d.add(checkFail, label+" completion "+model, fail, "check llm."+profile+" (base_url, api_key, model) against the provider")
		return
	}
	d.add(checkOK, label+" completion "+model, "a one-token answer came back", "")
	ans = openAIError{}
	resp, err = d.do(ctx, http.MethodPost, api.chat, h, api.ask(model, true), &ans)
	if fail := llmFailure(resp, err, ans); fail != "" {
		d.add(checkFail, label+" tools "+model, "a request offering a tool was refused: "+fail,
			"use a model and server with function calling (vLLM: --enable-auto-tool-choice; Ollama: a model tagged tools)")
		return
	}
	d.add(checkOK, label+" tools "+model, "tool calling accepted", "")
}

func llmFailure(resp *http.Response, err error, ans openAIError) string {
	switch {
	case err != nil:
		return netReason(err)
	case resp.StatusCode != http.StatusOK:
		if ans.Error.Message != "" {
			return fmt.Sprintf("HTTP %d: %s", resp.StatusCode, ans.Error.Message)
		}
		return "HTTP " + resp.Status
	}
	return ""
}

func shortList(ids []string, n int) string {
	if len(ids) > n {
		return strings.Join(ids[:n], ", ") + ", …"
	}
	return strings.Join(ids, ", ")
}

// mcpServers starts each MCP server once and lists its tools.
// packageRunnerTimeout is the MCP start bound doctor gives a command that
// downloads its package on first use (npx, uvx...) unless --timeout is set.
const packageRunnerTimeout = 3 * time.Minute

// downloads tells whether command is a package runner that may download the
// server on its first start.
func downloads(command string) bool {
	switch filepath.Base(command) {
	case "npx", "uvx", "bunx", "pnpx":
		return true
	}
	return false
}

func (d *doctor) mcpServers(ctx context.Context) {
	listed := map[string][]agents.Tool{}
	defer func() { d.fixedPrompts(listed) }()
	for _, s := range d.cfg.MCPServers {
		bound := d.timeout
		if downloads(s.Command) && !d.timeoutSet {
			bound = max(bound, packageRunnerTimeout)
		}
		r := mcp.Probe(ctx, mcp.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env, URL: s.URL, Headers: s.Headers},
			mcp.Options{StartTimeout: bound, ShutdownGrace: 2 * time.Second})
		label := "mcp/" + s.Name
		if r.Err != nil {
			fix := "run the server's command by hand to see why, or fix mcp_servers." + s.Name
			if errors.Is(r.Err, context.DeadlineExceeded) {
				fix = "a first `npx -y` or `uvx` start downloads the package first: run doctor again with a longer --timeout (say 5m), or run the command by hand once"
			}
			d.add(checkFail, label, "does not start: "+r.Reason+" ("+r.Err.Error()+")", fix)
			continue
		}
		d.add(checkOK, label, fmt.Sprintf("started, %d tools (%s)", len(r.Tools), shortList(r.Tools, 5)), "")
		listed[s.Name] = r.Listed
	}
	for _, s := range d.cfg.MCPServers {
		d.mcpScope(s)
	}
}

// mcpScope warns about a stdio MCP server that is given the whole workspace
// root (or a directory above it) in an argument or environment value: it sees
// every thread's files, while the built-in file tools see one thread's. A
// server with {workspace} runs once per thread workspace.
func (d *doctor) mcpScope(s config.MCPServer) {
	if s.Command == "" {
		return
	}
	label := "mcp/" + s.Name + " scope"
	sc := mcp.ServerConfig{Name: s.Name, Command: s.Command, Args: s.Args, Env: s.Env}
	if sc.Scoped() {
		d.add(checkOK, label, "one process per thread workspace ("+mcp.WorkspacePlaceholder+")", "")
		return
	}
	root, err := filepath.Abs(d.cfg.Workspace)
	if err != nil {
		return
	}
	values := slices.Clone(s.Args)
	for _, v := range s.Env {
		values = append(values, v)
	}
	for _, v := range values {
		for _, c := range []string{v, v[strings.Index(v, "=")+1:]} {
			if c == "" || strings.Contains(c, "://") {
				continue
			}
			abs, err := filepath.Abs(c)
			if err != nil {
				continue
			}
			if rel, err := filepath.Rel(abs, root); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				d.add(checkWarn, label, fmt.Sprintf("it is given %s, which holds the whole workspace (%s): it sees every thread's files", c, d.cfg.Workspace),
					"put "+mcp.WorkspacePlaceholder+" in mcp_servers."+s.Name+" args in place of the workspace path: each thread then gets its own server process on its own workspace")
				return
			}
		}
	}
}

// store opens the store (it must not be in use), verifies every index, and
// reports its size and its oldest kept records.
func (d *doctor) store(ctx context.Context) {
	if d.cfg.Store.Driver == config.StorePostgres {
		_, err := viewPostgres(ctx, d.cfg, func(tx core.ReadTx) (int, error) { return tx.CountQueued() })
		if err != nil {
			d.add(checkFail, "store", "PostgreSQL: "+err.Error(), "check store.dsn and that the database is reachable")
		} else {
			d.add(checkOK, "store", "PostgreSQL reachable, schema current", "")
		}
		return
	}
	path := d.cfg.Store.Path
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(filepath.Dir(path)); d.fix && errors.Is(err, os.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				d.add(checkFail, "store", "could not create "+filepath.Dir(path)+": "+err.Error(), "create it, writable by openbot")
			} else {
				d.add(checkFixed, "store", "created "+filepath.Dir(path)+"; serve creates "+filepath.Base(path)+" in it", "")
			}
			return
		}
		d.add(checkOK, "store", path+" does not exist yet; serve creates it", "")
		return
	}
	st, err := bolt.Open(path, bolt.Options{Timeout: time.Second})
	if errors.Is(err, bolt.ErrLocked) {
		d.storeInUse = true
		d.add(checkWarn, "store", path+" is in use (openbot is running?)", "stop openbot to verify the store")
		return
	}
	if err != nil {
		d.add(checkFail, "store", "does not open: "+err.Error(), "restore the file from a backup, or move it away to start empty")
		return
	}
	defer st.Close()
	if keeper, _, err := localPeople(d.cfg, st); err == nil {
		if people, _, err := keeper.People(ctx); err == nil {
			for _, p := range people {
				if p.Role == core.RoleOwner {
					d.storedOwners++
				}
			}
		}
	}
	if err := st.Verify(ctx); err != nil {
		d.add(checkFail, "store verify", err.Error(), "stop openbot and restore the file from a backup")
	} else {
		d.add(checkOK, "store verify", "every index matches its records", "")
	}
	stats, err := st.Stats(ctx)
	if err != nil {
		d.add(checkWarn, "store size", err.Error(), "")
		return
	}
	d.add(checkOK, "store size", stats.String(), "")
}

// sandbox checks the shell sandbox when a bot has the shell tool.
func (d *doctor) sandbox(ctx context.Context) {
	switch {
	case d.cfg.Sandbox == config.SandboxNone:
		d.add(checkWarn, "sandbox", "sandbox: none: shell commands run unconfined", "install bubblewrap and remove sandbox: none")
	case !usesShell(d.cfg):
		d.add(checkOK, "sandbox", "no bot has the shell tool", "")
	default:
		report, err := tools.SandboxReport(ctx, toolOptions(d.cfg, nil, ownFiles("", d.cfg)))
		if err != nil {
			d.add(checkFail, "sandbox", err.Error(), "install bubblewrap (apt install bubblewrap) and allow unprivileged user namespaces")
			return
		}
		d.add(checkOK, "sandbox", d.cfg.Sandbox+" works", "")
		for _, g := range report {
			st := checkOK
			if !g.Holds {
				st = checkWarn
			}
			d.add(st, "sandbox: "+g.Name, g.Note, "")
		}
	}
}

// fixedPrompts reports each bot's fixed prompt: its instructions, rules and
// roster and the schemas of the tools it selects (the MCP servers' as they
// listed them), sent with every model call; above
// limits.fixed_prompt_warn_tokens it warns.
func (d *doctor) fixedPrompts(mcpTools map[string][]agents.Tool) {
	reg, err := newRegistry(d.cfg, slog.New(slog.DiscardHandler))
	if err == nil {
		for server, tools := range mcpTools {
			if err = reg.SetSource(server, tools); err != nil {
				break
			}
		}
	}
	var a *agents.Agent
	if err == nil {
		a, err = newAgent(d.cfg, reg, slog.New(slog.DiscardHandler), nil)
	}
	if err != nil {
		d.add(checkWarn, "prompt size", "not measured: "+err.Error(), "")
		return
	}
	roster := botProfiles(d.cfg)
	for _, b := range roster {
		n := a.FixedPromptTokens(b, roster)
		label := "bot/" + b.Handle + " fixed prompt"
		if limit := d.cfg.Limits.FixedPromptWarnTokens; n > limit {
			d.add(checkWarn, label, fmt.Sprintf("about %d tokens of instructions and tool schemas ride on every model call (above %d)", n, limit),
				"select fewer tools in bots[].tools (an MCP server's single tools as <server>__<tool> instead of the whole server), or shorten the instructions")
			continue
		}
		d.add(checkOK, label, fmt.Sprintf("about %d tokens of instructions and tool schemas on every model call", n), "")
	}
}
