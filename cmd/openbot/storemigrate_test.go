package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"openbot/agents/openaitest"
	"openbot/core"
	"openbot/store/bolt"
	"openbot/store/postgres"
	"openbot/store/postgres/pgtest"
)

// TestMain shares one throwaway PostgreSQL cluster among the package's tests;
// it starts only when a test asks for it (pgtest.DSN).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// fillEveryKind writes at least one record of every kind the store holds, and
// overwrites some, so statuses, indexes and counters all differ from fresh.
func fillEveryKind(t *testing.T, st core.Store) {
	t.Helper()
	at := time.Date(2026, 9, 16, 12, 0, 0, 0, time.UTC)
	err := st.Update(context.Background(), func(tx core.Tx) error {
		must := func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		}
		must(tx.PutActor(core.Actor{ID: "slack:T1:U1", Kind: core.ActorHuman, Name: "Ann"}))
		must(tx.PutBot(core.BotProfile{Handle: "eng", Tools: []string{"shell"}}))
		var th core.Thread
		for i := range 3 {
			var err error
			th, err = tx.PutThread(core.Thread{Key: "k", Participants: []core.ActorID{"slack:T1:U1"}, Created: at})
			must(err)
			must(tx.BindThreadKey("slack:T1:C1:"+string(rune('a'+i)), th.ID))
		}
		m, err := tx.PutMessage(core.Message{Thread: th.ID, Sender: "slack:T1:U1", Text: "hello", Created: at})
		must(err)
		must(tx.MarkSeen("slack:T1:ev1", m.ID))
		for _, s := range []core.ItemStatus{core.ItemQueued, core.ItemProcessing, core.ItemDone} {
			_, err := tx.PutItem(core.InboxItem{Actor: "bot:eng", Thread: th.ID, Kind: core.ItemMessage, Message: m.ID, Status: s, Created: at})
			must(err)
		}
		r, err := tx.PutRun(core.Run{Bot: "bot:eng", Thread: th.ID, Status: core.RunWaitingHuman, Checkpoint: json.RawMessage(`{"k":1}`), Created: at})
		must(err)
		for range 2 {
			_, err := tx.AppendRunEvent(core.RunEvent{Run: r.ID, Type: "text", Payload: json.RawMessage(`{"t":"x"}`)})
			must(err)
		}
		_, err = tx.PutOutbox(core.OutboxEntry{Account: "slack/main", Conversation: "C1", Thread: th.ID, Message: m.ID, Status: core.OutboxPending})
		must(err)
		_, err = tx.PutOutbox(core.OutboxEntry{Account: "slack/main", Conversation: "C1", Thread: th.ID, Message: m.ID, Status: core.OutboxDelivered})
		must(err)
		must(tx.PutTodo("bot:eng", th.ID, []core.TodoItem{{Text: "x", Status: "pending"}}))
		must(tx.AppendActivity(core.Activity{Event: "run.start", Thread: th.ID}))
		must(tx.SetCursor("telegram:main", "42"))
		_, err = tx.PutQuestion(core.Question{Token: "tok1", Run: r.ID, Thread: th.ID, Bot: "eng", Status: core.QuestionPending})
		must(err)
		_, _, err = tx.PutUsage(core.UsageEntry{Key: "1/1", Bot: "eng", Thread: th.ID, Run: r.ID, Model: "m", InputTokens: 10, OutputTokens: 5, At: at})
		must(err)
		_, err = tx.PutMemory(core.Memory{Bot: "eng", Text: "squash merges", Created: at, Updated: at, Source: core.MemorySourceTool, Run: r.ID})
		must(err)
		_, err = tx.PutPendingReflection(core.PendingReflection{Bot: "eng", Thread: th.ID, Run: r.ID, At: at, Reply: "done"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot reads everything a store holds through core.ReadTx.
func snapshot(t *testing.T, st core.Store) map[string]any {
	t.Helper()
	out := map[string]any{}
	err := st.View(context.Background(), func(tx core.ReadTx) error {
		put := func(name string, v any, err error) {
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = v
		}
		a, err := tx.Actor("slack:T1:U1")
		put("actor", a, err)
		b, err := tx.Bots()
		put("bots", b, err)
		th, err := tx.Threads(0)
		put("threads", th, err)
		for _, k := range []string{"a", "b", "c"} {
			id, err := tx.ThreadByKey("slack:T1:C1:" + k)
			put("key "+k, id, err)
		}
		ms, err := tx.MessagesSince(0, 0)
		put("messages", ms, err)
		for _, s := range []core.ItemStatus{core.ItemQueued, core.ItemProcessing, core.ItemDone} {
			its, err := tx.ItemsByStatus(s)
			put("items "+string(s), its, err)
		}
		n, err := tx.CountQueued()
		put("queued", n, err)
		rs, err := tx.RunsBefore(0, 0)
		put("runs", rs, err)
		w, err := tx.RunsByStatus(core.RunWaitingHuman)
		put("waiting", w, err)
		ev, err := tx.RunEventsSince(0, 0)
		put("events", ev, err)
		p, err := tx.PendingOutbox(0, 0)
		put("pending", p, err)
		mem, err := tx.Memories("eng")
		put("memories", mem, err)
		refl, err := tx.PendingReflections()
		put("reflections", refl, err)
		o, err := tx.Outbox(2)
		put("outbox 2", o, err)
		seen, err := tx.Seen("slack:T1:ev1")
		put("seen", seen, err)
		todo, err := tx.Todo("bot:eng", 3)
		put("todo", todo, err)
		act, err := tx.Activities(0, 0)
		put("activity", act, err)
		c, err := tx.Cursor("telegram:main")
		put("cursor", c, err)
		q, err := tx.Questions(true, 0)
		put("questions", q, err)
		qt, err := tx.QuestionByToken("tok1")
		put("question token", qt, err)
		u, err := tx.UsageEntries(0, 0)
		put("usage", u, err)
		ut, err := tx.UsageTotal("bot:eng")
		put("usage total", ut, err)
		h, err := tx.Heads()
		put("heads", h, err)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// `openbot store migrate` copies a bbolt store with every record kind into an
// empty PostgreSQL database, verifies the counts, and the copy reads back the
// same and keeps assigning IDs where the source stopped; a second migrate into
// the now non-empty database is refused and writes nothing.
func TestStoreMigrateBoltToPostgres(t *testing.T) {
	dsn := pgtest.DSN(t)
	path := filepath.Join(t.TempDir(), "openbot.db")
	src, err := bolt.Open(path, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fillEveryKind(t, src)
	want := snapshot(t, src)
	if err := src.Close(); err != nil {
		t.Fatal(err)
	}

	r := runFor(t, []string{"store", "migrate", "--from", "bolt:" + path, "--to", "postgres:" + dsn}, strings.NewReader(""), nil)
	if r.code != exitOK || !strings.Contains(r.stdout, "every count matches") {
		t.Fatalf("migrate: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, dsn) {
		t.Errorf("migrate printed the DSN")
	}

	dst, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	got := snapshot(t, dst)
	for k, w := range want {
		if !reflect.DeepEqual(got[k], w) {
			t.Errorf("%s after migrate:\n got %+v\nwant %+v", k, got[k], w)
		}
	}
	err = dst.Update(context.Background(), func(tx core.Tx) error {
		th, err := tx.PutThread(core.Thread{Key: "new"})
		if th.ID != 4 {
			t.Errorf("next thread ID on the copy = %d, want 4", th.ID)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}

	r = runFor(t, []string{"store", "migrate", "--from", "bolt:" + path, "--to", "postgres:" + dsn}, strings.NewReader(""), nil)
	if r.code != exitFail || !strings.Contains(r.stderr, "not empty") {
		t.Errorf("second migrate: exit %d, stderr %s; want a refusal", r.code, r.stderr)
	}
	if r := runFor(t, []string{"store", "migrate", "--from", path}, strings.NewReader(""), nil); r.code != exitUsage {
		t.Errorf("migrate without prefixes: exit %d, want usage", r.code)
	}
}

// The engine runs on PostgreSQL: a chat on bbolt, `store migrate`, then a chat
// with store.driver postgres on the copy, which answers and keeps the history.
func TestChatOnPostgresAfterMigrate(t *testing.T) {
	dsn := pgtest.DSN(t)
	llm := openaitest.New(t)
	llm.Enqueue(openaitest.Text("first answer"), openaitest.Text("second answer"))
	dir := t.TempDir()
	cfgPath := exampleConfig(t, dir)
	env := map[string]string{"OPENAI_BASE_URL": llm.URL(), "OPENAI_API_KEY": "sk-test", "DATABASE_URL": dsn}
	r := runFor(t, []string{"chat", "--config", cfgPath}, strings.NewReader("hello on bolt\n"), env)
	if r.code != 0 || !strings.Contains(r.stdout, "first answer") {
		t.Fatalf("chat on bolt: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	boltPath := filepath.Join(dir, "data", "openbot.db")
	if !strings.HasPrefix(dsn, "postgres://") {
		t.Fatalf("pgtest's DSN %q is not a postgres:// URL", dsn)
	}
	// A bare URL, as $DATABASE_URL holds it, without the postgres: prefix.
	r = runFor(t, []string{"store", "migrate", "--from", "bolt:" + boltPath, "--to", dsn}, strings.NewReader(""), nil)
	if r.code != exitOK {
		t.Fatalf("migrate: exit %d\nstderr: %s", r.code, r.stderr)
	}
	if err := os.Rename(boltPath, boltPath+".moved"); err != nil { // the bolt file must not be what answers
		t.Fatal(err)
	}
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(data), "driver: bolt", "driver: postgres", 1)
	if text == string(data) {
		t.Fatal("config.example.yaml no longer contains store.driver: bolt")
	}
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	r = runFor(t, []string{"chat", "--config", cfgPath}, strings.NewReader("hello on postgres\n"), env)
	if r.code != 0 || !strings.Contains(r.stdout, "second answer") {
		t.Fatalf("chat on postgres: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	// The CLI reads the database directly, no running server needed.
	r = runFor(t, []string{"threads", "--config", cfgPath}, strings.NewReader(""), env)
	if r.code != exitOK {
		t.Errorf("threads on postgres: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	r = runFor(t, []string{"approvals", "list", "--config", cfgPath}, strings.NewReader(""), env)
	if r.code != exitOK {
		t.Errorf("approvals on postgres: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var texts []string
	err = st.View(context.Background(), func(tx core.ReadTx) error {
		ms, err := tx.MessagesSince(0, 0)
		for _, m := range ms {
			texts = append(texts, m.Text)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(texts, "|")
	for _, want := range []string{"hello on bolt", "first answer", "hello on postgres", "second answer"} {
		if !strings.Contains(all, want) {
			t.Errorf("messages in PostgreSQL %q lack %q", all, want)
		}
	}
}
