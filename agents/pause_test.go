package agents

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"openbot/agents/agentstest"
	"openbot/agents/openaitest"
	"openbot/core"
)

// countingTool records every call's arguments.
type countingTool struct {
	mu   sync.Mutex
	args []string
}

func (c *countingTool) tool(name string) Tool {
	return &FuncTool{ToolName: name, Desc: "counts calls",
		Params: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}}}`),
		Fn: func(_ context.Context, call ToolCall) (string, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.args = append(c.args, string(call.Args))
			return "ran " + string(call.Args), nil
		}}
}

func (c *countingTool) calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.args)
}

// answer is the question core would hand back for p, answered with choice by name
// (choice -1 with text for a free-text answer).
func answer(p *core.Pause, choice int, text, name string) core.Question {
	q := core.Question{ID: 3, Token: "abcdefghijkl", Kind: p.Kind, Run: 7, Text: p.Text, Choices: p.Choices,
		Tool: p.Tool, Args: p.Args, CallID: p.CallID, Status: core.QuestionAnswered, Choice: choice,
		AnsweredBy: alice, AnsweredByName: name}
	switch {
	case choice >= 0 && choice < len(q.Options()):
		q.Answer = q.Options()[choice]
	default:
		q.Answer = text
	}
	return q
}

// resumeJob is the job core builds for a resume of res with q.
func resumeJob(env *fakeEnv, bot core.BotProfile, res core.Result, q core.Question, triggers ...core.Message) *core.Job {
	job := newJob(env, bot, false, triggers...)
	job.Run.Checkpoint = res.Checkpoint
	job.Resume = &q
	return job
}

func lastMessages(r openaitest.Request, n int) []openai.ChatCompletionMessage {
	m := r.Body.Messages
	return m[max(0, len(m)-n):]
}

func TestAskHumanPausesAndResumes(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(
		openaitest.Calls(openaitest.ToolCall{ID: "ask1", Name: AskHumanName, Arguments: `{"question":"Which database?","choices":["postgres","sqlite"]}`}),
		openaitest.Text("Going with sqlite."),
	)
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "@engineer set up the database", "engineer")
	a := newAgent(t, srv, nil, nil)

	res, err := execute(t, a, newJob(env, engineer, false, trig))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Pause
	if p == nil {
		t.Fatalf("result = %+v, want a pause", res)
	}
	if p.Kind != core.QuestionAsk || p.Text != "Which database?" || !slices.Equal(p.Choices, []string{"postgres", "sqlite"}) || p.CallID != "ask1" {
		t.Errorf("pause = %+v", p)
	}
	if res.Reply != "" || len(res.Checkpoint) == 0 || res.Usage.ModelCalls != 1 {
		t.Errorf("result = reply %q, checkpoint %d bytes, usage %+v", res.Reply, len(res.Checkpoint), res.Usage)
	}
	sys := systemText(t, srv.Requests()[0])
	for _, want := range []string{"ask_human", "pauses your run until a person answers"} {
		if !strings.Contains(sys, want) {
			t.Errorf("system prompt lacks %q:\n%s", want, sys)
		}
	}

	// Meanwhile Alice wrote in the thread; the resumed run continues the same
	// conversation and gets the answer as the tool result.
	env.add(alice, "Alice", "unrelated later message")
	res2, err := execute(t, a, resumeJob(env, engineer, res, answer(p, 1, "", "Alice"), trig))
	if err != nil {
		t.Fatal(err)
	}
	if res2.Reply != "Going with sqlite." || res2.Pause != nil {
		t.Errorf("resumed result = %+v", res2)
	}
	if res2.Usage.ModelCalls != 1 {
		t.Errorf("resumed segment usage = %+v, want 1 model call (core adds segments)", res2.Usage)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d", len(reqs))
	}
	first, second := reqs[0].Body.Messages, reqs[1].Body.Messages
	if len(second) != len(first)+2 || second[0].Content != first[0].Content {
		t.Fatalf("resumed request does not continue the first: %d then %d messages", len(first), len(second))
	}
	if strings.Contains(string(reqs[1].Raw), "unrelated later message") {
		t.Error("resumed run re-unrolled the thread")
	}
	tail := lastMessages(reqs[1], 2)
	if len(tail[0].ToolCalls) != 1 || tail[0].ToolCalls[0].ID != "ask1" {
		t.Errorf("assistant message = %+v", tail[0])
	}
	if tail[1].Role != "tool" || tail[1].ToolCallID != "ask1" || !strings.Contains(tail[1].Content, "Alice answered") || !strings.Contains(tail[1].Content, "sqlite") {
		t.Errorf("tool result = %+v", tail[1])
	}
}

func TestAskHumanFreeTextAndBadArgs(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(
		// Invalid: one choice only. The model gets the error and asks again.
		openaitest.Calls(openaitest.ToolCall{ID: "bad", Name: AskHumanName, Arguments: `{"question":"Ok?","choices":["yes"]}`}),
		openaitest.Calls(openaitest.ToolCall{ID: "ask2", Name: AskHumanName, Arguments: `{"question":"What is the deadline?"}`}),
		openaitest.Text("Noted: Friday."),
	)
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "plan it")
	a := newAgent(t, srv, nil, nil)
	res, err := execute(t, a, newJob(env, engineer, false, trig))
	if err != nil || res.Pause == nil {
		t.Fatalf("res = %+v, err = %v; want a pause", res, err)
	}
	if res.Pause.CallID != "ask2" || len(res.Pause.Choices) != 0 || res.Pause.Text != "What is the deadline?" {
		t.Errorf("pause = %+v", res.Pause)
	}
	if msg := lastMessages(srv.Requests()[1], 1)[0]; msg.ToolCallID != "bad" || !strings.Contains(msg.Content, "between 2 and 10 choices") {
		t.Errorf("invalid ask_human result = %+v", msg)
	}
	res2, err := execute(t, a, resumeJob(env, engineer, res, answer(res.Pause, -1, "Friday <b>", "Alice"), trig))
	if err != nil || res2.Reply != "Noted: Friday." {
		t.Fatalf("res = %+v, err = %v", res2, err)
	}
	got := lastMessages(srv.Requests()[2], 1)[0].Content
	if !strings.Contains(got, `Alice answered: <untrusted source="slack:T1:U1">Friday <b></untrusted>`) {
		t.Errorf("answer result = %q", got)
	}
}

// approvalSetup is a bot with shell (needs approval) and note (does not).
func approvalSetup(t *testing.T) (*openaitest.Server, *Agent, *countingTool, *countingTool, core.BotProfile) {
	t.Helper()
	srv := openaitest.New(t)
	shell, note := &countingTool{}, &countingTool{}
	reg := NewRegistry()
	if err := reg.Add(shell.tool("shell")); err != nil {
		t.Fatal(err)
	}
	if err := reg.Add(note.tool("note")); err != nil {
		t.Fatal(err)
	}
	bot := engineer
	bot.Tools = []string{"shell", "note"}
	bot.ApprovalTools = []string{"shell"}
	return srv, newAgent(t, srv, reg, nil), shell, note, bot
}

func TestApprovalApprovedRunsOnceWithStoredArgs(t *testing.T) {
	srv, a, shell, note, bot := approvalSetup(t)
	srv.Enqueue(openaitest.Calls(
		openaitest.ToolCall{ID: "n1", Name: "note", Arguments: `{"command":"remember"}`},
		openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{"command":"rm -rf build"}`},
	))
	// Were the model asked again it would want something else; it must not be.
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if len(srv.Requests()) == 2 {
			return openaitest.Text("Build directory removed.")
		}
		return openaitest.Calls(openaitest.ToolCall{ID: "s9", Name: "shell", Arguments: `{"command":"rm -rf /"}`})
	})
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "clean the build")
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil {
		t.Fatal(err)
	}
	p := res.Pause
	if p == nil || p.Kind != core.QuestionApproval || p.Tool != "shell" || p.CallID != "s1" || string(p.Args) != `{"command":"rm -rf build"}` {
		t.Fatalf("pause = %+v", p)
	}
	if p.Text != "@engineer wants to run shell." {
		t.Errorf("pause text = %q", p.Text)
	}
	if got := shell.calls(); len(got) != 0 {
		t.Fatalf("shell ran before approval: %v", got)
	}
	if got := note.calls(); len(got) != 1 {
		t.Fatalf("note calls before the pause = %v, want 1", got)
	}
	if sys := systemText(t, srv.Requests()[0]); !strings.Contains(sys, "need a person's approval") || !strings.Contains(sys, "shell") {
		t.Errorf("system prompt does not name the approval tools:\n%s", sys)
	}

	env2 := &fakeEnv{agentstest.Env{Msgs: env.Msgs}}
	res2, err := execute(t, a, resumeJob(env2, bot, res, answer(p, core.ChoiceApprove, "", "Alice"), trig))
	if err != nil {
		t.Fatal(err)
	}
	if res2.Reply != "Build directory removed." {
		t.Errorf("reply = %q", res2.Reply)
	}
	if got := shell.calls(); !slices.Equal(got, []string{`{"command":"rm -rf build"}`}) {
		t.Errorf("shell calls = %v, want exactly the approved args once", got)
	}
	if got := note.calls(); len(got) != 1 {
		t.Errorf("note calls = %v: a call made before the pause ran again", got)
	}
	tail := lastMessages(srv.Requests()[1], 3)
	if tail[1].ToolCallID != "n1" || !strings.Contains(tail[1].Content, "ran") ||
		tail[2].ToolCallID != "s1" || !strings.Contains(tail[2].Content, `ran {"command":"rm -rf build"}`) {
		t.Errorf("tool results = %+v", tail[1:])
	}
	if types := env2.eventTypes(); !slices.Equal(types, []string{"tool_call", "tool_result", "model_call"}) {
		t.Errorf("resumed events = %v", types)
	}
	if len(srv.Requests()) != 2 {
		t.Errorf("requests = %d, want 2", len(srv.Requests()))
	}
}

