package agents_test

import (
	"context"
	"strings"
	"testing"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
)

var memBot = core.BotProfile{Handle: "engineer", Name: "Engineer", Memory: true}

const (
	preference = "The team prefers short status updates as bullet points."
	unrelated  = "Deploy windows are on Tuesday mornings."
)

// memoryPrompt returns the memory section of a request's system prompt.
func memoryPrompt(r openaitest.Request) string {
	sys := promptText(r)
	i := strings.Index(sys, "# Your own notes")
	if i < 0 {
		return ""
	}
	rest := sys[i:]
	if j := strings.Index(rest[1:], "\n# "); j >= 0 {
		rest = rest[:j+1]
	}
	return rest
}

// seedUnrelated stores an operator's memory unrelated to status updates.
func seedUnrelated(t *testing.T, r *memRig) {
	t.Helper()
	if _, err := r.mem.Apply(context.Background(), agents.MemoryChange{Bot: "engineer", Source: core.MemorySourceOperator},
		[]agents.MemoryOp{{Op: "insert", Text: unrelated}}); err != nil {
		t.Fatal(err)
	}
}

// checkLearned asserts thread B's run carries the preference, ranked above the
// unrelated memory (seed §6 item 4, §9).
func checkLearned(t *testing.T, srv *openaitest.Server) {
	t.Helper()
	reqs := chatRequests(srv, "write the status update")
	if len(reqs) == 0 {
		t.Fatal("no run in thread B")
	}
	sec := memoryPrompt(reqs[0])
	p, u := strings.Index(sec, preference), strings.Index(sec, unrelated)
	if p < 0 {
		t.Fatalf("thread B's prompt lacks the learned preference; memory section:\n%s", sec)
	}
	if u >= 0 && u < p {
		t.Errorf("the unrelated memory ranks above the preference:\n%s", sec)
	}
}

