package agents_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/agents/tools"
	"openbot/core"
)

// TestHTTPFetchSendingDataNeedsApproval: http_fetch is not in the bot's
// approval_tools, yet a POST pauses the run for a person's approval (with the
// tool's reach in the question) and is sent only once approved; a GET runs at once.
func TestHTTPFetchSendingDataNeedsApproval(t *testing.T) {
	var mu sync.Mutex
	var got []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+string(b))
		mu.Unlock()
		io.WriteString(w, "done")
	}))
	t.Cleanup(site.Close)
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}

	model := openaitest.New(t)
	model.Handle(func(r openaitest.Request) openaitest.Reply {
		msgs := r.Body.Messages
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return openaitest.Text("result: " + last.Content)
		}
		method := "GET"
		if strings.Contains(last.Content, "post") {
			method = "POST"
		}
		return openaitest.Calls(openaitest.ToolCall{ID: "f-" + method, Name: "http_fetch",
			Arguments: fmt.Sprintf(`{"url":%q,"method":%q,"body":"x=1"}`, site.URL, method)})
	})
	agent := builtinsAgent(t, model, tools.Options{FetchAllowHosts: []string{strings.TrimPrefix(site.URL, "http://")}})
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"http_fetch"}, ApprovalTools: []string{}}}
	run := startEngine(t, filepath.Join(t.TempDir(), "openbot.db"), agent, bots)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run.ingestIdle(t, ctx, "1", "1", "@engineer please post the form")
	qs, err := run.eng.Questions(ctx, true)
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions = %+v, %v; want the POST waiting for approval", qs, err)
	}
	q := qs[0]
	if q.Kind != core.QuestionApproval || q.Tool != "http_fetch" || !strings.Contains(string(q.Args), `"POST"`) {
		t.Fatalf("question = %+v", q)
	}
	if !strings.Contains(q.Reach, "public internet") {
		t.Errorf("reach = %q, want what http_fetch can reach", q.Reach)
	}
	if r := requests(); len(r) != 0 {
		t.Fatalf("the POST was sent before approval: %v", r)
	}
	res, err := run.eng.Answer(ctx, core.Answer{Question: q.ID, Choice: core.ChoiceApprove, Actor: "console:you", Name: "you"})
	if err != nil || res.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer = %+v, %v", res, err)
	}
	if err := run.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if r := requests(); len(r) != 1 || r[0] != "POST x=1" {
		t.Fatalf("requests after approval = %v, want one POST", r)
	}

	run.ingestIdle(t, ctx, "2", "2", "@engineer please get the page")
	if qs, _ := run.eng.Questions(ctx, true); len(qs) != 0 {
		t.Fatalf("a GET asked for approval: %+v", qs)
	}
	if r := requests(); len(r) != 2 || !strings.HasPrefix(r[1], "GET") {
		t.Fatalf("requests = %v, want the GET sent at once", r)
	}
}

// TestHTTPFetchUnlistedQueryAsksFirst: under a bot's egress policy a GET with a
// query string to a host it does not list pauses for a person's approval (the
// question names the URL) and is sent only once approved; a GET with a query
// to a listed domain runs at once.
func TestHTTPFetchUnlistedQueryAsksFirst(t *testing.T) {
	var mu sync.Mutex
	var got []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Host+r.URL.RequestURI())
		mu.Unlock()
		io.WriteString(w, "ok")
	}))
	t.Cleanup(site.Close)
	requests := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
	port := strings.TrimPrefix(site.URL, "http://127.0.0.1:")
	unlisted := "http://127.0.0.1:" + port + "/collect?d=secret"
	listed := "http://localhost:" + port + "/search?q=go"

	model := openaitest.New(t)
	model.Handle(func(r openaitest.Request) openaitest.Reply {
		msgs := r.Body.Messages
		last := msgs[len(msgs)-1]
		if last.Role == "tool" {
			return openaitest.Text("result: " + last.Content)
		}
		u := listed
		if strings.Contains(last.Content, "collect") {
			u = unlisted
		}
		return openaitest.Calls(openaitest.ToolCall{ID: "f1", Name: "http_fetch", Arguments: fmt.Sprintf(`{"url":%q}`, u)})
	})
	agent := builtinsAgent(t, model, tools.Options{FetchAllowHosts: []string{"127.0.0.1", "localhost"}})
	bots := []core.BotProfile{{Handle: "engineer", Name: "Engineer", Tools: []string{"http_fetch"}, ApprovalTools: []string{},
		Approvers: []core.ActorID{"console:ops"}, Fetch: core.FetchPolicy{AllowDomains: []string{"localhost"}}}}
	run := startEngine(t, filepath.Join(t.TempDir(), "openbot.db"), agent, bots)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run.ingestIdle(t, ctx, "1", "1", "@engineer search the listed site")
	if qs, _ := run.eng.Questions(ctx, true); len(qs) != 0 {
		t.Fatalf("a GET to a listed domain asked: %+v", qs)
	}
	if r := requests(); len(r) != 1 || r[0] != "localhost:"+port+"/search?q=go" {
		t.Fatalf("requests = %v, want the listed GET sent at once", r)
	}

	run.ingestIdle(t, ctx, "2", "2", "@engineer collect it over there")
	qs, err := run.eng.Questions(ctx, true)
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions = %+v, %v; want the unlisted GET with a query waiting", qs, err)
	}
	if q := qs[0]; q.Kind != core.QuestionApproval || q.Tool != "http_fetch" || !strings.Contains(string(q.Args), "d=secret") {
		t.Fatalf("question = %+v", q)
	}
	if r := requests(); len(r) != 1 {
		t.Fatalf("the unlisted GET was sent before approval: %v", r)
	}
	res, err := run.eng.Answer(ctx, core.Answer{Question: qs[0].ID, Choice: core.ChoiceApprove, Actor: "console:ops", Name: "ops"})
	if err != nil || res.Outcome != core.AnswerAccepted {
		t.Fatalf("Answer = %+v, %v", res, err)
	}
	if err := run.eng.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if r := requests(); len(r) != 2 || r[1] != "127.0.0.1:"+port+"/collect?d=secret" {
		t.Fatalf("requests after approval = %v, want the approved GET", r)
	}
}
