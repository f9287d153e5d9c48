package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"openbot/admin"
	"openbot/core"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// seed stores 7 threads (odd ones on Slack, even ones on Telegram), a message
// and a completed run of @eng in each, a pending question in thread 3 and a
// decided one in thread 4, a running run of @qa, three bots and one activity
// line per thread.
func seed(t *testing.T, st core.Store) {
	update(t, st, func(tx core.Tx) error {
		for _, h := range []string{"eng", "qa", "chief"} {
			if err := tx.PutBot(core.BotProfile{Handle: h, Name: strings.ToUpper(h)}); err != nil {
				return err
			}
		}
		for i := 1; i <= 7; i++ {
			platform := "telegram"
			if i%2 == 1 {
				platform = "slack"
			}
			th := must(tx.PutThread(core.Thread{Key: fmt.Sprintf("%s:%d", platform, i), Created: t0,
				Participants: []core.ActorID{"slack:T1:U1", "bot:eng"},
				Bindings:     []core.Binding{{Platform: platform, Conversation: core.ConversationRef(fmt.Sprint(i))}}}))
			must(tx.PutMessage(core.Message{Thread: th.ID, Sender: "slack:T1:U1", SenderName: "Alice", Text: fmt.Sprintf("needle %d please", i),
				Origin:  &core.Origin{Account: "slack/acme", Conversation: "C1", PlatformID: fmt.Sprintf("17000.%d", i)},
				Created: t0.Add(time.Duration(i) * time.Minute)}))
			run := must(tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunCompleted, Created: t0.Add(time.Duration(i) * time.Minute),
				Started: t0, Ended: t0.Add(2 * time.Second), Usage: core.Usage{PromptTokens: 10, CompletionTokens: 2, ModelCalls: 1},
				Checkpoint: json.RawMessage(`{"secret_transcript":true}`)}))
			e := core.UsageEntry{Key: core.UsageKey(run.ID, 1), At: run.Created, Bot: "eng", Thread: th.ID, Run: run.ID,
				Profile: "main", Provider: "openai", Model: "m", KeyLabel: "team_a", InputTokens: 10, OutputTokens: 2, CostMicros: 25}
			if i%3 == 0 { // a backup profile served
				e.Profile, e.Provider, e.Model, e.Served, e.KeyLabel, e.Fallback = "spare", "anthropic", "c", "c-20261201", "", true
			}
			if _, _, err := tx.PutUsage(e); err != nil {
				return err
			}
			if err := tx.AppendActivity(core.Activity{Event: "run.completed", Summary: fmt.Sprint(i), Thread: th.ID, Actor: "bot:eng", At: t0}); err != nil {
				return err
			}
		}
		must(tx.PutRun(core.Run{Bot: "bot:qa", Thread: 2, Status: core.RunRunning, Created: t0, Started: t0}))
		must(tx.PutQuestion(core.Question{Token: "secrettoken1", Kind: core.QuestionApproval, Run: 3, Bot: "bot:eng", Thread: 3, Tool: "shell",
			Args: json.RawMessage(`{"command":"ls"}`), Status: core.QuestionPending, Choice: -1, Created: t0, Expires: t0.Add(time.Hour)}))
		must(tx.PutQuestion(core.Question{Token: "secrettoken2", Kind: core.QuestionAsk, Run: 4, Bot: "bot:eng", Thread: 4, Text: "which?",
			Status: core.QuestionAnswered, Choice: -1, Answer: "prod", AnsweredBy: "slack:T1:U1", AnsweredByName: "Alice", AnsweredAt: t0, Created: t0}))
		return tx.AppendActivity(core.Activity{Event: "outbox.failed", Level: "error", Summary: "boom", Thread: 5, At: t0.Add(time.Hour)})
	})
}

