package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/joho/godotenv"

	"openbot"
	"openbot/config"
)

// The channels `openbot init` sets up, in the order it asks about them.
var initChannels = []string{"terminal", "slack", "telegram", "feishu"}

// initAnswers is everything `openbot init` asks for; flags fill it in, the form
// asks for what they did not (interactive only).
type initAnswers struct {
	Channels []string

	Provider, Model, BaseURL, APIKey string

	SlackBotToken, SlackAppToken, SlackAPIURL string
	TelegramToken, TelegramAPI                string
	FeishuAppID, FeishuAppSecret, FeishuURL   string

	// Owner is the platform id of the person who runs this openbot
	// (telegram:123, slack:T…:U…, feishu:ou_…): config's owners. Empty: the
	// first person whose pairing code is approved becomes the owner.
	Owner string
	// Systemd: write openbot.service next to the config.
	Systemd bool
	// Listen is http.listen: webhooks, /healthz, the dashboard.
	Listen string
}

// initFlags binds every answer to a flag, for scripts (--non-interactive).
func initFlags(fs *flag.FlagSet, a *initAnswers) (channels *string) {
	channels = fs.String("channels", "", "channels to connect, comma-separated: terminal, slack, telegram, feishu")
	fs.StringVar(&a.Provider, "provider", "", "model API: openai (any OpenAI-compatible server) or anthropic")
	fs.StringVar(&a.Model, "model", "", "model name (default gpt-4o-mini, or claude-sonnet-4-5 for anthropic)")
	fs.StringVar(&a.BaseURL, "base-url", "", "the model server's base URL (default the provider's public API)")
	fs.StringVar(&a.APIKey, "api-key", "", "the model API key (goes to .env); empty for a server that needs none")
	fs.StringVar(&a.SlackBotToken, "slack-bot-token", "", "Slack bot token xoxb-… (goes to .env)")
	fs.StringVar(&a.SlackAppToken, "slack-app-token", "", "Slack app-level token xapp-… for Socket Mode (goes to .env)")
	fs.StringVar(&a.SlackAPIURL, "slack-api-url", "", "Slack API base URL (default Slack's; for a proxy or a test server)")
	fs.StringVar(&a.TelegramToken, "telegram-token", "", "Telegram bot token from @BotFather (goes to .env)")
	fs.StringVar(&a.TelegramAPI, "telegram-api", "", "Telegram Bot API base URL (default Telegram's; for a self-hosted server)")
	fs.StringVar(&a.FeishuAppID, "feishu-app-id", "", "Feishu/Lark App ID")
	fs.StringVar(&a.FeishuAppSecret, "feishu-app-secret", "", "Feishu/Lark App Secret (goes to .env)")
	fs.StringVar(&a.FeishuURL, "feishu-base-url", "", "https://open.feishu.cn (default) or https://open.larksuite.com for Lark")
	fs.StringVar(&a.Owner, "owner", "", "your platform id: telegram:<user id>, slack:<team id>:<user id> or feishu:<open_id>")
	fs.BoolVar(&a.Systemd, "systemd", false, "also write a systemd unit, openbot.service, next to the config")
	fs.StringVar(&a.Listen, "listen", "127.0.0.1:8080", "http.listen: the address of webhooks, /healthz and the dashboard")
	return channels
}

