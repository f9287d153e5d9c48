package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const minimal = `
llm:
  default:
    base_url: http://127.0.0.1:11434/v1
    model: llama3.1
bots:
  - handle: engineer
`

func parseOK(t *testing.T, text string, env map[string]string) *Config {
	t.Helper()
	cfg, err := Parse([]byte(text), mapEnv(env))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

func parseErrs(t *testing.T, text string) Errors {
	t.Helper()
	_, err := Parse([]byte(text), nil)
	if err == nil {
		t.Fatalf("Parse: no error, want some")
	}
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("Parse: error %T %v is not Errors", err, err)
	}
	return es
}

func TestDefaults(t *testing.T) {
	cfg := parseOK(t, minimal, nil)
	want := Limits{4, 20, 40, 24000, 80, 10 * time.Minute, 0, 0, 8000}
	if cfg.Limits != want {
		t.Errorf("limits = %+v, want %+v", cfg.Limits, want)
	}
	checks := []struct{ name, got, want string }{
		{"http.listen", cfg.HTTP.Listen, "127.0.0.1:8080"},
		{"store.path", cfg.Store.Path, "./data/openbot.db"},
		{"workspace", cfg.Workspace, "./data/workspace"},
		{"bots[0].name", cfg.Bots[0].Name, "engineer"},
		{"bots[0].llm", cfg.Bots[0].LLM.String(), "default"},
		{"default_bot", cfg.DefaultBot, "engineer"},
		{"model", cfg.ModelFor(cfg.Bots[0]), "llama3.1"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestDefaultsBotsAndChannels(t *testing.T) {
	cfg := parseOK(t, `
llm:
  local: {base_url: "http://127.0.0.1:1/v1", model: m}
bots:
  - {handle: engineer}
  - {handle: chief_of_staff, model: big}
console: [{}, {name: two, enabled: false}]
slack: [{name: s, bot: "*"}]
telegram: [{name: t, bot: engineer}]
feishu: [{name: f, bot: engineer}]
limits: {max_bot_hops: 3, run_timeout: 90s}
`, nil)
	if cfg.DefaultBot != "chief_of_staff" {
		t.Errorf("default_bot = %q, want chief_of_staff", cfg.DefaultBot)
	}
	if cfg.Bots[0].LLM.String() != "local" {
		t.Errorf("bots[0].llm = %q, want the only profile %q", cfg.Bots[0].LLM, "local")
	}
	if cfg.ModelFor(cfg.Bots[1]) != "big" {
		t.Errorf("bot model override lost: %q", cfg.ModelFor(cfg.Bots[1]))
	}
	if cfg.Limits.MaxBotHops != 3 || cfg.Limits.RunTimeout != 90*time.Second || cfg.Limits.MaxConcurrentRuns != 4 {
		t.Errorf("limits = %+v", cfg.Limits)
	}
	if cfg.Admin.Identity != DefaultOperator || cfg.Admin.Name != "operator" {
		t.Errorf("admin = %+v, want the default operator", cfg.Admin)
	}
	if cfg.Console[0].Name != "local" || !cfg.Console[0].On() || cfg.Console[1].On() {
		t.Errorf("console = %+v", cfg.Console)
	}
	if cfg.Slack[0].Mode != "socket" || cfg.Slack[0].DMPolicy != "pairing" || cfg.Slack[0].Watchdog != DefaultSlackWatchdog {
		t.Errorf("slack = %+v", cfg.Slack[0])
	}
	if cfg.Telegram[0].Mode != "polling" || cfg.Telegram[0].DMPolicy != "pairing" {
		t.Errorf("telegram = %+v", cfg.Telegram[0])
	}
	if f := cfg.Feishu[0]; f.Mode != "websocket" || f.DMPolicy != "pairing" || f.BaseURL != FeishuBaseURL || f.Watchdog != DefaultFeishuWatchdog {
		t.Errorf("feishu = %+v", f)
	}
}

func TestApplyDefaultsKeepsValues(t *testing.T) {
	cfg := parseOK(t, minimal+`
http: {listen: "0.0.0.0:9000"}
store: {path: /tmp/x.db}
default_bot: engineer
`, nil)
	before := *cfg
	cfg.ApplyDefaults()
	if !reflect.DeepEqual(before, *cfg) {
		t.Errorf("ApplyDefaults changed set values:\n%+v\n%+v", before, *cfg)
	}
	if cfg.HTTP.Listen != "0.0.0.0:9000" || cfg.Store.Path != "/tmp/x.db" {
		t.Errorf("values overwritten: %+v %+v", cfg.HTTP, cfg.Store)
	}
}

func TestEnvExpansionInFile(t *testing.T) {
	text := `
llm:
  default:
    base_url: ${OPENAI_BASE_URL:-https://api.openai.com/v1}
    api_key: "${OPENAI_API_KEY}"
    model: ${OPENAI_MODEL:-gpt-4o-mini}
bots: [{handle: chief_of_staff}]
`
	cfg := parseOK(t, text, map[string]string{"OPENAI_API_KEY": "sk-test"})
	p := cfg.LLM["default"]
	if p.BaseURL != OpenAIBaseURL || p.APIKey != "sk-test" || p.Model != "gpt-4o-mini" {
		t.Errorf("profile = %+v", p)
	}
	if p.NeedsKey() {
		t.Error("NeedsKey with a key set")
	}

	cfg = parseOK(t, text, nil)
	if !cfg.LLM["default"].NeedsKey() {
		t.Error("NeedsKey false for OpenAI without key")
	}
	cfg = parseOK(t, text, map[string]string{"OPENAI_BASE_URL": "http://localhost:11434/v1", "OPENAI_MODEL": "llama3.1"})
	if p := cfg.LLM["default"]; p.NeedsKey() || p.Model != "llama3.1" || p.BaseURL != "http://localhost:11434/v1" {
		t.Errorf("ollama profile = %+v NeedsKey=%v", p, p.NeedsKey())
	}
}

func TestUnknownKeys(t *testing.T) {
	tests := []struct {
		name, text, path, msg string
	}{
		{"top level", minimal + "bogus: 1\n", "bogus", `unknown key "bogus" (line 8)`},
		{"nested", minimal + "http:\n  listne: x\n", "http.listne", `unknown key "listne" (line 9; did you mean "listen"?)`},
		{"in list item", strings.Replace(minimal, "- handle: engineer", "- handle: engineer\n    modle: x", 1), "bots[0].modle", `unknown key "modle" (line 8; did you mean "model"?)`},
		{"llm profile", strings.Replace(minimal, "model: llama3.1", "model: llama3.1\n    apikey: x", 1), "llm.default.apikey", `unknown key "apikey" (line 6; did you mean "api_key"?)`},
		{"wrong type", minimal + "limits:\n  max_bot_hops: lots\n", "limits.max_bot_hops", `cannot use str "lots" as an integer (line 9)`},
		{"bad duration", minimal + "limits:\n  run_timeout: soon\n", "limits.run_timeout", `cannot use str "soon" as a duration such as "10m" (line 9)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := parseErrs(t, tt.text)
			want := FieldError{tt.path, tt.msg}
			for _, e := range es {
				if e == want {
					return
				}
			}
			t.Errorf("errors %q do not contain %q", es.Error(), want.Error())
		})
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := Parse([]byte("bots: [\n"), nil)
	if err == nil {
		t.Fatal("no error for broken YAML")
	}
	var es Errors
	if errors.As(err, &es) {
		t.Errorf("syntax error came back as Errors: %v", err)
	}
}

func TestValidationRules(t *testing.T) {
	base := `
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m}
bots:
  - {handle: chief_of_staff}
  - {handle: engineer}
`
	tests := []struct {
		name, extra, path, msgPart string
	}{
		{"listen", `http: {listen: "8080"}`, "http.listen", "not host:port"},
		{"negative limit", `limits: {max_concurrent_runs: -1}`, "limits.max_concurrent_runs", "must be positive"},
		{"negative hops", `limits: {max_bot_hops: -2}`, "limits.max_bot_hops", "must be positive"},
		{"memory limit too low", `limits: {memory_limit_bytes: 1048576}`, "limits.memory_limit_bytes", "must be unset (no limit) or at least 16777216"},
		{"memory limit negative", `limits: {memory_limit_bytes: -2}`, "limits.memory_limit_bytes", "must be unset (no limit)"},
		{"negative calls", `limits: {max_model_calls_per_run: -2}`, "limits.max_model_calls_per_run", "must be positive"},
		{"negative budget", `limits: {history_token_budget: -2}`, "limits.history_token_budget", "must be positive"},
		{"negative messages", `limits: {history_max_messages: -2}`, "limits.history_max_messages", "must be positive"},
		{"negative timeout", `limits: {run_timeout: -1s}`, "limits.run_timeout", "must be positive"},
		{"default_bot unknown", `default_bot: boss`, "default_bot", `"boss" is not a configured bot`},
		{"mcp neither", `mcp_servers: [{name: fs}]`, "mcp_servers[0]", "got neither"},
		{"mcp both", `mcp_servers: [{name: fs, command: x, url: "http://h/mcp"}]`, "mcp_servers[0]", "got both"},
		{"mcp dup", `mcp_servers: [{name: fs, command: x}, {name: fs, command: y}]`, "mcp_servers[1].name", `"fs" is used twice`},
		{"mcp no name", `mcp_servers: [{command: x}]`, "mcp_servers[0].name", "must be set"},
		{"mcp double underscore", `mcp_servers: [{name: a__b, command: x}]`, "mcp_servers[0].name", "single"},
		{"mcp bad url", `mcp_servers: [{name: a, url: "ftp://h"}]`, "mcp_servers[0].url", "not an http(s) URL"},
		{"console dup", `console: [{name: a}, {name: a}]`, "console[1].name", `"a" is used twice`},
		{"console bad name", `console: [{name: "A B"}]`, "console[0].name", "must match"},
		{"slack bot unknown", `slack: [{name: s, bot: nobody}]`, "slack[0].bot", `"nobody" is not a configured bot`},
		{"slack bot missing", `slack: [{name: s}]`, "slack[0].bot", "must be set"},
		{"slack mode", `slack: [{name: s, bot: "*", mode: rtm}]`, "slack[0].mode", `"rtm" is not one of`},
		{"slack api_url", `slack: [{name: s, bot: "*", api_url: "not a url"}]`, "slack[0].api_url", "not an http(s) URL"},
		{"slack dup", `slack: [{name: s, bot: "*"}, {name: s, bot: engineer}]`, "slack[1].name", "used twice"},
		{"slack no name", `slack: [{bot: "*"}]`, "slack[0].name", "must be set"},
		{"telegram mode", `telegram: [{name: t, bot: "*", mode: push}]`, "telegram[0].mode", "not one of"},
		{"telegram webhook url", `telegram: [{name: t, bot: "*", mode: webhook}]`, "telegram[0].webhook_url", "must be set when mode is webhook"},
		{"telegram dm_policy", `telegram: [{name: t, bot: "*", dm_policy: everyone}]`, "telegram[0].dm_policy", "not one of"},
		{"telegram secret", `telegram: [{name: t, bot: "*", secret_token: "a b"}]`, "telegram[0].secret_token", "1-256"},
		{"telegram bot", `telegram: [{name: t, bot: qa}]`, "telegram[0].bot", "not a configured bot"},
		{"feishu mode", `feishu: [{name: f, bot: "*", mode: poll}]`, "feishu[0].mode", "not one of"},
		{"feishu dm_policy", `feishu: [{name: f, bot: "*", dm_policy: x}]`, "feishu[0].dm_policy", "not one of"},
		{"feishu base_url", `feishu: [{name: f, bot: "*", base_url: "open.feishu.cn"}]`, "feishu[0].base_url", "not an http(s) URL"},
		{"feishu bot", `feishu: [{name: f, bot: ""}]`, "feishu[0].bot", "must be set"},
		{"slack watchdog", `slack: [{name: s, bot: "*", watchdog: 10s}]`, "slack[0].watchdog", "at least 30s"},
		{"feishu watchdog", `feishu: [{name: f, bot: "*", watchdog: 2m}]`, "feishu[0].watchdog", "at least 3m0s"},
		{"slack streaming", `slack: [{name: s, bot: "*", streaming: sometimes}]`, "slack[0].streaming", `"sometimes" is not one of`},
		{"telegram streaming", `telegram: [{name: t, bot: "*", streaming: 1}]`, "telegram[0].streaming", "not one of"},
		{"feishu streaming", `feishu: [{name: f, bot: "*", streaming: yes}]`, "feishu[0].streaming", "not one of"},
		{"same name across kinds is fine, dup within", `feishu: [{name: s, bot: "*"}, {name: s, bot: "*"}]`, "feishu[1].name", "used twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := parseErrs(t, base+tt.extra+"\n")
			for _, e := range es {
				if e.Path == tt.path && strings.Contains(e.Msg, tt.msgPart) {
					if len(es) != 1 {
						t.Errorf("want exactly one problem, got:\n%v", es)
					}
					return
				}
			}
			t.Errorf("errors:\n%v\nwant %s: ...%s...", es, tt.path, tt.msgPart)
		})
	}
}

func TestValidationRulesBotsAndLLM(t *testing.T) {
	tests := []struct {
		name, text, path, msgPart string
	}{
		{"no llm", "bots: [{handle: a, model: m}]", "llm", "at least one provider profile"},
		{"no bots", "llm: {default: {base_url: 'http://h/v1', model: m}}", "bots", "at least one bot"},
		{"no base_url", "llm: {default: {model: m}}\nbots: [{handle: a}]", "llm.default.base_url", "must be set"},
		{"bad base_url", "llm: {default: {base_url: 'localhost:11434', model: m}}\nbots: [{handle: a}]", "llm.default.base_url", "not an http(s) URL"},
		{"bad profile name", "llm: {Big: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a}]", "llm.Big", "profile name"},
		{"handle empty", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{name: x}]", "bots[0].handle", "must be set"},
		{"handle pattern", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: Eng-1}]", "bots[0].handle", `"Eng-1" must match [a-z0-9_]+`},
		{"unknown profile", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a, llm: other}]", "bots[0].llm", `"other" is not a profile`},
		{"default profile missing", "llm: {a: {base_url: 'http://h/v1', model: m}, b: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: x}]", "bots[0].llm", `"default" is not a profile`},
		{"no model", "llm: {default: {base_url: 'http://h/v1'}}\nbots: [{handle: a}]", "bots[0].model", "no model"},
		{"negative calls", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a, max_model_calls: -1}]", "bots[0].max_model_calls", "must not be negative"},
		{"negative parallel threads", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a, max_parallel_threads: -1}]", "bots[0].max_parallel_threads", "must not be negative"},
		{"tool dup", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a, tools: [shell, shell]}]", "bots[0].tools[1]", "listed twice"},
		{"approval empty", "llm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a, approval_tools: ['']}]", "bots[0].approval_tools[0]", "must not be empty"},
		{"negative request timeout", "llm: {default: {base_url: 'http://h/v1', model: m, request_timeout: -1s}}\nbots: [{handle: a}]", "llm.default.request_timeout", "must not be negative"},
		{"negative idle timeout", "llm: {default: {base_url: 'http://h/v1', model: m, stream_idle_timeout: -1s}}\nbots: [{handle: a}]", "llm.default.stream_idle_timeout", "must not be negative"},
		{"tiny context window", "llm: {default: {base_url: 'http://h/v1', model: m, context_window: 100}}\nbots: [{handle: a}]", "llm.default.context_window", "at least 1024"},
		{"history share above 1", "llm: {default: {base_url: 'http://h/v1', model: m, history_share: 1.5}}\nbots: [{handle: a}]", "llm.default.history_share", "at most 1"},
		{"unknown compaction profile", "llm: {default: {base_url: 'http://h/v1', model: m, compact_with: cheap}}\nbots: [{handle: a}]", "llm.default.compact_with", "not configured"},
		{"short admin token", "admin: {token: abc}\nllm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a}]", "admin.token", "at least 16 characters"},
		{"blank admin token", "admin: {token: '                '}\nllm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a}]", "admin.token", "whitespace"},
		{"admin token with a space", "admin: {token: 'abcdefgh ijklmnopq'}\nllm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a}]", "admin.token", "whitespace"},
		{"admin identity", "admin: {identity: alice}\nllm: {default: {base_url: 'http://h/v1', model: m}}\nbots: [{handle: a}]", "admin.identity", "not an actor id"},
		{"base_url password not echoed", "llm: {default: {base_url: 'ftp://u:hunter2@h/v1', model: m}}\nbots: [{handle: a}]", "llm.default.base_url", "ftp://u:xxxxx@h/v1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			es := parseErrs(t, tt.text)
			for _, e := range es {
				if e.Path == tt.path && strings.Contains(e.Msg, tt.msgPart) {
					if len(es) != 1 {
						t.Errorf("want exactly one problem, got:\n%v", es)
					}
					return
				}
			}
			t.Errorf("errors:\n%v\nwant %s: ...%s...", es, tt.path, tt.msgPart)
		})
	}
}

func TestReportsAllProblemsAtOnce(t *testing.T) {
	text := `
http: {listen: nope}
llm:
  default: {base_url: "http://h/v1", model: m}
bots:
  - handle: chief_of_staff
  - handle: engineer
  - handle: engineer
    colour: blue
  - handle: Bad
limits: {max_bot_hops: -1}
default_bot: ghost
slack: [{name: s, bot: nobody}]
`
	es := parseErrs(t, text)
	want := []string{
		`bots[2].colour: unknown key "colour" (line 9)`,
		`http.listen: "nope" is not host:port`,
		`limits.max_bot_hops: must be positive, got -1`,
		`bots[2].handle: "engineer" is used twice`,
		`bots[3].handle: "Bad" must match [a-z0-9_]+`,
		`default_bot: "ghost" is not a configured bot`,
		`slack[0].bot: "nobody" is not a configured bot (use a handle or "*")`,
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if es.Error() != strings.Join(want, "\n") {
		t.Errorf("Error() = %q", es.Error())
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, nil); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml"), nil); err == nil {
		t.Fatal("Load of a missing file: no error")
	}
}

func TestEmptyFile(t *testing.T) {
	es := parseErrs(t, "")
	if len(es) != 2 || es[0].Path != "llm" || es[1].Path != "bots" {
		t.Errorf("errors = %v", es)
	}
}

func TestApprovalsConfig(t *testing.T) {
	base := `
llm: {default: {base_url: "http://127.0.0.1:1/v1", model: m}}
bots:
  - {handle: engineer, tools: [shell]}
  - {handle: qa, approval_tools: []}
  - {handle: ops, approval_tools: [shell, http_fetch], approvers: ["telegram:42", "bogus", "slack:U1"]}
approvers: ["console:you", "slack:T1:U1"]
approval_timeout: 2h
`
	c, err := Parse([]byte(base), func(string) (string, bool) { return "", false })
	if err == nil {
		t.Fatal("want errors for the bad approver ids")
	}
	msg := err.Error()
	for _, want := range []string{`bots[2].approvers[1]: "bogus" is not an actor id`, `bots[2].approvers[2]: "slack:U1": a Slack approver is slack:<team id>:<user id>`} {
		if !strings.Contains(msg, want) {
			t.Errorf("errors lack %q:\n%s", want, msg)
		}
	}
	fixed := strings.Replace(base, `, "bogus", "slack:U1"`, "", 1)
	c, err = Parse([]byte(fixed), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Bots[0].ApprovalTools; len(got) != 3 || got[0].Tool != "shell" || got[1].Tool != "schedule" || got[2].Tool != "notify" {
		t.Errorf("default approval_tools = %v, want [shell schedule notify]", got)
	}
	if got := c.Bots[1].ApprovalTools; got == nil || len(got) != 0 {
		t.Errorf("explicit empty approval_tools = %#v, want an empty list kept", got)
	}
	if c.ApprovalTimeout != 2*time.Hour || len(c.Approvers) != 2 || c.Bots[2].Approvers[0] != "telegram:42" {
		t.Errorf("approvals config = %v %v %v", c.ApprovalTimeout, c.Approvers, c.Bots[2].Approvers)
	}
	d, _ := Parse([]byte("llm: {default: {base_url: \"http://127.0.0.1:1/v1\", model: m}}\nbots: [{handle: a}]\n"), func(string) (string, bool) { return "", false })
	if d.ApprovalTimeout != DefaultApprovalTimeout {
		t.Errorf("default approval_timeout = %v", d.ApprovalTimeout)
	}
}

func TestEnvVars(t *testing.T) {
	text := `
llm: {default: {base_url: "${OPENAI_BASE_URL:-http://127.0.0.1:1/v1}", model: m}}
bots: [{handle: a}]
slack:
  - name: acme
    bot: "*"
    bot_token: ${SLACK_BOT_TOKEN}
    app_token: "${SLACK_APP_TOKEN}"
    signing_secret: literal
`
	c, err := Parse([]byte(text), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path []any
		want string
	}{
		{[]any{"slack", 0, "bot_token"}, "SLACK_BOT_TOKEN"},
		{[]any{"slack", 0, "app_token"}, "SLACK_APP_TOKEN"},
		{[]any{"slack", 0, "signing_secret"}, ""},
		{[]any{"slack", 1, "bot_token"}, ""},
		{[]any{"llm", "default", "base_url"}, "OPENAI_BASE_URL"},
	} {
		got := strings.Join(c.EnvVars(tt.path...), ",")
		if got != tt.want {
			t.Errorf("EnvVars(%v) = %q, want %q", tt.path, got, tt.want)
		}
	}
}

func TestLLMTimeoutsAndAdminToken(t *testing.T) {
	cfg := parseOK(t, `
admin: {token: "${ADMIN_TOKEN}"}
llm:
  default: {base_url: "http://h/v1", model: m, request_timeout: 90s, stream_idle_timeout: 15s}
bots: [{handle: a}]
`, map[string]string{"ADMIN_TOKEN": "0123456789abcdef0123"})
	p := cfg.LLM["default"]
	if p.RequestTimeout != 90*time.Second || p.StreamIdleTimeout != 15*time.Second {
		t.Errorf("timeouts = %s, %s", p.RequestTimeout, p.StreamIdleTimeout)
	}
	if cfg.Admin.Token != "0123456789abcdef0123" {
		t.Errorf("admin.token = %q", cfg.Admin.Token)
	}
}

func TestMCPReadyTimeout(t *testing.T) {
	base := "llm: {default: {base_url: \"http://127.0.0.1:1/v1\", model: m}}\nbots: [{handle: a, tools: [fs, fs__*]}]\nmcp_servers: [{name: fs, command: fs-server}]\n"
	c := parseOK(t, base, nil)
	if c.MCPReadyTimeout != DefaultMCPReadyTimeout || DefaultMCPReadyTimeout != 30*time.Second {
		t.Errorf("default mcp_ready_timeout = %v", c.MCPReadyTimeout)
	}
	if c = parseOK(t, base+"mcp_ready_timeout: 2m\n", nil); c.MCPReadyTimeout != 2*time.Minute {
		t.Errorf("mcp_ready_timeout = %v, want 2m", c.MCPReadyTimeout)
	}
	es := parseErrs(t, base+"mcp_ready_timeout: -1s\n")
	if len(es) != 1 || es[0].Path != "mcp_ready_timeout" {
		t.Errorf("errors = %v, want one at mcp_ready_timeout", es)
	}
}

func TestStreamingSwitch(t *testing.T) {
	cfg := parseOK(t, "llm: {default: {base_url: \"http://127.0.0.1:1/v1\", model: m}}\nbots: [{handle: a}]\n"+
		"slack: [{name: a, bot: \"*\"}, {name: b, bot: \"*\", streaming: off}, {name: c, bot: \"*\", streaming: on}]\n", nil)
	for i, want := range []bool{true, false, true} {
		if got := cfg.Slack[i].Streaming.On(true); got != want {
			t.Errorf("slack[%d].streaming %q: On = %v, want %v", i, cfg.Slack[i].Streaming, got, want)
		}
	}
}

// TestMCPIdempotent: mcp_servers[].idempotent is read; it defaults to false.
func TestMCPIdempotent(t *testing.T) {
	cfg := parseOK(t, minimal+"mcp_servers: [{name: a, command: x, idempotent: true}, {name: b, command: y}]\n", nil)
	if len(cfg.MCPServers) != 2 || !cfg.MCPServers[0].Idempotent || cfg.MCPServers[1].Idempotent {
		t.Fatalf("mcp servers = %+v", cfg.MCPServers)
	}
}

func TestStoreDriver(t *testing.T) {
	cfg := parseOK(t, minimal, nil)
	if cfg.Store.Driver != StoreBolt {
		t.Errorf("default store.driver = %q, want %q", cfg.Store.Driver, StoreBolt)
	}
	cfg = parseOK(t, minimal+"store: {driver: postgres, dsn: \"${DATABASE_URL}\"}\n", map[string]string{"DATABASE_URL": "postgres://u@h/db"})
	if cfg.Store.Driver != StorePostgres || cfg.Store.DSN != "postgres://u@h/db" {
		t.Errorf("store = %+v", cfg.Store)
	}
	for _, tt := range []struct{ text, path string }{
		{"store: {driver: postgres}", "store.dsn"},
		{"store: {driver: mysql}", "store.driver"},
	} {
		es := parseErrs(t, minimal+tt.text+"\n")
		if len(es) != 1 || es[0].Path != tt.path {
			t.Errorf("%s: errors %v, want one at %s", tt.text, es, tt.path)
		}
	}
}

// TestStoreLeaseKeys: store.process_id and store.lease_ttl are read, lease_ttl
// defaults to 15s, and bad values are errors at their field path.
func TestStoreLeaseKeys(t *testing.T) {
	cfg := parseOK(t, minimal, nil)
	if cfg.Store.LeaseTTL != DefaultLeaseTTL || cfg.Store.ProcessID != "" {
		t.Errorf("defaults: store = %+v, want lease_ttl %s and no process_id", cfg.Store, DefaultLeaseTTL)
	}
	cfg = parseOK(t, minimal+"store: {driver: postgres, dsn: x, process_id: web-1, lease_ttl: 4s}\n", nil)
	if cfg.Store.ProcessID != "web-1" || cfg.Store.LeaseTTL != 4*time.Second {
		t.Errorf("store = %+v", cfg.Store)
	}
	for _, tt := range []struct{ text, path string }{
		{"store: {lease_ttl: 2s}", "store.lease_ttl"},
		{"store: {lease_ttl: -1s}", "store.lease_ttl"},
		{"store: {lease_ttl: 10m}", "store.lease_ttl"},
		{"store: {process_id: \"web 1\"}", "store.process_id"},
		{"store: {process_id: " + strings.Repeat("x", MaxProcessIDLen+1) + "}", "store.process_id"},
	} {
		es := parseErrs(t, minimal+tt.text+"\n")
		if len(es) != 1 || es[0].Path != tt.path {
			t.Errorf("%s: errors %v, want one at %s", tt.text, es, tt.path)
		}
	}
}

// TestUnsetVariableNamed: a required field written as ${VAR} with VAR unset (or
// empty) is reported with the variable to set; one that is set, or a field
// written literally, is reported as before.
func TestUnsetVariableNamed(t *testing.T) {
	text := `
llm: {default: {base_url: "${MY_LLM_URL}", model: m}, second: {base_url: "${SET_URL}${EMPTY}", model: m}, third: {base_url: "${URL_A}${URL_B}", model: m}}
bots: [{handle: "${BOT_HANDLE}"}, {handle: ""}]
`
	env := map[string]string{"SET_URL": "http://127.0.0.1:1/v1", "EMPTY": ""}
	_, err := Parse([]byte(text), func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		"llm.default.base_url: must be set (written as ${MY_LLM_URL}, which is not set)",
		"llm.third.base_url: must be set (written with ${URL_A}, ${URL_B}, which are not set)",
		"bots[0].handle: must be set (written as ${BOT_HANDLE}, which is not set)",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if !strings.Contains(msg, "bots[1].handle: must be set\n") && !strings.HasSuffix(msg, "bots[1].handle: must be set") {
		t.Errorf("a literal empty field is reported as before:\n%s", msg)
	}
	for _, p := range []struct {
		path string
		want string
	}{{"bots[2].handle", "[bots 2 handle]"}, {"llm.default.base_url", "[llm default base_url]"}, {"a[1][2]", "[a 1 2]"}, {"a[x]", "[]"}} {
		if got := fmt.Sprint(fieldPath(p.path)); got != p.want {
			t.Errorf("fieldPath(%q) = %s, want %s", p.path, got, p.want)
		}
	}
}

// TestTabIndentNamed: a tab where YAML wants spaces is said to be one.
func TestTabIndentNamed(t *testing.T) {
	_, err := Parse([]byte("llm:\n\tdefault: {base_url: http://127.0.0.1:1/v1, model: m}\nbots: [{handle: a}]\n"), nil)
	if err == nil || !strings.Contains(err.Error(), "YAML indents with spaces; this line has a tab") {
		t.Errorf("err = %v", err)
	}
	// The same error with a tab elsewhere (in a quoted value) says nothing of tabs.
	_, err = Parse([]byte("llm: {default: {base_url: \"http://127.0.0.1:1/v1\", model: \"a\tb\"}}\nbots: [{handle: @a}]\n"), nil)
	if err == nil || strings.Contains(err.Error(), "tab") {
		t.Errorf("err = %v, want a parse error without the tab hint", err)
	}
}

// TestUnknownKeySuggested: an unknown key close to a known one of the same
// place is answered with it; one far from every key is not.
func TestUnknownKeySuggested(t *testing.T) {
	text := `
defualt_bot: a
llm: {default: {base_url: "http://127.0.0.1:1/v1", model: m, modle_x: y}}
bots: [{handle: a, instrutions: hi, zzzzzzzz: 1}]
`
	_, err := Parse([]byte(text), nil)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{
		`unknown key "defualt_bot" (line 2; did you mean "default_bot"?)`,
		`unknown key "instrutions" (line 4; did you mean "instructions"?)`,
		`unknown key "zzzzzzzz" (line 4)`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// A real key in the wrong place is not taken for a typo.
	_, err = Parse([]byte(minimal+"telegram:\n  - {name: t, bot: engineer, token: x, model: m}\n"), nil)
	if err == nil || !strings.Contains(err.Error(), `unknown key "model"`) || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("model on an account: %v", err)
	}
	if d := editDistance("kitten", "sitting"); d != 3 {
		t.Errorf("editDistance = %d, want 3", d)
	}
	if d := editDistance("modle", "model"); d != 1 {
		t.Errorf("editDistance of a swap = %d, want 1", d)
	}
}