// TestListsPaginate: every list pages by its cursor, each page continues where
// the last one ended, and the pages together are the whole list.
func TestListsPaginate(t *testing.T) {
	st := openStore(t)
	seed(t, st)
	hs := serveAPI(t, admin.Options{Store: st, Clock: fixedClock{t0.Add(90 * time.Minute)}})
	api := hs.URL + "/api/v1"

	threads, pages := pageAll[admin.ThreadSummary](t, api+"/threads?limit=2")
	if ids := idsOf(threads, func(s admin.ThreadSummary) uint64 { return uint64(s.ID) }); !slices.Equal(ids, []uint64{7, 6, 5, 4, 3, 2, 1}) || pages != 4 {
		t.Errorf("threads paged = %v in %d pages, want 7..1 in 4", ids, pages)
	}
	slackOnes, _ := pageAll[admin.ThreadSummary](t, api+"/threads?limit=2&platform=slack")
	if ids := idsOf(slackOnes, func(s admin.ThreadSummary) uint64 { return uint64(s.ID) }); !slices.Equal(ids, []uint64{7, 5, 3, 1}) {
		t.Errorf("slack threads = %v", ids)
	}
	pending, _ := pageAll[admin.ThreadSummary](t, api+"/threads?limit=2&pending=1")
	if len(pending) != 1 || pending[0].ID != 3 || pending[0].PendingQuestions != 1 {
		t.Errorf("threads with a pending question = %+v", pending)
	}
	found, _ := pageAll[admin.ThreadSummary](t, api+"/threads?limit=2&q=NEEDLE+6")
	if len(found) != 1 || found[0].ID != 6 {
		t.Errorf("text search = %+v", found)
	}
	recent, _ := pageAll[admin.ThreadSummary](t, api+"/threads?limit=2&since="+t0.Add(5*time.Minute).Format(time.RFC3339))
	if ids := idsOf(recent, func(s admin.ThreadSummary) uint64 { return uint64(s.ID) }); !slices.Equal(ids, []uint64{7, 6, 5}) {
		t.Errorf("updated since = %v", ids)
	}

	runs, pages := pageAll[admin.RunSummary](t, api+"/runs?limit=3")
	if ids := idsOf(runs, func(r admin.RunSummary) uint64 { return uint64(r.ID) }); !slices.Equal(ids, []uint64{8, 7, 6, 5, 4, 3, 2, 1}) || pages != 3 {
		t.Errorf("runs paged = %v in %d pages", ids, pages)
	}
	inThread, _ := pageAll[admin.RunSummary](t, api+"/runs?limit=1&thread=2")
	if ids := idsOf(inThread, func(r admin.RunSummary) uint64 { return uint64(r.ID) }); !slices.Equal(ids, []uint64{8, 2}) {
		t.Errorf("runs of thread 2 = %v", ids)
	}
	if runs[7].DurationMS != 2000 {
		t.Errorf("duration = %d ms, want 2000", runs[7].DurationMS)
	}

	qs, pages := pageAll[admin.QuestionView](t, api+"/questions?limit=1")
	if ids := idsOf(qs, func(q admin.QuestionView) uint64 { return uint64(q.ID) }); !slices.Equal(ids, []uint64{2, 1}) || pages != 2 {
		t.Errorf("questions paged = %v in %d pages", ids, pages)
	}
	decided, _ := pageAll[admin.QuestionView](t, api+"/questions?status=decided")
	if len(decided) != 1 || decided[0].Decision != "Answered by Alice: prod" {
		t.Errorf("decided = %+v", decided)
	}

	acts, pages := pageAll[core.Activity](t, api+"/activity?limit=3")
	if ids := idsOf(acts, func(a core.Activity) uint64 { return a.Seq }); !slices.Equal(ids, []uint64{8, 7, 6, 5, 4, 3, 2, 1}) || pages != 3 {
		t.Errorf("activity paged = %v in %d pages", ids, pages)
	}
	errs, _ := pageAll[core.Activity](t, api+"/activity?level=error&kind=outbox")
	if len(errs) != 1 || errs[0].Summary != "boom" {
		t.Errorf("activity level=error kind=outbox = %+v", errs)
	}
	// Forward from a cursor, as --follow reads.
	var fwd pageOf[core.Activity]
	getJSON(t, api+"/activity?after=6&limit=1", http.StatusOK, &fwd)
	if len(fwd.Items) != 1 || fwd.Items[0].Seq != 7 || fwd.Next != "7" {
		t.Errorf("activity after=6 = %+v", fwd)
	}
	getJSON(t, api+"/activity?after=8", http.StatusOK, &fwd)
	if len(fwd.Items) != 0 || fwd.Next != "8" {
		t.Errorf("activity after=8 = %+v, want nothing and next 8", fwd)
	}

	bots, pages := pageAll[admin.BotView](t, api+"/bots?limit=2")
	if len(bots) != 3 || pages != 2 || bots[0].Handle != "chief" || bots[2].Handle != "qa" {
		t.Fatalf("bots paged = %+v in %d pages", bots, pages)
	}
	if bots[1].Status != admin.BotIdle || len(bots[1].Parked) != 0 {
		t.Errorf("eng = %+v", bots[1])
	}
	if bots[2].Status != admin.BotWorking || !slices.Equal(bots[2].Working, []core.ThreadID{2}) || len(bots[2].Current) != 1 {
		t.Errorf("qa = %+v", bots[2])
	}
	if bots[1].UsageToday.PromptTokens != 70 || bots[1].RunsToday != 7 {
		t.Errorf("eng usage today = %+v over %d runs", bots[1].UsageToday, bots[1].RunsToday)
	}

	byThread, pages := pageAll[admin.UsageRow](t, api+"/usage?by=thread&limit=3&since="+t0.Add(-time.Hour).Format(time.RFC3339))
	if len(byThread) != 7 || pages != 3 || byThread[0].Key != "7" || byThread[6].Runs != 1 {
		t.Errorf("usage by thread = %+v in %d pages", byThread, pages)
	}
	var byBot pageOf[admin.UsageRow]
	getJSON(t, api+"/usage?by=bot&since="+t0.Add(-time.Hour).Format(time.RFC3339), http.StatusOK, &byBot)
	if len(byBot.Items) != 1 || byBot.Items[0].Key != "eng" || byBot.Items[0].PromptTokens != 70 || byBot.Items[0].CostMicros != 175 {
		t.Errorf("usage by bot = %+v", byBot)
	}

	var byModel pageOf[admin.UsageRow]
	getJSON(t, api+"/usage?by=model&since="+t0.Add(-time.Hour).Format(time.RFC3339), http.StatusOK, &byModel)
	if m := byModel.Items; len(m) != 2 || m[0].Key != "main/m" || m[0].Provider != "openai" || !slices.Equal(m[0].Keys, []string{"team_a"}) || m[0].Fallbacks != 0 ||
		m[1].Key != "spare/c" || m[1].Provider != "anthropic" || !slices.Equal(m[1].Served, []string{"c-20261201"}) || m[1].Fallbacks != m[1].ModelCalls || m[1].ModelCalls == 0 {
		t.Errorf("usage by model = %+v", byModel)
	}

	var detail admin.ThreadDetail
	getJSON(t, api+"/threads/3", http.StatusOK, &detail)
	if len(detail.MessagesPage.Items) != 1 || detail.MessagesPage.Items[0].Origin.PlatformID != "17000.3" || len(detail.Runs) != 1 ||
		len(detail.Bindings) != 1 || len(detail.People) != 2 {
		t.Errorf("thread 3 = %+v", detail)
	}
	getJSON(t, api+"/threads/99", http.StatusNotFound, nil)
	getJSON(t, api+"/threads?limit=0", http.StatusBadRequest, nil)
	getJSON(t, api+"/threads?since=yesterday", http.StatusBadRequest, nil)
	// A cursor that is no key of the list is refused, as on the other lists;
	// a well-formed one whose row is gone continues after it.
	getJSON(t, api+"/usage?cursor=zzz", http.StatusBadRequest, nil)
	getJSON(t, api+"/usage?by=thread&cursor=zzz", http.StatusBadRequest, nil)
	getJSON(t, api+"/usage?by=bot&cursor=Bad-Name", http.StatusBadRequest, nil)
	var after pageOf[admin.UsageRow]
	getJSON(t, api+"/usage?by=thread&cursor=99&since="+t0.Add(-time.Hour).Format(time.RFC3339), http.StatusOK, &after)
	if len(after.Items) != 7 || after.Items[0].Key != "7" {
		t.Errorf("usage by thread after a gone thread 99 = %+v, want all 7 from thread 7", after.Items)
	}
}

