package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"

	"openbot/core"
)

var (
	handleRe  = regexp.MustCompile(`^[a-z0-9_]+$`)
	nameRe    = regexp.MustCompile(`^[a-z0-9_-]+$`)
	mcpNameRe = regexp.MustCompile(`^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$`)
)

// Validate checks the configuration after ApplyDefaults and returns Errors with
// every problem found, each at its field path, or nil. Rules:
//   - store.process_id has no whitespace and at most MaxProcessIDLen
//     characters; store.lease_ttl is between MinLeaseTTL and MaxLeaseTTL;
//   - http.listen is host:port; store.path and workspace are set; sandbox is
//     "bwrap" or "none"; admin.token is empty or at least MinAdminTokenLen
//     characters, none of them whitespace;
//   - limits are positive;
//   - retention durations are not negative; dedup_keys is 0 or at least
//     MinDedupKeys;
//   - llm has at least one profile; each has a provider of openai (or none) or
//     anthropic, an http(s) base_url, an api_key when it is provider anthropic
//     on Anthropic's own API, and request_timeout and stream_idle_timeout are
//     not negative;
//   - bots: at least one; handle matches [a-z0-9_]+ and is unique; llm names a
//     profile; a model is set on the bot or its profile; max_model_calls >= 0;
//     max_parallel_threads >= 0;
//     tools and approval_tools have no empty or repeated names; approvers (of a
//     bot, of an approval_tools entry, global) are platform actor ids;
//   - bots: fetch (config/fetch.go): unlisted is read, ask or refuse, and
//     allow_domains are domain names or IP addresses;
//   - bots: max_tokens_per_run and max_tokens >= 0, temperature in [0, 2]
//     ([0, 1] on a provider anthropic profile), reasoning_effort low, medium
//     or high;
//   - cost: see validateCost; memory and embeddings: see validateMemory;
//   - default_bot names a bot;
//   - schedules: see validateSchedules;
//   - mcp_ready_timeout is positive;
//   - mcp_servers: name unique, made of letters, digits, "-" and single "_"
//     (tools are "<name>__<tool>"); exactly one of command and url; url is http(s);
//   - console, slack, telegram, feishu: name matches [a-z0-9_-]+ and is unique per
//     kind (it is part of the account id and webhook paths); bot is a handle or "*";
//     mode and dm_policy are among the allowed values; streaming is on or off;
//     URLs are http(s);
//     telegram webhook mode needs webhook_url, and secret_token is 1-256 of
//     A-Z a-z 0-9 _ -.
//
// Empty platform credentials are not errors: such an account is skipped at start.
func (c *Config) Validate() error {
	var p problems
	if _, _, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
		p.add("http.listen", "%q is not host:port", c.HTTP.Listen)
	}
	if c.Store.Path == "" {
		p.add("store.path", "must be set")
	}
	switch c.Store.Driver {
	case StoreBolt:
	case StorePostgres:
		if c.Store.DSN == "" {
			p.add("store.dsn", "must be set with driver postgres (e.g. ${DATABASE_URL})")
		}
	default:
		p.add("store.driver", "%q is not %s or %s", c.Store.Driver, StoreBolt, StorePostgres)
	}
	if id := c.Store.ProcessID; len(id) > MaxProcessIDLen || strings.IndexFunc(id, unicode.IsSpace) >= 0 {
		p.add("store.process_id", "must be at most %d characters without whitespace, got %q", MaxProcessIDLen, id)
	}
	if c.Store.LeaseTTL < MinLeaseTTL || c.Store.LeaseTTL > MaxLeaseTTL {
		p.add("store.lease_ttl", "must be between %s and %s (a dead process's work waits this long), got %s", MinLeaseTTL, MaxLeaseTTL, c.Store.LeaseTTL)
	}
	if t := c.Admin.Token; t != "" && strings.IndexFunc(t, unicode.IsSpace) >= 0 {
		p.add("admin.token", "must not contain spaces or other whitespace (or be empty to turn the admin endpoints off)")
	} else if t != "" && len(t) < MinAdminTokenLen {
		p.add("admin.token", "must be at least %d characters (or empty to turn the admin endpoints off)", MinAdminTokenLen)
	}
	if c.Admin.Identity != "" {
		checkActorID(&p, "admin.identity", c.Admin.Identity)
	}
	if c.Workspace == "" {
		p.add("workspace", "must be set")
	}
	checkEnum(&p, "sandbox", c.Sandbox, SandboxBwrap, SandboxNone)
	c.validateLimits(&p)
	c.validateRetention(&p)
	c.validateFiles(&p)
	c.validateMetrics(&p)
	c.validateLLM(&p)
	handles := c.validateBots(&p)
	if c.DefaultBot != "" && !handles[c.DefaultBot] {
		p.add("default_bot", "%q is not a configured bot", c.DefaultBot)
	}
	c.validateMCP(&p)
	c.validateChannels(&p, handles)
	c.validatePolicies(&p, handles)
	c.validateSchedules(&p, handles)
	c.validateTriggers(&p, handles)
	c.validateNotify(&p, handles)
	c.validateCost(&p, handles)
	c.validateMemory(&p)
	return p.err()
}