func TestApprovalRunsTheQuestionArgs(t *testing.T) {
	// The arguments people approved (Question.Args) are what runs.
	srv, a, shell, _, bot := approvalSetup(t)
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{"command":"ls"}`}), openaitest.Text("ok"))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "list")
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil || res.Pause == nil {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	q := answer(res.Pause, core.ChoiceApprove, "", "Alice")
	q.Args = json.RawMessage(`{"command":"ls -la"}`)
	if _, err := execute(t, a, resumeJob(env, bot, res, q, trig)); err != nil {
		t.Fatal(err)
	}
	if got := shell.calls(); !slices.Equal(got, []string{`{"command":"ls -la"}`}) {
		t.Errorf("shell calls = %v", got)
	}
}

func TestApprovalRejectedAndExpired(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expire bool
		want   string
	}{
		{"rejected", false, "rejected by Bob"},
		{"expired", true, "expired without an answer after the approval timeout; treat it as rejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, a, shell, _, bot := approvalSetup(t)
			srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{"command":"deploy"}`}), openaitest.Text("Understood, not deploying."))
			env := &fakeEnv{}
			trig := env.add(alice, "Alice", "deploy")
			res, err := execute(t, a, newJob(env, bot, false, trig))
			if err != nil || res.Pause == nil {
				t.Fatalf("res = %+v, err = %v", res, err)
			}
			q := answer(res.Pause, core.ChoiceReject, "", "Bob")
			if tc.expire {
				q.Status, q.Choice, q.AnsweredBy, q.AnsweredByName = core.QuestionExpired, -1, "", ""
			}
			res2, err := execute(t, a, resumeJob(env, bot, res, q, trig))
			if err != nil || res2.Reply != "Understood, not deploying." {
				t.Fatalf("res = %+v, err = %v", res2, err)
			}
			if got := shell.calls(); len(got) != 0 {
				t.Errorf("shell ran: %v", got)
			}
			if got := lastMessages(srv.Requests()[1], 1)[0]; got.ToolCallID != "s1" || !strings.Contains(got.Content, tc.want) {
				t.Errorf("tool result = %+v, want %q", got, tc.want)
			}
		})
	}
}

