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

// llms checks each LLM profile: reachable, the model listed by /models (where
// the server has that endpoint), a one-token completion, and a request with a
// tool definition (tool calling accepted). Every model a bot uses through the
// profile is checked.
func (d *doctor) llms(ctx context.Context) {
	names := make([]string, 0, len(d.cfg.LLM))
	for n := range d.cfg.LLM {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := d.cfg.LLM[n]
		models := []string{}
		for _, b := range d.cfg.Bots {
			m := cmp.Or(b.Model, p.Model)
			if b.LLM == n && !slices.Contains(models, m) {
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

func (d *doctor) llm(ctx context.Context, name string, p config.LLMProfile, models []string) {
	label := "llm/" + name
	if !p.OpenAICompatible() {
		// Issue 33 item 6: doctor learns each provider's API.
		d.add(checkWarn, label, "not checked: doctor checks OpenAI-compatible profiles only so far (provider "+p.Provider+")",
			"send the bot a message to try the profile")
		return
	}
	if p.NeedsKey() {
		d.add(checkFail, label, "no api_key for the public OpenAI API", "set OPENAI_API_KEY, or point base_url at a local server")
		return
	}
	base := strings.TrimSuffix(p.BaseURL, "/")
	h := http.Header{}
	for k, v := range p.Headers {
		h.Set(k, v)
	}
	if p.APIKey != "" {
		h.Set("Authorization", "Bearer "+p.APIKey)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		openAIError
	}
	resp, err := d.do(ctx, http.MethodGet, base+"/models", h, nil, &list)
	if err != nil {
		d.add(checkFail, label+" reachable", "no answer from base_url: "+netReason(err), "start the model server or correct llm."+name+".base_url")
		return
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		d.add(checkFail, label+" reachable", fmt.Sprintf("the API key is refused (HTTP %d)", resp.StatusCode), "set a valid llm."+name+".api_key")
		return
	case resp.StatusCode == http.StatusOK && len(list.Data) > 0:
		d.add(checkOK, label+" reachable", fmt.Sprintf("%d models served", len(list.Data)), "")
		var ids []string
		for _, m := range list.Data {
			ids = append(ids, m.ID)
		}
		for _, m := range models {
			if slices.Contains(ids, m) {
				d.add(checkOK, label+" model "+m, "served", "")
			} else {
				d.add(checkFail, label+" model "+m, "not in the server's model list", "use one of: "+shortList(ids, 8)+" (llm."+name+".model or the bot's model)")
			}
		}
	default:
		d.add(checkOK, label+" reachable", fmt.Sprintf("answers (no model list: HTTP %d)", resp.StatusCode), "")
	}
	for _, m := range models {
		d.completion(ctx, label, name, base, h, m)
	}
}

// completion asks model for one token, then once more with a tool offered.
func (d *doctor) completion(ctx context.Context, label, profile, base string, h http.Header, model string) {
	req := map[string]any{"model": model, "max_tokens": 1,
		"messages": []map[string]string{{"role": "user", "content": "Say OK."}}}
	var ans openAIError
	resp, err := d.do(ctx, http.MethodPost, base+"/chat/completions", h, req, &ans)
	if fail := llmFailure(resp, err, ans); fail != "" {
		d.add(checkFail, label+" completion "+model, fail, "check llm."+profile+" (base_url, api_key, model) against the provider")
		return
	}
	d.add(checkOK, label+" completion "+model, "a one-token answer came back", "")
	req["max_tokens"] = 16
	req["tools"] = []map[string]any{{"type": "function", "function": map[string]any{
		"name": "doctor_ping", "description": "Answers pong.",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{}}}}}
	ans = openAIError{}
	resp, err = d.do(ctx, http.MethodPost, base+"/chat/completions", h, req, &ans)
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
