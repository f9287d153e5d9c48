package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/core"
	"openbot/internal/runtest"
)

// fakeEngine records every Inbound and assigns thread ids the way core does for the
// console: one thread per key, a new one on NewThread, Thread targets directly.
type fakeEngine struct {
	mu      sync.Mutex
	got     []core.Inbound
	byKey   map[string]core.ThreadID
	next    core.ThreadID
	threads []core.Thread
	failOn  string
	pending []core.Question
	decided []core.Question
	answers []core.Answer
}

func (f *fakeEngine) Answer(ctx context.Context, a core.Answer) (core.AnswerResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers = append(f.answers, a)
	return core.AnswerResult{Outcome: core.AnswerAccepted}, nil
}

func (f *fakeEngine) Questions(ctx context.Context, pendingOnly bool) ([]core.Question, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pendingOnly {
		return append([]core.Question(nil), f.pending...), nil
	}
	return append(append([]core.Question(nil), f.decided...), f.pending...), nil
}

func (f *fakeEngine) Ingest(ctx context.Context, in core.Inbound) (core.IngestResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failOn != "" && in.Text == f.failOn {
		return core.IngestResult{}, errors.New("disk full")
	}
	f.got = append(f.got, in)
	if f.byKey == nil {
		f.byKey = map[string]core.ThreadID{}
	}
	id := f.byKey[in.ThreadKey]
	switch {
	case in.Thread != 0:
		id = in.Thread
	case id == 0 || in.NewThread:
		f.next++
		id = f.next
	}
	f.byKey[in.ThreadKey] = id
	return core.IngestResult{Thread: id, Message: core.MessageID(len(f.got))}, nil
}

func (f *fakeEngine) ThreadByKey(ctx context.Context, key string) (core.ThreadID, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byKey[key], nil
}

func (f *fakeEngine) Threads(ctx context.Context, limit int) ([]core.Thread, error) {
	return f.threads, nil
}

func (f *fakeEngine) inbounds() []core.Inbound {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]core.Inbound(nil), f.got...)
}

// syncBuffer is a buffer safe for the concurrent writes Deliver may do.
type syncBuffer = runtest.Buffer

