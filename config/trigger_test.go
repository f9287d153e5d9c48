package config

import (
	"strings"
	"testing"
	"time"
)

// A valid trigger gets its defaults and its bare account name resolved; each
// bad field is reported at its path.
func TestTriggerValidation(t *testing.T) {
	cfg := parseOK(t, minimal+`slack: [{name: acme, bot: engineer, bot_token: xoxb-1, app_token: xapp-1}]
triggers:
  - name: github
    kind: github
    secret: ${GH_SECRET}
    bot: engineer
    post_to: {account: acme, conversation: C0123, team: T0123}
    thread: "github:{repository.full_name}#{pull_request.number}"
    events: [pull_request.opened, pull_request.synchronize]
    when: {pull_request.draft: "false"}
    rate_limit: {runs: 10, per: 1h}
`, map[string]string{"GH_SECRET": "0123456789abcdef0123"})
	tr := cfg.Triggers[0]
	if tr.PostTo.Account != "slack/acme" || tr.MaxBodyBytes != DefaultTriggerBody || tr.Window != 5*time.Minute || tr.Secret != "0123456789abcdef0123" {
		t.Errorf("defaults: %+v", tr)
	}
	if !containsString(cfg.Secrets(), tr.Secret) {
		t.Error("the trigger's secret is not among the secrets the log scrubs")
	}
	es := parseErrs(t, minimal+`triggers:
  - name: Bad Name
    kind: gitlab
    secret: short
    bot: nobody
    post_to: {account: slack/none}
    thread: "x{a"
    message: "}"
    events: [a, a]
    when: {"no spaces": x}
    rate_limit: {runs: 3}
    max_runs_per_day: -1
    max_body_bytes: 999999999
    window: 2h
`)
	for _, want := range []string{"triggers[0].name", "triggers[0].kind", "triggers[0].secret", "triggers[0].bot",
		"triggers[0].post_to.account", "triggers[0].post_to.conversation", "triggers[0].post_to.team", "triggers[0].thread",
		"triggers[0].message", "triggers[0].events[1]", "triggers[0].when", "triggers[0].rate_limit",
		"triggers[0].max_runs_per_day", "triggers[0].max_body_bytes", "triggers[0].window"} {
		if !strings.Contains(es.Error(), want+":") {
			t.Errorf("errors lack %s:\n%v", want, es)
		}
	}
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// A notify target resolves its bare account name; bad fields are named.
func TestNotifyValidation(t *testing.T) {
	cfg := parseOK(t, minimal+`slack: [{name: acme, bot: engineer, bot_token: xoxb-1, app_token: xapp-1}]
notify:
  - {name: ops, account: acme, conversation: C0OPS, team: T0123, bots: [engineer]}
`, nil)
	if n := cfg.Notify[0]; n.Account != "slack/acme" || n.Conversation != "C0OPS" || n.Team != "T0123" {
		t.Errorf("notify target %+v", n)
	}
	es := parseErrs(t, minimal+"notify:\n  - {name: Ops, account: slack/none, bots: [nobody]}\n  - {name: Ops, account: console/local}\n")
	for _, want := range []string{"notify[0].name", "notify[0].account", "notify[0].conversation", "notify[0].team", "notify[0].bots[0]"} {
		if !strings.Contains(es.Error(), want+":") {
			t.Errorf("errors lack %s:\n%v", want, es)
		}
	}
}
