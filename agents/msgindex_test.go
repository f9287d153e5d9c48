package agents_test

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"openbot/agents"
	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/core/storetest"
	"openbot/store/bolt"
)

// storeEnv is the RunEnv of one thread over a store; only the reads the
// history tools make are implemented.
type storeEnv struct {
	core.RunEnv
	st     core.Store
	thread core.ThreadID
}

func (e storeEnv) Messages(ctx context.Context, after core.MessageID, limit int) (out []core.Message, err error) {
	err = e.st.View(ctx, func(tx core.ReadTx) error {
		out, err = tx.Messages(e.thread, after, limit)
		return err
	})
	return out, err
}

// synonyms is a fake embedding with meaning beyond words: "release" and
// "shipped" are one word to it, so they are similar by cosine while sharing
// no letters a lexical ranker could match.
func synonyms(text string) []float32 {
	return openaitest.Embed(strings.NewReplacer("release", "shipped").Replace(strings.ToLower(text)))
}

func indexRig(t *testing.T) (*bolt.Store, *agents.MessageIndex, core.ThreadID, func(string) core.MessageID) {
	t.Helper()
	srv := openaitest.New(t)
	srv.SetEmbedding(synonyms)
	st := openStore(t, "")
	emb, err := newAgent(t, srv, agents.Options{}).Embedder("default", "e")
	if err != nil {
		t.Fatal(err)
	}
	ix, err := agents.NewMessageIndex(agents.MessageIndexOptions{Store: storetest.RerunFromEnv(st), Embedder: emb})
	if err != nil {
		t.Fatal(err)
	}
	var th core.Thread
	if err := st.Update(context.Background(), func(tx core.Tx) (err error) {
		th, err = tx.PutThread(core.Thread{Key: "t"})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	add := func(text string) core.MessageID {
		var m core.Message
		if err := st.Update(context.Background(), func(tx core.Tx) (err error) {
			m, err = tx.PutMessage(core.Message{Thread: th.ID, Sender: "u:alice", SenderName: "Alice", Text: text})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	return st, ix, th.ID, add
}

func recall(t *testing.T, tools []agents.Tool, st core.Store, thread core.ThreadID, query string) string {
	t.Helper()
	out, err := tools[1].Call(context.Background(), agents.ToolCall{Thread: thread, Env: storeEnv{st: st, thread: thread},
		Args: []byte(`{"query":"` + query + `"}`)})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecallMessagesSemantic: once the index has embedded the thread,
// recall_messages finds a message that means the query but shares no word with
// it; messages not embedded yet are still found lexically (seed §9).
func TestRecallMessagesSemantic(t *testing.T) {
	st, ix, thread, add := indexRig(t)
	shipped := add("we shipped the build on friday")
	add("lunch at noon")
	tools := ix.HistoryTools()
	if out := recall(t, tools, st, thread, "release"); !strings.Contains(out, "no messages match") {
		t.Fatalf("recall before indexing = %q, want no lexical match", out)
	}
	if n, err := ix.IndexPending(context.Background()); err != nil || n != 2 {
		t.Fatalf("IndexPending = %d, %v; want 2 messages", n, err)
	}
	if n, err := ix.IndexPending(context.Background()); err != nil || n != 0 {
		t.Fatalf("IndexPending again = %d, %v; want caught up", n, err)
	}
	notes := add("release notes drafted") // not embedded yet: the lexical fallback
	out := recall(t, tools, st, thread, "release")
	if !strings.Contains(out, "[#"+itoa(shipped)+" Alice]") || !strings.Contains(out, "[#"+itoa(notes)+" Alice]") || strings.Contains(out, "lunch") {
		t.Errorf("recall = %q, want the shipped message (by meaning) and the notes (lexically), not lunch", out)
	}
	// Without an index the same thread is ranked lexically only.
	if out := recall(t, agents.HistoryTools(), st, thread, "release"); strings.Contains(out, "shipped") || !strings.Contains(out, "notes") {
		t.Errorf("lexical recall = %q, want the notes only", out)
	}
}

// TestMessageIndexRun: Run indexes in the background at its start and on each
// wake, and returns when its ctx ends.
func TestMessageIndexRun(t *testing.T) {
	st, _, thread, add := indexRig(t)
	add("we shipped the build")
	srv := openaitest.New(t)
	emb, _ := newAgent(t, srv, agents.Options{}).Embedder("default", "e")
	waits := make(chan struct{})
	commit := make(chan struct{})
	ix, err := agents.NewMessageIndex(agents.MessageIndexOptions{Store: storetest.RerunFromEnv(st), Embedder: emb,
		Wake: func() <-chan struct{} { waits <- struct{}{}; return commit }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- ix.Run(ctx) }()
	<-waits // first round starts
	add("second message")
	close(commit) // a commit wakes it
	<-waits       // the first round has finished
	<-waits       // and the woken one
	vecs := storetest.Read(t, st, func(tx core.ReadTx) ([]core.MessageVector, error) { return tx.MessageVectors(thread) })
	if len(vecs) != 2 || vecs[0].Model != emb.Name() {
		t.Errorf("vectors after Run = %+v, want both messages under %s", vecs, emb.Name())
	}
	cancel()
	go func() {
		for range waits {
		}
	}()
	if err := <-done; err != nil {
		t.Errorf("Run = %v", err)
	}
	close(waits) // Run has returned: nobody sends any more
}

// TestMessageIndexOffIngestPath: messages are embedded only by the message
// index, never on the ingest path: no package but agents' message index
// stores a message vector, and core (which ingests) never embeds.
func TestMessageIndexOffIngestPath(t *testing.T) {
	root := ".."
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		rel := filepath.ToSlash(path)
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			switch {
			case sel.Sel.Name == "PutMessageVector" && !strings.HasSuffix(rel, "agents/msgindex.go") &&
				!strings.Contains(rel, "store/") && !strings.Contains(rel, "core/storetest/"):
				t.Errorf("%s stores a message vector; only the background message index may", rel)
			case (sel.Sel.Name == "Embed" || sel.Sel.Name == "IndexPending") && strings.HasPrefix(rel, "../core/"):
				t.Errorf("%s embeds on the ingest path", rel)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func itoa(id core.MessageID) string { return strconv.FormatUint(uint64(id), 10) }