// TestNothingSecret: no response carries a question's button token or a run's
// checkpoint, while the tool arguments are shown.
func TestNothingSecret(t *testing.T) {
	st := openStore(t)
	seed(t, st)
	hs := serveAPI(t, admin.Options{Store: st, Clock: fixedClock{t0}})
	for _, path := range []string{"/questions", "/runs", "/runs/3", "/threads/3", "/bots", "/activity", "/events?from=0"} {
		body := getBody(t, hs.URL+"/api/v1"+path)
		for _, secret := range []string{"secrettoken", "secret_transcript"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s shows %q:\n%s", path, secret, body)
			}
		}
		if path == "/questions" && !strings.Contains(body, `{\"command\":\"ls\"}`) && !strings.Contains(body, `"command":"ls"`) {
			t.Errorf("/questions hides the arguments:\n%s", body)
		}
	}
}

// getBody reads a GET answer; an event stream is read until its first idle
// moment (the test closes it).
func getBody(t *testing.T, url string) string {
	t.Helper()
	if strings.Contains(url, "/events") {
		c := openStream(t, url, "")
		var b strings.Builder
		for range 10 {
			ev := c.next(t)
			b.WriteString(ev.Data + "\n")
		}
		c.close()
		return b.String()
	}
	var raw json.RawMessage
	getJSON(t, url, http.StatusOK, &raw)
	return string(raw)
}

func idsOf[T any](list []T, id func(T) uint64) []uint64 {
	out := []uint64{}
	for _, x := range list {
		out = append(out, id(x))
	}
	return out
}

// TestThreadMessagesPaginate: a thread's messages page oldest first by cursor.
func TestThreadMessagesPaginate(t *testing.T) {
	st := openStore(t)
	update(t, st, func(tx core.Tx) error {
		th := must(tx.PutThread(core.Thread{Key: "k", Created: t0}))
		for i := range 5 {
			must(tx.PutMessage(core.Message{Thread: th.ID, Sender: "console:you", Text: fmt.Sprint(i), Created: t0}))
		}
		return nil
	})
	hs := serveAPI(t, admin.Options{Store: st})
	ms, pages := pageAll[admin.MessageView](t, hs.URL+"/api/v1/threads/1/messages?limit=2")
	if ids := idsOf(ms, func(m admin.MessageView) uint64 { return uint64(m.ID) }); !slices.Equal(ids, []uint64{1, 2, 3, 4, 5}) || pages != 3 {
		t.Errorf("messages paged = %v in %d pages", ids, pages)
	}
}