func (c *Config) validateLimits(p *problems) {
	l := c.Limits
	for _, f := range []struct {
		name string
		v    int
	}{
		{"max_concurrent_runs", l.MaxConcurrentRuns},
		{"max_bot_hops", l.MaxBotHops},
		{"max_model_calls_per_run", l.MaxModelCallsPerRun},
		{"history_token_budget", l.HistoryTokenBudget},
		{"history_max_messages", l.HistoryMaxMessages},
		{"fixed_prompt_warn_tokens", l.FixedPromptWarnTokens},
	} {
		if f.v <= 0 {
			p.add("limits."+f.name, "must be positive, got %d", f.v)
		}
	}
	if c.ApprovalTimeout <= 0 {
		p.add("approval_timeout", "must be positive, got %s", c.ApprovalTimeout)
	}
	checkApprovers(p, "approvers", c.Approvers)
	checkApprovers(p, "owners", c.Owners)
	if l.RunTimeout <= 0 {
		p.add("limits.run_timeout", "must be positive, got %s", l.RunTimeout)
	}
	validateMemoryLimit(p, l.MemoryLimitBytes)
	c.ShellLimits.validate(p, "shell_limits")
	for i, b := range c.Bots {
		b.ShellLimits.validate(p, fmt.Sprintf("bots[%d].shell_limits", i))
	}
}

func (c *Config) validateLLM(p *problems) {
	if len(c.LLM) == 0 {
		p.add("llm", "at least one provider profile is required")
		return
	}
	names := make([]string, 0, len(c.LLM))
	for name := range c.LLM {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		prof := c.LLM[name]
		path := "llm." + name
		if !nameRe.MatchString(name) {
			p.add(path, "profile name must match [a-z0-9_-]+")
		}
		if prof.Provider != "" {
			checkEnum(p, path+".provider", prof.Provider, ProviderOpenAI, ProviderAnthropic)
		}
		checkURL(p, path+".base_url", prof.BaseURL, true)
		validateKeys(p, path, prof)
		if prof.Provider == ProviderAnthropic && !prof.HasKey() && trimSlash(strings.TrimSuffix(trimSlash(prof.BaseURL), "/v1")) == AnthropicBaseURL {
			p.add(path+".api_key", "must be set for provider anthropic")
		}
		if prof.RequestTimeout < 0 {
			p.add(path+".request_timeout", "must not be negative, got %s", prof.RequestTimeout)
		}
		if prof.StreamIdleTimeout < 0 {
			p.add(path+".stream_idle_timeout", "must not be negative, got %s", prof.StreamIdleTimeout)
		}
		if prof.ContextWindow < 0 || (prof.ContextWindow > 0 && prof.ContextWindow < 1024) {
			p.add(path+".context_window", "must be at least 1024 tokens, or 0 for unknown, got %d", prof.ContextWindow)
		}
		if prof.HistoryShare < 0 || prof.HistoryShare > 1 {
			p.add(path+".history_share", "must be above 0 and at most 1 (0 or absent: 0.5), got %g", prof.HistoryShare)
		}
		if prof.CompactWith != "" {
			if _, ok := c.LLM[prof.CompactWith]; !ok {
				p.add(path+".compact_with", "names llm profile %q, which is not configured", prof.CompactWith)
			}
		}
	}
}

