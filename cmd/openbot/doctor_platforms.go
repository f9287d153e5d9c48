package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"

	"openbot/config"
	"openbot/core"
)

// slackScopes are the bot token scopes docs/slack-app-manifest.yaml asks for
// (a test keeps the two lists equal). A token missing one of them breaks the
// feature named in the manifest's comment.
var slackScopes = []string{
	"app_mentions:read", "commands", "channels:history", "groups:history", "im:history",
	"mpim:history", "chat:write", "chat:write.customize", "users:read", "reactions:write",
	"files:read", "files:write", "im:write",
}

const slackAPI = "https://slack.com/api/"

// slackAnswer is the common part of a Slack Web API answer.
type slackAnswer struct {
	OK     bool   `json:"ok"`
	Error  string `json:"error"`
	Team   string `json:"team"`
	TeamID string `json:"team_id"`
	UserID string `json:"user_id"`
	User   string `json:"user"`
}

// slack checks one Slack account: auth.test (token, team, bot user), the granted
// scopes against the manifest's, and in socket mode apps.connections.open.
func (d *doctor) slack(ctx context.Context, i int, s config.Slack) {
	name := "slack/" + s.Name
	if missing := slackMissing(d.cfg, i, s); missing != "" {
		d.add(checkWarn, name, "skipped: "+missing, "set the variables named, or remove the account")
		return
	}
	api := cmp.Or(s.APIURL, slackAPI)
	if !strings.HasSuffix(api, "/") {
		api += "/"
	}
	tokenFix := "create a new bot token (OAuth & Permissions, Reinstall to Workspace) and " + setVar(d.cfg, "slack", i, "bot_token")
	var auth slackAnswer
	resp, err := d.do(ctx, http.MethodPost, api+"auth.test", http.Header{"Authorization": {"Bearer " + s.BotToken}}, nil, &auth)
	switch {
	case err != nil:
		d.add(checkFail, name+" auth", "Slack unreachable: "+netReason(err), "check the network (or api_url) from this host")
		return
	case !auth.OK:
		d.add(checkFail, name+" auth", fmt.Sprintf("bot token refused (%s)", orHTTP(auth.Error, resp)), tokenFix)
		return
	}
	d.add(checkOK, name+" auth", fmt.Sprintf("team %s (%s), bot user %s (%s)", auth.Team, auth.TeamID, auth.User, auth.UserID), "")

	granted := resp.Header.Get("X-OAuth-Scopes")
	if granted == "" {
		d.add(checkWarn, name+" scopes", "Slack did not report the granted scopes", "compare OAuth & Permissions with docs/slack-app-manifest.yaml")
	} else {
		have := map[string]bool{}
		for _, sc := range strings.Split(granted, ",") {
			have[strings.TrimSpace(sc)] = true
		}
		var missing []string
		for _, sc := range slackScopes {
			if !have[sc] {
				missing = append(missing, sc)
			}
		}
		switch {
		case len(missing) == 1 && missing[0] == "im:write":
			// Only /handoff needs it; apps installed from an older manifest lack it.
			d.add(checkWarn, name+" scopes", "missing im:write: /handoff cannot open a DM with a person",
				"add it under OAuth & Permissions and reinstall the app")
		case len(missing) > 0:
			d.add(checkFail, name+" scopes", "missing "+strings.Join(missing, ", "),
				"add them under OAuth & Permissions (docs/slack-app-manifest.yaml lists each one's use) and reinstall the app")
		default:
			d.add(checkOK, name+" scopes", fmt.Sprintf("all %d scopes of the manifest granted", len(slackScopes)), "")
		}
	}

	if s.Mode != "socket" {
		return
	}
	var open slackAnswer
	resp, err = d.do(ctx, http.MethodPost, api+"apps.connections.open", http.Header{"Authorization": {"Bearer " + s.AppToken}}, nil, &open)
	switch {
	case err != nil:
		d.add(checkFail, name+" socket mode", "unreachable: "+netReason(err), "check the network from this host")
	case !open.OK:
		d.add(checkFail, name+" socket mode", fmt.Sprintf("app token refused (%s)", orHTTP(open.Error, resp)),
			"create an app-level token with connections:write (Basic Information, App-Level Tokens), enable Socket Mode, and "+setVar(d.cfg, "slack", i, "app_token"))
	default:
		d.add(checkOK, name+" socket mode", "a connection can open", "")
	}
}

// setVar says how to set a field: "set SLACK_BOT_TOKEN" when the file writes
// it as ${VAR}, else "set slack[0].bot_token".
func setVar(cfg *config.Config, kind string, i int, field string) string {
	if vars := cfg.EnvVars(kind, i, field); len(vars) > 0 {
		return "set " + strings.Join(vars, " and ")
	}
	return fmt.Sprintf("set %s[%d].%s", kind, i, field)
}

