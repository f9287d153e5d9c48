package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/config"
	"openbot/core"
	"openbot/store/bolt"
)

const triggersConfig = `
llm:
  default: {base_url: "http://127.0.0.1:1/v1", model: m}
bots:
  - {handle: engineer}
slack:
  - {name: acme, bot: "*", bot_token: x, app_token: y}
triggers:
  - {name: github, kind: github, secret: "0123456789abcdef", bot: engineer, post_to: {account: acme, conversation: C1, team: T1},
     thread: "github:{repository.full_name}#{pull_request.number}", events: [pull_request.opened], rate_limit: {runs: 10, per: 1h}}
  - {name: alerts, kind: bearer, secret: "fedcba9876543210", bot: engineer, post_to: {account: slack/acme, conversation: C2, team: T1}}
notify:
  - {name: ops, account: acme, conversation: COPS, team: T1}
`

// Each trigger's and notify target's conversation is built with its adapter's id codec.
func TestHookTriggersTargets(t *testing.T) {
	cfg, err := config.Parse([]byte(triggersConfig), nil)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := hookTriggers(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if g := ts[0]; g.Account != "slack/acme" || g.Platform != "slack" || g.Conversation != "T1:C1" || g.RunsPer != 10 || g.Per != time.Hour {
		t.Errorf("trigger = %+v", g)
	}
	ns, err := notifyTargets(cfg)
	if err != nil || len(ns) != 1 || ns[0].Conversation != "T1:COPS" || ns[0].Account != "slack/acme" {
		t.Errorf("notify targets = %+v (%v)", ns, err)
	}
}

// `openbot triggers` lists every trigger and its last stored events.
func TestTriggersCommand(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	db := filepath.Join(dir, "openbot.db")
	if err := os.WriteFile(path, []byte(triggersConfig+"store: {path: "+db+"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runFor(t, []string{"triggers", "--config", path}, strings.NewReader(""), nil)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"NAME", "/hooks/github", "github:{repository.full_name}#{pull_request.number}", "10 runs/1h0m0s",
		"/hooks/alerts", "(a new thread per event)", "no deliveries yet"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
	st, err := bolt.Open(db, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	err = st.Update(context.Background(), func(tx core.Tx) error {
		return tx.AppendActivity(core.Activity{Event: "message.ingested", Actor: "trigger:github", Thread: 7, At: at, Summary: "github in slack woke [engineer]"})
	})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	r = runFor(t, []string{"triggers", "--config", path}, strings.NewReader(""), nil)
	for _, want := range []string{"LAST DELIVERIES", "github  ", "2026-12-02T10:00:00Z", "github in slack woke [engineer]", "alerts  "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r.stdout)
		}
	}
}