func (c *Config) validateBots(p *problems) map[string]bool {
	handles := map[string]bool{}
	if len(c.Bots) == 0 {
		p.add("bots", "at least one bot is required")
		return handles
	}
	for i, b := range c.Bots {
		path := fmt.Sprintf("bots[%d]", i)
		switch {
		case b.Handle == "":
			p.add(path+".handle", "must be set")
		case !handleRe.MatchString(b.Handle):
			p.add(path+".handle", "%q must match [a-z0-9_]+", b.Handle)
		case handles[b.Handle]:
			p.add(path+".handle", "%q is used twice", b.Handle)
		}
		if b.Handle != "" {
			handles[b.Handle] = true
		}
		prof, ok := c.LLM[b.LLM.First()]
		if len(c.LLM) > 0 { // else reported once at "llm"
			c.validateChain(p, path+".llm", b.LLM, true)
		}
		if ok && b.Model == "" && prof.Model == "" {
			p.add(path+".model", "no model: set it here or in llm.%s.model", b.LLM.First())
		}
		if b.MaxModelCalls < 0 {
			p.add(path+".max_model_calls", "must not be negative, got %d", b.MaxModelCalls)
		}
		if b.MaxParallelThreads < 0 {
			p.add(path+".max_parallel_threads", "must not be negative, got %d", b.MaxParallelThreads)
		}
		if b.MaxTokensPerRun < 0 {
			p.add(path+".max_tokens_per_run", "must not be negative, got %d", b.MaxTokensPerRun)
		}
		if b.MaxTokens < 0 {
			p.add(path+".max_tokens", "must not be negative, got %d", b.MaxTokens)
		}
		if t := b.Temperature; t != nil && (*t < 0 || *t > 2) {
			p.add(path+".temperature", "must be between 0 and 2, got %g", *t)
		} else if t != nil && *t > 1 && prof.Provider == ProviderAnthropic {
			p.add(path+".temperature", "must be between 0 and 1 for provider anthropic (llm.%s), got %g", b.LLM.First(), *t)
		}
		if b.ReasoningEffort != "" {
			checkEnum(p, path+".reasoning_effort", b.ReasoningEffort, "low", "medium", "high")
		}
		checkNames(p, path+".tools", b.Tools)
		validateApprovalTools(p, path+".approval_tools", b.ApprovalTools)
		checkApprovers(p, path+".approvers", b.Approvers)
		b.Fetch.validate(p, path+".fetch")
	}
	return handles
}

// checkApprovers wants platform actor ids: "<platform>:<id...>".
func checkApprovers(p *problems, path string, ids []string) {
	for i, id := range ids {
		checkActorID(p, fmt.Sprintf("%s[%d]", path, i), id)
	}
}

// checkActorID checks one person's actor id (an approver, admin.identity).
func checkActorID(p *problems, path, id string) {
	platform, rest, ok := strings.Cut(id, ":")
	switch {
	case !ok || rest == "" || !slices.Contains([]string{"slack", "telegram", "feishu", "console"}, platform):
		p.add(path, "%q is not an actor id like slack:T012:U345, telegram:123456, feishu:ou_abc or console:you", id)
	case strings.HasPrefix(id, "slack:") && strings.Count(id, ":") != 2:
		p.add(path, "%q: a Slack approver is slack:<team id>:<user id>", id)
	}
}

