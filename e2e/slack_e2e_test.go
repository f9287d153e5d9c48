package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"openbot/adapters/slack"
	"openbot/adapters/slack/slacktest"
	"openbot/core"
)

const slackSecret = "e2e-signing-secret"

type slackRig struct {
	*proc
	fake  *slacktest.Server
	agent *scripted
	db    string
}

// startSlack runs the engine with one whole-team Slack app in HTTP (Events API) mode
// against the fake Slack; events are POSTed, signed, to its mounted handler.
func startSlack(t *testing.T, script map[string]func(*core.Job) string) *slackRig {
	t.Helper()
	r := &slackRig{fake: slacktest.New(slacktest.Options{BotToken: "xoxb-e2e"}), agent: &scripted{fn: script, calls: map[string][]*core.Job{}},
		db: filepath.Join(t.TempDir(), "openbot.db")}
	t.Cleanup(r.fake.Close)
	r.open(t)
	return r
}

// open runs a fresh engine and Slack adapter on the store; after stop it
// restarts the process.
func (r *slackRig) open(t *testing.T) {
	t.Helper()
	r.proc = openProc(t, r.db, core.Options{Agent: r.agent})
	ad, err := slack.New(slack.Options{Name: "acme", Bot: "*", Mode: "http", BotToken: "xoxb-e2e", SigningSecret: slackSecret, DMPolicy: core.DMOpen,
		APIURL: r.fake.APIURL(), Bots: e2eTeam, Engine: r.eng, State: slack.StoreState(r.st)})
	if err != nil {
		t.Fatal(err)
	}
	r.run(ad)
	if _, err := r.fake.WaitCalls(r.ctx(), "auth.test", 1); err != nil {
		t.Fatal(err)
	}
}

// post sends an Events API body, signed now, with optional extra headers.
func (r *slackRig) post(t *testing.T, body []byte, hdr ...string) int {
	t.Helper()
	return slackPost(t, r.hook.URL+"/slack/acme/events", body, hdr...)
}

// slackPost POSTs a JSON body to url signed as Slack signs it now, with
// optional extra headers (name, value, ...), and returns the HTTP status.
func slackPost(t testing.TB, url string, body []byte, hdr ...string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	slacktest.Sign(req.Header, body, slackSecret, time.Now())
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func slackFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "adapters", "slack", "testdata", "fixtures", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSlackMentionThenThreadReplyContinues(t *testing.T) {
	r := startSlack(t, nil)
	if code := r.post(t, slackFixture(t, "events_api_app_mention_channel.json")); code != 200 {
		t.Fatalf("events POST = %d", code)
	}
	r.idle()
	if code := r.post(t, slackFixture(t, "events_api_message_thread_reply.json")); code != 200 {
		t.Fatalf("thread reply POST = %d", code)
	}
	r.idle()
	posts := r.fake.CallsTo("chat.postMessage")
	if len(posts) != 2 {
		t.Fatalf("chat.postMessage calls = %d, want 2", len(posts))
	}
	for _, p := range posts {
		if p.Form.Get("channel") != "C0TEST001" || p.Form.Get("thread_ts") != "1767225600.000100" {
			t.Errorf("post to %q thread_ts %q, want C0TEST001 / 1767225600.000100", p.Form.Get("channel"), p.Form.Get("thread_ts"))
		}
	}
	runs := r.agent.runs("chief_of_staff")
	if len(runs) != 2 || runs[0].Thread.ID != runs[1].Thread.ID {
		t.Fatalf("the unmentioned thread reply must continue the same openbot thread (runs %d)", len(runs))
	}
}

func TestSlackHandoffBothRepliesInOneThread(t *testing.T) {
	r := startSlack(t, map[string]func(*core.Job) string{
		"chief_of_staff": func(j *core.Job) string {
			if j.Triggers[0].Sender == core.BotActorID("engineer") {
				return "Thanks, all set."
			}
			return "@engineer please check the failing build on main and report back."
		},
		"engineer": func(*core.Job) string { return "@chief_of_staff the build fails in step 3; fixed." },
	})
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"))
	r.idle()
	posts := r.fake.CallsTo("chat.postMessage")
	if len(posts) != 3 {
		t.Fatalf("posts = %d, want 3 (chief, engineer, chief)", len(posts))
	}
	for _, p := range posts {
		if p.Form.Get("thread_ts") != "1767225600.000100" {
			t.Errorf("post outside the Slack thread: %v", p.Form)
		}
	}
	if u := posts[1].Form.Get("username"); !strings.Contains(u, "Engineer") {
		t.Errorf("the \"*\" app must post the engineer's reply under its name; username = %q", u)
	}
}

func TestSlackSameMessageThreeTimesAnsweredOnce(t *testing.T) {
	r := startSlack(t, nil)
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"))
	r.post(t, slackFixture(t, "events_api_message_channel_twin_of_mention.json"))
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"), "X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout")
	r.idle()
	if n := len(r.agent.runs("chief_of_staff")); n != 1 {
		t.Fatalf("runs = %d, want 1", n)
	}
	if n := len(r.fake.CallsTo("chat.postMessage")); n != 1 {
		t.Fatalf("replies = %d, want 1", n)
	}
	var humans int
	for _, m := range r.stored() {
		if m.Origin != nil {
			humans++
		}
	}
	if humans != 1 {
		t.Fatalf("stored human messages = %d, want 1", humans)
	}
}

func TestSlackRateLimitedPostWaits(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 2s for Retry-After")
	}
	r := startSlack(t, nil)
	r.fake.FailNext("chat.postMessage", http.StatusTooManyRequests, "ratelimited", 2*time.Second)
	r.post(t, slackFixture(t, "events_api_app_mention_channel.json"))
	r.idle()
	posts := r.fake.CallsTo("chat.postMessage")
	if len(posts) != 2 {
		t.Fatalf("chat.postMessage calls = %d, want 2 (the 429, then one reply)", len(posts))
	}
	if gap := posts[1].At.Sub(posts[0].At); gap < 2*time.Second {
		t.Fatalf("retried after %v, want Retry-After 2s", gap)
	}
}
