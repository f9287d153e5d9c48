package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
	"openbot/store/bolt"
)

const consoleToken = "console-token-0123456789"

// consoleConfig writes the example config with a fixed free port (the CLI dials
// http.listen), the admin token from $OPENBOT_ADMIN_TOKEN, admin.identity
// console:you and console:you as the global approver. It returns the config
// path, the listen address and the environment.
func consoleConfig(t *testing.T, dir string, llm *openaitest.Server) (string, string, map[string]string) {
	t.Helper()
	path := exampleConfig(t, dir, "\napprovers: [\"console:you\"]\n")
	addr := freeAddr(t)
	data, _ := os.ReadFile(path)
	text := strings.Replace(string(data), "listen: 127.0.0.1:0", "listen: "+addr, 1)
	text = strings.Replace(text, `identity: ""`, `identity: "console:you"`, 1)
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, addr, map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENBOT_ADMIN_TOKEN": consoleToken}
}

// startServe runs serve on the config until the test ends and waits until it
// listens; it returns the log.
func startServe(t *testing.T, path string, env map[string]string) *lockedBuffer {
	t.Helper()
	_, logs, _ := serveInProcess(t, testConfig(t, path, env), "serve")
	return logs
}

// seedConsoleStore writes a thread with a message, a completed run of
// @engineer with a model call and a shell tool call, and a run waiting on a
// pending approval, as an earlier serve would have.
func seedConsoleStore(t *testing.T, dir string) {
	t.Helper()
	st, err := bolt.Open(filepath.Join(dir, "data", "openbot.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	err = st.Update(context.Background(), func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "console:main", Title: "disk check", Created: at,
			Participants: []core.ActorID{"console:you", "bot:engineer"}, Bindings: []core.Binding{{Platform: "console", Conversation: "main"}}})
		if err != nil {
			return err
		}
		if _, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: "console:you", SenderName: "you", Text: "@engineer check the disk", Created: at}); err != nil {
			return err
		}
		run, err := tx.PutRun(core.Run{Bot: "bot:engineer", Thread: th.ID, Status: core.RunCompleted, Created: at, Started: at, Ended: at.Add(1500 * time.Millisecond),
			Usage: core.Usage{PromptTokens: 42, CompletionTokens: 7, ModelCalls: 1}})
		if err != nil {
			return err
		}
		if _, _, err := tx.PutUsage(core.UsageEntry{Key: core.UsageKey(run.ID, 1), At: at, Bot: "engineer", Thread: th.ID, Run: run.ID,
			Model: "gpt-x", InputTokens: 42, OutputTokens: 7, CostMicros: 123}); err != nil {
			return err
		}
		for _, e := range []core.RunEvent{
			{Run: run.ID, Type: "model_call", Payload: json.RawMessage(`{"model":"gpt-x","prompt_tokens":42,"completion_tokens":7,"duration_ms":120,"tool_calls":1}`), At: at},
			{Run: run.ID, Type: "tool_call", Payload: json.RawMessage(`{"id":"c1","name":"shell","args":"{\"command\":\"df -h\"}"}`), At: at},
			{Run: run.ID, Type: "tool_result", Payload: json.RawMessage(`{"id":"c1","name":"shell","result":"/dev/sda1 40%","duration_ms":15}`), At: at},
		} {
			if _, err := tx.AppendRunEvent(e); err != nil {
				return err
			}
		}
		if err := tx.AppendActivity(core.Activity{Event: "run.completed", Summary: "@engineer completed run 1", Thread: th.ID, Actor: "bot:engineer", Run: run.ID, At: at}); err != nil {
			return err
		}
		waiting, err := tx.PutRun(core.Run{Bot: "bot:engineer", Thread: th.ID, Status: core.RunWaitingHuman, Created: at, Started: at,
			Checkpoint: json.RawMessage(`{}`), Question: 1})
		if err != nil {
			return err
		}
		_, err = tx.PutQuestion(core.Question{Token: "tok123456789", Kind: core.QuestionApproval, Run: waiting.ID, Bot: "bot:engineer", Thread: th.ID,
			Tool: "shell", Args: json.RawMessage(`{"command":"rm -rf /tmp/x"}`), Status: core.QuestionPending, Choice: -1, Created: at, Expires: at.Add(1000 * time.Hour)})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestConsoleAPIAuth: the API on serve's listener refuses a request without the
