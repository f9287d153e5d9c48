package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"openbot/core"
	"openbot/store/bolt"
)

// TestPeopleCommands: `openbot owner add` before the first start makes the
// store and the owner; `openbot pair CODE` lets in a waiting person once, a
// wrong or reused code changes nothing; `openbot people` lists them and
// `openbot people revoke` removes one.
func TestPeopleCommands(t *testing.T) {
	dir := t.TempDir()
	path := exampleConfig(t, dir)
	env := envOf(map[string]string{"OPENAI_API_KEY": "sk-test"})
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--config", path), nil, &out, &errb, env)
		return code, out.String() + errb.String()
	}
	if code, out := cli("owner", "add", "telegram:5", "--name", "Tess"); code != exitOK || !strings.Contains(out, "is now an owner: Tess (telegram:5)") {
		t.Fatalf("owner add: %d %s", code, out)
	}
	// A person writes and waits with a code (the engine's admission, as serve does it).
	st, err := bolt.Open(filepath.Join(dir, "data", "openbot.db"), bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := core.New(core.Options{Store: st, Agent: idleAgent{}, Bots: []core.BotProfile{{Handle: "eng"}}})
	if err != nil {
		t.Fatal(err)
	}
	ad, err := eng.Admit(context.Background(), core.Admission{Account: "telegram/main", Actor: "telegram:7", Name: "Tom"})
	st.Close()
	m := regexp.MustCompile(`/pair ([A-Z0-9]{8}) `).FindStringSubmatch(ad.Reply)
	if err != nil || m == nil {
		t.Fatalf("admission %+v, %v", ad, err)
	}
	if code, out := cli("pair", "ZZZZ9999"); code != exitFail || !strings.Contains(out, "nothing changed: that pairing code is not valid") {
		t.Fatalf("wrong code: %d %s", code, out)
	}
	if code, out := cli("pair", m[1]); code != exitOK || !strings.Contains(out, "let in Tom (telegram:7)") {
		t.Fatalf("pair: %d %s", code, out)
	}
	if code, _ := cli("pair", m[1]); code != exitFail {
		t.Fatal("a reused code was accepted")
	}
	if code, out := cli("people"); code != exitOK || !strings.Contains(out, "p1 Tess (owner): telegram:5") || !strings.Contains(out, "p2 Tom (member): telegram:7") {
		t.Fatalf("people: %d %s", code, out)
	}
	if code, out := cli("people", "revoke", "p2"); code != exitOK || !strings.Contains(out, "removed") {
		t.Fatalf("revoke: %d %s", code, out)
	}
	if code, out := cli("people"); code != exitOK || strings.Contains(out, "Tom") {
		t.Fatalf("people after revoke: %d %s", code, out)
	}
	if code, _ := cli("pair"); code != exitUsage {
		t.Fatal("pair without a code is not a usage error")
	}
}

// TestPolicyCommandCLI: `openbot policy ACCOUNT CHANNEL key=value` stores a
// channel policy (as admin.identity, an owner of the store it holds), a bad key
// changes nothing, `openbot policy` lists it, and `openbot policy remove`
// removes it (a second time names the refusal).
func TestPolicyCommandCLI(t *testing.T) {
	dir := t.TempDir()
	path := exampleConfig(t, dir)
	env := envOf(map[string]string{"OPENAI_API_KEY": "sk-test"})
	cli := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), append(args, "--config", path), nil, &out, &errb, env)
		return code, out.String() + errb.String()
	}
	if code, out := cli("owner", "add", "slack:T1:U1"); code != exitOK {
		t.Fatalf("owner add: %d %s", code, out)
	}
	if code, out := cli("policy", "slack/acme", "T1:C1", "tools_gone=shell"); code != exitUsage || !strings.Contains(out, "unknown key") {
		t.Fatalf("bad key: %d %s", code, out)
	}
	if code, out := cli("policy", "slack/acme", "T1:C1", "tools_removed=shell", "members=listed", "listed=slack:T1:U2"); code != exitOK || !strings.Contains(out, "tools_removed=shell") {
		t.Fatalf("set: %d %s", code, out)
	}
	if code, out := cli("policy"); code != exitOK || !strings.Contains(out, "slack/acme T1:C1: members=listed listed=slack:T1:U2 tools_removed=shell") {
		t.Fatalf("list: %d %s", code, out)
	}
	if code, out := cli("policy", "remove", "slack/acme", "T1:C1"); code != exitOK || !strings.Contains(out, "removed the stored policy of slack/acme T1:C1 (it was: members=listed") {
		t.Fatalf("remove: %d %s", code, out)
	}
	if code, out := cli("policy"); code != exitOK || !strings.Contains(out, "no stored channel policies") {
		t.Fatalf("list after remove: %d %s", code, out)
	}
	if code, out := cli("policy", "remove", "slack/acme", "T1:C1"); code != exitFail || !strings.Contains(out, "no policy is stored") {
		t.Fatalf("remove twice: %d %s", code, out)
	}
}
