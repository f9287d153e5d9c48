// Package config turns openbot's YAML configuration into typed structs: ${VAR} and
// ${VAR:-default} expansion on the raw text, defaults, unknown keys rejected, and
// validation that reports every problem at once with its field path
// (DESIGN.md §2 "config/"). Only cmd/openbot imports this package; it maps these
// structs onto each package's own Options.
package config

import (
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole configuration file. Field order here is the order of
// config.example.yaml, which documents every key.
type Config struct {
	HTTP      HTTP      `yaml:"http"`
	Admin     Admin     `yaml:"admin"`
	Metrics   Metrics   `yaml:"metrics"`
	Store     Store     `yaml:"store"`
	Retention Retention `yaml:"retention"`
	Limits    Limits    `yaml:"limits"`
	// LLM maps a profile name to a model provider (OpenAI-compatible or Anthropic).
	LLM  map[string]LLMProfile `yaml:"llm"`
	Bots []Bot                 `yaml:"bots"`
	// DefaultBot answers unmentioned human messages (seed §4.1). Default:
	// "chief_of_staff" when configured, else the first bot.
	DefaultBot string `yaml:"default_bot"`
	// Workspace is the root of the bots' file tools. Default "./data/workspace".
	Workspace  string      `yaml:"workspace"`
	MCPServers []MCPServer `yaml:"mcp_servers"`
	// MCPReadyTimeout is how long a run waits, before it starts, for the MCP
	// servers its bot selects that are still starting; after it the run goes on
	// without their tools and the thread is told. A Go duration, default 30s.
	MCPReadyTimeout time.Duration `yaml:"mcp_ready_timeout"`
	// FetchAllowHosts are hosts ("wiki.internal") or host:port pairs that the
	// http_fetch tool may reach although they resolve to a loopback, private,
	// link-local, CGNAT or metadata address (refused by default).
	FetchAllowHosts []string `yaml:"fetch_allow_hosts"`
	// Sandbox confines the shell tool (DESIGN.md §9): SandboxBwrap (default)
	// runs each command under bubblewrap, seeing only the thread's workspace;
	// SandboxNone is the explicit opt-out, logged at WARN on start.
	Sandbox string `yaml:"sandbox"`
	// ShellLimits bound every shell command (config/shell.go); a bot's own
	// shell_limits override them key by key.
	ShellLimits ShellLimits `yaml:"shell_limits"`
	// Owners may change policy, pair people and approve anything (platform
	// actor ids as for approvers). More can be added at run time (openbot owner
	// add, or the first pairing while no owner exists); the dashboard's operator
	// (admin.identity) and the person at openbot's own terminal are owners too.
	Owners []string `yaml:"owners"`
	// Approvers may answer any bot's questions and approvals (platform actor ids:
	// "slack:<team>:<user>", "telegram:<user id>", "feishu:<open_id>",
	// "console:you"), besides the owners. An approval needs someone other than
	// the person who asked for the work unless self_approve is true; with nobody
	// who could approve, the tool call is refused with a notice.
	Approvers []string `yaml:"approvers"`
	// SelfApprove lets the person who asked for the work approve its tool calls
	// (every bot; a bot may set it for itself). Default false.
	SelfApprove bool `yaml:"self_approve"`
	// Policies are channel policies (config/policy.go): per channel of an
	// account, or the account's default. Owners can replace them at run time.
	Policies []Policy `yaml:"policies"`
	// ApprovalTimeout is how long a question waits before it expires (an expired
	// approval is a rejection); a Go duration, default 24h.
	ApprovalTimeout time.Duration `yaml:"approval_timeout"`

	Console  []Console  `yaml:"console"`
	Slack    []Slack    `yaml:"slack"`
	Telegram []Telegram `yaml:"telegram"`
	Feishu   []Feishu   `yaml:"feishu"`

	// Alerts is where an account that stays down is reported (config.Alerts).
	Alerts Alerts `yaml:"alerts"`

	// Schedules post messages into threads on a timetable (config/schedule.go).
	Schedules []Schedule `yaml:"schedules"`
	// Triggers are authenticated inbound webhooks (POST /hooks/<name>) that
	// post events into threads for a bot (config/trigger.go).
	Triggers []Trigger `yaml:"triggers"`
	// Notify are the conversations bots may post into with the notify tool.
	Notify []NotifyTarget `yaml:"notify"`

	// Cost prices model calls and sets budgets (config/cost.go).
	Cost Cost `yaml:"cost"`

	// Memory and Embeddings configure the bots' memory (config/memory.go).
	Memory     Memory     `yaml:"memory"`
	Embeddings Embeddings `yaml:"embeddings"`
	// Files caps attachments (config/files.go).
	Files Files `yaml:"files"`

	// source is the file as written, before ${VAR} expansion (see EnvVars).
	source *yaml.Node
}

// HTTP is the one shared HTTP listener (webhooks, /healthz).
type HTTP struct {
	// Listen is a host:port; default "127.0.0.1:8080" (loopback, DESIGN.md §9).
	Listen string `yaml:"listen"`
}

// Admin guards every endpoint of the HTTP listener that is neither a platform
// webhook nor /healthz (DESIGN.md §9): the approval audit and the operator
// console's API under /api/v1/ (DESIGN.md §10).
type Admin struct {
	// Token is the bearer token those endpoints require ("Authorization: Bearer
	// <token>"), compared in constant time; write it as ${OPENBOT_ADMIN_TOKEN}.
	// Empty turns those endpoints off (404). At least 16 characters when set,
	// none of them whitespace (a pasted line break or a space is a mistake).
	Token string `yaml:"token"`
	// Identity is the person the dashboard and the API act as, an actor id
	// like the approvers' ("slack:T012:U345"); default DefaultOperator. While a
	// token is set this operator is an owner: they may approve anything and
	// pair people, as the token already lets them steer everything.
	Identity string `yaml:"identity"`
	// Name is shown for the console's decisions ("Approved by <name>");
	// default "operator".
	Name string `yaml:"name"`
	// SecureCookie marks the dashboard's session cookie Secure on every
	// response, for a TLS proxy that does not send "X-Forwarded-Proto: https";
	// default false (Secure over TLS or with that header).
	SecureCookie bool `yaml:"secure_cookie"`
}

// OwnerIDs are the owners the configuration names: owners, and the dashboard's
// operator (admin.identity) while admin.token is set, since the token already
// lets them steer everything.
func (c *Config) OwnerIDs() []string {
	out := append([]string(nil), c.Owners...)
	if c.Admin.Token != "" && c.Admin.Identity != "" {
		out = append(out, c.Admin.Identity)
	}
	return out
}

// DefaultOperator is admin.identity when unset: the dashboard's operator.
const DefaultOperator = "console:operator"

// MinAdminTokenLen is the shortest admin.token accepted.
const MinAdminTokenLen = 16

// Store chooses where openbot keeps its state (DESIGN.md §7): one bbolt file (the
// default; one process) or a PostgreSQL database (several processes may share it).
type Store struct {
	// Driver is StoreBolt (default) or StorePostgres.
	Driver string `yaml:"driver"`
	// Path of the bbolt file; default "./data/openbot.db". With either driver the
	// pid file (and, for chat, the log) lives beside it.
	Path string `yaml:"path"`
	// DSN is the PostgreSQL connection string (libpq URL or key=value), required
	// with driver postgres; write it as ${DATABASE_URL} to keep the password out
	// of the file. Never logged.
	DSN string `yaml:"dsn"`
	// ProcessID names this process in the leases of a shared store (driver
	// postgres; DESIGN.md §7): at most MaxProcessIDLen characters, no
	// whitespace. Empty (the default) means "<host>-<pid>-<random>". Two
	// processes must never share one.
	ProcessID string `yaml:"process_id"`
	// LeaseTTL is how long a claim of a shared store (a run, an outbox lane, an
	// account's ingress) lasts unless renewed, which its holder does every third
	// of it: the longest a dead process's work waits for another to take it
	// over. Default DefaultLeaseTTL, between MinLeaseTTL and MaxLeaseTTL. Driver postgres only.
	LeaseTTL time.Duration `yaml:"lease_ttl"`
}

// Store drivers.
const (
	StoreBolt     = "bolt"
	StorePostgres = "postgres"
)

// Retention says how long the store keeps each kind of record (DESIGN.md §10
// "retention"); a background pruner deletes older ones in small transactions
// that never stall ingestion. Go durations; 0 or absent takes the default
// (core.Default*Retention), except IdleThreadMessages, which is off at 0.
type Retention struct {
	RunEvents time.Duration `yaml:"run_events"` // events of finished runs; default 2160h (90 days)
	Activity  time.Duration `yaml:"activity"`   // activity lines; default 720h (30 days)
	Outbox    time.Duration `yaml:"outbox"`     // delivered and failed outbox entries; default 720h
	// DedupKeys keeps platform message ids, so a redelivered message is not
	// taken twice; default 168h, at least MinDedupKeys: Slack retries an event
	// within about an hour, Feishu over about seven hours, Telegram keeps an
	// unconfirmed update for 24 hours.
	DedupKeys time.Duration `yaml:"dedup_keys"`
	// IdleThreadMessages deletes the messages of threads with no new message for
	// this long (the thread record stays); 0, the default, keeps them.
	IdleThreadMessages time.Duration `yaml:"idle_thread_messages"`
	// Interval between prune passes; default 10m.
	Interval time.Duration `yaml:"interval"`
}

// MinDedupKeys is the shortest retention.dedup_keys accepted: Telegram's 24-hour
// redelivery window, the longest of the platforms (equal to
// core.MinDedupRetention; a test in cmd/openbot keeps the two equal).
const MinDedupKeys = 24 * time.Hour

// Limits bound the runtime (seed §4.3, §5, §6). Zero or missing values take the
// defaults listed on each field.
type Limits struct {
	MaxConcurrentRuns   int `yaml:"max_concurrent_runs"`     // default 4
	MaxBotHops          int `yaml:"max_bot_hops"`            // default 20
	MaxModelCallsPerRun int `yaml:"max_model_calls_per_run"` // default 40
	HistoryTokenBudget  int `yaml:"history_token_budget"`    // default 24000, estimated at chars/4; also the cap under a large context_window
	HistoryMaxMessages  int `yaml:"history_max_messages"`    // default 80
	// RunTimeout is the wall time of one run, a Go duration string ("10m"); default 10m.
	RunTimeout time.Duration `yaml:"run_timeout"`
	// MaxTokensPerRun caps input plus output tokens of one run (cost control);
	// 0, the default, sets no cap. A bot's max_tokens_per_run overrides it.
	MaxTokensPerRun int `yaml:"max_tokens_per_run"`
	// MemoryLimitBytes is serve's optional soft memory limit, in bytes, for the
	// Go runtime (heap, stacks and its bookkeeping; runtime/debug.SetMemoryLimit):
	// near it the garbage collector runs more often instead of letting the heap
	// double. Unset (0) by default: no limit; otherwise at least
	// MinMemoryLimitBytes (config/memlimit.go). GOMEMLIMIT in the environment
	// takes precedence over it.
	MemoryLimitBytes int64 `yaml:"memory_limit_bytes"`
	// FixedPromptWarnTokens: doctor and the dashboard warn about a bot whose
	// fixed prompt (instructions and tool schemas, MCP tools included), sent
	// with every model call, is larger than this many tokens; default 8000.
	FixedPromptWarnTokens int `yaml:"fixed_prompt_warn_tokens"`
}

// LLMProfile is one model provider: an OpenAI-compatible server (OpenAI, Azure,
// OpenRouter, vLLM, llama.cpp, LM Studio, Ollama, Gemini's OpenAI endpoint) or
// Anthropic's Messages API.
type LLMProfile struct {
	// Provider is the API the profile speaks: ProviderOpenAI (the default when
	// absent) or ProviderAnthropic.
	Provider string `yaml:"provider"`
	// BaseURL of the API, e.g. "https://api.openai.com/v1" or
	// "http://localhost:11434/v1" for Ollama. Required for provider openai;
	// provider anthropic defaults to AnthropicBaseURL.
	BaseURL string `yaml:"base_url"`
	// APIKey may be empty for servers that need none (Ollama); provider
	// anthropic needs one unless base_url points elsewhere (a proxy). Never
	// logged.
	APIKey string `yaml:"api_key"`
	// APIKeys, instead of api_key, are several keys by label
	// ({team_a: ${KEY_A}, team_b: ${KEY_B}}): calls rotate among them, and a
	// key the server refuses (401, 403) or rate-limits (429) is set aside for
	// a while and logged by its label. Never logged.
	APIKeys map[string]string `yaml:"api_keys"`
	// Model is the default model of bots using this profile.
	Model string `yaml:"model"`
	// Headers are extra HTTP headers sent with every request.
	Headers map[string]string `yaml:"headers"`
	// RequestTimeout bounds one model call, the whole streamed answer included;
	// a Go duration, 0 or absent for the default (5m, agents.DefaultRequestTimeout).
	RequestTimeout time.Duration `yaml:"request_timeout"`
	// StreamIdleTimeout aborts a model request that receives no bytes for this
	// long, before the response starts or mid-stream; it is retried, then the
	// thread gets a notice that the model stopped responding. 0 or absent for the
	// default (30s, agents.DefaultIdleTimeout).
	StreamIdleTimeout time.Duration `yaml:"stream_idle_timeout"`
	// Vision: the model reads images, so bots on this profile get the images
	// of their trigger messages as image parts unless the bot says otherwise.
	Vision bool `yaml:"vision"`
	// ContextWindow is the model's context window in tokens; every request
	// is fitted to it before it is sent. 0 or absent: read once from the
	// server's model info where it says it (agents/window.go), else unknown
	// (history takes limits.history_token_budget, and a request is shortened
	// only after the server says it is too long).
	ContextWindow int `yaml:"context_window"`
	// HistoryShare is the share of context_window (above 0, at most 1) for
	// the fixed prompt and the thread's history, the history never more than
	// limits.history_token_budget; past it the oldest part of the history is
	// summarised. 0 or absent: 0.5.
	HistoryShare float64 `yaml:"history_share"`
	// CompactWith names the llm profile whose model writes those summaries
	// (a cheaper one); absent: the bot's own model.
	CompactWith string `yaml:"compact_with"`
}

// OpenAIBaseURL is the public OpenAI API, the example's default base_url.
const OpenAIBaseURL = "https://api.openai.com/v1"

// The values of llm.<name>.provider.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// AnthropicBaseURL is Anthropic's API, the base_url of a provider anthropic
// profile without one.
const AnthropicBaseURL = "https://api.anthropic.com"

// OpenAICompatible reports whether the profile speaks the OpenAI API, which
// embeddings and transcription need.
func (p LLMProfile) OpenAICompatible() bool {
	return p.Provider == "" || p.Provider == ProviderOpenAI
}

// NeedsKey reports whether the profile talks to the public OpenAI API without an
// api_key, which can never work; cmd fails fast on it.
func (p LLMProfile) NeedsKey() bool {
	return !p.HasKey() && trimSlash(p.BaseURL) == OpenAIBaseURL
}

// Bot is one configured bot (seed §3 bot_profiles).
type Bot struct {
	// Handle is [a-z0-9_]+, unique; people write @handle.
	Handle string `yaml:"handle"`
	// Name is the display name; default: the handle.
	Name         string `yaml:"name"`
	Description  string `yaml:"description"`
	Instructions string `yaml:"instructions"`
	// LLM names a profile in the llm section, or a fallback chain of them
	// ([primary, backup]: a call moves on to the next when one is
	// rate-limited, down, too slow or lacks the model); default: the only
	// profile, else "default".
	LLM Chain `yaml:"llm"`
	// Model overrides the model of the chain's first profile; backups ask
	// their own profile's model.
	Model string   `yaml:"model"`
	Tools []string `yaml:"tools"`
	// ApprovalTools pause the run for a person's approval before they run; an
	// entry may name its own approvers (ApprovalTool). Default (key absent):
	// [shell, schedule]. An explicit empty list turns approvals off (http_fetch calls that
	// send data still ask, DESIGN.md §5).
	ApprovalTools []ApprovalTool `yaml:"approval_tools"`
	// Approvers of this bot's questions; overrides the global approvers.
	Approvers []string `yaml:"approvers"`
	// SelfApprove lets the person who asked for this bot's work approve it.
	SelfApprove bool `yaml:"self_approve"`
	// Memory gives the bot long-term memory across threads (seed §9): its
	// memories in its prompt, manage_memory and search_memory, and reflection
	// after its runs (config/memory.go).
	Memory bool `yaml:"memory"`
	// MaxModelCalls caps model calls per run; 0 means limits.max_model_calls_per_run.
	MaxModelCalls int `yaml:"max_model_calls"`
	// MaxParallelThreads is how many different threads the bot may run at once
	// (never two runs in one thread; limits.max_concurrent_runs caps the total);
	// 0 means 1, the seed's one thread at a time (DESIGN.md §6).
	MaxParallelThreads int `yaml:"max_parallel_threads"`
	// ShellNetwork lets this bot's shell commands reach public internet hosts
	// over HTTP and HTTPS, through openbot's egress proxy (the same guard as
	// http_fetch); default false: the sandbox has only its own loopback.
	ShellNetwork bool `yaml:"shell_network"`
	// ShellLimits override the top-level shell_limits for this bot, key by key.
	ShellLimits ShellLimits `yaml:"shell_limits"`
	// MaxTokensPerRun caps input plus output tokens per run; 0 means
	// limits.max_tokens_per_run.
	MaxTokensPerRun int `yaml:"max_tokens_per_run"`
	// MaxTokens, Temperature and ReasoningEffort are sent with each model call
	// when set: the answer's token limit, the sampling temperature (0 to 2;
	// absent: the server's default) and "low", "medium" or "high" for models
	// and servers that support it.
	MaxTokens       int      `yaml:"max_tokens"`
	Temperature     *float64 `yaml:"temperature"`
	ReasoningEffort string   `yaml:"reasoning_effort"`
	// Vision sends the images attached to the run's trigger messages to the
	// model as image parts (data URLs); absent means the profile's vision.
	Vision *bool `yaml:"vision"`
	// Fetch is the bot's egress policy for http_fetch (config/fetch.go).
	Fetch Fetch `yaml:"fetch"`
}

// MCPServer is one MCP server (stdio when Command is set, streamable HTTP when URL
// is set; exactly one of them). Its tools are named "<name>__<tool>".
type MCPServer struct {
	Name    string            `yaml:"name"`
	Command string            `yaml:"command"`
	Args    []string          `yaml:"args"`
	Env     map[string]string `yaml:"env"`
	URL     string            `yaml:"url"`
	Headers map[string]string `yaml:"headers"`
	// Idempotent says the server's tools may be called again when a restart
	// interrupted a call after it started; default false: the model is told the
	// call was interrupted and may not have completed (DESIGN.md §8).
	Idempotent bool `yaml:"idempotent"`
}

// Console is a terminal channel account ("console/<name>").
type Console struct {
	// Name defaults to "local".
	Name string `yaml:"name"`
	// Enabled defaults to true; use On to read it.
	Enabled *bool `yaml:"enabled"`
}

// On reports whether the console account is enabled (default true).
func (c Console) On() bool { return c.Enabled == nil || *c.Enabled }

// Slack is one Slack app (DESIGN.md §1 "Account"). An account with empty tokens is skipped
// at start with one log line; that is not a validation error.
type Slack struct {
	Name string `yaml:"name"`
	// Bot is a configured handle, or "*" for an app that speaks for the whole team.
	Bot string `yaml:"bot"`
	// Mode is "socket" (default) or "http" (Events API on the shared listener).
	Mode          string   `yaml:"mode"`
	AppToken      string   `yaml:"app_token"`
	BotToken      string   `yaml:"bot_token"`
	SigningSecret string   `yaml:"signing_secret"`
	APIURL        string   `yaml:"api_url"` // optional, for proxies and tests
	AllowChannels []string `yaml:"allow_channels"`
	AllowUsers    []string `yaml:"allow_users"`
	// DMPolicy says who may write to the app in a DM: "pairing" (default),
	// "allowlist", "open" or "disabled" (core.DMPolicies).
	DMPolicy string `yaml:"dm_policy"`
	// Streaming is "on" (default) or "off": show replies while they are written.
	Streaming Switch `yaml:"streaming"`
	// ReplyToUnaddressed is ReplyAuto (default: in a thread with more than one
	// person, a message that addresses no bot wakes none; core/quiet.go) or
	// ReplyAlways (the thread's default bot answers it).
	ReplyToUnaddressed string `yaml:"reply_to_unaddressed"`
	// Watchdog is how long a Socket Mode account may go without a frame from
	// Slack (it pings the websocket well within 30 s) before it is
	// reconnected (and, when it stays down, alerts are told); at least
	// MinSlackWatchdog, default DefaultSlackWatchdog. HTTP-mode accounts are
	// not watched.
	Watchdog time.Duration `yaml:"watchdog"`
}

// Channel watchdogs' defaults and least values: Slack pings a Socket Mode
// websocket well within 30 s and slack-go redials one without a ping for 30 s;
// Feishu answers the long connection's ping every PingInterval (120 s unless it
// says otherwise), so a shorter limit would reconnect a healthy connection.
const (
	DefaultSlackWatchdog  = 2 * time.Minute
	MinSlackWatchdog      = 30 * time.Second
	DefaultFeishuWatchdog = 5 * time.Minute
	MinFeishuWatchdog     = 3 * time.Minute
)

// Telegram is one Telegram bot token (DESIGN.md §1 "Account").
type Telegram struct {
	Name  string `yaml:"name"`
	Bot   string `yaml:"bot"` // a handle or "*"
	Token string `yaml:"token"`
	// Mode is "polling" (default) or "webhook" (needs WebhookURL).
	Mode        string `yaml:"mode"`
	WebhookURL  string `yaml:"webhook_url"`
	SecretToken string `yaml:"secret_token"` // 1-256 of A-Z a-z 0-9 _ -
	// APIEndpoint is optional, for self-hosted Bot API servers and tests.
	APIEndpoint string   `yaml:"api_endpoint"`
	AllowUsers  []string `yaml:"allow_users"`
	// DMPolicy is "pairing" (default), "allowlist", "open" or "disabled", as
	// for Slack.
	DMPolicy string `yaml:"dm_policy"`
	// Streaming is "on" (default) or "off": show replies while they are written.
	Streaming Switch `yaml:"streaming"`
	// ReplyToUnaddressed is ReplyAuto (default: in a thread with more than one
	// person, a message that addresses no bot wakes none; core/quiet.go) or
	// ReplyAlways (the thread's default bot answers it).
	ReplyToUnaddressed string `yaml:"reply_to_unaddressed"`
	// PollTimeout is getUpdates' long-poll timeout in polling mode, whole
	// seconds from 1s to 50s; default 30s.
	PollTimeout time.Duration `yaml:"poll_timeout"`
	// Watchdog is how long a polling account may go without an answer from
	// Telegram before it is reconnected (and, when it stays down, alerts are
	// told); default twice PollTimeout. Webhook accounts are not watched.
	Watchdog time.Duration `yaml:"watchdog"`
}

// DefaultPollTimeout is a polling Telegram account's default poll_timeout.
const DefaultPollTimeout = 30 * time.Second

// Alerts is where openbot tells its owners that an account stays down: a
// conversation reached through another configured account.
type Alerts struct {
	// Account is a platform account id, "slack/ops" or "telegram/chief"; empty:
	// each owner is told in a DM on a running account other than the silent one.
	Account string `yaml:"account"`
	// Conversation is the chat or channel on that account, as its threads
	// name it: a Telegram chat id ("-1001234"), a Slack channel id ("C0123").
	Conversation string `yaml:"conversation"`
}

// Feishu is one Feishu/Lark app (DESIGN.md §1 "Account").
type Feishu struct {
	Name      string `yaml:"name"`
	Bot       string `yaml:"bot"` // a handle or "*"
	AppID     string `yaml:"app_id"`
	AppSecret string `yaml:"app_secret"`
	// Mode is "websocket" (default, no public URL needed) or "webhook".
	Mode              string `yaml:"mode"`
	VerificationToken string `yaml:"verification_token"`
	EncryptKey        string `yaml:"encrypt_key"`
	// BaseURL defaults to FeishuBaseURL; use LarkBaseURL for Lark tenants.
	BaseURL    string   `yaml:"base_url"`
	AllowUsers []string `yaml:"allow_users"`
	DMPolicy   string   `yaml:"dm_policy"` // as for Slack; default "pairing"
	// Streaming is "on" (default) or "off": show replies while they are written.
	Streaming Switch `yaml:"streaming"`
	// ReplyToUnaddressed is ReplyAuto (default: in a thread with more than one
	// person, a message that addresses no bot wakes none; core/quiet.go) or
	// ReplyAlways (the thread's default bot answers it).
	ReplyToUnaddressed string `yaml:"reply_to_unaddressed"`
	// Watchdog is how long a long-connection account may go without a frame
	// from Feishu (the pong to its ping comes every PingInterval, 120 s unless
	// the server says otherwise, so keep it above that) before it is
	// reconnected (and, when it stays down, alerts are told); at least
	// MinFeishuWatchdog, default DefaultFeishuWatchdog. Webhook accounts are
	// not watched.
	Watchdog time.Duration `yaml:"watchdog"`
}

// Switch is an on/off setting written "on" or "off" ("true"/"false" are
// accepted too); empty means the setting's default.
type Switch string

// On reports whether s is on; def is the value when s is empty.
func (s Switch) On(def bool) bool {
	switch s {
	case "on", "true":
		return true
	case "off", "false":
		return false
	}
	return def
}

// Open platform base URLs for Feishu.BaseURL.
const (
	FeishuBaseURL = "https://open.feishu.cn"
	LarkBaseURL   = "https://open.larksuite.com"
)

// Default values applied by ApplyDefaults.
const (
	DefaultListen    = "127.0.0.1:8080"
	DefaultStorePath = "./data/openbot.db"
	DefaultLeaseTTL  = 15 * time.Second // store.lease_ttl
	MinLeaseTTL      = 3 * time.Second  // store.lease_ttl: renewals every second at least
	MaxLeaseTTL      = 5 * time.Minute  // store.lease_ttl: a dead process's work waits at most this long
	MaxProcessIDLen  = 100              // store.process_id
	DefaultWorkspace = "./data/workspace"
	DefaultBotHandle = "chief_of_staff"
	DefaultConsole   = "local"
)

// Values of reply_to_unaddressed on a Slack, Telegram or Feishu account.
const (
	ReplyAuto   = "auto"
	ReplyAlways = "always"
)

// Values of Config.Sandbox.
const (
	SandboxBwrap = "bwrap"
	SandboxNone  = "none"
)

func trimSlash(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}
