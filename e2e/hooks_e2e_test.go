package e2e

// Inbound webhooks end to end: real GitHub payloads, signed as GitHub signs
// them, POSTed to /hooks/<name>; the wired engine, the real agent loop against
// the fake model server, the Slack adapter against the fake Slack.

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"openbot/adapters/hooks"
	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/internal/runtest"
)

const (
	hookSecret   = "e2e-github-webhook-secret"
	bearerSecret = "e2e-alerts-bearer-token"
	sentrySecret = "e2e-sentry-client-secret"
)

type hooksRig struct {
	*proc
	srv  *httptest.Server // /hooks/
	logs *syncBuffer
}

// hookTriggers are the rig's triggers: GitHub pull requests into Slack channel
// C1 of team T1 for the engineer, one thread per PR; a bearer-token alert
// trigger limited to 2 runs an hour.
func hookTriggers() []hooks.Trigger {
	return []hooks.Trigger{
		{Name: "github", Kind: hooks.KindGitHub, Secret: hookSecret, Bot: "engineer",
			Account: "slack/acme", Platform: "slack", Conversation: slack.Conversation{Team: slacktest.DefaultTeam, Channel: "C1"}.Ref(),
			Thread: "github:{repository.full_name}#{pull_request.number}", Events: []string{"pull_request.opened", "pull_request.synchronize"},
			Message: "Pull request #{pull_request.number} {action} in {repository.full_name}: {pull_request.title} ({pull_request.html_url})"},
		{Name: "sentry", Kind: hooks.KindSentry, Secret: sentrySecret, Bot: "engineer",
			Account: "slack/acme", Platform: "slack", Conversation: slack.Conversation{Team: slacktest.DefaultTeam, Channel: "C4"}.Ref(),
			Thread: "sentry:{data.issue.id}", Events: []string{"issue.created", "issue.unresolved"}, When: map[string]string{"data.issue.level": "error"},
			Message: "Sentry {data.issue.shortId} ({data.issue.project.slug}): {data.issue.title}"},
		{Name: "alerts", Kind: hooks.KindBearer, Secret: bearerSecret, Bot: "engineer",
			Account: "slack/acme", Platform: "slack", Conversation: slack.Conversation{Team: slacktest.DefaultTeam, Channel: "C2"}.Ref(),
			RunsPer: 2, Per: time.Hour, MaxBody: 4096},
	}
}