func TestTwoApprovalsInOneTurnPauseTwice(t *testing.T) {
	srv, a, shell, _, bot := approvalSetup(t)
	srv.Enqueue(openaitest.Calls(
		openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{"command":"make"}`},
		openaitest.ToolCall{ID: "s2", Name: "shell", Arguments: `{"command":"make install"}`},
	), openaitest.Text("Built; install was rejected."))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "build and install")
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil || res.Pause == nil || res.Pause.CallID != "s1" {
		t.Fatalf("first pause: res = %+v, err = %v", res, err)
	}
	res2, err := execute(t, a, resumeJob(env, bot, res, answer(res.Pause, core.ChoiceApprove, "", "Alice"), trig))
	if err != nil || res2.Pause == nil || res2.Pause.CallID != "s2" || string(res2.Pause.Args) != `{"command":"make install"}` {
		t.Fatalf("second pause: res = %+v, err = %v", res2, err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("requests = %d: the model was called between the two approvals", n)
	}
	if res2.Usage.ModelCalls != 0 {
		t.Errorf("segment usage = %+v", res2.Usage)
	}
	res3, err := execute(t, a, resumeJob(env, bot, res2, answer(res2.Pause, core.ChoiceReject, "", "Alice"), trig))
	if err != nil || res3.Reply != "Built; install was rejected." {
		t.Fatalf("res = %+v, err = %v", res3, err)
	}
	if got := shell.calls(); !slices.Equal(got, []string{`{"command":"make"}`}) {
		t.Errorf("shell calls = %v", got)
	}
	tail := lastMessages(srv.Requests()[1], 2)
	if tail[0].ToolCallID != "s1" || !strings.Contains(tail[0].Content, "ran") || tail[1].ToolCallID != "s2" || !strings.Contains(tail[1].Content, "rejected by Alice") {
		t.Errorf("tool results = %+v", tail)
	}
}

func TestApprovalPatterns(t *testing.T) {
	for _, tc := range []struct {
		name     string
		patterns []string
		want     bool
	}{
		{"shell", []string{"shell"}, true},
		{"shell", []string{"shell_x", "sh"}, false},
		{"gh__merge", []string{"gh"}, true},
		{"gh__merge", []string{"gh__*"}, true},
		{"gh__merge", []string{"gh__merge"}, true},
		{"gh__merge", []string{"g"}, false},
		{"ghx__merge", []string{"gh"}, false},
		{"read_file", nil, false},
	} {
		if got := needsApproval(tc.name, tc.patterns); got != tc.want {
			t.Errorf("needsApproval(%q, %v) = %v, want %v", tc.name, tc.patterns, got, tc.want)
		}
	}
}

func TestMCPApprovalPatternPauses(t *testing.T) {
	srv := openaitest.New(t)
	merge := &countingTool{}
	reg := NewRegistry()
	if err := reg.SetSource("gh", []Tool{merge.tool("gh__merge")}); err != nil {
		t.Fatal(err)
	}
	bot := engineer
	bot.Tools = []string{"gh"}
	bot.ApprovalTools = []string{"gh__*"}
	srv.Enqueue(openaitest.Calls(openaitest.Call("gh__merge", `{"command":"42"}`)))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "merge")
	res, err := execute(t, newAgent(t, srv, reg, nil), newJob(env, bot, false, trig))
	if err != nil || res.Pause == nil || res.Pause.Tool != "gh__merge" {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if len(merge.calls()) != 0 {
		t.Error("the tool ran before approval")
	}
}

func TestCheckpointRoundTrip(t *testing.T) {
	srv, a, shell, _, bot := approvalSetup(t)
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{"command":"make"}`}), openaitest.Text("done"))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "build")
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil || res.Pause == nil {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	var cp checkpointData
	if err := json.Unmarshal(res.Checkpoint, &cp); err != nil {
		t.Fatal(err)
	}
	if cp.Version != checkpointVersion || len(cp.Prompt) < 2 || cp.Prompt[0].Role != "system" || cp.ModelCalls != 1 ||
		cp.Pending == nil || cp.Pending.Waiting != "s1" || len(cp.Transcript) != 1 || len(cp.Transcript[0].ToolCalls) != 1 {
		t.Fatalf("checkpoint = %+v", cp)
	}
	// Through a generic JSON value and back, as a store may re-encode it.
	var generic any
	if err := json.Unmarshal(res.Checkpoint, &generic); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(generic)
	if err != nil {
		t.Fatal(err)
	}
	var again checkpointData
	if err := json.Unmarshal(raw, &again); err != nil {
		t.Fatal(err)
	}
	b1, _ := json.Marshal(cp)
	b2, _ := json.Marshal(again)
	if string(b1) != string(b2) {
		t.Errorf("checkpoint changed through JSON:\n%s\n%s", b1, b2)
	}
	res.Checkpoint = raw
	if _, err := execute(t, a, resumeJob(env, bot, res, answer(res.Pause, core.ChoiceApprove, "", "Alice"), trig)); err != nil {
		t.Fatal(err)
	}
	if n := len(shell.calls()); n != 1 {
		t.Errorf("shell calls = %d", n)
	}
}

