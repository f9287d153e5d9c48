package core_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"openbot/core"
)

// other is a second person in the console conversation.
func other(in *core.Inbound) { in.SenderID, in.SenderName = "console:other", "Other" }

// pendingQuestion returns the only pending question.
func pendingQuestion(t *testing.T, h *harness) core.Question {
	t.Helper()
	qs, err := h.eng.Questions(context.Background(), true)
	if err != nil || len(qs) != 1 {
		t.Fatalf("pending questions = %+v, %v; want one", qs, err)
	}
	return qs[0]
}

func answer(t *testing.T, h *harness, q core.Question, who core.ActorID) core.AnswerOutcome {
	t.Helper()
	r, err := h.eng.Answer(context.Background(), core.Answer{Token: q.Token, Choice: core.ChoiceApprove, Actor: who, Name: string(who)})
	if err != nil {
		t.Fatal(err)
	}
	return r.Outcome
}

// TestApprovalWithoutApproversOnlyTheAsker: with no approvers configured and
// self_approve on, the person who asked for the work may approve; someone else who has posted in the
// thread is refused (DESIGN.md §5: it fails closed).
func TestApprovalWithoutApproversOnlyTheAsker(t *testing.T) {
	h := newQuestionHarness(t) // no approvers anywhere
	ran := approvalScript(h)
	h.start()
	h.say("@engineer deploy please")
	h.idle()
	h.say("@chief_of_staff hello, I am here too", other)
	h.idle()
	q := pendingQuestion(t, h)
	if !slices.Equal(q.Askers, []core.ActorID{"console:you"}) {
		t.Fatalf("askers = %v, want [console:you]", q.Askers)
	}
	if got := answer(t, h, q, "console:other"); got != core.AnswerForbidden {
		t.Fatalf("a participant who did not ask: %q, want forbidden", got)
	}
	h.idle()
	if *ran != 0 {
		t.Fatal("a refused approval ran the tool")
	}
	if got := answer(t, h, q, "console:you"); got != core.AnswerAccepted {
		t.Fatalf("the asker: %q, want accepted", got)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("tool ran %d times, want 1", *ran)
	}
}

// TestApprovalAskerAcrossHandOff: the asker of a delegate's approval is the human
// whose message started the chain, followed back through the hand-off.
func TestApprovalAskerAcrossHandOff(t *testing.T) {
	h := newQuestionHarness(t)
	ran := approvalScript(h)
	h.agent.reply["chief_of_staff"] = func(_ context.Context, j *core.Job) (string, error) {
		if strings.Contains(j.Triggers[0].Text, "ship it") {
			return "@engineer please run make deploy", nil
		}
		return "noted", nil
	}
	h.start()
	h.say("@chief_of_staff hi", other) // the other person is in the thread first
	h.idle()
	h.say("@chief_of_staff ship it") // addressed: two people are in the thread (quiet threads)
	h.idle()
	q := pendingQuestion(t, h)
	if !slices.Equal(q.Askers, []core.ActorID{"console:you"}) {
		t.Fatalf("askers = %v, want [console:you] (the human behind the hand-off)", q.Askers)
	}
	if got := answer(t, h, q, "console:other"); got != core.AnswerForbidden {
		t.Fatalf("another participant: %q, want forbidden", got)
	}
	if got := answer(t, h, q, "console:you"); got != core.AnswerAccepted {
		t.Fatalf("the asker: %q, want accepted", got)
	}
	h.idle()
	if *ran != 1 {
		t.Fatalf("tool ran %d times, want 1", *ran)
	}
}

// TestToolApprovers: a tool's own approvers override the bot's and the global
// ones for approvals of that tool; entries for other tools do not apply.
func TestToolApprovers(t *testing.T) {
	for _, tt := range []struct {
		name          string
		toolApprovers []core.ToolApprovers
		allowed       core.ActorID
		refused       []core.ActorID
	}{
		{"tool entry wins", []core.ToolApprovers{{Tool: "gh", Approvers: []core.ActorID{"slack:T:gh"}}, {Tool: "shell", Approvers: []core.ActorID{"slack:T:ops"}}},
			"slack:T:ops", []core.ActorID{"slack:T:boss", "slack:T:bot", "console:you", "slack:T:gh"}},
		{"other tool only", []core.ToolApprovers{{Tool: "gh", Approvers: []core.ActorID{"slack:T:gh"}}},
			"slack:T:bot", []core.ActorID{"slack:T:boss", "slack:T:gh", "console:you"}},
		{"entry without approvers", []core.ToolApprovers{{Tool: "shell"}},
			"slack:T:bot", []core.ActorID{"slack:T:boss", "console:you"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newQuestionHarness(t)
			h.opts = func(o *core.Options) {
				o.Approvers = []core.ActorID{"slack:T:boss"}
				o.Bots = slices.Clone(team)
				o.Bots[1].Approvers = []core.ActorID{"slack:T:bot"}
				o.Bots[1].ToolApprovers = tt.toolApprovers
			}
			approvalScript(h)
			h.start()
			h.say("@engineer deploy please")
			h.idle()
			q := pendingQuestion(t, h)
			for _, who := range tt.refused {
				if got := answer(t, h, q, who); got != core.AnswerForbidden {
					t.Errorf("%s: %q, want forbidden", who, got)
				}
			}
			if got := answer(t, h, q, tt.allowed); got != core.AnswerAccepted {
				t.Errorf("%s: %q, want accepted", tt.allowed, got)
			}
			h.idle()
		})
	}
}