func newAdapter(t *testing.T, eng Engine, input string, out io.Writer) *Adapter {
	t.Helper()
	a, err := New(Options{Name: "dev", Engine: eng, In: strings.NewReader(input), Out: out,
		Now: func() time.Time { return time.Unix(100, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestRunIngestsLinesUntilEOF(t *testing.T) {
	eng := &fakeEngine{}
	var out syncBuffer
	a := newAdapter(t, eng, "hello\n\n  @engineer fix it  \n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatalf("Run = %v, want nil at EOF", err)
	}
	got := eng.inbounds()
	if len(got) != 2 {
		t.Fatalf("ingested %d messages, want 2 (blank lines skipped)", len(got))
	}
	in := got[0]
	want := core.Inbound{
		Account: "console/dev", Platform: "console", DedupKey: in.DedupKey, ThreadKey: "console:dev",
		Conversation: "main", PlatformID: in.PlatformID, SenderID: "console:you", SenderName: "you",
		Text: "hello", StartThread: true, Received: time.Unix(100, 0),
	}
	if fmt.Sprint(in) != fmt.Sprint(want) {
		t.Errorf("inbound =\n%+v\nwant\n%+v", in, want)
	}
	if !strings.HasPrefix(in.DedupKey, "console:") || in.DedupKey == got[1].DedupKey {
		t.Errorf("dedup keys %q, %q: want distinct console:<ulid>", in.DedupKey, got[1].DedupKey)
	}
	if got[1].Text != "@engineer fix it" {
		t.Errorf("second text = %q", got[1].Text)
	}
	if out.String() != "" {
		t.Errorf("non-interactive run printed %q", out.String())
	}
}

// TestGreetingNamesLog: an interactive console greets with its commands and,
// when given, where the log is (notices point there for details), and names
// the thread a restart continues.
func TestGreetingNamesLog(t *testing.T) {
	var out syncBuffer
	a, err := New(Options{Name: "dev", Engine: &fakeEngine{}, In: strings.NewReader(""), Out: &out,
		Interactive: true, LogPath: "data/openbot.log"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "/help for commands; the log is in data/openbot.log") || strings.Contains(got, "messages go to") {
		t.Errorf("greeting = %q (no thread yet: no thread named)", got)
	}

	// After a restart with a thread to continue, the greeting says which.
	eng := &fakeEngine{byKey: map[string]core.ThreadID{"console:dev": 4}}
	out = syncBuffer{}
	a, err = New(Options{Name: "dev", Engine: eng, In: strings.NewReader(""), Out: &out, Interactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "[system] messages go to thread #4, the last one here") {
		t.Errorf("greeting after a restart = %q", got)
	}
}

func TestNewAndSwitch(t *testing.T) {
	eng := &fakeEngine{threads: []core.Thread{{ID: 7}}}
	a := newAdapter(t, eng, "one\n/new\ntwo\nthree\n/switch 7\nfour\nfive\n/new\nsix\n/switch x\n", io.Discard)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	type flags struct {
		text   string
		fresh  bool
		thread core.ThreadID
	}
	want := []flags{{"one", false, 0}, {"two", true, 0}, {"three", false, 0}, {"four", false, 7}, {"five", false, 7}, {"six", true, 0}}
	got := eng.inbounds()
	if len(got) != len(want) {
		t.Fatalf("got %d messages, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := flags{got[i].Text, got[i].NewThread, got[i].Thread}
		if g != w {
			t.Errorf("message %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestQuitStopsReading(t *testing.T) {
	eng := &fakeEngine{}
	a := newAdapter(t, eng, "a\n/quit\nb\n", io.Discard)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := eng.inbounds(); len(got) != 1 || got[0].Text != "a" {
		t.Errorf("ingested %+v, want only %q", got, "a")
	}
}

func TestCommandsPrint(t *testing.T) {
	eng := &fakeEngine{threads: []core.Thread{
		{ID: 3, Title: "deploy the thing\nwith details", Bindings: []core.Binding{{Platform: "console", Conversation: "main", Accounts: []core.AccountID{"console/dev"}}}},
		{ID: 2, Title: "slack thread", Bindings: []core.Binding{{Platform: "slack", Accounts: []core.AccountID{"slack/acme"}}}},
		{ID: 1, Bindings: []core.Binding{{Platform: "console", Accounts: []core.AccountID{"console/dev"}}}},
	}}
	var out syncBuffer
	a := newAdapter(t, eng, "/help\n/switch 3\n/threads\n/bogus\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"/switch N", "following messages go to thread #3", " * #3  deploy the thing\n", "   #1  (untitled)", "unknown command /bogus"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "slack thread") || strings.Contains(s, "with details") {
		t.Errorf("output lists a non-console thread or a second title line:\n%s", s)
	}
}

func TestNoThreads(t *testing.T) {
	var out syncBuffer
	a := newAdapter(t, &fakeEngine{}, "/threads\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no threads yet") {
		t.Errorf("output = %q", out.String())
	}
}

func TestIngestErrorIsShownAndRunContinues(t *testing.T) {
	eng := &fakeEngine{failOn: "boom"}
	var out syncBuffer
	a := newAdapter(t, eng, "boom\nok\n", &out)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "[system] message not sent: disk full") {
		t.Errorf("output = %q", out.String())
	}
	if got := eng.inbounds(); len(got) != 1 || got[0].Text != "ok" {
		t.Errorf("ingested %+v", got)
	}
}

func TestRunReturnsOnCancel(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	a, err := New(Options{Engine: &fakeEngine{}, In: pr, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- a.Run(ctx) }()
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Run = %v, want nil on cancel", err)
	}
}

func TestReadErrorIsReturned(t *testing.T) {
	pr, pw := io.Pipe()
	pw.CloseWithError(errors.New("tty gone"))
	a, err := New(Options{Engine: &fakeEngine{}, In: pr, Out: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "tty gone") {
		t.Errorf("Run = %v, want the read error", err)
	}
}

func TestDeliverFormats(t *testing.T) {
	eng := &fakeEngine{}
	var out syncBuffer
	a := newAdapter(t, eng, "hi\n", &out)
	if a.Account() != "console/dev" || a.Bot() != "*" {
		t.Fatalf("Account, Bot = %q, %q", a.Account(), a.Bot())
	}
	ctx := context.Background()
	// Before any message there is no current thread: no prefix.
	id1, err := a.Deliver(ctx, core.Delivery{Thread: 9, Sender: core.Sender{Actor: "bot:qa", Handle: "qa", Name: "QA"}, Text: "early"})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Run(ctx); err != nil { // thread 1 becomes current
		t.Fatal(err)
	}
	deliveries := []core.Delivery{
		{Thread: 1, Sender: core.Sender{Actor: "bot:chief_of_staff", Handle: "chief_of_staff", Name: "Chief"}, Text: "Hello!\nTwo lines.\n"},
		{Thread: 1, Sender: core.Sender{Actor: core.SystemActor, Name: "system"}, Kind: core.KindNotice, Text: "run failed: 500"},
		{Thread: 2, Sender: core.Sender{Actor: "bot:engineer", Handle: "engineer"}, Text: "elsewhere"},
		{Thread: 1, Sender: core.Sender{Actor: "slack:T:U", Name: "Alice"}, Text: "from slack"},
	}
	var ids []string
	ids = append(ids, id1)
	for _, d := range deliveries {
		id, err := a.Deliver(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	want := "[qa] early\n[chief_of_staff] Hello!\nTwo lines.\n[system] run failed: 500\n#2 [engineer] elsewhere\n[Alice] from slack\n"
	if out.String() != want {
		t.Errorf("output =\n%q\nwant\n%q", out.String(), want)
	}
	if strings.Join(ids, ",") != "console-1,console-2,console-3,console-4,console-5" {
		t.Errorf("platform ids = %v", ids)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestDeliverWriteError(t *testing.T) {
	a := newAdapter(t, &fakeEngine{}, "", failWriter{})
	if _, err := a.Deliver(context.Background(), core.Delivery{Text: "x"}); err == nil {
		t.Error("Deliver on a failing writer: no error")
	}
}

func TestDeliverConcurrentBlocksDoNotInterleave(t *testing.T) {
	var out syncBuffer
	a := newAdapter(t, &fakeEngine{}, "", &out)
	text := strings.Repeat("x", 1000) + "\n" + strings.Repeat("y", 1000)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := fmt.Sprintf("b%d", i)
			if _, err := a.Deliver(context.Background(), core.Delivery{Thread: 1, Sender: core.Sender{Actor: core.BotActorID(h), Handle: h}, Text: text}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 40 {
		t.Fatalf("got %d lines, want 40", len(lines))
	}
	for i := 0; i < len(lines); i += 2 {
		if !strings.HasPrefix(lines[i], "[b") || !strings.HasSuffix(lines[i], "x") || lines[i+1] != strings.Repeat("y", 1000) {
			t.Fatalf("block %d interleaved: %.30q / %.30q", i/2, lines[i], lines[i+1])
		}
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	if _, err := New(Options{In: strings.NewReader(""), Out: io.Discard}); err == nil {
		t.Error("New without Engine: no error")
	}
}
