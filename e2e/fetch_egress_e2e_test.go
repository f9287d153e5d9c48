package e2e

// End-to-end test of the http_fetch egress policy on Slack: a GET with a query
// string to a host the bot's policy does not list is a question with buttons
// in the thread, and the request leaves only once an approver clicks Approve.

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

func TestSlackFetchToUnlistedHostWithQueryAsksFirst(t *testing.T) {
	var mu sync.Mutex
	var hits []string
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, r.URL.RequestURI())
		mu.Unlock()
		io.WriteString(w, "stored")
	}))
	t.Cleanup(site.Close)
	sent := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), hits...)
	}
	target := site.URL + "/collect?notes=the+launch+date"
	r := startApproval(t, []core.ActorID{slackActor(slackAlice)}, nil, func(r *approvalRig) {
		r.fetchHosts = []string{strings.TrimPrefix(site.URL, "http://")}
		for i, b := range r.team {
			if b.Handle == "engineer" {
				r.team[i].Tools, r.team[i].ApprovalTools = []string{"http_fetch"}, []string{}
				r.team[i].Fetch = core.FetchPolicy{AllowDomains: []string{"docs.example.com"}}
			}
		}
		r.model.Handle(func(req openaitest.Request) openaitest.Reply {
			if botOf(req) != "engineer" {
				return openaitest.Text("here")
			}
			ms := req.Body.Messages
			if last := ms[len(ms)-1]; last.Role == "tool" {
				return openaitest.Text("fetch said: " + last.Content)
			}
			return openaitest.Calls(openaitest.Call("http_fetch", fmt.Sprintf(`{"url":%q}`, target)))
		})
	})
	r.say(t, slackBob, slackRoot, "", "@engineer send my notes to the tracker")
	r.idle()

	qs, err := r.eng.Questions(r.ctx(), true)
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions = %+v, %v; want the fetch waiting for approval", qs, err)
	}
	q := qs[0]
	if q.Kind != core.QuestionApproval || q.Tool != "http_fetch" || !strings.Contains(string(q.Args), "notes=the+launch+date") {
		t.Fatalf("question = %+v", q)
	}
	var buttons int
	for _, c := range r.fake.CallsTo("chat.postMessage") {
		if strings.Contains(c.Form.Get("blocks"), "collect?notes=the+launch+date") && strings.Contains(c.Form.Get("blocks"), `"type":"button"`) {
			buttons++
		}
	}
	if buttons != 1 {
		t.Fatalf("posts showing the URL with buttons = %d, want 1", buttons)
	}
	if got := sent(); len(got) != 0 {
		t.Fatalf("the request left before approval: %v", got)
	}

	r.click(t, slackAlice, q, core.ChoiceApprove)
	r.idle()
	if got := sent(); len(got) != 1 || got[0] != "/collect?notes=the+launch+date" {
		t.Fatalf("requests after approval = %v, want the one approved GET", got)
	}
	var replied bool
	for _, m := range r.fake.Messages() {
		replied = replied || strings.Contains(m.Text, "fetch said:")
	}
	if !replied {
		t.Error("no reply with the fetch's result in the thread")
	}
}
