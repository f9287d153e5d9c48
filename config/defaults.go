package config

import (
	"cmp"
	"slices"
	"time"

	"openbot/core"
)

// Limit defaults (seed §4.3, §5, §6). The engine's are core's, named here so
// the config file and the engine cannot disagree; set them in core.
const (
	DefaultMaxConcurrentRuns   = core.DefaultMaxConcurrentRuns
	DefaultMaxBotHops          = core.DefaultMaxBotHops
	DefaultMaxModelCallsPerRun = core.DefaultMaxModelCallsPerRun
	DefaultHistoryTokenBudget  = core.DefaultHistoryTokenBudget
	DefaultHistoryMaxMessages  = core.DefaultHistoryMaxMessages
	DefaultRunTimeout          = core.DefaultRunTimeout
	DefaultApprovalTimeout     = core.DefaultApprovalTimeout
	DefaultMCPReadyTimeout     = 30 * time.Second
	// DefaultFixedPromptWarnTokens is limits.fixed_prompt_warn_tokens.
	DefaultFixedPromptWarnTokens = 8000
)

// DefaultApprovalTools returns a bot's approval_tools when the key is absent: a
// person approves every shell command, every schedule tool call (a recurring
// message the bot would send on its own, DESIGN.md §10 "schedules") and every
// notify call (a post into another conversation) by default (DESIGN.md §5).
func DefaultApprovalTools() []ApprovalTool {
	return []ApprovalTool{{Tool: "shell"}, {Tool: "schedule"}, {Tool: "notify"}}
}

// ApplyDefaults fills every empty field that has a default; it never overwrites a
// value that was set. Load calls it before Validate. It is idempotent.
func (c *Config) ApplyDefaults() {
	c.HTTP.Listen = cmp.Or(c.HTTP.Listen, DefaultListen)
	c.Store.Path = cmp.Or(c.Store.Path, DefaultStorePath)
	if c.Admin.Identity == "" {
		c.Admin.Identity, c.Admin.Name = DefaultOperator, cmp.Or(c.Admin.Name, "operator")
	}
	c.Store.Driver = cmp.Or(c.Store.Driver, StoreBolt)
	c.Store.LeaseTTL = cmp.Or(c.Store.LeaseTTL, DefaultLeaseTTL)
	c.Workspace = cmp.Or(c.Workspace, DefaultWorkspace)
	c.Sandbox = cmp.Or(c.Sandbox, SandboxBwrap)
	c.Files.applyDefaults()
	l := &c.Limits
	setInt(&l.MaxConcurrentRuns, DefaultMaxConcurrentRuns)
	setInt(&l.MaxBotHops, DefaultMaxBotHops)
	setInt(&l.MaxModelCallsPerRun, DefaultMaxModelCallsPerRun)
	setInt(&l.HistoryTokenBudget, DefaultHistoryTokenBudget)
	setInt(&l.HistoryMaxMessages, DefaultHistoryMaxMessages)
	setInt(&l.FixedPromptWarnTokens, DefaultFixedPromptWarnTokens)
	l.RunTimeout = cmp.Or(l.RunTimeout, DefaultRunTimeout)
	c.ApprovalTimeout = cmp.Or(c.ApprovalTimeout, DefaultApprovalTimeout)
	c.MCPReadyTimeout = cmp.Or(c.MCPReadyTimeout, DefaultMCPReadyTimeout)
	c.applyScheduleDefaults()
	c.applyTriggerDefaults()
	c.applyNotifyDefaults()
	c.Cost.Currency = cmp.Or(c.Cost.Currency, DefaultCurrency)

	for name, p := range c.LLM {
		if p.Provider == ProviderAnthropic && p.BaseURL == "" {
			p.BaseURL = AnthropicBaseURL
			c.LLM[name] = p
		}
	}
	defaultProfile := "default"
	if len(c.LLM) == 1 {
		for name := range c.LLM {
			defaultProfile = name
		}
	}
	for i := range c.Bots {
		b := &c.Bots[i]
		b.Name = cmp.Or(b.Name, b.Handle)
		if len(b.LLM) == 0 && b.LLM == nil || slices.Equal(b.LLM, Chain{""}) {
			b.LLM = Chain{defaultProfile}
		}
		if b.ApprovalTools == nil {
			b.ApprovalTools = DefaultApprovalTools()
		}
	}
	if c.DefaultBot == "" && len(c.Bots) > 0 {
		c.DefaultBot = c.Bots[0].Handle
		for _, b := range c.Bots {
			if b.Handle == DefaultBotHandle {
				c.DefaultBot = DefaultBotHandle
			}
		}
	}

	for i := range c.Console {
		if c.Console[i].Name == "" {
			c.Console[i].Name = DefaultConsole
		}
	}
	for i := range c.Slack {
		if c.Slack[i].Mode == "" {
			c.Slack[i].Mode = "socket"
		}
		c.Slack[i].DMPolicy = cmp.Or(c.Slack[i].DMPolicy, core.DMPairing)
		if c.Slack[i].Mode == "socket" {
			c.Slack[i].Watchdog = cmp.Or(c.Slack[i].Watchdog, DefaultSlackWatchdog)
		}
	}
	for i := range c.Telegram {
		t := &c.Telegram[i]
		t.Mode = cmp.Or(t.Mode, "polling")
		t.DMPolicy = cmp.Or(t.DMPolicy, core.DMPairing)
		t.PollTimeout = cmp.Or(t.PollTimeout, DefaultPollTimeout)
		if t.Mode == "polling" {
			t.Watchdog = cmp.Or(t.Watchdog, 2*t.PollTimeout)
		}
	}
	for i := range c.Feishu {
		f := &c.Feishu[i]
		f.Mode = cmp.Or(f.Mode, "websocket")
		f.DMPolicy = cmp.Or(f.DMPolicy, core.DMPairing)
		f.BaseURL = cmp.Or(f.BaseURL, FeishuBaseURL)
		if f.Mode == "websocket" {
			f.Watchdog = cmp.Or(f.Watchdog, DefaultFeishuWatchdog)
		}
	}
}

func setInt(p *int, def int) {
	if *p == 0 {
		*p = def
	}
}

// ModelFor returns the model a bot uses: its own model, else its profile's.
func (c *Config) ModelFor(b Bot) string {
	if b.Model != "" {
		return b.Model
	}
	return c.LLM[b.LLM.First()].Model
}