func checkNames(p *problems, path string, names []string) {
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case n == "":
			p.add(fmt.Sprintf("%s[%d]", path, i), "must not be empty")
		case seen[n]:
			p.add(fmt.Sprintf("%s[%d]", path, i), "%q is listed twice", n)
		}
		seen[n] = true
	}
}

func (c *Config) validateMCP(p *problems) {
	if c.MCPReadyTimeout <= 0 {
		p.add("mcp_ready_timeout", "must be positive, got %s", c.MCPReadyTimeout)
	}
	seen := map[string]bool{}
	for i, s := range c.MCPServers {
		path := fmt.Sprintf("mcp_servers[%d]", i)
		switch {
		case s.Name == "":
			p.add(path+".name", "must be set")
		case !mcpNameRe.MatchString(s.Name):
			p.add(path+".name", "%q must be letters, digits, \"-\" and single \"_\"", s.Name)
		case seen[s.Name]:
			p.add(path+".name", "%q is used twice", s.Name)
		}
		seen[s.Name] = true
		switch {
		case s.Command == "" && s.URL == "":
			p.add(path, "set exactly one of command and url, got neither")
		case s.Command != "" && s.URL != "":
			p.add(path, "set exactly one of command and url, got both")
		case s.URL != "":
			checkURL(p, path+".url", s.URL, true)
			if strings.Contains(s.URL+fmt.Sprint(s.Headers), "{workspace}") {
				p.add(path, "{workspace} scopes a stdio server (command) to the thread's workspace; a url server cannot be")
			}
		}
	}
}

func (c *Config) validateChannels(p *problems, handles map[string]bool) {
	names := newAccountNames(p)
	for i, a := range c.Console {
		names.check(fmt.Sprintf("console[%d].name", i), "console", a.Name)
	}
	for i, a := range c.Slack {
		path := fmt.Sprintf("slack[%d]", i)
		names.check(path+".name", "slack", a.Name)
		checkBot(p, path+".bot", a.Bot, handles)
		checkEnum(p, path+".mode", a.Mode, "socket", "http")
		checkEnum(p, path+".dm_policy", a.DMPolicy, core.DMPolicies...)
		checkURL(p, path+".api_url", a.APIURL, false)
		checkSwitch(p, path+".streaming", a.Streaming)
		if a.ReplyToUnaddressed != "" {
			checkEnum(p, path+".reply_to_unaddressed", a.ReplyToUnaddressed, ReplyAuto, ReplyAlways)
		}
		checkWatchdog(p, path+".watchdog", a.Watchdog, MinSlackWatchdog)
	}
	for i, a := range c.Telegram {
		path := fmt.Sprintf("telegram[%d]", i)
		names.check(path+".name", "telegram", a.Name)
		checkBot(p, path+".bot", a.Bot, handles)
		checkEnum(p, path+".mode", a.Mode, "polling", "webhook")
		checkEnum(p, path+".dm_policy", a.DMPolicy, core.DMPolicies...)
		if a.Mode == "webhook" && a.WebhookURL == "" {
			p.add(path+".webhook_url", "must be set when mode is webhook")
		}
		checkURL(p, path+".webhook_url", a.WebhookURL, false)
		if a.SecretToken != "" && !validSecret(a.SecretToken) {
			p.add(path+".secret_token", "must be 1-256 characters of A-Z a-z 0-9 _ -")
		}
		checkSwitch(p, path+".streaming", a.Streaming)
		if a.ReplyToUnaddressed != "" {
			checkEnum(p, path+".reply_to_unaddressed", a.ReplyToUnaddressed, ReplyAuto, ReplyAlways)
		}
		if a.PollTimeout != 0 && (a.PollTimeout < time.Second || a.PollTimeout > 50*time.Second || a.PollTimeout%time.Second != 0) {
			p.add(path+".poll_timeout", "must be whole seconds from 1s to 50s, got %s", a.PollTimeout)
		}
		if a.Watchdog < 0 || a.Watchdog != 0 && a.Watchdog < a.PollTimeout {
			p.add(path+".watchdog", "must be at least poll_timeout (%s), got %s", a.PollTimeout, a.Watchdog)
		}
	}
	if al := c.Alerts; al.Account != "" || al.Conversation != "" {
		ids := map[string]bool{}
		for _, a := range c.Slack {
			ids["slack/"+a.Name] = true
		}
		for _, a := range c.Telegram {
			ids["telegram/"+a.Name] = true
		}
		for _, a := range c.Feishu {
			ids["feishu/"+a.Name] = true
		}
		if !ids[al.Account] {
			p.add("alerts.account", "%q is not a configured slack, telegram or feishu account (\"slack/<name>\")", al.Account)
		}
		if al.Conversation == "" {
			p.add("alerts.conversation", "must be set with alerts.account")
		}
	}
	for i, a := range c.Feishu {
		path := fmt.Sprintf("feishu[%d]", i)
		names.check(path+".name", "feishu", a.Name)
		checkBot(p, path+".bot", a.Bot, handles)
		checkEnum(p, path+".mode", a.Mode, "websocket", "webhook")
		checkEnum(p, path+".dm_policy", a.DMPolicy, core.DMPolicies...)
		checkURL(p, path+".base_url", a.BaseURL, true)
		checkSwitch(p, path+".streaming", a.Streaming)
		if a.ReplyToUnaddressed != "" {
			checkEnum(p, path+".reply_to_unaddressed", a.ReplyToUnaddressed, ReplyAuto, ReplyAlways)
		}
		checkWatchdog(p, path+".watchdog", a.Watchdog, MinFeishuWatchdog)
	}
}