func orHTTP(msg string, resp *http.Response) string {
	if msg != "" {
		return msg
	}
	if resp != nil {
		return "HTTP " + resp.Status
	}
	return "no answer"
}

// tgAnswer is a Bot API answer.
type tgAnswer[T any] struct {
	OK          bool   `json:"ok"`
	Description string `json:"description"`
	Result      T      `json:"result"`
}

// telegram checks one Telegram bot: getMe, getWebhookInfo against the configured
// mode, and the privacy mode note for groups.
func (d *doctor) telegram(ctx context.Context, i int, t config.Telegram) {
	name := "telegram/" + t.Name
	if t.Token == "" {
		d.add(checkWarn, name, "skipped: "+emptySecrets(d.cfg, "telegram", i, "token"), "set the variable named, or remove the account")
		return
	}
	base := cmp.Or(strings.TrimSuffix(t.APIEndpoint, "/"), "https://api.telegram.org")
	// A configured endpoint may be the library's format string ".../bot%s/%s".
	base = strings.TrimSuffix(base, "/bot%s/%s")
	url := func(method string) string { return base + "/bot" + t.Token + "/" + method }
	var me tgAnswer[struct {
		ID          int64  `json:"id"`
		Username    string `json:"username"`
		ReadsGroups bool   `json:"can_read_all_group_messages"`
	}]
	resp, err := d.do(ctx, http.MethodGet, url("getMe"), nil, nil, &me)
	switch {
	case err != nil:
		d.add(checkFail, name+" getMe", "Telegram unreachable: "+netReason(err), "check the network (or api_endpoint) from this host")
		return
	case !me.OK:
		d.add(checkFail, name+" getMe", fmt.Sprintf("token refused (%s)", orHTTP(me.Description, resp)),
			"get the token from @BotFather (/token) and "+setVar(d.cfg, "telegram", i, "token"))
		return
	}
	d.add(checkOK, name+" getMe", fmt.Sprintf("@%s (id %d)", me.Result.Username, me.Result.ID), "")
	switch open := openChannels(d.cfg, name); {
	case me.Result.ReadsGroups:
		d.add(checkOK, name+" privacy", "privacy mode is off: the bot sees every group message", "")
	case len(open) > 0:
		d.add(checkWarn, name+" privacy", "privacy mode is on, so in the open channels "+strings.Join(open, ", ")+
			" the bot sees only messages that mention it, reply to it or are commands, and answers no others",
			"in @BotFather: /setprivacy, pick the bot, Disable; then remove the bot from those groups and add it again (Telegram applies the change when a bot joins), or make it a group admin")
	default:
		d.add(checkOK, name+" privacy", "privacy mode is on: in groups the bot sees only messages that mention it, reply to it or are commands (enough for openbot unless a channel policy says mode: open; /setprivacy in @BotFather to change)", "")
	}

	var hook tgAnswer[struct {
		URL       string `json:"url"`
		Pending   int    `json:"pending_update_count"`
		LastError string `json:"last_error_message"`
	}]
	resp, err = d.do(ctx, http.MethodGet, url("getWebhookInfo"), nil, nil, &hook)
	switch {
	case err != nil:
		d.add(checkFail, name+" webhook", "unreachable: "+netReason(err), "check the network from this host")
		return
	case !hook.OK:
		d.add(checkWarn, name+" webhook", fmt.Sprintf("getWebhookInfo failed (%s)", orHTTP(hook.Description, resp)), "check the token and api_endpoint")
		return
	}
	set := hook.Result.URL
	if d.fix && d.fixTelegramWebhook(ctx, name, t, set, url) {
		return
	}
	switch {
	case t.Mode != "webhook" && set != "":
		d.add(checkFail, name+" webhook", "a webhook is set while polling is configured: Telegram delivers updates to it, and getUpdates conflicts with it",
			"if another deployment uses this token, give this one its own bot; else remove the webhook (deleteWebhook) or set mode: webhook")
	case t.Mode == "webhook" && set == "":
		d.add(checkWarn, name+" webhook", "no webhook is set yet", "openbot sets "+t.WebhookURL+" when it starts; make sure that URL reaches http.listen")
	case t.Mode == "webhook" && set != t.WebhookURL:
		d.add(checkFail, name+" webhook", "the webhook points elsewhere ("+set+")",
			"if another deployment uses this token, give this one its own bot; else openbot moves it to "+t.WebhookURL+" when it starts")
	case hook.Result.LastError != "":
		d.add(checkWarn, name+" webhook", "Telegram's last delivery failed: "+hook.Result.LastError, "make sure the webhook URL reaches http.listen")
	default:
		d.add(checkOK, name+" webhook", "matches mode "+modeOr(t.Mode, "polling"), "")
	}
}

