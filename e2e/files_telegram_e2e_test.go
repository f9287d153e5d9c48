package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"openbot/adapters/telegram"
	"openbot/adapters/telegram/telegramtest"
	"openbot/core"
)

// fileAgent records the trigger texts of every run; a trigger containing
// "send the report" makes it post sendPath with the send_file capability.
type fileAgent struct {
	mu       sync.Mutex
	triggers []string
	sendPath string
}

func (f *fileAgent) Execute(ctx context.Context, job *core.Job) (core.Result, error) {
	var texts []string
	for _, m := range job.Triggers {
		texts = append(texts, m.Text)
	}
	text := strings.Join(texts, "\n")
	f.mu.Lock()
	f.triggers = append(f.triggers, text)
	f.mu.Unlock()
	if strings.Contains(text, "send the report") {
		if _, err := job.Env.(core.FilePoster).PostFile(ctx, f.sendPath, "here it is"); err != nil {
			return core.Result{}, err
		}
	}
	return core.Result{Reply: "got it"}, nil
}

func (f *fileAgent) runs() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.triggers...)
}

// fileRig is an engine with inbound files saved under dir (thread-<id>), a
// 1 KiB per-file cap, and a fileAgent; its log goes to logs.
type fileRig struct {
	*proc
	agent *fileAgent
	dir   string
	logs  *syncBuffer
	// Set by the start functions' options before anything runs: hc is the
	// adapters' HTTP client (nil: their default); beforeDir runs each time
	// the engine asks for a thread's directory.
	hc        *http.Client
	beforeDir func(core.ThreadID)
}

func newFileRig(t *testing.T) *fileRig {
	t.Helper()
	r := &fileRig{dir: t.TempDir(), agent: &fileAgent{}, logs: &syncBuffer{}}
	r.agent.sendPath = filepath.Join(r.dir, "report.txt")
	if err := os.WriteFile(r.agent.sendPath, []byte("the report body"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.proc = openProc(t, "", core.Options{Agent: r.agent, Logger: slog.New(slog.NewTextHandler(r.logs, nil)),
		Files: core.FileLimits{Dir: r.threadDir, MaxFileBytes: 1024, Backoff: time.Millisecond}})
	return r
}

// threadDir is the engine's FileLimits.Dir: threadPath, after beforeDir.
func (r *fileRig) threadDir(id core.ThreadID) string {
	if r.beforeDir != nil {
		r.beforeDir(id)
	}
	return r.threadPath(id)
}

// threadPath is the directory of thread id's files.
func (r *fileRig) threadPath(id core.ThreadID) string {
	return filepath.Join(r.dir, "thread-"+strconv.FormatUint(uint64(id), 10))
}

// checkSaved asserts a run saw lines for the image, the document and the
// oversized file, and that exactly the first two are in the thread's inbox.
func (r *fileRig) checkSaved(t *testing.T, image, doc, big string) {
	t.Helper()
	runs := r.agent.runs()
	if len(runs) != 1 {
		t.Fatalf("want one run for the file-only message, got %d: %q", len(runs), runs)
	}
	text := runs[0]
	for _, want := range []string{image + " (image/", "saved at inbox/", doc + " (", big + " (", "not saved: too large"} {
		if !strings.Contains(text, want) {
			t.Errorf("trigger lacks %q:\n%s", want, text)
		}
	}
	var found []string
	_ = filepath.WalkDir(r.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, string(filepath.Separator)+"inbox"+string(filepath.Separator)) {
			found = append(found, filepath.Base(p))
		}
		return nil
	})
	if len(found) != 2 || !strings.Contains(strings.Join(found, " "), image) || !strings.Contains(strings.Join(found, " "), doc) {
		t.Errorf("inbox files = %v, want %s and %s", found, image, doc)
	}
}

// startTelegramFiles runs a fileRig, adjusted by opts, with a Telegram bot
// on a fake Bot API.
func startTelegramFiles(t *testing.T, opts ...func(*fileRig)) (*fileRig, *telegramtest.Server) {
	t.Helper()
	r := newFileRig(t)
	for _, o := range opts {
		o(r)
	}
	fake := telegramtest.NewServer(telegramtest.Bot{Token: "tok-cos", ID: 900, Username: "chief_of_staff_bot"})
	t.Cleanup(fake.Close)
	ad, err := telegram.New(telegram.Options{Name: "cos", Bot: "chief_of_staff", Token: "tok-cos", APIEndpoint: fake.URL(),
		DMPolicy: "open", Bots: e2eTeam, Engine: r.eng, Cursors: telegram.StoreCursors(r.st), HTTPClient: r.hc})
	if err != nil {
		t.Fatal(err)
	}
	r.run(ad)
	return r, fake
}