// runInit is `openbot init`: it asks which channels to connect and which model to
// use, checks every token and the model live (as doctor does) before going on,
// and writes a short config.yaml with the secrets in a .env file beside it (mode
// 0600, which openbot reads). Run again, it keeps what exists and adds channels.
// With --non-interactive (or piped input) the flags give every answer; a missing
// one is an error naming its flag.
func runInit(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, lookupEnv config.LookupEnv) int {
	fs, path := configFlags("init", stderr)
	var a initAnswers
	channels := initFlags(fs, &a)
	batch := fs.Bool("non-interactive", false, "ask nothing: every answer comes from the flags")
	timeout := fs.Duration("timeout", defaultDoctorTimeout, "bound of each check's network call")
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if *channels != "" {
		for _, c := range strings.Split(*channels, ",") {
			c = strings.TrimSpace(c)
			if !slices.Contains(initChannels, c) {
				fmt.Fprintf(stderr, "openbot init: --channels: unknown channel %q (want %s)\n", c, strings.Join(initChannels, ", "))
				return exitUsage
			}
			a.Channels = append(a.Channels, c)
		}
	}
	w := &initWizard{out: stdout, timeout: *timeout, path: *path, envPath: filepath.Join(filepath.Dir(*path), ".env"), lookupEnv: lookupEnv}
	if !*batch {
		w.ask = newInitForm(stdin, stdout)
	}
	if err := w.run(ctx, &a); err != nil {
		fmt.Fprintf(stderr, "openbot init: %v\n", err)
		return exitFail
	}
	return exitOK
}

// initWizard holds one run of `openbot init`.
type initWizard struct {
	out      io.Writer
	ask      *initForm // nil: non-interactive
	timeout  time.Duration
	path     string // the config file
	envPath  string // the .env file beside it
	existing *config.Config
	// lookupEnv is the environment, for loading the config as openbot will.
	lookupEnv config.LookupEnv
}

func (w *initWizard) say(format string, args ...any) { fmt.Fprintf(w.out, format+"\n", args...) }

func (w *initWizard) run(ctx context.Context, a *initAnswers) error {
	if _, err := os.Stat(w.path); err == nil {
		cfg, err := config.Load(w.path, w.lookupEnv)
		if err != nil {
			return fmt.Errorf("%s exists but has problems; fix them (openbot config check) or move it away: %v", w.path, err)
		}
		w.existing = cfg
	}
	have := w.configured()
	if w.ask != nil {
		if err := w.ask.channels(a, have); err != nil {
			return err
		}
	}
	var add []string
	for _, c := range a.Channels {
		if have[c] {
			w.say("%s is already configured in %s; keeping it.", c, w.path)
		} else if !slices.Contains(add, c) {
			add = append(add, c)
		}
	}
	if len(add) == 0 {
		if w.existing != nil {
			w.say("Nothing to add. Start it: %s", startCommand(w.path, have))
			return nil
		}
		return errors.New("no channel chosen (--channels terminal,slack,telegram,feishu)")
	}
	secrets, err := godotenv.Read(w.envPath)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("read %s: %w", w.envPath, err)
	}
	if secrets == nil {
		secrets = map[string]string{}
	}
	if w.existing == nil {
		if err := w.model(ctx, a, secrets); err != nil {
			return err
		}
	}
	for _, c := range add {
		if err := w.channel(ctx, c, a, secrets); err != nil {
			return err
		}
	}
	if w.existing == nil && w.ask != nil {
		if err := w.ask.owner(a); err != nil {
			return err
		}
	}
	if secrets["OPENBOT_ADMIN_TOKEN"] == "" && w.existing == nil {
		secrets["OPENBOT_ADMIN_TOKEN"] = randomToken()
	}
	if err := writeEnvFile(w.envPath, secrets); err != nil {
		return err
	}
	if err := w.writeConfig(a, add); err != nil {
		return err
	}
	var problems bytes.Buffer
	if loadConfig(w.path, &problems, w.lookupEnv) == nil {
		return fmt.Errorf("the written %s does not pass config check (a bug in init; please report it):\n%s", w.path, problems.String())
	}
	w.say("Wrote %s and %s (secrets, mode 0600).", w.path, w.envPath)
	all := w.configured()
	for _, c := range add {
		all[c] = true
	}
	if w.ask != nil && !a.Systemd && (all["slack"] || all["telegram"] || all["feishu"]) {
		if a.Systemd, err = w.ask.confirm("Write a systemd unit (openbot.service) next to the config?"); err != nil {
			return err
		}
	}
	if a.Systemd {
		unit, err := writeUnit(w.path)
		if err != nil {
			return err
		}
		w.say("Wrote %s; install it with:\n  sudo cp %s /etc/systemd/system/ && sudo systemctl daemon-reload && sudo systemctl enable --now openbot", unit, unit)
	}
	w.say("\nStart it:\n  %s", startCommand(w.path, all))
	if a.Owner == "" && w.existing == nil && (all["slack"] || all["telegram"] || all["feishu"]) {
		w.say("Then DM the bot: it answers with a pairing code; `openbot pair CODE --config %s` (or the dashboard) makes you its owner.", w.path)
	}
	if w.existing == nil {
		w.say("The dashboard is at http://%s/ (its token is OPENBOT_ADMIN_TOKEN in %s).", a.Listen, w.envPath)
	}
	return nil
}