// openChannels are the channels of account acct ("telegram/tg") whose
// configured policy says mode: open ("*" for the account's default). Policies
// set at run time (/policy) are in the store, not seen here.
func openChannels(cfg *config.Config, acct string) []string {
	var out []string
	for _, p := range cfg.Policies {
		if p.Account == acct && p.Mode == core.ModeOpen {
			out = append(out, p.Channel)
		}
	}
	return out
}

// fixTelegramWebhook makes Telegram's webhook match the configured mode
// (doctor --fix): deleted for polling, set to webhook_url with the secret token
// for webhook mode. It reports whether it changed anything (a FIXED or FAIL line).
func (d *doctor) fixTelegramWebhook(ctx context.Context, name string, t config.Telegram, set string, url func(string) string) bool {
	var method string
	body := map[string]any{}
	switch {
	case t.Mode != "webhook" && set != "":
		method = "deleteWebhook"
	case t.Mode == "webhook" && set != t.WebhookURL && t.WebhookURL != "":
		method = "setWebhook"
		body["url"] = t.WebhookURL
		if t.SecretToken != "" {
			body["secret_token"] = t.SecretToken
		}
	default:
		return false
	}
	var ans tgAnswer[bool]
	resp, err := d.do(ctx, http.MethodPost, url(method), nil, body, &ans)
	switch {
	case err != nil:
		d.add(checkFail, name+" webhook", method+": "+netReason(err), "check the network from this host")
	case !ans.OK:
		d.add(checkFail, name+" webhook", fmt.Sprintf("%s refused (%s)", method, orHTTP(ans.Description, resp)), "check the token and webhook_url")
	case method == "deleteWebhook":
		d.add(checkFixed, name+" webhook", "removed the webhook ("+set+"): mode is polling", "")
	default:
		d.add(checkFixed, name+" webhook", "set the webhook to "+t.WebhookURL, "")
	}
	return true
}

func modeOr(m, def string) string {
	if m == "" {
		return def
	}
	return m
}

// feishu checks one Feishu/Lark app: the tenant access token, then bot info.
func (d *doctor) feishu(ctx context.Context, i int, f config.Feishu) {
	name := "feishu/" + f.Name
	if f.AppID == "" || f.AppSecret == "" {
		d.add(checkWarn, name, "skipped: app_id or app_secret is empty", "set "+strings.Join(append(d.cfg.EnvVars("feishu", i, "app_id"), d.cfg.EnvVars("feishu", i, "app_secret")...), " and "))
		return
	}
	base := cmp.Or(strings.TrimSuffix(f.BaseURL, "/"), config.FeishuBaseURL)
	var tok struct {
		Code  int    `json:"code"`
		Msg   string `json:"msg"`
		Token string `json:"tenant_access_token"`
	}
	resp, err := d.do(ctx, http.MethodPost, base+"/open-apis/auth/v3/tenant_access_token/internal", nil,
		map[string]string{"app_id": f.AppID, "app_secret": f.AppSecret}, &tok)
	switch {
	case err != nil:
		d.add(checkFail, name+" token", "Feishu unreachable: "+netReason(err), "check the network (or base_url) from this host")
		return
	case tok.Code != 0 || tok.Token == "":
		d.add(checkFail, name+" token", fmt.Sprintf("app credentials refused (%d %s)", tok.Code, orHTTP(tok.Msg, resp)),
			"copy App ID and App Secret from the developer console (Credentials & Basic Info) and "+setVar(d.cfg, "feishu", i, "app_secret"))
		return
	}
	d.add(checkOK, name+" token", "tenant access token issued", "")
	var info struct {
		Code int    `json:"code"`
		Msg  string `json:"msg"`
		Bot  struct {
			AppName        string `json:"app_name"`
			OpenID         string `json:"open_id"`
			ActivateStatus int    `json:"activate_status"`
		} `json:"bot"`
	}
	resp, err = d.do(ctx, http.MethodGet, base+"/open-apis/bot/v3/info", http.Header{"Authorization": {"Bearer " + tok.Token}}, nil, &info)
	switch {
	case err != nil:
		d.add(checkFail, name+" bot", "unreachable: "+netReason(err), "check the network from this host")
	case info.Code != 0:
		d.add(checkFail, name+" bot", fmt.Sprintf("bot info refused (%d %s)", info.Code, orHTTP(info.Msg, resp)),
			"enable the Bot capability of the app and publish a version")
	case info.Bot.OpenID == "":
		d.add(checkFail, name+" bot", "the app has no bot", "enable the Bot capability of the app and publish a version")
	default:
		d.add(checkOK, name+" bot", fmt.Sprintf("%s (%s)", info.Bot.AppName, info.Bot.OpenID), "")
	}
}
