package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	mcplib "github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"openbot/adapters/feishu/feishutest"
	"openbot/adapters/slack/slacktest"
	"openbot/adapters/telegram/telegramtest"
	"openbot/agents/anthropictest"
	"openbot/agents/openaitest"
	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

// doctorWorld is one fake of everything a deployment depends on, all healthy.
type doctorWorld struct {
	slack    *slacktest.Server
	telegram *telegramtest.Server
	feishu   *feishutest.Server
	llm      *openaitest.Server
	mcpURL   string
	dir      string
	env      map[string]string
	// mcpCommand, when set, replaces the HTTP MCP server by a stdio command.
	mcpCommand   string
	llmURL       string
	feishuSecret string
	tgExtra      string // extra keys of the Telegram account (webhook mode)
	extra        string // extra top-level keys (policies)
	// llmLines and botsLines, when set, replace the llm profiles and the bots.
	llmLines, botsLines string
}

func newDoctorWorld(t *testing.T) *doctorWorld {
	t.Helper()
	w := &doctorWorld{dir: t.TempDir()}
	w.slack = slacktest.New(slacktest.Options{BotToken: "xoxb-good", AppToken: "xapp-good", Scopes: slackScopes})
	t.Cleanup(w.slack.Close)
	w.telegram = telegramtest.NewServer(telegramtest.Bot{Token: "123:tg", ID: 123, Username: "openbot_bot"})
	t.Cleanup(w.telegram.Close)
	w.feishu = feishutest.New(t)
	w.llm = openaitest.New(t)
	w.llm.SetModels("m", "other")
	w.llmURL = w.llm.URL()
	w.feishuSecret = feishutest.AppSecret
	ms := server.NewMCPServer("doctor-test", "1", server.WithToolCapabilities(true))
	ms.AddTool(mcplib.NewTool("echo", mcplib.WithDescription("Echo")), func(ctx context.Context, req mcplib.CallToolRequest) (*mcplib.CallToolResult, error) {
		return mcplib.NewToolResultText("echo"), nil
	})
	hs := httptest.NewServer(server.NewStreamableHTTPServer(ms))
	t.Cleanup(hs.Close)
	w.mcpURL = hs.URL + "/mcp"
	w.env = map[string]string{"SLACK_BOT_TOKEN": "xoxb-good", "SLACK_APP_TOKEN": "xapp-good"}
	// An existing store, so it is opened and verified.
	st, err := bolt.Open(filepath.Join(w.dir, "data", "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	return w
}

func (w *doctorWorld) config(t *testing.T) string {
	t.Helper()
	mcpLine := `{name: tools, url: ` + w.mcpURL + `}`
	if w.mcpCommand != "" {
		mcpLine = `{name: tools, command: ` + w.mcpCommand + `}`
	}
	llm := `  default: {base_url: "` + w.llmURL + `", api_key: k, model: m}`
	if w.llmLines != "" {
		llm = w.llmLines
	}
	bots := "  - {handle: chief_of_staff}"
	if w.botsLines != "" {
		bots = w.botsLines
	}
	text := `
llm:
` + llm + `
store: {path: ` + filepath.Join(w.dir, "data", "openbot.db") + `}
workspace: ` + filepath.Join(w.dir, "ws") + `
http: {listen: "127.0.0.1:0"}
mcp_servers:
  - ` + mcpLine + `
bots:
` + bots + `
slack:
  - name: acme
    bot: "*"
    app_token: ${SLACK_APP_TOKEN}
    bot_token: ${SLACK_BOT_TOKEN}
    api_url: ` + w.slack.APIURL() + `
telegram:
  - name: tg
    bot: "*"
    token: "123:tg"
    api_endpoint: ` + w.telegram.URL() + `
` + w.tgExtra + `
feishu:
  - name: fs
    bot: "*"
    app_id: ` + feishutest.AppID + `
    app_secret: ` + w.feishuSecret + `
    base_url: ` + w.feishu.URL() + `
` + w.extra
	path := filepath.Join(w.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var statusLine = regexp.MustCompile(`(?m)^(OK|WARN|FAIL|FIXED) +(.+?): `)

// lines maps each check name to its status.
func checkStatuses(out string) map[string]string {
	got := map[string]string{}
	for _, m := range statusLine.FindAllStringSubmatch(out, -1) {
		got[m[2]] = m[1]
	}
	return got
}

// With everything healthy, every check is OK and doctor exits 0.
func TestDoctorAllOK(t *testing.T) {
	w := newDoctorWorld(t)
	r := runFor(t, []string{"doctor", "--config", w.config(t)}, strings.NewReader(""), w.env)
	if r.code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	got := checkStatuses(r.stdout)
	for _, name := range []string{
		"slack/acme auth", "slack/acme scopes", "slack/acme socket mode",
		"telegram/tg getMe", "telegram/tg privacy", "telegram/tg webhook",
		"feishu/fs token", "feishu/fs bot",
		"llm/default reachable", "llm/default model m", "llm/default completion m", "llm/default tools m",
		"mcp/tools", "store verify", "store size", "http listener", "admin token", "sandbox",
	} {
		if got[name] != "OK" {
			t.Errorf("%s: %q, want OK; stdout:\n%s", name, got[name], r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "bot user openbot (U0TESTBOT)") || !strings.Contains(r.stdout, "oldest kept") && !strings.Contains(r.stdout, "MiB") {
		t.Errorf("details missing:\n%s", r.stdout)
	}
	// The tool check offered a tool; the completion asked for one token.
	reqs := w.llm.Requests()
	if len(reqs) != 2 || len(reqs[1].ToolNames()) != 1 {
		t.Errorf("model requests = %d (tools %v), want a plain and a tool request", len(reqs), reqs[len(reqs)-1].ToolNames())
	}
}

// Each broken dependency is one FAIL line, with what to do, and exit status 1.
func TestDoctorFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, w *doctorWorld)
		check string // the failing check
		say   string // in its line
	}{
		{"revoked slack token", func(t *testing.T, w *doctorWorld) { w.env["SLACK_BOT_TOKEN"] = "xoxb-revoked" },
			"slack/acme auth", "bot token refused (invalid_auth)"},
		{"missing slack scope", func(t *testing.T, w *doctorWorld) {
			w.slack.Close()
			w.slack = slacktest.New(slacktest.Options{BotToken: "xoxb-good", AppToken: "xapp-good",
				Scopes: slices.DeleteFunc(slices.Clone(slackScopes), func(s string) bool { return s == "reactions:write" })})
			t.Cleanup(w.slack.Close)
		}, "slack/acme scopes", "missing reactions:write"},
		{"bad slack app token", func(t *testing.T, w *doctorWorld) { w.env["SLACK_APP_TOKEN"] = "xapp-old" },
			"slack/acme socket mode", "app token refused"},
		{"telegram webhook while polling", func(t *testing.T, w *doctorWorld) {
			resp, err := http.Post(w.telegram.URL()+"/bot123:tg/setWebhook?url=https://elsewhere.example/hook", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}, "telegram/tg webhook", "a webhook is set while polling is configured"},
		{"telegram webhook points elsewhere", func(t *testing.T, w *doctorWorld) {
			w.tgExtra = "    mode: webhook\n    webhook_url: https://bots.example/telegram/tg/webhook\n    secret_token: s3cret\n"
			resp, err := http.Post(w.telegram.URL()+"/bot123:tg/setWebhook?url=https://other.example/hook", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}, "telegram/tg webhook", "the webhook points elsewhere"},
		{"unreachable model", func(t *testing.T, w *doctorWorld) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			w.llmURL = "http://" + ln.Addr().String() + "/v1"
			ln.Close()
		}, "llm/default reachable", "connection refused"},
		{"unknown model", func(t *testing.T, w *doctorWorld) { w.llm.SetModels("other") },
			"llm/default model m", "not in the server's model list"},
		{"tools refused", func(t *testing.T, w *doctorWorld) {
			w.llm.Enqueue(openaitest.Text("O"), openaitest.Error(400, "this model does not support tools"))
		}, "llm/default tools m", "does not support tools"},
		{"mcp server exits at start", func(t *testing.T, w *doctorWorld) {
			script := filepath.Join(w.dir, "mcp.sh")
			if err := os.WriteFile(script, []byte("#!/bin/sh\necho 'fatal: MYSERVICE_TOKEN is not set' >&2\nexit 2\n"), 0o700); err != nil {
				t.Fatal(err)
			}
			w.mcpCommand = script
		}, "mcp/tools", "does not start"},
		{"feishu secret", func(t *testing.T, w *doctorWorld) { w.feishuSecret = "TESTwrongSecret" },
			"feishu/fs token", "app credentials refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newDoctorWorld(t)
			tc.setup(t, w)
			r := runFor(t, []string{"doctor", "--config", w.config(t)}, strings.NewReader(""), w.env)
			if r.code != exitFail {
				t.Errorf("exit %d, want %d", r.code, exitFail)
			}
			got := checkStatuses(r.stdout)
			if got[tc.check] != "FAIL" {
				t.Fatalf("%s: %q, want FAIL; stdout:\n%s", tc.check, got[tc.check], r.stdout)
			}
			var line string
			for _, l := range strings.Split(r.stdout, "\n") {
				if strings.HasPrefix(l, "FAIL  "+tc.check+":") {
					line = l
				}
			}
			if !strings.Contains(line, tc.say) {
				t.Errorf("line %q lacks %q", line, tc.say)
			}
			if !strings.Contains(r.stdout, line+"\n      -> ") {
				t.Errorf("no fix after %q:\n%s", line, r.stdout)
			}
			fails := 0
			for _, s := range got {
				if s == "FAIL" {
					fails++
				}
			}
			if fails != 1 {
				t.Errorf("%d FAIL lines, want 1:\n%s", fails, r.stdout)
			}
		})
	}
}

// The scopes doctor wants are the manifest's.
func TestDoctorScopesMatchManifest(t *testing.T) {
	data, err := os.ReadFile("../../docs/slack-app-manifest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	i := strings.Index(text, "    bot:\n")
	j := strings.Index(text, "settings:")
	if i < 0 || j < i {
		t.Fatal("manifest has no oauth_config.scopes.bot list")
	}
	var manifest []string
	for _, m := range regexp.MustCompile(`(?m)^\s+- ([a-z_:.]+)`).FindAllStringSubmatch(text[i:j], -1) {
		manifest = append(manifest, m[1])
	}
	if !slices.Equal(manifest, slackScopes) {
		t.Errorf("manifest scopes %v\ndoctor scopes   %v", manifest, slackScopes)
	}
}

// A listener reachable from other hosts without an admin token fails.
func TestDoctorAdminTokenNeededOffLoopback(t *testing.T) {
	var out strings.Builder
	w := newDoctorWorld(t)
	cfg := loadConfig(w.config(t), &out, envOf(w.env))
	cfg.HTTP.Listen = "0.0.0.0:0"
	d := &doctor{cfg: cfg, out: &out}
	d.listener()
	if got := checkStatuses(out.String())["admin token"]; got != "FAIL" {
		t.Errorf("admin token: %q, want FAIL\n%s", got, out.String())
	}
}

// config's floor for dedup keys, and its cap on a schedule's grace, are core's.
func TestMinDedupKeysMatchesCore(t *testing.T) {
	if config.MinDedupKeys != core.MinDedupRetention || config.MaxScheduleGrace != core.MinDedupRetention {
		t.Errorf("config.MinDedupKeys %s, config.MaxScheduleGrace %s, core.MinDedupRetention %s",
			config.MinDedupKeys, config.MaxScheduleGrace, core.MinDedupRetention)
	}
}

// TestDoctorListenerHeldByRunningOpenbot: on a running deployment the listener
// is taken by openbot itself; doctor says so (OK) instead of failing, while a
// listener taken by something else still fails.
func TestDoctorListenerHeldByRunningOpenbot(t *testing.T) {
	ready := make(chan struct{})
	close(ready)
	for _, tc := range []struct {
		name string
		h    http.Handler
		want string
	}{
		{"openbot", newHealth(ready), "OK"},
		{"stranger", http.NotFoundHandler(), "FAIL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.h)
			defer srv.Close()
			var out strings.Builder
			w := newDoctorWorld(t)
			cfg := loadConfig(w.config(t), &out, envOf(w.env))
			cfg.HTTP.Listen = srv.Listener.Addr().String()
			d := &doctor{cfg: cfg, out: &out, client: srv.Client()}
			d.listener()
			if got := checkStatuses(out.String())["http listener"]; got != tc.want {
				t.Errorf("http listener: %q, want %s\n%s", got, tc.want, out.String())
			}
		})
	}
}

// TestDoctorChainsAndKeys: doctor shows each bot's chain, checks every
// profile of it (an Anthropic one on its own API) and every labelled key,
// naming a refused key by its label only.
func TestDoctorChainsAndKeys(t *testing.T) {
	w := newDoctorWorld(t)
	w.llm.RequireKeys("sk-good-1234")
	claude := anthropictest.New(t)
	claude.RequireKey("sk-ant-good")
	claude.SetModels("claude-test")
	w.llmLines = `  default: {base_url: "` + w.llmURL + `", model: m, api_keys: {team_a: sk-good-1234, team_b: sk-revoked-99}}
  claude: {provider: anthropic, base_url: "` + claude.URL() + `", api_key: sk-ant-good, model: claude-test}`
	w.botsLines = "  - {handle: chief_of_staff, llm: [default, claude]}"
	r := runFor(t, []string{"doctor", "--config", w.config(t)}, strings.NewReader(""), w.env)
	got := checkStatuses(r.stdout)
	for name, want := range map[string]string{
		"bot/chief_of_staff chain": "OK", "llm/default key team_a": "OK", "llm/default key team_b": "FAIL",
		"llm/default reachable": "OK", "llm/default tools m": "OK",
		"llm/claude reachable": "OK", "llm/claude model claude-test": "OK", "llm/claude completion claude-test": "OK", "llm/claude tools claude-test": "OK",
	} {
		if got[name] != want {
			t.Errorf("%s: %q, want %s; stdout:\n%s", name, got[name], want, r.stdout)
		}
	}
	if !strings.Contains(r.stdout, "default (openai, m) -> claude (anthropic, claude-test)") || strings.Contains(r.stdout, "sk-revoked-99") {
		t.Errorf("stdout:\n%s", r.stdout)
	}
	if reqs := claude.Requests(); len(reqs) != 2 || len(reqs[1].Body.Tools) != 1 {
		t.Errorf("anthropic requests = %+v", reqs)
	}
}

// TestDoctorMCPStartTimeoutSaysTimeout: an MCP server that does not answer
// within the bound fails with a hint to raise --timeout (a first npx download
// takes longer than the default), and package runners get a longer default.
func TestDoctorMCPStartTimeoutSaysTimeout(t *testing.T) {
	w := newDoctorWorld(t)
	script := filepath.Join(t.TempDir(), "slow-mcp")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec sleep 30\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	w.mcpCommand = script
	r := runFor(t, []string{"doctor", "--config", w.config(t), "--timeout", "300ms"}, strings.NewReader(""), w.env)
	if got := checkStatuses(r.stdout)["mcp/tools"]; got != "FAIL" {
		t.Fatalf("mcp/tools: %q, want FAIL; stdout:\n%s", got, r.stdout)
	}
	if !strings.Contains(r.stdout, "did not answer within 300ms") || !strings.Contains(r.stdout, "longer --timeout") {
		t.Errorf("the slow MCP server's line lacks the bound and the --timeout hint:\n%s", r.stdout)
	}
	for cmd, want := range map[string]bool{"npx": true, "/usr/bin/uvx": true, "node": false, script: false} {
		if downloads(cmd) != want {
			t.Errorf("downloads(%q) = %v, want %v", cmd, !want, want)
		}
	}
}

// TestDoctorJSON: `doctor --json` prints one JSON document for CI, with the
// same checks and the same exit code as the lines.
func TestDoctorJSON(t *testing.T) {
	type doc struct {
		OK     bool `json:"ok"`
		Checks []struct {
			Status, Name, Detail, Fix string
		} `json:"checks"`
	}
	w := newDoctorWorld(t)
	r := runFor(t, []string{"doctor", "--json", "--config", w.config(t)}, strings.NewReader(""), w.env)
	var d doc
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
	if r.code != 0 || !d.OK || len(d.Checks) < 10 || d.Checks[0].Name != "config" || d.Checks[0].Status != "OK" {
		t.Errorf("exit %d, ok %v, %d checks; want exit 0 and every check:\n%s", r.code, d.OK, len(d.Checks), r.stdout)
	}
	w.llmURL = "http://127.0.0.1:1/v1" // nothing listens there
	r = runFor(t, []string{"doctor", "--json", "--timeout", "2s", "--config", w.config(t)}, strings.NewReader(""), w.env)
	d = doc{}
	if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
		t.Fatalf("stdout is not one JSON document: %v\n%s", err, r.stdout)
	}
	failed := false
	for _, c := range d.Checks {
		failed = failed || (c.Status == "FAIL" && strings.HasPrefix(c.Name, "llm/default") && c.Fix != "")
	}
	if r.code != exitFail || d.OK || !failed {
		t.Errorf("unreachable model: exit %d, ok %v; want exit 1 and a FAIL llm/default check with a fix:\n%s", r.code, d.OK, r.stdout)
	}
}

// TestDoctorFix: `doctor --fix` creates the store directory, puts a new admin
// token into .env (mode 0600) when the config names a variable for it, and
// removes a webhook that conflicts with polling; the next doctor finds them
// in order.
func TestDoctorFix(t *testing.T) {
	w := newDoctorWorld(t)
	path := w.config(t)
	data, _ := os.ReadFile(path)
	store := filepath.Join(w.dir, "fresh", "openbot.db")
	text := strings.Replace(string(data), "store: {path: "+filepath.Join(w.dir, "data", "openbot.db")+"}", "store: {path: "+store+"}", 1)
	text += "admin: {token: \"${OPENBOT_ADMIN_TOKEN}\"}\n"
	text = strings.Replace(text, `listen: "127.0.0.1:0"`, `listen: "0.0.0.0:0"`, 1) // the token matters off loopback
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := call(t, http.MethodPost, w.telegram.URL()+"/bot123:tg/setWebhook?url=https://old.example/hook", "", ""); code != http.StatusOK {
		t.Fatalf("setWebhook on the fake: %d %s", code, body)
	}
	r := runFor(t, []string{"doctor", "--config", path}, strings.NewReader(""), w.env)
	got := checkStatuses(r.stdout)
	if got["telegram/tg webhook"] != "FAIL" || got["admin token"] != "FAIL" {
		t.Fatalf("before --fix: webhook %q, admin token %q; want both FAIL:\n%s", got["telegram/tg webhook"], got["admin token"], r.stdout)
	}
	r = runFor(t, []string{"doctor", "--fix", "--config", path}, strings.NewReader(""), w.env)
	got = checkStatuses(r.stdout)
	for _, name := range []string{"store", "admin token", "telegram/tg webhook"} {
		if got[name] != "FIXED" {
			t.Errorf("--fix: %s is %q, want FIXED:\n%s", name, got[name], r.stdout)
		}
	}
	if st, err := os.Stat(filepath.Dir(store)); err != nil || !st.IsDir() {
		t.Errorf("store directory not created: %v", err)
	}
	env, err := os.ReadFile(filepath.Join(w.dir, ".env"))
	if st, _ := os.Stat(filepath.Join(w.dir, ".env")); err != nil || st.Mode().Perm() != 0o600 || !regexp.MustCompile(`OPENBOT_ADMIN_TOKEN=.?[0-9a-f]{64}`).Match(env) {
		t.Errorf(".env after --fix: %v\n%s", err, env)
	}
	if url, _ := w.telegram.Webhook("123:tg"); url != "" {
		t.Errorf("the webhook is still %q", url)
	}
	r = runFor(t, []string{"doctor", "--config", path}, strings.NewReader(""), w.env)
	got = checkStatuses(r.stdout)
	if got["telegram/tg webhook"] != "OK" || got["admin token"] != "OK" {
		t.Errorf("after --fix: webhook %q, admin token %q; want OK:\n%s", got["telegram/tg webhook"], got["admin token"], r.stdout)
	}
}

// Doctor reports each bot's fixed prompt in tokens, the schemas of the MCP
// tools it selects included, and warns above limits.fixed_prompt_warn_tokens.
func TestDoctorFixedPromptSize(t *testing.T) {
	w := newDoctorWorld(t)
	path := w.config(t)
	tokens := func(out string) int {
		t.Helper()
		m := regexp.MustCompile(`bot/chief_of_staff fixed prompt: about (\d+) tokens`).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no fixed prompt line:\n%s", out)
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	r := runFor(t, []string{"doctor", "--config", path}, strings.NewReader(""), w.env)
	if got := checkStatuses(r.stdout)["bot/chief_of_staff fixed prompt"]; got != "OK" {
		t.Fatalf("fixed prompt check %q, want OK:\n%s", got, r.stdout)
	}
	without := tokens(r.stdout)
	data, _ := os.ReadFile(path)
	text := strings.Replace(string(data), "{handle: chief_of_staff}", "{handle: chief_of_staff, tools: [tools]}", 1) +
		"limits: {fixed_prompt_warn_tokens: 100}\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runFor(t, []string{"doctor", "--config", path}, strings.NewReader(""), w.env)
	if got := checkStatuses(r.stdout)["bot/chief_of_staff fixed prompt"]; got != "WARN" || !strings.Contains(r.stdout, "<server>__<tool>") {
		t.Errorf("fixed prompt check %q, want WARN with the fix:\n%s", got, r.stdout)
	}
	if with := tokens(r.stdout); with <= without {
		t.Errorf("fixed prompt with the MCP server's tool = %d tokens, without %d: its schema is not counted", with, without)
	}
}

// A channel policy with mode: open on a Telegram account whose bot has privacy
// mode on is a WARN that says how to turn it off; with privacy mode off
// (getMe's can_read_all_group_messages) it is OK.
func TestDoctorTelegramPrivacyOpenChannel(t *testing.T) {
	for _, reads := range []bool{false, true} {
		w := newDoctorWorld(t)
		w.telegram = telegramtest.NewServer(telegramtest.Bot{Token: "123:tg", ID: 123, Username: "openbot_bot", ReadsGroups: reads})
		t.Cleanup(w.telegram.Close)
		w.extra = "policies:\n  - {account: telegram/tg, channel: \"-1001234567890\", mode: open}\n"
		r := runFor(t, []string{"doctor", "--config", w.config(t)}, strings.NewReader(""), w.env)
		got, want := checkStatuses(r.stdout)["telegram/tg privacy"], map[bool]string{false: "WARN", true: "OK"}[reads]
		if got != want || (!reads && !strings.Contains(r.stdout, "/setprivacy")) {
			t.Errorf("privacy off %v: %q, want %s; stdout:\n%s", reads, got, want, r.stdout)
		}
	}
}

// TestDoctorSlackWithoutIMWrite: an app installed from a manifest older than
// /handoff lacks im:write; doctor warns (only /handoff needs it) and passes.
func TestDoctorSlackWithoutIMWrite(t *testing.T) {
	w := newDoctorWorld(t)
	w.slack.Close()
	w.slack = slacktest.New(slacktest.Options{BotToken: "xoxb-good", AppToken: "xapp-good",
		Scopes: slices.DeleteFunc(slices.Clone(slackScopes), func(s string) bool { return s == "im:write" })})
	t.Cleanup(w.slack.Close)
	r := runFor(t, []string{"doctor", "--config", w.config(t)}, strings.NewReader(""), w.env)
	if got := checkStatuses(r.stdout)["slack/acme scopes"]; got != "WARN" {
		t.Fatalf("slack/acme scopes: %q, want WARN; stdout:\n%s", got, r.stdout)
	}
	if r.code == exitFail || !strings.Contains(r.stdout, "missing im:write: /handoff") {
		t.Errorf("exit %d, want no failure and the warning naming /handoff:\n%s", r.code, r.stdout)
	}
}

// TestDoctorContextWindow: doctor says the window each profile's requests
// are fitted to and where it came from: the config, the server's model
// list, or unknown.
func TestDoctorContextWindow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *doctorWorld)
		say   string
	}{
		{"server", func(w *doctorWorld) {
			w.llm.SetModelEntries(map[string]any{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 32768})
		}, "32768 tokens, from the server (max_model_len)"},
		{"config", func(w *doctorWorld) {
			w.llm.SetModelEntries(map[string]any{"id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 32768})
			w.llmLines = `  default: {base_url: "` + w.llmURL + `", api_key: k, model: m, context_window: 16000}`
		}, "16000 tokens, from llm.default.context_window"},
		{"unknown", func(*doctorWorld) {}, "unknown (the server does not say it)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newDoctorWorld(t)
			tc.setup(w)
			r := runFor(t, []string{"doctor", "--config", w.config(t)}, strings.NewReader(""), w.env)
			line := regexp.MustCompile(`(?m)^OK +llm/default context window: (.*)$`).FindStringSubmatch(r.stdout)
			if line == nil || !strings.Contains(line[1], tc.say) {
				t.Errorf("want an OK line saying %q; stdout:\n%s", tc.say, r.stdout)
			}
		})
	}
}