// admin token or with a wrong one (401, nothing else said) and serves the right
// one; with no admin.token it is off (404) and serve says so at start.
func TestConsoleAPIAuth(t *testing.T) {
	llm := openaitest.New(t)
	dir := t.TempDir()
	path, addr, env := consoleConfig(t, dir, llm)
	var logs *lockedBuffer
	var stream *http.Response
	sctx, scancel := context.WithCancel(context.Background())
	t.Cleanup(func() { // after serve stopped (cleanups run last first)
		if strings.Contains(logs.String(), "http shutdown") {
			t.Errorf("an open event stream held up the HTTP shutdown:\n%s", logs.String())
		}
		scancel()
		if stream != nil {
			stream.Body.Close()
		}
	})
	logs = startServe(t, path, env)
	// An event stream left open: serve's shutdown ends it rather than waiting.
	sreq, _ := http.NewRequestWithContext(sctx, http.MethodGet, "http://"+addr+"/api/v1/events", nil)
	sreq.Header.Set("Authorization", "Bearer "+consoleToken)
	stream, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	if stream.StatusCode != http.StatusOK || stream.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events = %d %s", stream.StatusCode, stream.Header.Get("Content-Type"))
	}
	for _, tc := range []struct {
		name, auth string
		code       int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"wrong token", "Bearer " + consoleToken + "x", http.StatusUnauthorized},
		{"right token", "Bearer " + consoleToken, http.StatusOK},
	} {
		for _, p := range []string{"/api/v1/bots", "/api/v1/threads", "/api/v1/runs", "/api/v1/questions", "/api/v1/activity", "/api/v1/usage", "/api/v1/"} {
			req, _ := http.NewRequest(http.MethodGet, "http://"+addr+p, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			code, body := runtest.Do(t, req)
			if code != tc.code {
				t.Errorf("%s %s = %d %s, want %d", tc.name, p, code, body, tc.code)
			}
			if tc.code == http.StatusUnauthorized && string(body) != "unauthorized\n" {
				t.Errorf("%s %s: refusal says %q", tc.name, p, body)
			}
			if tc.code == http.StatusOK && p == "/api/v1/bots" && !strings.Contains(string(body), `"handle":"engineer"`) {
				t.Errorf("bots = %s", body)
			}
		}
	}

	// No token: off, and said at start.
	dir2 := t.TempDir()
	path2, addr2, env2 := consoleConfig(t, dir2, llm)
	delete(env2, "OPENBOT_ADMIN_TOKEN")
	logs2 := startServe(t, path2, env2)
	resp, err := http.Get("http://" + addr2 + "/api/v1/bots")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("no admin.token: /api/v1/bots = %d, want 404", resp.StatusCode)
	}
	if !strings.Contains(logs2.String(), "admin endpoints are off") || !strings.Contains(logs2.String(), "/api/v1/") {
		t.Errorf("serve did not say the API is off:\n%s", logs2.String())
	}
}

// TestInspectCommands: threads, runs, run ID and activity read the store
// directly, and read the same through the running server's API while serve holds
// the store; activity --follow, started before serve, lets serve take the store
// and prints a line written while it follows (the console's answer to a pending
// approval, recorded with the admin identity).
func TestInspectCommands(t *testing.T) {
	llm := openaitest.New(t)
	dir := t.TempDir()
	path, addr, env := consoleConfig(t, dir, llm)
	seedConsoleStore(t, dir)
	checks := map[string][]string{
		"threads":  {"disk check", "console", "@engineer"},
		"runs":     {"completed", "engineer", "42+7", "waiting_human"},
		"run":      {"run 1 of @engineer in thread 1: completed", "model gpt-x: 42+7 tokens", `tool shell {"command":"df -h"} -> /dev/sda1 40%`},
		"activity": {"run.completed thread 1 run 1: @engineer completed run 1"},
		"usage":    {"BOT", "engineer  1     1      42", "0.000123 USD", "%)", "total"},
	}
	args := func(cmd string) []string {
		a := []string{cmd, "--config", path}
		switch cmd {
		case "run":
			a = []string{"run", "1", "--config", path}
		case "runs":
			a = append(a, "--thread", "1")
		case "usage":
			a = append(a, "--by", "bot", "--since", "2026-11-01")
		}
		return a
	}
	check := func(how string) {
		for cmd, wants := range checks {
			r := runFor(t, args(cmd), nil, env)
			if r.code != 0 {
				t.Fatalf("%s %s: exit %d: %s", how, cmd, r.code, r.stderr)
			}
			for _, w := range wants {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("%s %s lacks %q:\n%s", how, cmd, w, r.stdout)
				}
			}
		}
	}
	check("direct")
	// Follow from before serve starts: following must not keep serve out of the store.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb lockedBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"activity", "--follow", "--config", path}, nil, &out, &errb, envOf(env))
	}()
	waitUntil(t, "the follower's first lines", func() bool { return strings.Contains(out.String(), "run.completed") })
	startServe(t, path, env)
	check("through the server")
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/api/v1/questions/1/answer", strings.NewReader(`{"decision":"reject"}`))
	req.Header.Set("Authorization", "Bearer "+consoleToken)
	if code, body := runtest.Do(t, req); code != http.StatusOK || !strings.Contains(body, `"answered_by":"console:you"`) || strings.Contains(body, "tok123456789") {
		t.Fatalf("answer = %d %s", code, body)
	}
	waitUntil(t, "the answer in the followed log", func() bool {
		return strings.Contains(out.String(), "question.answered") && strings.Contains(out.String(), "via admin/api")
	})
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("activity --follow exit %d: %s", code, errb.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("activity --follow did not stop")
	}
	if strings.Count(out.String(), "run.completed thread 1 run 1") != 1 {
		t.Errorf("a line printed twice:\n%s", out.String())
	}
}