// TestMemoryLearnedByToolReachesOtherThread: a bot writes a preference with
// manage_memory in thread A; its next run in thread B has it in the prompt, above
// an unrelated memory, with embeddings and with the lexical fallback.
func TestMemoryLearnedByToolReachesOtherThread(t *testing.T) {
	for _, emb := range []bool{true, false} {
		t.Run(map[bool]string{true: "embeddings", false: "lexical"}[emb], func(t *testing.T) {
			srv := openaitest.New(t)
			srv.Handle(func(r openaitest.Request) openaitest.Reply {
				if isReflection(r) {
					return openaitest.Text(`{"operations": []}`)
				}
				last := r.Body.Messages[len(r.Body.Messages)-1]
				if strings.Contains(openaitest.LastUserText(r), "bullet points please") && last.Role != "tool" {
					return openaitest.Calls(openaitest.Call(agents.ManageMemoryName, `{"action":"create","text":"`+preference+`"}`))
				}
				return openaitest.Text("ok")
			})
			r := newMemRig(t, srv, "", emb, memBot)
			seedUnrelated(t, r)
			r.say("console:a", "@engineer bullet points please, keep status updates short")
			mems := r.memories("engineer")
			if len(mems) != 2 || mems[1].Text != preference || mems[1].Source != core.MemorySourceTool || mems[1].Run == 0 {
				t.Fatalf("memories after thread A = %+v", mems)
			}
			if emb && (mems[1].EmbeddingModel != "default/embed-m" || len(mems[1].Embedding) != openaitest.EmbeddingDims) {
				t.Errorf("the new memory was not embedded on write: %q %d", mems[1].EmbeddingModel, len(mems[1].Embedding))
			}
			if !emb && len(srv.EmbeddingRequests()) != 0 {
				t.Errorf("lexical ranking called the embeddings endpoint %d times", len(srv.EmbeddingRequests()))
			}
			r.say("console:b", "@engineer write the status update")
			checkLearned(t, srv)
			tools := chatRequests(srv, "write the status update")[0].ToolNames()
			if !contains(tools, agents.ManageMemoryName) || !contains(tools, agents.SearchMemoryName) {
				t.Errorf("memory tools missing: %v", tools)
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestMemoryLearnedByReflectionReachesOtherThread: reflection after thread A's
// run inserts the preference; thread B's run has it in the prompt; the
// reflection call is in the usage ledger under the bot.
func TestMemoryLearnedByReflectionReachesOtherThread(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isReflection(r) {
			if !strings.Contains(r.Body.Messages[1].Content, "bullet points please") {
				return openaitest.Text(`{"operations": []}`)
			}
			return openaitest.Reply{Text: "```json\n{\"operations\": [{\"op\": \"insert\", \"text\": \"" + preference + "\"}]}\n```",
				Usage: openaitest.Usage{PromptTokens: 1000, CompletionTokens: 100}}
		}
		return openaitest.Text("noted")
	})
	r := newMemRig(t, srv, "", true, memBot)
	seedUnrelated(t, r)
	r.say("console:a", "@engineer bullet points please, keep status updates short")
	if n := len(r.pending()); n != 1 {
		t.Fatalf("pending reflections after a run = %d, want 1", n)
	}
	r.reflect()
	if n := len(r.pending()); n != 0 {
		t.Errorf("pending reflections after reflecting = %d, want 0", n)
	}
	mems := r.memories("engineer")
	if len(mems) != 2 || mems[1].Text != preference || mems[1].Source != core.MemorySourceReflection || mems[1].Run == 0 {
		t.Fatalf("memories after reflection = %+v", mems)
	}
	r.say("console:b", "@engineer write the status update")
	checkLearned(t, srv)

	// Reflection usage counts toward the bot (cost control).
	var entries []core.UsageEntry
	_ = r.st.View(context.Background(), func(tx core.ReadTx) error {
		entries, _ = tx.UsageEntries(0, 0)
		return nil
	})
	found := false
	for _, e := range entries {
		if strings.HasPrefix(e.Key, "reflection:engineer:") {
			found = true
			if e.Bot != "engineer" || e.InputTokens != 1000 || e.OutputTokens != 100 || e.CostMicros != 1200 || e.Run != mems[1].Run {
				t.Errorf("reflection ledger entry = %+v", e)
			}
		}
	}
	if !found {
		t.Errorf("no reflection entry in the ledger: %+v", entries)
	}
}

// TestReflectionBatchesPerThread: two threads finishing within the delay make
// two reflection calls, each seeing only its thread; a burst of runs in one
// thread reflects once; nothing is reflected before the delay.
func TestReflectionBatchesPerThread(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isReflection(r) {
			return openaitest.Text(`{"operations": []}`)
		}
		return openaitest.Text("done: " + openaitest.LastUserText(r))
	})
	r := newMemRig(t, srv, "", false, memBot)
	r.say("console:a", "@engineer alpha one")
	r.say("console:a", "@engineer alpha two")
	r.say("console:a", "@engineer alpha three")
	r.say("console:b", "@engineer beta one")
	if _, err := r.refl.ReflectDue(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if n := len(reflections(srv)); n != 0 {
		t.Fatalf("%d reflections before the delay passed, want 0", n)
	}
	r.reflect()
	refl := reflections(srv)
	if len(refl) != 2 {
		t.Fatalf("reflection calls = %d, want 2 (one per thread)", len(refl))
	}
	var a, b string
	for _, q := range refl {
		if strings.Contains(q.Body.Messages[1].Content, "alpha") {
			a = q.Body.Messages[1].Content
		} else {
			b = q.Body.Messages[1].Content
		}
	}
	for _, w := range []string{"alpha one", "alpha two", "alpha three"} {
		if !strings.Contains(a, w) {
			t.Errorf("thread A's reflection lacks %q", w)
		}
	}
	if strings.Contains(a, "beta") || strings.Contains(b, "alpha") || !strings.Contains(b, "beta one") {
		t.Errorf("a reflection saw another thread:\nA: %s\nB: %s", a, b)
	}
	r.reflect()
	if n := len(reflections(srv)); n != 2 {
		t.Errorf("reflection calls after a second pass = %d, want still 2", n)
	}
}

// TestReflectionUpdatesAndDeletes: reflection may update and delete memories
// (seed G6 item 4); the activity log shows each change with its run; an id
// of another bot is not touched.
func TestReflectionUpdatesAndDeletes(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isReflection(r) {
			sys := r.Body.Messages[0].Content
			if !strings.Contains(sys, "#1: The team uses merge commits") {
				return openaitest.Text(`{"operations": []}`)
			}
			return openaitest.Text(`{"operations": [{"op": "update", "id": 1, "text": "The team uses squash merges."}, {"op": "delete", "id": 2}, {"op": "delete", "id": 3}]}`)
		}
		return openaitest.Text("merged with squash as asked")
	})
	r := newMemRig(t, srv, "", false, memBot, core.BotProfile{Handle: "qa", Memory: true})
	ctx := context.Background()
	op := agents.MemoryChange{Bot: "engineer", Source: core.MemorySourceOperator}
	if _, err := r.mem.Apply(ctx, op, []agents.MemoryOp{{Op: "insert", Text: "The team uses merge commits when merging."}, {Op: "insert", Text: "Merging needs two approvals."}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.mem.Apply(ctx, agents.MemoryChange{Bot: "qa", Source: core.MemorySourceOperator}, []agents.MemoryOp{{Op: "insert", Text: "qa's own note about merging"}}); err != nil {
		t.Fatal(err)
	}
	r.say("console:a", "@engineer merge it, we squash merges here now")
	r.reflect()
	mems := r.memories("engineer")
	if len(mems) != 1 || mems[0].ID != 1 || mems[0].Text != "The team uses squash merges." || mems[0].Source != core.MemorySourceReflection || mems[0].Run == 0 {
		t.Fatalf("engineer's memories = %+v, want #1 updated by reflection and #2 deleted", mems)
	}
	if q := r.memories("qa"); len(q) != 1 {
		t.Errorf("qa's memory was touched by engineer's reflection: %+v", q)
	}
	var acts []core.Activity
	_ = r.st.View(ctx, func(tx core.ReadTx) error { acts, _ = tx.Activities(0, 0); return nil })
	seen := map[string]bool{}
	for _, a := range acts {
		if strings.HasPrefix(a.Event, "memory.") && a.Run == mems[0].Run {
			seen[a.Event] = true
			if !strings.Contains(a.Summary, "by reflection in run") {
				t.Errorf("audit line %q does not name the run", a.Summary)
			}
		}
	}
	if !seen["memory.updated"] || !seen["memory.deleted"] {
		t.Errorf("audit trail of the run = %v, want memory.updated and memory.deleted", seen)
	}
}

// TestReflectionSurvivesRestart: a batch pending when the process stops is
// reflected exactly once after the next start (seed G7).
func TestReflectionSurvivesRestart(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply {
		if isReflection(r) {
			return openaitest.Text(`{"operations": [{"op": "insert", "text": "` + preference + `"}]}`)
		}
		return openaitest.Text("ok")
	})
	r := newMemRig(t, srv, "", false, memBot)
	r.say("console:a", "@engineer bullet points please")
	r.stop() // the reflector never ran: the batch is only in the file
	if n := len(reflections(srv)); n != 0 {
		t.Fatalf("reflected before the restart: %d", n)
	}
	r2 := newMemRig(t, srv, r.path, false, memBot)
	if n := len(r2.pending()); n != 1 {
		t.Fatalf("pending after restart = %d, want 1", n)
	}
	r2.reflect()
	r2.reflect()
	if n := len(reflections(srv)); n != 1 {
		t.Errorf("reflection calls after restart = %d, want exactly 1", n)
	}
	if m := r2.memories("engineer"); len(m) != 1 || m[0].Text != preference {
		t.Errorf("memories after restart = %+v", m)
	}
}

// TestMemoryOffBot: a bot with memory off gets no memory tools, no memories in
// its prompt and no reflection.
func TestMemoryOffBot(t *testing.T) {
	srv := openaitest.New(t)
	srv.Handle(func(r openaitest.Request) openaitest.Reply { return openaitest.Text("ok") })
	off := core.BotProfile{Handle: "engineer", Name: "Engineer"}
	r := newMemRig(t, srv, "", false, off)
	seedUnrelated(t, r)
	r.say("console:a", "@engineer when are deploy windows")
	req := chatRequests(srv, "deploy windows")[0]
	if tools := req.ToolNames(); contains(tools, agents.ManageMemoryName) || contains(tools, agents.SearchMemoryName) {
		t.Errorf("memory tools offered to a bot with memory off: %v", tools)
	}
	if strings.Contains(promptText(req), unrelated) {
		t.Error("memories in the prompt of a bot with memory off")
	}
	if n := len(r.pending()); n != 0 {
		t.Errorf("pending reflections of a bot with memory off = %d", n)
	}
}