func TestResumeBadCheckpoint(t *testing.T) {
	srv, a, shell, _, bot := approvalSetup(t)
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{}`}))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "go")
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil || res.Pause == nil {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	good := answer(res.Pause, core.ChoiceApprove, "", "Alice")
	wrongCall := good
	wrongCall.CallID = "other"
	wrongKind := good
	wrongKind.Kind = core.QuestionAsk
	for _, tc := range []struct {
		name string
		cp   string
		q    core.Question
		want string
	}{
		{"missing", "", good, "has no saved checkpoint"},
		{"corrupt", `{"version":2,"prompt":[`, good, "checkpoint is corrupt"},
		{"not an object", `"hello"`, good, "checkpoint is corrupt"},
		{"old version", `{"model":"m","transcript":[]}`, good, "version 0 is not supported"},
		{"wrong call", string(res.Checkpoint), wrongCall, `does not wait for tool call "other"`},
		{"wrong kind", string(res.Checkpoint), wrongKind, "does not match the paused call"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := res
			r.Checkpoint = json.RawMessage(tc.cp)
			_, err := execute(t, a, resumeJob(env, bot, r, tc.q, trig))
			if !errors.Is(err, ErrBadCheckpoint) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "cannot resume the run 7") {
				t.Errorf("err = %v, want ErrBadCheckpoint with %q", err, tc.want)
			}
		})
	}
	if len(shell.calls()) != 0 || len(srv.Requests()) != 1 {
		t.Errorf("a bad resume ran the tool (%d) or called the model (%d requests)", len(shell.calls()), len(srv.Requests()))
	}
}

func TestModelCallLimitAcrossResume(t *testing.T) {
	srv := openaitest.New(t)
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "a1", Name: AskHumanName, Arguments: `{"question":"go on?"}`}))
	srv.Handle(func(openaitest.Request) openaitest.Reply {
		return openaitest.Calls(openaitest.Call(ReadHistoryName, `{"limit":1}`))
	})
	bot := engineer
	bot.MaxModelCalls = 3
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "work")
	a := newAgent(t, srv, nil, nil)
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil || res.Pause == nil {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	res2, err := execute(t, a, resumeJob(env, bot, res, answer(res.Pause, -1, "yes", "Alice"), trig))
	if !errors.Is(err, ErrModelCallLimit) {
		t.Fatalf("err = %v, want the model call limit", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("requests = %d, want 3 over both segments", n)
	}
	if res2.Usage.ModelCalls != 2 {
		t.Errorf("resumed segment usage = %+v, want 2 model calls", res2.Usage)
	}
}

func TestApprovalToolWithInvalidArgsDoesNotPause(t *testing.T) {
	srv, a, shell, _, bot := approvalSetup(t)
	srv.Enqueue(openaitest.Calls(openaitest.ToolCall{ID: "s1", Name: "shell", Arguments: `{"command":`}), openaitest.Text("I will fix my call."))
	env := &fakeEnv{}
	trig := env.add(alice, "Alice", "go")
	res, err := execute(t, a, newJob(env, bot, false, trig))
	if err != nil || res.Pause != nil || res.Reply != "I will fix my call." {
		t.Fatalf("res = %+v, err = %v", res, err)
	}
	if got := lastMessages(srv.Requests()[1], 1)[0]; got.ToolCallID != "s1" || !strings.Contains(got.Content, "not valid JSON") {
		t.Errorf("tool result = %+v", got)
	}
	if len(shell.calls()) != 0 {
		t.Error("the tool ran")
	}
}