// configured is the channels the existing config has.
func (w *initWizard) configured() map[string]bool {
	have := map[string]bool{}
	if c := w.existing; c != nil {
		have["terminal"] = len(c.Console) > 0
		have["slack"] = len(c.Slack) > 0
		have["telegram"] = len(c.Telegram) > 0
		have["feishu"] = len(c.Feishu) > 0
	}
	return have
}

// startCommand is the one command that starts what is configured.
func startCommand(path string, channels map[string]bool) string {
	cmd := "serve"
	if !channels["slack"] && !channels["telegram"] && !channels["feishu"] {
		cmd = "chat"
	}
	if filepath.Clean(path) == "config.yaml" {
		return "openbot " + cmd
	}
	return "openbot " + cmd + " --config " + path
}

// check runs one doctor check and tells whether it passed (OK or WARN); its
// lines are printed as doctor prints them.
func (w *initWizard) check(cfg *config.Config, run func(d *doctor)) bool {
	d := &doctor{cfg: cfg, out: w.out, timeout: w.timeout, client: &http.Client{Timeout: w.timeout}}
	run(d)
	return !d.failed()
}

// model asks for the model and checks it with one real call, until it passes
// (interactive) or once (non-interactive).
func (w *initWizard) model(ctx context.Context, a *initAnswers, secrets map[string]string) error {
	for {
		if w.ask != nil {
			if err := w.ask.model(a); err != nil {
				return err
			}
		}
		a.Provider = strings.ToLower(cmp.Or(a.Provider, "openai"))
		if a.Provider != "openai" && a.Provider != "anthropic" {
			return fmt.Errorf("--provider: %q is not openai or anthropic", a.Provider)
		}
		if a.Model == "" {
			a.Model = map[string]string{"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}[a.Provider]
		}
		if a.BaseURL == "" {
			a.BaseURL = map[string]string{"openai": config.OpenAIBaseURL, "anthropic": "https://api.anthropic.com"}[a.Provider]
		}
		if strings.TrimSpace(a.APIKey) != a.APIKey {
			return errors.New("--api-key: the key has spaces around it")
		}
		p := config.LLMProfile{Provider: a.Provider, BaseURL: a.BaseURL, APIKey: a.APIKey, Model: a.Model}
		cfg := &config.Config{LLM: map[string]config.LLMProfile{"default": p}}
		w.say("Checking the model %s at %s …", a.Model, a.BaseURL)
		if w.check(cfg, func(d *doctor) { d.llm(ctx, "default", p, []string{a.Model}) }) {
			secrets[keyVar(a.Provider)] = a.APIKey
			return nil
		}
		if w.ask == nil {
			return errors.New("the model check failed (above); fix --base-url, --api-key or --model")
		}
		w.say("That did not work; try again.")
		a.APIKey = ""
	}
}

func keyVar(provider string) string {
	if provider == "anthropic" {
		return "ANTHROPIC_API_KEY"
	}
	return "OPENAI_API_KEY"
}

// channel walks through one channel: how to create its app, its tokens, a live
// check; the secrets go to secrets.
func (w *initWizard) channel(ctx context.Context, c string, a *initAnswers, secrets map[string]string) error {
	if c == "terminal" {
		return nil
	}
	w.say("\n%s", initSteps[c])
	if c == "slack" {
		w.say("The app manifest (paste it at https://api.slack.com/apps → Create New App → From a manifest):\n\n%s", openbot.SlackManifest)
	}
	for {
		if w.ask != nil {
			if err := w.ask.tokens(c, a); err != nil {
				return err
			}
		}
		cfg := &config.Config{}
		var ok bool
		switch c {
		case "slack":
			s := config.Slack{Name: "main", Bot: "*", BotToken: a.SlackBotToken, AppToken: a.SlackAppToken, APIURL: a.SlackAPIURL}
			cfg.Slack = []config.Slack{s}
			ok = a.SlackBotToken != "" && a.SlackAppToken != "" && w.check(cfg, func(d *doctor) { d.slack(ctx, 0, s) })
			if ok {
				secrets["SLACK_BOT_TOKEN"], secrets["SLACK_APP_TOKEN"] = a.SlackBotToken, a.SlackAppToken
			}
		case "telegram":
			t := config.Telegram{Name: "main", Bot: "*", Token: a.TelegramToken, APIEndpoint: a.TelegramAPI}
			cfg.Telegram = []config.Telegram{t}
			ok = a.TelegramToken != "" && w.check(cfg, func(d *doctor) { d.telegram(ctx, 0, t) })
			if ok {
				secrets["TELEGRAM_BOT_TOKEN"] = a.TelegramToken
			}
		case "feishu":
			f := config.Feishu{Name: "main", Bot: "*", AppID: a.FeishuAppID, AppSecret: a.FeishuAppSecret, BaseURL: a.FeishuURL}
			cfg.Feishu = []config.Feishu{f}
			ok = a.FeishuAppID != "" && a.FeishuAppSecret != "" && w.check(cfg, func(d *doctor) { d.feishu(ctx, 0, f) })
			if ok {
				secrets["FEISHU_APP_SECRET"] = a.FeishuAppSecret
			}
		}
		if ok {
			return nil
		}
		if w.ask == nil {
			return fmt.Errorf("%s: the tokens are missing or the check failed (above); give them with --%s-… flags", c, c)
		}
		w.say("That did not work; try again.")
	}
}

// initSteps says, per channel, how to create the app.
var initSteps = map[string]string{
	"slack": `Slack, in three steps:
  1. Create the app from the manifest below, and install it to your workspace.
  2. Basic Information → App-Level Tokens → Generate, with the scope connections:write: the xapp-… token.
  3. OAuth & Permissions → Bot User OAuth Token: the xoxb-… token.`,
	"telegram": `Telegram, in three steps:
  1. In Telegram, open @BotFather and send /newbot.
  2. Choose a name and a username ending in "bot".
  3. Copy the token it answers with (123456:ABC-…).`,
	"feishu": `Feishu / Lark, in three steps:
  1. At https://open.feishu.cn/app (Lark: https://open.larksuite.com/app) create a custom app and add the Bot capability.
  2. Events & Callbacks: choose "Receive events through persistent connection" and add im.message.receive_v1;
     Permissions: im:message, im:message:send_as_bot, im:resource. Publish a version.
  3. Credentials & Basic Info: copy the App ID and App Secret.`,
}

// writeEnvFile writes the secrets as KEY=VALUE lines with mode 0600 (also when
// the file exists with a wider mode).
func writeEnvFile(path string, secrets map[string]string) error {
	text, err := godotenv.Marshal(secrets)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.WriteString("# Secrets of openbot, read by openbot at start. Keep this file private (mode 0600).\n" + text + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// addToEnvFile sets name=value in the .env file at path, keeping its other
// variables, with mode 0600.
func addToEnvFile(path, name, value string) error {
	vars, err := godotenv.Read(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if vars == nil {
		vars = map[string]string{}
	}
	vars[name] = value
	return writeEnvFile(path, vars)
}

// randomToken is 32 random bytes in hex: an admin token.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeConfig writes a new config with what was chosen, or appends the added
// channels' sections to the existing one, keeping everything else as it is.
func (w *initWizard) writeConfig(a *initAnswers, add []string) error {
	var b strings.Builder
	if w.existing != nil {
		old, err := os.ReadFile(w.path)
		if err != nil {
			return err
		}
		for _, c := range add {
			if key := sectionKey(c); bytes.HasPrefix(old, []byte(key+":")) || bytes.Contains(old, []byte("\n"+key+":")) {
				return fmt.Errorf("%s has an empty %s: section; remove it or fill it in by hand", w.path, key)
			}
		}
		b.Write(old)
		if len(old) > 0 && old[len(old)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		fmt.Fprintf(&b, `# openbot configuration, written by openbot init on %s.
# Secrets are in .env beside this file (mode 0600), which openbot reads at start.
# Every other key, with what it does: openbot config example

llm:
  default:
    provider: %s
    base_url: %s
    api_key: "${%s}"
    model: %s

bots:
  - handle: assistant
    name: Assistant
    instructions: You help the team. Answer briefly and say when you are unsure.
    tools: [workspace_read, workspace_write, workspace_list, http_fetch, todo_write]
default_bot: assistant

store:
  path: ./data/openbot.db
workspace: ./data/workspace
http:
  listen: %s
admin:
  token: "${OPENBOT_ADMIN_TOKEN}"
`, time.Now().UTC().Format(time.DateOnly), a.Provider, a.BaseURL, keyVar(a.Provider), a.Model, a.Listen)
		if a.Owner != "" {
			fmt.Fprintf(&b, "owners: [%q]\n", a.Owner)
		}
	}
	opt := func(key, val string) {
		if val != "" {
			fmt.Fprintf(&b, "    %s: %s\n", key, val)
		}
	}
	for _, c := range add {
		fmt.Fprintf(&b, "\n%s:\n  - name: %s\n", sectionKey(c), map[bool]string{true: "local", false: "main"}[c == "terminal"])
		switch c {
		case "slack":
			b.WriteString("    bot: \"*\"\n    mode: socket\n    app_token: \"${SLACK_APP_TOKEN}\"\n    bot_token: \"${SLACK_BOT_TOKEN}\"\n")
			opt("api_url", a.SlackAPIURL)
		case "telegram":
			b.WriteString("    bot: \"*\"\n    token: \"${TELEGRAM_BOT_TOKEN}\"\n")
			opt("api_endpoint", a.TelegramAPI)
		case "feishu":
			fmt.Fprintf(&b, "    bot: \"*\"\n    app_id: %s\n    app_secret: \"${FEISHU_APP_SECRET}\"\n", a.FeishuAppID)
			opt("base_url", a.FeishuURL)
		}
	}
	if err := os.MkdirAll(filepath.Dir(w.path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(w.path, []byte(b.String()), 0o600)
}

// sectionKey is the config's top-level key of a channel.
func sectionKey(channel string) string {
	if channel == "terminal" {
		return "console"
	}
	return channel
}

// writeUnit writes openbot.service next to the config: `openbot serve` of this
// config as the current user, in the config's directory, stopped as openbot
// needs (SIGTERM, 30 s). It returns the unit's path.
func writeUnit(configPath string) (string, error) {
	abs, err := filepath.Abs(configPath)
	if err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil || strings.Contains(exe, "go-build") { // `go run`: a temporary binary
		exe = "/usr/local/bin/openbot"
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	unit := fmt.Sprintf(`# openbot as a systemd service, written by openbot init. (deploy/openbot.service
# in the repository is a hardened unit for a dedicated user and /etc/openbot.)
[Unit]
Description=openbot: LLM bots in Slack, Telegram and Feishu
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
User=%s
WorkingDirectory=%s
ExecStart=%s serve --config %s
ExecReload=/bin/kill -HUP $MAINPID
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=30s
Restart=on-failure
RestartSec=5s

[Install]
WantedBy=multi-user.target
`, user, filepath.Dir(abs), exe, abs)
	path := filepath.Join(filepath.Dir(abs), "openbot.service")
	return path, os.WriteFile(path, []byte(unit), 0o644)
}
