package e2e

// A SIGKILL right after the 202 of an inbound webhook: the event was stored
// before the answer, so the next process posts it and runs the bot.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/slack/slacktest"
	"openbot/agents/openaitest"
)

// Environment of the child process of TestHooksSIGKILLAfterAccepted.
const (
	hooksChildEnv   = "OPENBOT_HOOKS_CHILD" // "serve": print the hooks URL, wait to be killed; "drain": finish the work
	hooksChildDB    = "OPENBOT_HOOKS_DB"
	hooksChildWS    = "OPENBOT_HOOKS_WS"
	hooksChildModel = "OPENBOT_HOOKS_MODEL"
	hooksChildSlack = "OPENBOT_HOOKS_SLACK"
)

// TestHooksKillChild is the openbot process of TestHooksSIGKILLAfterAccepted;
// it does nothing unless run as that test's child.
func TestHooksKillChild(t *testing.T) {
	mode := os.Getenv(hooksChildEnv)
	if mode == "" {
		t.Skip("runs only as the child of TestHooksSIGKILLAfterAccepted")
	}
	r := startHooks(t, os.Getenv(hooksChildDB), os.Getenv(hooksChildSlack), os.Getenv(hooksChildModel), os.Getenv(hooksChildWS))
	if mode == "serve" {
		fmt.Printf("HOOKS_URL=%s\n", r.srv.URL)
		time.Sleep(childDeadline) // until the parent kills this process
		t.Fatal("not killed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), childDeadline)
	defer cancel()
	if err := r.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestHooksSIGKILLAfterAccepted: the process is killed as soon as it answered
// 202 (Slack and the model were held, so nothing was posted or run yet); the
// next process on the same store posts the event, opens its thread and runs
// the bot once.
func TestHooksSIGKILLAfterAccepted(t *testing.T) {
	if os.Getenv(hooksChildEnv) != "" {
		t.Skip("the child does not spawn children")
	}
	killed := make(chan struct{})
	var once sync.Once
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply {
		select {
		case <-killed:
		default:
			<-killed // a call from the first process: it dies waiting
		}
		return openaitest.Text("Reviewed after the restart")
	})
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	defer fake.Close()
	release := fake.Hold("chat.postMessage")
	dir := t.TempDir()
	db, ws := filepath.Join(dir, "openbot.db"), filepath.Join(dir, "ws")
	ctx, cancel := context.WithTimeout(context.Background(), 2*childDeadline)
	defer cancel()
	spawn := func(mode string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHooksKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), hooksChildEnv+"="+mode, hooksChildDB+"="+db, hooksChildWS+"="+ws,
			hooksChildModel+"="+llm.URL(), hooksChildSlack+"="+fake.APIURL())
		return cmd
	}

	first := spawn("serve")
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var firstErr bytes.Buffer
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	var base string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if u, ok := strings.CutPrefix(sc.Text(), "HOOKS_URL="); ok {
			base = u
			break
		}
	}
	if base == "" {
		first.Process.Kill()
		t.Fatalf("the first process printed no hooks URL; stderr:\n%s", firstErr.String())
	}
	go io.Copy(io.Discard, out)
	body, err := os.ReadFile("testdata/github_pull_request_opened.json")
	if err != nil {
		t.Fatal(err)
	}
	if code := githubPost(t, base, body, "d-kill"); code != 202 {
		t.Fatalf("status %d, want 202", code)
	}
	if err := first.Process.Kill(); err != nil { // no goodbye
		t.Fatal(err)
	}
	if err := first.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first process ended with %v, want killed", err)
	}
	once.Do(func() { close(killed) })
	release()
	if n := len(fake.Messages()); n != 0 {
		t.Fatalf("the killed process posted %d messages", n)
	}

	var second bytes.Buffer
	drain := spawn("drain")
	drain.Stdout, drain.Stderr = &second, &second
	if err := drain.Run(); err != nil {
		t.Fatalf("second process: %v\n%s", err, second.String())
	}
	roots := slackIn(fake, "C1", "")
	var root, reply []slacktest.Message
	for _, m := range roots {
		switch {
		case strings.Contains(m.Text, "Pull request #2 opened"):
			root = append(root, m)
		case strings.Contains(m.Text, "Reviewed after the restart"):
			reply = append(reply, m)
		}
	}
	if len(root) != 1 || len(reply) != 1 || reply[0].ThreadTS != root[0].TS {
		t.Errorf("after the restart Slack has %+v; want the event once and the reply once in its thread", fake.Messages())
	}
}
