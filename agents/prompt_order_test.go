package agents

import (
	"context"
	"strings"
	"testing"

	"openbot/agents/openaitest"
	"openbot/core"
)

// echoMemory recalls a memory that names the query, so it differs per run.
type echoMemory struct{}

func (echoMemory) Recall(_ context.Context, _ core.BotProfile, query string, _ int) ([]string, error) {
	return []string{"note for " + query}, nil
}

// TestPromptKeepsItsPrefixAcrossRuns: what changes per run (memories, the
// participants, counts of hidden messages) comes after the thread's history,
// so each run's request starts with everything the previous run sent before
// its newest turn; StableEnd marks that point.
func TestPromptKeepsItsPrefixAcrossRuns(t *testing.T) {
	srv := openaitest.New(t)
	a := newAgent(t, srv, nil, func(o *Options) { o.Memory = echoMemory{} })
	env := &fakeEnv{}
	bot := chief
	bot.Memory = true
	var prev *openaitest.Request
	for i, q := range []string{"first question", "second question", "third question"} {
		trig := env.add(alice, "Alice", q)
		job := newJob(env, bot, false, trig)
		if i == 2 {
			job.Participants = append(job.Participants, core.Actor{ID: "slack:T1:U2", Kind: core.ActorHuman, Name: "Bob"})
		}
		res, err := execute(t, a, job)
		if err != nil {
			t.Fatal(err)
		}
		env.add(bot.ID(), "Chief", res.Reply)
		reqs := srv.Requests()
		req := reqs[len(reqs)-1]
		msgs := req.Body.Messages
		last := msgs[len(msgs)-1].Content
		if strings.Index(last, "note for "+q) < 0 || strings.Index(last, "note for "+q) > strings.LastIndex(last, q) {
			t.Errorf("run %d: the newest turn lacks the turn's context before the trigger:\n%s", i, last)
		}
		if strings.Contains(msgs[0].Content, "note for") || strings.Contains(msgs[0].Content, "(person)") {
			t.Errorf("run %d: per-run content in the system prompt:\n%s", i, msgs[0].Content)
		}
		if prev != nil {
			// The previous run's request up to its newest turn leads this one.
			for j, m := range prev.Body.Messages[:len(prev.Body.Messages)-1] {
				if m.Role != msgs[j].Role || m.Content != msgs[j].Content {
					t.Fatalf("run %d: message %d differs from the previous run's:\n%q\n%q", i, j, m.Content, msgs[j].Content)
				}
			}
		}
		prev = &req
	}
}