func TestToolMatches(t *testing.T) {
	for _, tt := range []struct {
		pattern, name string
		want          bool
	}{
		{"shell", "shell", true},
		{"shell", "shell2", false},
		{"gh", "gh__create_issue", true},
		{"gh__*", "gh__create_issue", true},
		{"gh__*", "ghx__create_issue", false},
		{"gh__create_issue", "gh__create_issue", true},
		{"gh__create_issue", "gh__delete_repo", false},
		{"gh", "github__x", false},
	} {
		if got := core.ToolMatches(tt.pattern, tt.name); got != tt.want {
			t.Errorf("ToolMatches(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

// TestApprovalReachIsShown: the tool's reach sentence is stored on the question
// and shown in the plain-text prompt.
func TestApprovalReachIsShown(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.opts = func(o *core.Options) { o.SelfApprove = true }
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if j.Bot.Handle != "engineer" || j.Resume != nil {
			return core.Result{}, false
		}
		return core.Result{Pause: &core.Pause{Kind: core.QuestionApproval, Text: "@engineer wants to run shell", Tool: "shell",
			Args: json.RawMessage(`{"command":"ls"}`), CallID: "c1", Reach: "runs in the sandbox with network off"}, Checkpoint: json.RawMessage(`{}`)}, true
	}
	h.start()
	h.say("@engineer list files")
	h.idle()
	if q := pendingQuestion(t, h); q.Reach != "runs in the sandbox with network off" {
		t.Fatalf("reach = %q", q.Reach)
	}
	if got := h.ad.texts(); len(got) != 1 || !strings.Contains(got[0], "Reach: runs in the sandbox with network off") {
		t.Fatalf("delivered %q, want the reach in the prompt", got)
	}
}

// askScript makes @qa ask a free-text question and reply with the answer.
func askScript(h *harness) {
	h.agent.pause = func(j *core.Job) (core.Result, bool) {
		if j.Bot.Handle != "qa" {
			return core.Result{}, false
		}
		if j.Resume == nil {
			return core.Result{Pause: &core.Pause{Kind: core.QuestionAsk, Text: "Which environment?", CallID: "c1"}, Checkpoint: json.RawMessage(`{}`)}, true
		}
		return core.Result{Reply: "testing on " + j.Resume.Answer}, true
	}
}

// TestFreeTextAnswerOnlyWhenMeantForIt: a message addressed to another bot is
// not the answer to @qa's pending question; it goes to that bot and the question
// stays open. A plain message then answers it.
func TestFreeTextAnswerOnlyWhenMeantForIt(t *testing.T) {
	h := newQuestionHarness(t)
	askScript(h)
	h.start()
	res := h.say("@qa run the smoke tests")
	h.idle()
	h.say("@engineer the build is red, please fix it")
	h.idle()
	if n := len(h.agent.jobsFor("engineer")); n != 1 {
		t.Fatalf("engineer jobs = %d, want 1: the message was for the engineer", n)
	}
	q := pendingQuestion(t, h)
	if q.Status != core.QuestionPending {
		t.Fatalf("question %+v was answered by a message for another bot", q)
	}
	h.say("@qa staging")
	h.idle()
	if qs, _ := h.eng.Questions(context.Background(), true); len(qs) != 0 {
		t.Fatalf("still pending: %+v", qs)
	}
	ms := h.messages(res.Thread)
	if last := ms[len(ms)-1].Text; last != "testing on @qa staging" {
		t.Fatalf("last message %q", last)
	}
}

// TestFreeTextAnswerByReplyToTheQuestion: a platform reply to the question's
// message answers it even when it mentions another bot.
func TestFreeTextAnswerByReplyToTheQuestion(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.keyer = true
	askScript(h)
	h.start()
	h.say("@qa run the smoke tests")
	h.idle()
	q := pendingQuestion(t, h)
	if len(q.Posts) != 1 || q.Posts[0].PlatformID == "" {
		t.Fatalf("posts = %+v", q.Posts)
	}
	h.say("staging, ask @engineer if in doubt", func(in *core.Inbound) { in.ReplyToKey = "tg:" + q.Posts[0].PlatformID })
	h.idle()
	if qs, _ := h.eng.Questions(context.Background(), true); len(qs) != 0 {
		t.Fatalf("a reply to the question did not answer it: %+v", qs)
	}
	if jobs := h.agent.jobsFor("engineer"); len(jobs) == 0 || !strings.HasPrefix(jobs[0].Triggers[0].Text, "staging, ask") {
		t.Fatalf("engineer jobs = %d: the mention still wakes the engineer", len(jobs))
	}
}

// TestThreadByKey: the thread a key is bound to, 0 for an unknown key.
func TestThreadByKey(t *testing.T) {
	h := newHarness(t, core.Limits{})
	h.start()
	res := h.say("@engineer hello")
	h.idle()
	if id, err := h.eng.ThreadByKey(context.Background(), "console:main"); err != nil || id != res.Thread {
		t.Fatalf("ThreadByKey = %d, %v; want %d", id, err, res.Thread)
	}
	if id, err := h.eng.ThreadByKey(context.Background(), "console:nope"); err != nil || id != 0 {
		t.Fatalf("unknown key = %d, %v; want 0", id, err)
	}
}