// checkWatchdog checks a Slack or Feishu account's watchdog: unset (0) or at
// least least.
func checkWatchdog(p *problems, path string, d, least time.Duration) {
	if d < 0 || d != 0 && d < least {
		p.add(path, "must be at least %s, got %s", least, d)
	}
}

type accountNames struct {
	p    *problems
	seen map[string]bool
}

func newAccountNames(p *problems) accountNames {
	return accountNames{p: p, seen: map[string]bool{}}
}

func (n accountNames) check(path, kind, name string) {
	switch {
	case name == "":
		n.p.add(path, "must be set")
	case !nameRe.MatchString(name):
		n.p.add(path, "%q must match [a-z0-9_-]+", name)
	case n.seen[kind+"/"+name]:
		n.p.add(path, "%q is used twice", name)
	}
	n.seen[kind+"/"+name] = true
}

func checkBot(p *problems, path, bot string, handles map[string]bool) {
	switch {
	case bot == "":
		p.add(path, "must be set to a bot handle or \"*\"")
	case bot != "*" && !handles[bot]:
		p.add(path, "%q is not a configured bot (use a handle or \"*\")", bot)
	}
}

func checkEnum(p *problems, path, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	p.add(path, "%q is not one of %q", v, allowed)
}

// checkSwitch accepts an unset switch or "on"/"off" ("true"/"false").
func checkSwitch(p *problems, path string, v Switch) {
	if v != "" {
		checkEnum(p, path, string(v), "on", "off", "true", "false")
	}
}

func checkURL(p *problems, path, raw string, required bool) {
	if raw == "" {
		if required {
			p.add(path, "must be set")
		}
		return
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		shown := raw
		if err == nil {
			shown = u.Redacted() // never echo a password
		} else if _, rest, ok := strings.Cut(raw, "@"); ok {
			shown = "...@" + rest
		}
		p.add(path, "%q is not an http(s) URL", shown)
	}
}

// validSecret reports whether s can be Telegram's webhook secret_token: 1 to 256
// of A-Z a-z 0-9 _ -.
func validSecret(s string) bool {
	const allowed = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	return len(s) >= 1 && len(s) <= 256 && strings.Trim(s, allowed) == ""
}