// TestTelegramFileOnlyDMSavesFilesAndRuns: a DM with a photo (several sizes)
// and no caption, then a document and an oversized document, each without
// text: the files are downloaded after ingest into the thread's inbox, the
// oversized one is noted, and the message starts a run whose trigger names them.
func TestTelegramFileOnlyDMSavesFilesAndRuns(t *testing.T) {
	r, fake := startTelegramFiles(t)
	fake.AddFile("small", "tiny")
	fake.AddFile("large", strings.Repeat("p", 900))
	fake.AddFile("doc1", "log line 1\nlog line 2")
	upd := `{"update_id":1,"message":{"message_id":301,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"type":"private"},"date":1767225660,
"photo":[{"file_id":"small","file_unique_id":"s","width":90,"height":90,"file_size":4},{"file_id":"large","file_unique_id":"l","width":900,"height":900,"file_size":900}],
"document":{"file_id":"doc1","file_unique_id":"d","file_name":"../app.log","mime_type":"text/plain","file_size":21}}}`
	if _, err := fake.PushUpdate("tok-cos", []byte(upd)); err != nil {
		t.Fatal(err)
	}
	big := `{"update_id":2,"message":{"message_id":302,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"type":"private"},"date":1767225661,
"document":{"file_id":"huge","file_unique_id":"h","file_name":"dump.bin","mime_type":"application/octet-stream","file_size":5000000}}}`
	if _, err := fake.PushUpdate("tok-cos", []byte(big)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fake.WaitConfirmed(ctx, "tok-cos", 3); err != nil {
		t.Fatal(err)
	}
	r.idle()
	runs := r.agent.runs()
	all := strings.Join(runs, "\n")
	for _, want := range []string{"photo-301.jpg (image/jpeg, 900 B) saved at inbox/", "__app.log (text/plain, 21 B) saved at inbox/",
		"dump.bin (application/octet-stream, 4.8 MB) not saved: too large"} {
		if !strings.Contains(all, want) {
			t.Errorf("runs lack %q:\n%s", want, all)
		}
	}
	var saved []string
	_ = filepath.WalkDir(r.dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(p, "inbox") {
			b, _ := os.ReadFile(p)
			saved = append(saved, filepath.Base(p)+"="+string(b[:min(len(b), 4)]))
		}
		return nil
	})
	if strings.Join(saved, ",") != "__app.log=log ,photo-301.jpg=pppp" {
		t.Errorf("saved = %v", saved)
	}
	if len(fake.Calls("file")) != 2 {
		t.Errorf("want two file downloads (largest photo and the document), got %d", len(fake.Calls("file")))
	}
}

// TestTelegramSendFileOnceAfterRetryableFailure: the send_file capability posts
// the file with sendDocument into the DM, replying to the trigger, exactly once
// although the first attempt fails with a retryable 502.
func TestTelegramSendFileOnceAfterRetryableFailure(t *testing.T) {
	r, fake := startTelegramFiles(t)
	fake.Fail("sendDocument", telegramtest.Error{Code: 502, Description: "Bad Gateway"})
	upd := `{"update_id":1,"message":{"message_id":401,"from":{"id":100000001,"is_bot":false,"first_name":"Alice"},
"chat":{"id":100000001,"type":"private"},"date":1767225660,"text":"please send the report"}}`
	if _, err := fake.PushUpdate("tok-cos", []byte(upd)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := fake.WaitCalls(ctx, "sendDocument", 2); err != nil {
		t.Fatal(err)
	}
	r.idle()
	var files []telegramtest.Message
	for _, m := range fake.Messages("tok-cos") {
		if m.Method != "" {
			files = append(files, m)
		}
	}
	if len(files) != 1 || files[0].FileName != "report.txt" || files[0].File != "the report body" || files[0].Caption != "here it is" {
		t.Fatalf("posted files = %+v, want report.txt once", files)
	}
	calls := fake.Calls("sendDocument")
	if len(calls) != 2 || telegramtest.ParseReplyTo(calls[1]) != 401 {
		t.Errorf("sendDocument calls = %d, reply_to = %d", len(calls), telegramtest.ParseReplyTo(calls[len(calls)-1]))
	}
}