// startHooks runs one process: engine (the real agent loop on the model server
// at modelURL), the Slack app on the Slack API at slackAPI and the hooks
// server, over the store at db ("" for a new one).
// mods adjust the engine's options and the agent's tools.
func startHooks(t testing.TB, db, slackAPI, modelURL, ws string, mods ...func(*core.Options, *agents.Registry)) *hooksRig {
	t.Helper()
	opts := core.Options{Files: core.FileLimits{Dir: func(id core.ThreadID) string { return filepath.Join(ws, strconv.Itoa(int(id))) }}}
	reg := agents.NewRegistry()
	for _, m := range mods {
		m(&opts, reg)
	}
	ag, err := agents.New(agents.Options{
		Providers: map[string]agents.Provider{"default": {BaseURL: modelURL, APIKey: "test-key", Model: "test-model"}},
		Registry:  reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	opts.Agent = ag
	r := &hooksRig{logs: &syncBuffer{}}
	r.proc = openProc(t, db, opts)
	ad, err := slack.New(slack.Options{Name: "acme", Bot: "*", Mode: "http", BotToken: "xoxb-e2e", SigningSecret: slackSecret,
		APIURL: slackAPI, Bots: e2eTeam, Engine: r.eng, State: slack.StoreState(r.st)})
	if err != nil {
		t.Fatal(err)
	}
	hs, err := hooks.New(hooks.Options{Engine: r.eng, Triggers: hookTriggers(), Logger: slog.New(slog.NewTextHandler(r.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	r.srv = httptest.NewServer(hs)
	t.Cleanup(r.srv.Close)
	r.run(ad)
	return r
}

// github POSTs a testdata payload as GitHub delivers it and returns the status.
func (r *hooksRig) github(t testing.TB, file, delivery string) int {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return githubPost(t, r.srv.URL, body, delivery)
}

func githubPost(t testing.TB, base string, body []byte, delivery string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/hooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/e2e")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hooks.Sign(hookSecret, body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// slackIn returns the fake Slack's messages in channel whose text has sub.
func slackIn(fake *slacktest.Server, channel, sub string) []slacktest.Message {
	var out []slacktest.Message
	for _, m := range fake.Messages() {
		if m.Channel == channel && strings.Contains(m.Text, sub) {
			out = append(out, m)
		}
	}
	return out
}

// TestHooksGitHubPullRequestOpensASlackThread: a PR-opened event opens a Slack
// thread (the event at the top of the channel, the bot's reply under it) and
// runs the bot, who can read the payload; a second event on the same PR joins
// that thread; a redelivered delivery id starts no second run.
func TestHooksGitHubPullRequestOpensASlackThread(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(req openaitest.Request) openaitest.Reply {
		return openaitest.Text("Looking at PR reply " + strconv.Itoa(len(llm.Requests())))
	})
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	ws := t.TempDir()
	r := startHooks(t, "", fake.APIURL(), llm.URL(), ws)

	if code := r.github(t, "github_pull_request_opened.json", "d-opened"); code != http.StatusAccepted {
		t.Fatalf("opened: status %d, want 202", code)
	}
	r.idle()
	roots := slackIn(fake, "C1", "Pull request #2 opened in Codertocat/Hello-World")
	if len(roots) != 1 || roots[0].ThreadTS != "" {
		t.Fatalf("the event in Slack: %+v, want one top-level message", roots)
	}
	root := roots[0].TS
	replies := slackIn(fake, "C1", "Looking at PR")
	if len(replies) != 1 || replies[0].ThreadTS != root {
		t.Fatalf("bot replies %+v, want one in the thread of %s", replies, root)
	}
	reqs := llm.Requests()
	if len(reqs) != 1 {
		t.Fatalf("model calls %d, want 1", len(reqs))
	}
	prompt := lastUser(reqs[0])
	if !strings.Contains(prompt, "Update the README with new information.") || !strings.Contains(prompt, "untrusted") ||
		!strings.Contains(prompt, "payload.json") || !strings.Contains(prompt, "saved at inbox/") {
		t.Errorf("the bot's prompt lacks the event or the saved payload:\n%s", prompt)
	}
	var ev core.Message
	r.view(func(tx core.ReadTx) error {
		ms, err := tx.Messages(r.threadOf("Pull request #2 opened"), 0, 0)
		ev = ms[0]
		return err
	})
	if ev.Sender != "trigger:github" {
		t.Errorf("the event's actor is %q, want trigger:github", ev.Sender)
	}
	saved, err := os.ReadFile(filepath.Join(ws, strconv.Itoa(int(ev.Thread)), ev.Attachments[0].Path))
	if want, _ := os.ReadFile("testdata/github_pull_request_opened.json"); err != nil || !bytes.Equal(saved, want) {
		t.Errorf("the payload in the workspace (%v) is not the raw body", err)
	}

	if code := r.github(t, "github_pull_request_synchronize.json", "d-sync"); code != http.StatusAccepted {
		t.Fatalf("synchronize: status %d", code)
	}
	r.idle()
	sync := slackIn(fake, "C1", "Pull request #2 synchronize")
	if len(sync) != 1 || sync[0].ThreadTS != root {
		t.Errorf("the second event %+v, want it in the thread of %s", sync, root)
	}
	if replies := slackIn(fake, "C1", "Looking at PR"); len(replies) != 2 || replies[1].ThreadTS != root {
		t.Errorf("bot replies %+v, want two in the thread", replies)
	}
	for _, m := range fake.Messages() {
		if m.Channel == "C1" && m.TS != root && m.ThreadTS != root {
			t.Errorf("message outside the PR's thread: %+v", m)
		}
	}

	// A person answering in the Slack thread, addressing nobody, reaches the
	// bot in the same openbot thread.
	if code := slackPost(t, r.hook.URL+"/slack/acme/events", slackEvent(t, "message", "C1", "channel", "U0ALICE", "1767300100.000001", root, "what changed in it?")); code != http.StatusOK {
		t.Fatalf("Slack reply: status %d", code)
	}
	r.idle()
	if replies := slackIn(fake, "C1", "Looking at PR"); len(replies) != 3 || replies[2].ThreadTS != root {
		t.Errorf("bot replies %+v, want a third one in the thread, to the person", replies)
	}
	if got := r.threadOf("what changed in it?"); got != ev.Thread {
		t.Errorf("the person's reply is in thread %d, want the PR's thread %d", got, ev.Thread)
	}

	before := len(fake.Messages())
	if code := r.github(t, "github_pull_request_synchronize.json", "d-sync"); code != http.StatusAccepted {
		t.Fatalf("redelivery: status %d, want 202", code)
	}
	r.idle()
	if n := len(llm.Requests()); n != 3 {
		t.Errorf("model calls after the redelivery %d, want 3", n)
	}
	if n := len(fake.Messages()); n != before {
		t.Errorf("the redelivery posted %d more messages", n-before)
	}
}

// TestHooksRefusalsStartNoRun: a bad signature, an expired timestamp, a body
// over the cap and an unknown trigger name get the same answer, a WARN line
// each, and no run.
func TestHooksRefusalsStartNoRun(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("should not run") })
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	r := startHooks(t, "", fake.APIURL(), llm.URL(), t.TempDir())
	body, _ := os.ReadFile("testdata/github_pull_request_opened.json")
	type answer struct {
		code int
		body string
	}
	do := func(req *http.Request) answer {
		code, body := runtest.Do(t, req)
		return answer{code, body}
	}
	bad, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/hooks/github", bytes.NewReader(body))
	bad.Header.Set("X-GitHub-Event", "pull_request")
	bad.Header.Set("X-Hub-Signature-256", "sha256="+hooks.Sign("not-the-secret", body))
	unknown, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/hooks/gitlab", bytes.NewReader(body))
	unknown.Header.Set("X-Hub-Signature-256", "sha256="+hooks.Sign(hookSecret, body))
	big, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/hooks/alerts", strings.NewReader(`{"pad":"`+strings.Repeat("x", 8000)+`"}`))
	big.Header.Set("Authorization", "Bearer "+bearerSecret)
	// The hmac kind's window: an alert trigger signed with a stale timestamp.
	hs, err := hooks.New(hooks.Options{Engine: r.eng, Logger: slog.New(slog.NewTextHandler(r.logs, nil)), Triggers: []hooks.Trigger{{
		Name: "deploys", Kind: hooks.KindHMAC, Secret: hookSecret, Bot: "engineer", Account: "slack/acme", Platform: "slack",
		Conversation: slack.Conversation{Team: slacktest.DefaultTeam, Channel: "C3"}.Ref()}}})
	if err != nil {
		t.Fatal(err)
	}
	hmacSrv := httptest.NewServer(hs)
	defer hmacSrv.Close()
	stale := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	expired, _ := http.NewRequest(http.MethodPost, hmacSrv.URL+"/hooks/deploys", strings.NewReader(`{"event":"deploy"}`))
	expired.Header.Set("X-Signature-Timestamp", stale)
	expired.Header.Set("X-Signature", "sha256="+hooks.Sign(hookSecret, []byte(stale+`.{"event":"deploy"}`)))

	var first answer
	for i, tc := range []struct {
		name string
		req  *http.Request
	}{{"bad signature", bad}, {"expired timestamp", expired}, {"body over the cap", big}, {"unknown trigger", unknown}} {
		warns := strings.Count(r.logs.String(), "level=WARN")
		got := do(tc.req)
		if i == 0 {
			first = got
		}
		if got != first || got.code != http.StatusForbidden {
			t.Errorf("%s: answer %+v, want the same refusal as the others (%+v)", tc.name, got, first)
		}
		if n := strings.Count(r.logs.String(), "level=WARN") - warns; n != 1 {
			t.Errorf("%s: %d WARN lines, want 1", tc.name, n)
		}
	}
	r.idle()
	if n := len(llm.Requests()); n != 0 {
		t.Errorf("model calls %d, want none", n)
	}
	if n := len(r.stored()); n != 0 {
		t.Errorf("%d messages stored, want none", n)
	}
	if n := len(fake.Messages()); n != 0 {
		t.Errorf("%d Slack messages, want none", n)
	}
}

// TestHooksBurstOverRateLimit: five alerts at once on a trigger allowed two
// runs an hour: all five are stored and posted, two runs start.
func TestHooksBurstOverRateLimit(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("on it") })
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	r := startHooks(t, "", fake.APIURL(), llm.URL(), t.TempDir())
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/hooks/alerts", strings.NewReader(`{"event":"disk_full","host":"db-`+strconv.Itoa(i)+`"}`))
		req.Header.Set("Authorization", "Bearer "+bearerSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("alert %d: status %d", i, resp.StatusCode)
		}
	}
	r.idle()
	if n := len(llm.Requests()); n != 2 {
		t.Errorf("model calls %d, want 2 (the rate limit)", n)
	}
	events := 0
	for _, m := range r.stored() {
		if m.Sender == "trigger:alerts" {
			events++
		}
	}
	if events != 5 || len(slackIn(fake, "C2", "Event disk_full from alerts")) != 5 {
		t.Errorf("%d events stored, %d posted; want all 5 each", events, len(slackIn(fake, "C2", "Event disk_full")))
	}
	if n := strings.Count(r.logs.String(), "over its rate limit"); n != 3 {
		t.Errorf("%d rate-limit WARN lines, want 3", n)
	}
}

// TestHooksSentryIssueOpensASlackThread: Sentry's documented issue.created
// payload, signed as Sentry signs it, opens a Slack thread and runs the bot;
// a redelivery (same Request-ID) starts nothing.
func TestHooksSentryIssueOpensASlackThread(t *testing.T) {
	llm := openaitest.New(t)
	llm.Handle(func(openaitest.Request) openaitest.Reply { return openaitest.Text("Investigating the ReferenceError") })
	fake := slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"})
	t.Cleanup(fake.Close)
	r := startHooks(t, "", fake.APIURL(), llm.URL(), t.TempDir())
	body, err := os.ReadFile("testdata/sentry_issue_created.json")
	if err != nil {
		t.Fatal(err)
	}
	send := func() int {
		req, _ := http.NewRequest(http.MethodPost, r.srv.URL+"/hooks/sentry", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Request-ID", "7b9c2f4e-0d1a-4c57-9a3e-2f6d8e1b5c90")
		req.Header.Set("Sentry-Hook-Resource", "issue")
		req.Header.Set("Sentry-Hook-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
		req.Header.Set("Sentry-Hook-Signature", hooks.Sign(sentrySecret, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(); code != http.StatusAccepted {
		t.Fatalf("status %d, want 202", code)
	}
	r.idle()
	root := slackIn(fake, "C4", "Sentry FRONT-END-9 (front-end): ReferenceError: blooopy is not defined")
	reply := slackIn(fake, "C4", "Investigating")
	if len(root) != 1 || len(reply) != 1 || reply[0].ThreadTS != root[0].TS {
		t.Fatalf("Slack has %+v; want the issue at the top of C4 and the reply under it", fake.Messages())
	}
	if code := send(); code != http.StatusAccepted {
		t.Fatalf("redelivery: status %d", code)
	}
	r.idle()
	if n := len(llm.Requests()); n != 1 {
		t.Errorf("model calls %d, want 1", n)
	}
}
